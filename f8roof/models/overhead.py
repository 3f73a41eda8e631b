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

import numpy as np


class OverheadFitError(ValueError):
    pass


@dataclass(frozen=True)
class KindTime:
    floor_s: float
    bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.floor_s < 0 or not self.bandwidth_bytes_per_s > 0:
            raise OverheadFitError("kernel time model needs floor_s >= 0 and a positive bandwidth")

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

    def time_s(self, kind: str, nbytes, *, kernel_id: str | None = None):
        factor = dict(self.factors).get(kernel_id, 1.0) if kernel_id else 1.0
        return self.kind(kind).time_s(nbytes) * factor


def fit_kind(nbytes: np.ndarray, time_s: np.ndarray) -> KindTime:
    """Least squares on relative error: rows (1/t, bytes/t) . (floor, 1/bandwidth) = 1."""
    nbytes, time_s = np.asarray(nbytes, np.float64), np.asarray(time_s, np.float64)
    if len(time_s) == 0 or (time_s <= 0).any():
        raise OverheadFitError("kernel times must be positive")
    A = np.stack([1 / time_s, nbytes / time_s], axis=1)
    floor, inverse_bw = np.linalg.lstsq(A, np.ones(len(time_s)), rcond=None)[0]
    if floor < 0 or inverse_bw <= 0 or len(time_s) == 1:
        # A negative floor or bandwidth means the points don't span sizes enough for two
        # parameters: fall back to one, the bandwidth through the origin (or a pure floor).
        floor = 0.0
        inverse_bw = float(np.median(time_s / np.maximum(nbytes, 1)))
    return KindTime(float(floor), float(1 / inverse_bw))


def residuals(predicted, measured) -> Residuals:
    error = np.abs(np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)
    return Residuals(float(np.median(error)), float(error.max()), len(error))


def fit_kernel_time(kinds: list[str], nbytes, time_s, kernel_ids: list[str]) -> KernelTimeModel:
    """Fit per kind (pooled where a kind has under 3 points), then per-kernel factors."""
    nbytes, time_s = np.asarray(nbytes, np.float64), np.asarray(time_s, np.float64)
    kinds_arr, ids = np.asarray(kinds), np.asarray(kernel_ids)
    pooled = fit_kind(nbytes, time_s)
    by_kind = {
        kind: fit_kind(nbytes[kinds_arr == kind], time_s[kinds_arr == kind])
        for kind in sorted(set(kinds))
        if (kinds_arr == kind).sum() >= 3
    }
    base = np.array([by_kind.get(k, pooled).time_s(b) for k, b in zip(kinds, nbytes)])
    factors = {
        kid: float(np.median(time_s[ids == kid] / base[ids == kid]))
        for kid in sorted(set(kernel_ids))
    }
    predicted = base * np.array([factors[k] for k in kernel_ids])
    return KernelTimeModel(
        tuple(by_kind.items()), pooled, tuple(factors.items()), residuals(predicted, time_s)
    )


@dataclass(frozen=True)
class FixedCost:
    """What a variant's (bf16, or a recipe's) step costs beyond its modelled kernels."""

    gemm_factor: float  # in-step gemm time / gemm table time
    device_extra_s: float  # unmodelled device kernels per step
    wall_extra_s: float  # launch gaps the device waits for, per step, when device-bound
    wall_floor_s: float  # the CPU's time to issue the step: the wall clock of a tiny shape

    def wall_s(self, device_s):
        return np.maximum(np.asarray(device_s) + self.wall_extra_s, self.wall_floor_s)


def fit_fixed_cost(*, table_gemm_s, gemm_s, kernels_s, device_s, wall_s) -> FixedCost:
    """gemm_factor: median in-step / table gemm time. device_extra: median of what the device
    time shows beyond the corrected gemms and the modelled kernels (negative when the kernel
    model runs high). wall_floor: the smallest wall time. wall_extra: median wall - device over
    device-bound steps (device time at least twice the floor), else 0."""
    table_gemm_s, gemm_s, kernels_s, device_s, wall_s = (
        np.asarray(x, np.float64) for x in (table_gemm_s, gemm_s, kernels_s, device_s, wall_s)
    )
    factor = float(np.median(gemm_s / table_gemm_s))
    extra_device = float(np.median(device_s - factor * table_gemm_s - kernels_s))
    floor = float(wall_s.min())
    bound = device_s >= 2 * floor
    extra = float(np.median(wall_s[bound] - device_s[bound])) if bound.any() else 0.0
    return FixedCost(factor, extra_device, max(extra, 0.0), floor)
