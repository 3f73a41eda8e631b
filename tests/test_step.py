"""The step model: blocks x layers + lm_head + what runs outside the blocks, modelled whole;
a measured step reconciled with it, never replaced; FSDP2's schedule on hand-computed cases."""

import json

import pytest

from f8roof.engine.step.parts import (
    ADAMW_BYTES_PER_PARAM,
    CLIP_BYTES_PER_PARAM,
    LOSS_BYTES_PER_LOGIT,
    Basis,
    BlockTimes,
    OutsideBlocks,
    Part,
    StepError,
    outside_blocks,
    reconcile,
    step_summary,
)
from f8roof.errors import ModelError
from f8roof.notes import Topic, note
from f8roof.timing.comm import find_interconnect, fsdp_exposed_time_s, group_fabric

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
OUTSIDE = OutsideBlocks(embedding_loss_s=15e-3, optimizer_s=5e-3)
KW = {"bf16": BF16, "fp8": FP8, "outside": OUTSIDE, "gemm_floor_s": 0.0}


def topics(summary):
    return {n.topic for n in summary.notes}


def test_the_modelled_step_is_the_sum_of_its_parts():
    s = step_summary(layers=32, lm_head_bf16_s=4e-3, **KW)
    assert s.bf16_s == pytest.approx(32 * 18.5e-3 + 4e-3 + 20e-3)
    assert s.fp8_s == pytest.approx(32 * 16.5e-3 + 4e-3 + 20e-3)
    assert s.speedup == pytest.approx(s.bf16_s / s.fp8_s)
    assert not s.step_measured and s.reconciliation is None
    assert s.linear_bf16_s == pytest.approx(32 * 10e-3 + 4e-3)
    assert s.linear_fp8_s == pytest.approx(32 * 8e-3 + 4e-3)
    assert s.comm_bf16_s == pytest.approx(48e-3) and s.recompute_fp8_s == pytest.approx(64e-3)
    assert s.outside_bf16_s == pytest.approx(20e-3)
    assert {Topic.MODELLED_STEP, Topic.LM_HEAD_BF16} <= topics(s)
    assert sum(c.bf16_s for c in s.components) == pytest.approx(s.bf16_s)
    assert sum(c.fp8_s for c in s.components) == pytest.approx(s.fp8_s)
    assert s.part(Part.OPTIMIZER).basis is Basis.BYTES
    assert s.part(Part.OTHER_COMPUTE).basis is Basis.ATTENTION


def test_precomputed_scales_cost_float8_alone():
    outside = OutsideBlocks(embedding_loss_s=15e-3, optimizer_s=5e-3, fp8_extra_s=1e-3)
    s = step_summary(layers=1, lm_head_bf16_s=0.0, **{**KW, "outside": outside})
    part = s.part(Part.OPTIMIZER)
    assert (part.bf16_s, part.fp8_s) == pytest.approx((5e-3, 6e-3))


def test_the_band_sits_on_the_linears():
    s = step_summary(layers=32, lm_head_bf16_s=4e-3, fp8_band_s=(-0.05, 0.1), **KW)
    linears = s.part(Part.LINEARS)
    assert (linears.fp8_low_s, linears.fp8_high_s) == pytest.approx(
        (linears.fp8_s - 0.05, linears.fp8_s + 0.1)
    )
    assert s.speedup_low == pytest.approx(s.bf16_s / (s.fp8_s + 0.1))
    assert s.speedup_high == pytest.approx(s.bf16_s / (s.fp8_s - 0.05))
    flat = [c for c in s.components if c.part is not Part.LINEARS]
    assert all(c.fp8_low_s == c.fp8_s == c.fp8_high_s for c in flat)


def test_a_measured_step_spreads_its_gap_in_proportion():
    """Model 0.5 s bf16, 0.4 s float8; measured 1.0 s: the float8 step is 0.8 s (x1.25), the
    gap all on what float8 leaves alone gives 1.0 / 0.9, all on the linears (0.3 -> 0.2 s,
    scaled by 2/3) 1.0 / (0.4 + 0.5 x 2/3)."""
    rec = reconcile(
        step_s=1.0, modelled_bf16_s=0.5, modelled_fp8_s=0.4, linear_bf16_s=0.3, linear_fp8_s=0.2
    )
    assert rec.gap_s == pytest.approx(0.5)
    assert rec.speedup_proportional == pytest.approx(1.25)
    assert rec.speedup_gap_unchanged == pytest.approx(1 / 0.9)
    assert rec.speedup_gap_on_linears == pytest.approx(1 / (0.4 + 0.5 * 2 / 3))


def test_a_measured_step_is_never_replaced_and_never_refused_for_the_model():
    modelled = step_summary(layers=32, lm_head_bf16_s=4e-3, **KW)
    for step_s in (0.3, 0.762, 5.0):  # shorter and longer than the model
        s = step_summary(layers=32, lm_head_bf16_s=4e-3, step_s=step_s, **KW)
        assert s.bf16_s == step_s and s.step_measured
        assert s.speedup == pytest.approx(modelled.speedup)
        assert s.speedup_low <= s.speedup <= s.speedup_high
        assert sum(c.bf16_s for c in s.components) == pytest.approx(modelled.bf16_s)
        said = next(n for n in s.notes if n.topic is Topic.RECONCILED)
        assert said["gap"] == pytest.approx((step_s - modelled.bf16_s) / step_s)


def test_only_a_step_shorter_than_its_gemms_at_peak_is_refused():
    with pytest.raises(StepError, match="shorter than its bf16 gemms at the GPU's peak"):
        step_summary(layers=1, lm_head_bf16_s=0.0, step_s=0.01, **{**KW, "gemm_floor_s": 0.02})


def test_lm_head_in_float8_counts():
    s = step_summary(layers=1, lm_head_bf16_s=4e-3, lm_head_fp8_s=3e-3, **KW)
    assert s.bf16_s - s.fp8_s == pytest.approx(2e-3 + 1e-3)
    assert Topic.LM_HEAD_BF16 not in topics(s)


def test_outside_blocks_by_bytes():
    """8B-like numbers at 1 ns per byte: the loss over 8192 x 128256 logits (40 B each), the
    optimizer over 1e9 parameters (28 + 12 B each), each pass 1 us to launch."""
    out = outside_blocks(
        tokens=8192,
        dim=4096,
        vocab=128256,
        tp=1,
        params_per_gpu=1e9,
        fp8_params_per_gpu=0.8e9,
        stream_s_per_byte=1e-9,
        launch_s=1e-6,
        grad_norm_all_reduce_s=50e-6,
        scales_all_reduce_s=None,
    )
    loss = 8192 * 128256 * LOSS_BYTES_PER_LOGIT * 1e-9
    assert loss < out.embedding_loss_s < 1.1 * loss
    optimizer = 1e9 * (ADAMW_BYTES_PER_PARAM + CLIP_BYTES_PER_PARAM) * 1e-9 + 3e-6 + 50e-6
    assert out.optimizer_s == pytest.approx(optimizer)
    assert out.fp8_extra_s == 0.0


def test_logits_gathered_without_loss_parallel():
    """TP 8, 1 ns a byte: loss parallel runs eager's 40 B over each rank's 1/8 of the logits;
    disabled, the gathered logits' all-gather shows, then the whole loss on every rank (compiled
    here: 8 B a logit)."""
    kw = {
        "tokens": 8192,
        "dim": 4096,
        "vocab": 128256,
        "tp": 8,
        "params_per_gpu": 1e9,
        "fp8_params_per_gpu": 0.0,
        "stream_s_per_byte": 1e-9,
        "launch_s": 0.0,
        "grad_norm_all_reduce_s": 0.0,
        "scales_all_reduce_s": None,
        "loss_compiled": True,
    }
    rest = (8192 * 4096 * 10 + 128256 / 8 * 4096 * 2 + 8192 / 8 * 4096 * 12) * 1e-9
    sharded = outside_blocks(**kw).embedding_loss_s
    assert sharded == pytest.approx(rest + 8192 * 128256 / 8 * LOSS_BYTES_PER_LOGIT * 1e-9)
    gathered = outside_blocks(**kw, loss_parallel=False, gather_logits_s=5e-3).embedding_loss_s
    assert gathered == pytest.approx(rest + 8192 * 128256 * 8 * 1e-9 + 5e-3)


def test_to_dict_is_json_ready():
    given = note(Topic.EP_ALL_TO_ALL, ep=8)
    s = step_summary(layers=2, lm_head_bf16_s=1e-3, step_s=1.0, notes=[given], **KW)
    d = json.loads(json.dumps(s.to_dict()))
    assert d["speedup"] == pytest.approx(s.speedup)
    assert d["notes"][0] == {
        "topic": "ep_all_to_all",
        "values": {"ep": 8},
        "source": "",
        "measured": False,
    }
    # the pipeline's and CP's parts only under those (tests/test_pipeline_and_context.py)
    only = (Part.PIPELINE, Part.CP_COMM, Part.EP_COMM)
    assert [c["part"] for c in d["components"]] == [p.value for p in Part if p not in only]
    assert d["reconciliation"]["gap_s"] == pytest.approx(1.0 - s.modelled_bf16_s)


# --- FSDP2's schedule, by hand ------------------------------------------------------------


def test_full_ac_hides_fsdp_behind_a_backward_three_times_the_forward():
    """4 blocks, forward 10 ms, gather 8 ms, reduce-scatter 16 ms. Without recompute the
    backward is 20 ms: 3 x (8 + 16 - 20) = 12 ms shows beside the first gather and last
    reduce-scatter (24 ms); full AC's backward reruns the forward (30 ms): nothing more."""
    kw = {"all_gather_s": 8e-3, "reduce_scatter_s": 16e-3, "forward_compute_s": 10e-3, "layers": 4}
    assert fsdp_exposed_time_s(backward_compute_s=20e-3, **kw) == pytest.approx(36e-3)
    assert fsdp_exposed_time_s(backward_compute_s=30e-3, **kw) == pytest.approx(24e-3)


def test_a_bf16_reduce_scatter_halves_what_fp32_exposes():
    kw = {"all_gather_s": 8e-3, "forward_compute_s": 10e-3, "backward_compute_s": 20e-3}
    fp32 = fsdp_exposed_time_s(reduce_scatter_s=32e-3, layers=2, **kw)
    bf16 = fsdp_exposed_time_s(reduce_scatter_s=16e-3, layers=2, **kw)
    assert (fp32, bf16) == pytest.approx((8e-3 + 32e-3 + 20e-3, 8e-3 + 16e-3 + 4e-3))


def test_hsdp_adds_the_replicas_all_reduce_to_each_reduction():
    kw = {"all_gather_s": 8e-3, "reduce_scatter_s": 10e-3, "forward_compute_s": 10e-3}
    hsdp = fsdp_exposed_time_s(backward_compute_s=20e-3, layers=3, all_reduce_s=6e-3, **kw)
    assert hsdp == pytest.approx(8e-3 + 16e-3 + 2 * (8e-3 + 16e-3 - 20e-3))


def test_never_resharding_gathers_nothing_in_the_backward():
    kw = {"all_gather_s": 8e-3, "reduce_scatter_s": 16e-3, "forward_compute_s": 10e-3}
    never = fsdp_exposed_time_s(
        backward_compute_s=12e-3, layers=3, reshard_after_forward=False, **kw
    )
    assert never == pytest.approx(8e-3 + 16e-3 + 2 * (16e-3 - 12e-3))


def test_a_group_crosses_nodes_on_one_nic_per_gpu_it_holds_there():
    h100 = find_interconnect("h100")
    under_tp8, nics = group_fabric(h100, group_size=16, stride=8, gpus_per_node=8)
    assert nics == 1 and under_tp8.inter_busbw_bytes_per_s == h100.inter_busbw_bytes_per_s
    alone, nics = group_fabric(h100, group_size=128, stride=1, gpus_per_node=8)
    assert nics == 8
    assert alone.inter_busbw_bytes_per_s == min(
        8 * h100.inter_busbw_bytes_per_s, h100.intra_busbw_bytes_per_s
    )
    faster, _ = group_fabric(h100, group_size=16, stride=8, gpus_per_node=8, nic_gbps=800)
    assert faster.inter_busbw_bytes_per_s == pytest.approx(2 * h100.inter_busbw_bytes_per_s)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: BlockTimes(linear_gemm_s=-1.0), "linear_gemm_s must be finite and >= 0"),
        (lambda: BlockTimes(linear_gemm_s=float("nan")), "linear_gemm_s must be finite"),
        (lambda: BlockTimes(linear_gemm_s="1"), "must be a number of seconds"),
        (lambda: OutsideBlocks(embedding_loss_s=-1.0, optimizer_s=0.0), "must be finite"),
        (
            lambda: step_summary(layers=0, lm_head_bf16_s=0.0, **KW),
            "layers must be an integer >= 1",
        ),
        (
            lambda: step_summary(layers=1, lm_head_bf16_s=0.0, **{**KW, "bf16": FP8}),
            "bf16 BlockTimes carries float8 overhead",
        ),
    ],
)
def test_bad_inputs(call, message):
    with pytest.raises(StepError, match=message) as info:
        call()
    assert isinstance(info.value, ModelError)
