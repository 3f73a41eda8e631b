"""Build the shipped traffic calibrations: f8roof/calibration/data/*.json (`GPU.shipped`).

Each is the exact bytes of the code torch.compile generates (codegen-only, no GPU) for every
shipped variant at the 12 fit shapes, timed by timing/datasheet.py for that GPU. The kernels
are generated once, for the h100 preset: h200 and h100-meta have the same SMs and compute
capability, which is all Inductor's heuristics read, and this script checks it by generating
every variant again for h200 at one shape and comparing the kernels. Rerun it when torch or
torchao changes (the files record both versions); on the same versions it rewrites the files
byte for byte.

`--gpu b200` builds b200.json, gb200.json, b300.json and gb300.json from code generated for b200
(compute capability 10.0, 148 SMs: Inductor's heuristics read both; checked the same for
gb200's 152 SMs and for compute capability 10.3, as h200's is checked against h100's), with
the block-scaled recipes whose casts Inductor
generates (mxfp8_emulated_rceil) beside the others; those whose casts are hand-written kernels
(mxfp8_rceil, mxfp8_rceil_wgrad_with_hp, blockwise) cannot be generated without a GPU, and
their traffic is read off their code (traffic/block_scaled.py).

`--gpu mi355x` builds mi355x.json and mi350x.json (the same gfx950 die: 256 CUs, 64-lane
wavefronts, OCP float8; checked the same for mi350x) as b200's recipes are built.

`--gpu mi300x` builds mi300x.json from code generated for MI300X's properties: 304 CUs, 64-lane
wavefronts, torchao's casts to the fnuz encodings (codegen_only's stand-in; Inductor's
ROCm-only branches change how min/max and FMAs are spelled, not what a kernel loads or
stores). Inductor's split-reduction heuristics read the CU count and wavefront, so its
rowwise kernels differ from h100's at the fit grid's ends (docs/mx.md). torchao's recipes
only: f8roof's reference linear casts to the OCP encodings.

`--retime` generates nothing: it times each shipped file's bytes again by its preset's record
(its gemm and copy fractions: `datasheet_timed`), which is what a full build writes when only
the records changed (torch and torchao as the files record them).

    PYTHONPATH=. python scripts/build_traffic_calibrations.py [--gpu h100|b200|mi300x|mi355x] [--jobs 2] [--out DIR]
    PYTHONPATH=. python scripts/build_traffic_calibrations.py --gpu b200 --retime
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from f8roof.calibration.file import Calibration, datasheet_timed
from f8roof.calibration.fitting import traffic_calibration
from f8roof.device.calibrate import CalibrateOptions, generated_samples
from f8roof.hardware.presets import PRESETS, Float8Family, find_gpu
from f8roof.timing.datasheet import datasheet_timing
from f8roof.traffic.block_scaled import BytesSource, bytes_source
from f8roof.traffic.recipes import BLOCK_SCALED_NAMES, Recipe
from f8roof.traffic.variant import FLOAT8_LINEAR_RECIPES, Context, Implementation, Variant

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
# The presets each --gpu writes, read off the records (`GPU.shipped`): h100's code serves h200
# and h100-meta (same SMs and compute capability); b200's serves gb200 (152 SMs against 148),
# b300 and gb300 (compute capability 10.3); mi355x's serves mi350x. The code generated for each
# part marked `checked` is generated again at the smallest and largest fit shape and compared.
WRITTEN = {
    code: tuple(g.name for g in PRESETS.values() if g.shipped and g.shipped.code_from == code)
    for code in dict.fromkeys(g.shipped.code_from for g in PRESETS.values() if g.shipped)
}
# Whose code is generated again, at the smallest and largest fit shape, to check it is the same
CHECKED = {
    code: tuple(n for n in written if PRESETS[n].shipped.checked)  # type: ignore[union-attr]
    for code, written in WRITTEN.items()
}
# The block-scaled recipes Inductor generates code for (bytes_source), shipped for the parts
# with MX gemms (b200's code, mi355x's): the others train tensorwise or rowwise.
GENERATED_BLOCK_SCALED = tuple(
    n for n in BLOCK_SCALED_NAMES if bytes_source(Recipe.from_name(n))[0] is BytesSource.GENERATED
)


def shipped_variants(gpu: str = CODE_FOR) -> tuple[Variant, ...]:
    """torchao's recipes in every context (on a part with MX gemms the generated block-scaled
    ones too); the reference's (delayed and static scaling included, which only it has) for
    the standalone linear, except on a part with fnuz float8 (MI300X), which the reference
    does not cast to."""
    mx = find_gpu(gpu).mx_flops is not None
    recipes = (*FLOAT8_LINEAR_RECIPES, *(GENERATED_BLOCK_SCALED if mx else ()))
    torchao = tuple(
        Variant(Recipe.from_name(r), Implementation.TORCHAO, Context.from_name(c))
        for c in CONTEXTS
        for r in recipes
    )
    if find_gpu(gpu).fp8_dtype_family is Float8Family.FNUZ:
        return torchao
    reference = tuple(
        Variant(Recipe.from_name(r), Implementation.REFERENCE) for r in REFERENCE_RECIPES
    )
    return torchao + reference


def check_same_code(samples, options: CalibrateOptions, *, gpu: str, jobs: int) -> None:
    """Every variant's kernels (their graphs, kinds, roles and bytes) for each of CHECKED[gpu]
    at the smallest and largest fit shape, where Inductor's SM-count heuristics (split
    reductions) would differ, equal `gpu`'s."""
    shapes = (options.shapes[0], options.shapes[-1])
    for other in CHECKED[gpu]:
        check = CalibrateOptions.defaults(
            "codegen", variants=options.variants, gpu=find_gpu(other), jobs=jobs
        )
        again = generated_samples(check, shape_subset=shapes)
        for key, runs in again.items():
            for run in runs:
                theirs = next(s for s in samples[key] if s.shape == run.shape)
                if run.signature != theirs.signature:
                    sys.exit(f"{key} at {run.shape}: {other}'s generated code differs from {gpu}'s")


def retime(code: str, out: Path) -> None:
    """Each file WRITTEN[code] writes, its bytes timed again by its preset's record."""
    for preset in WRITTEN[code]:
        gpu = find_gpu(preset)
        assert gpu.shipped is not None
        path = out / gpu.shipped.file
        datasheet_timed(Calibration.load(path), datasheet_timing(gpu)).save(path)
        print(f"retimed {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--out", type=Path, default=Path("f8roof/calibration/data"))
    parser.add_argument(
        "--gpu", choices=sorted(WRITTEN), default=CODE_FOR, help="whose code to generate"
    )
    parser.add_argument(
        "--retime", action="store_true", help="time the shipped bytes by the records, no codegen"
    )
    args = parser.parse_args()
    if args.retime:
        retime(args.gpu, args.out)
        return
    start = time.monotonic()
    options = CalibrateOptions.defaults(
        "codegen", variants=shipped_variants(args.gpu), gpu=find_gpu(args.gpu), jobs=args.jobs
    )
    samples = generated_samples(options)
    print(
        f"generated {len(options.all_variants)} variants x {len(options.shapes)} shapes "
        f"in {time.monotonic() - start:.0f} s",
        flush=True,
    )
    check_same_code(samples, options, gpu=args.gpu, jobs=args.jobs)
    from f8roof.profiler.device import environment

    for preset in WRITTEN[args.gpu]:
        gpu = find_gpu(preset)
        assert gpu.shipped is not None
        name = gpu.shipped.file
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
