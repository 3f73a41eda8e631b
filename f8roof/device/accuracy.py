"""Measured vs predicted speedups: the validation report (CSV + markdown).

Pure: takes step measurements made at shapes the calibration never saw, predicts them with the
calibrated model and with the seed's roofline method (worst-case bytes at 92% of datasheet
bandwidth, gemms at 60% of datasheet FLOP/s, a standalone linear: nothing fused), and
reports both errors. Errors are signed percentages of the measured speedup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from f8roof.calibration.file import Calibration, StepMeasurement
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import PRESETS
from f8roof.traffic.variant import Variant, context_fused_roles


@dataclass(frozen=True)
class Pair:
    """The bf16 and float8 steps of one variant at one shape (same context)."""

    variant: Variant
    bf16: StepMeasurement
    fp8: StepMeasurement


def percent_error(predicted, measured):
    return 100.0 * (np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)


def median_abs_error(predicted, measured) -> float:
    """The median |predicted / measured - 1|: the figure a validation's predictions are quoted
    by (the plot's legend and the summary alike)."""
    ratio = np.asarray(predicted, dtype=np.float64) / np.asarray(measured, dtype=np.float64)
    return float(np.median(np.abs(ratio - 1)))


def validation_frame(calibration: Calibration, pairs: list[Pair]) -> pd.DataFrame:
    """Measured vs predicted speedup of each pair's whole compiled graph (with a context, the
    context kernels are in both times, as torchao's float8 benchmark measures them). The seed's
    method needs the GPU's datasheet: without a preset (a CPU) its columns are NaN."""
    preset = calibration.environment.gpu
    gpu = PRESETS[preset] if preset else PRESETS["h100"]
    rows = []
    for variant in dict.fromkeys(p.variant for p in pairs):
        mine = [p for p in pairs if p.variant == variant]
        shapes = [(p.fp8.M, p.fp8.K, p.fp8.N) for p in mine]
        assert variant.recipe is not None and variant.implementation is not None
        common: dict[str, Any] = {
            "recipe": variant.recipe,
            "gpu": gpu,
            "implementation": variant.implementation,
            "context": variant.context,
        }
        ours = estimate(shapes, EstimateConfig(**common, calibration=calibration)).to_frame()
        seed = estimate(
            shapes, EstimateConfig(**common, fused=context_fused_roles(variant.context))
        )
        seed_speedup = seed["speedup_worst"] if preset else np.full(len(mine), np.nan)
        for p, o, seed_value in zip(mine, ours.itertuples(), seed_speedup):
            measured = p.bf16.device_s / p.fp8.device_s
            measured_wall = p.bf16.wall_s / p.fp8.wall_s
            rows.append(
                {
                    "M": p.fp8.M,
                    "K": p.fp8.K,
                    "N": p.fp8.N,
                    "recipe": variant.recipe.name,
                    "implementation": variant.implementation.value,
                    "context": variant.context.name,
                    "measured_speedup": measured,
                    "predicted_speedup": o.speedup_context,
                    "seed_speedup": seed_value,
                    "error_pct": float(percent_error(o.speedup_context, measured)),
                    "seed_error_pct": float(percent_error(seed_value, measured)),
                    "measured_bf16_s": p.bf16.device_s,
                    "predicted_bf16_s": o.bf16_s + o.context_s,
                    "measured_fp8_s": p.fp8.device_s,
                    "predicted_fp8_s": o.fp8_s + o.context_s,
                    # where an error comes from: gemms, non-gemm kernels, the rest (fixed costs)
                    "measured_fp8_gemm_s": p.fp8.gemm_s,
                    "predicted_fp8_gemm_s": o.fp8_gemm_s,
                    "measured_fp8_other_s": p.fp8.device_s - p.fp8.gemm_s,
                    "predicted_fp8_other_s": o.overhead_s_fitted + o.context_s,
                    "measured_bf16_gemm_s": p.bf16.gemm_s,
                    "predicted_bf16_gemm_s": o.bf16_gemm_s,
                    "measured_wall_speedup": measured_wall,
                    "predicted_wall_speedup": o.speedup_wall,
                    "wall_error_pct": float(percent_error(o.speedup_wall, measured_wall)),
                }
            )
    return pd.DataFrame(rows)


GROUP = ["implementation", "recipe", "context"]


def group_name(key: tuple[str, str, str]) -> str:
    implementation, recipe, context = key
    return f"{implementation}:{recipe}" + ("" if context == "none" else f"@{context}")


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per variant: median and max absolute error of ours and the seed's, on both clocks."""

    def stats(group: pd.DataFrame) -> pd.Series:
        return pd.Series(
            {
                "shapes": len(group),
                "median_abs_error_pct": group["error_pct"].abs().median(),
                "max_abs_error_pct": group["error_pct"].abs().max(),
                "seed_median_abs_error_pct": group["seed_error_pct"].abs().median(),
                "seed_max_abs_error_pct": group["seed_error_pct"].abs().max(),
                "wall_median_abs_error_pct": group["wall_error_pct"].abs().median(),
                "wall_max_abs_error_pct": group["wall_error_pct"].abs().max(),
            }
        )

    groups = frame.groupby(GROUP, sort=False)
    return pd.DataFrame({group_name(key): stats(g) for key, g in groups}).T


def measured_square_breakeven(group: pd.DataFrame) -> int | None:
    """Smallest measured square size from which float8 keeps winning, in one variant's rows."""
    squares = group[(group.M == group.K) & (group.K == group.N)].sort_values("M")
    winning = squares["measured_speedup"].to_numpy() > 1
    if not winning.any() or not winning[-1]:
        return None
    last_loss = np.flatnonzero(~winning)
    return int(squares["M"].iloc[last_loss[-1] + 1 if len(last_loss) else 0])
