"""What calibrate and validate print when they finish, and the `gpus` and `models` listings."""

from __future__ import annotations

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
        regimes, unfitted = variant.traffic.regimes, variant.traffic.unfitted
        lines.append(
            f"  {variant.variant}: bytes = {regimes[0].total}"
            + (f" (+{len(regimes) - 1} more kernel sets)" if len(regimes) > 1 else "")
            + (f"; {len(unfitted)} shape groups unfitted" if unfitted else "")
        )
    return lines


def validation_lines(frame: pd.DataFrame, stats: pd.DataFrame, out_dir: str) -> list[str]:
    lines = [f"wrote {out_dir}/validation.md and validation.csv ({len(frame)} rows)"]
    for name, s in stats.iterrows():
        lines.append(
            f"  {name}: speedup error median {s.median_abs_error_pct:.1f}%, max "
            f"{s.max_abs_error_pct:.1f}% (the seed's model: {s.seed_median_abs_error_pct:.1f}%, "
            f"{s.seed_max_abs_error_pct:.1f}%); wall clock median "
            f"{s.wall_median_abs_error_pct:.1f}%"
        )
    return lines


def gpus_text() -> str:
    from f8roof.models.hardware import PRESETS

    lines = [f"{'name':10} {'bf16 TFLOP/s':>12} {'fp8 TFLOP/s':>12} {'HBM TB/s':>9}  matches"]
    for gpu in PRESETS.values():
        lines.append(
            f"{gpu.name:10} {gpu.bf16_flops / 1e12:12.1f} {gpu.fp8_flops / 1e12:12.1f} "
            f"{gpu.memory_bandwidth_bytes_per_s / 1e12:9.2f}  {', '.join(gpu.device_prefixes)}"
        )
    lines.append("custom GPU: --gpu custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12")
    return "\n".join(lines)


def models_text() -> str:
    from f8roof.architectures.catalog import BUILTIN_NAMES, builtin

    lines = []
    for name in BUILTIN_NAMES:
        arch = builtin(name)
        lines.append(
            f"{name:16} {len(arch.linears):2} linear types, {arch.linear_count:5} linears, "
            f"{arch.parameter_count / 1e9:7.2f}B linear weights  {arch.source}"
        )
    return "\n".join(lines)
