"""Which TP collectives async TP hides, read off the compiled block at a real run's size.

Compiles one rank's block with Inductor's micro-pipeline pass on a fake process group (codegen
for h100, `profiler.block.pipelined_collectives`) and prints each all-gather and
reduce-scatter of its forward and backward graphs: fused with which gemms (M x K x N), or
left plain. Default: the async-TP benchmark's Llama3-8B setup (torchtitan's
benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md: TP 8, per-op SAC, local batch 12,
seq_len 8192) in bf16, rowwise and tensorwise. Full AC does not compile here yet (torch 2.13
checkpointing a sharded block). About 20 s per recipe on one CPU core.

    PYTHONPATH=. python scripts/async_tp_graphs.py [--model llama3-8b] [--tp 8] [--batch 12]
        [--recipes bf16,rowwise,tensorwise]
"""

from __future__ import annotations

import argparse

from f8roof.engine.sharded import block_spec
from f8roof.profiler.block import pipelined_collectives
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import RunConfig

SEQ_LEN = 8192
MB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama3-8b")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--recipes", default="bf16,rowwise,tensorwise")
    args = parser.parse_args()

    parallel = RunConfig.sharded(tp=args.tp, recompute=Recompute.SELECTIVE, async_tp=True)
    spec = block_spec(
        builtin(args.model), tokens=args.batch * SEQ_LEN, seq_len=SEQ_LEN, parallel=parallel
    )
    print(f"{args.model} TP {args.tp}, per-op SAC, {args.batch} x {SEQ_LEN} tokens per rank")
    for recipe in args.recipes.split(","):
        found = pipelined_collectives(spec, recipe=None if recipe == "bf16" else recipe)
        fused = sum(c.fused for c in found)
        print(f"\n{recipe}: {fused} of {len(found)} TP collectives fused with gemms")
        for c in found:
            gemms = ", ".join("x".join(map(str, g)) for g in c.gemms) or "plain"
            print(f"  {c.graph} {c.kind.name.lower():<14} {c.bytes / MB:8.0f} MiB  {gemms}")


if __name__ == "__main__":
    main()
