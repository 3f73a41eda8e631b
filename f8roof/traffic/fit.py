"""Exact fits of measured bytes as polynomials in M, K, N, and kernel sets of kernel sets.

Every buffer a float8 linear's kernels touch has a numel that is a product of at most two of
M, K, N (a tensor, a transposed copy), one of them (a row of scales) or a constant (a scalar
amax), so each kernel's bytes are an integer combination of M*K, K*N, M*N, M, K, N and 1.

Two independent ways to the polynomial, which must agree:
- read off the buffers: at a shape with M, K, N distinct, each buffer dim names its symbol;
- solve: seven shapes in general position determine the seven coefficients of a step's total,
  and every further shape must match exactly.
The first works from one shape, so it covers every kernel set Inductor picks (it reorders and
fuses differently with the sizes: a kernel set may hold one shape); the second checks it wherever a
kernel set was seen at enough shapes. A query shape takes the kernel set of the calibration
shape nearest to it in log space.

One exception, kept apart: split reductions. Inductor reduces a large tensor in two kernels,
the first writing one partial result per split to a workspace buffer that the second reads; the
number of splits comes from heuristics over the sizes, not from a polynomial. The profiler
reports a kernel's workspace bytes separately; they are fitted out (a few KiB against MiB) and
reported as a bound. For the same reason a kernel set is identified by reduction, not by
persistent vs looped reduction: Inductor switches the second kernel's loop style with the split
count while the bytes keep their form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from f8roof.errors import ModelError
from f8roof.traffic import monomials
from f8roof.traffic.monomials import MONOMIALS, monomial_row

if TYPE_CHECKING:
    import sympy as sp

Shape = tuple[int, int, int]


def shape_text(shape: Shape) -> str:
    """'4096x1024x512': how shapes are named in keys, file names and progress bars."""
    return "x".join(map(str, shape))


class FitError(ModelError):
    pass


@dataclass(frozen=True)
class Polynomial:
    """sum of coefficient x monomial; coefficients are exact rationals."""

    terms: tuple[tuple[str, Fraction], ...]  # non-zero terms, in MONOMIALS order

    @classmethod
    def from_map(cls, coefficients: Mapping[str, Fraction | int]) -> Polynomial:
        unknown = set(coefficients) - set(MONOMIALS)
        if unknown:
            raise FitError(
                f"unknown monomial(s) {', '.join(sorted(unknown))}; known: {', '.join(MONOMIALS)}"
            )
        terms = []
        for m in MONOMIALS:  # one Fraction per non-zero term: files hold thousands of terms
            c = coefficients.get(m)
            if c:
                terms.append((m, c if isinstance(c, Fraction) else Fraction(c)))
        return cls(tuple(terms))

    def as_map(self) -> dict[str, Fraction]:
        return dict(self.terms)

    def coefficients(self) -> tuple[Fraction, ...]:
        """One coefficient per monomial, in MONOMIALS order (zeros included)."""
        terms = dict(self.terms)
        return tuple(terms.get(m, Fraction(0)) for m in MONOMIALS)

    def to_sympy(self) -> sp.Expr:
        import sympy as sp

        return sum(
            (sp.Rational(c.numerator, c.denominator) * monomials.TERMS[m] for m, c in self.terms),
            sp.Integer(0),
        )

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


def polynomial_sum(polynomials: Iterable[Polynomial]) -> Polynomial:
    """The exact sum, term by term (a calibration's load checks thousands of kernel sums)."""
    total: dict[str, Fraction | int] = {}
    for polynomial in polynomials:
        for monomial, coefficient in polynomial.terms:
            total[monomial] = total.get(monomial, 0) + coefficient
    return Polynomial.from_map(total)


def from_sympy(expr: sp.Expr) -> Polynomial:
    """A sympy polynomial in M, K, N of the fitted form -> Polynomial (models' worst/ideal)."""
    import sympy as sp

    try:
        poly = sp.Poly(sp.expand(expr), *monomials.SYMBOLS)
    except sp.PolynomialError:
        raise FitError(f"{expr} is no polynomial in M, K, N") from None
    coefficients: dict[str, Fraction] = {}
    names = {
        (1, 1, 0): "M*K",
        (0, 1, 1): "K*N",
        (1, 0, 1): "M*N",
        (1, 0, 0): "M",
        (0, 1, 0): "K",
        (0, 0, 1): "N",
        (0, 0, 0): "1",
    }
    for powers, c in poly.terms():
        if powers not in names:
            raise FitError(f"{expr} has a term outside {', '.join(MONOMIALS)}")
        coefficients[names[powers]] = Fraction(int(sp.numer(c)), int(sp.denom(c)))
    return Polynomial.from_map(coefficients)


def fit_polynomial(shapes: list[Shape], values: list[int]) -> Polynomial:
    """Exact rational solution over all given shapes; FitError if under-determined or
    inconsistent (no polynomial of the fitted form matches every shape)."""
    import sympy as sp

    if len(shapes) != len(values):
        raise FitError("one value per shape")
    A = sp.Matrix([monomial_row(s) for s in shapes])
    b = sp.Matrix([int(v) for v in values])
    if A.rank() < len(MONOMIALS):
        raise FitError(
            f"{len(shapes)} shapes do not determine {len(MONOMIALS)} coefficients: add "
            "shapes with distinct, not proportional M, K, N"
        )
    try:
        solution, params = A.gauss_jordan_solve(b)
    except ValueError:
        raise FitError("no polynomial in M*K, K*N, M*N, M, K, N, 1 matches every shape") from None
    assert not params, "full rank leaves no free parameters"
    return Polynomial.from_map(
        {m: Fraction(int(sp.numer(c)), int(sp.denom(c))) for m, c in zip(MONOMIALS, solution)}
    )


@dataclass(frozen=True)
class KernelSample:
    """One overhead kernel seen at one shape."""

    name: str
    graph: str
    kind: str
    role: str | None
    nbytes: int
    workspace: int = 0  # split-reduction workspace bytes among nbytes
    polynomial: Polynomial | None = None  # its other bytes read off its buffers' shapes
    kernel_class: str | None = None  # timing.kernel_classes.KernelClass value, from its code
    # Elements it loads or stores along a strided index (a transposed float8 copy stored from
    # a row reduction: each element in its own memory sector), and their polynomial.
    scattered_elements: int = 0
    scattered_polynomial: Polynomial | None = None
    # Bytes its later loops over a row load again (a row walked once per statistic), and
    # their polynomial: beyond nbytes, which counts every buffer once.
    reread: int = 0
    reread_polynomial: Polynomial | None = None
    arithmetic: int = 0  # operations it evaluates over its iteration space

    @property
    def fitted_bytes(self) -> int:
        return self.nbytes - self.workspace


def kind_family(kind: str) -> str:
    return "reduction" if kind.endswith("reduction") else kind


def buffer_polynomial(shape: Shape, buffers: list[tuple[int, tuple[int, ...]]]) -> Polynomial:
    """Bytes of buffers (bytes per element, dims) as a polynomial in M, K, N: each dim equal
    to exactly one of M, K, N becomes that symbol. FitError when a dim is ambiguous (two of
    M, K, N equal) or none of them: calibration shapes keep M, K, N distinct, and the caller
    leaves workspace buffers out."""
    names: dict[int, list[str]] = {}
    for symbol, value in zip("MKN", shape):
        names.setdefault(value, []).append(symbol)
    terms: dict[str, Fraction] = {}
    for itemsize, dims in buffers:
        symbols = []
        for dim in dims:
            if dim == 1:
                continue
            if len(names.get(dim, ())) != 1:
                raise FitError(
                    f"buffer dim {dim} at {shape} is {'ambiguous' if dim in names else 'no size'}"
                )
            symbols.append(names[dim][0])
        monomial = "*".join(sorted(symbols, key="MKN".index)) or "1"
        if monomial not in MONOMIALS:
            raise FitError(f"a buffer of {monomial} elements is not a linear's tensor")
        terms[monomial] = terms.get(monomial, Fraction(0)) + itemsize
    return Polynomial.from_map(terms)


GRAPH_ORDER = {"fwd": 0, "bwd": 1}


def canonical_order(kernels: list[KernelSample]) -> list[int]:
    """Indices of a step's kernels in an order that does not depend on how Inductor scheduled
    them: graph, role, kind, bytes polynomial, name. Inductor reorders independent kernels with
    the sizes; the kernel set, not its launch order, is what a kernel set shares."""

    def key(i: int):
        k = kernels[i]
        return (
            GRAPH_ORDER.get(k.graph, 2),
            k.graph,
            k.role or "",
            kind_family(k.kind),
            str(k.polynomial),
            k.name,
        )

    return sorted(range(len(kernels)), key=key)


def kernel_keys(kernels: list[KernelSample]) -> list[str]:
    """Stable names of a step's kernels, in launch order: graph and canonical position in it,
    e.g. 'fwd.0', 'bwd.2'."""
    keys = [""] * len(kernels)
    counters: dict[str, int] = {}
    for i in canonical_order(kernels):
        graph = kernels[i].graph
        keys[i] = f"{graph}.{counters.get(graph, 0)}"
        counters[graph] = counters.get(graph, 0) + 1
    return keys


@dataclass(frozen=True)
class ShapeSample:
    shape: Shape
    kernels: tuple[KernelSample, ...]

    @property
    def signature(self) -> tuple:
        """What identifies the kernel set: graph, kind family, role and bytes polynomial of
        each kernel, in canonical order. Kernel names carry Inductor's numbering, not a meaning."""
        return tuple(
            (
                self.kernels[i].graph,
                kind_family(self.kernels[i].kind),
                self.kernels[i].role,
                str(self.kernels[i].polynomial),
                str(self.kernels[i].scattered_polynomial or Polynomial(())),
                str(self.kernels[i].reread_polynomial or Polynomial(())),
            )
            for i in canonical_order(list(self.kernels))
        )


@dataclass(frozen=True)
class FittedKernel:
    key: str  # graph and canonical position, e.g. "fwd.0"
    name: str  # Inductor's name at the first shape of the kernel set
    graph: str
    kind: str
    role: str | None
    nbytes: Polynomial
    # KernelClass value read off its code at the kernel set's first shape; None in files written
    # before kernel classes (the band then takes the widest range of its kind's classes)
    kernel_class: str | None = None
    # elements walked along a strided index (KernelSample.scattered_elements)
    scattered_elements: Polynomial = Polynomial(())
    # bytes its later loops over a row load again (KernelSample.reread)
    reread: Polynomial = Polynomial(())
    # operations it evaluates per byte it moves (KernelSample.arithmetic at the set's first
    # shape over its bytes, 4 significant digits: both grow with its iteration space)
    arithmetic_per_byte: float = 0.0


@dataclass(frozen=True)
class KernelSet:
    """Shapes sharing one kernel set, and the exact polynomials of its bytes."""

    shapes: tuple[Shape, ...]  # every shape of the set: each kernel's bytes matched exactly
    kernels: tuple[FittedKernel, ...]
    total: Polynomial
    verified: tuple[Shape, ...]  # held out of the independent linear solve, matched exactly
    workspace_max: int = 0  # largest split-reduction workspace at a shape, bytes, not in total


@dataclass(frozen=True)
class Unfitted:
    shapes: tuple[Shape, ...]
    reason: str


@dataclass(frozen=True)
class TrafficFit:
    kernel_sets: tuple[KernelSet, ...]
    unfitted: tuple[Unfitted, ...]


def arithmetic_per_byte(sample: KernelSample) -> float:
    if not sample.arithmetic or sample.fitted_bytes <= 0:
        return 0.0
    return float(f"{sample.arithmetic / sample.fitted_bytes:.4g}")


def _polynomial(kernel: KernelSample) -> Polynomial:
    if kernel.polynomial is None:
        raise FitError(f"kernel {kernel.name}: no polynomial read off its buffers")
    return kernel.polynomial


def _fit_kernel_set(samples: list[ShapeSample], *, verify: int) -> KernelSet:
    """Polynomials from the first shape's buffers, checked against the measured bytes at every
    shape; where the set has 7 + `verify` shapes, the total is also solved for independently
    on all but `verify` of them and must equal the buffers' polynomial and match the rest."""
    first = samples[0]
    order = canonical_order(list(first.kernels))
    keys = kernel_keys(list(first.kernels))
    kernels = tuple(
        FittedKernel(
            keys[i],
            first.kernels[i].name,
            first.kernels[i].graph,
            first.kernels[i].kind,
            first.kernels[i].role,
            _polynomial(first.kernels[i]),
            first.kernels[i].kernel_class,
            first.kernels[i].scattered_polynomial or Polynomial(()),
            first.kernels[i].reread_polynomial or Polynomial(()),
            arithmetic_per_byte(first.kernels[i]),
        )
        for i in order
    )
    total = polynomial_sum(k.nbytes for k in kernels)
    for sample in samples:
        for k in sample.kernels:
            if _polynomial(k).exact(sample.shape) != k.fitted_bytes:
                raise FitError(
                    f"kernel {k.name} at {sample.shape}: its buffers give "
                    f"{_polynomial(k).exact(sample.shape)} bytes, the code {k.fitted_bytes}"
                )
            reread = k.reread_polynomial or Polynomial(())
            if reread.exact(sample.shape) != k.reread:
                raise FitError(
                    f"kernel {k.name} at {sample.shape}: its reloaded buffers give "
                    f"{reread.exact(sample.shape)} bytes, the code {k.reread}"
                )
            scattered = k.scattered_polynomial or Polynomial(())
            if scattered.exact(sample.shape) != k.scattered_elements:
                raise FitError(
                    f"kernel {k.name} at {sample.shape}: its scattered buffers give "
                    f"{scattered.exact(sample.shape)} elements, the code {k.scattered_elements}"
                )
    verified: tuple[Shape, ...] = ()
    if len(samples) >= len(MONOMIALS) + verify:
        fit_part, check_part = samples[: len(samples) - verify], samples[len(samples) - verify :]
        solved = fit_polynomial(
            [s.shape for s in fit_part], [sum(k.fitted_bytes for k in s.kernels) for s in fit_part]
        )
        if solved != total:
            raise FitError(f"the linear solve gives {solved}, the buffers {total}")
        for sample in check_part:
            if solved.exact(sample.shape) != sum(k.fitted_bytes for k in sample.kernels):
                raise FitError(f"the solved total misses the bytes at {sample.shape}")
        verified = tuple(s.shape for s in check_part)
    workspace = max(sum(k.workspace for k in s.kernels) for s in samples)
    return KernelSet(tuple(s.shape for s in samples), kernels, total, verified, workspace)


def fit_traffic(samples: list[ShapeSample], *, verify: int = 2) -> TrafficFit:
    """Group shapes by kernel set and fit each group (see `_fit_kernel_set`). A shape whose
    bytes cannot be read off its buffers, or whose polynomials miss its bytes, is reported,
    not dropped."""
    groups: dict[tuple, list[ShapeSample]] = {}
    unfitted = []
    for sample in samples:
        if any(
            k.polynomial is None
            or (k.scattered_elements and k.scattered_polynomial is None)
            or (k.reread and k.reread_polynomial is None)
            for k in sample.kernels
        ):
            unfitted.append(
                Unfitted(
                    (sample.shape,),
                    "a kernel's bytes could not be read off its buffers (M, K or N not distinct?)",
                )
            )
            continue
        groups.setdefault(sample.signature, []).append(sample)
    kernel_sets = []
    for group in sorted(groups.values(), key=lambda g: -len(g)):
        try:
            kernel_sets.append(_fit_kernel_set(group, verify=verify))
        except FitError as e:
            unfitted.append(Unfitted(tuple(s.shape for s in group), str(e)))
    return TrafficFit(tuple(kernel_sets), tuple(unfitted))


# Fit and check shapes in general position: distinct, not all powers of two, spanning 256 to
# 16384 per dimension so every kernel set Inductor picks on a GPU has members.
FIT_SHAPES: tuple[Shape, ...] = (
    (256, 768, 512),
    (384, 512, 1280),
    (640, 1024, 768),
    (1024, 384, 2048),
    (1536, 2560, 1024),
    (2048, 1280, 3072),
    (3072, 4096, 1536),
    (4096, 2048, 5120),
    (6144, 8192, 3072),
    (8192, 5120, 12288),
    (12288, 16384, 8192),
    (16384, 10240, 14336),
)

# CPU: tiny shapes in general position, M, K, N distinct and never 16 (an amax history's
# length), so CI runs the whole pipeline for real in minutes. All have M < N: Inductor's C++
# backend fuses the backward differently when M > N, and one kernel set over all nine lets
# the independent solve (7 shapes + 2 to check) run.
CPU_FIT_SHAPES: tuple[Shape, ...] = (
    (32, 48, 64),
    (48, 32, 80),
    (32, 64, 96),
    (48, 80, 112),
    (64, 48, 128),
    (80, 112, 96),
    (32, 112, 144),
    (64, 96, 160),
    (96, 64, 128),
)
