"""Measured vs predicted speedups: the validation report (CSV + markdown).

Pure: takes step measurements made at shapes the calibration never saw, predicts them with the
calibrated model and with the seed's roofline method (worst-case bytes at 92% of datasheet
bandwidth, gemms at 60% of datasheet FLOP/s, a standalone linear: nothing fused), and
reports both errors. Errors are signed percentages of the measured speedup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from f8roof.calibration import Calibration, StepMeasurement
from f8roof.estimate import EstimateConfig, estimate
from f8roof.models.hardware import GPU
from f8roof.models.recipes import Recipe


@dataclass(frozen=True)
class Pair:
    """bf16 and float8 steps of one recipe at one shape."""

    recipe: str
    bf16: StepMeasurement
    fp8: StepMeasurement


def percent_error(predicted, measured):
    return 100.0 * (np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)


def validation_frame(calibration: Calibration, gpu: GPU, pairs: list[Pair]) -> pd.DataFrame:
    rows = []
    for recipe_name in dict.fromkeys(p.recipe for p in pairs):
        mine = [p for p in pairs if p.recipe == recipe_name]
        shapes = [(p.fp8.M, p.fp8.K, p.fp8.N) for p in mine]
        recipe = Recipe.from_name(recipe_name)
        ours = estimate(shapes, EstimateConfig(recipe, gpu, calibration=calibration))
        seed = estimate(shapes, EstimateConfig(recipe, gpu))
        for p, o, s in zip(mine, ours.itertuples(), seed.itertuples()):
            measured = p.bf16.device_s / p.fp8.device_s
            measured_wall = p.bf16.wall_s / p.fp8.wall_s
            rows.append(
                {
                    "M": p.fp8.M,
                    "K": p.fp8.K,
                    "N": p.fp8.N,
                    "recipe": recipe_name,
                    "measured_speedup": measured,
                    "predicted_speedup": o.speedup,
                    "seed_speedup": s.speedup_worst,
                    "error_pct": float(percent_error(o.speedup, measured)),
                    "seed_error_pct": float(percent_error(s.speedup_worst, measured)),
                    "measured_bf16_s": p.bf16.device_s,
                    "predicted_bf16_s": o.bf16_s,
                    "measured_fp8_s": p.fp8.device_s,
                    "predicted_fp8_s": o.fp8_s,
                    # where an error comes from: gemms, overhead kernels, the rest (fixed costs)
                    "measured_fp8_gemm_s": p.fp8.gemm_s,
                    "predicted_fp8_gemm_s": o.fp8_gemm_s,
                    "measured_fp8_other_s": p.fp8.device_s - p.fp8.gemm_s,
                    "predicted_overhead_s": o.overhead_s_fitted,
                    "measured_bf16_gemm_s": p.bf16.gemm_s,
                    "predicted_bf16_gemm_s": o.bf16_gemm_s,
                    "measured_wall_speedup": measured_wall,
                    "predicted_wall_speedup": o.speedup_wall,
                    "wall_error_pct": float(percent_error(o.speedup_wall, measured_wall)),
                }
            )
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per recipe: median and max absolute error of ours and the seed's, on both clocks."""

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

    return pd.DataFrame({name: stats(g) for name, g in frame.groupby("recipe", sort=False)}).T


def measured_square_breakeven(frame: pd.DataFrame, recipe: str) -> int | None:
    """Smallest measured square size from which float8 keeps winning."""
    squares = frame[(frame.recipe == recipe) & (frame.M == frame.K) & (frame.K == frame.N)]
    squares = squares.sort_values("M")
    winning = squares["measured_speedup"].to_numpy() > 1
    if not winning.any() or not winning[-1]:
        return None
    last_loss = np.flatnonzero(~winning)
    return int(squares["M"].iloc[last_loss[-1] + 1 if len(last_loss) else 0])


def markdown_report(frame: pd.DataFrame, calibration: Calibration) -> str:
    env = calibration.environment
    lines = [
        "# f8roof validation",
        "",
        (
            f"Device {env.device_name} ({env.device}), torch {env.torch}, triton {env.triton}, "
            f"CUDA {env.cuda}; calibration of {env.date}."
        ),
        (
            "Speedup = bf16 / float8 time of a compiled forward+backward. Device clock: summed "
            "kernel durations from the profiler. Errors: (predicted - measured) / measured."
        ),
        "Seed: worst-case bytes at 92% of datasheet bandwidth, gemms at 60% of datasheet FLOP/s.",
        "",
        "## Accuracy",
        "",
        "| recipe | shapes | median abs error | max abs error | seed median | seed max | wall median | wall max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for recipe, s in summary(frame).iterrows():
        lines.append(
            f"| {recipe} | {int(s.shapes)} | {s.median_abs_error_pct:.1f}% | {s.max_abs_error_pct:.1f}% "
            f"| {s.seed_median_abs_error_pct:.1f}% | {s.seed_max_abs_error_pct:.1f}% "
            f"| {s.wall_median_abs_error_pct:.1f}% | {s.wall_max_abs_error_pct:.1f}% |"
        )
    lines += ["", "## Square breakeven (measured)", ""]
    for recipe in frame.recipe.unique():
        size = measured_square_breakeven(frame, recipe)
        lines.append(
            f"- {recipe}: "
            + (
                f"float8 wins from M = K = N = {size}"
                if size
                else "float8 does not win on the measured squares"
            )
        )
    lines += [
        "",
        "## Worst shapes",
        "",
        "| recipe | M | K | N | measured | predicted | error | fp8 gemm meas/pred us | overhead meas/pred us |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    worst = frame.reindex(frame["error_pct"].abs().sort_values(ascending=False).index).head(10)
    for r in worst.itertuples():
        lines.append(
            f"| {r.recipe} | {r.M} | {r.K} | {r.N} | {r.measured_speedup:.3f} | {r.predicted_speedup:.3f} "
            f"| {r.error_pct:+.1f}% | {r.measured_fp8_gemm_s * 1e6:.1f} / {r.predicted_fp8_gemm_s * 1e6:.1f} "
            f"| {r.measured_fp8_other_s * 1e6:.1f} / {r.predicted_overhead_s * 1e6:.1f} |"
        )
    return "\n".join(lines) + "\n"
