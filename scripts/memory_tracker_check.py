"""f8roof's peak memory beside torch's own count of it, at the size of a real run.

Runs profiler/memory_check.py's `tracked_peak` (torch's FSDPMemTracker over one eager
training step on a fake process group, every tensor at its real size, no memory used) for
pytorch/pytorch#149990's setup by default: Llama3-70B, 80 blocks, FSDP 16 x TP 8, full AC,
seq_len 8192, local batch 8, bf16 and float8 tensorwise; and prints it beside
training/memory.py's peak and terms. About 2-4 minutes per arm on one CPU core.

    PYTHONPATH=. python scripts/memory_tracker_check.py [--batch 8] [--model llama3-70b]
        [--tp 8] [--fsdp 16] [--recompute full] [--recipes bf16,tensorwise]
"""

from __future__ import annotations

import argparse
import time

from f8roof.engine.sharded import block_spec
from f8roof.hardware.presets import find_gpu
from f8roof.profiler.memory_check import beside_the_model
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import RunConfig

GIB = 2**30
SEQ_LEN = 8192


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama3-70b")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--fsdp", type=int, default=16)
    parser.add_argument("--recompute", default="full", choices=[r.value for r in Recompute])
    parser.add_argument("--recipes", default="bf16,tensorwise")
    args = parser.parse_args()

    arch = builtin(args.model)
    tokens = args.batch * SEQ_LEN
    run = RunConfig.sharded(tp=args.tp, fsdp=args.fsdp, recompute=Recompute(args.recompute))
    spec = block_spec(arch, tokens=tokens, seq_len=SEQ_LEN, parallel=run)
    layers = max(linear.count for linear in arch.linears)
    print(
        f"{args.model}, {layers} blocks, FSDP {args.fsdp} x TP {args.tp}, {args.recompute} AC, "
        f"local batch {args.batch} x {SEQ_LEN}; GiB per GPU"
    )
    for name in args.recipes.split(","):
        recipe = None if name == "bf16" else name
        started = time.monotonic()
        peak, counted = beside_the_model(
            arch, spec, recipe=recipe, gpu_memory_bytes=find_gpu("h100-meta").memory_bytes
        )
        seconds = time.monotonic() - started
        print(
            f"\n{name}: f8roof {peak.allocated_bytes / GIB:.2f} allocated ({peak.phase.value}), "
            f"torch's tracker {counted.total_bytes / GIB:.2f} "
            f"({peak.allocated_bytes / counted.total_bytes - 1:+.1%}; tracked in {seconds:.0f} s)"
        )
        print("  f8roof: " + ", ".join(f"{t.term.value} {t.bytes / GIB:.2f}" for t in peak.terms))
        print(
            "  torch:  "
            + ", ".join(f"{k} {v / GIB:.2f}" for k, v in counted.by_category.items() if v)
        )


if __name__ == "__main__":
    main()
