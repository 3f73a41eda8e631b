"""What `f8roof plan` costs: the search's wall time and layouts evaluated, in-process, one
search after the other (the calibration and model files read by the first are reused by the
rest, as in a session). Issue 57's done-when: every cell of the matrix (llama3 8B, 70B, 405B,
a Qwen3 dense and a Qwen3 MoE model on H100, H200, B200 and MI300X at 8, 64 and 512 GPUs)
answered within 30 s on one core, or refused in one line (a model that fits nowhere).

    PYTHONPATH=. taskset -c 0 python benchmarks/plan_search_cost.py            # three cases
    PYTHONPATH=. taskset -c 0 python benchmarks/plan_search_cost.py --matrix   # all 60 cells
    PYTHONPATH=. python benchmarks/plan_search_cost.py --only qwen3-30b-a3b:b200:64
"""

from __future__ import annotations

import argparse
import itertools
import time

from f8roof.engine.api import best_runs
from f8roof.engine.step.search import Arm
from f8roof.errors import F8RoofError

MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "qwen3-14b", "qwen3-30b-a3b")
GPUS = ("h100", "h200", "b200", "mi300x")
COUNTS = (8, 64, 512)
CASES = (("llama3-8b", "h100", 8), ("llama3-8b", "h100", 64), ("llama3-70b", "h100", 256))
TARGET_S = 30.0  # the bound per cell, one core


def cell(model: str, gpu: str, gpus: int, seq_len: int | None) -> str:
    """One search's line: wall time, layouts, both bests and the re-tuned speedup, or the
    search's one-line refusal."""
    start = time.perf_counter()
    try:
        found = best_runs(model, gpus, gpu=gpu, seq_len=seq_len)
    except F8RoofError as e:
        return f"{model:14} {gpu:6} {gpus:4} {time.perf_counter() - start:6.1f} s  refused: {e}"
    wall = time.perf_counter() - start
    best = [
        f"{found.best(arm).tokens_per_s(arm):8,.0f}" if found.fits(arm) else f"{'-':>8}"
        for arm in Arm
    ]
    retuned = found.retuned_speedup
    slow = "  OVER 30 s" if wall > TARGET_S else ""
    return (
        f"{model:14} {gpu:6} {gpus:4} {wall:6.1f} s {len(found.points):4} layouts "
        f"{len(found.refused):3} refused  bf16 {best[0]}  float8 {best[1]} tokens/s/GPU  "
        f"re-tuned {'-' if retuned is None else f'{retuned:.3f}x'}{slow}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--matrix", action="store_true", help="every model x GPU x count")
    parser.add_argument("--only", default=None, help="MODEL:GPU:COUNT, one cell")
    parser.add_argument("--seq-len", type=int, default=None)
    args = parser.parse_args()
    cases: tuple[tuple[str, str, int], ...] = CASES
    if args.matrix:
        cases = tuple(itertools.product(MODELS, GPUS, COUNTS))
    if args.only:
        model, gpu, gpus = args.only.split(":")
        cases = ((model, gpu, int(gpus)),)
    for model, gpu, gpus in cases:
        print(cell(model, gpu, gpus, args.seq_len), flush=True)


if __name__ == "__main__":
    main()
