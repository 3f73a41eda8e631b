"""Measure real end-to-end speedups at shapes the calibration never saw; report the error.

Each (variant, shape) step is compiled as training compiles it (static shapes, no capture
machinery), profiled for the device clock and timed for the wall clock, and checkpointed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from f8roof.calibration.file import Calibration, StepMeasurement
from f8roof.calibration.records import Environment
from f8roof.device.accuracy import Pair, summary, validation_frame
from f8roof.device.runner import Checkpoint, Task, run_tasks
from f8roof.errors import F8RoofError, term
from f8roof.traffic.fit import Shape, shape_text
from f8roof.traffic.variant import Variant

# At least 30 shapes from 256 to 16384 per dimension, disjoint from FIT_SHAPES: squares (for
# the measured breakeven), then transformer-like and odd (non-power-of-two) rectangles.
VALIDATION_SHAPES: tuple[Shape, ...] = (
    (256, 256, 256), (512, 512, 512), (768, 768, 768), (1024, 1024, 1024), (1536, 1536, 1536),
    (2048, 2048, 2048), (3072, 3072, 3072), (4096, 4096, 4096), (6144, 6144, 6144),
    (8192, 8192, 8192), (16384, 16384, 16384),
    (8192, 4096, 1024), (8192, 4096, 14336), (8192, 14336, 4096), (4096, 8192, 13824),
    (4096, 13824, 8192), (16384, 5120, 5120), (2048, 4096, 11008), (2048, 11008, 4096),
    (1024, 7168, 15360), (512, 16384, 2048), (768, 2304, 9216), (3840, 1280, 5120),
    (12800, 2560, 640), (5120, 12288, 3328), (9216, 1792, 7680), (1280, 10240, 2560),
    (14336, 1024, 1536), (640, 5632, 16384), (11264, 6656, 2816), (2816, 2816, 11264),
    (7168, 3584, 896),
)  # fmt: skip
VALIDATION_CPU_SHAPES: tuple[Shape, ...] = (
    (32, 80, 112),
    (48, 64, 96),
    (32, 80, 96),
    (64, 64, 112),
)
VALIDATION_RECIPES = ("tensorwise", "rowwise")


def calibrated_variants(calibration: Calibration) -> tuple[Variant, ...]:
    """What validate measures by default: every float8 variant of the calibration whose
    recipe is one of VALIDATION_RECIPES, in each context it was calibrated in."""
    variants = tuple(
        variant
        for variant in (Variant.from_key(v.variant) for v in calibration.variants)
        if variant.recipe is not None and variant.recipe.name in VALIDATION_RECIPES
    )
    if not variants:
        raise F8RoofError(
            f"the calibration has none of {', '.join(VALIDATION_RECIPES)}: give {term('recipes')}"
        )
    return variants


@dataclass(frozen=True)
class ValidateOptions:
    device: str
    variants: tuple[Variant, ...]  # float8 variants; each context's bf16 graph is measured too
    shapes: tuple[Shape, ...]
    warmup: int = 3
    iters: int = 10
    budget_s: float | None = None  # stop measuring then; report on the shapes done

    @classmethod
    def defaults(
        cls, device: str, *, variants: tuple[Variant, ...], shapes: tuple[Shape, ...] = ()
    ) -> ValidateOptions:
        if device == "cpu":
            return cls(device, variants, shapes or VALIDATION_CPU_SHAPES, warmup=1, iters=3)
        return cls(device, variants, shapes or VALIDATION_SHAPES)

    def header(self) -> dict[str, Any]:
        """What identifies the run for --resume (the budget does not)."""
        return {
            "validate": self.device,
            "variants": [v.key for v in self.variants],
            "shapes": [list(s) for s in self.shapes],
            "warmup": self.warmup,
            "iters": self.iters,
        }

    @property
    def measured(self) -> tuple[Variant, ...]:
        return (*dict.fromkeys(v.baseline for v in self.variants), *self.variants)


def validate_options(
    calibration: Calibration,
    *,
    device: str | None,
    recipes: str | None,
    implementation: str | None,
    before: str | None,
    after: str | None,
    contexts: str | None,
    shape_texts: tuple[str, ...],
    limit: int | None,
    budget_s: float | None,
) -> ValidateOptions:
    """`f8roof validate`'s options: the calibration's device and its tensorwise and rowwise
    variants unless others are named; the first `limit` shapes."""
    from f8roof.device.calibrate import requested_contexts, requested_variants
    from f8roof.inputs.shapes import parse_shape

    device = device or calibration.environment.device
    if recipes or implementation or before or after or contexts:
        variants = requested_variants(
            recipes,
            implementation,
            requested_contexts(before, after, contexts),
            default=VALIDATION_RECIPES,
        )
    else:
        variants = calibrated_variants(calibration)
    options = ValidateOptions.defaults(
        device, variants=variants, shapes=tuple(parse_shape(t) for t in shape_texts)
    )
    return replace(options, shapes=options.shapes[:limit], budget_s=budget_s)


def measure(
    variant: Variant, shape: Shape, options: ValidateOptions, trace_path: Path | None
) -> dict[str, Any]:
    from f8roof.profiler.timing import linear_step, measure_step

    step = linear_step(variant, *shape, device=options.device)
    times = measure_step(
        step,
        device=options.device,
        warmup=options.warmup,
        iters=options.iters,
        trace_path=str(trace_path) if trace_path else None,
    )
    return asdict(
        StepMeasurement(
            variant.key, *shape, times.device_s, times.gemm_s, times.wall_s, times.launches
        )
    )


@dataclass(frozen=True, eq=False)
class ValidationRun:
    frame: pd.DataFrame  # one row per (variant, shape) measured
    stats: pd.DataFrame  # error statistics per variant
    environment: Environment
    checkpoint: Checkpoint
    complete: bool  # every (variant, shape) measured: the checkpoint can go once reported

    def reported(self) -> None:
        """Call once the report is written: a complete run's checkpoint is then redundant."""
        if self.complete:
            self.checkpoint.remove()


def _trace(trace_dir: Path | None, variant: Variant, shape: Shape) -> Path | None:
    """Where the first shape's profiler trace goes, when traces are asked for."""
    if trace_dir is None:
        return None
    trace_dir.mkdir(parents=True, exist_ok=True)
    return trace_dir / f"validate_{variant.slug}_{shape_text(shape)}.json"


def validate(
    calibration: Calibration,
    options: ValidateOptions,
    out_dir: Path,
    *,
    resume: bool,
    progress: Callable | None = None,
    trace_dir: Path | None = None,
) -> ValidationRun:
    from f8roof.profiler.device import (
        check_same_device,
        environment,
        require_cpu_rowwise,
        require_device,
    )

    if not calibration.is_measured:
        raise F8RoofError(
            "a traffic calibration has nothing measured to validate: calibrate on the device first"
        )
    require_device(options.device)
    check_same_device(calibration.environment, options.device)
    require_cpu_rowwise([v.recipe for v in options.variants], device=options.device)
    fitted = set(calibration.fit_shapes)
    overlap = [s for s in options.shapes if s in fitted]
    if overlap:
        raise F8RoofError(f"shape {overlap[0]} was used to fit the calibration: validate on others")
    for variant in options.measured:
        calibration.variant(variant.key)
    checkpoint = Checkpoint(out_dir / "validation.partial.jsonl", options.header(), resume=resume)
    work = [(v, s) for s in options.shapes for v in options.measured]
    todo = [
        Task(
            f"{v.key}/{shape_text(s)}",
            f"{v.key} {shape_text(s)}",
            measure,
            {"variant": v, "shape": s, "options": options, "trace_path": _trace(trace_dir, v, s)}
            if s == options.shapes[0]
            else {"variant": v, "shape": s, "options": options, "trace_path": None},
        )
        for v, s in work
        if checkpoint.done(f"{v.key}/{shape_text(s)}") is None
    ]
    run_tasks(todo, checkpoint, budget_s=options.budget_s, progress=progress)
    steps = {
        (r["variant"], (r["M"], r["K"], r["N"])): StepMeasurement(
            **{k: v for k, v in r.items() if k != "key"}
        )
        for r in checkpoint.records
    }
    pairs = [
        Pair(v, steps[(v.baseline.key, s)], steps[(v.key, s)])
        for s in options.shapes
        for v in options.variants
        if (v.baseline.key, s) in steps and (v.key, s) in steps
    ]
    if not pairs:
        raise F8RoofError(
            f"budget of {options.budget_s:.0f} s spent before one shape was measured; "
            f"checkpoint kept in {out_dir}: run again with {term('resume')}"
        )
    frame = validation_frame(calibration, pairs)
    complete = len(pairs) == len(options.shapes) * len(options.variants)
    return ValidationRun(frame, summary(frame), environment(options.device), checkpoint, complete)
