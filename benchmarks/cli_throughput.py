"""Throughput of `f8roof estimate --shapes-file s.csv --out x.csv` beyond start-up, per stage.

Target (issue 12 item 4): 200,000 shapes to CSV through the CLI at >= 500,000 shapes/s beyond
start-up. Stages, each timed alone in this process (median of --repeats, after a warm-up):
reading the shapes file, the estimate, writing CSV, writing Parquet; then the whole command,
run in-process through click (standalone_mode=False), minus the same command on a one-shape
file (start-up: option handling, configuration, the breakeven lines; imports are already done).
With --subprocess the whole command is also run as `python -m f8roof`, minus a one-shape run
of the same command (interpreter, imports and all). Run:
    python benchmarks/cli_throughput.py [--shapes 200000] [--repeats 5] [--gpu h100]
        [--calibration FILE] [--subprocess]
(from the repository root, with f8roof importable: pip install -e . or PYTHONPATH=.)
"""

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from f8roof.cli import main as cli
from f8roof.engine.estimate import estimate
from f8roof.engine.resolve import Request, resolve
from f8roof.inputs.shapes import read_shapes_file
from f8roof.renderers.frames import write_csv, write_parquet
from f8roof.renderers.notes import provenance_line

TARGET_SHAPES_PER_S = 500_000


Seconds = tuple[float, float, float]  # wall median, wall best, CPU best (all threads)


def cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(*fns, repeats: int) -> list[Seconds]:
    """Seconds of each function over `repeats` rounds, after one untimed call each; the
    functions take turns, so a change of load on a shared machine hits them alike. The median
    wall time is what a user waits, the best the closer to what the code costs; the CPU time
    (every thread, and child processes) is less sensitive to whatever else runs."""
    times: list[list[tuple[float, float]]] = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeats):
        for fn, seconds in zip(fns, times):
            wall, cpu = time.perf_counter(), cpu_s()
            fn()
            seconds.append((time.perf_counter() - wall, cpu_s() - cpu))
    return [
        (float(np.median([w for w, _ in t])), min(w for w, _ in t), min(c for _, c in t))
        for t in times
    ]


def beyond(whole: Seconds, startup: Seconds) -> Seconds:
    return tuple(w - s for w, s in zip(whole, startup))  # type: ignore[return-value]


def run_cli(args: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        cli(args, standalone_mode=False)


def run_subprocess(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "f8roof", *args], check=True, capture_output=True)


def report(stage: str, n: int, seconds: Seconds) -> None:
    cells = [
        f"{what} {s * 1e3:6.0f} ms {n / s / 1e6:5.2f} M/s"
        for what, s in zip(("median", "best", "CPU"), seconds)
    ]
    print(f"  {stage:42} " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--calibration", default=None, help="estimate from this calibration")
    parser.add_argument("--subprocess", action="store_true", help="also time python -m f8roof")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="f8roof_bench_") as tmp:
        measure(args, Path(tmp))


def measure(args: argparse.Namespace, tmp: Path) -> None:
    n, repeats = args.shapes, args.repeats
    rng = np.random.default_rng(0)
    # a mix of aligned (multiples of 16) and arbitrary dims, as a real shapes file might hold
    shapes = rng.integers(1, 32768, size=(n, 3))
    shapes[: n // 2] = (shapes[: n // 2] // 16 + 1) * 16
    big, one = tmp / "shapes.csv", tmp / "one.csv"
    pd.DataFrame(shapes, columns=["M", "K", "N"]).to_csv(big, index=False)
    one.write_text("M,K,N\n4096,4096,4096\n")
    csv_out, parquet_out = tmp / "out.csv", tmp / "out.parquet"

    resolved = resolve(Request(gpu=args.gpu, calibration=args.calibration))
    config, source = resolved.config, provenance_line(resolved.provenance)
    print(f"{n:,} shapes, gpu {args.gpu}, using {source}; {os.cpu_count()} CPUs, {repeats} rounds")
    array = read_shapes_file(big)
    frame = estimate(array, config)
    read_s, estimate_s, csv_s, parquet_s = timed(
        lambda: read_shapes_file(big),
        lambda: estimate(array, config),
        lambda: write_csv(frame, csv_out),
        lambda: write_parquet(frame, parquet_out),
        repeats=repeats,
    )
    print("stages (library calls):")
    report("read shapes file", n, read_s)
    report("estimate", n, estimate_s)
    report(f"write CSV ({csv_out.stat().st_size / 2**20:.0f} MiB)", n, csv_s)
    report(f"write Parquet ({parquet_out.stat().st_size / 2**20:.0f} MiB)", n, parquet_s)
    total = tuple(float(a + b + c) for a, b, c in zip(read_s, estimate_s, csv_s))
    report("sum: read + estimate + write CSV", n, total)  # type: ignore[arg-type]

    print("whole command, in-process (click), beyond a one-shape run of it (start-up):")
    base = ["estimate", "--gpu", args.gpu]
    if args.calibration:
        base += ["--calibration", args.calibration]
    results = {}
    for name, out in (("CSV", csv_out), ("Parquet", parquet_out)):
        command = [*base, "--out", str(out), "--shapes-file"]
        startup, whole = timed(
            lambda c=command: run_cli([*c, str(one)]),
            lambda c=command: run_cli([*c, str(big)]),
            repeats=repeats,
        )
        results[name] = beyond(whole, startup)
        label = f"estimate --out .{name.lower()} (start-up {startup[0] * 1e3:.0f} ms)"
        report(label, n, results[name])
    if args.subprocess:
        print("whole command, python -m f8roof, beyond a one-shape run of it:")
        command = [*base, "--out", str(csv_out), "--shapes-file"]
        startup, whole = timed(
            lambda: run_subprocess([*command, str(one)]),
            lambda: run_subprocess([*command, str(big)]),
            repeats=3,
        )
        report(f"python -m f8roof, CSV (start-up {startup[0]:.2f} s)", n, beyond(whole, startup))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    for label, seconds in zip(("median", "best", "CPU"), results["CSV"]):
        rate = n / seconds
        verdict = "meets" if rate >= TARGET_SHAPES_PER_S else "MISSES"
        print(
            f"CSV through the CLI ({label}): {rate:,.0f} shapes/s {verdict} the target "
            f"{TARGET_SHAPES_PER_S:,}"
        )
    print(f"load average {load} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
