"""Quantized routed experts at expert parallelism 1, as torchtitan has run them: its grouped-gemm
converters swap in TorchAOTokenDispatcher, which refused EP 1 from #3127 (2026-04-27) and #3125
(2026-04-28, ValueError "TorchAOTokenDispatcher requires expert parallelism") until #3935
(2026-07-20) padded each expert's tokens locally. f8roof answers for today's torchtitan: the
experts stay converted at EP 1, and the converter config it prints says when torchtitan
refused them."""

from dataclasses import replace

import pytest
from conftest import invoke_cli

from f8roof.engine.answer import Question, answer
from f8roof.engine.plan import torchtitan_config
from f8roof.engine.resolve import Request
from f8roof.notes import Topic
from f8roof.renderers.notes import sentence
from f8roof.training.run_config import RunConfig
from f8roof.training.torchtitan_names import EP1_EXPERTS_SOURCE


def _config(model, *, ep, tokens=65536, moe_fqns=()):
    run = replace(RunConfig.from_options(fsdp=8, ep=ep), moe_fqns=moe_fqns)
    got = answer(
        Question(model=model, tokens=tokens), Request(gpu="h100", recipes="rowwise"), setup=run
    )
    rec = got.recommendation
    experts = rec.rows["grouped"].astype(bool)
    return torchtitan_config(rec), rec.rows["convert"].astype(bool)[experts]


def _at_ep1(config):
    return [n for n in config.notes if n.topic is Topic.EXPERTS_AT_EP1]


def test_experts_f8roof_converts_at_ep1_stay_converted_and_the_config_names_the_refusal():
    """Llama 4 Scout's experts (K 5120, N 16384 / 8192 x 5120) pay in float8 rowwise on an H100
    at 4096 tokens an expert: converted at EP 1 as at EP 8, the EP 1 config saying which
    torchtitan refused them and from which commit on it runs them."""
    config, converted = _config("llama4-scout", ep=1)
    assert converted.all()
    said = _at_ep1(config)
    assert [n["by"] for n in said] == ["choice"]
    text = sentence(said[0])
    assert "#3935" in text and "#3127" in text and "requires expert parallelism" in text
    assert "expert_parallel_degree above 1" in text
    for commit in ("6348d93d1", "20628f4e9", "c95b211bc"):
        assert commit in said[0].source
    assert said[0].source == EP1_EXPERTS_SOURCE
    wider, converted_at_ep8 = _config("llama4-scout", ep=8)
    assert converted_at_ep8.all() and not _at_ep1(wider)


def test_experts_kept_bf16_at_ep1_need_no_word_unless_the_setup_converts_them():
    """Qwen3-30B-A3B's experts (2048 x 768) lose in float8: f8roof keeps them, so nothing is
    said at EP 1; a setup whose grouped-gemm converter names them is told instead."""
    config, converted = _config("qwen3-30b-a3b", ep=1, tokens=8192)
    assert not converted.any() and not _at_ep1(config)
    setup, _ = _config("qwen3-30b-a3b", ep=1, tokens=8192, moe_fqns=("experts",))
    assert [n["by"] for n in _at_ep1(setup)] == ["setup"]


QWEN3_MOE_SETUP = """
[model]
name = "qwen3"
flavor = "30B-A3B"
converters = ["quantize.linear.float8", "quantize.grouped_mm.float8"]
[quantize.linear.float8]
recipe_name = "rowwise"
filter_fqns = ["lm_head"]
[quantize.grouped_mm.float8]
fqns = ["experts"]
[training]
local_batch_size = 1
seq_len = 8192
[parallelism]
data_parallel_shard_degree = 8
expert_parallel_degree = {ep}
"""


@pytest.mark.parametrize("ep", [1, 8])
def test_a_setup_converting_experts_at_ep1_prints_when_torchtitan_refused_it(ep, tmp_path):
    path = tmp_path / "qwen3_moe.toml"
    path.write_text(QWEN3_MOE_SETUP.format(ep=ep))
    result = invoke_cli("estimate", "--setup", str(path), "--gpu", "h100")
    assert result.exit_code == 0, result.output
    comments = " ".join(result.output.replace("\n# ", " ").split())  # unwrapped
    said = "expert parallelism 1 (the setup's converter names them)" in comments
    assert said == (ep == 1)
