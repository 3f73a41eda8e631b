"""The band: time_low/expected/high of a compiled graph, and speedup_low/speedup/speedup_high.

Inputs are per kernel (class, bytes) and gemm times per class; rates per class come either from
the public table (`ClassRates.from_table`: ranges) or from a measured GPU calibration
(`ClassRates.from_measured`: one value per class, widened by the fit's relative residual only),
so one function serves both and a measured calibration collapses the band to its residual.

Memory kernel: time = floor + bytes / (peak bandwidth x fraction); time_low takes the short
floor and the high fraction, time_high the long floor and the low fraction. Gemm: the gemm
model's time (fast accumulation) x the class's factor; time_low the low factor.
All functions are vectorised over shapes (numpy arrays, one value per shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from f8roof.models.errors import ModelError
from f8roof.models.kernel_classes import (
    GpuFamily,
    KernelClass,
    Range,
    class_efficiency,
    launch_floor,
)


@dataclass(frozen=True)
class ClassRate:
    """How one class is timed: floor_s and bandwidth (memory) or a factor (gemm), as ranges.
    Bandwidth's `low` is the slow end."""

    floor_s: Range | None = None
    bandwidth_bytes_per_s: Range | None = None
    gemm_factor: Range | None = None

    def __post_init__(self) -> None:
        memory = self.floor_s is not None and self.bandwidth_bytes_per_s is not None
        if memory == (self.gemm_factor is not None):
            raise ModelError("a class rate is either a memory rate (floor, bandwidth) or a gemm")


@dataclass(frozen=True)
class ClassRates:
    """Rates per kernel class; `measured` says they came from a GPU calibration."""

    rates: tuple[tuple[KernelClass, ClassRate], ...]
    measured: bool = False

    def rate(self, kernel_class: KernelClass) -> ClassRate:
        found = dict(self.rates).get(kernel_class)
        if found is None:
            raise ModelError(f"no rate for kernel class {kernel_class.value}")
        return found

    @classmethod
    def from_table(cls, *, family: GpuFamily, bandwidth_bytes_per_s: float) -> ClassRates:
        """The public ranges of `kernel_classes.EFFICIENCY_TABLE` at a datasheet bandwidth."""
        floor = launch_floor(family).floor_s
        rates = []
        for kernel_class in KernelClass:
            if kernel_class is KernelClass.CPU:
                continue
            value = class_efficiency(kernel_class, family).value
            if kernel_class.is_gemm:
                rates.append((kernel_class, ClassRate(gemm_factor=value)))
            else:
                bandwidth = Range(*(f * bandwidth_bytes_per_s for f in _ordered(value)))
                rates.append((kernel_class, ClassRate(floor, bandwidth)))
        return cls(tuple(rates))

    @classmethod
    def from_measured(
        cls,
        *,
        memory: Mapping[KernelClass, tuple[float, float]],
        gemm_factors: Mapping[KernelClass, float] | None = None,
        residual: float,
    ) -> ClassRates:
        """What a GPU calibration measured per class: (floor_s, bandwidth) per memory class and
        a factor per gemm class (1 where the gemm table already holds that mode), each widened
        only by the fit's relative residual (e.g. the kernel-time model's median residual)."""
        rates = [
            (c, ClassRate(Range.point(f).widened(residual), Range.point(b).widened(residual)))
            for c, (f, b) in memory.items()
        ]
        factors = {c: 1.0 for c in KernelClass if c.is_gemm} | dict(gemm_factors or {})
        rates += [
            (c, ClassRate(gemm_factor=Range.point(v).widened(residual))) for c, v in factors.items()
        ]
        return cls(tuple(rates), measured=True)


def _ordered(value: Range) -> tuple[float, float, float]:
    return value.low, value.expected, value.high


@dataclass(frozen=True)
class TimeBand:
    """Seconds per shape: low <= expected <= high."""

    low: np.ndarray
    expected: np.ndarray
    high: np.ndarray

    def __add__(self, other: TimeBand) -> TimeBand:
        return TimeBand(
            self.low + other.low, self.expected + other.expected, self.high + other.high
        )


@dataclass(frozen=True)
class SpeedupBand:
    low: np.ndarray
    expected: np.ndarray
    high: np.ndarray


def memory_time_band(kernel_class: KernelClass, nbytes, rates: ClassRates) -> TimeBand:
    """One memory kernel's time band at bytes per shape."""
    rate = rates.rate(kernel_class)
    if rate.floor_s is None or rate.bandwidth_bytes_per_s is None:
        raise ModelError(f"{kernel_class.value} is a gemm class, not a memory kernel")
    nbytes = np.asarray(nbytes, dtype=np.float64)
    f, b = rate.floor_s, rate.bandwidth_bytes_per_s
    return TimeBand(
        f.low + nbytes / b.high, f.expected + nbytes / b.expected, f.high + nbytes / b.low
    )


def gemm_time_band(kernel_class: KernelClass, gemm_s, rates: ClassRates) -> TimeBand:
    """A gemm's time band from the gemm model's time (fast accumulation) per shape."""
    factor = rates.rate(kernel_class).gemm_factor
    if factor is None:
        raise ModelError(f"{kernel_class.value} is a memory class, not a gemm")
    gemm_s = np.asarray(gemm_s, dtype=np.float64)
    return TimeBand(gemm_s * factor.low, gemm_s * factor.expected, gemm_s * factor.high)


def graph_time_band(
    *,
    kernels: Iterable[tuple[KernelClass, np.ndarray]],
    gemms: Iterable[tuple[KernelClass, np.ndarray]],
    rates: ClassRates,
    shapes: int,
) -> TimeBand:
    """Sum over a graph's memory kernels (class, bytes per shape) and gemms (class, model
    seconds per shape)."""
    zero = np.zeros(shapes)
    total = TimeBand(zero, zero, zero)
    for kernel_class, nbytes in kernels:
        total = total + memory_time_band(kernel_class, nbytes, rates)
    for kernel_class, gemm_s in gemms:
        total = total + gemm_time_band(kernel_class, gemm_s, rates)
    return total


def widen_by_kernel_sets(overhead: TimeBand, *, fitted_bytes, low_bytes, high_bytes) -> TimeBand:
    """The float8 overhead's band over the kernel sets compiled near each shape
    (`models.overhead.kernel_set_range`): the fitted set's seconds per byte applied to the
    lowest and highest overhead bytes of the nearby sets (never narrowing the band)."""
    fitted = np.asarray(fitted_bytes, dtype=np.float64)
    safe = np.where(fitted > 0, fitted, 1.0)
    low_ratio = np.where(fitted > 0, np.minimum(np.asarray(low_bytes) / safe, 1.0), 1.0)
    high_ratio = np.where(fitted > 0, np.maximum(np.asarray(high_bytes) / safe, 1.0), 1.0)
    return TimeBand(
        overhead.low * np.maximum(low_ratio, 0.0), overhead.expected, overhead.high * high_ratio
    )


def speedup_band(*, bf16: TimeBand, fp8: TimeBand) -> SpeedupBand:
    """speedup = bf16 time / float8 time at three corners.

    speedup_low pairs the float8 graph's slow end with bf16's fast end, speedup_high the
    reverse: the question is whether float8 beats bf16, so the pessimistic end must assume
    every uncertain kernel went against float8 and every bf16 one in its favour. The two
    graphs run on one GPU, where the errors are partly shared (a slow HBM slows both), so this
    corner is a bound, not a likely value; a measured calibration narrows both ends."""
    return SpeedupBand(bf16.low / fp8.high, bf16.expected / fp8.expected, bf16.high / fp8.low)
