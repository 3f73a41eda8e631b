"""Linear shapes from user input: 'M,K,N' strings, CSV files, named sweeps.

A shapes file is comma-separated text: a header line naming the columns (it must name M, K and
N once each; other columns are allowed and ignored, but for the ones the request sets for
every shape, `PER_REQUEST`, refused), then one line per shape. Every line has
exactly as many fields as the header: a row with an extra or a missing field is refused, never
shifted into other columns. Fields may carry spaces or tabs around them; quotes are not CSV
quoting here but part of the value (and so refused). Empty lines are skipped; line ends are
\\n, \\r\\n or \\r; a UTF-8 byte order mark is allowed. Each of M, K, N is written in decimal
digits only (no sign, point or exponent) and lies in 1..MAX_DIM. Errors name the row: its line
number in the file, counting every line (the header is row 1 when the file starts with it).

Well-formed files are read by pyarrow's CSV parser and checked as whole columns (200,000 shapes
take a few tens of milliseconds); a file that fails any check there is read again line by line,
which has the final word and names the row that is wrong and why.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np

from f8roof.errors import F8RoofError, term

# The largest M, K or N accepted (2**31 - 1). No linear anyone trains comes near it, and below
# it the models' arithmetic stays exact: M*K < 2**62 fits int64 and 2*M*K*N < 2**94 keeps the
# FLOP counts within float64's relative precision. Larger values are almost always a typo or a
# shifted column, so they are refused instead of estimated.
MAX_DIM = 2**31 - 1
DIMS = ("M", "K", "N")
_DIGITS = re.compile(r"[0-9]+")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_BLANKS = " \t"
# The fast path accepts only fields this matches (at most 10 digits, below 2**34, so the int64
# cast is exact); anything else goes to the line-by-line reader.
_FAST_FIELD = r"^[ \t]*[0-9]{1,10}[ \t]*$"

# Columns that name what the request sets for every shape (a validation report's `recipe`):
# refused rather than ignored, since an estimate runs each shape under the request's recipes
# and context, one answer for all rows, and a row's own would silently not be honoured.
PER_REQUEST = {
    "recipe": "recipe",
    "before": "before",
    "after": "after",
    "implementation": "implementation",
    "gpu": "gpu",
}

SWEEPS = {
    # The seed's sweep (torchao PR #668's roofline script): M, K, N each 2^9..2^15, 343 shapes.
    "pr668": lambda: list(itertools.product([2**i for i in range(9, 16)], repeat=3)),
    # Square shapes M = K = N = 2^7..2^16.
    "pow2": lambda: [(2**i,) * 3 for i in range(7, 17)],
}


def _show(text: str, limit: int = 24) -> str:
    """A value quoted for a one-line message, cut short when long."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _dim_problem(text: str) -> tuple[int | None, str]:
    """(value, '') for a valid dimension, else (None, what is wrong with it)."""
    value = text.strip(_BLANKS)
    if not value:
        return None, "is empty"
    if not _DIGITS.fullmatch(value):
        try:
            number = float(value)
        except (ValueError, OverflowError):
            return None, f"{_show(value)} is not an integer"
        if not math.isfinite(number):
            return None, f"{_show(value)} is not finite"
        if number <= 0:
            return None, f"{_show(value)} is not positive"
        return None, f"{_show(value)} is not an integer (digits only: no point, exponent or sign)"
    significant = value.lstrip("0")
    if len(significant) > 19:  # beyond 64 bits; int() of it would be slow or refused anyway
        return None, f"{_show(value)} ({len(significant)} digits) exceeds {MAX_DIM} (2**31-1)"
    number = int(significant or "0")
    if number == 0:
        return None, "is 0, not positive"
    if number > MAX_DIM:
        return None, f"{number} exceeds {MAX_DIM} (2**31-1), the largest dimension accepted"
    return number, ""


def parse_shape(text: str) -> tuple[int, int, int]:
    """'M,K,N' (or 'MxKxN') -> (M, K, N), each an integer in 1..MAX_DIM."""
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3:
        raise F8RoofError(
            f"bad shape {_show(text, 40)}: expected three positive integers M,K,N "
            f"(got {len(parts)} field{'s' * (len(parts) != 1)})"
        )
    values = []
    for name, part in zip(DIMS, parts):
        value, problem = _dim_problem(part)
        if value is None:
            raise F8RoofError(f"bad shape {_show(text, 40)}: {name} {problem}")
        values.append(value)
    return tuple(values)  # type: ignore[return-value]


def _header(data: bytes, path) -> tuple[list[str], int, int]:
    """The header's column names (blanks stripped), its line number and where the data starts."""
    start = len(_BOM) if data.startswith(_BOM) else 0
    line_no = 1
    for match in _LINE_END.finditer(data, start):
        if match.start() > start:
            end = match.end()
            break
        start, line_no = match.end(), line_no + 1
    else:
        end = len(data)
    if end == start:
        raise F8RoofError(f"shapes file {path} is empty: expected a header line M,K,N")
    # Bytes that are not UTF-8 can only spoil names of columns that are not read.
    header = data[start:end].rstrip(b"\r\n").decode("utf-8", errors="replace")
    names = [n.strip(_BLANKS) for n in header.split(",")]
    if "" in names:
        where = names.index("") + 1
        hint = " (a trailing comma?)" if where == len(names) else ""
        raise F8RoofError(
            f"shapes file {path}, row {line_no} (the header): column {where} has no name{hint}"
        )
    missing = [d for d in DIMS if d not in names]
    if missing:
        raise F8RoofError(
            f"shapes file {path} lacks column(s) {', '.join(missing)} (header: {_show(header, 60)})"
        )
    per_row = [n for n in names if n.lower() in PER_REQUEST]
    if per_row:
        name = per_row[0]
        raise F8RoofError(
            f"shapes file {path} has a {name!r} column: {term(PER_REQUEST[name.lower()])} sets it "
            "for every shape, never per row (drop the column)"
        )
    twice = [d for d in DIMS if names.count(d) > 1]
    if twice:
        raise F8RoofError(f"shapes file {path} names column(s) {', '.join(twice)} more than once")
    return names, line_no, end


def _read_lines(data: bytes, path) -> np.ndarray:
    """The reference reading, line by line: the shapes, or the first problem with its row."""
    names, line_no, end = _header(data, path)
    columns = [names.index(d) for d in DIMS]
    rows: list[tuple[int, ...]] = []
    for number, line in enumerate(_LINE_END.split(data[end:]), start=line_no + 1):
        if not line:
            continue
        where = f"shapes file {path}, row {number}"
        fields = line.split(b",")
        if len(fields) != len(names):
            hint = ""
            if len(fields) == len(names) + 1 and not fields[-1].strip(_BLANKS.encode()):
                hint = ": a trailing comma?"
            elif len(fields) > len(names):
                hint = ": a value too many, or a comma inside a value?"
            raise F8RoofError(
                f"{where} has {len(fields)} fields, the header {len(names)} "
                f"({', '.join(names)}){hint}"
            )
        row = []
        for name, column in zip(DIMS, columns):
            try:
                value, problem = _dim_problem(fields[column].decode("utf-8"))
            except UnicodeDecodeError:
                value, problem = None, "is not UTF-8 text"
            if value is None:
                raise F8RoofError(
                    f"{where}: {name} {problem}; M, K, N must be integers in 1..{MAX_DIM}"
                )
            row.append(value)
        rows.append(tuple(row))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _read_fast(data: bytes, names: list[str], end: int) -> np.ndarray | None:
    """Whole-column reading with pyarrow; None when anything looks off (the caller then reads
    line by line, which accepts and refuses exactly as documented, naming the row)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    body = data[end:]
    if not body.strip(b"\r\n"):
        return np.empty((0, 3), dtype=np.int64)
    if body.startswith(_BOM):  # pyarrow would drop it as the start of its input; it is a field's
        return None
    # Columns other than M, K, N get placeholder names: theirs may repeat; they are not read.
    column_names = [n if n in DIMS else f"_{i}" for i, n in enumerate(names)]
    try:
        table = pcsv.read_csv(
            pa.BufferReader(body),
            read_options=pcsv.ReadOptions(column_names=column_names, use_threads=False),
            # No quoting: a shapes file never needs it, and one way of splitting a line is what
            # the line-by-line reader can reproduce exactly.
            parse_options=pcsv.ParseOptions(quote_char=False, ignore_empty_lines=True),
            convert_options=pcsv.ConvertOptions(
                include_columns=list(DIMS),
                column_types={d: pa.string() for d in DIMS},
                strings_can_be_null=False,
            ),
        )
        if table.num_rows == 0:
            return None
        out = np.empty((table.num_rows, 3), dtype=np.int64)
        for j, name in enumerate(DIMS):
            column = table[name]
            if not pc.all(pc.match_substring_regex(column, _FAST_FIELD)).as_py():
                return None
            values = pc.cast(pc.utf8_trim(column, _BLANKS), pa.int64()).to_numpy()
            if not (values.min() > 0 and values.max() <= MAX_DIM):
                return None
            out[:, j] = values
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return out


def read_shapes_file(path: str | Path) -> np.ndarray:
    """(n, 3) int64 array of the shapes in a CSV file with columns M, K, N (format above)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise F8RoofError(f"cannot read shapes file {path}: {e.strerror or e}") from None
    names, _, end = _header(data, path)
    fast = _read_fast(data, names, end)
    return fast if fast is not None else _read_lines(data, path)


def sweep(name: str) -> list[tuple[int, int, int]]:
    if name not in SWEEPS:
        raise F8RoofError(f"unknown sweep {name!r}; known: {', '.join(SWEEPS)}")
    return SWEEPS[name]()


def collect_shapes(texts, shapes_file, sweep_name) -> np.ndarray:
    """Every shape the user gave: --shape texts, a shapes file, a named sweep, in that order,
    as one (n, 3) int64 array (a shapes file stays an array: no Python tuple per row)."""
    parts = [np.array([parse_shape(t) for t in texts], dtype=np.int64).reshape(-1, 3)]
    if shapes_file:
        parts.append(read_shapes_file(shapes_file))
    if sweep_name:
        parts.append(np.array(sweep(sweep_name), dtype=np.int64).reshape(-1, 3))
    shapes = np.concatenate(parts)
    if not len(shapes):
        raise F8RoofError(
            f"no shapes: give {term('shapes')} M,K,N, {term('shapes_file')} or {term('sweep')}"
        )
    return shapes


def _capped_int(value) -> int:
    """A Python or numpy integer, clipped into int64 (what is clipped is refused afterwards)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{value!r} is not an integer")
    return min(max(int(value), -1), 2**62)


def as_array(shapes) -> np.ndarray:
    """(n, 3) int64 array of shapes, each dim checked to be an integer in 1..MAX_DIM."""
    try:
        raw = np.asarray(shapes)
        if raw.dtype.kind == "f":
            if not np.isfinite(raw).all() or (raw != np.round(raw)).any():
                raise F8RoofError("shapes must be integers (got a fraction, inf or nan)")
            raw = np.clip(raw, -1, 2.0**62)  # clipped values are refused below
        elif raw.dtype.kind == "u":
            raw = np.minimum(raw, 2**62)
        elif raw.dtype.kind == "O":  # Python ints beyond 64 bits, or not numbers at all
            raw = np.vectorize(_capped_int, otypes=[np.int64])(raw)
        elif raw.dtype.kind != "i":
            raise F8RoofError(f"shapes must be integers (got {raw.dtype} values)")
        array = raw.astype(np.int64, copy=False).reshape(-1, 3)
    except (ValueError, TypeError, OverflowError) as e:
        raise F8RoofError(f"shapes must be triples of integers M, K, N: {e}") from None
    if array.size and (array.min() <= 0 or array.max() > MAX_DIM):
        raise F8RoofError(f"shapes must be integers in 1..{MAX_DIM} (2**31-1)")
    return array


def parse_ints(text: str, option: str) -> list[int]:
    """A comma list of integers for an option (`--tokens 2048,8192`)."""
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise F8RoofError(f"{option} {text!r}: expected integers, e.g. 2048,8192") from None
    if not values:
        raise F8RoofError(f"{option}: give at least one value")
    return values
