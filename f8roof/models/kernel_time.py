"""Kernel time and fixed step costs: the dataclasses a calibration fits and the estimate uses.

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

from f8roof.models.errors import ModelError


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
