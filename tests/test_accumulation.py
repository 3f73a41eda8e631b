"""Gradient accumulation: the step as that many forward/backward passes and one optimizer step
(hand-computed), the gradients it holds across passes, and the setup key and flag that ask
for it (torchtitan's global_batch_size, `--accumulation`)."""

import json
from dataclasses import replace

import pytest
from conftest import invoke_cli
from test_memory import tiny
from test_pipeline_and_context import FP8
from test_pipeline_and_context import _step as pipelined_step
from test_setup_file import MINIMAL

from f8roof.engine.step.parts import OutsideBlocks, Part, StepError
from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.training.memory import Phase, Term
from f8roof.training.run_config import ONE_GPU, Pipeline
from f8roof.training.setup_file import parse_setup

# test_pipeline_and_context's block parts, with float8's precomputed FSDP scales outside
OUTSIDE = OutsideBlocks(embedding_loss_s=0.5, optimizer_s=0.75, fp8_extra_s=0.05)


def _step(**given):
    return pipelined_step(**{"outside": OUTSIDE, **given})


def test_four_passes_and_one_optimizer_step_by_hand():
    # one pass, bf16: linears 8 x 2 + 1 = 17, other 8, TP 4, FSDP 2, outside 0.5; optimizer
    # 0.75 (float8 0.8 with its precomputed scales). Four passes: all but the optimizer x 4
    step = _step(accumulation=4)
    part = {c.part: c for c in step.components}
    assert part[Part.LINEARS].bf16_s == pytest.approx(68.0)
    assert part[Part.LINEARS].fp8_s == pytest.approx(4 * (8 * 1.25 + 1))
    assert part[Part.OTHER_COMPUTE].bf16_s == pytest.approx(32.0)
    assert part[Part.TP_COMM].bf16_s == pytest.approx(16.0)
    assert part[Part.FSDP_COMM].bf16_s == pytest.approx(8.0)  # gathered and reduced each pass
    assert part[Part.OUTSIDE].bf16_s == pytest.approx(2.0)
    assert part[Part.OPTIMIZER].bf16_s == pytest.approx(0.75)
    assert part[Part.OPTIMIZER].fp8_s == pytest.approx(0.8)
    assert step.bf16_s == pytest.approx(68 + 32 + 16 + 8 + 2 + 0.75)
    assert step.fp8_s == pytest.approx(4 * (11 + 8 + 4 + 2 + 0.5) + 0.8)
    assert step.lm_head_bf16_s == pytest.approx(4.0)
    # the optimizer's share shrinks with the passes, so the step's speedup grows toward one
    # pass's without the optimizer
    one = _step()
    assert one.speedup < step.speedup < (one.bf16_s - 0.75) / (one.fp8_s - 0.8)


def test_under_a_pipeline_each_pass_is_a_whole_schedule():
    pipe = Pipeline(degree=4, microbatches=8)
    once, twice = _step(pipeline=pipe), _step(pipeline=pipe, accumulation=2)
    for a, b in zip(once.components, twice.components):
        factor = 1 if a.part is Part.OPTIMIZER else 2
        assert b.bf16_s == pytest.approx(factor * a.bf16_s)
        assert b.fp8_s == pytest.approx(factor * a.fp8_s)


def test_a_weight_cast_cached_across_microbatches_is_paid_once_per_step():
    """Transformer Engine's cached weight cast (0.1 of the block's 0.25 overhead): per pass the
    linears are 8 x (1.25 - 0.1) + 1 = 10.2, the casts 8 x 0.1 = 0.8 once per step; under a
    pipeline of 4 ranks and 8 microbatches each rank pays its quarter of the casts once, and
    its idle microbatch times are ones without them. One pass of one microbatch is unchanged."""
    cached = replace(FP8, weight_cast_once_s=0.1)
    part = {c.part: c for c in _step(fp8=cached, accumulation=4).components}
    assert part[Part.LINEARS].fp8_s == pytest.approx(4 * 10.2 + 0.8)
    assert part[Part.LINEARS].fp8_low_s == pytest.approx(4 * 10.2 + 0.8)  # no band given
    pipe = Pipeline(degree=4, microbatches=8)
    part = {c.part: c for c in _step(fp8=cached, pipeline=pipe).components}
    assert part[Part.LINEARS].fp8_s == pytest.approx(8 / 4 * 10.2 + 0.8 / 4)
    # idle: 3 microbatch times of a rank, (10.2 + 8 + 4 + 0.5) / 4 each
    assert part[Part.PIPELINE].fp8_s == pytest.approx(3 * 22.7 / 4)
    assert _step(fp8=cached).fp8_s == pytest.approx(_step().fp8_s)
    with pytest.raises(StepError, match="part of overhead_s"):
        replace(FP8, weight_cast_once_s=0.5)


def test_a_measured_step_spans_the_passes():
    step = _step(accumulation=3, step_s=120.0)
    assert step.bf16_s == 120.0
    assert step.speedup_low <= step.speedup <= step.speedup_high
    # the floor scales with the passes: a step shorter than three passes' gemms is impossible
    with pytest.raises(StepError, match="shorter than its bf16 gemms"):
        _step(accumulation=3, step_s=0.25)
    with pytest.raises(StepError, match="accumulation must be an integer >= 1"):
        _step(accumulation=0)


def test_later_passes_hold_the_gradients_so_far():
    run = replace(ONE_GPU, loss_compiled=False)
    one, four = tiny(run).bf16, tiny(replace(run, accumulation=4)).bf16
    grads = four.bytes_of(Term.GRADIENTS)
    params = one.bytes_of(Term.PARAMETERS)  # fp32 master weights: the gradients' size too
    assert four.phase is Phase.LOSS and one.bytes_of(Term.GRADIENTS) == 0
    assert grads == params
    assert (
        four.allocated_bytes == one.allocated_bytes + grads
    )  # what the allocator reserves may differ
    # the activations of a pass are those without accumulation
    assert four.bytes_of(Term.SAVED_ACTIVATIONS) == one.bytes_of(Term.SAVED_ACTIVATIONS)


def _setup(training="", shard=8, more=""):
    """test_setup_file's minimal job config with `training` keys, the shard degree and `more`
    lines after it ([parallelism] keys, then other sections)."""
    text = MINIMAL.replace("seq_len = 4096", f"seq_len = 4096\n{training}")
    return text + f"[parallelism]\ndata_parallel_shard_degree = {shard}\n{more}\n"


def test_the_setup_reads_global_batch_size_as_torchtitan():
    got = parse_setup(_setup("global_batch_size = 64"), path="x.toml")
    assert got.run.accumulation == 4  # 64 / (2 x 8)
    hsdp = _setup("global_batch_size = 64", more="data_parallel_replicate_degree = 2")
    assert parse_setup(hsdp, path="x.toml").run.accumulation == 2  # 64 / (2 x 2 x 8)
    # data_parallel_shard_degree -1: the world size places the ranks
    world = _setup("global_batch_size = 64", shard=-1, more="[f8roof]\ngpus = 16")
    assert parse_setup(world, path="x.toml").run.accumulation == 2
    with pytest.raises(
        F8RoofError, match="24 in x.toml: not a multiple of local batch 2 x 8 data-parallel ranks$"
    ):
        parse_setup(_setup("global_batch_size = 24"), path="x.toml")
    # -1 without the world size: the ranks are unknown, one pass assumed and said
    unknown = parse_setup(_setup("global_batch_size = 64", shard=-1), path="x.toml")
    assert unknown.run.accumulation == 1
    assert Topic.ACCUMULATION_UNKNOWN in {n.topic for n in unknown.run.assumptions}


def test_an_accumulated_setup_is_answered_per_pass(tmp_path):
    outs = []
    for name, training in (("one", ""), ("four", "global_batch_size = 64")):
        setup = tmp_path / f"{name}.toml"
        setup.write_text(_setup(training) + '[f8roof]\ngpu = "h100"\n')
        out = tmp_path / f"{name}.json"
        result = invoke_cli("estimate", "--setup", setup, "--show-all", "--out", out)
        assert result.exit_code == 0, result.output
        outs.append((result.output, json.loads(out.read_text())["summary"]))
    (_, one), (text, four) = outs
    assert "tokens per pass (4 per step)" in text and "bf16 ms/pass" in text
    assert "gradient accumulation: 4 forward/backward passes of 8192 tokens" in text
    parts = [{c["part"]: c["bf16_s"] for c in s["components"]} for s in (one, four)]
    for part, seconds in parts[0].items():
        factor = 1 if part == Part.OPTIMIZER.value else 4
        assert parts[1][part] == pytest.approx(factor * seconds, rel=1e-9), part
    assert four["speedup"] > one["speedup"]


def test_the_command_line_takes_accumulation(tmp_path):
    args = ("estimate", "--gpu", "h100", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "8")
    result = invoke_cli(*args, "--accumulation", "4")
    assert result.exit_code == 0, result.output
    assert "(4 passes, modelled step" in result.output
    piped = invoke_cli(
        *args[:6], "16384", "--fsdp", "8", "--pp", "2", "--accumulation", "2", "--show-all"
    )
    assert piped.exit_code == 0, piped.output
    assert "M = 8192 tokens per microbatch (2 per pass, 2 passes per step)" in piped.output
    assert "FSDP gathers and reduce-scatters once per pass" in piped.output
    zero = invoke_cli(*args, "--accumulation", "0")
    assert zero.exit_code == 2 and "0 is not in the range x>=1" in zero.output
    alone = invoke_cli(
        "estimate", "--gpu", "h100", "--shape", "8192,8192,8192", "--accumulation", 2
    )
    assert alone.exit_code == 2 and "--accumulation goes with --model" in alone.output
    setup = tmp_path / "s.toml"
    setup.write_text(_setup())
    beside = invoke_cli("estimate", "--setup", setup, "--accumulation", "2")
    assert beside.exit_code == 2
    assert "sets gradient accumulation (global_batch_size): drop --accumulation" in beside.output
