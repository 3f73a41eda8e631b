"""What calibrate and validate print when they finish, and the `models` listing (`gpus`:
renderers/gpus.py)."""

from __future__ import annotations

import math

import pandas as pd

from f8roof.calibration.file import Calibration


def calibration_lines(calibration: Calibration, out: str) -> list[str]:
    lines = [f"wrote {out}: {calibration.source}"]
    if calibration.is_measured:
        residuals = calibration.kernel_time.residuals
        lines.append(
            f"{len(calibration.steps)} steps, {len(calibration.kernels)} kernel timings, "
            f"{len(calibration.gemms)} gemm timings; kernel-time model residuals: median "
            f"{residuals.median:.1%}, max {residuals.max:.1%} over {residuals.count} kernels"
        )
    for variant in calibration.variants:
        kernel_sets, unfitted = variant.traffic.kernel_sets, variant.traffic.unfitted
        lines.append(
            f"  {variant.variant}: bytes = {kernel_sets[0].total}"
            + (f" (+{len(kernel_sets) - 1} more kernel sets)" if len(kernel_sets) > 1 else "")
            + (f"; {len(unfitted)} shape groups unfitted" if unfitted else "")
        )
    return lines


def validation_lines(frame: pd.DataFrame, stats: pd.DataFrame, out_dir: str) -> list[str]:
    lines = [f"wrote {out_dir}/validation.md and validation.csv ({len(frame)} rows)"]
    for name, s in stats.iterrows():
        seed = (
            f"the seed's model: {percent(s.seed_median_abs_error_pct)}, "
            f"{percent(s.seed_max_abs_error_pct)}"
            if math.isfinite(s.seed_median_abs_error_pct)
            else "the seed's model: none here, its datasheet rooflines need a GPU preset"
        )
        lines.append(
            f"  {name}: speedup error median {percent(s.median_abs_error_pct)}, max "
            f"{percent(s.max_abs_error_pct)} ({seed}); wall clock median "
            f"{percent(s.wall_median_abs_error_pct)}"
        )
    return lines


def percent(value: float) -> str:
    """'12.3%', or '-' where there is no figure (never 'nan%')."""
    return f"{value:.1f}%" if math.isfinite(value) else "-"


def models_text() -> str:
    from f8roof.training.catalog import BUILTIN_NAMES, builtin

    lines = []
    for name in BUILTIN_NAMES:
        arch = builtin(name)
        lines.append(
            f"{name:16} {len(arch.linears):2} linear types, {arch.linear_count:5} linears, "
            f"{arch.parameter_count / 1e9:7.2f}B linear weights  {arch.source}"
        )
    return "\n".join(lines)
