"""The step model: blocks x layers + lm_head + rest, measured or modelled."""

import pytest

from f8roof.errors import ModelError
from f8roof.training.step import BlockTimes, StepError, step_summary

BF16 = BlockTimes(linear_gemm_s=10e-3, other_compute_s=5e-3, comm_exposed_s=1e-3, recompute_s=2e-3)
FP8 = BlockTimes(
    linear_gemm_s=6e-3, overhead_s=2e-3, other_compute_s=5e-3, comm_exposed_s=1e-3, recompute_s=2e-3
)


def test_modelled_step():
    s = step_summary(bf16=BF16, fp8=FP8, layers=32, lm_head_bf16_s=4e-3, rest_s=20e-3)
    assert s.bf16_s == pytest.approx(32 * 18e-3 + 4e-3 + 20e-3)
    assert s.fp8_s == pytest.approx(32 * 16e-3 + 4e-3 + 20e-3)
    assert s.speedup == pytest.approx(s.bf16_s / s.fp8_s)
    assert not s.step_measured
    assert s.linear_bf16_s == pytest.approx(32 * 10e-3 + 4e-3)
    assert s.linear_fp8_s == pytest.approx(32 * 8e-3 + 4e-3)
    assert s.comm_bf16_s == pytest.approx(32e-3) and s.recompute_fp8_s == pytest.approx(64e-3)
    assert any("modelled step" in a for a in s.assumptions)
    assert any("lm_head" in a for a in s.assumptions)


def test_measured_step_takes_the_modelled_difference():
    s = step_summary(bf16=BF16, fp8=FP8, layers=32, lm_head_bf16_s=4e-3, step_s=0.762)
    assert s.bf16_s == 0.762 and s.step_measured
    assert s.fp8_s == pytest.approx(0.762 - 32 * 2e-3)
    assert s.rest_s == pytest.approx(0.762 - 32 * 18e-3 - 4e-3)
    assert s.linear_share == pytest.approx((32 * 10e-3 + 4e-3) / 0.762)
    assert not any("modelled step" in a for a in s.assumptions)


def test_lm_head_in_float8_counts():
    s = step_summary(
        bf16=BF16, fp8=FP8, layers=1, lm_head_bf16_s=4e-3, lm_head_fp8_s=3e-3, step_s=1.0
    )
    assert s.fp8_s == pytest.approx(1.0 - 2e-3 - 1e-3)
    assert not any("lm_head" in a for a in s.assumptions)


def test_model_larger_than_measured_step_is_noted():
    s = step_summary(bf16=BF16, fp8=FP8, layers=100, lm_head_bf16_s=0.0, step_s=1.0)
    assert any("exceed the measured step" in a for a in s.assumptions)


def test_to_dict_is_json_ready():
    import json

    s = step_summary(bf16=BF16, fp8=FP8, layers=2, lm_head_bf16_s=1e-3, assumptions=["x"])
    d = json.loads(json.dumps(s.to_dict()))
    assert d["speedup"] == pytest.approx(s.speedup) and d["assumptions"][0] == "x"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: BlockTimes(linear_gemm_s=-1.0), "linear_gemm_s must be finite and >= 0"),
        (lambda: BlockTimes(linear_gemm_s=float("nan")), "linear_gemm_s must be finite"),
        (lambda: BlockTimes(linear_gemm_s="1"), "must be a number of seconds"),
        (
            lambda: step_summary(bf16=BF16, fp8=FP8, layers=0, lm_head_bf16_s=0.0),
            "layers must be an integer >= 1",
        ),
        (
            lambda: step_summary(bf16=FP8, fp8=FP8, layers=1, lm_head_bf16_s=0.0),
            "bf16 BlockTimes carries float8 overhead",
        ),
        (
            lambda: step_summary(bf16=BF16, fp8=FP8, layers=1, lm_head_bf16_s=0.0, step_s=0.0),
            "measured step must be > 0",
        ),
        (
            lambda: step_summary(
                bf16=BF16, fp8=FP8, layers=1, lm_head_bf16_s=0.0, step_s=1.0, rest_s=1.0
            ),
            "rest_s is for a modelled step",
        ),
    ],
)
def test_bad_inputs(call, message):
    with pytest.raises(StepError, match=message) as info:
        call()
    assert isinstance(info.value, ModelError)
