"""Listings and what long commands print when they finish: `f8roof gpus` (every preset's
ceilings, the scaled gemms it runs and where each number comes from), the `models` listing,
what calibrate and validate print, and `plan`'s search (the best run of each precision)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from f8roof.calibration.file import Calibration
from f8roof.columns import Columns
from f8roof.engine.step.search import Arm, Point, Search, torchtitan_overrides
from f8roof.hardware.fabric import Fabric
from f8roof.hardware.presets import GPU, PRESETS
from f8roof.hardware.support import ScaledGemm, unsupported_reason
from f8roof.timing.datasheet import preset_efficiency

TERA = 1e12
GIB = 2**30
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


def search_text(search: Search, *, top: int = 5) -> str:
    """`f8roof plan`'s answer, within 100 columns: the best run of each precision, the float8
    speedup re-tuned beside like-for-like, the top `top` of each, torchtitan's overrides for
    each best, and last the search's wall time (alone on its line: it changes run to run)."""
    same, retuned = search.like_for_like_speedup, search.retuned_speedup
    lines = [
        (
            f"{search.model} on {search.gpus} {search.gpu}, seq_len {search.seq_len}: "
            f"{len(search.points)} layouts evaluated, {len(search.refused)} refused"
        )
    ]
    if search.fuse_qkv:
        lines.append(
            "q, k and v fused (attention.qkv_linear.wqkv; torchtitan's builders' fuse_qkv, "
            "no config key)"
        )
    for arm in Arm:
        lines += _best(search, arm)
    if retuned is None:
        lines.append("float8 speedup: none, one precision fits no layout")
    else:
        lines.append(f"float8 speedup: {retuned:.3f}x re-tuned (each precision at its best)")
        lines.append(
            "  float8 does not fit at the bf16 best's layout"
            if same is None
            else f"  {same:.3f}x like-for-like (float8 at the bf16 best's layout)"
        )
    for arm in Arm:
        lines += ["", f"top {top} {arm.value}:", SEARCH_HEADER]
        lines += [_search_row(p, arm) for p in search.ranked(arm)[:top]]
    for arm in (a for a in Arm if search.fits(a)):
        lines += [
            "",
            f"torchtitan overrides, best {arm.value}:",
            overrides_text(search.best(arm), arm),
        ]
    lines += ["", f"search took {search.wall_s:.1f} s"]
    return "\n".join(lines)


SEARCH_HEADER = (
    f"{'tokens/s/GPU':>12} {'peak GiB':>8} {'tp':>2} {'cp':>2} {'ep':>2} {'pp':>2} {'fsdp':>4} "
    f"{'repl':>4} {'recompute':9} {'batch':>5} {'recipe':10} float8 all-gather"
)


def _best(search: Search, arm: Arm) -> list[str]:
    """A precision's best: its tokens/s and peak, then its layout on a line of its own."""
    label = f"best {arm.value + ':':7}"
    if not search.fits(arm):
        return [f"{label} fits no layout"]
    point = search.best(arm)
    lay = point.layout
    degrees = "".join(
        f", {name} {degree}"
        for name, degree in (("cp", lay.cp), ("ep", lay.ep), ("replicate", lay.replicate))
        if degree > 1
    )
    layout = (
        f"  tp {lay.tp}, pp {lay.pp}, fsdp {lay.fsdp}{degrees}, recompute "
        f"{lay.recompute.value}, local batch {lay.local_batch}"
    )
    if arm is Arm.FLOAT8:
        layout += f", {lay.recipe}" + (", float8 all-gather" if point.float8_all_gather else "")
    head = (
        f"{label} {point.tokens_per_s(arm):,.0f} tokens/s per GPU, peak "
        f"{point.peak_bytes(arm) / GIB:.1f} GiB"
    )
    return [head, layout]


def _search_row(point: Point, arm: Arm) -> str:
    lay = point.layout
    recipe = lay.recipe if arm is Arm.FLOAT8 else "-"
    gather = ("yes" if point.float8_all_gather else "no") if arm is Arm.FLOAT8 else "-"
    return (
        f"{point.tokens_per_s(arm):>12,.0f} {point.peak_bytes(arm) / GIB:>8.1f} {lay.tp:>2} "
        f"{lay.cp:>2} {lay.ep:>2} {lay.pp:>2} {lay.fsdp:>4} {lay.replicate:>4} "
        f"{lay.recompute.value:9} {lay.local_batch:>5} {recipe:10} {gather}"
    )


def overrides_text(point: Point, arm: Arm) -> str:
    """torchtitan's dotted overrides, one `--set key=value` a line (TOML values), as
    `estimate --setup` takes them."""
    return "\n".join(
        f"  --set {key}={_toml(value)}" for key, value in torchtitan_overrides(point, arm)
    )


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def search_rows(search: Search) -> Columns:
    """Every layout evaluated as rows (one per layout), for `--out`."""
    points = search.points
    return Columns(
        {
            "recipe": np.array([p.layout.recipe for p in points], dtype=object),
            "tp": np.array([p.layout.tp for p in points]),
            "cp": np.array([p.layout.cp for p in points]),
            "ep": np.array([p.layout.ep for p in points]),
            "pp": np.array([p.layout.pp for p in points]),
            "fsdp": np.array([p.layout.fsdp for p in points]),
            "replicate": np.array([p.layout.replicate for p in points]),
            "recompute": np.array([p.layout.recompute.value for p in points], dtype=object),
            "local_batch": np.array([p.layout.local_batch for p in points]),
            "seq_len": np.array([p.seq_len for p in points]),
            "tokens_per_gpu": np.array([p.tokens_per_gpu for p in points]),
            "bf16_s": np.array([p.bf16_s for p in points]),
            "fp8_s": np.array([p.fp8_s for p in points]),
            "bf16_tokens_per_s": np.array([p.tokens_per_s(Arm.BF16) for p in points]),
            "fp8_tokens_per_s": np.array([p.tokens_per_s(Arm.FLOAT8) for p in points]),
            "bf16_peak_bytes": np.array([p.bf16_peak_bytes for p in points]),
            "fp8_peak_bytes": np.array([p.fp8_peak_bytes for p in points]),
            "bf16_fits": np.array([p.bf16_fits for p in points]),
            "fp8_fits": np.array([p.fp8_fits for p in points]),
            "float8_all_gather": np.array([p.float8_all_gather for p in points]),
        }
    )
