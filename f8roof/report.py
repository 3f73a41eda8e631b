"""A model's recommendation as text: the terminal table and totals, and the markdown report.

Same content in both: one row per layer type (shape, count, the estimate at the decision level,
convert or keep bf16 with the margin), the totals of the linear part of a training step, and,
when recipes are compared, each recipe's total beside the best-per-layer total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from f8roof import __version__
from f8roof.errors import F8RoofError
from f8roof.files import write_text_atomic
from f8roof.recommend import TIME_COLUMNS, Recommendation, recommend_model
from f8roof.resolve import Resolved

SPEEDUP_COLUMNS = (
    ("speedup_ideal", "x ideal"),
    ("speedup", "x fitted"),
    ("speedup_worst", "x worst"),
)


def _speedup(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" + ("+" if value > 1 else "-")


def _margin(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:+.0%}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def layer_rows(rec: Recommendation) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the per-layer table (shared by terminal and markdown). One recipe:
    its speedup at every overhead level; several: each recipe's speedup on the decision column."""
    layers = rec.layers
    bf16_col, fp8_col = TIME_COLUMNS[rec.criterion]
    if len(rec.recipes) > 1:
        speedups = [(f"{rec.criterion}_{r}", f"x {r}") for r in rec.recipes]
    else:
        speedups = [(c, h) for c, h in SPEEDUP_COLUMNS if c in layers.columns]
    header = (
        ["layer", "count", "K", "N", "recipe", "bf16 us", "fp8 us"]
        + [h for _, h in speedups]
        + ["decision", "margin", "bf16 ms/step", "saved ms/step", "note"]
    )
    rows = []
    for _, r in layers.iterrows():
        rows.append(
            [
                str(r["fqn"]),
                str(r["count"]),
                str(r["K"]),
                str(r["N"]),
                str(r["recipe"]),
                f"{r[bf16_col] * 1e6:.1f}",
                f"{r[fp8_col] * 1e6:.1f}",
            ]
            + [_speedup(float(r[c])) for c, _ in speedups]
            + [
                str(r["decision"]),
                _margin(float(r["margin"])),
                _ms(r["bf16_step_s"]),
                _ms(r["saved_step_s"]),
                str(r["note"]),
            ]
        )
    return header, rows


def _aligned(header: list[str], rows: list[list[str]], *, color: bool) -> str:
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    text_cols = {0, header.index("recipe"), header.index("decision"), len(header) - 1}

    def line(cells: list[str]) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells, widths)):
            padded = cell.ljust(width) if i in text_cols else cell.rjust(width)
            if color and cell in ("convert", "keep bf16"):
                padded = click.style(padded, fg="green" if cell == "convert" else "red")
            elif color and cell[-1:] in "+-" and cell[:-1].replace(".", "").isdigit():
                padded = click.style(padded, fg="green" if cell.endswith("+") else "red")
            out.append(padded)
        return "  ".join(out).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def totals_lines(rec: Recommendation) -> list[str]:
    t = rec.totals
    level = (
        "worst case"
        if rec.criterion == "speedup_worst"
        else (
            "measured calibration" if rec.calibration.is_measured else "generated code, datasheet"
        )
    )
    lines = [
        (
            f"total linear time per step (fwd+bwd, device, {level}): bf16 {_ms(t.bf16_s)} ms -> "
            f"{_ms(t.recommended_s)} ms with {t.converted_linears} of {t.linears} linears in float8: "
            f"speedup {t.speedup:.3f}x of the linear part, {_ms(t.saved_s)} ms saved per step"
        )
    ]
    if len(rec.recipes) > 1:
        each = ", ".join(f"{name} {tot.speedup:.3f}x" for name, tot in rec.recipe_totals.items())
        best = best_recipe(rec)
        lines.append(f"one recipe for every converted layer: {each}")
        lines.append(
            f"best single recipe: {best}; best recipe per layer: {t.speedup:.3f}x "
            f"(torchao converts with one config per call: one call per recipe, each "
            f"with its own module_filter)"
        )
    if rec.skipped_recipes:
        lines.append(f"not compared (not in the calibration): {', '.join(rec.skipped_recipes)}")
    if rec.architecture.note:
        lines.append(f"note: {rec.architecture.note}")
    return lines


def best_recipe(rec: Recommendation) -> str:
    """The recipe whose use for every converted layer gives the fastest step."""
    return max(rec.recipe_totals, key=lambda name: rec.recipe_totals[name].speedup)


def headline(rec: Recommendation) -> str:
    arch = rec.architecture
    return (
        f"{arch.name} on {rec.gpu}, M = {rec.tokens} tokens per step: {len(arch.linears)} "
        f"linear types, {arch.linear_count} linears, {arch.parameter_count / 1e9:.2f}B "
        f"linear weights"
    )


def format_recommendation(rec: Recommendation, *, color: bool = False) -> str:
    """The terminal rendering: headline, decision basis, per-layer table, totals."""
    header, rows = layer_rows(rec)
    return "\n".join(
        [
            headline(rec),
            f"decisions by {rec.criterion_label}",
            _aligned(header, rows, color=color),
            *totals_lines(rec),
        ]
    )


def _md_escape(text: str) -> str:
    """Keep '|' inside its cell and '*' (the layer-index wildcard) from turning into italics."""
    return text.replace("|", "\\|").replace("*", "\\*")


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(
    rec: Recommendation, *, source: str, plots: Sequence[tuple[str, str]] = (), plot_note: str = ""
) -> str:
    """The markdown report; `plots` are (caption, relative path) pairs."""
    arch = rec.architecture
    header, rows = layer_rows(rec)
    converted = rec.converted_fqns
    parts = [
        f"# f8roof report: {arch.name} at {rec.tokens} tokens per step",
        "",
        (
            f"- model: {arch.name} ({arch.source}): {len(arch.linears)} linear types, "
            f"{arch.linear_count} linears, {arch.parameter_count / 1e9:.2f}B linear weights"
        ),
        f"- GPU: {rec.gpu}; estimate: {source}",
        f"- recipes compared: {', '.join(rec.recipes)}",
        (
            f"- decisions by {rec.criterion_label}; a layer whose K or N is not a multiple of 16 "
            "is never converted"
        ),
        f"- f8roof {__version__}",
        "",
        "## Recommendation",
        "",
        *[f"- {line}" for line in totals_lines(rec)],
        "",
        "Convert: " + (", ".join(f"`{f}`" for f in converted) if converted else "nothing") + ".",
        "",
        "## Per layer type",
        "",
        (
            "Times are one linear's forward + backward (device time); `ms/step` multiplies by the "
            "count. `+` marks float8 faster."
        ),
        "",
        _md_table(header, rows),
        "",
    ]
    if plots or plot_note:
        parts += ["## Plots", ""]
        for caption, path in plots:
            parts += [f"### {caption}", "", f"![{caption}]({path})", ""]
        if plot_note:
            parts += [plot_note, ""]
    parts += [
        "## Using it in training",
        "",
        "```python",
        "from torchao.float8 import convert_to_float8_training",
        "import f8roof",
        "",
        f"keep = f8roof.module_filter(model, tokens={rec.tokens}, gpu={rec.gpu!r}, "
        f"recipe={best_recipe(rec)!r}"
        + (
            ", calibration='calibration.json'"
            if rec.calibration is not None and rec.calibration.is_measured
            else ""
        )
        + ")",
        "# with the Float8LinearConfig of the same recipe",
        "convert_to_float8_training(model, module_filter_fn=keep)",
        "```",
        "",
    ]
    return "\n".join(parts)


@dataclass(frozen=True)
class ReportResult:
    path: Path
    plots: tuple[Path, ...]
    recommendation: Recommendation
    plot_note: str  # why there are no plots, '' when there are
    source: str = ""  # what the estimate used, in words

    @property
    def summary(self) -> list[str]:
        return [headline(self.recommendation), *totals_lines(self.recommendation)]


def write_report(
    model: str, *, tokens: int, resolved: Resolved, out: str | Path, plots: bool = True
) -> ReportResult:
    """The markdown report for a model, with its plots as PNGs beside it (`<stem>_*.png`).
    Without matplotlib the report is written without plots and says so."""
    from f8roof.plot import PlotError, heatmap, layer_speedups, overhead_share

    path = check_report_path(out)
    rec = recommend_model(model, tokens=tokens, resolved=resolved)
    source = resolved.source
    written: list[tuple[str, Path]] = []
    note = ""
    if plots:
        config = next(c for c in resolved.configs if c.recipe.name == best_recipe(rec))
        stem = path.with_suffix("")
        try:
            written.append(
                ("Speedup per layer type", layer_speedups(rec, out=f"{stem}_layers.png").path)
            )
            written.append(
                (
                    f"Speedup over M and K = N ({config.recipe.name})",
                    heatmap(config, out=f"{stem}_heatmap.png").path,
                )
            )
            written.append(
                (
                    f"Overhead share of float8 time ({config.recipe.name})",
                    overhead_share(config, out=f"{stem}_overhead.png").path,
                )
            )
        except PlotError as e:
            note = f"(plots skipped: {e.message})"
    relative = [(caption, p.name) for caption, p in written]
    write_text_atomic(path, markdown(rec, source=source, plots=relative, plot_note=note))
    return ReportResult(path, tuple(p for _, p in written), rec, note, source)


def check_report_path(out: str | Path) -> Path:
    path = Path(out)
    if path.suffix.lower() != ".md":
        raise F8RoofError(f"cannot write the report to {out}: use a .md file name")
    return path
