"""The calibrated overhead model: kernel time from bytes, and the fixed costs of a step.

Kernel time. A memory-bound kernel takes a latency floor plus its bytes over a bandwidth:
    time_s = floor_s + bytes / bandwidth_bytes_per_s,
so its effective bandwidth grows with size, as measured kernels do. One (floor, bandwidth)
pair per kernel kind (pointwise, reduction, ...) is fitted to minimise relative error, since
kernel times span four orders of magnitude. Each fitted kernel then keeps its own factor (median
measured / kind model over the calibration shapes): the amax pass that re-reads a tensor still
in L2, or a transpose with poor coalescing, is slower or faster than its kind at equal bytes.

Step costs. Gemms inside a step do not run exactly as the isolated gemms of the table (operands
arrive from the cast kernels through L2, clocks settle differently; on CPU the op dispatch
differs): a per-variant `gemm_factor`, the median of in-step over table gemm time at the
calibration shapes. On the device clock a step also runs kernels no graph shows (cuBLAS
workspace memsets, scale reciprocals inside extern calls): a per-variant constant
`device_extra_s`. On the wall clock a small step is bound by the CPU launching it:
wall = max(device + extra, floor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from f8roof.models.errors import ModelError
from f8roof.models.monomials import MONOMIALS, ShapeArrays

if TYPE_CHECKING:
    from f8roof.models.fit import Regime


@dataclass(frozen=True)
class KindTime:
    floor_s: float
    bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.floor_s < 0 or not self.bandwidth_bytes_per_s > 0:
            raise ModelError("kernel time model needs floor_s >= 0 and a positive bandwidth")

    def time_s(self, nbytes):
        return self.floor_s + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class Residuals:
    """|predicted - measured| / measured over the fitted points."""

    median: float
    max: float
    count: int


@dataclass(frozen=True)
class KernelTimeModel:
    kinds: tuple[tuple[str, KindTime], ...]
    pooled: KindTime  # for a kind calibration never saw
    factors: tuple[tuple[str, float], ...]  # per fitted kernel id ("recipe/regime/key")
    residuals: Residuals

    def kind(self, kind: str) -> KindTime:
        return dict(self.kinds).get(kind, self.pooled)

    def factor(self, kernel_id: str | None) -> float:
        return dict(self.factors).get(kernel_id, 1.0) if kernel_id else 1.0

    def time_s(self, kind: str, nbytes, *, kernel_id: str | None = None):
        return self.kind(kind).time_s(nbytes) * self.factor(kernel_id)


@dataclass(frozen=True)
class FixedCost:
    """What a variant's (bf16, or a recipe's) step costs beyond its modelled kernels."""

    gemm_factor: float  # in-step gemm time / gemm table time
    device_extra_s: float  # unmodelled device kernels per step
    wall_extra_s: float  # launch gaps the device waits for, per step, when device-bound
    wall_floor_s: float  # the CPU's time to issue the step: the wall clock of a tiny shape

    def wall_s(self, device_s):
        return np.maximum(np.asarray(device_s) + self.wall_extra_s, self.wall_floor_s)


def fitted_kernels(
    regimes: tuple[Regime, ...], kernel_time: KernelTimeModel, variant: str, shapes: ShapeArrays
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and time of a variant's fitted kernel set at every shape, each shape in the regime
    of its nearest calibration shape (kernel ids: "variant/regime/key").

    Each kernel's time is linear in its bytes (floor + bytes / bandwidth, times its factor),
    so a regime's bytes and time are each one polynomial in the monomials of M, K, N,
    evaluated once per shape, not once per kernel."""
    bytes_coef = np.zeros((len(regimes), len(MONOMIALS)))
    time_coef = np.zeros((len(regimes), len(MONOMIALS)))
    for index, regime in enumerate(regimes):
        for kernel in regime.kernels:
            model = kernel_time.kind(kernel.kind)
            factor = kernel_time.factor(f"{variant}/{index}/{kernel.key}")
            coef = np.array([float(c) for c in kernel.nbytes.coefficients()])
            bytes_coef[index] += coef
            time_coef[index] += coef * factor / model.bandwidth_bytes_per_s
            time_coef[index, -1] += model.floor_s * factor  # the constant: one floor each
    nbytes, time_s = bytes_coef @ shapes.monomials, time_coef @ shapes.monomials
    if len(regimes) == 1:
        return nbytes[0], time_s[0]
    owner, columns = nearest_regime(regimes, shapes), np.arange(len(shapes))
    return nbytes[owner, columns], time_s[owner, columns]


def nearest_regime(regimes: tuple[Regime, ...], shapes: ShapeArrays) -> np.ndarray:
    """Index of the regime whose shapes lie nearest in log2 space, per query shape."""
    if len(regimes) == 1:
        return np.zeros(len(shapes), dtype=np.intp)
    points = tuple(sorted(s for r in regimes for s in r.shapes))
    owner = {s: index for index, r in enumerate(regimes) for s in r.shapes}
    distance = shapes.distances(points)
    nearest, best = np.full(len(shapes), owner[points[0]], dtype=np.intp), distance[0].copy()
    for point, row in zip(points[1:], distance[1:]):  # a running minimum: contiguous rows
        closer = row < best
        np.copyto(best, row, where=closer)
        nearest[closer] = owner[point]
    return nearest


# Kernel-set uncertainty: how many calibration shapes around a query shape are consulted.
NEAREST_KERNEL_SETS = 5


def kernel_set_range(
    fp8: tuple[Regime, ...], bf16: tuple[Regime, ...], shapes: ShapeArrays
) -> tuple[np.ndarray, np.ndarray] | None:
    """Lowest and highest overhead bytes (float8 graph less bf16 graph) over the kernel sets
    Inductor compiled at the `NEAREST_KERNEL_SETS` calibration shapes nearest each query shape.

    The fitted overhead takes the nearest shape's kernel set; Inductor's fusion and reduction
    heuristics switch with size (e.g. a mix-order reduction needs M >= 2K), so where nearby
    calibration shapes disagree the query shape may compile to any of their sets: the range
    says how much that moves the bytes. Equal bounds: every nearby shape compiles to one set;
    None: every calibration shape does (the fit is exact everywhere it was checked).
    The float8 and bf16 sets are taken in pairs, as compiled at the same shape, so a context
    kernel that switches in both graphs cancels out."""
    fp8_of = {s: index for index, r in enumerate(fp8) for s in r.shapes}
    bf16_of = {s: index for index, r in enumerate(bf16) for s in r.shapes}
    points = tuple(sorted(set(fp8_of) & set(bf16_of)))
    by_pair: dict[tuple[int, int], list[int]] = {}  # (float8, bf16) regime -> point rows
    for row, point in enumerate(points):
        by_pair.setdefault((fp8_of[point], bf16_of[point]), []).append(row)
    if len(by_pair) <= 1:
        return None
    # each pair's overhead polynomial, all evaluated in one product with the monomials
    coefficients = np.array([_coefficients(fp8[a]) - _coefficients(bf16[b]) for a, b in by_pair])
    values = coefficients @ shapes.monomials
    distance = shapes.distances(points)
    nearest = min(NEAREST_KERNEL_SETS, len(points))
    near = distance <= np.partition(distance, nearest - 1, axis=0)[nearest - 1]
    unused = np.stack([~near[rows].any(axis=0) for rows in by_pair.values()])
    np.putmask(values, unused, np.inf)
    low = values.min(axis=0)
    np.putmask(values, unused, -np.inf)
    return low, values.max(axis=0)


def _coefficients(regime: Regime) -> np.ndarray:
    return np.array([float(c) for c in regime.total.coefficients()])
