"""What one sharded block's codegen costs: llama3-8b, TP 2, 8192 tokens per rank, for h100.

Prints the wall time of `capture_block` (capture on CPU without computing, then Inductor's
CUDA codegen of forward and backward under a fake 2-rank process group) and this process's
peak resident memory. Target (issue 18): <= 60 s on the 2-core development machine.

    PYTHONPATH=. python benchmarks/block_codegen_cost.py [--recipe rowwise] [--tp 2]
"""

from __future__ import annotations

import argparse
import resource
import time

from f8roof.profiler.block import capture_block
from f8roof.training.block import BlockSpec, Recompute
from f8roof.training.run_config import RunConfig


def llama3_8b(*, tp: int, fsdp: int, recompute: Recompute, tokens: int) -> BlockSpec:
    # https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
    return BlockSpec(
        dim=4096,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_dim=14336,
        tokens=tokens,
        seq_len=min(tokens, 8192),
        parallel=RunConfig.sharded(tp=tp, fsdp=fsdp, recompute=recompute),
        name="llama3-8b",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="rowwise", help="tensorwise, rowwise, ... or bf16")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--fsdp", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--recompute", default="none", choices=[r.value for r in Recompute])
    parser.add_argument("--small", action="store_true", help="a tiny block instead (tests)")
    args = parser.parse_args()
    parallel = RunConfig.sharded(tp=args.tp, fsdp=args.fsdp, recompute=Recompute(args.recompute))
    if args.small:
        spec = BlockSpec.small(parallel=parallel)
    else:
        spec = llama3_8b(
            tp=args.tp, fsdp=args.fsdp, recompute=Recompute(args.recompute), tokens=args.tokens
        )
    recipe = None if args.recipe == "bf16" else args.recipe
    start = time.perf_counter()
    capture = capture_block(spec, recipe=recipe, device="codegen")
    elapsed_s = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(
        f"{spec.name} {args.recipe} tp={args.tp} fsdp={args.fsdp} recompute={args.recompute} "
        f"tokens={args.tokens}: codegen {elapsed_s:.1f} s, peak RSS {peak_mib:.0f} MiB; "
        f"{len(capture.kernels)} kernels, {len(capture.gemms)} gemms, "
        f"{len(capture.collectives)} collectives"
    )


if __name__ == "__main__":
    main()
