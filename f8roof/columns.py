"""The rows an answer is made of (an estimate's shapes, a model's layer types) as named numpy
columns of one length. The engine computes and the terminal prints from numpy alone; pandas is
imported by `to_frame`, for whoever asks for a DataFrame (the Python API, Parquet and JSON
files): it costs a fresh process more than the whole answer (issue 37)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd

# Rows taken from a column: indices, a boolean mask or a slice.
Rows = np.ndarray | Sequence[int] | slice


@dataclass(frozen=True, eq=False)
class Labels:
    """A column of a few distinct strings (a recipe, a reason, a decision) as codes into them:
    a row costs a byte, not a Python string; a DataFrame gets it as a Categorical."""

    codes: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def repeat(cls, name: str, n: int) -> Labels:
        return cls(np.zeros(n, dtype=np.int8), (name,))

    def __len__(self) -> int:
        return len(self.codes)

    def strings(self) -> np.ndarray:
        # numpy's stubs type an index by an array as Any
        strings: np.ndarray = np.array(self.names, dtype=object)[self.codes]
        return strings

    def __getitem__(self, rows: Rows) -> Labels:
        return Labels(self.codes[rows], self.names)

    @classmethod
    def concat(cls, parts: Sequence[Labels]) -> Labels:
        names = tuple(dict.fromkeys(name for part in parts for name in part.names))
        codes = [np.array([names.index(n) for n in p.names])[p.codes] for p in parts]
        return cls(np.concatenate(codes), names)


Column = np.ndarray | Labels


class Columns:
    """Named columns of one length: `columns[name]` is a numpy array (a `Labels` column's as
    strings), set one the same way; rows are taken by index or mask (`take`), read one at a
    time as a dict (`row`), and `to_frame` is the DataFrame."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Column] = {}
        for name, values in (data or {}).items():
            self[name] = values

    @property
    def columns(self) -> list[str]:
        return list(self._data)

    def __len__(self) -> int:
        return len(next(iter(self._data.values()), ()))

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __getitem__(self, name: str) -> np.ndarray:
        values = self._data[name]
        return values.strings() if isinstance(values, Labels) else values

    def __setitem__(self, name: str, values: Column | Sequence[Any]) -> None:
        column = values if isinstance(values, Labels) else np.asarray(values)
        if isinstance(column, np.ndarray) and column.dtype.kind == "U":
            column = column.astype(object)  # strings as Python objects, as pandas holds them
        if self._data and len(column) != len(self):
            raise ValueError(f"column {name} has {len(column)} rows, the others {len(self)}")
        self._data[name] = column

    def items(self) -> Iterator[tuple[str, Column]]:
        """Each column as stored (a `Labels` column as its codes and names)."""
        return iter(self._data.items())

    def set_rows(self, rows: Rows, name: str, values: npt.ArrayLike) -> None:
        """`values` into column `name` at `rows`, as pandas' `.loc` sets them: a new column is
        NaN in the other rows, and a column's type widens to hold the values."""
        values = np.asarray(values)
        column = self[name] if name in self else np.full(len(self), np.nan)
        column = column.astype(np.result_type(column, values))  # a copy: views stay as they were
        column[rows] = values
        self[name] = column

    def take(self, rows: Rows) -> Columns:
        """The rows at `rows` (indices, a boolean mask or a slice), in that order."""
        return Columns({name: values[rows] for name, values in self._data.items()})

    def head(self, n: int) -> Columns:
        return self.take(slice(0, n))

    def row(self, i: int | np.integer[Any]) -> dict[str, Any]:
        return {
            name: values.names[values.codes[i]] if isinstance(values, Labels) else values[i]
            for name, values in self._data.items()
        }

    def rows(self) -> Iterator[dict[str, Any]]:
        return (self.row(i) for i in range(len(self)))

    def join(self, other: Columns) -> Columns:
        """These columns and `other`'s beside them, row for row."""
        return Columns({**self._data, **other._data})

    @classmethod
    def concat(cls, parts: Sequence[Columns]) -> Columns:
        """The parts' rows one after the other; a column a part lacks is NaN in its rows (as
        pandas' concat), columns in the order they first appear."""
        names = dict.fromkeys(name for part in parts for name in part.columns)
        out: dict[str, Column] = {}
        for name in names:
            found = [p._data.get(name, np.full(len(p), np.nan)) for p in parts]
            labels = [f for f in found if isinstance(f, Labels)]
            if len(labels) == len(found):
                out[name] = Labels.concat(labels)
            else:
                out[name] = np.concatenate(
                    [f.strings() if isinstance(f, Labels) else f for f in found]
                )
        return cls(out)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            {
                name: (
                    pd.Categorical.from_codes(values.codes, values.names)
                    if isinstance(values, Labels)
                    else values
                )
                for name, values in self._data.items()
            },
            copy=False,
        )
