"""The step model: blocks x layers + lm_head + rest, measured or modelled."""

import pytest

from f8roof.errors import ModelError
from f8roof.notes import Topic, note
from f8roof.training.step import Basis, BlockTimes, Part, StepError, step_summary

BF16 = BlockTimes(
    linear_gemm_s=10e-3, other_compute_s=5e-3, tp_comm_s=1e-3, fsdp_comm_s=0.5e-3, recompute_s=2e-3
)
FP8 = BlockTimes(
    linear_gemm_s=6e-3,
    overhead_s=2e-3,
    other_compute_s=5e-3,
    tp_comm_s=1e-3,
    fsdp_comm_s=0.5e-3,
    recompute_s=2e-3,
)


def topics(summary):
    return {n.topic for n in summary.notes}


def test_modelled_step():
    s = step_summary(bf16=BF16, fp8=FP8, layers=32, lm_head_bf16_s=4e-3, rest_s=20e-3)
    assert s.bf16_s == pytest.approx(32 * 18.5e-3 + 4e-3 + 20e-3)
    assert s.fp8_s == pytest.approx(32 * 16.5e-3 + 4e-3 + 20e-3)
    assert s.speedup == pytest.approx(s.bf16_s / s.fp8_s)
    assert not s.step_measured
    assert s.linear_bf16_s == pytest.approx(32 * 10e-3 + 4e-3)
    assert s.linear_fp8_s == pytest.approx(32 * 8e-3 + 4e-3)
    assert s.comm_bf16_s == pytest.approx(48e-3) and s.recompute_fp8_s == pytest.approx(64e-3)
    assert s.part(Part.FSDP_COMM).fp8_s == pytest.approx(16e-3)
    assert {Topic.MODELLED_STEP, Topic.LM_HEAD_BF16} <= topics(s)
    # the parts add up to the step, in both precisions
    assert sum(c.bf16_s for c in s.components) == pytest.approx(s.bf16_s)
    assert sum(c.fp8_s for c in s.components) == pytest.approx(s.fp8_s)
    assert s.part(Part.REST).basis is Basis.NOT_MODELLED
    assert s.part(Part.OTHER_COMPUTE).basis is Basis.ATTENTION


def test_the_band_sits_on_the_linears():
    s = step_summary(
        bf16=BF16, fp8=FP8, layers=32, lm_head_bf16_s=4e-3, rest_s=0.0, fp8_band_s=(-0.05, 0.1)
    )
    linears = s.part(Part.LINEARS)
    assert (linears.fp8_low_s, linears.fp8_high_s) == pytest.approx(
        (linears.fp8_s - 0.05, linears.fp8_s + 0.1)
    )
    assert s.speedup_low == pytest.approx(s.bf16_s / (s.fp8_s + 0.1))
    assert s.speedup_high == pytest.approx(s.bf16_s / (s.fp8_s - 0.05))
    flat = [c for c in s.components if c.part is not Part.LINEARS]
    assert all(c.fp8_low_s == c.fp8_s == c.fp8_high_s for c in flat)


def test_measured_step_takes_the_modelled_difference():
    s = step_summary(bf16=BF16, fp8=FP8, layers=32, lm_head_bf16_s=4e-3, step_s=0.762)
    assert s.bf16_s == 0.762 and s.step_measured
    assert s.fp8_s == pytest.approx(0.762 - 32 * 2e-3)
    assert s.rest_s == pytest.approx(0.762 - 32 * 18.5e-3 - 4e-3)
    assert s.linear_share == pytest.approx((32 * 10e-3 + 4e-3) / 0.762)
    assert Topic.MODELLED_STEP not in topics(s)
    assert s.part(Part.REST).measured and s.part(Part.REST).basis is Basis.MEASURED_STEP


def test_lm_head_in_float8_counts():
    s = step_summary(
        bf16=BF16, fp8=FP8, layers=1, lm_head_bf16_s=4e-3, lm_head_fp8_s=3e-3, step_s=1.0
    )
    assert s.fp8_s == pytest.approx(1.0 - 2e-3 - 1e-3)
    assert Topic.LM_HEAD_BF16 not in topics(s)


def test_model_larger_than_measured_step_is_noted():
    s = step_summary(bf16=BF16, fp8=FP8, layers=100, lm_head_bf16_s=0.0, step_s=1.0)
    exceeds = next(n for n in s.notes if n.topic is Topic.MODEL_EXCEEDS_STEP)
    assert exceeds["model_ms"] == pytest.approx(1850.0) and exceeds["step_ms"] == 1000.0


def test_to_dict_is_json_ready():
    import json

    given = note(Topic.EP_ALL_TO_ALL, ep=8)
    s = step_summary(bf16=BF16, fp8=FP8, layers=2, lm_head_bf16_s=1e-3, notes=[given])
    d = json.loads(json.dumps(s.to_dict()))
    assert d["speedup"] == pytest.approx(s.speedup)
    assert d["notes"][0] == {
        "topic": "ep_all_to_all",
        "values": {"ep": 8},
        "source": "",
        "measured": False,
    }
    assert [c["part"] for c in d["components"]] == [p.value for p in Part]


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
