"""What a sharded model answer from the shipped files costs: torchtitan#1207's question,
`estimate --model llama3-8b --tokens 8192 --tp 2 --fsdp 2 --recompute selective --recipe
rowwise --step-ms 762`, its blocks timed from the shipped sharded block file.

Prints the in-process time of the answer (first call: the calibration and the block file read;
then warm) and the CLI's wall time in a fresh process, imports included. Target (issue 18):
under a second for the answer.

Then the plain model answer, `estimate --gpu h100 --model llama3-8b --tokens 8192`, and a
shape in a fresh process with bytecode cached, imports and all, beside the interpreter alone
and `import pandas` for scale (target, issue 37: at most 0.5 s for each answer), and
which of sympy, scipy, torch, matplotlib and pandas each imports (none: they serve other
commands, the Python API and other files).

    PYTHONPATH=. python benchmarks/model_answer_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
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


PLAIN = ["estimate", "--gpu", "h100", "--model", "llama3-8b", "--tokens", "8192"]
SHAPE = ["estimate", "--gpu", "h100", "--shape", "4096,4096,4096"]
TARGET_FRESH_S = 0.5
# modules an estimate from a shipped calibration has no use for (compare, calibrate, codegen
# and the public fit need them; pandas the Python API's DataFrames, Parquet and JSON files)
HEAVY = ("sympy", "scipy", "torch", "matplotlib", "pandas")
# runs the CLI as `python -m f8roof` does, then names the heavy modules it imported
WHICH_HEAVY = (
    "import runpy, sys\n"
    "sys.argv = ['f8roof', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('f8roof', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print('heavy:', *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
)


def heavy_imported(args: list[str]) -> list[str]:
    """The heavy modules `f8roof ARGS` imports in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", WHICH_HEAVY, *args], check=True, capture_output=True, text=True
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("heavy:"))
    return line.split()[1:]


def fresh(repeat: int) -> dict[str, float]:
    """Median wall seconds in a fresh process, bytecode cached (one run first writes it): the
    plain model answer, a shape, and the interpreter alone and with `import pandas` beside
    them for scale; taking turns (a shared machine's load hits all alike)."""
    commands = {
        "model": [sys.executable, "-m", "f8roof", *PLAIN],
        "shape": [sys.executable, "-m", "f8roof", *SHAPE],
        "interpreter": [sys.executable, "-c", "pass"],
        "import pandas": [sys.executable, "-c", "import pandas"],
    }
    # bytecode written by the first run and read after (whatever PYTHONDONTWRITEBYTECODE says)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for command in commands.values():
        subprocess.run(command, check=True, capture_output=True, env=env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=env)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


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
    took = fresh(args.repeat)
    verdict = {k: "meets" if took[k] <= TARGET_FRESH_S else "MISSES" for k in ("model", "shape")}
    print(
        f"{' '.join(PLAIN)}: fresh process {took['model']:.2f} s, bytecode cached "
        f"({verdict['model']} the target {TARGET_FRESH_S} s); --shape {took['shape']:.2f} s "
        f"({verdict['shape']} it); the interpreter alone {took['interpreter']:.2f} s, with "
        f"`import pandas` {took['import pandas']:.2f} s (medians of {args.repeat})"
    )
    for command in (PLAIN, SHAPE):
        heavy = ", ".join(heavy_imported(command)) or "none of " + ", ".join(HEAVY)
        print(f"{' '.join(command)} imports {heavy}")


if __name__ == "__main__":
    main()
