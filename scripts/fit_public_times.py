"""Fit the public time model to the repository's published data and write
f8roof/calibration/data/public_times.json (a rebuild on any machine reproduces what the data
determine, to the tolerances a test states).

Prints every parameter with its range over the fits that leave out a fold or a source, the data
behind the fit, the residuals on it, the cross-validated error of the heatmap cells (10 folds,
per N), of each source left out and of each part left out. See scripts/public_fit.py for the model.

    PYTHONPATH=. python scripts/fit_public_times.py [--out PATH] [--quiet]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import public_fit  # scripts/public_fit.py: the fit itself, beside this script

from f8roof.calibration import public_file
from f8roof.calibration.file import Calibration, retimed
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation

VARIANT = {
    "recipe": Recipe.from_name("rowwise"),
    "implementation": Implementation.TORCHAO,
    "context": Context.from_names("layernorm", "sigmoid"),
}


def as_estimated(data: public_fit.Data, report: public_fit.Report) -> list[str]:
    """The cells as `f8roof estimate --gpu h100-meta` answers them: the shipped calibration's
    fitted bytes (12 fit shapes, not each cell's own code), each fold's cells timed by the fit
    that left the fold out."""
    gpu = find_gpu("h100-meta")
    traffic = Calibration.load(shipped_calibration(gpu))
    shapes = data.cells.shape.astype(np.int64)
    fold_of = np.arange(len(shapes)) % public_fit.FOLDS
    predicted = np.empty(len(shapes))
    for f, x in enumerate(report.folds):
        part = public_fit.parts_of(x)["h100-meta"]
        config = EstimateConfig(gpu=gpu, calibration=retimed(traffic, part, gpu), **VARIANT)
        frame = estimate(shapes[fold_of == f], config)
        predicted[fold_of == f] = frame["speedup_context"]
    error = np.abs(predicted / data.cells.measured - 1)
    lines = [
        (
            "the same cells as `f8roof estimate --gpu h100-meta` answers them (the shipped "
            f"calibration's fitted bytes), {public_fit.FOLDS}-fold: median |error| "
            f"{np.median(error):.1%}, max {error.max():.1%}"
        )
    ]
    for value in np.unique(shapes[:, 2]):
        pick = shapes[:, 2] == value
        lines.append(f"  N={value:<6d} median |error| {np.median(error[pick]):.1%}")
    return lines


def parameter_lines(report: public_fit.Report) -> list[str]:
    """Each parameter: value, prior, 95% interval (data and prior), what determines it, and the
    range over the fold and leave-one-source-out fits; then the data Jacobian's singular values."""
    c = report.conditioning
    lines = [
        (
            f"parameters ({len(public_fit.PARAMETERS)}; 95% interval from the data and the "
            "priors at the fit; range over fold and leave-one-source-out fits):"
        )
    ]
    for i, (p, r) in enumerate(zip(public_fit.PARAMETERS, public_fit.parameter_ranges(report))):
        half = 2 * c.sd[i] * p.width
        low, high = max(r.value - half, p.low), min(r.value + half, p.high)
        if c.at_bound[i] and c.pull[i] == c.at_bound[i]:
            by = f"at its {'high' if c.at_bound[i] > 0 else 'low'} bound: the data push it there"
        elif c.at_bound[i]:
            by = f"at its {'high' if c.at_bound[i] > 0 else 'low'} bound"
        else:
            by = (
                "determined by the data"
                if c.determined[i]
                else "held by its prior (the data narrow it less than 2x)"
            )
        lines.append(
            f"  {p.name:20s} {r.value:9.4g} {p.unit:9s} prior {p.prior:g}+-{p.width:g}  "
            f"95% {low:.4g}..{high:.4g}  sd {c.sd[i]:.2f} prior widths: {by}; "
            f"range {r.low:.4g}..{r.high:.4g}; bounds [{p.low:g}, {p.high:g}]"
        )
    lines.append(
        "  conditioning: singular values of the weighted data Jacobian per prior width (1: as "
        "much as a prior says): " + " ".join(f"{v:.3g}" for v in c.singular_values)
    )
    return lines


def public_fit_lines(data, report, times) -> list[str]:
    """What the fit script prints: data, parameters, public_fit.residuals, cross-validated errors."""
    cells = data.cells
    lines = [
        (
            f"data: {len(cells.measured)} heatmap cells ({cells.source[:60]}...), code of "
            f"{cells.versions}; {len(data.gemms.time_s)} gemm rows; {len(data.kernels.fraction)} "
            "kernel rows"
        ),
    ]
    for source in dict.fromkeys(data.gemms.source):
        pick = data.gemms.source == source
        parts = ", ".join(sorted(set(data.gemms.part[pick])))
        families = ", ".join(sorted(set(data.gemms.family[pick])))
        lines.append(f"  {source}: {pick.sum()} gemms ({families}) on {parts}")
    lines += [f"  left out: {why}" for why in data.gemms.left_out]
    lines.append(
        f"  read as data: {public_fit.ZERO_DATA_SOURCE}'s fp8 rows ran on zero-filled operands, "
        f"x{public_fit.ZERO_DATA_SPEEDUP:.3f} faster than on real data (A100 cuBLAS 8192^3, "
        "295 vs 257 TFLOP/s, thonking.ai 2024)"
    )
    lines += parameter_lines(report)
    n = len(cells.measured)
    none = np.zeros(n, bool)
    gemm_error = report.in_sample_gemm_error
    lines.append("fitted gemm rows, |time error| (in sample):")
    for source in dict.fromkeys(data.gemms.source):
        e = np.abs(gemm_error[data.gemms.source == source])
        lines.append(f"  {source:26s} median {np.median(e):.1%}  max {e.max():.1%}  ({len(e)})")
    lines.append(
        "the gemm model on the public gemm rows, per GPU and dtype, |time error| (in sample):"
    )
    for part in sorted(set(data.gemms.part)):
        for family in sorted(set(data.gemms.family[data.gemms.part == part])):
            pick = (data.gemms.part == part) & (data.gemms.family == family)
            e = np.abs(gemm_error[pick])
            lines.append(
                f"  {part:10s} {family:12s} median {np.median(e):.1%}  max {e.max():.1%}  "
                f"({pick.sum()})"
            )
    kernel_error = (
        np.exp(
            public_fit.residuals(
                report.x, data, cells=none, gemms=np.zeros(len(data.gemms.time_s), bool)
            )
        )
        - 1
    )
    for source, e in zip(data.kernels.source, kernel_error):
        lines.append(f"  kernel row {source}: {e:+.1%}")
    cv = report.kfold_predicted / cells.measured - 1
    lines.append(
        f"heatmap cells, {public_fit.FOLDS}-fold cross-validated |speedup error|: median {np.median(np.abs(cv)):.1%}, "
        f"90th percentile {np.quantile(np.abs(cv), 0.9):.1%}, max {np.abs(cv).max():.1%}"
    )
    for value, error in times.cv_by_n:
        pick = cells.shape[:, 2] == value
        lines.append(
            f"  N={value:<6d} median |error| {error:.1%}  median error {np.median(cv[pick]):+.1%}  "
            f"({pick.sum()} cells)"
        )
    low, high = public_fit.cell_band(data, report, times.residual_low, times.residual_high)
    width = (high - low) / public_fit.cell_speedups(report.x, data)
    inside = (data.cells.measured >= low) & (data.cells.measured <= high)
    lines.append(
        f"band at the cells (the ends' fits, widened): median width {np.median(width):.1%}, "
        f"holds {inside.mean():.1%} of the measurements (in sample)"
    )
    lines.append(
        f"band: measured/predicted in [{np.exp(times.residual_low):.3f}, "
        f"{np.exp(times.residual_high):.3f}] (cross-validated {public_fit.RESIDUAL_QUANTILES[0]:.0%}-"
        f"{public_fit.RESIDUAL_QUANTILES[1]:.0%} quantiles); coverage of held-out folds {times.coverage:.1%}"
    )
    lines.append("each source left out, predicted by the others (median |error| of its rows):")
    for source, (_, error, rows) in report.leave_out.items():
        lines.append(f"  {source:26s} {error:.1%}  ({rows} rows)")
    lines.append(
        "each part left out, its gemm rows predicted by a fit to the other parts through its "
        "datasheet (median |time error|):"
    )
    for part, (error, rows) in report.leave_part_out.items():
        lines.append(f"  {part:26s} {error:.1%}  ({rows} rows)")
    check = data.blackwell
    lines.append(
        f"checked, not fitted: {check.what} on {check.part} ({check.source}; code of "
        f"{check.versions}): modelled {check.predicted_bytes_per_s(report.x) / 1e12:.2f} TB/s "
        f"({check.arithmetic_share(report.x):.0%} of it its arithmetic), published up to "
        f"{check.published_bytes_per_s / 1e12:.1f} TB/s"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=public_file.SHIPPED)
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    start = time.monotonic()
    data = public_fit.load(args.root)
    report = public_fit.cross_validate(data)
    times = public_fit.public_times(data, report)
    public_file.save(times, args.out)
    if not args.quiet:
        for line in [*public_fit_lines(data, report, times), *as_estimated(data, report)]:
            print(line)
    print(f"wrote {args.out} in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
