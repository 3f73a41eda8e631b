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

import math
from dataclasses import dataclass

import numpy as np

from f8roof.errors import ModelError


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


# A memory sector: what one scattered element access moves (32 bytes on NVIDIA GPUs and AMD's).
SECTOR_BYTES = 32
# A kernel whose traffic and arithmetic take about as long overlaps them imperfectly (the
# roofline's ridge is rounded): (memory^p + compute^p)^(1/p), 9% above the longer at the ridge
# (2^(1/8)), within 0.5% of it once one is 1.5x the other. It also makes the public fit's cost
# smooth, so its minimum does not depend on the optimiser's path (issue #36).
OVERLAP_POWER = 8


@dataclass(frozen=True)
class KernelTimeModel:
    kinds: tuple[tuple[str, KindTime], ...]
    pooled: KindTime  # for a kind calibration never saw
    factors: tuple[tuple[str, float], ...]  # per fitted kernel id ("recipe/kernel-set index/key")
    residuals: Residuals
    # per kernel class (timing.kernel_classes.KernelClass value): a rate fitted to public
    # measurements; a kernel of a class listed here is timed by it, not by its kind
    classes: tuple[tuple[str, KindTime], ...] = ()
    # the traffic each element a kernel walks along a strided index adds, in bytes (0: none
    # modelled; SECTOR_BYTES: a whole sector each, nothing merged on the way), timed at its
    # kernel's rate
    scattered_bytes_per_element: float = 0.0
    # the share of a DRAM byte each byte a kernel's later loops load again costs (0: the row
    # is still in cache; 1: it is read again from HBM), timed at its kernel's rate
    reread_share: float = 0.0
    # FP32-lane cycles per second a generated kernel's arithmetic runs at (0: none modelled;
    # each operator's cycles in hardware/instruction_costs): a kernel takes the longer of its
    # traffic's time and its arithmetic's (extern kernels count no arithmetic)
    arithmetic_per_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.arithmetic_per_s < math.inf:
            raise ModelError(f"an arithmetic rate is finite and >= 0, got {self.arithmetic_per_s}")
        if not 0 <= self.reread_share <= 1:
            raise ModelError(f"a reread share lies in [0, 1], got {self.reread_share}")
        if not 0 <= self.scattered_bytes_per_element <= SECTOR_BYTES:
            raise ModelError(
                f"scattered bytes per element in [0, {SECTOR_BYTES}], "
                f"got {self.scattered_bytes_per_element}"
            )

    def kind(self, kind: str, kernel_class: str | None = None) -> KindTime:
        if kernel_class is not None:
            found = dict(self.classes).get(kernel_class)
            if found is not None:
                return found
        return dict(self.kinds).get(kind, self.pooled)

    def factor(self, kernel_id: str | None) -> float:
        return dict(self.factors).get(kernel_id, 1.0) if kernel_id else 1.0

    def extra_bytes(self, elements, reread):
        """Traffic the counted bytes leave out: scattered elements' sectors, rows read again."""
        return (
            np.asarray(elements, dtype=np.float64) * self.scattered_bytes_per_element
            + np.asarray(reread, dtype=np.float64) * self.reread_share
        )

    def busy_s(self, bandwidth, nbytes, extra_bytes, arithmetic):
        """A kernel's time beyond its floor: its traffic at `bandwidth` and its arithmetic,
        overlapped: the longer of the two, rounded at the ridge (OVERLAP_POWER)."""
        memory = (np.asarray(nbytes, np.float64) + extra_bytes) / bandwidth
        if not self.arithmetic_per_s:
            return memory
        compute = np.asarray(arithmetic, np.float64) / self.arithmetic_per_s
        longer = np.maximum(memory, compute)
        safe = np.where(longer > 0, longer, 1.0)
        ratio = (memory / safe) ** OVERLAP_POWER + (compute / safe) ** OVERLAP_POWER
        return longer * ratio ** (1 / OVERLAP_POWER)

    def time_s(
        self,
        kind: str,
        nbytes,
        *,
        kernel_id: str | None = None,
        kernel_class: str | None = None,
        scattered_elements=0,
        reread_bytes=0,
        arithmetic=0,
    ):
        rate = self.kind(kind, kernel_class)
        extra = self.extra_bytes(scattered_elements, reread_bytes)
        busy = self.busy_s(rate.bandwidth_bytes_per_s, nbytes, extra, arithmetic)
        return (rate.floor_s + busy) * self.factor(kernel_id)


@dataclass(frozen=True)
class FixedCost:
    """What a variant's (bf16, or a recipe's) step costs beyond its modelled kernels."""

    gemm_factor: float  # in-step gemm time / gemm table time
    device_extra_s: float  # unmodelled device kernels per step
    wall_extra_s: float  # launch gaps the device waits for, per step, when device-bound
    wall_floor_s: float  # the CPU's time to issue the step: the wall clock of a tiny shape

    def wall_s(self, device_s: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(device_s) + self.wall_extra_s, self.wall_floor_s)
