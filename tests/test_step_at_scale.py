"""The step at training scale through `f8roof estimate`: every part modelled, full AC and
async TP timed from the shipped block graphs, FSDP2's schedule as torchtitan sets it up, a
measured step reconciled, float8 all-gather as a flag and as a suggestion."""

import json

import pytest
from conftest import invoke_cli

LLAMA70 = """[model]
name = "llama3"
flavor = "70B"
converters = ["float8"]
[training]
local_batch_size = 1
seq_len = 8192
compile = true
{training}
[parallelism]
data_parallel_shard_degree = 16
tensor_parallel_degree = 8
{parallelism}
[activation_checkpoint]
mode = "full"
[float8]
filter_fqns = ["output"]
[f8roof]
gpu = "h100"
"""


def summary_of(tmp_path, text, *args, name="s"):
    setup = tmp_path / f"{name}.toml"
    setup.write_text(text)
    out = tmp_path / f"{name}.json"
    result = invoke_cli("estimate", "--setup", str(setup), "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["summary"]


def setup(training="", parallelism=""):
    return LLAMA70.format(training=training, parallelism=parallelism)


def part(summary, name):
    return next(c for c in summary["components"] if c["part"] == name)


def test_full_ac_comes_from_the_block_graphs_with_their_forward_rerun(tmp_path):
    s = summary_of(tmp_path, setup())
    topics = {n["topic"] for n in s["notes"]}
    assert {"blocks_from", "full_ac_graphs", "outside_blocks"} <= topics
    origin = next(n["values"] for n in s["notes"] if n["topic"] == "blocks_from")
    assert origin["block"]["recompute"] == "none" and not origin["compiled"]
    # the forward again: recompute is most of a forward, linears included
    assert part(s, "recompute")["bf16_s"] > 0.25 * part(s, "linears")["bf16_s"]


def test_the_parts_add_up_to_the_modelled_step_with_optimizer_embedding_and_loss(tmp_path):
    s = summary_of(tmp_path, setup())
    assert not s["step_measured"] and s["reconciliation"] is None
    assert sum(c["bf16_s"] for c in s["components"]) == pytest.approx(s["bf16_s"])
    assert sum(c["fp8_s"] for c in s["components"]) == pytest.approx(s["fp8_s"])
    assert part(s, "optimizer step and gradient clipping")["bf16_s"] > 0
    assert part(s, "embedding, final norm and loss")["bf16_s"] > 0


def test_a_measured_step_far_from_the_model_is_reconciled_not_refused(tmp_path):
    modelled = summary_of(tmp_path, setup(), name="m")
    for step_ms in (round(0.5 * modelled["bf16_s"] * 1e3), round(3 * modelled["bf16_s"] * 1e3)):
        s = summary_of(tmp_path, setup(), "--step-ms", str(step_ms), name="x")
        rec = s["reconciliation"]
        assert s["bf16_s"] == pytest.approx(step_ms / 1e3)
        assert rec["modelled_s"] == pytest.approx(modelled["bf16_s"])
        assert s["speedup"] == pytest.approx(modelled["speedup"])
        assert s["speedup_low"] <= s["speedup"] <= s["speedup_high"]


def test_a_bf16_reduce_scatter_and_hsdp_move_fsdp_as_torchtitan_sets_them(tmp_path):
    fp32 = summary_of(tmp_path, setup(), name="fp32")
    bf16 = summary_of(tmp_path, setup(training='mixed_precision_reduce = "bfloat16"'), name="b")
    hsdp = summary_of(tmp_path, setup(parallelism="data_parallel_replicate_degree = 4"), name="h")
    fsdp = {
        k: part(v, "FSDP collectives")["bf16_s"]
        for k, v in (("fp32", fp32), ("bf16", bf16), ("hsdp", hsdp))
    }
    assert fsdp["bf16"] < fsdp["fp32"] < fsdp["hsdp"]
    said = next(n["values"] for n in hsdp["notes"] if n["topic"] == "fsdp_schedule")
    assert said["replicate"] == 4 and said["reduce_dtype"] == "float32"


def test_never_resharding_exposes_no_more_than_the_default(tmp_path):
    default = summary_of(tmp_path, setup(), name="d")
    never = summary_of(
        tmp_path, setup(parallelism='fsdp_reshard_after_forward = "never"'), name="n"
    )
    assert part(never, "FSDP collectives")["bf16_s"] <= part(default, "FSDP collectives")["bf16_s"]


def test_fsdp_copies_each_gather_into_the_unsharded_parameters_on_the_compute_stream(tmp_path):
    # llama3-8b FSDP 8, 8192 tokens per GPU: the gathers hide behind the blocks, but FSDP2
    # copies each gathered block (218.1M bf16 parameters, 436 MB) into the unsharded
    # parameters on the compute stream, reading and writing it, in the forward and again in
    # the backward (resharded after forward): 32 x 2 x 2 x 436 MB = 55.8 GB, at least 16.7 ms
    # at the h100's 3.35 TB/s; at most 2.2x that at its kernels' streaming rate
    args = ("--model", "llama3-8b", "--tokens", "8192", "--fsdp", "8", "--gpu", "h100")
    out = tmp_path / "fsdp.json"
    assert invoke_cli("estimate", *args, "--out", str(out)).exit_code == 0
    s = json.loads(out.read_text())["summary"]
    copy_s = 32 * 2 * 2 * 218_112_000 * 2 / 3.35e12
    assert copy_s < part(s, "FSDP collectives")["bf16_s"] < 2.2 * copy_s
    assert part(s, "FSDP collectives")["fp8_s"] == part(s, "FSDP collectives")["bf16_s"]


def test_an_unknown_reduce_dtype_is_one_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(setup(training='mixed_precision_reduce = "float16"'))
    result = invoke_cli("estimate", "--setup", str(path))
    assert result.exit_code == 2
    assert "'mixed_precision_reduce' = 'float16'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_slower_network_exposes_more_of_fsdp(tmp_path):
    args = ("--model", "llama3-8b", "--tokens", "2048", "--fsdp", "64", "--gpu", "h100")
    fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
    assert invoke_cli("estimate", *args, "--out", str(fast)).exit_code == 0
    result = invoke_cli("estimate", *args, "--network", "100", "--out", str(slow))
    assert result.exit_code == 0, result.output
    fast, slow = (json.loads(p.read_text())["summary"] for p in (fast, slow))
    assert part(slow, "FSDP collectives")["bf16_s"] > part(fast, "FSDP collectives")["bf16_s"]


def test_float8_all_gather_is_a_flag_and_suggested_where_it_helps(tmp_path):
    args = ("--model", "llama3-70b", "--tokens", "8192", "--fsdp", "64", "--recompute", "full")
    out = tmp_path / "plain.json"
    plain = invoke_cli("estimate", *args, "--out", str(out))
    assert plain.exit_code == 0, plain.output
    assert "with FSDP2's float8 all-gather: x" in plain.output
    suggested = json.loads(out.read_text())["summary"]["float8_all_gather"]
    on = tmp_path / "on.json"
    flagged = invoke_cli("estimate", *args, "--float8-all-gather", "--out", str(on))
    assert flagged.exit_code == 0, flagged.output
    assert "with FSDP2's float8 all-gather" not in flagged.output  # already on
    gathered = json.loads(on.read_text())["summary"]
    assert gathered["speedup"] == pytest.approx(suggested["speedup"])
    assert gathered["speedup"] > json.loads(out.read_text())["summary"]["speedup"]
    alone = invoke_cli(
        "estimate", "--model", "llama3-8b", "--tokens", "8192", "--float8-all-gather"
    )
    assert alone.exit_code == 2 and "needs --fsdp" in alone.output


def test_the_per_layer_path_casts_a_shared_input_once(tmp_path):
    """qwen2.5-7b has no shipped block: its step sums the per-layer rows, where q, k and v
    (gate and up) each cast the norm's output; the step charges that cast once."""
    out = tmp_path / "qwen.json"
    args = ("--model", "qwen2.5-7b", "--tokens", "8192", "--tp", "2", "--fsdp", "8")
    result = invoke_cli("estimate", *args, "--recompute", "full", "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    s = doc["summary"]
    assert "shared_input_cast" in {n["topic"] for n in s["notes"]}
    rows = [r for r in doc["layers"] if r["fqn"] != "lm_head"]
    summed = sum(r["count"] * (r["fp8_s"] - r["recompute_fp8_s"]) for r in rows)
    head = next(r for r in doc["layers"] if r["fqn"] == "lm_head")
    linears = part(s, "linears")["fp8_s"] - head["bf16_s"]  # output stays bf16 as run
    assert linears < 0.98 * summed  # the casts saved, not rounding


@pytest.mark.parametrize(
    "model, tp, fsdp",
    [
        ("llama3-405b", 8, 64),
        ("llama3-405b", 4, 64),
        ("llama3-405b", 2, 128),
        ("llama3-70b", 4, 32),
        ("llama3-8b", 4, 2),
    ],
)
def test_the_llama3_sizes_at_tp_2_4_8_take_their_blocks_from_graphs(tmp_path, model, tp, fsdp):
    out = tmp_path / "s.json"
    args = ("--model", model, "--tokens", "8192", "--tp", str(tp), "--fsdp", str(fsdp))
    result = invoke_cli("estimate", *args, "--recompute", "full", "--out", str(out))
    assert result.exit_code == 0, result.output
    notes = json.loads(out.read_text())["summary"]["notes"]
    origin = next(n["values"] for n in notes if n["topic"] == "blocks_from")
    assert origin["block"]["tp"] == tp and origin["block"]["architecture"] == model


@pytest.mark.slow
def test_a_compiled_block_is_kept_and_read_back_not_compiled_again(tmp_path, monkeypatch):
    from f8roof.engine import sharded
    from f8roof.training.run_config import RunConfig

    monkeypatch.setenv("F8ROOF_CACHE", str(tmp_path))
    run = RunConfig.from_options(tp=2)
    kw = {"tokens": 1024, "recipe": "tensorwise", "run": run, "gpu": "h100"}
    first = sharded.compiled_block("llama3-8b", **kw)
    (kept,) = (tmp_path / "blocks").glob("*.json")

    def no_compile(**_):
        raise AssertionError("compiled again")

    monkeypatch.setattr(sharded, "compare_block", no_compile)
    again = sharded.compiled_block("llama3-8b", **kw)
    assert again.float8.to_dict() == first.float8.to_dict() and again.origin == first.origin
    # another case is another entry; a damaged entry is compiled again, not trusted
    assert sharded.block_cache_path("llama3-8b", {"tokens": 2048}) != kept
    kept.write_text("{")
    with pytest.raises(AssertionError, match="compiled again"):
        sharded.compiled_block("llama3-8b", **kw)
    monkeypatch.setenv("F8ROOF_CACHE", "off")
    assert sharded.block_cache_path("llama3-8b", {"tokens": 1024}) is None


def test_a_block_counted_by_other_rules_is_not_read_back(tmp_path, monkeypatch):
    # the cache key holds the counting code's digest: a checkout that counts arithmetic
    # otherwise (a bitcast, a row's value) finds no entry and compiles again
    from f8roof.engine import sharded

    monkeypatch.setenv("F8ROOF_CACHE", str(tmp_path))
    now = sharded.block_cache_path("llama3-8b", {"tokens": 1024})
    monkeypatch.setattr(sharded, "_counting_digest", lambda: "counted otherwise")
    assert sharded.block_cache_path("llama3-8b", {"tokens": 1024}) != now


def test_a_recipe_without_float8_graphs_says_only_its_float8_side_is_per_layer():
    """B200's MXFP8 has no shipped float8 block: the bf16 graphs time the blocks, float8 moves
    them by the per-layer rows, and the notes say so rather than 'blocks from the per-layer
    fits'."""
    result = invoke_cli(
        "estimate", "--gpu", "b200", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "8",
        "--recipe", "mxfp8", "--show-all",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "no float8 graphs: no shipped sharded block for llama3-8b" in result.output
    assert "float8 blocks are those graphs plus each linear's per-layer difference" in result.output
    assert "blocks from the per-layer fits" not in result.output


def test_expert_parallelism_moves_the_experts_split_and_adds_its_all_to_alls():
    """torchtitan's EP borrows its ranks from data_parallel_shard: a GPU holds the same share
    of every weight at EP 1 and EP 8, and EP adds its dispatch and combine all-to-alls, four a
    MoE layer (six under full AC), of tokens x top_k x hidden bf16, the same in both
    precisions."""
    from f8roof.engine.answer import Question, answer
    from f8roof.engine.resolve import Request
    from f8roof.engine.step.parts import Part
    from f8roof.timing.comm import collective_time_s, find_interconnect
    from f8roof.training.run_config import RunConfig

    def step(ep):
        run = RunConfig.from_options(fsdp=8, ep=ep, recompute="full")
        question = Question(model="qwen3-30b-a3b", tokens=8192)
        return answer(question, Request(gpu="h100", recipes="rowwise"), setup=run)

    one, eight = step(1), step(8)
    params = [
        next(n for n in a.summary.notes if n.topic.value == "outside_blocks")["params_per_gpu"]
        for a in (one, eight)
    ]
    assert params[0] == pytest.approx(params[1], rel=1e-9)
    assert Part.EP_COMM not in {c.part for c in one.summary.components}
    ep = eight.summary.part(Part.EP_COMM)
    assert ep.bf16_s == ep.fp8_s > 0
    # 48 MoE layers, each 4 + 2 (full AC) all-to-alls of 8192 x 8 x 2048 bf16 on NVLink
    a2a = float(
        collective_time_s(
            "all_to_all",
            nbytes=8192 * 8 * 2048 * 2,
            group_size=8,
            placement="intra",
            fabric=find_interconnect("h100"),
        )
    )
    assert ep.bf16_s == pytest.approx(48 * 6 * a2a, rel=1e-9)
