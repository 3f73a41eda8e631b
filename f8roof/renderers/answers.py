"""`f8roof estimate`'s answer on the terminal: what it rests on, then the shapes' table and
breakevens, or a model's per-layer recommendation, its step summary and (from --setup)
torchtitan's filter_fqns and converter lines."""

from __future__ import annotations

from f8roof.answer import ModelAnswer, ShapesAnswer
from f8roof.models.step import StepSummary
from f8roof.renderers.report import format_recommendation
from f8roof.renderers.table import breakeven_lines, render_table, uncertain_lines
from f8roof.sharded import CompiledStep


def render_answer(answer: ShapesAnswer | ModelAnswer, *, color: bool = False) -> str:
    resolved = answer.resolved
    lines = [resolved.header, f"using {resolved.source}"]
    if isinstance(answer, ModelAnswer):
        rec, summary = answer.recommendation, answer.summary
        lines.append(format_recommendation(rec, color=color, end_to_end=summary is None))
        if answer.summary is not None:
            lines += step_summary_lines(answer.summary)
        if answer.compiled is not None:
            lines += compiled_step_lines(answer.compiled)
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


def compiled_step_lines(step: CompiledStep) -> list[str]:
    """The step with every block linear in float8 from the compiled block, beside the fits."""
    return [
        "",
        f"compiled: {step.where}",
        (
            f"  per block bf16 {step.block_bf16_s * 1e3:.2f} ms -> float8 "
            f"{step.block_fp8_s * 1e3:.2f} ms; {step.casts_after_all_gather} float8 casts read an "
            "all-gathered tensor (not fused into the norm)"
        ),
        (
            f"  step with every block linear in float8: x{step.speedup:.3f} from the compiled "
            f"block, x{step.fits_speedup:.3f} from the per-layer fits"
        ),
    ]
