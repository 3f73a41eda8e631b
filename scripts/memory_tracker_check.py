"""f8roof's peak memory beside torch's own count of it, at the size of a real run.

Runs profiler/memory/step.py's `tracked_peak` (torch's FSDPMemTracker over one eager
training step on a fake process group, every tensor at its real size, no memory used) for
pytorch/pytorch#149990's setup by default: Llama3-70B, 80 blocks, FSDP 16 x TP 8, full AC,
seq_len 8192, local batch 8, bf16 and float8 tensorwise; and prints it beside
training/memory.py's peak and terms. About 2-4 minutes per arm on one CPU core.

With `--device cuda` (a GPU session) the same rank trains for real instead
(`measured_peak`: blocks compiled, the caching allocator's allocated and reserved peaks, under
whatever PYTORCH_CUDA_ALLOC_CONF the caller set: torchtitan's run_train.sh sets
expandable_segments:True), beside memory.py's compiled-block peaks; `--out` appends each
arm's record to a JSON-lines file, `--snapshot DIR` keeps each arm's allocator history.
`--device cpu --measure` runs that path on CPU (no allocator figures: a dry run).

    PYTHONPATH=. python scripts/memory_tracker_check.py [--batch 8] [--model llama3-70b]
        [--tp 8] [--fsdp 16] [--recompute full] [--recipes bf16,tensorwise]
        [--device cuda [--out FILE] [--snapshot DIR] | --device cpu --measure]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from f8roof.engine.sharded import block_spec
from f8roof.hardware.presets import find_gpu
from f8roof.profiler.memory.step import beside_the_model, expandable_segments, measured_peak
from f8roof.training.block import BlockSpec
from f8roof.training.catalog import Architecture, resolve_model
from f8roof.training.checkpointing import Recompute
from f8roof.training.memory import memory_estimate
from f8roof.training.run_config import RunConfig

GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama3-70b", help="built-in, or a config.json")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--fsdp", type=int, default=16)
    parser.add_argument("--recompute", default="full", choices=[r.value for r in Recompute])
    parser.add_argument("--recipes", default="bf16,tensorwise")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--measure", action="store_true", help="train the rank (cuda: always)")
    parser.add_argument("--out", type=Path, help="append each measured arm (JSON lines)")
    parser.add_argument("--snapshot", type=Path, help="a folder for the allocator histories")
    args = parser.parse_args()

    arch = resolve_model(args.model)
    tokens = args.batch * args.seq_len
    run = RunConfig.sharded(tp=args.tp, fsdp=args.fsdp, recompute=Recompute(args.recompute))
    spec = block_spec(arch, tokens=tokens, seq_len=args.seq_len, parallel=run)
    layers = max(linear.count for linear in arch.linears)
    print(
        f"{args.model}, {layers} blocks, FSDP {args.fsdp} x TP {args.tp}, {args.recompute} AC, "
        f"local batch {args.batch} x {args.seq_len}; GiB per GPU"
    )
    for name in args.recipes.split(","):
        recipe = None if name == "bf16" else name
        if args.measure or args.device == "cuda":
            measure(arch, spec, name, recipe, args)
            continue
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


def measure(
    arch: Architecture, spec: BlockSpec, name: str, recipe: str | None, args: argparse.Namespace
) -> None:
    """One arm trained for real, beside memory.py's peak for the run as trained: blocks
    compiled, the loss eager, the allocator's expandable segments as measured."""
    head = next(linear for linear in arch.linears if linear.fqn == "lm_head")
    segments = "expandable" if expandable_segments() else "fixed"
    snapshot = None
    if args.snapshot and args.device == "cuda":
        args.snapshot.mkdir(parents=True, exist_ok=True)
        snapshot = str(args.snapshot / f"{name}-{segments}.pickle")
    started = time.monotonic()
    got = measured_peak(
        spec,
        layers=max(linear.count for linear in arch.linears),
        vocab=head.N,
        recipe=recipe,
        device=args.device,
        snapshot=snapshot,
    )
    modelled = memory_estimate(
        arch,
        tokens=spec.tokens,
        run=replace(spec.parallel, blocks_compiled=True, loss_compiled=False),
        recipe=recipe or "tensorwise",
        converted=[linear.fqn for linear in arch.linears if linear is not head],
        gpu_memory_bytes=find_gpu("h100-meta").memory_bytes,
        expandable_segments=got.expandable,
    )
    peak = modelled.bf16 if recipe is None else modelled.fp8
    record = {
        "arm": name,
        "model": args.model,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "tp": args.tp,
        "fsdp": args.fsdp,
        "recompute": args.recompute,
        **asdict(got),
        "modelled_allocated_bytes": peak.allocated_bytes,
        "modelled_reserved_bytes": peak.peak_bytes,
        "seconds": round(time.monotonic() - started, 1),
    }
    figures = "no allocator on cpu"
    if got.reserved_bytes is not None and got.allocated_bytes is not None:
        figures = (
            f"{segments} segments: allocated {got.allocated_bytes / GIB:.2f} (f8roof "
            f"{peak.allocated_bytes / GIB:.2f}), reserved {got.reserved_bytes / GIB:.2f} "
            f"(f8roof {peak.peak_bytes / GIB:.2f})"
        )
    print(f"\n{name}, measured on {got.device}: {figures}; "
          f"step {got.step_seconds:.1f} s, {record['seconds']:.0f} s in all")  # fmt: skip
    if args.out:
        with args.out.open("a") as out:
            out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
