import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from f8roof.hardware.presets import PRESETS, find_gpu
from f8roof.timing.datasheet import datasheet_timing
from f8roof.timing.gemm import (
    GemmRole,
    GemmTableError,
    GridTable,
    RooflineGemm,
    TableGemm,
    linear_gemm_times,
)
from f8roof.traffic.recipes import Recipe


def test_roofline_matches_hand_computation_compute_bound():
    h100 = find_gpu("h100")
    gemm = RooflineGemm(h100)
    time, extra = gemm.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096)
    flops = 2 * 4096**3
    assert time == pytest.approx(flops / (989.4e12 * 0.6), rel=1e-12)
    assert not extra.any()
    fp8, _ = gemm.time_s("fp8", GemmRole.OUTPUT, 4096, 4096, 4096)
    assert fp8 == pytest.approx(flops / (1978.9e12 * 0.6), rel=1e-12)


def test_roofline_memory_bound_and_floor():
    gemm = RooflineGemm(find_gpu("h100"))
    # (16384, 16, 16384): almost no FLOPs per byte, the bf16 output write dominates
    time, _ = gemm.time_s("bf16", GemmRole.OUTPUT, 16384, 16, 16384)
    traffic = 2 * (16384 * 16 * 2) + 2 * 16384**2
    assert time == pytest.approx(traffic / (3.35e12 * 0.92), rel=1e-12)
    tiny, _ = gemm.time_s("fp8", GemmRole.OUTPUT, 16, 16, 16)
    assert tiny == pytest.approx(2e-6)


def test_linear_sums_three_gemms_with_transposed_dims():
    gemm = RooflineGemm(find_gpu("h100"), launch_floor_s=0.0)
    total, _ = linear_gemm_times(
        gemm, None, np.array([1024.0]), np.array([2048.0]), np.array([512.0])
    )
    # all three gemms have the same 2MKN FLOPs; memory terms differ but compute dominates here
    parts = [gemm.time_s("bf16", r, 1024, 2048, 512)[0] for r in GemmRole]
    assert total[0] == pytest.approx(sum(parts))


def test_rowwise_gw_hp_grad_weight_runs_in_bf16():
    gemm = RooflineGemm(find_gpu("h100"), launch_floor_s=0.0)
    args = (np.array([8192.0]),) * 3
    fp8, _ = linear_gemm_times(gemm, Recipe.from_name("rowwise"), *args)
    hp, _ = linear_gemm_times(gemm, Recipe.from_name("rowwise_gw_hp"), *args)
    assert hp[0] == pytest.approx(fp8[0] * 4 / 3, rel=1e-4)  # one gemm of three at half the FLOP/s


def _grid_records(func):
    sizes = [256, 1024, 4096]
    return [(m, k, n, func(m, k, n)) for m in sizes for k in sizes for n in sizes]


def test_grid_exact_at_points_and_log_linear_between():
    # throughput doubles every 4x in m: log2(flops) is linear in log2(m), so midpoints are exact
    records = _grid_records(lambda m, k, n: 2 * m * k * n / (1e12 * (m / 256) ** 0.5))
    table = GridTable.from_points(*np.array(records).T, label="t")
    t, extra = table.time_s(1024, 1024, 1024)
    assert t == pytest.approx(2 * 1024**3 / (1e12 * 2))
    t, extra = table.time_s(512, 1024, 1024)
    assert t == pytest.approx(2 * 512 * 1024**2 / (1e12 * 2**0.5))
    assert not extra.any()


def test_grid_flags_extrapolation_and_keeps_edge_throughput():
    records = _grid_records(lambda m, k, n: 2 * m * k * n / 1e12)
    table = GridTable.from_points(*np.array(records).T, label="t")
    t, extra = table.time_s(np.array([8192, 2048]), 1024, 1024)
    assert list(extra) == [True, False]
    assert t[0] == pytest.approx(2 * 8192 * 1024**2 / 1e12)


def test_grid_with_one_value_on_an_axis():
    # a sweep of M alone (K and N fixed) is a full grid: interpolated along M, flagged off it
    records = [
        (m, 4096, 1024, 2 * m * 4096 * 1024 / (1e12 * (m / 256) ** 0.5)) for m in (256, 1024)
    ]
    table = GridTable.from_points(*np.array(records).T, label="t")
    t, extra = table.time_s(np.array([512, 512]), np.array([4096, 8192]), 1024)
    assert t[0] == pytest.approx(2 * 512 * 4096 * 1024 / (1e12 * 2**0.5))
    assert list(extra) == [False, True]


def test_grid_with_a_hole_is_refused_naming_the_point():
    records = _grid_records(lambda m, k, n: 1e-3)[:-1]
    with pytest.raises(GemmTableError, match="missing m=4096, k=4096, n=4096"):
        GridTable.from_points(*np.array(records).T, label="t")


def test_table_without_a_dtype_is_refused():
    records = [("bf16", "output", m, k, n, t) for m, k, n, t in _grid_records(lambda *a: 1e-3)]
    table = TableGemm.from_records(records, label="t")
    with pytest.raises(GemmTableError, match="no fp8 output"):
        table.time_s("fp8", GemmRole.OUTPUT, 256, 256, 256)


# --- the tiled model never times a gemm faster for growing a dimension ----------------------


# small outputs over long reductions (split-K) and everything else
DIM = st.one_of(st.integers(1, 1024), st.integers(1, 2**17))


@settings(max_examples=300, deadline=None)
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    dims=st.tuples(DIM, DIM, DIM),
    grown=st.integers(0, 2),
    by=st.one_of(st.integers(1, 512), st.integers(1, 2**16)),
    groups=st.sampled_from([1, 8, 32]),
)
def test_tiled_gemm_time_never_falls_as_a_dimension_grows(preset, dims, grown, by, groups):
    model = datasheet_timing(PRESETS[preset]).all_gemms
    larger = list(dims)
    larger[grown] += by
    for dtype, _ in model.efficiencies:
        small = float(model.time_s(dtype, GemmRole.OUTPUT, *dims, groups)[0])
        large = float(model.time_s(dtype, GemmRole.OUTPUT, *larger, groups)[0])
        assert large >= small * (1 - 1e-12), (dtype, dims, larger)


def test_the_split_k_threshold_is_no_cliff():
    """512 x 512 over K = 2048 ran unsplit and K = 2560 split: 28 us became 19 us for the
    linear. A split is priced at the threshold's K below it, and taken where it wins."""
    gemm = datasheet_timing(find_gpu("h100")).gemm
    times = [
        float(gemm.time_s("bf16", GemmRole.OUTPUT, 512, k, 512)[0]) for k in range(1024, 8193, 256)
    ]
    assert times == sorted(times)
