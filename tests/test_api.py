"""The Python API: what `help(f8roof)` lists, what each function returns, and refusals that
name the parameter in Python terms."""

import pydoc

import pandas as pd
import pytest

import f8roof
from f8roof import F8RoofError, ParameterError

API = ("estimate_shapes", "answer_model", "answer_setup", "module_filter")


def test_help_lists_the_documented_api():
    text = pydoc.render_doc(f8roof, renderer=pydoc.plaintext)
    for name in API:
        assert f"{name}(" in text and name in f8roof.__all__ and name in dir(f8roof)
    assert "ParameterError" in text


def test_estimate_shapes_returns_one_row_per_shape_with_its_decision():
    frame = f8roof.estimate_shapes([(4096, 4096, 4096), (8192, 1024, 1024)], gpu="h200")
    assert isinstance(frame, pd.DataFrame) and len(frame) == 2
    first, second = frame.iloc[0], frame.iloc[1]
    assert (first["M"], first["K"], first["N"]) == (4096, 4096, 4096)
    assert first["speedup"] == pytest.approx(first["bf16_s"] / first["fp8_s"])
    assert first["decision"] == "convert" and second["decision"] == "keep"


def test_answer_model_returns_the_answer_record():
    found = f8roof.answer_model("llama3-8b", 8192, tp=2, fsdp=2, recompute="selective")
    layers = found.recommendation.layers
    assert "self_attn.q_proj" in " ".join(layers["fqn"]) and layers["convert"].any()
    assert found.step.chosen.bf16_s > found.step.chosen.fp8_s > 0
    assert found.recommendation.setup.fsdp_degree == 2


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: f8roof.answer_model("llama3-8b", 8192, fsdp=True), "fsdp"),
        (lambda: f8roof.module_filter(object(), 8192, fsdp=True), "fsdp"),
        (lambda: f8roof.module_filter(object(), 8192, tp=0), "tp"),
        (lambda: f8roof.answer_model("llama3-8b", 8192.0), "tokens"),
        (lambda: f8roof.answer_model("llama3-8b", 8192, recompute="op"), "recompute"),
        (lambda: f8roof.estimate_shapes([(4096, 4096)]), "shapes"),
        (lambda: f8roof.estimate_shapes("4096,4096,4096"), "shapes"),
        (lambda: f8roof.estimate_shapes([(64, 64, 64)], policy="safe"), "policy"),
        (lambda: f8roof.module_filter(object(), 8192, recipe="all"), "recipe"),
        (lambda: f8roof.answer_model("llama3-8b", 8192, filter_fqns="output"), "filter_fqns"),
        (lambda: f8roof.answer_model("llama3-8b", 8192, cp=0), "cp"),
        (lambda: f8roof.answer_model("llama3-8b", 8192, async_tp=1), "async_tp"),
        (lambda: f8roof.answer_setup(None), "setup"),
        (lambda: f8roof.answer_setup("llama3:llama3_8b", overrides="a.b=1"), "overrides"),
        (lambda: f8roof.answer_setup("llama3:llama3_8b", overrides=3), "overrides"),
    ],
)
def test_a_refused_value_names_its_parameter(call, parameter):
    with pytest.raises(ParameterError) as refused:
        call()
    assert refused.value.parameter == parameter
    assert str(refused.value).startswith(f"{parameter} takes ") and "--" not in str(refused.value)


def test_fsdp_given_as_a_bool_is_refused_as_naming_no_degree():
    with pytest.raises(
        ParameterError, match=r"^fsdp takes a degree, an int >= 1 \(1: none\), got True$"
    ):
        f8roof.module_filter(object(), 8192, fsdp=True)


def test_the_library_s_refusals_speak_in_parameter_names():
    with pytest.raises(F8RoofError, match=r"^tp 3 does not divide") as refused:
        f8roof.answer_model("llama3-8b", 8192, tp=3)
    assert "--" not in str(refused.value)


def test_module_filter_decides_at_an_fsdp_degree():
    nn = pytest.importorskip("torch.nn")
    model = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 16))
    keep = f8roof.module_filter(model, 16384, fsdp=2)
    assert keep.recommendation.setup.fsdp_degree == 2
    assert keep(model[0], "0") and not keep(model[1], "1")


def test_answer_model_runs_the_pipeline_context_parallel_and_accumulation_as_the_cli():
    from click.testing import CliRunner

    from f8roof.cli import main

    found = f8roof.answer_model(
        "llama3-8b", 65536, gpu="h100", fsdp=4, pp=2, cp=2, accumulation=2, async_tp=True, tp=2
    )
    setup = found.recommendation.setup
    assert (setup.pp, setup.cp, setup.accumulation, setup.async_tp) == (2, 2, 2, True)
    flags = "--model llama3-8b --tokens 65536 --gpu h100 --fsdp 4 --pp 2 --cp 2 "
    flags += "--accumulation 2 --async-tp --tp 2"
    shown = CliRunner().invoke(main, ["estimate", *flags.split()])
    assert shown.exit_code == 0, shown.output
    assert f"x{found.step.as_run.speedup:.3f}" in shown.output


def test_answer_model_keeps_the_given_layers_in_bf16():
    every = f8roof.answer_model("llama3-8b", 8192, fsdp=8, filter_fqns=[])
    kept = f8roof.answer_model("llama3-8b", 8192, fsdp=8, filter_fqns=["output", "attention.wk"])
    assert kept.step.as_run.fp8_s > every.step.as_run.fp8_s


def test_answer_setup_answers_a_torchtitan_config_as_estimate_setup(tmp_path):
    from click.testing import CliRunner

    from f8roof.cli import main

    found = f8roof.answer_setup(
        "llama3:llama3_8b",
        gpu="h100",
        overrides=["parallelism.data_parallel_shard_degree=8", "training.local_batch_size=1"],
    )
    assert found.recommendation.setup.fsdp_degree == 8 and found.recommendation.tokens == 8192
    args = ["estimate", "--setup", "llama3:llama3_8b", "--gpu", "h100"]
    args += ["--set", "parallelism.data_parallel_shard_degree=8"]
    args += ["--set", "training.local_batch_size=1"]
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    assert f"x{found.step.as_run.speedup:.3f}" in shown.output


def test_async_tp_without_tp_is_refused_in_parameter_names():
    with pytest.raises(F8RoofError, match=r"^async_tp pipelines TP's collectives: give tp 2"):
        f8roof.answer_model("llama3-8b", 8192, async_tp=True)
