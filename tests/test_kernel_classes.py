"""The efficiency table: every class on every family has a row with a source, and the rows
that rest on no public figure say so."""

import pytest

from f8roof.errors import ModelError
from f8roof.hardware.presets import PRESETS
from f8roof.timing.kernel_classes import (
    EFFICIENCY_TABLE,
    ClassEfficiency,
    GpuFamily,
    KernelClass,
    Range,
    class_efficiency,
    gemm_class,
    launch_floor,
)


@pytest.mark.parametrize("family", list(GpuFamily))
def test_every_class_has_a_sourced_row(family):
    for kernel_class in KernelClass:
        if kernel_class is KernelClass.CPU:
            continue
        row = class_efficiency(kernel_class, family)
        assert row.source.strip()
        if kernel_class.is_memory:
            assert 0 < row.value.low <= row.value.high <= 1
        assert launch_floor(family).floor_s.low > 0


def test_families_without_figures_are_assumptions_and_wider():
    for row in EFFICIENCY_TABLE:
        if row.family is GpuFamily.MI300X:
            assert row.assumption
        if "no public measurement" in row.source:
            assert row.assumption
    hopper = class_efficiency(KernelClass.REDUCTION_OUTER, GpuFamily.HOPPER).value
    mi300x = class_efficiency(KernelClass.REDUCTION_OUTER, GpuFamily.MI300X).value
    assert mi300x.low < hopper.low


def test_no_row_cites_a_float8_linear_speedup():
    for row in EFFICIENCY_TABLE:
        assert "speedup" not in row.source.lower()


def test_slow_accumulation_never_faster_than_fast():
    for family in GpuFamily:
        fast = class_efficiency(KernelClass.GEMM_FP8_TENSORWISE_FAST, family).value
        slow = class_efficiency(KernelClass.GEMM_FP8_TENSORWISE_SLOW, family).value
        assert slow.expected >= fast.expected and slow.high > fast.high
    with pytest.raises(ModelError, match="slow accumulation"):
        ClassEfficiency(
            KernelClass.GEMM_FP8_ROWWISE_SLOW, GpuFamily.HOPPER, Range(0.9, 1, 1), "x", True
        )


def test_gemm_class_by_mode():
    assert gemm_class(float8=False) is KernelClass.GEMM_BF16
    assert gemm_class(float8=True, rowwise=True, fast_accum=False) is (
        KernelClass.GEMM_FP8_ROWWISE_SLOW
    )


def test_every_preset_has_a_family():
    families = {
        g.name: GpuFamily.of(name=g.name, compute_capability=g.compute_capability)
        for g in PRESETS.values()
    }
    assert families["h100"] is families["h200"] is GpuFamily.HOPPER
    assert families["b200"] is GpuFamily.BLACKWELL
    assert families["mi300x"] is GpuFamily.MI300X
    with pytest.raises(ModelError, match="compute capability 8.0"):
        GpuFamily.of(name="a100", compute_capability=(8, 0))


def test_range_checks_and_widening():
    with pytest.raises(ModelError):
        Range(1.0, 0.5, 2.0)
    widened = Range.point(2.0).widened(0.1)
    assert (widened.low, widened.expected, widened.high) == pytest.approx((1.8, 2.0, 2.2))
    with pytest.raises(ModelError, match="residual"):
        Range.point(2.0).widened(1.5)
