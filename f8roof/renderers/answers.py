"""`f8roof estimate`'s answer on the terminal: what it rests on, then the shapes' table and
breakevens, or a model's per-layer recommendation."""

from __future__ import annotations

from f8roof.answer import ModelAnswer, ShapesAnswer
from f8roof.renderers.report import format_recommendation
from f8roof.renderers.table import breakeven_lines, render_table


def render_answer(answer: ShapesAnswer | ModelAnswer, *, color: bool = False) -> str:
    resolved = answer.resolved
    lines = [resolved.header, f"using {resolved.source}"]
    if isinstance(answer, ModelAnswer):
        lines.append(format_recommendation(answer.recommendation, color=color))
    else:
        lines.append(render_table(answer.frame, color=color))
        lines += breakeven_lines(answer.breakevens)
    return "\n".join(lines)
