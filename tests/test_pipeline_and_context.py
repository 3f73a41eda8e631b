"""Pipeline and context parallelism: the schedule's idle time on hand-computed cases, the step one
rank runs, the key/value exchange, and the setup file and command line that ask for them."""

import json

import pytest
from conftest import invoke_cli

from f8roof.engine.step.parts import (
    BlockTimes,
    OutsideBlocks,
    Part,
    pipelined,
    step_summary,
)
from f8roof.training.run_config import Pipeline, PipelineError, RunConfig

BF16 = BlockTimes(linear_gemm_s=2.0, other_compute_s=1.0, tp_comm_s=0.5, fsdp_comm_s=0.25)
FP8 = BlockTimes(
    linear_gemm_s=1.0, overhead_s=0.25, other_compute_s=1.0, tp_comm_s=0.5, fsdp_comm_s=0.25
)
OUTSIDE = OutsideBlocks(embedding_loss_s=0.5, optimizer_s=0.75)


def _step(pipeline=None, **given):
    kw = {
        "bf16": BF16,
        "fp8": FP8,
        "layers": 8,
        "lm_head_bf16_s": 1.0,
        "outside": OUTSIDE,
        "gemm_floor_s": 0.1,
    }
    return step_summary(**{**kw, **given}, pipeline=pipeline)


def test_one_f_one_b_by_hand():
    # per microbatch for the whole model, bf16: linears 8 x 2 + 1 = 17, other 8, TP 4, FSDP 2,
    # outside 0.5, optimizer 0.75. Four ranks, eight microbatches: every per-microbatch part
    # x 8 / 4, FSDP and the optimizer / 4, and 3 idle microbatch times of a rank
    # ((17 + 8 + 4 + 0.5) / 4 each) plus 6 sends while the pipeline fills and drains
    pipe = Pipeline(degree=4, microbatches=8)
    step = _step(pipe, send_s=0.01)
    part = {c.part: c for c in step.components}
    assert part[Part.LINEARS].bf16_s == pytest.approx(34.0)
    assert part[Part.OTHER_COMPUTE].bf16_s == pytest.approx(16.0)
    assert part[Part.TP_COMM].bf16_s == pytest.approx(8.0)
    assert part[Part.FSDP_COMM].bf16_s == pytest.approx(0.5)
    assert part[Part.OPTIMIZER].bf16_s == pytest.approx(0.1875)
    assert part[Part.PIPELINE].bf16_s == pytest.approx(3 * 29.5 / 4 + 0.06)
    # float8: linears 8 x 1.25 + 1 = 11 per microbatch
    assert part[Part.PIPELINE].fp8_s == pytest.approx(3 * 23.5 / 4 + 0.06)
    assert step.bf16_s == pytest.approx(sum(c.bf16_s for c in step.components))
    assert step.fp8_s == pytest.approx(sum(c.fp8_s for c in step.components))


def test_the_bubble_is_the_textbook_fraction():
    # with nothing outside the microbatches, 1F1B idles (p - 1) / (m + p - 1) of the step and
    # the interleaved schedule (p - 1) / (v m + p - 1) (Narayanan et al. 2021)
    bare = OutsideBlocks(embedding_loss_s=0.0, optimizer_s=0.0)
    blocks = BlockTimes(linear_gemm_s=2.0, other_compute_s=1.0)
    for pipe, fraction in (
        (Pipeline(degree=4, microbatches=8), 3 / 11),
        (Pipeline(degree=4, microbatches=8, schedule="Interleaved1F1B", stages_per_rank=2), 3 / 19),
        (Pipeline(degree=8, microbatches=32, schedule="GPipe"), 7 / 39),
    ):
        step = _step(pipe, bf16=blocks, fp8=blocks, lm_head_bf16_s=0.0, outside=bare)
        assert step.part(Part.PIPELINE).bf16_s / step.bf16_s == pytest.approx(fraction)


def test_float8_shortens_the_idle_time_with_the_microbatch():
    pipe = Pipeline(degree=4, microbatches=8)
    step = _step(pipe)
    bubble = step.part(Part.PIPELINE)
    per_microbatch = [
        sum(
            getattr(c, k)
            for c in _step().components
            if c.part not in (Part.FSDP_COMM, Part.OPTIMIZER)
        )
        for k in ("bf16_s", "fp8_s")
    ]
    assert bubble.fp8_s / bubble.bf16_s == pytest.approx(per_microbatch[1] / per_microbatch[0])
    # the band's ends move the idle time with the linears
    assert bubble.fp8_low_s < bubble.fp8_s < bubble.fp8_high_s or bubble.fp8_low_s == bubble.fp8_s


def test_a_measured_step_reconciles_the_pipelined_model():
    pipe = Pipeline(degree=4, microbatches=8)
    modelled = _step(pipe)
    measured = _step(pipe, step_s=modelled.bf16_s * 1.1)
    assert measured.bf16_s == pytest.approx(modelled.bf16_s * 1.1)
    assert measured.speedup == pytest.approx(modelled.speedup)
    assert measured.speedup_low <= measured.speedup <= measured.speedup_high


def test_pipelined_keeps_what_runs_once_per_step():
    components = _step().components
    out = pipelined(components, Pipeline(degree=2, microbatches=4), send_s=0.0)
    once = {c.part: c.bf16_s for c in out if c.part in (Part.FSDP_COMM, Part.OPTIMIZER)}
    before = {c.part: c.bf16_s for c in components}
    assert once[Part.FSDP_COMM] == pytest.approx(before[Part.FSDP_COMM] / 2)
    assert once[Part.OPTIMIZER] == pytest.approx(before[Part.OPTIMIZER] / 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"degree": 4, "microbatches": 8, "schedule": "ZBVZeroBubble"}, "splits the backward"),
        ({"degree": 4, "microbatches": 8, "schedule": "1f2b"}, "unknown pipeline schedule"),
        ({"degree": 4, "microbatches": 8, "schedule": "Interleaved1F1B"}, "at least 2 stages"),
        ({"degree": 4, "microbatches": 8, "stages_per_rank": 2}, "1 stage per rank"),
        ({"degree": 0, "microbatches": 8}, "degree must be a positive integer"),
    ],
)
def test_pipelines_torchtitan_cannot_run_are_refused(kwargs, message):
    with pytest.raises(PipelineError, match=message):
        if "schedule" in kwargs and kwargs["schedule"] not in ("Interleaved1F1B",):
            Pipeline.torchtitan(degree=kwargs["degree"], sequences=8, schedule=kwargs["schedule"])
        else:
            Pipeline(**kwargs)


def test_torchtitan_defaults():
    looped = Pipeline.torchtitan(degree=4, sequences=16, schedule="interleaved1f1b")
    assert (looped.schedule, looped.stages_per_rank, looped.microbatches) == (
        "Interleaved1F1B",
        2,
        16,
    )
    assert Pipeline.torchtitan(degree=4, sequences=16, microbatch_size=2).microbatches == 8
    with pytest.raises(PipelineError, match="does not divide"):
        Pipeline.torchtitan(degree=4, sequences=16, microbatch_size=3)


def test_fsdp_keeps_its_weights_gathered_under_a_pipeline():
    pipe = Pipeline(degree=2, microbatches=4)
    assert RunConfig().reshards_after_forward
    assert not RunConfig(pipeline=pipe).reshards_after_forward
    assert RunConfig(pipeline=pipe, reshard_after_forward="always").reshards_after_forward


SETUP = """[model]
name = "llama3-70b"

[training]
local_batch_size = 8
seq_len = 8192
compile = true

[parallelism]
data_parallel_shard_degree = 8
tensor_parallel_degree = 8
pipeline_parallel_degree = 4
{extra}
[activation_checkpoint]
mode = "full"

[f8roof]
gpu = "h100"
"""


def _summary(tmp_path, extra="", *args):
    path = tmp_path / "pp.toml"
    path.write_text(SETUP.format(extra=extra))
    out = tmp_path / "pp.json"
    result = invoke_cli("estimate", "--setup", str(path), "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text())["summary"]


def test_a_pipelined_setup_is_answered_per_microbatch(tmp_path):
    result, summary = _summary(tmp_path, "", "--show-all")
    assert "M = 8192 tokens per microbatch (8 per step)" in result.output
    parts = {c["part"]: c for c in summary["components"]}
    assert parts["pipeline bubble and sends"]["bf16_s"] > 0
    assert summary["modelled_bf16_s"] == pytest.approx(sum(c["bf16_s"] for c in parts.values()))
    # interleaved: half the idle time of 1F1B, the rest of the step the same
    _, looped = _summary(tmp_path, 'pipeline_parallel_schedule = "Interleaved1F1B"\n')
    looped_parts = {c["part"]: c for c in looped["components"]}
    idle, looped_idle = (p["pipeline bubble and sends"]["bf16_s"] for p in (parts, looped_parts))
    assert looped_idle < idle
    assert looped_parts["linears"]["bf16_s"] == pytest.approx(parts["linears"]["bf16_s"])


def test_the_command_line_takes_a_pipeline(tmp_path):
    args = ("--gpu", "h100", "--model", "llama3-8b", "--tokens", "16384", "--fsdp", "8")
    args += ("--recompute", "full")
    outs = [tmp_path / "plain.json", tmp_path / "piped.json"]
    plain = invoke_cli("estimate", *args, "--out", str(outs[0]))
    piped = invoke_cli("estimate", *args, "--pp", "2", "--show-all", "--out", str(outs[1]))
    assert plain.exit_code == 0, plain.output
    assert piped.exit_code == 0, piped.output
    # a rank of two runs half the blocks over the same tokens (two microbatches of one
    # sequence): half the linears' time, give or take the gemms' efficiency at half the M
    plain_linears, piped_linears = (
        json.loads(p.read_text())["summary"]["linear_bf16_s"] for p in outs
    )
    assert piped_linears / plain_linears == pytest.approx(0.5, rel=0.05)
    assert "pipeline: 2 ranks, 1F1B" in piped.output
    assert "2 microbatches of 8192 tokens" in piped.output
    # the per-layer totals add up one microbatch through every stage, and say so
    assert "bf16 ms/microbatch" in piped.output and "bf16 ms/step" not in piped.output
    odd = invoke_cli("estimate", *args, "--pp", "2", "--microbatches", "3")
    assert odd.exit_code == 2 and "do not split into 3" in odd.output
    alone = invoke_cli("estimate", "--gpu", "h100", "--shape", "8192,8192,8192", "--pp", "2")
    assert alone.exit_code == 2 and "go with --model" in alone.output


def test_the_setup_sizes_microbatches_and_stages_as_torchtitan(tmp_path):
    extra = (
        'pipeline_parallel_schedule = "Interleaved1F1B"\n'
        "pipeline_parallel_microbatch_size = 2\n"
        'pipeline_parallel_split_points = ["layers.10", "layers.20", "layers.30", "layers.40", '
        '"layers.50", "layers.60", "layers.70", "layers.75", "layers.78", "layers.79", '
        '"layers.5"]\n'
    )
    result, _ = _summary(tmp_path, extra, "--show-all")
    # twelve stages over four ranks, eight sequences in microbatches of two
    assert "Interleaved1F1B with 3 stage(s) each, 4 microbatches of 16384 tokens" in result.output
    # llama3-70b's 80 blocks, the embedding and the output in stages of 11: 8 stages, 2 a rank
    by_layers = (
        'pipeline_parallel_schedule = "Interleaved1F1B"\npipeline_parallel_layers_per_stage = 11\n'
    )
    result, _ = _summary(tmp_path, by_layers, "--show-all")
    assert "Interleaved1F1B with 2 stage(s) each" in result.output
    odd = tmp_path / "odd.toml"
    odd.write_text(SETUP.format(extra='pipeline_parallel_split_points = ["layers.40"]\n'))
    refused = invoke_cli("estimate", "--setup", str(odd))
    assert refused.exit_code == 2
    assert "2 stages from 'pipeline_parallel_split_points'" in refused.output


# ---- context parallelism --------------------------------------------------------------------


def _step_json(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    result = invoke_cli(
        "estimate", "--gpu", "h100", "--model", "llama3-8b", *args, "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["summary"]


def test_context_parallel_runs_a_rank_share_and_exchanges_keys(tmp_path):
    # two CP ranks over 16384 tokens (sequences of 8192) hold 8192 tokens each: the linears'
    # and attention's work of 8192 tokens of one 8192-token sequence, plus the key/value
    # exchange: all-gathered keys and values of 16384 tokens (8 kv heads of 128, bf16),
    # gathered again by per-op SAC, their gradients reduce-scattered, on NVLink
    common = ("--fsdp", "8", "--recompute", "selective")
    cp = _step_json(tmp_path, "cp", "--tokens", "16384", "--cp", "2", *common)
    alone = _step_json(tmp_path, "alone", "--tokens", "8192", *common)
    parts = {c["part"]: c for c in cp["components"]}
    plain = {c["part"]: c for c in alone["components"]}
    assert parts["linears"]["bf16_s"] == pytest.approx(plain["linears"]["bf16_s"], rel=0.02)
    nbytes = 16384 * 1024 * 2 * 2
    gather = 35e-6 + nbytes / 2 / 370e9
    assert parts["CP collectives"]["bf16_s"] == pytest.approx(32 * 3 * gather, rel=1e-3)
    assert parts["CP collectives"]["fp8_s"] == parts["CP collectives"]["bf16_s"]
    assert "CP collectives" not in plain


def test_context_parallel_from_a_setup(tmp_path):
    path = tmp_path / "cp.toml"
    out = tmp_path / "cp.json"

    def setup(extra: str) -> str:
        return SETUP.replace("pipeline_parallel_degree = 4", "context_parallel_degree = 2").format(
            extra=extra
        )

    results = {}
    for rotate in ("allgather", "alltoall"):
        path.write_text(setup(f'context_parallel_rotate_method = "{rotate}"\n'))
        result = invoke_cli("estimate", "--setup", str(path), "--out", str(out))
        assert result.exit_code == 0, result.output
        parts = {c["part"]: c for c in json.loads(out.read_text())["summary"]["components"]}
        results[rotate] = parts["CP collectives"]["bf16_s"]
    # the ring passes each shard beside the attention of the one before it
    assert results["alltoall"] < results["allgather"]
    path.write_text(setup("").replace("seq_len = 8192", "seq_len = 8200"))
    refused = invoke_cli("estimate", "--setup", str(path))
    assert refused.exit_code == 2, refused.output
    assert "does not split into 2 x" in refused.output


def test_context_parallel_memory_is_a_rank_share_and_the_gathered_keys():
    # CP 2 x FSDP 4 over 16384 tokens holds what FSDP 8 over 8192 does (the same shards, the
    # same tokens a rank), and without recompute SDPA's keys and values gathered from the other
    # rank: 32 blocks x 8192 tokens x (k and v: 1024 wide) x bf16
    from f8roof.training.catalog import builtin
    from f8roof.training.checkpointing import Recompute
    from f8roof.training.memory import Term, memory_estimate

    def peak(run):
        return memory_estimate(
            builtin("llama3-8b"),
            tokens=8192,
            run=run,
            recipe="tensorwise",
            converted=(),
            gpu_memory_bytes=2**40,
        ).bf16

    for mode, extra in ((Recompute.SELECTIVE, 0), (Recompute.NONE, 32 * 8192 * 2048 * 2)):
        cp = peak(RunConfig(fsdp=4, cp=2, seq_len=8192, recompute=mode))
        alone = peak(RunConfig(fsdp=8, seq_len=8192, recompute=mode))
        assert cp.bytes_of(Term.PARAMETERS) == alone.bytes_of(Term.PARAMETERS)
        saved = cp.bytes_of(Term.SAVED_ACTIVATIONS) - alone.bytes_of(Term.SAVED_ACTIVATIONS)
        assert saved == pytest.approx(extra, abs=1)
