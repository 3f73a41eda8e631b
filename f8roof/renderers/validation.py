"""validate's report files: validation.csv (one row per variant and shape), validation.md
(accuracy per variant, measured breakevens, the worst shapes) and environment.json."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from f8roof.calibration.file import Calibration
from f8roof.device.accuracy import GROUP, group_name, measured_square_breakeven, summary
from f8roof.device.validate import ValidationRun
from f8roof.files import write_texts_atomic
from f8roof.renderers.runs import percent


def write_validation(run: ValidationRun, calibration: Calibration, out_dir: str | Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    environment = pd.Series(asdict(run.environment)).to_json(indent=1)
    write_texts_atomic(  # one set: all three written, or none changed
        {
            out_dir / "validation.csv": run.frame.to_csv(index=False),
            out_dir / "validation.md": markdown_report(run.frame, calibration),
            out_dir / "environment.json": environment + "\n",
        }
    )


def markdown_report(frame: pd.DataFrame, calibration: Calibration) -> str:
    env = calibration.environment
    lines = [
        "# f8roof validation",
        "",
        f"Device {env.label}, {env.versions}, CUDA {env.cuda}; calibration of {env.date}.",
        (
            "Speedup = bf16 / float8 device time of a compiled forward+backward (with a context, "
            "the norm and activation kernels are in both). Device clock: summed kernel durations "
            "from the profiler. Errors: (predicted - measured) / measured."
        ),
        "Seed: worst-case bytes at 92% of datasheet bandwidth, gemms at 60% of datasheet FLOP/s.",
        "",
        "## Accuracy",
        "",
        (
            "| variant | shapes | median abs error | max abs error | seed median | seed max "
            "| wall median | wall max |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summary(frame).iterrows():
        cells = (
            s.median_abs_error_pct,
            s.max_abs_error_pct,
            s.seed_median_abs_error_pct,
            s.seed_max_abs_error_pct,
            s.wall_median_abs_error_pct,
            s.wall_max_abs_error_pct,
        )
        lines.append(
            f"| {name} | {int(s.shapes)} | " + " | ".join(percent(c) for c in cells) + " |"
        )
    lines += ["", "## Square breakeven (measured)", ""]
    for key, group in frame.groupby(GROUP, sort=False):
        size = measured_square_breakeven(group)
        won = f"float8 wins from M = K = N = {size}" if size else "float8 does not win on them"
        lines.append(f"- {group_name(key)}: {won}")
    lines += [
        "",
        "## Worst shapes",
        "",
        (
            "| variant | M | K | N | measured | predicted | error | fp8 gemm meas/pred us "
            "| fp8 other meas/pred us |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    worst = frame.reindex(frame["error_pct"].abs().sort_values(ascending=False).index).head(10)
    for r in worst.itertuples():
        name = group_name((r.implementation, r.recipe, r.context))
        lines.append(
            f"| {name} | {r.M} | {r.K} | {r.N} | {r.measured_speedup:.3f} "
            f"| {r.predicted_speedup:.3f} | {r.error_pct:+.1f}% "
            f"| {r.measured_fp8_gemm_s * 1e6:.1f} / {r.predicted_fp8_gemm_s * 1e6:.1f} "
            f"| {r.measured_fp8_other_s * 1e6:.1f} / {r.predicted_fp8_other_s * 1e6:.1f} |"
        )
    return "\n".join(lines) + "\n"
