"""torchtitan's filter rule from the command line (`--filter-fqns`) and in setup files: rows
split where filters name some blocks, and the step as torchtitan would convert."""

from dataclasses import replace

import pytest
from conftest import invoke_cli

from f8roof.engine.answer import Question, answer
from f8roof.engine.resolve import Request
from f8roof.errors import F8RoofError
from f8roof.training.run_config import RunConfig
from f8roof.training.setup_file import parse_setup, training_setup
from f8roof.training.torchtitan_names import (
    expand_filters,
    filtered,
    layer_type,
    split_by_filters,
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
