"""Calibrate: decide what to measure, run it with a checkpoint and a budget, fit, write the file.

Two kinds (see calibration.py). On a device (cuda, cpu): per variant (bf16 and each recipe, per
implementation and context) and fit shape, the compiled forward+backward's kernels and step;
then per gemm dtype and role a grid of gemm times; the device copy bandwidth. Every finished
measurement is appended to `<out>.partial.jsonl`, so `--resume` after a crash re-measures
nothing. On `codegen`: the same variants' generated code for a target GPU, no device, timed by
the datasheet model (a traffic calibration). The measuring itself lives in profiler/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from f8roof.calibration.file import (
    Calibration,
    Ceilings,
    Environment,
    GemmMeasurement,
    StepMeasurement,
    kernel_from_json,
    sample_from_json,
    sample_to_json,
)
from f8roof.calibration.fitting import Measurements, fit_calibration, traffic_calibration
from f8roof.device.runner import Checkpoint, Task, run_tasks
from f8roof.errors import F8RoofError, term
from f8roof.hardware.presets import GPU, resolve_gpu
from f8roof.notes import Note, Topic, note
from f8roof.timing.datasheet import datasheet_timing
from f8roof.timing.gemm import GEMM_ROLES, fp8_gemm_dtype
from f8roof.traffic.block_scaled import bytes_source, is_read_off
from f8roof.traffic.fit import CPU_FIT_SHAPES, FIT_SHAPES, Shape, ShapeSample, shape_text
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation, Variant, check_gpu_support

# What a GPU calibration measures by default: what users train with (torchao's recipes) and
# the reference's delayed scaling, which only it has.
CALIBRATION_VARIANTS = (
    "torchao:tensorwise",
    "torchao:rowwise",
    "torchao:rowwise_gw_hp",
    "reference:tensorwise_delayed",
)
GPU_GEMM_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
CPU_GEMM_SIZES = (32, 64, 128, 256)  # covers every gemm dim of CPU_FIT_SHAPES and validation's


@dataclass(frozen=True)
class CalibrateOptions:
    device: str  # cuda, cpu, or codegen (a traffic calibration for `gpu`)
    variants: tuple[Variant, ...]  # float8 variants; their bf16 baselines are added
    shapes: tuple[Shape, ...]
    gemm_sizes: tuple[int, ...]
    warmup: int = 3
    iters: int = 10
    budget_s: float | None = None
    gpu: GPU | None = None  # the codegen target
    artifacts: Path | None = field(default=None, compare=False)  # traces and generated code
    jobs: int = field(default=1, compare=False)  # worker processes (codegen only)

    @classmethod
    def defaults(
        cls,
        device: str,
        *,
        variants: tuple[Variant, ...],
        quick: bool = False,
        budget_s: float | None = None,
        gpu: GPU | None = None,
        artifacts: Path | None = None,
        jobs: int = 1,
    ) -> CalibrateOptions:
        """Full set on a GPU; `quick` takes every other fit shape (6: bytes are read off the
        buffers at each, but the independent linear solve needs 9 of one kernel set) and fewer
        iterations; the gemm grid stays whole, as interpolating over 4x steps costs accuracy.
        codegen (a traffic calibration for `gpu`) runs nothing: no gemms, no iterations."""
        run: dict[str, Any] = {
            "device": device,
            "variants": variants,
            "budget_s": budget_s,
            "artifacts": artifacts,
            "jobs": jobs if device == "codegen" else 1,
        }
        shapes = FIT_SHAPES[::2] if quick else FIT_SHAPES
        if device == "cpu":
            return cls(**run, shapes=CPU_FIT_SHAPES, gemm_sizes=CPU_GEMM_SIZES, warmup=1, iters=3)
        if device == "codegen":
            return cls(**run, shapes=shapes, gemm_sizes=(), warmup=0, iters=0, gpu=gpu)
        if quick:
            return cls(**run, shapes=shapes, gemm_sizes=GPU_GEMM_SIZES, warmup=2, iters=5)
        return cls(**run, shapes=shapes, gemm_sizes=GPU_GEMM_SIZES, warmup=3, iters=10)

    def header(self) -> dict[str, Any]:
        """What identifies the run for --resume."""
        return {
            "device": self.device,
            "gpu": self.gpu.name if self.gpu else None,
            "variants": [v.key for v in self.all_variants],
            "shapes": [list(s) for s in self.shapes],
            "gemm_sizes": list(self.gemm_sizes),
            "warmup": self.warmup,
            "iters": self.iters,
        }

    @property
    def all_variants(self) -> tuple[Variant, ...]:
        """Each context's bf16 baseline first, then the float8 variants."""
        baselines = dict.fromkeys(v.baseline for v in self.variants)
        return (*baselines, *(v for v in self.variants if not v.is_bf16))

    @property
    def gemm_dtypes(self) -> tuple[str, ...]:
        return tuple(
            sorted(
                {
                    fp8_gemm_dtype(v.recipe, r, v.implementation)
                    for v in self.all_variants
                    for r in GEMM_ROLES
                }
            )
        )


def parse_variants(
    recipes: tuple[str, ...], *, implementation: Implementation, contexts: tuple[Context, ...]
) -> tuple[Variant, ...]:
    """Recipe names (optionally 'impl:recipe') x contexts -> variants; refused before any work."""
    variants = []
    for context in contexts:
        for name in recipes:
            if ":" in name:  # impl:recipe, as a variant key names it
                variants.append(Variant.from_key(f"{name}@{context.name}"))
            else:
                variants.append(Variant(Recipe.from_name(name), implementation, context))
    return tuple(dict.fromkeys(variants))


def requested_contexts(
    before: str | None, after: str | None, contexts: str | None
) -> tuple[Context, ...]:
    """--contexts lists several; --before/--after name one; not both."""
    if contexts and (before or after):
        raise F8RoofError(
            f"{term('contexts')} lists contexts; {term('before')}/{term('after')} name one: "
            "give one way"
        )
    if contexts:
        return tuple(Context.from_name(c.strip()) for c in contexts.split(",") if c.strip())
    return (Context.from_names(before, after),)


def requested_variants(
    recipes: str | None,
    implementation: str | None,
    contexts: tuple[Context, ...],
    *,
    default: tuple[str, ...],
) -> tuple[Variant, ...]:
    """Comma-separated recipes ('impl:recipe' allowed; `default` when none) x contexts."""
    from f8roof.profiler.graphs import resolve_implementation

    names = tuple(p.strip() for p in (recipes or "").split(",") if p.strip()) or default
    return parse_variants(
        names, implementation=resolve_implementation(implementation), contexts=contexts
    )


def calibrate_options(
    *,
    device: str,
    gpu: str,
    recipes: str | None,
    implementation: str | None,
    contexts: tuple[Context, ...],
    quick: bool,
    jobs: int,
    budget_s: float | None,
    artifacts: str | None,
) -> CalibrateOptions:
    """`f8roof calibrate`'s options: on a CPU one tensorwise variant by default, elsewhere
    CALIBRATION_VARIANTS; the codegen target only for codegen."""
    default: tuple[str, ...] = ("tensorwise",) if device == "cpu" else CALIBRATION_VARIANTS
    target = resolve_gpu(gpu) if device == "codegen" else None
    if target is not None and target.fp8_dtype_family.value == "fnuz":
        # an fnuz part (MI300X): torchao's casts are generated with its encodings, the
        # reference's are not (e4m3fn/e5m2 only), so the defaults are torchao's
        default = tuple(v for v in default if not v.startswith("reference:"))
    variants = requested_variants(recipes, implementation, contexts, default=default)
    for variant in variants:
        if device != "cuda" and is_read_off(variant.recipe):
            # torchao's MX / blockwise casts: hand-written kernels nothing generates here
            raise F8RoofError(
                f"{variant.key} cannot be compiled without a GPU ({bytes_source(variant.recipe)[1]}); "
                "its traffic is read off torchao's code: see f8roof compare"
            )
        if target is not None:
            check_gpu_support(variant.recipe, target)
            fnuz = target.fp8_dtype_family.value == "fnuz"
            if fnuz and variant.implementation is Implementation.REFERENCE:
                raise F8RoofError(
                    f"{variant.key}: the reference casts to e4m3fn/e5m2, {target.name} runs fnuz: "
                    "calibrate torchao's recipes"
                )
    return CalibrateOptions.defaults(
        device,
        variants=variants,
        quick=quick,
        budget_s=budget_s,
        gpu=target,
        artifacts=Path(artifacts) if artifacts else None,
        jobs=jobs,
    )


def tasks(options: CalibrateOptions) -> list[Task]:
    """Every measurement of a device run, each one checkpoint record."""
    from f8roof.profiler import measure

    device, iters, artifacts = options.device, options.iters, options.artifacts
    out = [
        Task(
            "copy",
            "device copy bandwidth",
            measure.copy_bandwidth,
            {"device": device, "iters": iters},
        )
    ]
    sizes = options.gemm_sizes
    points = [(m, k, n) for m in sizes for k in sizes for n in sizes]
    for dtype in options.gemm_dtypes:
        for role in GEMM_ROLES:
            out.append(
                Task(
                    f"gemms/{dtype}/{role.value}",
                    f"gemms {dtype} {role.value}",
                    _gemm_grid,
                    {
                        "dtype": dtype,
                        "role": role,
                        "points": points,
                        "device": device,
                        "iters": iters,
                    },
                )
            )
    # Shape by shape, every variant at each: a run the budget stops early covers them all.
    for index, shape in enumerate(options.shapes):
        name = shape_text(shape)
        keep = artifacts is not None and index in (0, len(options.shapes) // 2)
        for variant in options.all_variants:
            trace = (
                artifacts / "traces" / f"{variant.slug}_{name}.json"
                if keep and artifacts is not None
                else None
            )
            code = artifacts / "code" if artifacts is not None else None
            out.append(
                Task(
                    f"step/{variant.key}/{name}",
                    f"{variant.key} {name}",
                    measure.variant_kernels,
                    {
                        "variant": variant,
                        "shape": shape,
                        "device": device,
                        "warmup": options.warmup,
                        "iters": iters,
                        "trace_path": trace,
                        "code_dir": code,
                    },
                )
            )
    return out


def _gemm_grid(**kwargs) -> dict[str, Any]:
    from f8roof.profiler.measure import gemm_grid

    return {"gemms": gemm_grid(**kwargs)}


def codegen_tasks(options: CalibrateOptions) -> list[Task]:
    """A traffic calibration's captures: each variant's generated code at each fit shape
    (shape by shape, as for a device run)."""
    return [
        Task(
            f"code/{v.key}/{shape_text(s)}",
            f"{v.key} {shape_text(s)}",
            _generated_kernels,
            {"variant": v, "shape": s, "gpu": options.gpu},
        )
        for s in options.shapes
        for v in options.all_variants
    ]


def _generated_kernels(*, variant: Variant, shape: Shape, gpu: GPU) -> dict[str, Any]:
    from f8roof.profiler.capture import capture

    captured = capture(variant, shape, device="codegen", gpu=gpu)
    return {
        "samples": [sample_to_json(s) for s in captured.samples()],
        "disagreements": list(captured.disagreements()),
    }


def measurements_from(
    records: list[dict[str, Any]], env: Environment, options: CalibrateOptions
) -> Measurements:
    by_key = {r["key"]: r for r in records}
    gemms = [
        GemmMeasurement(**g) for r in records if r["key"].startswith("gemms/") for g in r["gemms"]
    ]
    shapes = set(options.shapes)
    measured = [
        r
        for r in records
        if r["key"].startswith("step/")
        and (r["step"]["M"], r["step"]["K"], r["step"]["N"]) in shapes
    ]  # a budget-cut run leaves out shapes not every variant reached
    kernels = [
        kernel_from_json(k, source="checkpoint", shapes=shapes)
        for r in measured
        for k in r["kernels"]
    ]
    steps = [StepMeasurement(**r["step"]) for r in measured]
    best: dict[str, float] = {}
    for g in gemms:
        best[g.dtype] = max(best.get(g.dtype, 0.0), 2 * g.m * g.k * g.n / g.time_s)
    fp8 = [v for d, v in best.items() if d.startswith("fp8")]
    ceilings = Ceilings(
        bf16_flops=best["bf16"],
        fp8_flops=max(fp8) if fp8 else best["bf16"],
        copy_bandwidth_bytes_per_s=by_key["copy"]["copy_bandwidth_bytes_per_s"],
        launch_floor_s=min(k.time_s for k in kernels),
    )
    return Measurements(
        env, ceilings, tuple(options.shapes), tuple(gemms), tuple(kernels), tuple(steps)
    )


MIN_PARTIAL_SHAPES = 2  # a budget-cut run is fitted when every variant has this many shapes


def measured_shapes(records: list[dict[str, Any]], options: CalibrateOptions) -> tuple[Shape, ...]:
    """Fit shapes at which every variant was measured (or its code generated)."""
    done = {r["key"] for r in records}
    prefix = "code" if options.device == "codegen" else "step"
    return tuple(
        s
        for s in options.shapes
        if all(f"{prefix}/{v.key}/{shape_text(s)}" in done for v in options.all_variants)
    )


def calibrate(
    options: CalibrateOptions,
    out: Path,
    *,
    resume: bool,
    progress: Callable[[list[Task]], Any] | None = None,
) -> tuple[Calibration, list[Note]]:
    """Measure (or resume), fit, save atomically; return the calibration and capture warnings."""
    from f8roof.profiler.device import environment, require_cpu_rowwise, require_device

    codegen = options.device == "codegen"
    if not codegen:
        require_device(options.device)
    require_cpu_rowwise([v.recipe for v in options.variants], device=options.device)
    env = environment(options.device, gpu=options.gpu)
    checkpoint = Checkpoint(
        out.with_name(out.name + ".partial.jsonl"),
        {**options.header(), "device_name": env.device_name},
        resume=resume,
    )
    work = codegen_tasks(options) if codegen else tasks(options)
    finished = run_tasks(
        [t for t in work if checkpoint.done(t.key) is None],
        checkpoint,
        budget_s=options.budget_s,
        jobs=options.jobs,
        progress=progress,
    )
    warnings = [
        note(Topic.BYTES_DISAGREE, key=r["key"], detail=line)
        for r in checkpoint.records
        for line in r.get("disagreements", [])
    ]
    fitted = options
    if not finished:
        shapes = measured_shapes(checkpoint.records, options)
        gemms = all(checkpoint.done(t.key) for t in work if t.key.startswith(("gemms/", "copy")))
        if len(shapes) < MIN_PARTIAL_SHAPES or not gemms:
            raise F8RoofError(
                f"budget of {options.budget_s:.0f} s spent before {MIN_PARTIAL_SHAPES} shapes of "
                f"every variant; {checkpoint.path} kept: run again with {term('resume')}"
            )
        fitted = replace(options, shapes=shapes)
        warnings.append(
            note(
                Topic.BUDGET_SPENT,
                budget_s=options.budget_s,
                fitted=len(shapes),
                shapes=len(options.shapes),
                checkpoint=str(checkpoint.path),
            )
        )
    if codegen:
        assert options.gpu is not None, "codegen is for a named GPU"
        calibration = traffic_calibration(
            _code_samples(checkpoint.records, fitted),
            environment=env,
            fit_shapes=fitted.shapes,
            timing=datasheet_timing(options.gpu),
        )
    else:
        calibration = fit_calibration(measurements_from(checkpoint.records, env, fitted))
    calibration.save(out)
    if finished:
        checkpoint.remove()
    return calibration, warnings


def generated_samples(
    options: CalibrateOptions,
    *,
    shape_subset: tuple[Shape, ...] | None = None,
    progress: Callable[[list[Task]], Any] | None = None,
) -> dict[str, list[ShapeSample]]:
    """Every variant's generated kernels at the fit shapes (or `shape_subset`), no checkpoint
    kept: for building shipped files, where a failure means starting over anyway."""
    import tempfile

    if shape_subset is not None:
        options = replace(options, shapes=shape_subset)
    with tempfile.TemporaryDirectory(prefix="f8roof-build-") as scratch:
        checkpoint = Checkpoint(Path(scratch) / "build.jsonl", options.header(), resume=False)
        run_tasks(codegen_tasks(options), checkpoint, jobs=options.jobs, progress=progress)
        return _code_samples(checkpoint.records, options)


def _code_samples(records, options: CalibrateOptions) -> dict[str, list[ShapeSample]]:
    by_key = {r["key"]: r for r in records}
    samples: dict[str, list[ShapeSample]] = {}
    for variant in options.all_variants:
        for shape in options.shapes:
            record = by_key[f"code/{variant.key}/{shape_text(shape)}"]
            kernels = tuple(sample_from_json(s, source="checkpoint") for s in record["samples"])
            samples.setdefault(variant.key, []).append(ShapeSample(shape, kernels))
    return samples
