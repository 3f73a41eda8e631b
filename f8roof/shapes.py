"""Linear shapes from user input: 'M,K,N' strings, CSV files, named sweeps."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from f8roof.errors import F8RoofError

SWEEPS = {
    # The seed's sweep: M, K, N each 2^9..2^15, all 343 combinations.
    "seed": lambda: list(itertools.product([2**i for i in range(9, 16)], repeat=3)),
    # Square shapes M = K = N = 2^7..2^16.
    "pow2": lambda: [(2**i,) * 3 for i in range(7, 17)],
}


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise F8RoofError(f"bad shape {text!r}: expected three positive integers M,K,N") from None
    if len(values) != 3 or min(values) <= 0:
        raise F8RoofError(f"bad shape {text!r}: expected three positive integers M,K,N")
    return values  # type: ignore[return-value]


def read_shapes_file(path: str | Path) -> list[tuple[int, int, int]]:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise F8RoofError(f"cannot read shapes file {path}: {e}") from None
    missing = [c for c in ("M", "K", "N") if c not in frame.columns]
    if missing:
        raise F8RoofError(f"shapes file {path} lacks column(s) {', '.join(missing)}")
    values = frame[["M", "K", "N"]]
    numeric = values.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna().any(axis=1) | (numeric <= 0).any(axis=1) | (numeric % 1 != 0).any(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise F8RoofError(
            f"shapes file {path}, row {row + 2}: M, K, N must be positive integers "
            f"(got {', '.join(map(str, values.iloc[row].tolist()))})"
        )
    return [tuple(int(x) for x in row) for row in numeric.to_numpy()]


def sweep(name: str) -> list[tuple[int, int, int]]:
    if name not in SWEEPS:
        raise F8RoofError(f"unknown sweep {name!r}; known: {', '.join(SWEEPS)}")
    return SWEEPS[name]()


def as_array(shapes) -> np.ndarray:
    """(n, 3) int64 array of shapes, checked positive."""
    array = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
    if (array <= 0).any():
        raise F8RoofError("shapes must be positive integers")
    return array


def collect_shapes(texts, shapes_file, sweep_name) -> list[tuple[int, int, int]]:
    """Every shape the user gave: --shape texts, a shapes file, a named sweep."""
    shapes = [parse_shape(t) for t in texts]
    if shapes_file:
        shapes += read_shapes_file(shapes_file)
    if sweep_name:
        shapes += sweep(sweep_name)
    if not shapes:
        raise F8RoofError("no shapes: give --shape M,K,N, --shapes-file or --sweep")
    return shapes
