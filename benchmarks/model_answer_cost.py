"""What a sharded model answer from the shipped files costs: torchtitan#1207's question,
`estimate --model llama3-8b --tokens 8192 --tp 2 --fsdp 2 --recompute selective --recipe
rowwise --step-ms 762`, its blocks timed from the shipped sharded block file.

Prints the in-process time of the answer (first call: the calibration and the block file read;
then warm) and the CLI's wall time in a fresh process, imports included. Target (issue 18):
under a second for the answer.

    PYTHONPATH=. python benchmarks/model_answer_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

ARGS = [
    "estimate",
    "--model",
    "llama3-8b",
    "--tokens",
    "8192",
    "--tp",
    "2",
    "--fsdp",
    "2",
    "--recompute",
    "selective",
    "--recipe",
    "rowwise",
    "--step-ms",
    "762",
]


def in_process(repeat: int) -> tuple[float, float]:
    from click.testing import CliRunner

    from f8roof.cli import main

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = CliRunner().invoke(main, ARGS)
        times.append(time.perf_counter() - start)
        if result.exit_code != 0:
            raise SystemExit(result.output)
    every = CliRunner().invoke(main, [*ARGS, "--show-all"])  # its notes say where blocks came from
    if "blocks from the shipped sharded block" not in every.output:
        raise SystemExit(f"the answer did not come from the shipped block:\n{every.output}")
    return times[0], statistics.median(times[1:] or times)


def fresh_process(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "f8roof", *ARGS], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    first, warm = in_process(args.repeat)
    wall = fresh_process(args.repeat)
    print(
        f"model answer from shipped files: first {first:.2f} s, warm {warm:.2f} s (median of "
        f"{args.repeat}); CLI in a fresh process {wall:.2f} s (median, imports included)"
    )


if __name__ == "__main__":
    main()
