"""Throughput of `estimate` (worst and ideal models) on a million random shapes.

Target (issue 2): 1,000,000 shapes in under 1 s on one core, in-process (the library call,
no file reading or writing: benchmarks/cli_throughput.py times those). Run from the repository
root (with f8roof importable: pip install -e . or PYTHONPATH=.):
    python benchmarks/estimate_throughput.py [--shapes 1000000] [--repeats 5] [--calibration F]
With a calibration it also times `ranges=True` (the fitted overhead's range over nearby kernel
sets, which the CLI and model tables add), beside the target, not in it.
"""

import argparse
import os
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says

import numpy as np

from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import Recipe

TARGET_SHAPES_PER_S = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--calibration", default=None, help="also the fitted columns, from this calibration file"
    )
    args = parser.parse_args()
    calibration = None
    if args.calibration:
        from f8roof.calibration.file import Calibration

        calibration = Calibration.load(args.calibration)
    shapes = np.random.default_rng(0).integers(1, 32768, size=(args.shapes, 3))
    slowest = float("inf")
    runs = [(name, False) for name in ("tensorwise", "rowwise")]
    if calibration is not None:
        runs += [(name, True) for name in ("tensorwise", "rowwise")]
    for name, ranges in runs:
        config = EstimateConfig(Recipe.from_name(name), find_gpu("h100"), calibration=calibration)
        estimate(shapes[:10], config, ranges=ranges)  # lambdify once, outside the timing
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            estimate(shapes, config, ranges=ranges)
            times.append(time.perf_counter() - start)
        best, median = min(times), float(np.median(times))
        label = name + (" +ranges" if ranges else "")
        print(
            f"{label:19} {args.shapes:,} shapes: median {median:.3f} s, best {best:.3f} s, "
            f"{args.shapes / median / 1e6:.2f} M shapes/s"
        )
        if not ranges:
            slowest = min(slowest, args.shapes / median)
    verdict = "meets" if slowest >= TARGET_SHAPES_PER_S else "MISSES"
    print(f"slowest recipe {slowest:,.0f} shapes/s {verdict} the target {TARGET_SHAPES_PER_S:,}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
