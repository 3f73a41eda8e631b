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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from f8roof.errors import ModelError
from f8roof.hardware.presets import GPU
from f8roof.timing.gemm import GEMM_ROLES, GemmRole, fp8_gemm_dtype
from f8roof.timing.kernel_classes import (
    GpuFamily,
    KernelClass,
    Range,
    class_efficiency,
    gemm_class,
    launch_floor,
)
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Implementation


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


def kernel_set_spread(*, fitted_bytes, low_bytes, high_bytes) -> tuple[np.ndarray, np.ndarray]:
    """The nearby kernel sets' overhead bytes as factors on the fitted set's (low <= 1 <=
    high; 1 where the fit has no overhead): `timing.overhead.kernel_set_range` in ratios."""
    fitted = np.asarray(fitted_bytes, dtype=np.float64)
    safe = np.where(fitted > 0, fitted, 1.0)
    low = np.where(fitted > 0, np.clip(np.asarray(low_bytes) / safe, 0.0, 1.0), 1.0)
    high = np.where(fitted > 0, np.maximum(np.asarray(high_bytes) / safe, 1.0), 1.0)
    return low, high


def linear_speedup_bands(
    *,
    bf16_gemm: TimeBand,
    fp8_gemm: TimeBand,
    overhead: CornerTimes,
    context: CornerTimes,
    spread: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[SpeedupBand, SpeedupBand]:
    """A linear's speedup band, alone and with its context's kernels, per shape.

    speedup = bf16 gemms / (float8 gemms + overhead); with the context, its kernels' time is
    added to both. The low end pairs the float8 side's slow end (gemm factors high, overhead
    at whichever corner is slower) with bf16's fast end, the high end the reverse: whether
    float8 wins is the question, so the pessimistic end assumes every uncertainty went
    against it. The memory kernels take one corner at a time (`corner_times`), the same in
    both graphs; the context's kernels run in both at that corner. `spread`: the overhead's
    factor over the nearby kernel sets (`kernel_set_spread`), applied at both ends.
    `overhead` and `context` may come from class ranges or from a measured calibration's rates
    (`ClassRates.from_table` or `from_measured`): the function does not know which, and a
    measured calibration's band is its fit residual. The `expected` field of each band is the
    expected corner's value (the caller's own estimate may differ: a calibration's per-kernel
    factors)."""
    scales = (np.ones_like(fp8_gemm.low),) if spread is None else spread
    low, high, context_low, context_high = [], [], [], []
    for corner in ("fast", "expected", "slow"):
        over, ctx = getattr(overhead, corner), getattr(context, corner)
        for scale in scales:
            fp8_fast = fp8_gemm.low + over * scale
            fp8_slow = fp8_gemm.high + over * scale
            low.append(bf16_gemm.low / fp8_slow)
            high.append(bf16_gemm.high / fp8_fast)
            context_low.append((bf16_gemm.low + ctx) / (fp8_slow + ctx))
            context_high.append((bf16_gemm.high + ctx) / (fp8_fast + ctx))
    expected_fp8 = fp8_gemm.expected + overhead.expected
    alone = SpeedupBand(
        np.min(low, axis=0), bf16_gemm.expected / expected_fp8, np.max(high, axis=0)
    )
    with_context = SpeedupBand(
        np.min(context_low, axis=0),
        (bf16_gemm.expected + context.expected) / (expected_fp8 + context.expected),
        np.max(context_high, axis=0),
    )
    return alone, with_context


# A fitted kernel set records each kernel's kind (its Triton heuristic), not yet its class:
# the classes each kind can be, whose ranges a kernel of that kind is given together.
KIND_CLASSES: dict[str, tuple[KernelClass, ...]] = {
    "pointwise": (KernelClass.POINTWISE, KernelClass.POINTWISE_TRANSPOSE),
    "reduction": (
        KernelClass.REDUCTION_INNER,
        KernelClass.REDUCTION_OUTER,
        KernelClass.REDUCTION_SPLIT,
    ),
    "persistent_reduction": (
        KernelClass.REDUCTION_PERSISTENT,
        KernelClass.REDUCTION_OUTER,
        KernelClass.REDUCTION_SPLIT,
    ),
    "extern": (KernelClass.EXTERN, KernelClass.REDUCTION_SPLIT),
    "template": (KernelClass.POINTWISE,),
    "cpp": (KernelClass.CPU,),
}


def kind_rate(rates: ClassRates, kind: str) -> ClassRate:
    """One rate for a kernel of a kind whose class is not recorded: the widest range over the
    classes it can be (lowest low, highest high), the first class's expected value. A key
    'class:<value>' (a kernel whose class is recorded) is that class's own rate."""
    if kind.startswith("class:"):
        return rates.rate(KernelClass(kind.removeprefix("class:")))
    classes = [c for c in KIND_CLASSES.get(kind, (KernelClass.POINTWISE,))]
    known = [rates.rate(c) for c in classes if c in dict(rates.rates)]
    if not known:
        raise ModelError(f"no rate for kernels of kind {kind!r}")
    floors = [r.floor_s for r in known if r.floor_s is not None]
    bandwidths = [r.bandwidth_bytes_per_s for r in known if r.bandwidth_bytes_per_s is not None]
    if len(floors) != len(known):
        raise ModelError(f"kernels of kind {kind!r} are not memory kernels")
    return ClassRate(_union(floors), _union(bandwidths))


def _union(ranges: list[Range]) -> Range:
    return Range(
        min(r.low for r in ranges),
        ranges[0].expected,
        max(r.high for r in ranges),
    )


@dataclass(frozen=True)
class CornerTimes:
    """Seconds per shape with every kernel class at its fast end, its expected value, its
    slow end. For a difference of two graphs (bytes and kernel counts may be negative) the
    fast corner need not be the smallest: `band` orders them."""

    fast: np.ndarray
    expected: np.ndarray
    slow: np.ndarray

    def __add__(self, other: CornerTimes) -> CornerTimes:
        return CornerTimes(
            self.fast + other.fast, self.expected + other.expected, self.slow + other.slow
        )

    def band(self) -> TimeBand:
        low = np.minimum(np.minimum(self.fast, self.slow), self.expected)
        high = np.maximum(np.maximum(self.fast, self.slow), self.expected)
        return TimeBand(low, self.expected, high)


def corner_times(rate: ClassRate, *, nbytes, kernels) -> CornerTimes:
    """Kernels (or the difference of two graphs' kernels) at the three corners of one rate.

    Summed over kinds corner by corner, every class sits at the same end of its range at
    once: one GPU and one compiler run both graphs, so a slow end is slow for all of them, and
    the kernels the float8 and bf16 graphs share cancel at each corner. Taking each class's
    own worst end instead (classes independent) is a wider bound, too wide here: a fitted
    kernel set records kinds, whose ranges span every class a kind can be, and bytes that
    move between kinds from one graph to the other would count at both ends."""
    if rate.floor_s is None or rate.bandwidth_bytes_per_s is None:
        raise ModelError("corner times need a memory rate")
    nbytes = np.asarray(nbytes, dtype=np.float64)
    kernels = np.asarray(kernels, dtype=np.float64)
    f, b = rate.floor_s, rate.bandwidth_bytes_per_s
    return CornerTimes(
        kernels * f.low + nbytes / b.high,
        kernels * f.expected + nbytes / b.expected,
        kernels * f.high + nbytes / b.low,
    )


def gemm_kernel_class(
    recipe: Recipe | None, role: GemmRole, implementation: Implementation | None = None
) -> KernelClass:
    """The mode a linear's gemm runs in: the dtype family `fp8_gemm_dtype` picks, with fast
    accumulation in forward only (torchao's Float8LinearConfig and f8roof's reference both
    pass use_fast_accum=True to the output gemm and False to grad_input and grad_weight)."""
    dtype = fp8_gemm_dtype(recipe, role, implementation)
    if dtype == "bf16":
        return KernelClass.GEMM_BF16
    return gemm_class(
        float8=True, rowwise=dtype == "fp8_rowwise", fast_accum=role is GemmRole.OUTPUT
    )


def linear_gemm_band(
    model,
    recipe: Recipe | None,
    M,
    K,
    N,
    *,
    rates: ClassRates,
    implementation: Implementation | None = None,
    groups=1,
) -> TimeBand:
    """The three gemms' time band: the gemm model's time of each (fitted to fast-accumulation
    sweeps) times its class's factor."""
    total = None
    for role in GEMM_ROLES:
        time_s, _ = model.time_s(
            fp8_gemm_dtype(recipe, role, implementation), role, M, K, N, groups
        )
        band = gemm_time_band(gemm_kernel_class(recipe, role, implementation), time_s, rates)
        total = band if total is None else total + band
    assert total is not None
    return total


def measured_rates(
    *,
    kinds: Mapping[str, tuple[float, float]],
    pooled: tuple[float, float],
    residual: float,
) -> ClassRates:
    """A measured calibration's kernel-time model as class rates: each memory class takes the
    (floor_s, bandwidth) measured for a kind it belongs to (`KIND_CLASSES`), else the pooled
    fit, widened by the fit's relative residual only."""
    memory = {}
    for kernel_class in KernelClass:
        if kernel_class.is_gemm:
            continue
        kind = next(
            (k for k, cs in KIND_CLASSES.items() if kernel_class in cs and k in kinds), None
        )
        memory[kernel_class] = kinds[kind] if kind is not None else pooled
    return ClassRates.from_measured(memory=memory, residual=min(max(residual, 0.0), 0.99))


def widened(
    speedups, residual_low: float, residual_high: float, bound=None
) -> tuple[np.ndarray, np.ndarray]:
    """The public time model's band: the lowest and highest speedup among the fits at its
    ends (and its own), widened by the cross-validated residual quantiles (log), the high end
    stopped where physics does (`bound`, `speedup_bound`). The one rule the estimate answers
    with and the fit reports its band on."""
    found = np.asarray(speedups, dtype=np.float64)
    low = found.min(axis=0) * np.exp(residual_low)
    high = found.max(axis=0) * np.exp(residual_high)
    return low, (high if bound is None else np.minimum(high, bound))


def speedup_bound(
    gpu: GPU, recipe: Recipe | None, implementation: Implementation, M, K, N, bf16_s
) -> np.ndarray:
    """The most float8 can win on a linear: float8 saves gemm time only, so its time is at
    least its gemms at the part's dense peaks (each role's gemm family). Not the fp8/bf16
    peak ratio: a bf16 gemm further below its peak than float8's (a power cap throttles bf16
    more) leaves more than that ratio to win."""
    floor = sum(
        2.0
        * np.asarray(M, dtype=np.float64)
        * np.asarray(K, dtype=np.float64)
        * np.asarray(N, dtype=np.float64)
        / gpu.peak_flops(fp8_gemm_dtype(recipe, role, implementation))
        for role in GEMM_ROLES
    )
    bound: np.ndarray = np.asarray(bf16_s, dtype=np.float64) / floor
    return bound
