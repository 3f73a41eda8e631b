import numpy as np
import pytest

from f8roof.engine.estimate import EstimateConfig, estimate, square_breakeven
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import Recipe, Role

CONTRACT = [
    "M",
    "K",
    "N",
    "recipe",
    "bf16_gemm_s",
    "fp8_gemm_s",
    "overhead_bytes_worst",
    "overhead_bytes_ideal",
    "overhead_s_worst",
    "overhead_s_ideal",
    "fp8_s_worst",
    "fp8_s_ideal",
    "speedup_worst",
    "speedup_ideal",
    "fp8_ok",
]


def config(name="tensorwise", **kw):
    return EstimateConfig(Recipe.from_name(name), find_gpu("h100"), **kw)


def test_contract_columns_and_one_row_per_shape():
    frame = estimate([(512, 1024, 2048), (4096, 4096, 4096)], config())
    assert all(c in frame.columns for c in CONTRACT)
    assert len(frame) == 2 and (frame["recipe"] == "tensorwise").all()


def test_seed_configuration_by_hand():
    # all dynamic, input and grad_output fused, with limitations: 5MK + 7KN + 5MN bytes,
    # at 92% of 3.35 TB/s plus 2 us for each of the three scale kernels
    cfg = config(fused=frozenset({Role.INPUT, Role.GRAD_OUTPUT}), limited=frozenset(Role))
    row = estimate([(4096, 2048, 1024)], cfg).row(0)
    nbytes = 5 * 4096 * 2048 + 7 * 2048 * 1024 + 5 * 4096 * 1024
    assert row["overhead_bytes_worst"] == nbytes
    assert row["overhead_s_worst"] == pytest.approx(nbytes / (3.35e12 * 0.92) + 3 * 2e-6)
    assert row["speedup_worst"] == pytest.approx(
        row["bf16_gemm_s"] / (row["fp8_gemm_s"] + row["overhead_s_worst"])
    )


def test_fp8_ok_names_the_dimension():
    frame = estimate([(64, 100, 64), (64, 64, 100), (64, 64, 64), (100, 64, 100)], config())
    assert list(frame["fp8_ok"]) == [False, False, True, False]
    assert list(frame["fp8_reason"]) == [
        "K not a multiple of 16",
        "N not a multiple of 16",
        "",
        "M and N not multiples of 16",
    ]


def test_m_is_free_when_grad_weight_stays_bf16():
    # grad_weight contracts over M; rowwise_gw_hp runs it in bf16, so M needs no alignment
    shapes = [(100, 64, 64)]
    assert not estimate(shapes, config("rowwise"))["fp8_ok"][0]
    assert estimate(shapes, config("rowwise_gw_hp"))["fp8_ok"][0]


def test_vectorized_matches_one_by_one():
    rng = np.random.default_rng(0)
    shapes = rng.integers(1, 20000, size=(50, 3))
    together = estimate(shapes, config("rowwise"))
    for i in (0, 17, 49):
        alone = estimate([tuple(shapes[i])], config("rowwise")).row(0)
        assert alone["speedup_worst"] == pytest.approx(together["speedup_worst"][i], rel=1e-12)


def test_breakeven_is_where_speedup_crosses_one():
    cfg = config()
    size = square_breakeven(cfg)
    below, at = estimate([(size - 16,) * 3, (size,) * 3], cfg)["speedup_worst"]
    assert below <= 1 < at
    assert square_breakeven(cfg, "speedup_ideal") <= size


def test_more_overhead_never_faster():
    shapes = [(2048, 4096, 8192)]
    plain = estimate(shapes, config()).row(0)
    limited = estimate(shapes, config(limited=frozenset(Role))).row(0)
    assert limited["speedup_worst"] < plain["speedup_worst"]
    assert limited["speedup_ideal"] == pytest.approx(plain["speedup_ideal"])
