"""Band math: ranges per class -> time_low/expected/high -> speedup_low/speedup/speedup_high."""

import numpy as np
import pytest

from f8roof.errors import ModelError
from f8roof.timing.band import (
    ClassRate,
    ClassRates,
    CornerTimes,
    TimeBand,
    corner_times,
    gemm_time_band,
    kernel_set_spread,
    kind_rate,
    linear_speedup_bands,
    memory_time_band,
)
from f8roof.timing.kernel_classes import GpuFamily, KernelClass, Range

C = KernelClass
H100_BANDWIDTH = 3.35e12


def table_rates():
    return ClassRates.from_table(family=GpuFamily.HOPPER, bandwidth_bytes_per_s=H100_BANDWIDTH)


def test_memory_kernel_band_from_the_table():
    """An outer reduction of 1 GB on an H100: floor 1.5/2/4 us, 0.92/0.65/0.30 of 3.35 TB/s."""
    band = memory_time_band(C.REDUCTION_OUTER, np.array([1e9]), table_rates())
    assert band.low[0] == pytest.approx(1.5e-6 + 1e9 / (0.92 * H100_BANDWIDTH))
    assert band.expected[0] == pytest.approx(2e-6 + 1e9 / (0.65 * H100_BANDWIDTH))
    assert band.high[0] == pytest.approx(4e-6 + 1e9 / (0.30 * H100_BANDWIDTH))


def test_slow_accumulation_widens_only_upwards():
    band = gemm_time_band(C.GEMM_FP8_TENSORWISE_SLOW, np.array([1e-3, 2e-3]), table_rates())
    assert band.low == pytest.approx([1e-3, 2e-3])
    assert np.all(band.high > band.expected) and np.all(band.expected >= band.low)
    fast = gemm_time_band(C.GEMM_FP8_TENSORWISE_FAST, np.array([1e-3]), table_rates())
    assert fast.low == fast.high == pytest.approx([1e-3])


def test_speedup_bands_pair_float8_slow_end_with_bf16_fast_end():
    """bf16 gemms 1 s (a point); float8 gemms 0.5-0.6 s; overhead 0.1 s at the fast corner,
    0.3 s at the slow one; the context 0.2-0.4 s in both graphs."""
    one = np.array([1.0])
    bf16 = TimeBand(one, one, one)
    fp8 = TimeBand(0.5 * one, 0.5 * one, 0.6 * one)
    overhead = CornerTimes(0.1 * one, 0.2 * one, 0.3 * one)
    context = CornerTimes(0.2 * one, 0.3 * one, 0.4 * one)
    alone, with_context = linear_speedup_bands(
        bf16_gemm=bf16, fp8_gemm=fp8, overhead=overhead, context=context
    )
    assert alone.low[0] == pytest.approx(1 / 0.9)  # slow gemms + slow overhead
    assert alone.expected[0] == pytest.approx(1 / 0.7)
    assert alone.high[0] == pytest.approx(1 / 0.6)  # fast gemms + fast overhead
    # with the context at one corner in both graphs: the lowest ratio, the highest ratio
    assert with_context.low[0] == pytest.approx(min((1 + c) / (0.9 + c) for c in (0.2, 0.4)))
    assert with_context.high[0] == pytest.approx(max((1 + c) / (0.6 + c) for c in (0.2, 0.4)))
    assert with_context.low[0] <= with_context.expected[0] <= with_context.high[0]
    # the nearby kernel sets' bytes widen both ends
    spread = kernel_set_spread(
        fitted_bytes=np.array([100.0]), low_bytes=np.array([50.0]), high_bytes=np.array([200.0])
    )
    wide, _ = linear_speedup_bands(
        bf16_gemm=bf16, fp8_gemm=fp8, overhead=overhead, context=context, spread=spread
    )
    assert wide.low[0] == pytest.approx(1 / (0.6 + 0.6))
    assert wide.high[0] == pytest.approx(1 / (0.5 + 0.05))


def test_measured_rates_collapse_the_band_to_the_residual():
    rates = ClassRates.from_measured(
        memory={C.POINTWISE: (2e-6, 3.0e12)}, gemm_factors={}, residual=0.05
    )
    assert rates.measured
    band = memory_time_band(C.POINTWISE, np.array([3e9]), rates)
    # floor and bandwidth each within 5%: the time within about 5% too
    assert band.high[0] / band.expected[0] == pytest.approx(1 / 0.95 * 1.0, rel=0.01)
    assert band.low[0] / band.expected[0] == pytest.approx(1 / 1.05, rel=0.01)
    table = memory_time_band(C.POINTWISE, np.array([3e9]), table_rates())
    assert band.high[0] - band.low[0] < table.high[0] - table.low[0]
    with pytest.raises(ModelError, match="no rate"):
        memory_time_band(C.ATOMIC, np.array([1.0]), rates)


def test_corners_of_a_difference_cancel_shared_kernels():
    """A graph difference where the float8 graph moves a kernel's bytes to another kind:
    at each corner every kind sits at the same end, so bytes both graphs move cancel and the
    band of the difference is ordered only after summing."""
    rates = table_rates()
    pointwise, reduction = kind_rate(rates, "pointwise"), kind_rate(rates, "reduction")
    nbytes = np.array([1e9])
    same = corner_times(pointwise, nbytes=nbytes, kernels=np.array([1.0])) + corner_times(
        pointwise, nbytes=-nbytes, kernels=np.array([-1.0])
    )
    assert same.band().low == pytest.approx([0.0]) and same.band().high == pytest.approx([0.0])
    moved = corner_times(reduction, nbytes=nbytes, kernels=np.array([1.0])) + corner_times(
        pointwise, nbytes=-nbytes, kernels=np.array([-1.0])
    )
    band = moved.band()
    assert band.low[0] <= band.expected[0] <= band.high[0]
    assert band.high[0] == pytest.approx(moved.slow[0])  # reductions' slow end is slower


def test_a_kind_takes_the_widest_range_of_its_classes():
    rates = table_rates()
    rate = kind_rate(rates, "reduction")
    inner = rates.rate(C.REDUCTION_INNER).bandwidth_bytes_per_s
    outer = rates.rate(C.REDUCTION_OUTER).bandwidth_bytes_per_s
    assert rate.bandwidth_bytes_per_s.low == pytest.approx(min(inner.low, outer.low))
    assert rate.bandwidth_bytes_per_s.expected == pytest.approx(inner.expected)


def test_class_rate_is_one_kind():
    with pytest.raises(ModelError):
        ClassRate(floor_s=Range.point(1e-6))
    with pytest.raises(ModelError):
        ClassRate(Range.point(1e-6), Range.point(1e12), Range.point(1.0))
