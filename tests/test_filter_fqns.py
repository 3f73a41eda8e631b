"""torchtitan's filter rule from the command line (`--filter-fqns`) and in setup files: rows
split where filters name some blocks, and the step as torchtitan would convert."""

import random
from dataclasses import replace

import pytest
from conftest import invoke_cli

from f8roof.engine.answer import Question, answer
from f8roof.engine.plan import torchtitan_config
from f8roof.engine.resolve import Request
from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.training.catalog import BUILTIN_NAMES, builtin
from f8roof.training.run_config import RunConfig
from f8roof.training.setup_file import parse_setup, training_setup
from f8roof.training.torchtitan_names import (
    expand_filters,
    filtered,
    layer_type,
    printed_filters,
    split_by_filters,
    to_torchtitan_fqn,
    torchtitan_model,
    unmatched_filters,
)

Q_PROJ = "model.layers.*.self_attn.q_proj"


def test_a_filter_naming_blocks_splits_a_layer_type_into_runs():
    tail = [f"layers.{i}." for i in range(27, 32)]
    assert split_by_filters(Q_PROJ, 32, tail) == [
        ("model.layers.0-26.self_attn.q_proj", 27),
        ("model.layers.27-31.self_attn.q_proj", 5),
    ]
    # `layers.1.` is block 1 alone: torchtitan's trailing dot keeps layers.10-19 out
    assert split_by_filters(Q_PROJ, 32, ["layers.1."]) == [
        ("model.layers.0.self_attn.q_proj", 1),
        ("model.layers.1.self_attn.q_proj", 1),
        ("model.layers.2-31.self_attn.q_proj", 30),
    ]
    # without the dot it is a substring of layers.10-19 too, as in torchtitan
    assert [c for _, c in split_by_filters(Q_PROJ, 32, ["layers.1"])] == [1, 1, 8, 10, 12]
    assert split_by_filters(Q_PROJ, 32, ["attention.wk", "output"]) == [(Q_PROJ, 32)]
    assert split_by_filters("lm_head", 1, ["layers.1."]) == [("lm_head", 1)]


def test_a_split_row_is_filtered_as_its_blocks_are():
    assert filtered("model.layers.27-31.self_attn.q_proj", ["layers.27.", "layers.31."]) is False
    tail = [f"layers.{i}." for i in range(27, 32)]
    assert filtered("model.layers.27-31.self_attn.q_proj", tail)
    assert filtered("model.layers.3.mlp.up_proj", ["layers.3.feed_forward.w3"])
    assert not filtered(Q_PROJ, ["layers.3."], count=32)
    assert layer_type("model.layers.27-31.mlp.up_proj") == "model.layers.*.mlp.up_proj"


def test_torchtitans_nvfp4_bf16_tail_is_the_last_15_percent_and_output():
    # torchtitan's llama3_8b_nvfp4_mixed: layers 0-26 NVFP4, 27-31 and the LM head bf16
    assert expand_filters(["nvfp4_bf16_tail"], blocks=32) == (
        *(f"layers.{i}." for i in range(27, 32)),
        "output",
    )
    # Qwen3 8B, 36 blocks: 30-35 stay bf16 (ceil(5.4) = 6)
    assert expand_filters(["nvfp4_bf16_tail", "output"], blocks=36)[0] == "layers.30."
    with pytest.raises(F8RoofError, match="keeps all 1 blocks"):
        expand_filters(["nvfp4_bf16_tail"], blocks=1)


def _as_run(filters, model="llama3-8b", gpu="h100", recipe="tensorwise"):
    run = replace(RunConfig(), filter_fqns=filters)
    request = Request(gpu=gpu, recipes=recipe)
    return answer(Question(model=model, tokens=8192), request, setup=run)


def test_the_step_splits_in_proportion_to_the_blocks_filters_keep():
    none, half, every = (
        _as_run(f).summary
        for f in (
            ("output",),
            ("output", *(f"layers.{i}." for i in range(16, 32))),
            ("output", "layers."),
        )
    )
    assert none.bf16_s == pytest.approx(half.bf16_s) == pytest.approx(every.bf16_s)
    assert half.fp8_s == pytest.approx((none.fp8_s + every.fp8_s) / 2, rel=1e-9)
    assert every.fp8_s == pytest.approx(every.bf16_s)


def test_the_tail_written_out_and_named_answer_the_same():
    # the NVFP4 configs' tail, which torchtitan#3914 kept for MXFP8 too
    named = _as_run(("nvfp4_bf16_tail",), gpu="b200", recipe="mxfp8")
    spelled = _as_run(
        tuple(f"layers.{i}." for i in range(27, 32)) + ("output",), gpu="b200", recipe="mxfp8"
    )
    assert named.summary.fp8_s == pytest.approx(spelled.summary.fp8_s)
    assert list(named.recommendation.layers["count"])[:2] == [27, 5]


SETUP = """
[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]
[training]
local_batch_size = 1
seq_len = 8192
[parallelism]
data_parallel_shard_degree = 8
[float8]
recipe_name = "rowwise"
filter_fqns = ["output", "layers.31."]
"""


def test_a_setup_files_filters_split_rows_by_the_same_rule(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(SETUP)
    result = invoke_cli("estimate", "--setup", path, "--gpu", "h100")
    assert result.exit_code == 0, result.output
    assert "layers.0-30.mlp.up_proj" in result.output
    assert "layers.31.mlp.up_proj" in result.output
    run = training_setup(parse_setup(SETUP))
    assert run.filter_fqns == ("output", "layers.31.")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", "64,64,64", "--filter-fqns", "output"], "--filter-fqns go with --model"),
        (["--setup", "x.toml", "--filter-fqns", "output"], "drop --filter-fqns"),
    ],
)
def test_filter_fqns_where_it_does_not_belong_is_one_line(args, message, tmp_path):
    (tmp_path / "x.toml").write_text(SETUP)
    args = [str(tmp_path / a) if a == "x.toml" else a for a in args]
    result = invoke_cli("estimate", *args)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and message in result.output


def test_the_cli_shows_split_rows_and_the_tail():
    result = invoke_cli(
        "estimate",
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--gpu",
        "b200",
        "--recipe",
        "mxfp8",
        "--filter-fqns",
        "nvfp4_bf16_tail",
    )
    assert result.exit_code == 0, result.output
    assert "layers.0-26.mlp.down_proj" in result.output
    assert "layers.27-31.mlp.down_proj" in result.output
    assert "all but\n  layers.27." in result.output or "all but layers.27." in result.output


# --- torchtitan's names per model and the printed filter_fqns ----------------------------------


def torchtitan_keeps(module_fqn: str, filter_fqns) -> bool:
    """torchtitan's module_filter_fn, its filter part (pytorch/torchtitan@238fa9953
    torchtitan/components/quantization/utils.py): `any(filter_fqn in fqn ...)`."""
    return any(entry in module_fqn for entry in filter_fqns)


def module_fqns(fqn: str, count: int, family: str) -> list[str]:
    """The modules a row stands for, as torchtitan names them (Hugging Face's names where
    torchtitan has no model), one per block of the row."""
    if torchtitan_model(family) is None:
        return [fqn] if "*" not in fqn else [fqn.replace("*", str(i), 1) for i in range(count)]
    name = to_torchtitan_fqn(fqn, family)
    return [name] if "*" not in name else [name.replace("*", str(i)) for i in range(count)]


TORCHTITAN_OF = {
    "llama3-8b": "llama3",
    "llama3-70b": "llama3",
    "llama3-405b": "llama3",
    "qwen3-8b": "qwen3",
    "qwen3-14b": "qwen3",
    "qwen3-32b": "qwen3",
    "qwen3-30b-a3b": "qwen3",
    "qwen3-235b-a22b": "qwen3",
    "llama4-scout": "llama4",
    "llama4-maverick": "llama4",
    "deepseek-v3": "deepseek_v3",
    "deepseek-v2-lite": "deepseek_v3",
    # torchtitan has no Mistral, Qwen2, GPT-2 or Mixtral model (torchtitan/models/__init__.py)
    "mistral-7b": None,
    "qwen2.5-7b": None,
    "gpt2": None,
    "mixtral-8x7b": None,
}


def test_every_catalog_model_has_torchtitans_names_or_says_it_has_none():
    assert set(TORCHTITAN_OF) == set(BUILTIN_NAMES)
    for name, expected in TORCHTITAN_OF.items():
        arch = builtin(name)
        model = torchtitan_model(arch.family)
        assert (model.name if model else None) == expected, name
        if model is not None:  # every linear named, routed experts as GroupedExperts' w1/w2/w3
            for linear in arch.linears:
                theirs = to_torchtitan_fqn(linear.fqn, arch.family)
                assert theirs.startswith("layers.*.") or theirs == model.head, theirs
                assert ("moe.experts." in theirs) == linear.grouped, theirs


def _round_trip(name: str, converts) -> None:
    """The printed filter, through torchtitan's rule, keeps exactly the linears not converted."""
    arch = builtin(name)
    rows = arch.linears
    printed = printed_filters(
        [r.fqn for r in rows],
        [r.count for r in rows],
        converts,
        [r.grouped for r in rows],
        family=arch.family,
    )
    for row, convert in zip(rows, converts):
        if row.grouped:
            continue  # 3D parameters: the linear converter never converts them
        modules = module_fqns(row.fqn, row.count, arch.family)
        kept = [torchtitan_keeps(m, printed.filter_fqns) for m in modules]
        assert kept == [not convert] * len(modules), (name, row.fqn, printed.filter_fqns)
        assert (row.fqn in printed.kept) == (not convert)
    assert not any(n.topic is Topic.FILTER_INEXACT for n in printed.notes)
    if arch.is_moe and torchtitan_model(arch.family) is not None:
        # the router (not a row) stays bf16, as torchtitan's MoE configs keep it
        assert torchtitan_keeps("layers.3.moe.router.gate", printed.filter_fqns)


def _as_torchtitan_decides(name: str, converts: list[bool]) -> list[bool]:
    """Rows one torchtitan config builds (qwen3's k and v, both of QKVLinear's `wkv`) take
    the first one's decision: torchtitan's converter swaps configs, so it has no other."""
    arch = builtin(name)
    if torchtitan_model(arch.family) is None:
        return converts
    first: dict[str, bool] = {}
    return [
        first.setdefault(to_torchtitan_fqn(row.fqn, arch.family), convert)
        for row, convert in zip(arch.linears, converts)
    ]


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_the_printed_filter_keeps_exactly_what_any_decision_keeps(name):
    rows = builtin(name).linears
    rng = random.Random(name)
    patterns = [[True] * len(rows), [False] * len(rows)]
    patterns += [[i != j for i in range(len(rows))] for j in range(len(rows))]  # one kept
    patterns += [[rng.random() < 0.5 for _ in rows] for _ in range(20)]
    for converts in patterns:
        _round_trip(name, _as_torchtitan_decides(name, converts))


def test_qwen3s_k_and_v_are_kept_together_since_one_config_builds_both():
    """torchtitan's qwen3 builds `wk` and `wv` from QKVLinear's one `wkv` config and filters
    configs: keeping v alone cannot be said, so both stay bf16 and a note says so; keeping
    both prints the public B200 run's own entry, `attention.qkv_linear.wkv`."""
    arch = builtin("qwen3-14b")
    fqns = [r.fqn for r in arch.linears]
    wk = fqns.index("layers.*.attention.qkv_linear.wk")
    wv = fqns.index("layers.*.attention.qkv_linear.wv")

    def printed(kept):
        converts = [i not in kept for i in range(len(fqns))]
        counts = [r.count for r in arch.linears]
        return printed_filters(fqns, counts, converts, [False] * len(fqns), family="qwen3")

    both = printed({wk, wv})
    assert both.filter_fqns == ("attention.qkv_linear.wkv",)
    assert set(both.kept) == {fqns[wk], fqns[wv]} and not both.notes
    alone = printed({wv})
    assert set(alone.kept) == {fqns[wk], fqns[wv]}
    assert [n.topic for n in alone.notes] == [Topic.FILTER_INEXACT]


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_an_answers_printed_filter_keeps_exactly_its_bf16_rows(name):
    run = replace(RunConfig(), filter_fqns=("output",))
    got = answer(Question(model=name, tokens=8192), Request(gpu="h100"), setup=run)
    rec = got.recommendation
    config = torchtitan_config(rec)
    family = rec.architecture.family
    rows = rec.rows
    for fqn, count, convert, grouped in zip(
        rows["fqn"], rows["count"], rows["convert"], rows["grouped"]
    ):
        if grouped:
            continue
        keeps = {torchtitan_keeps(m, config.filter_fqns) for m in module_fqns(fqn, count, family)}
        # the setup's own "output" keeps lm_head whatever f8roof decides
        assert keeps == {fqn == "lm_head" or not convert}, (fqn, config.filter_fqns)
    if rec.architecture.is_moe:
        assert any(n.topic is Topic.TORCHTITAN_EXPERTS for n in config.notes)
    if torchtitan_model(family) is None:
        assert any(n.topic is Topic.TORCHTITAN_NO_MODEL for n in config.notes)


def test_the_deepseek_16b_answer_filters_its_mla_projections_by_torchtitans_names():
    """DeepSeek-V2-Lite's kv_a_proj_with_mqa (N = 512 + 64) is too thin for float8 to pay: the
    printed filter keeps it as torchtitan names it (attention.wkv_a), where it used to print
    llama's names alone and leave it to convert."""
    run = replace(RunConfig(), filter_fqns=())
    got = answer(Question(model="deepseek-v3-16b", tokens=8192), Request(gpu="h100"), setup=run)
    config = torchtitan_config(got.recommendation)
    assert "attention.wkv_a" in config.filter_fqns and "router.gate" in config.filter_fqns
    assert not torchtitan_keeps("layers.5.attention.wkv_b", ["attention.wkv_a"])


# torchtitan's modules written out from its source (pytorch/torchtitan@238fa9953
# torchtitan/models/deepseek_v3/model/model.py and qwen3/model/model.py, models/moe/moe.py):
# each f8roof row -> the nn.Linear modules of torchtitan's it stands for
DEEPSEEK_16B = {  # "16B": q_lora_rank 0, n_dense_layers 1, 27 blocks
    "model.layers.*.self_attn.q_proj": [f"layers.{i}.attention.wq" for i in range(27)],
    "model.layers.*.self_attn.kv_a_proj_with_mqa": [
        f"layers.{i}.attention.wkv_a" for i in range(27)
    ],
    "model.layers.*.self_attn.kv_b_proj": [f"layers.{i}.attention.wkv_b" for i in range(27)],
    "model.layers.*.self_attn.o_proj": [f"layers.{i}.attention.wo" for i in range(27)],
    "model.layers.*.mlp.gate_proj": ["layers.0.feed_forward.w1"],
    "model.layers.*.mlp.up_proj": ["layers.0.feed_forward.w3"],
    "model.layers.*.mlp.down_proj": ["layers.0.feed_forward.w2"],
    "model.layers.*.mlp.shared_experts.gate_proj": [
        f"layers.{i}.moe.shared_experts.w1" for i in range(1, 27)
    ],
    "model.layers.*.mlp.shared_experts.up_proj": [
        f"layers.{i}.moe.shared_experts.w3" for i in range(1, 27)
    ],
    "model.layers.*.mlp.shared_experts.down_proj": [
        f"layers.{i}.moe.shared_experts.w2" for i in range(1, 27)
    ],
    "lm_head": ["output"],
}
# torchtitan's qwen3 at pytorch/torchtitan@b64292ba1 (2026-05-15; torchtitan/models/qwen3/
# __init__.py, models/common/attention.py): the config fqns its float8 converter filters, k and
# v both QKVLinear's `wkv`
QKV = "layers.*.attention.qkv_linear"
QWEN3_30B = {  # "30B-A3B": every block MoE, no shared experts, 48 blocks
    f"{QKV}.wq": [f"layers.{i}.attention.qkv_linear.wq" for i in range(48)],
    f"{QKV}.wk": [f"layers.{i}.attention.qkv_linear.wkv" for i in range(48)],
    f"{QKV}.wv": [f"layers.{i}.attention.qkv_linear.wkv" for i in range(48)],
    "layers.*.attention.wo": [f"layers.{i}.attention.wo" for i in range(48)],
    "lm_head": ["lm_head"],
}


@pytest.mark.parametrize(
    "name, modules, moe_blocks",
    [("deepseek-v2-lite", DEEPSEEK_16B, range(1, 27)), ("qwen3-30b-a3b", QWEN3_30B, range(48))],
)
def test_the_printed_filter_against_torchtitans_modules_from_its_source(name, modules, moe_blocks):
    arch = builtin(name)
    linears = [r for r in arch.linears if not r.grouped]
    assert {r.fqn for r in linears} == set(modules)
    routers = [f"layers.{i}.moe.router.gate" for i in moe_blocks]
    rng = random.Random(7)
    for _ in range(30):
        converts = _as_torchtitan_decides(name, [rng.random() < 0.5 for _ in arch.linears])
        printed = printed_filters(
            [r.fqn for r in arch.linears],
            [r.count for r in arch.linears],
            converts,
            [r.grouped for r in arch.linears],
            family=arch.family,
        )
        for row, convert in zip(arch.linears, converts):
            if not row.grouped:
                got = {torchtitan_keeps(m, printed.filter_fqns) for m in modules[row.fqn]}
                assert got == {not convert}, (row.fqn, printed.filter_fqns)
        assert all(torchtitan_keeps(r, printed.filter_fqns) for r in routers)


def test_a_kept_run_of_blocks_is_filtered_block_by_block():
    """The leaf path would keep the converted blocks too: the printed filter names blocks."""
    fqns = ["model.layers.0-26.self_attn.q_proj", "model.layers.27-31.self_attn.q_proj"]
    printed = printed_filters(fqns, [27, 5], [True, False], [False, False], family="llama")
    assert printed.filter_fqns == tuple(f"layers.{i}.attention.wq" for i in range(27, 32))
    assert printed.kept == (fqns[1],) and printed.converted == (fqns[0],)


def test_a_linear_no_substring_keeps_alone_is_kept_and_said():
    """torchtitan's attention.wq is a prefix of attention.wq_a: no entry keeps the one without
    the other (no catalog model has both), so both stay bf16 and a note says so."""
    fqns = ["model.layers.*.self_attn.q_proj", "model.layers.*.self_attn.q_a_proj"]
    printed = printed_filters(fqns, [2, 2], [False, True], [False, False], family="deepseek_v3")
    assert printed.kept == tuple(fqns) and not printed.converted
    assert [n.topic for n in printed.notes] == [Topic.FILTER_INEXACT]


def test_torchtitans_2026_attention_names_keep_the_linears_they_name():
    """torchtitan's 2026 model layout names the attention projections under
    `attention.qkv_linear` (QKVLinear: `wq` and `wkv`; FusedQKVLinear: `wqkv`): the public
    Qwen3-14B run on 8 B200s filters `attention.qkv_linear.wkv`, which keeps k and v in bf16
    and converts q; `wqkv` keeps all three. Neither is reported as matching nothing."""
    kv = ["attention.qkv_linear.wkv"]
    for leaf, kept in (("q_proj", False), ("k_proj", True), ("v_proj", True), ("o_proj", False)):
        assert filtered(f"model.layers.*.self_attn.{leaf}", kv, count=40) is kept, leaf
    for leaf in ("q_proj", "k_proj", "v_proj"):
        assert filtered(f"model.layers.7.self_attn.{leaf}", ["attention.qkv_linear.wqkv"])
    rows = [(f"model.layers.*.self_attn.{p}_proj", 40) for p in "qkvo"]
    assert unmatched_filters([*kv, "attention.qkv_linear.wq", "qkv_linear.wz"], rows) == [
        "qkv_linear.wz"
    ]
