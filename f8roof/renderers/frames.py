"""One renderer per output file format, all with the same signature: (Columns, path) -> None,
each writing its file atomically (a reader never sees half of it). The terminal table is
renderers/table.py.

CSV and Parquet go through pyarrow: CSV is built by its string kernels (200,000 rows in a few
tenths of a second, where pandas' `to_csv` takes seconds: it formats every value in Python).
CSV and Markdown are written from the columns themselves; Parquet and JSON from their DataFrame
(`Columns.to_frame`: pandas is imported for those two alone). In CSV, floats are written in
their shortest form that reads back to the same float32 (byte counts as integers); booleans as
true/false; NaN as an empty field; strings and the header quoted.
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
# CSV is formatted in parts of at most CSV_PART_ROWS rows (about 10 MB of text and fields
# each), on up to CSV_MAX_THREADS threads (arrow's string kernels release the GIL), at most two
# parts per thread waiting to be written, which bounds the memory. The part size costs nothing
# measurable between 8,192 and 200,000 rows; small parts keep the threads evenly loaded.
CSV_PART_ROWS = 16384
CSV_THREAD_ROWS = 32768  # fewer rows than this a thread: fewer threads
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


def write_csv(rows: Columns, path: str | Path) -> None:
    """The rows as CSV, as pyarrow's CSV writer writes them (header and strings quoted), built
    with arrow's string kernels: each column's text, then each row's fields joined. Formatting
    floats is most of the cost (about 0.1 us each), so a column with the same values as an
    earlier one is formatted once (`bf16_s` is `bf16_gemm_s`, and without a context
    `speedup_context*` is `speedup*`)."""
    header = ",".join(_quoted(name) for name in rows.columns) + "\n"
    sources, which = csv_sources(rows)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(header.encode("utf-8"))
        f.writelines(_csv_parts(sources, which, len(rows)))


def csv_sources(rows: Columns) -> tuple[list[Any], list[int]]:
    """What CSV formats, as pyarrow arrays (`_csv_array`), each distinct column once, and for
    each column the index of its array. Text costs a float its digits, and float64's shortest
    round-trip text runs to 17 of them where no estimate means more than 4: byte counts
    (`*_bytes*`, exact integers) are written as integers, other floats at float32's precision
    (7 digits, the text half as long); Parquet keeps every double."""
    sources: list[Any] = []
    which: list[int] = []
    singles: list[tuple[np.ndarray, int]] = []  # float columns as float32, and their source
    for name, values in rows.items():
        single = _single(name, values)
        if single is not None:
            same = next((i for s, i in singles if _same_bits(s, single)), None)
            if same is not None:
                which.append(same)
                continue
            singles.append((single, len(sources)))
        which.append(len(sources))
        sources.append(_csv_array(values, single))
    return sources, which


def _single(name: str, values: np.ndarray | Labels) -> np.ndarray | None:
    """A float column that CSV writes as float32, as float32; None for any other column."""
    if isinstance(values, Labels) or values.dtype.kind != "f":
        return None
    if "_bytes" in name and np.isfinite(values).all():
        return None  # written as integers
    with np.errstate(over="ignore"):  # beyond float32's range: inf, as pyarrow writes it
        return values.astype(np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """The same float32 values, bit for bit (so the same text; -0.0 is not 0.0). The first
    value is compared first: most columns differ there, and comparing whole ones costs."""
    return bool(
        a[:1].tobytes() == b[:1].tobytes() and np.array_equal(a.view(np.uint32), b.view(np.uint32))
    )


def _csv_array(values: np.ndarray | Labels, single: np.ndarray | None):
    """One column as pyarrow holds it for CSV, made from its buffers (`pa.array` imports
    pandas, to ask whether it was handed pandas' values, and a CSV file needs none): strings
    already quoted, NaN as null (an empty field). `single`: a float column as CSV writes it
    (`_single`), or None."""
    import pyarrow as pa

    if isinstance(values, Labels):
        names = [_quoted(n) for n in values.names]
        return pa.DictionaryArray.from_arrays(_numbers(values.codes), _strings(names))
    if values.dtype == object:  # strings, or values of mixed types as their text
        return _strings([None if is_missing(v) else _quoted(str(v)) for v in values])
    if single is not None:
        return _numbers(single, valid=~np.isnan(single))
    if values.dtype.kind == "f":  # byte counts, finite
        return _numbers(np.round(values).astype(np.int64))
    return _numbers(values)


def _quoted(text: str) -> str:
    """A CSV string field, as pyarrow's writer quotes every string: in quotes, quotes doubled."""
    return '"' + text.replace('"', '""') + '"'


def _csv_parts(sources: list[Any], which: list[int], n: int) -> Iterator[Any]:
    """The rows' CSV text in parts (`_csv_lines`), in order, formatted on a few threads."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(cpus or 1, CSV_MAX_THREADS, -(-n // CSV_THREAD_ROWS)))
    starts = range(0, n, CSV_PART_ROWS)

    def lines(start: int):
        return _csv_lines([s.slice(start, CSV_PART_ROWS) for s in sources], which)

    if workers == 1:
        yield from map(lines, starts)
        return
    with ThreadPoolExecutor(workers) as pool:
        waiting: deque = deque()
        for start in starts:
            waiting.append(pool.submit(lines, start))
            if len(waiting) > 2 * workers:
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()


def _csv_lines(sources: list[Any], which: list[int]):
    """The CSV lines of one part of the rows, as one buffer: each source's text, then each
    row's fields (`which`) joined by commas, a null (NaN) as an empty field."""
    import pyarrow.compute as pc

    newline, nothing, comma = _scalars("\n", "", ",")
    texts = [_csv_text(s) for s in sources]
    fields = [texts[i] for i in which]
    fields[-1] = pc.binary_join_element_wise(fields[-1], newline, nothing, null_handling="replace")
    lines = pc.binary_join_element_wise(*fields, comma, null_handling="replace")
    _, offsets, data = lines.buffers()
    first, last = np.frombuffer(offsets, np.int32, len(lines) + 1, 4 * lines.offset)[[0, -1]]
    return data[first:last]


def _csv_text(source):
    """A column's CSV fields as strings: numbers as pyarrow's CSV writer formats them (floats
    in their shortest form that reads back to the same float32), booleans as true/false."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(source.type):
        return source.dictionary.take(source.indices)
    if pa.types.is_boolean(source.type):
        return pc.if_else(source, *_scalars("true", "false"))
    if pa.types.is_string(source.type):
        return source
    return pc.cast(source, pa.string())


def _scalars(*texts: str) -> tuple[Any, ...]:
    """Strings as pyarrow scalars, for its kernels: a Python string there becomes one through
    `pa.scalar`, which imports pandas."""
    return tuple(_strings(texts))


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
