"""One renderer per output format, all with the same signature: (DataFrame) -> str."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import click
import numpy as np
import pandas as pd

from f8roof.errors import F8RoofError

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
    ("speedup_ideal", "x ideal", None),
    ("speedup", "x fitted", None),
    ("speedup_codegen", "x codegen", None),
    ("speedup_worst", "x worst", None),
)


def _speedup_cell(value: float, *, color: bool) -> str:
    text = f"{value:.2f}" + ("+" if value > 1 else "-")
    if not color:
        return text
    return click.style(text, fg="green" if value > 1 else "red")


def _cell(value, scale: float | None) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "-"
        return f"{value * scale:.1f}" if scale else f"{value:.4g}"
    return str(value)


def render_table(frame: pd.DataFrame, *, color: bool = False) -> str:
    """Aligned text; speedups marked '+' (float8 wins) or '-' and coloured on a terminal."""
    cols = [c for c in TABLE_COLUMNS if c[0] in frame.columns]
    shown = frame.head(MAX_TABLE_ROWS)
    rows = [[h for _, h, _ in cols] + ["note"]]
    raw = [[h for _, h, _ in cols] + ["note"]]
    for _, record in shown.iterrows():
        cells, plain = [], []
        for name, _, scale in cols:
            value = record[name]
            if name.startswith("speedup"):
                cells.append(_speedup_cell(float(value), color=color))
                plain.append(_speedup_cell(float(value), color=False))
            else:
                cells.append(_cell(value, scale))
                plain.append(cells[-1])
        note = _note(record)
        cells.append(note)
        plain.append(note)
        rows.append(cells)
        raw.append(plain)
    widths = [max(len(r[i]) for r in raw) for i in range(len(raw[0]))]
    lines = [
        "  ".join(cell + " " * (w - len(p)) for cell, p, w in zip(row, plain, widths)).rstrip()
        for row, plain in zip(rows, raw)
    ]
    if len(frame) > len(shown):
        lines.append(f"... {len(frame) - len(shown)} more rows (write them all with --out)")
    return "\n".join(lines)


def _note(record: pd.Series) -> str:
    notes = []
    if record.get("fp8_reason"):
        notes.append(str(record["fp8_reason"]))
    if record.get("gemm_extrapolated", False):
        notes.append("gemm time extrapolated")
    return "; ".join(notes)


def render_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False)


def render_json(frame: pd.DataFrame) -> str:
    return json.dumps(json.loads(frame.to_json(orient="records")), indent=1) + "\n"


def render_markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = [
        "| " + " | ".join(_cell(v, None) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body]) + "\n"


RENDERERS: dict[str, Callable[[pd.DataFrame], str]] = {
    ".csv": render_csv,
    ".json": render_json,
    ".md": render_markdown,
}


def renderer_for(path: str) -> Callable[[pd.DataFrame], str]:
    for suffix, fn in RENDERERS.items():
        if path.lower().endswith(suffix):
            return fn
    raise F8RoofError(f"cannot write {path}: use a .csv, .json or .md file name")
