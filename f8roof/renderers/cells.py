"""The cells every table shares: speedups, times, margins, decisions, and the two table layouts
(aligned text for the terminal, Markdown for reports), and the command line a settle run is,
so each output formats a value one way."""

from __future__ import annotations

import math
import textwrap

import click
import numpy as np

from f8roof.engine.decision import Settle

# Text columns are left-aligned in a terminal table; numbers right-aligned.
TEXT_HEADERS = ("input from", "recipe", "decision", "tp", "torchao", "f8roof")


def is_missing(value) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def speedup(value) -> str:
    """'1.23+' where float8 wins, '0.87-' where it loses, '-' where there is none."""
    if is_missing(value):
        return "-"
    return f"{float(value):.2f}" + ("+" if value > 1 else "-")


def band(low, high) -> str:
    """A speedup band as 'low-high' ('0.35-0.71'); '-' where there is none."""
    if is_missing(low) or is_missing(high):
        return "-"
    return f"{float(low):.2f}-{float(high):.2f}"


def number(value, scale: float | None = None) -> str:
    """A float scaled (seconds to microseconds) to one decimal, or 4 significant digits."""
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "-"
        return f"{value * scale:.1f}" if scale else f"{value:.4g}"
    return str(value)


def ms(seconds: float) -> str:
    """Milliseconds to 4 significant digits, whole from 10 s on (12160, not 1.216e+04)."""
    value = seconds * 1e3
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def margin(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:+.0%}"


def decision(value) -> str:
    """A convert flag as words; 'n/a' where there is no decision (a layer outside the filter)."""
    if is_missing(value):
        return "n/a"
    return "convert" if value else "keep bf16"


def styled_speedup(cell: str) -> str:
    return click.style(cell, fg="green" if cell.endswith("+") else "red")


def _styled(cell: str, padded: str) -> str:
    if cell in ("convert", "keep bf16", "keep", "uncertain"):
        colour = {"convert": "green", "uncertain": "yellow"}.get(cell, "red")
        return click.style(padded, fg=colour)
    if cell[-1:] in "+-" and cell[:-1].replace(".", "").isdigit():
        return click.style(padded, fg="green" if cell.endswith("+") else "red")
    return padded


def aligned(
    header: list[str], rows: list[list[str]], *, color: bool = False, width: int | None = None
) -> str:
    """A terminal table: first and last columns and TEXT_HEADERS left-aligned, numbers right;
    decisions and speedups green or red when `color`. Wider than `width` (the terminal's), it
    is cut into blocks of columns one under the other, each led by the first column."""
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    text_cols = {0, len(header) - 1} | {header.index(h) for h in TEXT_HEADERS if h in header}

    def line(cells: list[str], block: list[int]) -> str:
        out = []
        for i in block:
            padded = cells[i].ljust(widths[i]) if i in text_cols else cells[i].rjust(widths[i])
            out.append(_styled(cells[i], padded) if color else padded)
        return "  ".join(out).rstrip()

    return "\n\n".join(
        "\n".join([line(header, block), *(line(r, block) for r in rows)])
        for block in column_blocks(widths, width)
    )


def column_blocks(widths: list[int], width: int | None) -> list[list[int]]:
    """The columns of each block of a table `width` columns wide at most (two spaces between
    columns), the first column leading every block; one block where all fit or no width."""
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        return [list(range(len(widths)))]
    blocks: list[list[int]] = []
    current, used = [0], widths[0]
    for i in range(1, len(widths)):
        if len(current) > 1 and used + 2 + widths[i] > width:
            blocks.append(current)
            current, used = [0], widths[0]
        current.append(i)
        used += 2 + widths[i]
    return [*blocks, current]


def wrapped(line: str, width: int | None) -> list[str]:
    """A line of prose within `width` columns, continued two spaces further in (a line that
    fits, colours aside, stays whole)."""
    if width is None or len(click.unstyle(line)) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.wrap(
        line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _md_escape(text: str) -> str:
    """Keep '|' inside its cell and '*' (the layer-index wildcard) from turning into italics."""
    return text.replace("|", "\\|").replace("*", "\\*")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def step_share_line(share, *, linear_speedup: float, label: str = "") -> str:
    """The end-to-end speedup a measured bf16 step implies (a `recommend.StepShare`), beside
    the linear part's; or why there is none."""
    head = f"end to end{f' ({label})' if label else ''}: measured bf16 step {ms(share.step_s)} ms"
    if not share.consistent:
        return (
            f"{head}, but the linears alone are predicted at {ms(share.linear_bf16_s)} ms: no "
            f"end-to-end figure (is --tokens the tokens per GPU? the roofline's gemm efficiency?)"
        )
    return (
        f"{head}, linears {ms(share.linear_bf16_s)} ms of it ({share.linear_fraction:.0%}, "
        f"predicted); saving {ms(share.saved_s)} ms: step speedup {share.speedup:.3f}x "
        f"(linear part {linear_speedup:.3f}x)"
    )


def settle_words(settle: Settle) -> list[str]:
    """The command line of a settle run, in pieces a shell line may break between: calibrate
    (unless the estimate already rests on this GPU's calibration), then validate the shapes."""
    names = ",".join(settle.recipes)
    context = [] if settle.contexts == ("none",) else [f"--contexts {','.join(settle.contexts)}"]
    same = [f"--recipes {names}", f"--impl {settle.implementation}", *context]
    validate = [
        "f8roof validate",
        "--calibration gpu.json",
        "--out validation",
        *same,
        *(f"--shape {M},{K},{N}" for M, K, N in settle.shapes),
    ]
    if settle.calibrated:
        return validate
    return ["f8roof calibrate", "--device cuda", *same, "--out gpu.json", "&&", *validate]


def settle_text(settle: Settle) -> str:
    return " ".join(settle_words(settle))
