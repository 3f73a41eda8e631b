"""The estimate's terminal table: one row per shape, speedups marked and coloured, each row's
notes; and the breakeven lines under it."""

from __future__ import annotations

from typing import Any

from f8roof.columns import Columns
from f8roof.renderers.cells import band, column_blocks, number, speedup, styled_speedup
from f8roof.renderers.notes import kernel_set_note

MAX_TABLE_ROWS = 60

# Columns shown on the terminal: (column, header, unit scale). Times in microseconds.
TABLE_COLUMNS = (
    ("M", "M", None),
    ("K", "K", None),
    ("N", "N", None),
    ("recipe", "recipe", None),
    ("bf16_gemm_s", "bf16 gemm us", 1e6),
    ("fp8_gemm_s", "fp8 gemm us", 1e6),
    ("overhead_s_ideal", "ovh ideal us", 1e6),
    ("overhead_s_fitted", "ovh fitted us", 1e6),
    ("overhead_s_codegen", "ovh codegen us", 1e6),
    ("overhead_s_worst", "ovh worst us", 1e6),
    ("context_s", "context us", 1e6),
    ("speedup_ideal", "x ideal", None),
    ("speedup", "x fitted", None),
    ("speedup_low", "band", None),  # speedup_low-speedup_high
    ("speedup_codegen", "x codegen", None),
    ("speedup_worst", "x worst (seed)", None),
    ("speedup_context", "x context", None),
    ("speedup_context_low", "context band", None),
    ("decision", "decision", None),
)
# Shown only for a linear in a context: standalone they repeat `speedup` (and are 0).
CONTEXT_COLUMNS = ("context_s", "speedup_context", "speedup_context_low")


def render_table(frame: Columns, *, color: bool = False, width: int | None = None) -> str:
    """Aligned text; speedups marked '+' (float8 wins) or '-' and coloured on a terminal; cut
    into blocks of columns, each led by M, where wider than `width`."""
    standalone = "context" not in frame or bool((frame["context"] == "none").all())
    cols = [
        c for c in TABLE_COLUMNS if c[0] in frame and not (standalone and c[0] in CONTEXT_COLUMNS)
    ]
    shown = frame.head(MAX_TABLE_ROWS)
    rows = [[h for _, h, _ in cols] + ["note"]]
    raw = [[h for _, h, _ in cols] + ["note"]]
    for record in shown.rows():
        cells, plain = [], []
        for name, _, scale in cols:
            value = record[name]
            if name.endswith("_low"):  # a band: low-high
                cells.append(band(value, record[name.removesuffix("_low") + "_high"]))
                plain.append(cells[-1])
            elif name.startswith("speedup"):
                plain.append(speedup(float(value)))
                cells.append(styled_speedup(plain[-1]) if color else plain[-1])
            else:
                cells.append(number(value, scale))
                plain.append(cells[-1])
        note = _note(record)
        cells.append(note)
        plain.append(note)
        rows.append(cells)
        raw.append(plain)
    widths = [max(len(r[i]) for r in raw) for i in range(len(raw[0]))]
    blocks = [
        "\n".join(
            "  ".join(row[i] + " " * (widths[i] - len(plain[i])) for i in block).rstrip()
            for row, plain in zip(rows, raw)
        )
        for block in column_blocks(widths, width)
    ]
    lines = ["\n\n".join(blocks)]
    if len(frame) > len(shown):
        lines.append(f"... {len(frame) - len(shown)} more rows (write them all with --out)")
    return "\n".join(lines)


def _note(record: dict[str, Any]) -> str:
    notes = []
    if record.get("fp8_reason"):
        notes.append(str(record["fp8_reason"]))
    if record.get("gemm_extrapolated", False):
        notes.append("gemm time extrapolated")
    if "overhead_bytes_fitted_low" in record and "overhead_bytes_codegen" not in record:
        fitted, low, high = (
            float(record[f"overhead_bytes_fitted{end}"]) for end in ("", "_low", "_high")
        )
        notes.append(kernel_set_note(fitted, low, high))
    return "; ".join(n for n in notes if n)


def breakeven_lines(found: dict[str, int | None]) -> list[str]:
    """Per overhead level, the smallest square shape where float8 wins; a level's band (its
    'high end' and 'low end' entries) on the level's own line."""
    lines = []
    for level, size in found.items():
        if level.endswith((" high end", " low end")):
            continue
        won = f"float8 wins for M = K = N >= {size}" if size else "float8 never wins up to 65536"
        ends = [(end, found.get(f"{level} {end}", "none")) for end in ("high end", "low end")]
        shown = [f"{e} {s if s else 'never'}" for e, s in ends if s != "none"]
        if shown:
            won += " (band: " + ", ".join(shown) + ")"
        lines.append(f"breakeven ({level}): {won}")
    return lines
