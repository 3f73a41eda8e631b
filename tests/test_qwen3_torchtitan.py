"""Qwen3 dense and MoE as torchtitan builds them: rows named by torchtitan's modules (its
qwen3 at pytorch/torchtitan@b64292ba1, 2026-05-15), the filter it reads printed in those
names, and an MoE step's expert parallelism and grouped gemms per recipe."""

import pytest
from conftest import invoke_cli

from f8roof.engine.answer import Question, answer
from f8roof.engine.plan import torchtitan_config
from f8roof.engine.resolve import Request
from f8roof.engine.step.conversion import kept_by_setup
from f8roof.engine.step.parts import Part
from f8roof.training.run_config import RunConfig

# torchtitan's qwen3 block (torchtitan/models/qwen3/__init__.py, models/common/attention.py at
# b64292ba1): QKVLinear's wq, wk and wv, wo, FeedForward's w1, w3 and w2, then lm_head
DENSE = [
    "attention.qkv_linear.wq",
    "attention.qkv_linear.wk",
    "attention.qkv_linear.wv",
    "attention.wo",
    "feed_forward.w1",
    "feed_forward.w3",
    "feed_forward.w2",
    "lm_head",
]


@pytest.mark.parametrize("model", ["qwen3-8b", "qwen3-14b", "qwen3-32b"])
def test_a_qwen3_answer_names_its_rows_as_torchtitans_modules(model):
    result = invoke_cli(
        "estimate", "--model", model, "--gpu", "b200", "--fsdp", "8", "--tokens", "16384"
    )
    assert result.exit_code == 0, result.output
    table = result.output.split("\n\n")[0].splitlines()[2:]
    assert [line.split()[0] for line in table] == DENSE
    assert "self_attn" not in result.output and "q_proj" not in result.output


def test_qwen3_moe_rows_are_torchtitans_attention_and_grouped_experts():
    result = invoke_cli(
        "estimate", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--fsdp", "8", "--ep", "8",
        "--tokens", "16384", "--recipe", "rowwise",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = result.output.split("\n\n")[0].splitlines()[2:]
    experts = ["moe.experts.w1", "moe.experts.w3", "moe.experts.w2"]
    assert [line.split()[0] for line in table] == DENSE[:4] + experts + ["lm_head"]


def _answer(model, recipe, *, tokens=8192, ep=1, fsdp=8, filters=None):
    run = RunConfig.from_options(fsdp=fsdp, ep=ep, filter_fqns=filters)
    question = Question(model=model, tokens=tokens)
    return answer(question, Request(gpu="b200", recipes=recipe), setup=run)


def test_the_public_b200_runs_filter_keeps_k_and_v_and_prints_in_torchtitans_names():
    """The public Qwen3-14B run on 8 B200s filters ["lm_head", "attention.qkv_linear.wkv"]:
    q, o and the MLP convert, k and v (both built from `wkv`) and lm_head stay bf16, and the
    printed converter config says the same entries back."""
    got = _answer(
        "qwen3-14b", "rowwise", tokens=16384, filters=("lm_head", "attention.qkv_linear.wkv")
    )
    rec = got.recommendation
    kept = {str(f) for f, k in zip(rec.rows["fqn"], kept_by_setup(rec)) if k}
    qkv = "layers.*.attention.qkv_linear"
    assert kept == {f"{qkv}.wk", f"{qkv}.wv", "lm_head"}
    config = torchtitan_config(rec)
    assert config.filter_fqns[:2] == ("lm_head", "attention.qkv_linear.wkv")
    assert all(not f.startswith(("output", "model.", "self_attn")) for f in config.filter_fqns)


def test_a_qwen3_moe_filter_keeps_the_router_gate_as_torchtitan_names_it():
    config = torchtitan_config(_answer("qwen3-30b-a3b", "rowwise", ep=8).recommendation)
    assert "router.gate" in config.filter_fqns  # layers.N.moe.router.gate, an nn.Linear config


def test_the_ep_all_to_alls_carry_tokens_x_top_k_x_hidden_bf16_under_every_recipe():
    """EP 8 over Qwen3-30B-A3B (hidden 2048, top 8): each all-to-all carries the rank's tokens x
    8 x 2048 bf16 whatever the recipe (torchtitan's float8 and MXFP8 grouped-experts converters
    keep its bf16 all-to-all), so the part doubles with the tokens and is the same in both
    precisions; without EP there is none."""
    parts = {}
    for recipe in ("rowwise", "mxfp8"):
        for tokens in (8192, 16384):
            got = _answer("qwen3-30b-a3b", recipe, tokens=tokens, ep=8)
            part = got.summary.part(Part.EP_COMM)
            said = next(n for n in got.summary.notes if n.topic.value == "ep_all_to_all")
            assert said["mb"] == pytest.approx(tokens * 8 * 2048 * 2 / 1e6, rel=1e-9)
            assert part.bf16_s == part.fp8_s > 0
            parts[recipe, tokens] = part.bf16_s
    assert parts["rowwise", 8192] == parts["mxfp8", 8192]
    assert parts["rowwise", 16384] > 1.5 * parts["rowwise", 8192]  # bandwidth-bound: ~2x
    none = _answer("qwen3-30b-a3b", "rowwise", ep=1)
    assert Part.EP_COMM not in {c.part for c in none.summary.components}


def test_the_grouped_experts_are_timed_per_recipe_and_alike_in_bf16():
    """The routed experts' grouped gemm: torchao's float8 rowwise `_scaled_grouped_mm` and its
    MXFP8 grouped gemm are different kernels (per-row float8 scales vs 1x32 blocks), so their
    float8 times differ while the bf16 grouped gemm they replace is one and the same."""
    times = {}
    for recipe in ("rowwise", "mxfp8"):
        rows = _answer("qwen3-30b-a3b", recipe, ep=8).recommendation.rows
        grouped = rows["grouped"].astype(bool)
        assert [str(f) for f in rows["fqn"][grouped]] == [
            "layers.*.moe.experts.w1",
            "layers.*.moe.experts.w3",
            "layers.*.moe.experts.w2",
        ]
        times[recipe] = (rows["bf16_s"][grouped].tolist(), rows["fp8_s"][grouped].tolist())
    assert times["rowwise"][0] == times["mxfp8"][0]
    assert all(a != b for a, b in zip(times["rowwise"][1], times["mxfp8"][1]))
