"""`f8roof estimate`'s answer on the terminal: what it rests on, then the shapes' table and
breakevens, or a model's per-layer recommendation, its step summary and (from --setup)
torchtitan's filter_fqns and converter lines."""

from __future__ import annotations

from f8roof.engine.answer import ModelAnswer, ShapesAnswer
from f8roof.engine.sharded import BlockComparison
from f8roof.renderers.report import format_recommendation
from f8roof.renderers.table import breakeven_lines, render_table, uncertain_lines
from f8roof.training.step import StepSummary


def render_answer(answer: ShapesAnswer | ModelAnswer, *, color: bool = False) -> str:
    resolved = answer.resolved
    lines = [resolved.header, f"using {resolved.source}"]
    if isinstance(answer, ModelAnswer):
        rec, summary = answer.recommendation, answer.summary
        lines.append(format_recommendation(rec, color=color, end_to_end=summary is None))
        if answer.summary is not None:
            lines += step_summary_lines(answer.summary)
        if answer.block is not None:
            lines += block_lines(answer.block)
        if answer.converter:
            lines += ["", f"torchtitan filter_fqns: {list(answer.filter_fqns)}", *answer.converter]
    else:
        lines.append(render_table(answer.frame, color=color))
        lines += breakeven_lines(answer.breakevens)
        lines += uncertain_lines(answer.frame, answer.settle)
    return "\n".join(lines)


def step_summary_lines(summary: StepSummary) -> list[str]:
    """The step in both precisions and its parts, in ms, then the assumptions."""

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.1f} ms"

    where = "measured bf16 step" if summary.step_measured else "modelled step"
    head = (
        f"step ({where}): bf16 {ms(summary.bf16_s)}, float8 {ms(summary.fp8_s)}: "
        f"x{summary.speedup:.3f}"
        + (
            f" (band {summary.speedup_low:.3f}-{summary.speedup_high:.3f})"
            if summary.speedup_high > summary.speedup_low
            else ""
        )
    )
    parts = (
        f"  linears {ms(summary.linear_bf16_s)} -> {ms(summary.linear_fp8_s)} "
        f"({summary.linear_share:.0%} of the bf16 step); exposed comm "
        f"{ms(summary.comm_bf16_s)} -> {ms(summary.comm_fp8_s)}; recompute "
        f"{ms(summary.recompute_bf16_s)} -> {ms(summary.recompute_fp8_s)}"
    )
    lines = ["", head, parts]
    lines += [f"  assumes: {a}" for a in summary.assumptions]
    return lines


def block_lines(block: BlockComparison) -> list[str]:
    """What the sharded block's float8 graph holds that the per-layer rows cannot."""
    casts = len(block.float8.casts_after_all_gather)
    recomputed = len(block.float8.recomputed)
    line = (
        f"  float8 block: {casts} float8 casts read an all-gathered tensor (not fused into the "
        f"norm); the backward reruns {recomputed} forward kernels, gemms and collectives"
    )
    return [line]
