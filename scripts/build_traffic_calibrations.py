"""Build the shipped traffic calibrations: f8roof/calibrations/{h100,h200,h100-meta}.json.

Each is the exact bytes of the code torch.compile generates (codegen-only, no GPU) for every
shipped variant at the 12 fit shapes, timed by models/datasheet.py for that GPU. The kernels
are generated once, for the h100 preset: h200 and h100-meta have the same SMs and compute
capability, which is all Inductor's heuristics read, and this script checks it by generating
every variant again for h200 at one shape and comparing the kernels. Rerun it when torch or
torchao changes (the files record both versions); on the same versions it rewrites the files
byte for byte.

    PYTHONPATH=. python scripts/build_traffic_calibrations.py [--jobs 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from f8roof.calibrate import CalibrateOptions, generated_samples
from f8roof.calibrations import SHIPPED
from f8roof.calibration.fitting import traffic_calibration
from f8roof.models.datasheet import datasheet_timing
from f8roof.models.hardware import find_gpu
from f8roof.models.recipes import Recipe
from f8roof.models.variant import TORCHAO_RECIPES, Context, Implementation, Variant

# The contexts the built-in architectures put linears in (architectures.input_context) and
# torchao's float8 benchmark's LayerNorm -> Linear -> Sigmoid.
CONTEXTS = (
    "none",
    "layernorm+sigmoid",
    "rmsnorm+none",
    "silu_mul+none",
    "layernorm+none",
    "gelu+none",
)
REFERENCE_RECIPES = (
    "tensorwise",
    "tensorwise_delayed",
    "tensorwise_static_weight",
    "rowwise",
    "rowwise_gw_hp",
)
CODE_FOR = "h100"
CHECKED = "h200"


def shipped_variants() -> tuple[Variant, ...]:
    """torchao's recipes in every context; the reference's (delayed and static scaling
    included, which only it has) for the standalone linear."""
    torchao = tuple(
        Variant(Recipe.from_name(r), Implementation.TORCHAO, Context.from_name(c))
        for c in CONTEXTS
        for r in TORCHAO_RECIPES
    )
    reference = tuple(
        Variant(Recipe.from_name(r), Implementation.REFERENCE) for r in REFERENCE_RECIPES
    )
    return torchao + reference


def check_same_code(samples, options: CalibrateOptions, *, jobs: int) -> None:
    """Every variant's kernels for CHECKED at the first fit shape equal CODE_FOR's."""
    shape = options.shapes[0]
    check = CalibrateOptions.defaults(
        "codegen", variants=options.variants, gpu=find_gpu(CHECKED), jobs=jobs
    )
    again = generated_samples(check, shape_subset=(shape,))
    for key, runs in again.items():
        theirs = next(s for s in samples[key] if s.shape == shape)
        if runs[0].signature != theirs.signature:
            sys.exit(f"{key}: the code generated for {CHECKED} differs from {CODE_FOR}'s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--out", type=Path, default=Path("f8roof/calibrations"))
    args = parser.parse_args()
    start = time.monotonic()
    options = CalibrateOptions.defaults(
        "codegen", variants=shipped_variants(), gpu=find_gpu(CODE_FOR), jobs=args.jobs
    )
    samples = generated_samples(options)
    print(
        f"generated {len(options.all_variants)} variants x {len(options.shapes)} shapes "
        f"in {time.monotonic() - start:.0f} s",
        flush=True,
    )
    check_same_code(samples, options, jobs=args.jobs)
    from f8roof.profiler.device import environment

    for preset, name in SHIPPED.items():
        gpu = find_gpu(preset)
        calibration = traffic_calibration(
            samples,
            environment=environment("codegen", gpu=gpu),
            fit_shapes=options.shapes,
            timing=datasheet_timing(gpu),
        )
        calibration.save(args.out / name)
        print(f"wrote {args.out / name}: {calibration.source}")
    print(f"total {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
