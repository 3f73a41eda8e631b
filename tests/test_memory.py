"""Peak memory per GPU (training/memory.py): the terms add up, a tiny model by hand, the modes'
order, float8 all-gather, what fits, and the refusal of a run that cannot fit."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_LLAMA

from f8roof.engine.answer import Question, answer
from f8roof.engine.resolve import Request
from f8roof.renderers.answers import memory_dict, memory_lines
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import Recompute
from f8roof.training.memory import (
    GIB,
    Phase,
    Term,
    headroom,
    memory_estimate,
)
from f8roof.training.run_config import ONE_GPU, Pipeline, RunConfig

BLOCK = ("attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down")
ALL = tuple(f"layers.*.{n}" for n in BLOCK)
T = 64  # tokens: enough for the loss to hold the peak


def tiny(run=ONE_GPU, *, recipe="tensorwise", converted=ALL, gpu=80 * GIB, tokens=T):
    return memory_estimate(
        TINY_LLAMA, tokens=tokens, run=run, recipe=recipe, converted=converted, gpu_memory_bytes=gpu
    )


def test_the_terms_add_up_to_each_peak():
    for mode in Recompute:
        found = tiny(RunConfig(recompute=mode))
        for peak in (found.bf16, found.fp8):
            assert sum(t.bytes for t in peak.terms) == peak.peak_bytes
            assert {t.term for t in peak.terms} == set(Term)


def test_a_tiny_model_by_hand():
    """One GPU, no recompute, bf16, the blocks and the loss eager (torchtitan before
    2025-04-02, or compile off): the peak is at the loss."""
    found = tiny(replace(ONE_GPU, loss_compiled=False, blocks_compiled=False)).bf16
    block = 16 * 16 + 16 * 8 + 16 * 8 + 16 * 16 + 16 * 32 + 16 * 32 + 32 * 16  # 2304
    params = block + 2 * 16 + 16 * 64 + 16 + 64 * 16  # two norms; lm_head, final norm, embedding
    assert found.bytes_of(Term.PARAMETERS) == params * 4
    assert found.bytes_of(Term.OPTIMIZER) == params * 8
    assert found.bytes_of(Term.GRADIENTS) == 0  # zero_grad(set_to_none) opens the step
    # saved: both norms' inputs (16 each); inputs: attn 16, o 16, mlp 16, down 32; outputs:
    # q 16, k 8, v 8, gate 32, up 32; SDPA's output 16 and lse (4 heads, fp32); silu 32; bf16
    per_token = 2 * (16 + 16) + 2 * (16 + 16 + 16 + 32) + 2 * (16 + 8 + 8 + 32 + 32)
    per_token += 2 * 16 + 4 * 4 + 2 * 32
    assert found.bytes_of(Term.SAVED_ACTIVATIONS) == T * per_token
    # without FSDP the block's autocast bf16 weight copies (and its norms) wait for the backward
    assert found.bytes_of(Term.WEIGHTS_IN_FLIGHT) == (block + 2 * 16) * 2
    # fp32 logits at the loss (12 B each), lm_head's bf16 input and the final norm's input
    assert found.bytes_of(Term.LOGITS_LOSS) == T * 64 * 12 + T * 16 * 2 + T * 16 * 2
    assert found.bytes_of(Term.BLOCK_BACKWARD) == 0
    assert found.phase is Phase.LOSS


def test_a_compiled_tiny_block_saves_by_hand():
    """No recompute, bf16: what AOTAutograd's partition of the compiled block keeps
    (tests/test_saved_activations.py reads it off the graph): the eager set less SiLU's output
    (recomputed from the gate's) and the output projection's input (SDPA's saved output
    itself), with each norm's fp32 rsqrt."""
    found = tiny(replace(ONE_GPU, loss_compiled=False)).bf16
    # both norms' inputs (16 each) and rsqrt (fp32); inputs: attn 16, mlp 16, down 32;
    # outputs: q 16, k 8, v 8, gate 32, up 32; SDPA's output 16 and lse (4 heads, fp32)
    per_token = 2 * (16 + 16) + 2 * 4 + 2 * (16 + 16 + 32) + 2 * (16 + 8 + 8 + 32 + 32)
    per_token += 2 * 16 + 4 * 4
    assert found.bytes_of(Term.SAVED_ACTIVATIONS) == T * per_token


def test_a_compiled_loss_holds_the_bf16_logits_and_their_gradient():
    """torchtitan compiles its loss with the model: the fused kernels keep no fp32 logits."""
    tokens = 4096  # enough for the loss to hold the peak either way
    eager = tiny(replace(ONE_GPU, loss_compiled=False), tokens=tokens).bf16
    found = tiny(ONE_GPU, tokens=tokens).bf16
    assert found.phase is eager.phase is Phase.LOSS
    head_input = tokens * 16 * 2 + tokens * 16 * 2
    assert found.bytes_of(Term.LOGITS_LOSS) == tokens * 64 * 4 + head_input
    assert eager.allocated_bytes - found.allocated_bytes == tokens * 64 * (12 - 4)


def test_a_compiled_loss_parallel_saves_one_fp32_tensor_and_writes_the_bf16_gradient():
    """Under TP, compiled: Inductor's graph of loss parallel's decomposition saves an fp32
    tensor of the local logits' shape; its backward writes the bf16 gradient: 6 bytes per
    local logit where eager holds 16 (Llama3-8B, TP 2 x FSDP 8, full AC, 4 x 8192 tokens)."""
    arch, tokens, vocab, hidden = builtin("llama3-8b"), 4 * 8192, 128256, 4096
    run = replace(RunConfig.sharded(tp=2, fsdp=8, recompute=Recompute.FULL), seq_len=8192)
    eager, found = (
        memory_estimate(
            arch, tokens=tokens, run=replace(run, loss_compiled=c), recipe="rowwise",
            converted=[], gpu_memory_bytes=80 * GIB,
        ).bf16
        for c in (False, True)
    )  # fmt: skip
    head_input = tokens * hidden * 2 + tokens // 2 * hidden * 2
    assert found.phase is eager.phase is Phase.LOSS
    assert found.bytes_of(Term.LOGITS_LOSS) == tokens * vocab // 2 * (4 + 2) + head_input
    assert eager.bytes_of(Term.LOGITS_LOSS) == tokens * vocab // 2 * 16 + head_input


def test_loss_parallel_holds_four_fp32_tensors_per_local_logit():
    """Under TP the loss is loss parallel's decomposition: the saved log-probs, nll's gradient,
    their exp and its sum with the gradient, fp32 over the local vocabulary (64 / 2)."""
    tokens = 4096  # enough for the loss to hold the peak under full AC
    run = replace(RunConfig.sharded(tp=2, fsdp=2, recompute=Recompute.FULL), loss_compiled=False)
    found = tiny(run, tokens=tokens).bf16
    assert found.phase is Phase.LOSS
    head_input = tokens * 16 * 2 + tokens // 2 * 16 * 2  # gathered final-norm output; its input
    assert found.bytes_of(Term.LOGITS_LOSS) == tokens * 32 * 16 + head_input


def test_the_149990_arms_by_hand():
    """Llama3-70B, FSDP 16 x TP 8, full AC, 8 x 8192 tokens, tensorwise without float8
    all-gather: the peak is the loss in both precisions, summed here from the shapes. It is an
    allocated peak, below the reserved peaks torchtitan logged (71.51 and 55.26 GiB)."""
    arch = builtin("llama3-70b")
    tokens, tp, fsdp, layers, hidden, vocab = 8 * 8192, 8, 16, 80, 8192, 128256
    run = replace(
        RunConfig.sharded(tp=tp, fsdp=fsdp, recompute=Recompute.FULL),
        seq_len=8192,
        loss_compiled=False,  # torchtitan compiled the loss from 2025-04-02
    )
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]
    found = memory_estimate(
        arch, tokens=tokens, run=run, recipe="tensorwise", converted=converted,
        gpu_memory_bytes=80 * GIB,
    )  # fmt: skip
    block = 2 * hidden * hidden + 2 * hidden * 1024 + 3 * hidden * 28672  # q, o; k, v; MLP
    root = 2 * vocab * hidden / tp + hidden  # embedding and output (TP-sharded), final norm
    local = (layers * (block / tp + 2 * hidden) + root) / fsdp
    states = local * (4 + 8)  # fp32 parameters, AdamW's two states; no gradients yet
    saved = layers * tokens / tp * hidden * 2  # each block's sequence-sharded input
    loss = tokens * vocab / tp * 16 + tokens * hidden * 2 + tokens / tp * hidden * 2
    weights = (block / tp + 2 * hidden) * 2 + root * 2  # the last block and the root, bf16
    expected = states + saved + loss + weights
    for peak in (found.bf16, found.fp8):
        assert peak.phase is Phase.LOSS
        assert peak.allocated_bytes == pytest.approx(expected, rel=1e-6)
    assert expected / GIB == pytest.approx(33.63, abs=0.01)
    assert expected < 55.26 * GIB < 71.51 * GIB


def test_torchtitan_1207_lands_within_ten_percent_of_its_reserved_peak():
    """Llama3-8B on 4 H100s, FSDP 2 x TP 2, per-op SAC, rowwise, 1 x 8192 tokens, the loss
    compiled: torchtitan logged 45.68 GiB (bf16) and 45.67 GiB (float8) reserved; the
    allocated peak is under both, the reserved one within 10%."""
    arch = builtin("llama3-8b")
    run = replace(RunConfig.sharded(tp=2, fsdp=2, recompute=Recompute.SELECTIVE), seq_len=8192)
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]
    found = memory_estimate(
        arch, tokens=8192, run=run, recipe="rowwise", converted=converted,
        gpu_memory_bytes=80 * GIB,
    )  # fmt: skip
    for peak, published in ((found.bf16, 45.68), (found.fp8, 45.67)):
        assert peak.allocated_bytes < published * GIB
        assert abs(peak.peak_bytes / (published * GIB) - 1) < 0.1


def test_without_loss_parallel_every_tp_rank_holds_the_whole_vocabulary():
    run = replace(RunConfig.sharded(tp=2, fsdp=2), seq_len=T, loss_compiled=False)
    parallel = tiny(run).bf16.bytes_of(Term.LOGITS_LOSS)
    gathered = tiny(replace(run, loss_parallel=False)).bf16.bytes_of(Term.LOGITS_LOSS)
    # loss parallel: 16 B for each of a rank's 32 logits a token; gathered: eager's 12 B for 64
    assert gathered - parallel == T * 64 * 12 - T * 32 * 16


def test_recompute_modes_order_the_saved_activations():
    arch = builtin("llama3-8b")
    saved = {}
    for mode in Recompute:
        run = RunConfig.sharded(tp=2, fsdp=4, recompute=mode)
        found = memory_estimate(
            arch,
            tokens=16384,
            run=run,
            recipe="tensorwise",
            converted=(),
            gpu_memory_bytes=80 * GIB,
        )
        saved[mode] = found.bf16.bytes_of(Term.SAVED_ACTIVATIONS)
    assert saved[Recompute.NONE] > saved[Recompute.SELECTIVE] > saved[Recompute.FULL]
    # full AC keeps each block's sequence-sharded input only
    assert saved[Recompute.FULL] == 32 * 16384 // 2 * 4096 * 2


def test_float8_all_gather_halves_the_converted_weights_in_flight():
    run = RunConfig.sharded(tp=1, fsdp=8, recompute=Recompute.FULL)
    plain = tiny(run)
    gathered = tiny(replace(run, float8_all_gather=True))
    bf16 = plain.fp8.bytes_of(Term.WEIGHTS_IN_FLIGHT)
    assert bf16 == plain.bf16.bytes_of(Term.WEIGHTS_IN_FLIGHT)
    block = 2304 * 2  # the block's linear weights, two blocks, one byte saved each
    assert gathered.fp8.bytes_of(Term.WEIGHTS_IN_FLIGHT) == bf16 - block
    rowwise = tiny(replace(run, float8_all_gather=True), recipe="rowwise")
    assert rowwise.fp8.bytes_of(Term.WEIGHTS_IN_FLIGHT) == bf16  # torchao gathers tensorwise only


def test_eager_tensorwise_under_tp_saves_float8_inputs_and_rowwise_does_not():
    run = replace(RunConfig.sharded(tp=2, fsdp=2), blocks_compiled=False)
    tensorwise, rowwise = tiny(run), tiny(run, recipe="rowwise")
    bf16 = tensorwise.bf16.bytes_of(Term.SAVED_ACTIVATIONS)
    assert rowwise.fp8.bytes_of(Term.SAVED_ACTIVATIONS) == bf16
    # four linear inputs (attn, o, mlp, down) at T x K_local, one byte instead of two
    assert tensorwise.fp8.bytes_of(Term.SAVED_ACTIVATIONS) == bf16 - T * (16 + 8 + 16 + 16)


def test_compiled_float8_under_tp_saves_the_gathered_inputs_in_float8():
    """The compiled block under TP (read off its graph, tests/test_saved_activations.py): bf16
    keeps the gathered attention and MLP inputs and the down projection's (T x 16 each, 2
    bytes); float8 keeps the gathered ones in float8 instead (1 byte), tensorwise the
    row-parallel ones' float8 inputs too (o: T x 8, down: T x 16), rowwise not. Both keep
    float8 copies of the TP-local weights: tensorwise all of them (2304 / 2), rowwise o's and
    the MLP's ((256 + 3 x 512) / 2)."""
    run = RunConfig.sharded(tp=2, fsdp=2)
    tensorwise, rowwise = tiny(run), tiny(run, recipe="rowwise")
    bf16 = tensorwise.bf16.bytes_of(Term.SAVED_ACTIVATIONS)
    assert bf16 == rowwise.bf16.bytes_of(Term.SAVED_ACTIVATIONS)
    kept_bf16 = T * (16 + 16 + 16) * 2
    assert rowwise.fp8.bytes_of(Term.SAVED_ACTIVATIONS) == (
        bf16 - kept_bf16 + T * (16 + 16) + (256 + 3 * 512) // 2
    )
    assert tensorwise.fp8.bytes_of(Term.SAVED_ACTIVATIONS) == (
        bf16 - kept_bf16 + T * (16 + 16 + 8 + 16) + 2304 // 2
    )


def test_a_cheaper_mode_and_a_larger_batch_where_float8_frees_room():
    arch = builtin("llama3-8b")
    converted = [f.fqn for f in arch.linears if f.fqn != "lm_head"]
    run = replace(RunConfig.sharded(tp=2, fsdp=4, recompute=Recompute.FULL), seq_len=8192)

    def at(r, tokens):
        return memory_estimate(
            arch, tokens=tokens, run=r, recipe="tensorwise", converted=converted,
            gpu_memory_bytes=80 * GIB,
        )  # fmt: skip

    room = headroom(at, run, tokens=8192 * 4)
    assert room.local_batch == 4 and room.seq_len == 8192
    assert room.fp8_local_batch >= room.bf16_local_batch >= 4
    assert at(replace(run, seq_len=8192), room.bf16_local_batch * 8192).bf16_fits
    assert not at(run, (room.bf16_local_batch + 1) * 8192).bf16_fits
    order = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
    assert order.index(room.fp8_recompute) <= order.index(room.bf16_recompute)


def test_a_run_that_cannot_fit_is_answered_with_the_fsdp_degree_that_would():
    """llama3-70b over FSDP 2: no recompute mode fits its states; the hint is the smallest
    power-of-two FSDP degree at which bf16 fits, and half of it does not."""
    run = RunConfig.from_options(tp=1, fsdp=2, recompute="none")
    got = answer(Question(model="llama3-70b", tokens=8192), Request(gpu="h100"), setup=run)
    assert got.memory is not None and not got.memory.estimate.bf16_fits
    assert got.memory.headroom.bf16_recompute is None and got.memory.fsdp_fits is not None
    degree, mode = got.memory.fsdp_fits

    def fits(fsdp: int) -> bool:
        at = RunConfig.from_options(tp=1, fsdp=fsdp, recompute=mode.value)
        again = answer(Question(model="llama3-70b", tokens=8192), Request(gpu="h100"), setup=at)
        assert again.memory is not None
        return again.memory.estimate.bf16_fits

    assert fits(degree) and not fits(degree // 2)
    assert f"  bf16 fits at FSDP {degree} (--fsdp {degree} --recompute {mode.value})" in (
        memory_lines(got.memory)
    )


def test_an_answer_carries_its_memory_and_an_unknown_degree_none():
    result = answer(
        Question(model="llama3-8b", tokens=8192),
        Request(gpu="h100"),
        setup=RunConfig.from_options(tp=2, fsdp=4),
    )
    assert result.memory is not None
    assert result.memory.estimate.fp8.peak_bytes <= result.memory.estimate.bf16.peak_bytes
    unknown = answer(
        Question(model="llama3-8b", tokens=8192),
        Request(gpu="h100"),
        setup=RunConfig.from_options(fsdp=-1),
    )
    assert unknown.memory is None


def test_float8_at_a_cheaper_recompute_mode_is_timed_against_bf16_at_its_own():
    """Llama3-8B, 80k tokens, TP 8 x FSDP 8 on an H100: bf16 needs per-op SAC, float8 (its
    saved linear inputs in float8 under TP) fits without recompute."""
    result = answer(
        Question(model="llama3-8b", tokens=81920),
        Request(gpu="h100"),
        setup=RunConfig.from_options(tp=8, fsdp=8, recompute="selective"),
    )
    assert result.memory is not None
    room, fitting = result.memory.headroom, result.memory.fitting
    assert (room.bf16_recompute, room.fp8_recompute) == (Recompute.SELECTIVE, Recompute.NONE)
    assert fitting is not None
    assert fitting.speedup == pytest.approx(fitting.bf16_s / fitting.fp8_s)
    assert fitting.like_for_like == pytest.approx(result.step.as_run.speedup)
    assert fitting.speedup > fitting.like_for_like  # no recompute to pay for in float8


def test_the_out_json_terms_add_up_and_the_published_peaks_are_read():
    from f8roof.renderers.answers import memory_dict

    result = answer(
        Question(model="llama3-8b", tokens=16384),
        Request(gpu="h100"),
        setup=RunConfig.from_options(tp=2, fsdp=4, recompute="full"),
    )
    assert result.memory is not None
    out = memory_dict(result.memory)
    for precision in ("bf16", "fp8"):
        terms = sum(t[f"{precision}_bytes"] for t in out["terms"].values())
        assert terms == out[f"{precision}_peak_bytes"]
    path = Path(__file__).resolve().parents[1] / "scripts" / "published_memory.py"
    spec = importlib.util.spec_from_file_location("published_memory", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.published() == [
        ("vanilla TP", False, 71.51, 55.26),
        ("async TP", True, 71.08, 55.91),
    ]


def test_a_measured_step_is_answered_where_the_memory_model_says_it_cannot_fit():
    # the run that was measured ran: the memory model, not the measurement, is what is off
    run = RunConfig.from_options(tp=1, fsdp=2, recompute="none", step_ms=5000.0)
    got = answer(Question(model="llama3-70b", tokens=8192), Request(gpu="h100"), setup=run)
    assert got.memory is not None and got.memory.measured
    assert not got.memory.estimate.bf16_fits
    lines = memory_lines(got.memory)
    assert "neither fits" in lines[0] or "only float8 fits" in lines[0]
    assert lines[1] == (
        "  the bf16 step was measured, so the run fits: the memory model overstates it"
    )
    assert memory_dict(got.memory)["bf16_step_measured"] is True


def _pipelined(schedule: str, microbatches: int, *, degree: int = 4, recompute=Recompute.FULL):
    """Llama3-70B, TP 8 x FSDP 2 x PP `degree` (64 GPUs), one 8192-token sequence a
    microbatch."""
    arch = builtin("llama3-70b")
    run = replace(RunConfig.sharded(tp=8, fsdp=2, recompute=recompute), seq_len=8192)
    stages = 2 if schedule == "Interleaved1F1B" else 1
    run = replace(run, pipeline=Pipeline(degree, microbatches, schedule, stages))
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]
    return memory_estimate(
        arch, tokens=8192, run=run, recipe="tensorwise", converted=converted,
        gpu_memory_bytes=80 * GIB,
    )  # fmt: skip


def test_a_pipeline_rank_holds_its_stage_and_the_schedules_microbatches_in_flight():
    """Each rank holds ceil((80 + 2) / 4) - 1 = 20 blocks' states; the first rank's full-AC
    block inputs are 4 microbatches' under 1F1B, 8 under GPipe (every forward first) and
    4 + 3 / 2 under Interleaved1F1B with two stages a rank."""
    hidden, block_input = 8192, 8192 / 8 * 8192 * 2  # each block's sequence-sharded input
    one_f_one_b, gpipe = _pipelined("1F1B", 8), _pipelined("GPipe", 8)
    interleaved = _pipelined("Interleaved1F1B", 8)
    for found, in_flight in ((one_f_one_b, 4), (gpipe, 8), (interleaved, 5.5)):
        peak = found.bf16
        if peak.phase is not Phase.BACKWARD_LAST:  # the last block's backward holds one
            assert peak.bytes_of(Term.SAVED_ACTIVATIONS) == pytest.approx(
                20 * block_input * in_flight, rel=1e-6
            )
    assert gpipe.bf16.peak_bytes > interleaved.bf16.peak_bytes > one_f_one_b.bf16.peak_bytes
    for found in (one_f_one_b, gpipe, interleaved):
        for peak in (found.bf16, found.fp8):
            assert sum(t.bytes for t in peak.terms) == peak.peak_bytes
    block = 2 * hidden * hidden + 2 * hidden * 1024 + 3 * hidden * 28672
    embedding = 128256 * hidden / 8
    params = (20 * (block / 8 + 2 * hidden) + embedding) / 2 * 4  # fp32, FSDP 2: the first rank
    assert one_f_one_b.bf16.bytes_of(Term.PARAMETERS) == pytest.approx(params, rel=1e-3)


def test_a_pipeline_keeps_its_stage_gathered_and_its_gradients_unsharded_between_microbatches():
    """FSDP2 under PP: the stage's 20 blocks stay all-gathered through the step (torchtitan's
    default reshard_after_forward), and with more than one microbatch their bf16 gradients
    accumulate unsharded until the last one's backward syncs them."""
    block = (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) / 8 + 2 * 8192
    one, several = _pipelined("1F1B", 1).bf16, _pipelined("1F1B", 8).bf16
    assert several.bytes_of(Term.WEIGHTS_IN_FLIGHT) >= 20 * block * 2
    # the first rank's peak, before any sharded gradient: only the accumulated ones
    assert several.phase is not Phase.BACKWARD_LAST
    assert several.bytes_of(Term.GRADIENTS) == pytest.approx(20 * block * 2, rel=1e-3)
    if one.phase is not Phase.BACKWARD_LAST:  # one microbatch: nothing to accumulate
        assert one.bytes_of(Term.GRADIENTS) == 0


def test_under_a_pipeline_the_largest_local_batch_is_more_microbatches():
    """1F1B holds at most p microbatches in flight: more microbatches cost no memory, so the
    local batch that fits is the search's bound, in whole microbatches."""
    arch = builtin("llama3-70b")
    run = replace(RunConfig.sharded(tp=8, fsdp=2, recompute=Recompute.FULL), seq_len=8192)
    run = replace(run, pipeline=Pipeline(4, 4, "1F1B", 1))
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]

    def at(given: RunConfig, tokens: int):
        return memory_estimate(
            arch, tokens=tokens, run=given, recipe="tensorwise", converted=converted,
            gpu_memory_bytes=80 * GIB,
        )  # fmt: skip

    room = headroom(at, run, tokens=8192)
    assert room.local_batch == 4
    assert room.bf16_local_batch >= 1024


def test_a_compiled_moe_block_saves_the_same_per_rank_with_its_experts_spread_over_ep_ranks():
    """Under EP a rank's experts receive, in expectation, the rows its own tokens send out, so
    what the compiled block saves per rank moves only by `_permute`'s index (8 bytes a row),
    not by the 35% between compile's count and eager's (qwen3-30b-a3b, 16384 tokens)."""
    from f8roof.training.checkpointing import is_block_fqn
    from f8roof.training.memory import per_block

    arch = builtin("qwen3-30b-a3b")
    converted = [lin.fqn for lin in arch.linears if is_block_fqn(lin.fqn)]

    def saved(ep: int, compiled: bool = True) -> float:
        run = RunConfig(fsdp=8, ep=ep, blocks_compiled=compiled)
        terms = per_block(arch, tokens=16384, run=run, recipe="rowwise", converted=converted)
        return terms.saved[0]

    rows = 16384 * 8  # top_k 8
    assert saved(2) - saved(1) == rows * 8
    assert saved(8) == saved(2)
    assert saved(1) > 1.2 * saved(1, compiled=False)
