"""Exact fits of measured bytes as polynomials in M, K, N, and regimes of kernel sets.

Every buffer a float8 linear's kernels touch has a numel that is a product of at most two of
M, K, N (a tensor, a transposed copy), one of them (a row of scales) or a constant (a scalar
amax), so each kernel's bytes are an integer combination of M*K, K*N, M*N, M, K, N and 1. Seven
unknowns: seven shapes in general position determine them exactly, and every further shape must
match exactly, or the kernel set is not what we think (a regime change, a size-dependent split).

One exception, kept apart: split reductions. Inductor reduces a large tensor in two kernels,
the first writing one partial result per split to a workspace buffer that the second reads; the
number of splits comes from heuristics over the sizes, not from a polynomial. The profiler
reports a kernel's workspace bytes separately; they are fitted out (a few KiB against MiB) and
reported as a bound. For the same reason a kernel set is identified by reduction, not by
persistent vs looped reduction: Inductor switches the second kernel's loop style with the split
count while the bytes keep their form.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp

MONOMIALS: tuple[str, ...] = ("M*K", "K*N", "M*N", "M", "K", "N", "1")
_SYMBOLS = sp.symbols("M K N", positive=True, integer=True)
_TERMS = {
    "M*K": _SYMBOLS[0] * _SYMBOLS[1],
    "K*N": _SYMBOLS[1] * _SYMBOLS[2],
    "M*N": _SYMBOLS[0] * _SYMBOLS[2],
    "M": _SYMBOLS[0],
    "K": _SYMBOLS[1],
    "N": _SYMBOLS[2],
    "1": sp.Integer(1),
}

Shape = tuple[int, int, int]


class FitError(ValueError):
    pass


def monomial_row(shape: Shape) -> list[int]:
    m, k, n = shape
    return [m * k, k * n, m * n, m, k, n, 1]


@dataclass(frozen=True)
class Polynomial:
    """sum of coefficient x monomial; coefficients are exact rationals."""

    terms: tuple[tuple[str, Fraction], ...]  # non-zero terms, in MONOMIALS order

    @classmethod
    def from_map(cls, coefficients: dict[str, Fraction | int]) -> Polynomial:
        unknown = set(coefficients) - set(MONOMIALS)
        if unknown:
            raise FitError(f"unknown monomial(s) {', '.join(sorted(unknown))}; known: {', '.join(MONOMIALS)}")
        return cls(tuple((m, Fraction(coefficients[m])) for m in MONOMIALS
                         if Fraction(coefficients.get(m, 0)) != 0))

    def as_map(self) -> dict[str, Fraction]:
        return dict(self.terms)

    def to_sympy(self) -> sp.Expr:
        return sum((sp.Rational(c.numerator, c.denominator) * _TERMS[m] for m, c in self.terms),
                   sp.Integer(0))

    def __call__(self, M, K, N):
        """Evaluate on numbers or numpy arrays (float64)."""
        values = {"M*K": M * K, "K*N": K * N, "M*N": M * N, "M": M, "K": K, "N": N, "1": 1}
        total = np.zeros(np.shape(M)) if np.ndim(M) else 0.0
        for monomial, coefficient in self.terms:
            total = total + float(coefficient) * values[monomial]
        return total

    def exact(self, shape: Shape) -> Fraction:
        values = dict(zip(MONOMIALS, monomial_row(shape)))
        return sum((c * values[m] for m, c in self.terms), Fraction(0))

    def __sub__(self, other: Polynomial) -> Polynomial:
        a, b = self.as_map(), other.as_map()
        return Polynomial.from_map({m: a.get(m, 0) - b.get(m, 0) for m in MONOMIALS})

    def __add__(self, other: Polynomial) -> Polynomial:
        a, b = self.as_map(), other.as_map()
        return Polynomial.from_map({m: a.get(m, 0) + b.get(m, 0) for m in MONOMIALS})

    def __str__(self) -> str:
        return str(self.to_sympy())


def from_sympy(expr: sp.Expr) -> Polynomial:
    """A sympy polynomial in M, K, N of the fitted form -> Polynomial (models' worst/ideal)."""
    poly = sp.Poly(sp.expand(expr), *_SYMBOLS)
    coefficients: dict[str, Fraction] = {}
    names = {(1, 1, 0): "M*K", (0, 1, 1): "K*N", (1, 0, 1): "M*N", (1, 0, 0): "M",
             (0, 1, 0): "K", (0, 0, 1): "N", (0, 0, 0): "1"}
    for powers, c in poly.terms():
        if powers not in names:
            raise FitError(f"{expr} has a term outside {', '.join(MONOMIALS)}")
        coefficients[names[powers]] = Fraction(int(sp.numer(c)), int(sp.denom(c)))
    return Polynomial.from_map(coefficients)


def fit_polynomial(shapes: list[Shape], values: list[int]) -> Polynomial:
    """Exact rational solution over all given shapes; FitError if under-determined or
    inconsistent (no polynomial of the fitted form matches every shape)."""
    if len(shapes) != len(values):
        raise FitError("one value per shape")
    A = sp.Matrix([monomial_row(s) for s in shapes])
    b = sp.Matrix([int(v) for v in values])
    if A.rank() < len(MONOMIALS):
        raise FitError(
            f"{len(shapes)} shapes do not determine {len(MONOMIALS)} coefficients; "
            "add shapes with distinct M, K, N (not all powers of two, not proportional)"
        )
    try:
        solution, params = A.gauss_jordan_solve(b)
    except ValueError:
        raise FitError("no polynomial in M*K, K*N, M*N, M, K, N, 1 matches every shape") from None
    assert not params, "full rank leaves no free parameters"
    return Polynomial.from_map({m: Fraction(int(sp.numer(c)), int(sp.denom(c)))
                                for m, c in zip(MONOMIALS, solution)})


@dataclass(frozen=True)
class KernelSample:
    """One overhead kernel seen at one shape."""

    name: str
    graph: str
    kind: str
    role: str | None
    nbytes: int
    workspace: int = 0  # split-reduction workspace bytes among nbytes

    @property
    def fitted_bytes(self) -> int:
        return self.nbytes - self.workspace


def kind_family(kind: str) -> str:
    return "reduction" if kind.endswith("reduction") else kind


@dataclass(frozen=True)
class ShapeSample:
    shape: Shape
    kernels: tuple[KernelSample, ...]

    @property
    def signature(self) -> tuple[tuple[str, str, str | None], ...]:
        """What identifies the kernel set: graph, kind and role of each kernel, in order.
        Kernel names carry Inductor's numbering, which is stable within a regime but not a
        meaning, so they are not part of it."""
        return tuple((k.graph, kind_family(k.kind), k.role) for k in self.kernels)


@dataclass(frozen=True)
class FittedKernel:
    key: str  # graph and position, e.g. "fwd.0"
    name: str  # Inductor's name at the first shape of the regime
    graph: str
    kind: str
    role: str | None
    nbytes: Polynomial


@dataclass(frozen=True)
class Regime:
    """Shapes sharing one kernel set, and the exact polynomials of its bytes."""

    shapes: tuple[Shape, ...]
    kernels: tuple[FittedKernel, ...]
    total: Polynomial
    verified: tuple[Shape, ...]  # shapes not used in the fit that matched exactly
    workspace_max: int = 0  # largest split-reduction workspace at a shape, bytes, not in total


@dataclass(frozen=True)
class Unfitted:
    shapes: tuple[Shape, ...]
    reason: str


@dataclass(frozen=True)
class TrafficFit:
    regimes: tuple[Regime, ...]
    unfitted: tuple[Unfitted, ...]


def kernel_keys(graphs: list[str]) -> list[str]:
    """Stable names of a step's kernels: graph and position in it, e.g. 'fwd.0', 'bwd.2'."""
    counters: dict[str, int] = {}
    keys = []
    for graph in graphs:
        keys.append(f"{graph}.{counters.get(graph, 0)}")
        counters[graph] = counters.get(graph, 0) + 1
    return keys


def _fit_regime(samples: list[ShapeSample], *, verify: int) -> Regime:
    fit_part, check_part = samples[: len(samples) - verify], samples[len(samples) - verify:]
    shapes = [s.shape for s in fit_part]
    kernels = []
    first_kernels = fit_part[0].kernels
    for i, (key, first) in enumerate(zip(kernel_keys([k.graph for k in first_kernels]), first_kernels)):
        poly = fit_polynomial(shapes, [s.kernels[i].fitted_bytes for s in fit_part])
        kernels.append(FittedKernel(key, first.name, first.graph, first.kind, first.role, poly))
    total = fit_polynomial(shapes, [sum(k.fitted_bytes for k in s.kernels) for s in fit_part])
    for sample in check_part:
        for kernel, seen in zip(kernels, sample.kernels):
            if kernel.nbytes.exact(sample.shape) != seen.fitted_bytes:
                raise FitError(
                    f"kernel {kernel.key} ({kernel.name}) at {sample.shape}: fitted "
                    f"{kernel.nbytes.exact(sample.shape)} bytes, measured {seen.fitted_bytes}"
                )
    workspace = max(sum(k.workspace for k in s.kernels) for s in samples)
    return Regime(tuple(shapes), tuple(kernels), total, tuple(s.shape for s in check_part),
                  workspace)


def fit_traffic(samples: list[ShapeSample], *, verify: int = 2) -> TrafficFit:
    """Group shapes by kernel set, fit each group exactly on all but `verify` of its shapes and
    check the fit on those. Groups too small or inconsistent are reported, not dropped."""
    groups: dict[tuple, list[ShapeSample]] = {}
    for sample in samples:
        groups.setdefault(sample.signature, []).append(sample)
    regimes, unfitted = [], []
    for group in sorted(groups.values(), key=lambda g: -len(g)):
        shapes = tuple(s.shape for s in group)
        if len(group) < len(MONOMIALS) + verify:
            unfitted.append(Unfitted(shapes, f"{len(group)} shapes share this kernel set; "
                                             f"an exact fit needs {len(MONOMIALS) + verify}"))
            continue
        try:
            regimes.append(_fit_regime(group, verify=verify))
        except FitError as e:
            unfitted.append(Unfitted(shapes, str(e)))
    return TrafficFit(tuple(regimes), tuple(unfitted))


def nearest_regime(regimes: tuple[Regime, ...], M, K, N) -> np.ndarray:
    """Index of the regime whose shapes lie nearest in log2 space, per query shape."""
    points, owners = [], []
    for index, regime in enumerate(regimes):
        for shape in regime.shapes + regime.verified:
            points.append(np.log2(shape))
            owners.append(index)
    query = np.log2(np.stack(np.broadcast_arrays(M, K, N), axis=-1).astype(np.float64))
    distance = ((query[:, None, :] - np.asarray(points)[None, :, :]) ** 2).sum(axis=-1)
    return np.asarray(owners)[distance.argmin(axis=1)]


# Fit and check shapes in general position: distinct, not all powers of two, spanning 256 to
# 16384 per dimension so every regime Inductor picks on a GPU has members.
FIT_SHAPES: tuple[Shape, ...] = (
    (256, 768, 512), (384, 512, 1280), (640, 1024, 768), (1024, 384, 2048),
    (1536, 2560, 1024), (2048, 1280, 3072), (3072, 4096, 1536), (4096, 2048, 5120),
    (6144, 8192, 3072), (8192, 5120, 12288), (12288, 16384, 8192), (16384, 10240, 14336),
)
