"""torchtitan's 2026 named configs (`--setup llama3:llama3_8b`) with dotted overrides (`--set`)
answer as their TOML twins do."""

import json

import pytest
from conftest import invoke_cli

from f8roof.errors import F8RoofError
from f8roof.training.config_registry import CONFIGS, is_config_name, with_overrides
from f8roof.training.setup_file import parse_setup, read_setup

# torchtitan's llama3_8b (config_registry.py at 00d1c0e444a8) with what a user adds on its
# command line, written by hand as a TOML job config in the Quantize layout
TWIN = """
[model]
name = "llama3"
flavor = "8B"
converters = ["quantize.linear.float8"]
[training]
local_batch_size = 2
seq_len = 8192
[parallelism]
data_parallel_shard_degree = 4
tensor_parallel_degree = 2
[activation_checkpoint]
mode = "selective"
[quantize.linear.float8]
recipe_name = "rowwise"
filter_fqns = ["output"]
"""
OVERRIDES = (
    "training.local_batch_size=2",
    "parallelism.data_parallel_shard_degree=4",
    "parallelism.tensor_parallel_degree=2",
    'model.converters=["quantize.linear.float8"]',
    "quantize.linear.float8.recipe_name=rowwise",
    'quantize.linear.float8.filter_fqns=["output"]',
)


def test_a_config_name_with_overrides_reads_as_its_toml_twin():
    named = read_setup("llama3:llama3_8b", OVERRIDES)
    twin = parse_setup(TWIN)
    assert named.run == twin.run and named.recipe == twin.recipe
    assert "00d1c0e444a8" in named.source


def test_a_config_name_answers_as_its_toml_twin(tmp_path):
    path = tmp_path / "twin.toml"
    path.write_text(TWIN)
    sets = [w for o in OVERRIDES for w in ("--set", o)]
    outs = []
    for setup, extra in ((path, []), ("llama3:llama3_8b", sets)):
        out = tmp_path / f"{len(outs)}.json"
        result = invoke_cli("estimate", "--setup", setup, *extra, "--gpu", "h100", "--out", out)
        assert result.exit_code == 0, result.output
        outs.append((json.loads(out.read_text()), result.output))
    (rows_twin, text_twin), (rows_named, text_named) = outs
    assert rows_named == rows_twin
    assert text_named.replace(str(path), "llama3:llama3_8b") == text_twin.replace(
        str(path), "llama3:llama3_8b"
    ).replace(str(tmp_path / "0.json"), str(tmp_path / "1.json"))


def test_every_named_config_parses():
    for name, config in CONFIGS.items():
        assert is_config_name(name)
        assert parse_setup(config.toml, path=name).run.model.startswith("llama3-")


def test_overrides_set_dotted_keys_and_read_toml_values():
    doc = with_overrides({"a": {"b": 1}}, ["a.b=2", "a.c=x", "d.e.f=[1, 2]"], where="w")
    assert doc == {"a": {"b": 2, "c": "x"}, "d": {"e": {"f": [1, 2]}}}


@pytest.mark.parametrize(
    "name, overrides, message",
    [
        ("llama3:llama3_9b", (), "no torchtitan config 'llama3:llama3_9b' here; known: llama3"),
        ("llama3:llama3_8b", ("tp=2",), "bad override 'tp=2'"),
        ("llama3:llama3_8b", ("parallelism.tp=2",), "unknown key 'tp' in \\[parallelism\\]"),
        ("llama3:llama3_8b", ("model.name.x=2",), "'name' in llama3:llama3_8b is no table"),
    ],
)
def test_a_bad_name_or_override_is_one_line(name, overrides, message):
    with pytest.raises(F8RoofError, match=message) as info:
        read_setup(name, overrides)
    assert "\n" not in info.value.message


def test_set_without_setup_is_refused():
    result = invoke_cli("estimate", "--shape", "64,64,64", "--set", "a.b=1")
    assert result.exit_code == 2 and "give --setup" in result.output
