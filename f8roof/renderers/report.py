"""A model's recommendation as text: the terminal table and totals, and the markdown report.

Same content in both: one row per layer type (shape, count, the estimate at the decision level,
convert or keep bf16 with the margin), the totals of the linear part of a training step, and,
when recipes are compared, each recipe's total beside the best-per-layer total.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from f8roof import __version__
from f8roof.engine.plan import Plan
from f8roof.engine.recommend import TIME_COLUMNS, Recommendation
from f8roof.engine.report import ModelReport
from f8roof.errors import F8RoofError
from f8roof.files import atomic_set
from f8roof.renderers.cells import (
    aligned,
    band,
    margin,
    markdown_table,
    ms,
    settle_text,
    speedup,
    step_share_line,
)
from f8roof.renderers.filters import markdown_section
from f8roof.renderers.notes import (
    criterion_text,
    layer_note,
    provenance_line,
    run_text,
    sentence,
)

if TYPE_CHECKING:
    from f8roof.engine.filter_compare import FilterComparison

SPEEDUP_COLUMNS = (
    ("speedup_ideal", "x ideal"),
    ("speedup", "x fitted"),
    ("speedup_low", "band"),  # speedup_low-speedup_high
    ("speedup_worst", "x worst (seed)"),
)


TP_LABELS = {"column": "col", "row": "row", "replicated": "rep"}


def _shape_columns(rec: Recommendation) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """(header, cell function) of the columns that say what each GPU runs: always M, K, N
    (local); the TP style under --tp; experts per GPU and tokens per expert with routed
    experts."""
    columns: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("M", lambda r: str(r["M"])),
        ("K", lambda r: str(r["K"])),
        ("N", lambda r: str(r["N"])),
    ]
    if rec.setup.tp > 1:
        # routed experts under EP are not TP-sharded (see f8roof.training.parallel): "-"
        unsharded = rec.setup.ep > 1
        columns.append(("tp", lambda r: "-" if unsharded and r["grouped"] else TP_LABELS[r["tp"]]))
    if rec.has_grouped:
        columns += [
            ("experts/GPU", lambda r: str(r["experts_per_device"]) if r["grouped"] else "-"),
            ("tokens/expert", lambda r: f"{r['tokens_per_expert']:.6g}" if r["grouped"] else "-"),
        ]
    return columns


def layer_rows(rec: Recommendation) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the per-layer table (shared by terminal and markdown). One recipe:
    its speedup at every overhead level; several: each recipe's speedup on the decision column.
    M, K, N are the local shape one GPU's gemms run."""
    layers = rec.rows
    bf16_col, fp8_col = TIME_COLUMNS[rec.criterion]
    if len(rec.recipes) > 1:
        speedups = [(f"{rec.criterion}_{r}", f"x {r}") for r in rec.recipes]
    else:
        speedups = [(c, h) for c, h in SPEEDUP_COLUMNS if c in layers]
    shape = _shape_columns(rec)
    header = (
        ["layer", "count"]
        + [h for h, _ in shape]
        + ["input from", "recipe", "bf16 us", "fp8 us"]
        + [h for _, h in speedups]
        + ["decision", "margin", f"bf16 ms/{_per(rec)}", f"saved ms/{_per(rec)}", "note"]
    )
    rows = []
    for r in layers.rows():
        rows.append(
            [str(r["fqn"]), str(r["count"])]
            + [cell(r) for _, cell in shape]
            + [
                _input_from(str(r["context"])),
                str(r["recipe"]),
                f"{r[bf16_col] * 1e6:.1f}",
                f"{r[fp8_col] * 1e6:.1f}",
            ]
            + [_speedup_cell(r, c) for c, _ in speedups]
            + [
                str(r["decision"]),
                margin(float(r["margin"])),
                ms(r["bf16_step_s"]),
                ms(r["saved_step_s"]),
                layer_note(r, rec.criterion),
            ]
        )
    return header, rows


def _speedup_cell(row, column: str) -> str:
    if column == "speedup_low":
        if row["grouped"]:
            return "-"
        return band(row["speedup_low"], row["speedup_high"])
    return speedup(_level_speedup(row, column))


def _level_speedup(row, column: str) -> float:
    """A row's speedup at one level; routed experts have no fitted level (their decision,
    on the worst case, is said in their note)."""
    if column == "speedup" and row["grouped"]:
        return math.nan
    return float(row[column])


def _input_from(context: str) -> str:
    """The op producing a layer's input (its context's `before`): what a cast may fuse into."""
    return "-" if context == "none" else context.split("+")[0]


def totals_lines(rec: Recommendation, *, end_to_end: bool = True) -> list[str]:
    """The linear part's totals; `end_to_end` adds what a measured step implies (left out
    where a step summary follows, which says it with communication and recompute)."""
    t = rec.totals
    level = (
        "worst case"
        if rec.criterion == "speedup_worst"
        else (
            "measured calibration"
            if rec.calibration is not None and rec.calibration.is_measured
            else ("TE's kernels read off its source" if rec.te_stack else "generated code")
        )
    )
    lines = [
        (
            f"total linear time per {_per(rec)} (fwd+bwd, device, {level}): bf16 "
            f"{ms(t.bf16_s)} ms -> "
            f"{ms(t.recommended_s)} ms with {t.converted_linears} of {t.linears} linears"
            + (
                ""
                if t.linears == rec.architecture.linear_count
                else " on each GPU (its share of the routed experts)"
            )
            + " in float8: "
            f"speedup {t.speedup:.3f}x of the linear part"
            + (
                ""
                if t.speedup_band is None
                else f" (band {t.speedup_band[0]:.3f}-{t.speedup_band[1]:.3f}x)"
            )
            + f", {ms(t.saved_s)} ms saved per {_per(rec)}"
        )
    ]
    if len(rec.recipes) > 1:
        each = ", ".join(f"{name} {tot.speedup:.3f}x" for name, tot in rec.recipe_totals.items())
        best = rec.best_recipe
        lines.append(f"one recipe for every converted layer: {each}")
        lines.append(
            f"best single recipe: {best}; best recipe per layer: {t.speedup:.3f}x "
            f"(torchao converts with one config per call: one call per recipe, each "
            f"with its own module_filter)"
        )
    if rec.reference_recipes:
        one = len(rec.reference_recipes) == 1
        lines.append(
            f"note: {', '.join(rec.reference_recipes)} {'exists' if one else 'exist'} only in "
            f"f8roof's reference implementation: torchao cannot convert with "
            f"{'it' if one else 'them'} (it has no delayed or static scaling)"
        )
    if rec.skipped_recipes:
        lines.append(f"not compared (not in the calibration): {', '.join(rec.skipped_recipes)}")
    share = rec.step_share
    if share is not None and end_to_end:
        lines.append(step_share_line(share, linear_speedup=t.speedup))
    if rec.settle:
        lines.append(f"settle the uncertain layers on a GPU: {settle_text(rec.settle)}")
    lines += [f"note: {line}" for line in scale_notes(rec)]
    lines += [f"note: {sentence(n)}" for n in rec.architecture.notes]
    return lines


def scale_notes(rec: Recommendation) -> list[str]:
    """What the training setup and routed experts change, and what is not modelled."""
    lines = [sentence(n) for n in rec.setup.notes()]
    grouped = np.flatnonzero(rec.rows["grouped"])
    if len(grouped):
        first = rec.rows.row(int(grouped[0]))
        experts = rec.architecture.linears[int(grouped[0])].routed
        assert experts is not None
        lines.append(
            f"routed experts: {first['experts_per_device']} of {experts.experts} experts per GPU "
            f"(EP {rec.setup.ep}), top {experts.top_k}, {first['tokens_per_expert']:.6g} tokens "
            f"per expert (balanced routing), M padded to a multiple of 16 (torchao's float8 "
            f"grouped gemm); each row is one grouped gemm per layer: "
            f"{first['experts_per_device']} experts' gemms in one launch (a measured gemm "
            f"table times them as single gemms, each with its launch)"
        )
    return lines


def headline(rec: Recommendation) -> str:
    arch = rec.architecture
    return (
        f"{arch.name} on {rec.gpu}, M = {rec.tokens} tokens per {_batch(rec)}: {len(arch.linears)} "
        f"linear types, {arch.linear_count} linears, {arch.parameter_count / 1e9:.2f}B "
        f"linear weights"
    )


def _per(rec: Recommendation) -> str:
    """What the per-layer totals add up: a step, under a pipeline one microbatch through
    every stage (the step summary then takes each rank's share), under gradient accumulation
    one forward/backward pass."""
    if rec.setup.pipeline is not None:
        return "microbatch"
    return "step" if rec.setup.accumulation == 1 else "pass"


def _batch(rec: Recommendation) -> str:
    pipeline, passes = rec.setup.pipeline, rec.setup.accumulation
    per_step = "step" if passes == 1 else f"pass, {passes} passes per step"
    if pipeline is None:
        return "step" if passes == 1 else f"pass ({passes} per step)"
    return f"microbatch ({pipeline.microbatches} per {per_step})"


def setup_line(rec: Recommendation) -> str:
    """How the model trains, when that is more than one GPU running it all ('' otherwise)."""
    if rec.setup.replace_step(None).is_default:
        return ""
    if not rec.setup.is_parallel:
        return f"setup: {run_text(rec.setup)}"
    rows = rec.rows
    local = rows["K"] * rows["N"] * rows["count"] * np.maximum(rows["experts_per_device"], 1)
    return (
        f"setup: {run_text(rec.setup)}; per GPU {local.sum() / rec.setup.pp / 1e9:.2f}B linear "
        "weights; M, K, N below are the local shapes each GPU runs"
    )


def format_recommendation(
    rec: Recommendation, *, color: bool = False, end_to_end: bool = True, width: int | None = None
) -> str:
    """The terminal rendering: headline, decision basis, per-layer table, totals."""
    header, rows = layer_rows(rec)
    setup = setup_line(rec)
    return "\n".join(
        [
            headline(rec),
            *([setup] if setup else []),
            f"decisions by {criterion_text(rec)}",
            aligned(header, rows, color=color, width=width),
            *totals_lines(rec, end_to_end=end_to_end),
        ]
    )


def markdown(
    plan: Plan,
    *,
    source: str,
    plots: Sequence[tuple[str, str]] = (),
    plot_note: str = "",
    comparison: FilterComparison | None = None,
) -> str:
    """The markdown report of a plan (`estimate`'s answer); `plots` are (caption, relative
    path) pairs; `comparison` adds the section on torchao's auto filter."""
    rec = plan.recommendation
    arch = rec.architecture
    header, rows = layer_rows(rec)
    converted = rec.converted_fqns
    setup = setup_line(rec)
    parts = [
        f"# f8roof report: {arch.name} at {rec.tokens} tokens per {_batch(rec)}",
        "",
        (
            f"- model: {arch.name} ({arch.source}): {len(arch.linears)} linear types, "
            f"{arch.linear_count} linears, {arch.parameter_count / 1e9:.2f}B linear weights"
        ),
        *([f"- {setup}"] if setup else []),
        f"- GPU: {rec.gpu}; estimate: {source}",
        f"- recipes compared: {', '.join(rec.recipes)}",
        (
            f"- decisions by {criterion_text(rec)}; a layer whose K or N is not a multiple of 16 "
            "is never converted"
        ),
        f"- f8roof {__version__}",
        "",
        "## Recommendation",
        "",
        *[f"- {line}" for line in totals_lines(rec)],
        *[f"- {line}" for line in _step_lines(plan)],
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
        markdown_table(header, rows),
        "",
    ]
    if comparison is not None:
        parts += [markdown_section(comparison)]
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
        f"recipe={rec.best_recipe!r}"
        + (
            ", calibration='calibration.json'"
            if rec.calibration is not None and rec.calibration.is_measured
            else ""
        )
        + _setup_arguments(rec)
        + ")",
        "# with the Float8LinearConfig of the same recipe",
        "convert_to_float8_training(model, module_filter_fn=keep)",
        "```",
        "",
    ]
    return "\n".join(parts)


def _step_lines(plan: Plan) -> list[str]:
    """The step per GPU as `estimate` answers it: f8roof's choice beside the run as
    torchtitan converts it."""
    chosen, as_run = plan.step.chosen, plan.step.as_run
    lines = [
        (
            f"step per GPU with f8roof's choice: bf16 {ms(chosen.bf16_s)} ms -> float8 "
            f"{ms(chosen.fp8_s)} ms, x{chosen.speedup:.3f} (band {chosen.speedup_low:.3f}-"
            f"{chosen.speedup_high:.3f}); as torchtitan converts it: x{as_run.speedup:.3f}"
        ),
    ]
    rec = plan.recommendation
    if rec.held_by_step:
        lines.append(
            "the step keeps " + ", ".join(f"`{f}`" for f in rec.held_by_step) + " in bf16: each "
            "wins alone, but what float8 adds beside it costs the step more"
        )
    if rec.converted_by_step:
        lines.append(
            "the step converts " + ", ".join(f"`{f}`" for f in rec.converted_by_step) + ": each "
            "loses alone, but the step is shorter with it in float8"
        )
    if plan.adds_float8_all_gather:
        lines.append("with FSDP2's float8 all-gather (torchao's enable_fsdp_float8_all_gather)")
    return lines


def _setup_arguments(rec: Recommendation) -> str:
    """module_filter's keyword arguments for a non-default setup (", tp=2, ...")."""
    setup, out = rec.setup, ""
    if setup.tp > 1:
        out += f", tp={setup.tp}"
    if setup.ep > 1:
        out += f", ep={setup.ep}"
    if setup.fsdp_degree:
        out += f", fsdp={setup.fsdp_degree}"
    if setup.recompute.value != "none":
        out += f", recompute={setup.recompute.value!r}"
    return out


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


def write_report(report: ModelReport, *, out: str | Path, plots: bool = True) -> ReportResult:
    """The markdown report, with its plots as PNGs beside it (`<stem>_*.png`), written as one
    set: every file drawn into a temporary beside it, then all renamed (`files.atomic_set`),
    so an error or Ctrl-C leaves the previous report whole. Without matplotlib the report is
    written without plots and says so."""
    from f8roof.renderers.plot import (
        PlotError,
        check_matplotlib,
        heatmap,
        layer_speedups,
        overhead_share,
        step_memory,
    )

    path = check_report_path(out)
    rec, config, basis = report.recommendation, report.best, report.provenance
    stem = path.with_suffix("")
    drawn = (
        [
            (
                "The step and its memory per GPU",
                Path(f"{stem}_step.png"),
                lambda o: step_memory(report.plan, out=o),
            ),
            (
                "Speedup per layer type",
                Path(f"{stem}_layers.png"),
                lambda o: layer_speedups(rec, out=o, provenance=basis),
            ),
            (
                f"Speedup over M and K = N ({config.recipe.name})",
                Path(f"{stem}_heatmap.png"),
                lambda o: heatmap(report.grid, out=o, provenance=basis),
            ),
            (
                f"Overhead share of float8 time ({config.recipe.name})",
                Path(f"{stem}_overhead.png"),
                lambda o: overhead_share(report.overhead, out=o, provenance=basis),
            ),
        ]
        if plots
        else []
    )
    note = ""
    if drawn:
        try:
            check_matplotlib()
        except PlotError as e:
            note, drawn = f"(plots skipped: {e.message})", []
    with atomic_set(path, *(p for _, p, _ in drawn)) as (md, *pngs):
        for (_, _, draw), png in zip(drawn, pngs):
            draw(png)
        relative = [(caption, p.name) for caption, p, _ in drawn]
        text = markdown(
            report.plan,
            source=provenance_line(report.provenance),
            plots=relative,
            plot_note=note,
            comparison=report.comparison,
        )
        md.write_text(text, encoding="utf-8")
    return ReportResult(
        path, tuple(p for _, p, _ in drawn), rec, note, provenance_line(report.provenance)
    )


def report_lines(result: ReportResult) -> list[str]:
    """What `f8roof report` prints: the source, the headline and totals, the files written."""
    written = f"wrote {result.path}" + (f" and {len(result.plots)} plots" if result.plots else "")
    return [
        f"using {result.source}",
        *result.summary,
        written,
        *([result.plot_note] if result.plot_note else []),
    ]


def check_report_path(out: str | Path) -> Path:
    path = Path(out)
    if path.suffix.lower() != ".md":
        raise F8RoofError(f"cannot write the report to {out}: use a .md file name")
    return path
