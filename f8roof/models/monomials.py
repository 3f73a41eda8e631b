"""M, K, N and the monomials every byte count of a linear is made of.

Every buffer a float8 linear's kernels touch has a numel that is a product of at most two of
M, K, N (a tensor, a transposed copy), one of them (a row of scales) or a constant (a scalar
amax), so bytes are integer combinations of M*K, K*N, M*N, M, K, N and 1. One definition of the
symbols and of the order, shared by the sympy models, the fits and the vectorized estimate.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

M, K, N = sp.symbols("M K N", positive=True, integer=True)
SYMBOLS = (M, K, N)

MONOMIALS: tuple[str, ...] = ("M*K", "K*N", "M*N", "M", "K", "N", "1")
TERMS: dict[str, sp.Expr] = {
    "M*K": M * K,
    "K*N": K * N,
    "M*N": M * N,
    "M": M,
    "K": K,
    "N": N,
    "1": sp.Integer(1),
}


def monomial_row(shape: tuple[int, int, int]) -> list[int]:
    """Exact integer values of the monomials at one shape, in MONOMIALS order."""
    m, k, n = shape
    return [m * k, k * n, m * n, m, k, n, 1]


def monomials(M, K, N) -> np.ndarray:
    """(n, 7) float64 columns of the monomials over arrays of shapes, in MONOMIALS order."""
    return np.stack([M * K, K * N, M * N, M, K, N, np.ones_like(M)], axis=-1)
