"""M, K, N and the monomials every byte count of a linear is made of.

Every buffer a float8 linear's kernels touch has a numel that is a product of at most two of
M, K, N (a tensor, a transposed copy), one of them (a row of scales) or a constant (a scalar
amax), so bytes are integer combinations of M*K, K*N, M*N, M, K, N and 1. One definition of the
symbols and of the order, shared by the sympy models, the fits and the vectorized estimate.
"""

from __future__ import annotations

from functools import cache, cached_property
from typing import Any

import numpy as np

MONOMIALS: tuple[str, ...] = ("M*K", "K*N", "M*N", "M", "K", "N", "1")
SYMPY_NAMES = ("M", "K", "N", "SYMBOLS", "TERMS")


def __getattr__(name: str) -> Any:
    """The sympy symbols M, K, N (`SYMBOLS`) and the monomials in them (`TERMS`), built on
    first use: an estimate from the shipped byte table imports no sympy."""
    if name in SYMPY_NAMES:
        return _sympy_names()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _sympy_names() -> dict[str, Any]:
    import sympy as sp

    M, K, N = sp.symbols("M K N", positive=True, integer=True)
    terms = {"M*K": M * K, "K*N": K * N, "M*N": M * N, "M": M, "K": K, "N": N}
    return {"M": M, "K": K, "N": N, "SYMBOLS": (M, K, N), "TERMS": terms | {"1": sp.Integer(1)}}


def monomial_row(shape: tuple[int, int, int]) -> list[int]:
    """Exact integer values of the monomials at one shape, in MONOMIALS order."""
    m, k, n = shape
    return [m * k, k * n, m * n, m, k, n, 1]


class ShapeArrays:
    """Many shapes as float64 arrays M, K, N, and what the models evaluate on them, each computed
    once however many kernels, kernel sets and variants use it: the monomials, log2 of each dim."""

    def __init__(self, M, K, N) -> None:
        self.M, self.K, self.N = (np.asarray(x, dtype=np.float64) for x in (M, K, N))

    def __len__(self) -> int:
        return len(self.M)

    @cached_property
    def _columns(self) -> tuple[np.ndarray, ...]:
        M, K, N = self.M, self.K, self.N
        return (M * K, K * N, M * N, M, K, N)

    def polynomials(self, coefficients, owner: np.ndarray | None = None) -> np.ndarray:
        """Polynomials in the monomials at every shape: (polynomials x MONOMIALS) coefficients
        -> (polynomials x shapes); with `owner` (one polynomial index per shape), each shape's
        own polynomial only -> (shapes,).

        Term by term, skipping the zero terms (a linear's kernels have three or four of seven),
        in MONOMIALS order, the same sums either way. Not a matrix product:
        numpy hands that to BLAS, whose threads spin-wait for each other and, on a machine
        with other work, cost several times the arithmetic (half an estimate's time)."""
        coefficients = np.asarray(coefficients, dtype=np.float64)
        if owner is not None:
            out = np.zeros(len(self))
            for j, column in enumerate(self._columns):
                if coefficients[:, j].any():
                    out += coefficients[owner, j] * column
            if coefficients[:, -1].any():
                out += coefficients[owner, -1]
            return out
        out = np.zeros((len(coefficients), len(self)))
        for row, coefficient in zip(out, coefficients):
            for c, column in zip(coefficient[:-1], self._columns):
                if c:
                    row += c * column
            if coefficient[-1]:
                row += coefficient[-1]
        return out

    def cached(self, key: object, compute):
        """`compute()` once per key for these shapes (the nearest kernel set of each shape, for
        one set of kernel sets, is shared by every variant and polynomial that asks)."""
        cache = self.__dict__.setdefault("_cached", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    @cached_property
    def logs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.log2(self.M), np.log2(self.K), np.log2(self.N))

    def distances(self, points: tuple[tuple[int, int, int], ...]) -> np.ndarray:
        """Squared log2-space distance of every shape to each of `points`, as a (points x
        shapes) float32 array (each point's row contiguous: a few vector passes per point),
        computed once per set of points: kernel sets and kernel-set ranges share it."""
        cache = self.__dict__.setdefault("_distances", {})
        if points not in cache:
            logs = [x.astype(np.float32) for x in self.logs]
            out = np.empty((len(points), len(self)), dtype=np.float32)
            scratch = np.empty(len(self), dtype=np.float32)
            for row, point in zip(out, np.log2(np.array(points, dtype=np.float64))):
                np.subtract(logs[0], np.float32(point[0]), out=row)
                row *= row
                for q, p in zip(logs[1:], point[1:]):
                    np.subtract(q, np.float32(p), out=scratch)
                    scratch *= scratch
                    row += scratch
            cache[points] = out
        return cache[points]
