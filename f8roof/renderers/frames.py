"""One renderer per output file format, all with the same signature: (Columns, path) -> None,
each writing its file atomically (a reader never sees half of it). The terminal table is
renderers/table.py.

CSV and Parquet go through pyarrow: its CSV writer formats 200,000 rows in a few tenths of a
second where pandas' `to_csv` takes seconds (it formats every value in Python). CSV and
Markdown are written from the columns themselves; Parquet and JSON from their DataFrame
(`Columns.to_frame`: pandas is imported for those two alone). In CSV, floats are written in
their shortest form that reads back to the same float32; booleans as true/false; NaN as an
empty field.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from f8roof.columns import Columns, Labels
from f8roof.errors import F8RoofError
from f8roof.files import atomic_path, atomic_set, write_text_atomic
from f8roof.renderers.cells import is_missing, number

if TYPE_CHECKING:
    import pandas as pd

Renderer = Callable[[Columns, str | Path], None]
# CSV is formatted in parts, one thread each: at most this many rows a part (a part's text is
# ~300 bytes a row, and at most two parts per thread wait to be written, which bounds the
# memory), each formatted by pyarrow in batches of CSV_BATCH_ROWS.
CSV_PART_ROWS = 131072
CSV_BATCH_ROWS = 32768
CSV_MAX_THREADS = 4


def arrow_table(frame: pd.DataFrame):
    """The frame as a pyarrow Table: categoricals become dictionary columns (Parquet keeps
    them categorical), strings stay strings; object columns of mixed values become strings."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        mixed = {c: "string" for c in frame.columns if frame[c].dtype == object}
        return pa.Table.from_pandas(frame.astype(mixed), preserve_index=False)


def _csv_parts(table) -> Iterator[Any]:
    """The table's CSV text in parts, in order. Formatting floats is most of the cost and
    pyarrow does it without the GIL, so parts are formatted on a few threads. As few parts as
    the threads and CSV_PART_ROWS allow, of equal size: each part costs a writer of its own,
    and on a busy machine small parts cost more CPU than the threads save (one part per
    thread is as fast as one thread there, and twice as fast on two idle cores)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(cpus or 1, CSV_MAX_THREADS, -(-table.num_rows // CSV_BATCH_ROWS)))
    parts = workers * max(1, -(-table.num_rows // (workers * CSV_PART_ROWS)))
    rows = max(1, -(-table.num_rows // parts))
    starts = range(0, max(table.num_rows, 1), rows)

    def text(start: int):
        sink = pa.BufferOutputStream()
        options = pcsv.WriteOptions(include_header=start == 0, batch_size=CSV_BATCH_ROWS)
        pcsv.write_csv(table.slice(start, rows), sink, options)
        return sink.getvalue()

    if workers == 1:
        yield from map(text, starts)
        return
    with ThreadPoolExecutor(workers) as pool:
        waiting: deque = deque()
        for start in starts:
            waiting.append(pool.submit(text, start))
            if len(waiting) > 2 * workers:
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()


def csv_table(rows: Columns):
    """What CSV writes: text costs a float its digits, and float64's shortest round-trip text
    runs to 17 of them where no estimate means more than 4. Byte counts (`*_bytes*`, exact
    integers) are written as integers, other floats at float32's precision (7 digits, the
    text half as long); Parquet keeps every double."""
    import pyarrow as pa

    arrays = [_csv_array(name, values) for name, values in rows.items()]
    return pa.Table.from_arrays(arrays, names=rows.columns)


def _csv_array(name: str, values: np.ndarray | Labels):
    """One column as pyarrow holds it, made from its buffers: `pa.array` imports pandas (to
    ask whether it was handed pandas' values), and a CSV file needs none."""
    import pyarrow as pa

    if isinstance(values, Labels):
        return pa.DictionaryArray.from_arrays(_numbers(values.codes), _strings(values.names))
    if values.dtype == object:  # strings, or values of mixed types as their text
        return _strings([None if is_missing(v) else str(v) for v in values])
    if values.dtype.kind == "f" and "_bytes" in name:
        whole = np.round(values)
        if np.isfinite(whole).all():
            return _numbers(whole.astype(np.int64))
    if values.dtype.kind == "f":
        return _numbers(values.astype(np.float32), valid=~np.isnan(values))  # NaN: empty
    return _numbers(values)


def _bitmap(flags: np.ndarray):
    import pyarrow as pa

    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _numbers(values: np.ndarray, valid: np.ndarray | None = None):
    """Numbers or booleans; None where `valid` is False."""
    import pyarrow as pa

    nulls = None if valid is None or valid.all() else _bitmap(valid)
    if values.dtype == bool:
        return pa.Array.from_buffers(pa.bool_(), len(values), [nulls, _bitmap(values)])
    data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [nulls, data])


def _strings(texts: Sequence[str | None]):
    """Strings; None where a text is None."""
    import pyarrow as pa

    encoded = [b"" if t is None else t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    valid = np.array([t is not None for t in texts], dtype=bool)
    nulls = None if valid.all() else _bitmap(valid)
    buffers = [nulls, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def write_csv(rows: Columns, path: str | Path) -> None:
    table = csv_table(rows)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.writelines(_csv_parts(table))


def write_parquet(rows: Columns, path: str | Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = arrow_table(rows.to_frame())
    # Dictionary-encode only the columns with few distinct values (recipe, reasons, flags):
    # trying it on a column of distinct floats costs more than the whole rest of the write.
    coded = [
        f.name
        for f in table.schema
        if pa.types.is_dictionary(f.type)
        or pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_boolean(f.type)
    ]
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp), compression="snappy", use_dictionary=coded)


def _records(rows: Columns) -> list[dict[str, Any]]:
    """The rows as JSON records, as pandas writes them (NaN as null)."""
    records: list[dict[str, Any]] = json.loads(rows.to_frame().to_json(orient="records"))
    return records


def render_json(rows: Columns) -> str:
    return json.dumps(_records(rows), indent=1) + "\n"


def render_markdown(rows: Columns) -> str:
    header = "| " + " | ".join(rows.columns) + " |"
    rule = "|" + "|".join("---" for _ in rows.columns) + "|"
    body = ["| " + " | ".join(number(v) for v in row.values()) + " |" for row in rows.rows()]
    return "\n".join([header, rule, *body]) + "\n"


def write_json(rows: Columns, path: str | Path) -> None:
    write_text_atomic(path, render_json(rows))


def write_markdown(rows: Columns, path: str | Path) -> None:
    write_text_atomic(path, render_markdown(rows))


RENDERERS: dict[str, Renderer] = {
    ".csv": write_csv,
    ".parquet": write_parquet,
    ".json": write_json,
    ".md": write_markdown,
}


def renderer_for(path: str | Path) -> Renderer:
    """The writer for a file name's suffix (a user error for any other)."""
    for suffix, fn in RENDERERS.items():
        if str(path).lower().endswith(suffix):
            return fn
    raise F8RoofError(f"cannot write {path}: use a .csv, .parquet, .json or .md file name")


def write_rows(rows: Columns, path: str | Path, *, summary: dict[str, Any] | None = None) -> None:
    """The rows in the format the file name asks for, atomically. With a `summary` (a model's
    step summary, JSON-ready): JSON holds {"summary": ..., "layers": [rows]}, Markdown a "Step
    summary" section after the table, CSV and Parquet a `<name>.summary.csv` beside."""
    if summary is None:
        renderer_for(path)(rows, path)
        return
    name = str(path).lower()
    if name.endswith(".json"):
        layers = _records(rows)
        write_text_atomic(path, json.dumps({"summary": summary, "layers": layers}, indent=1) + "\n")
    elif name.endswith(".md"):
        write_text_atomic(path, render_markdown(rows) + "\n" + summary_markdown(summary))
    else:  # the table and its summary as one set: both written, or neither changed
        with atomic_set(path, summary_path(path)) as (table, beside):
            renderer_for(path)(rows, table)
            beside.write_text(summary_csv(summary), encoding="utf-8")


def summary_path(path: str | Path) -> Path:
    """`x.csv` / `x.parquet` -> `x.summary.csv` beside it."""
    p = Path(path)
    return p.with_name(p.name[: -len(p.suffix)] + ".summary.csv")


def flat_summary(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The step summary as one row: figures as they are, each component's times as
    `<part>_<field>`, the other step views' figures under their prefix (`chosen_speedup`), the
    assumptions joined by '; ' (the notes' records stay in the JSON)."""
    row: dict[str, Any] = {}
    for key, value in summary.items():
        if key == "components":
            for c in value:
                part = c["part"].split()[0].lower().rstrip(",")
                row |= {f"{prefix}{part}_{k}": v for k, v in c.items() if k.endswith("_s")}
        elif key == "assumptions":
            row[f"{prefix}{key}"] = "; ".join(value)
        elif isinstance(value, dict):
            row |= flat_summary(value, f"{prefix}{key}_")
        elif key != "notes":
            row[f"{prefix}{key}"] = value
    return row


def summary_csv(summary: dict[str, Any]) -> str:
    """One header line and one row (`flat_summary`), as pandas' `to_csv` writes them: quoted
    where needed, floats in full, None and NaN as empty fields."""
    row = flat_summary(summary)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(row)
    writer.writerow("" if is_missing(v) else v for v in row.values())
    return text.getvalue()


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = ["## Step summary", "", "| quantity | value |", "|---|---|"]
    for key, value in flat_summary(summary).items():
        if not key.endswith("assumptions"):
            lines.append(f"| {key} | {number(value) if isinstance(value, float) else value} |")
    lines += ["", "Assumptions:", *(f"- {a}" for a in summary.get("assumptions", []))]
    return "\n".join(lines) + "\n"
