"""Listings and what long commands print when they finish: `f8roof gpus` (every preset's
ceilings, the scaled gemms it runs and where each number comes from), the `models` listing,
and what calibrate and validate print."""

from __future__ import annotations

import math

import pandas as pd

from f8roof.calibration.file import Calibration
from f8roof.hardware.fabric import Fabric
from f8roof.hardware.presets import GPU, PRESETS
from f8roof.hardware.support import ScaledGemm, unsupported_reason
from f8roof.timing.datasheet import preset_efficiency

TERA = 1e12
# The gemms a training recipe needs, in the order the column lists them.
GEMMS = (ScaledGemm.TENSORWISE, ScaledGemm.ROWWISE, ScaledGemm.BLOCKWISE, ScaledGemm.MXFP8)
HEADER = (
    f"{'name':10} {'arch':7} {'bf16':>7} {'fp8':>7} {'mxfp8':>7} {'fp4':>7} {'HBM':>5} {'copy':>5} "
    f"{'power':>6}  {'float8':6} {'scaled gemms':34} matches"
)
UNITS = (
    f"{'':10} {'':7} {'TFLOP/s':>7} {'TFLOP/s':>7} {'TFLOP/s':>7} {'TFLOP/s':>7} {'TB/s':>5} "
    f"{'':>5} {'W':>6}"
)


def gpus_text(*, sources: bool = True) -> str:
    """The presets as a table; with `sources`, each preset's citations and assumptions."""
    gpus = list(PRESETS.values())
    lines = [HEADER, UNITS, *(_row(gpu) for gpu in gpus)]
    lines.append("custom GPU: --gpu custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12")
    lines.append("copy: fraction of HBM bandwidth a generated elementwise kernel reaches")
    if sources:
        for gpu in gpus:
            lines.extend(["", *_provenance(gpu)])
    return "\n".join(lines)


def _row(gpu: GPU) -> str:
    mx, fp4 = (
        f"{peak / TERA:7.0f}" if peak else f"{'-':>7}" for peak in (gpu.mx_flops, gpu.fp4_flops)
    )
    power = f"{gpu.power_w:6d}" if gpu.power_w else f"{'?':>6}"
    runs = ",".join(g.value for g in GEMMS if unsupported_reason(gpu, g) is None)
    copy = preset_efficiency(gpu).memory_efficiency
    return (
        f"{gpu.name:10} {gpu.arch_label:7} {gpu.bf16_flops / TERA:7.0f} "
        f"{gpu.fp8_flops / TERA:7.0f} {mx} {fp4} {gpu.memory_bandwidth_bytes_per_s / TERA:5.2f} "
        f"{copy:5.2f} {power}  {gpu.fp8_dtype_family.value:6} {runs:34} "
        f"{', '.join(gpu.device_prefixes) or '(by name only)'}"
    )


def _provenance(gpu: GPU) -> list[str]:
    chosen = preset_efficiency(gpu)
    lines = [f"{gpu.name}:"]
    lines += [f"  datasheet: {s}" for s in gpu.sources]
    lines += [f"  note: {n}" for n in gpu.notes]
    lines += [f"  timing: {s}" for s in chosen.sources]
    lines += [f"  assumes: {a}" for a in chosen.assumptions]
    if isinstance(gpu.fabric, Fabric):
        lines.append(f"  fabric: {gpu.fabric.name}, {gpu.fabric.gpus_per_node} GPUs per node")
    lines += [f"  fabric: {s}" for s in gpu.fabric.sources] if gpu.fabric is not None else []
    return lines


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
