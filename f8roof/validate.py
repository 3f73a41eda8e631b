"""Measure real end-to-end speedups at shapes the calibration never saw; report the error.

Each (variant, shape) step is compiled as training compiles it (static shapes, no capture
machinery), profiled for the device clock and timed for the wall clock, and checkpointed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from f8roof.calibrate import environment, require_device
from f8roof.calibration import BF16, Calibration, StepMeasurement
from f8roof.checkpoint import Checkpoint
from f8roof.errors import F8RoofError
from f8roof.files import write_text_atomic
from f8roof.models.fit import Shape
from f8roof.models.hardware import GPU, UnknownGPUError, find_gpu
from f8roof.models.recipes import Recipe
from f8roof.validation import Pair, markdown_report, summary, validation_frame

# At least 30 shapes from 256 to 16384 per dimension, disjoint from FIT_SHAPES: squares (for
# the measured breakeven), then transformer-like and odd (non-power-of-two) rectangles.
GPU_SHAPES: tuple[Shape, ...] = (
    (256, 256, 256),
    (512, 512, 512),
    (768, 768, 768),
    (1024, 1024, 1024),
    (1536, 1536, 1536),
    (2048, 2048, 2048),
    (3072, 3072, 3072),
    (4096, 4096, 4096),
    (6144, 6144, 6144),
    (8192, 8192, 8192),
    (16384, 16384, 16384),
    (8192, 4096, 1024),
    (8192, 4096, 14336),
    (8192, 14336, 4096),
    (4096, 8192, 13824),
    (4096, 13824, 8192),
    (16384, 5120, 5120),
    (2048, 4096, 11008),
    (2048, 11008, 4096),
    (1024, 7168, 15360),
    (512, 16384, 2048),
    (768, 2304, 9216),
    (3840, 1280, 5120),
    (12800, 2560, 640),
    (5120, 12288, 3328),
    (9216, 1792, 7680),
    (1280, 10240, 2560),
    (14336, 1024, 1536),
    (640, 5632, 16384),
    (11264, 6656, 2816),
    (2816, 2816, 11264),
    (7168, 3584, 896),
)
CPU_SHAPES: tuple[Shape, ...] = ((32, 80, 112), (48, 64, 96), (32, 80, 96), (64, 64, 112))
DEFAULT_RECIPES = ("tensorwise", "rowwise")


@dataclass(frozen=True)
class ValidateOptions:
    device: str
    recipes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    warmup: int = 3
    iters: int = 10

    def header(self) -> dict[str, Any]:
        return {
            "validate": self.device,
            "recipes": list(self.recipes),
            "shapes": [list(s) for s in self.shapes],
            "warmup": self.warmup,
            "iters": self.iters,
        }


def gpu_of(calibration: Calibration) -> GPU:
    """The preset for the calibrated device (datasheet numbers for the seed's method)."""
    try:
        return find_gpu(calibration.environment.device_name)
    except UnknownGPUError:
        return find_gpu("h100")


def check_same_device(calibration: Calibration, device: str) -> None:
    here = environment(device)
    made = calibration.environment
    if (made.device, made.device_name) != (here.device, here.device_name):
        raise F8RoofError(
            f"the calibration was made on {made.device_name} ({made.device}); this is "
            f"{here.device_name} ({here.device}): validate on the device it describes"
        )


def measure(
    variant: str, shape: Shape, options: ValidateOptions, trace_path: Path | None
) -> dict[str, Any]:
    from f8roof.models.variant import Implementation, Variant
    from f8roof.profiler.timing import linear_step, measure_step

    recipe = None if variant == BF16 else Recipe.from_name(variant)
    step = linear_step(Variant.of(recipe, Implementation.REFERENCE), *shape, device=options.device)
    times = measure_step(
        step,
        device=options.device,
        warmup=options.warmup,
        iters=options.iters,
        trace_path=str(trace_path) if trace_path else None,
    )
    return asdict(
        StepMeasurement(variant, *shape, times.device_s, times.gemm_s, times.wall_s, times.launches)
    )


def validate(
    calibration: Calibration,
    options: ValidateOptions,
    out_dir: Path,
    *,
    resume: bool,
    progress: Callable | None = None,
    trace_dir: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    require_device(options.device)
    check_same_device(calibration, options.device)
    fitted = set(calibration.fit_shapes)
    overlap = [s for s in options.shapes if s in fitted]
    if overlap:
        raise F8RoofError(f"shape {overlap[0]} was used to fit the calibration: validate on others")
    for name in options.recipes:
        calibration.variant(Recipe.from_name(name).name)
    checkpoint = Checkpoint(out_dir / "validation.partial.jsonl", options.header(), resume=resume)
    work = [(v, s) for s in options.shapes for v in (BF16, *options.recipes)]
    todo = [(v, s) for v, s in work if checkpoint.done(f"{v}/{s}") is None]
    for variant, shape in progress(todo) if progress else todo:
        trace = None
        if trace_dir is not None and shape == options.shapes[0]:
            trace = trace_dir / f"validate_{variant}_{'x'.join(map(str, shape))}.json"
            trace.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.add(f"{variant}/{shape}", measure(variant, shape, options, trace))
    steps = {
        (r["variant"], (r["M"], r["K"], r["N"])): StepMeasurement(
            **{k: v for k, v in r.items() if k != "key"}
        )
        for r in checkpoint.records
    }
    pairs = [
        Pair(r, steps[(BF16, s)], steps[(r, s)]) for s in options.shapes for r in options.recipes
    ]
    frame = validation_frame(calibration, gpu_of(calibration), pairs)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "validation.csv", frame.to_csv(index=False))
    write_text_atomic(out_dir / "validation.md", markdown_report(frame, calibration))
    write_text_atomic(
        out_dir / "environment.json",
        pd.Series(asdict(environment(options.device))).to_json(indent=1) + "\n",
    )
    checkpoint.remove()
    return frame, summary(frame)
