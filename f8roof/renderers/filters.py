"""torchao's auto filter beside f8roof's choice, as text: per-layer tables, summaries, the grid
over tokens and TP degrees, and the report's Markdown section."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from f8roof.engine.filter_compare import FilterCompareResult, FilterComparison
from f8roof.engine.step.conversion import TORCHAO_SOURCE
from f8roof.renderers.cells import aligned, decision, markdown_table, ms
from f8roof.renderers.notes import criterion_text, provenance_line, run_text

if TYPE_CHECKING:
    import pandas as pd


def comparison_rows(cmp: FilterComparison) -> tuple[list[str], list[list[str]]]:
    rec = cmp.recommendation
    layers = cmp.layers
    tp = rec.setup.tp > 1
    header = ["layer", "count", "M", "K", "N"]
    header += ["torchao sees K x N"] if tp else []
    header += ["x fitted" if rec.criterion == "speedup" else "x worst (seed)"]
    header += ["torchao", "f8roof", "torchao ms/step", "f8roof ms/step", "note"]
    rows = []
    for _, r in layers.iterrows():
        notes = []
        torchao = r.get("torchao_convert") if cmp.torchao is not None else None
        if r["grouped"]:
            notes.append("routed experts: not nn.Linear, outside torchao's filter")
        elif torchao and not r["fp8_ok"]:
            notes.append(f"torchao converts, but the local shape cannot run: {r['fp8_reason']}")
        elif not r["fp8_ok"]:
            notes.append(str(r["fp8_reason"]))
        row = [str(r["fqn"]), str(r["count"]), str(r["M"]), str(r["K"]), str(r["N"])]
        row += [f"{r['full_K']} x {r['full_N']}"] if tp else []
        value = float(r[rec.criterion])
        # routed experts decide on the worst case of torchao's MoE kernels, never a fitted one
        level = " (worst)" if r["grouped"] and rec.criterion == "speedup" else ""
        row += ["-" if math.isnan(value) else f"{value:.2f}{level}"]
        row += [decision(torchao), decision(bool(r["convert"]))]
        row += [
            ms(r["torchao_step_s"]) if cmp.torchao is not None else "-",
            ms(r["f8roof_step_s"]),
            "; ".join(notes),
        ]
        rows.append(row)
    return header, rows


def summary_lines(cmp: FilterComparison) -> list[str]:
    rec = cmp.recommendation
    choices = cmp.choices
    bf16 = choices[0]
    total = rec.totals.linears
    parts = [
        f"{c.name} {ms(c.step_s)} ms ({bf16.step_s / c.step_s:.3f}x, "
        f"{c.converted_linears} of {total} linears)"
        for c in choices[1:]
    ]
    where = "measured bf16 step" if cmp.plan.step.chosen.step_measured else "modelled"
    lines = [f"step per GPU ({where}): bf16 {ms(bf16.step_s)} ms; " + "; ".join(parts)]
    torchao, ours = cmp.choice("torchao auto filter"), cmp.choice("f8roof")
    assert ours is not None
    if torchao is None:
        lines.append(f"torchao: {cmp.no_rule}")
    else:
        gain = torchao.step_s - ours.step_s
        lines.append(
            f"f8roof vs torchao's filter: {ms(gain)} ms per step saved "
            f"({gain / torchao.step_s:+.1%} of torchao's step)"
        )
    if rec.setup.tp > 1:
        lines.append(
            "torchao's filter sees the unsharded K x N (torchtitan converts before it applies "
            "TP); f8roof decides on the local shape"
        )
    return lines


def format_comparison(cmp: FilterComparison) -> str:
    rec = cmp.recommendation
    header, rows = comparison_rows(cmp)
    fqns = f", filter_fqns {list(cmp.filter_fqns)}" if cmp.filter_fqns else ""
    return "\n".join(
        [
            (
                f"{rec.architecture.name} on {rec.gpu}, {rec.tokens} tokens per GPU, "
                f"{run_text(rec.setup)}, recipe {cmp.recipe}: torchao's auto filter vs f8roof"
            ),
            f"torchao: {TORCHAO_SOURCE}{fqns}; f8roof: decisions by {criterion_text(rec)}",
            aligned(header, rows, color=False),
            *summary_lines(cmp),
        ]
    )


def markdown_section(cmp: FilterComparison) -> str:
    header, rows = comparison_rows(cmp)
    return "\n".join(
        [
            "## torchao's auto filter vs f8roof",
            "",
            (
                f"torchao's `_auto_filter_for_recipe` ({TORCHAO_SOURCE}) converts by fixed K/N "
                f"thresholds measured on H100, blind to the tokens and (applied before "
                f"parallelism) to the TP shard; f8roof decides on the local shape at these "
                f"tokens. Recipe {cmp.recipe}."
            ),
            "",
            markdown_table(header, rows),
            "",
            *[f"- {line}" for line in summary_lines(cmp)],
            "",
        ]
    )


def format_grid(grid: pd.DataFrame, *, model: str, recipe: str) -> str:
    header = [
        "tokens",
        "tp",
        "bf16 ms",
        "torchao ms",
        "x torchao",
        "f8roof ms",
        "x f8roof",
        "f8roof vs torchao",
        "converted (torchao / f8roof / all)",
    ]
    rows = []
    for r in grid.itertuples(index=False):
        has = not math.isnan(r.torchao_ms)
        rows.append(
            [
                str(r.tokens),
                str(r.tp),
                f"{r.bf16_ms:.4g}",
                f"{r.torchao_ms:.4g}" if has else "-",
                f"{r.bf16_ms / r.torchao_ms:.3f}" if has else "-",
                f"{r.f8roof_ms:.4g}",
                f"{r.bf16_ms / r.f8roof_ms:.3f}",
                f"{(r.torchao_ms - r.f8roof_ms) / r.torchao_ms:+.1%}" if has else "-",
                f"{r.torchao_linears if has else '-'} / {r.f8roof_linears} / {r.linears}",
            ]
        )
    return "\n".join(
        [
            f"{model}, recipe {recipe}: step per GPU (ms) with each choice",
            aligned(header, rows, color=False),
        ]
    )


def render_filter_compare(result: FilterCompareResult) -> str:
    """`f8roof filter-compare`: what the estimate rests on, a table per (tokens, tp), and the
    grid when there are several."""
    resolved = result.resolved
    parts = [provenance_line(resolved.provenance)]
    parts += [format_comparison(c) + "\n" for c in result.comparisons]
    if len(result.comparisons) > 1:
        parts.append(
            format_grid(result.grid, model=result.model, recipe=resolved.config.recipe.name)
        )
    return "\n".join(parts).rstrip()
