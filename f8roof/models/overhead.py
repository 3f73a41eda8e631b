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
    owner = nearest_regime(regimes, shapes)
    nbytes, time_s = np.zeros(len(shapes)), np.zeros(len(shapes))
    for index, regime in enumerate(regimes):
        mask = owner == index
        if len(regimes) > 1 and not mask.any():
            continue
        bytes_coef, time_coef = np.zeros(len(MONOMIALS)), np.zeros(len(MONOMIALS))
        for kernel in regime.kernels:
            model = kernel_time.kind(kernel.kind)
            factor = kernel_time.factor(f"{variant}/{index}/{kernel.key}")
            coef = np.array([float(c) for c in kernel.nbytes.coefficients()])
            bytes_coef += coef
            time_coef += coef * factor / model.bandwidth_bytes_per_s
            time_coef[-1] += model.floor_s * factor  # the constant monomial: one floor each
        if len(regimes) == 1:
            return shapes.polynomial(bytes_coef), shapes.polynomial(time_coef)
        part = shapes.subset(mask)
        nbytes[mask] = part.polynomial(bytes_coef)
        time_s[mask] = part.polynomial(time_coef)
    return nbytes, time_s


def nearest_regime(regimes: tuple[Regime, ...], shapes: ShapeArrays) -> np.ndarray:
    """Index of the regime whose shapes lie nearest in log2 space, per query shape. One pass
    per calibration shape keeping the running nearest: memory stays O(shapes)."""
    owner = np.zeros(len(shapes), dtype=np.intp)
    if len(regimes) == 1:
        return owner
    best = np.full(len(shapes), np.inf)
    for index, regime in enumerate(regimes):
        for shape in regime.shapes:
            distance = sum((q - np.log2(d)) ** 2 for q, d in zip(shapes.logs, shape))
            closer = distance < best
            np.copyto(best, distance, where=closer)
            owner[closer] = index
    return owner
