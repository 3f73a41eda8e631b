"""What `f8roof plan` costs: the search's wall time and layouts evaluated, in-process, for
llama3-8b on 8 and 64 H100s and llama3-70b on 256 H100s (issue 57's target: a 70B search over
256 H100s under 30 s on one core). Each search runs in this one process, one after the other:
the calibration and model files read by the first are reused by the rest, as in a session.

    PYTHONPATH=. python benchmarks/plan_search_cost.py [--only llama3-8b:8]
"""

from __future__ import annotations

import argparse
import time

from f8roof.engine.api import best_runs
from f8roof.engine.step.search import Arm

CASES = (("llama3-8b", 8), ("llama3-8b", 64), ("llama3-70b", 256))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default=None, help="MODEL:GPUS, one case (e.g. gpt2:2)")
    parser.add_argument("--seq-len", type=int, default=None)
    args = parser.parse_args()
    cases = CASES
    if args.only:
        model, _, gpus = args.only.partition(":")
        cases = ((model, int(gpus)),)
    for model, gpus in cases:
        start = time.perf_counter()
        found = best_runs(model, gpus, gpu="h100", seq_len=args.seq_len)
        wall = time.perf_counter() - start
        per = wall / max(1, len(found.points) + len(found.refused))
        print(
            f"{model} on {gpus} h100: {len(found.points)} layouts evaluated, "
            f"{len(found.refused)} refused, {wall:.1f} s ({per * 1e3:.0f} ms a layout); "
            f"re-tuned {found.retuned_speedup:.3f}x, best float8 "
            f"{found.best(Arm.FLOAT8).tokens_per_s(Arm.FLOAT8):,.0f} tokens/s per GPU"
        )


if __name__ == "__main__":
    main()
