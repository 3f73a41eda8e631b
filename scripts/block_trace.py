"""One transformer block on one GPU, compiled as torchtitan compiles it and timed kernel by
kernel: the measurement the step's block graphs (engine/step/) are checked against.

Per recipe: f8roof's llama block (profiler/block.py `BlockModule`, the catalog's dims) in bf16
on the device, torchao's float8 conversion, torchtitan's per-op SAC (`--recompute`),
`torch.compile`; the first forward+backward compiles it (its generated code kept), then
`--iters` profiled steps (profiler/trace.py, L2 flushed between them). TP 1 and no FSDP: the
block's own kernels, gemms and recompute, with no collective. Recipes run until `--budget`
seconds are spent; a recipe that fails is reported and the next one runs.

Writes `--out` (JSON: per recipe the median step's device and gemm time, its launches, each
kernel's median time, with versions and the GPU) and, under `--artifacts`, each recipe's
generated code and chrome trace. The generated code is what f8roof's parser reads, so the
kernels can be priced by the model offline, name by name.

    PYTHONPATH=. python scripts/block_trace.py --device cuda --out block_trace.json
        [--model llama3-8b] [--tokens 8192] [--recompute selective]
        [--recipes bf16,rowwise,tensorwise] [--iters 5] [--budget 150] [--artifacts DIR]
    --small: a block of test size (the CPU dry run in scripts/gpu_session.sh)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch

from f8roof.engine.sharded import block_spec
from f8roof.errors import F8RoofError
from f8roof.files import write_text_atomic
from f8roof.profiler import torchao_float8
from f8roof.profiler.block import (
    BlockModule,
    Checkpointed,
    sac_context,
    torchtitan_inductor_settings,
)
from f8roof.profiler.trace import is_gemm_kernel, profile_step, step_totals
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import torchao_recipe_name
from f8roof.training.block import BlockSpec
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import Recompute, sac_policy
from f8roof.training.run_config import RunConfig


def block(spec: BlockSpec, recipe: str, device: str) -> torch.nn.Module:
    """The block in bf16 on `device`, converted by torchao unless bf16, checkpointed."""
    with torch.device(device):
        module: torch.nn.Module = BlockModule(spec).to(torch.bfloat16)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.02) if p.dim() > 1 else p.fill_(1.0)
    if recipe != "bf16":
        float8 = torchao_float8.import_float8()
        name = torchao_recipe_name(Recipe.from_name(recipe))
        config = float8.Float8LinearConfig.from_recipe_name(name)
        float8.convert_to_float8_training(module, config=config)
    recompute = spec.parallel.recompute
    if recompute is Recompute.SELECTIVE:
        return Checkpointed(module, context_fn=sac_context(sac_policy()))
    return Checkpointed(module) if recompute is Recompute.FULL else module


def trace_recipe(spec: BlockSpec, recipe: str, *, device: str, iters: int, artifacts: Path) -> dict:
    """Compile, keep the code, profile: the median step and each kernel's median time."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    settings = torch._inductor.config.patch(torchtitan_inductor_settings(recipe, spec.parallel))
    with torchao_float8.inductor_patch_scope(), settings:
        compiled = torch.compile(block(spec, recipe, device), fullgraph=True)
        x = torch.randn(spec.batch, spec.seq_len, spec.dim, dtype=torch.bfloat16, device=device)
        x.requires_grad_()
        grad = torch.randn_like(x)

        def step() -> None:
            compiled(x).backward(grad)

        started = time.monotonic()
        # on CPU, C++ kernels show in the trace only when compiled to (profiler/trace.py)
        with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}):
            _, codes = run_and_get_code(step)
        compile_s = time.monotonic() - started
        for i, code in enumerate(codes):
            write_text_atomic(artifacts / f"{recipe}_graph{i}.py", code)
        events = profile_step(
            step,
            warmup=1,
            iters=iters,
            device=device,
            trace_path=str(artifacts / f"{recipe}_trace.json.gz"),
        )
    totals = step_totals(events)
    per_kernel: dict[str, list[float]] = defaultdict(list)
    per_step: dict[tuple[int | None, str], float] = defaultdict(float)
    for e in events:
        if e.step is not None:
            per_step[(e.step, e.name)] += e.duration_s
    for (_, name), seconds in per_step.items():
        per_kernel[name].append(seconds)
    kernels = {name: statistics.median(times) for name, times in per_kernel.items()}
    return {
        "compile_s": compile_s,
        "device_s": totals.device_s,
        "gemm_s": totals.gemm_s,
        "launches": totals.launches,
        "kernels": dict(sorted(kernels.items(), key=lambda kv: -kv[1])),
        "gemm_kernels": sorted(n for n in kernels if is_gemm_kernel(n)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--artifacts", default=None)
    parser.add_argument("--model", default="llama3-8b")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--recompute", default="selective", choices=[r.value for r in Recompute])
    parser.add_argument("--recipes", default="bf16,rowwise,tensorwise")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--budget", type=float, default=150.0)
    parser.add_argument("--small", action="store_true", help="a block of test size")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("block_trace: no CUDA device here (--device cpu for the dry run)")

    parallel = RunConfig.sharded(recompute=Recompute(args.recompute))
    if args.small:
        spec = BlockSpec.small(parallel=parallel)
    else:
        spec = block_spec(builtin(args.model), tokens=args.tokens, parallel=parallel)
    artifacts = Path(args.artifacts or Path(args.out).with_suffix("")) / "block"
    artifacts.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report: dict = {
        "block": {
            "model": spec.name or args.model,
            "dim": spec.dim,
            "ffn_dim": spec.ffn_dim,
            "tokens": spec.tokens,
            "seq_len": spec.seq_len,
            "recompute": args.recompute,
        },
        "device": gpu,
        "versions": {"torch": torch.__version__, "torchao": torchao_float8.version()},
        "recipes": {},
    }
    start = time.monotonic()
    for recipe in args.recipes.split(","):
        if time.monotonic() - start > args.budget:
            print(f"{recipe}: skipped, the {args.budget:.0f} s budget is spent")
            continue
        if recipe != "bf16" and not torchao_float8.available():
            print(f"{recipe}: skipped, torchao is not installed")
            continue
        try:
            found = trace_recipe(
                spec, recipe, device=args.device, iters=args.iters, artifacts=artifacts
            )
        except (RuntimeError, F8RoofError) as e:  # a failed recipe leaves the others their time
            print(f"{recipe}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        report["recipes"][recipe] = found
        write_text_atomic(Path(args.out), json.dumps(report, indent=1) + "\n")
        print(
            f"{recipe}: {found['device_s'] * 1e3:.3f} ms a step on the device "
            f"({found['gemm_s'] * 1e3:.3f} ms gemms, {found['launches']} launches; "
            f"compiled in {found['compile_s']:.0f} s)"
        )


if __name__ == "__main__":
    main()
