"""--setup FILE: torchtitan's TOML job configs and f8roof's short form -> a SetupFile (its
RunConfig and recipe)."""

import json
from pathlib import Path

import pytest
from conftest import invoke_cli

from f8roof.engine.plan import TorchtitanConfig
from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.renderers.answers import WIDTH, torchtitan_lines
from f8roof.renderers.notes import sentence
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import RunConfig
from f8roof.training.setup_file import (
    TORCHTITAN_MODELS,
    SetupFile,
    parse_setup,
    read_setup,
    training_setup,
)
from f8roof.training.torchtitan_names import (
    ConfigLayout,
    printed_filters,
    to_torchtitan_fqn,
)

FIXTURE = Path(__file__).parent / "data" / "torchtitan_llama3_8b_tp2_fsdp2.toml"

MINIMAL = """
[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]
[training]
local_batch_size = 2
seq_len = 4096
"""


def test_a_torchtitan_job_config_reads_as_the_run_it_describes():
    got = read_setup(FIXTURE)
    assert got == SetupFile(
        run=RunConfig(
            model="llama3-8b",
            tokens=8192,
            seq_len=8192,
            tp=2,
            fsdp=2,
            recompute=Recompute.SELECTIVE,
            sac_policy="torchtitan-2025-05",
            filter_fqns=("output",),
        ),
        recipe="rowwise",
        float8=True,
        compile=True,
        source=f"{FIXTURE} (torchtitan job config)",
    )
    assert got.run.fsdp_on and not got.run.auto_filter


def test_missing_keys_take_torchtitans_defaults_and_say_so():
    got = parse_setup(MINIMAL)
    run = got.run
    assert run.tokens == 8192
    assert run.tp == 1 and run.fsdp_on and run.fsdp_degree is None
    assert run.recompute is Recompute.FULL and run.recompute_every == 2  # layer SAC
    assert got.recipe == "tensorwise"
    defaults = {n["key"]: n["value"] for n in run.assumptions if n.topic is Topic.SETUP_DEFAULT}
    assert defaults["data_parallel_shard_degree"] == -1
    assert defaults["activation_checkpoint.mode"] == "selective"
    assert defaults["float8.recipe_name"] == "tensorwise"
    assert Topic.NOT_COMPILED in {n.topic for n in run.assumptions}  # training.compile
    text = " ".join(sentence(n) for n in run.assumptions)
    assert "data_parallel_shard_degree not set: torchtitan's default -1" in text
    assert "training.compile false" in text


def test_f8roof_short_form():
    got = parse_setup(
        """
[model]
name = "llama3-70b"
[training]
local_batch_size = 1
seq_len = 8192
compile = true
[parallelism]
tensor_parallel_degree = 8
data_parallel_shard_degree = 8
enable_async_tensor_parallel = true
[activation_checkpoint]
mode = "full"
[float8]
enable_fsdp_float8_all_gather = true
precompute_float8_dynamic_scale_for_fsdp = true
filter_fqns = "output,auto_filter_small_kn"
[f8roof]
gpu = "h100"
step_ms = 762
""",
        path="short.toml",
    )
    run = got.run
    assert run.model == "llama3-70b" and run.tp == 8 and run.fsdp_degree == 8 and run.async_tp
    assert run.recompute is Recompute.FULL and run.recompute_every == 1
    assert run.float8_all_gather and run.precompute_scales and got.recipe == "tensorwise"
    assert run.filter_fqns == ("output", "auto_filter_small_kn") and run.auto_filter
    assert run.gpu == "h100" and run.step_s == pytest.approx(0.762)
    assert "f8roof setup" in got.source
    # torchtitan's rowwise Inductor setting is on unless the file says the run predates it
    assert run.emulate_precision_casts and run.emulates_precision_casts("rowwise")
    assert not run.emulates_precision_casts("tensorwise")
    older = parse_setup(MINIMAL + "[f8roof]\nemulate_precision_casts = false\n").run
    assert not older.emulates_precision_casts("rowwise")


def test_float8_all_gather_needs_fsdp():
    got = parse_setup(
        MINIMAL
        + "[parallelism]\ndata_parallel_shard_degree = 1\n"
        + "[float8]\nenable_fsdp_float8_all_gather = true\n"
    )
    assert not got.run.float8_all_gather and not got.run.fsdp_on


def test_converter_off_is_noted():
    got = parse_setup(MINIMAL.replace('converters = ["float8"]', ""))
    assert not got.float8
    assert [n.topic for n in got.run.assumptions].count(Topic.CONVERTER_OFF) == 1
    assert any("this setup converts nothing" in sentence(n) for n in got.run.assumptions)


@pytest.mark.parametrize(
    "text, message",
    [
        (MINIMAL + "[training2]\nx = 1\n", r"unknown section \[training2\]"),
        (MINIMAL.replace("seq_len", "seqlen"), r"unknown key 'seqlen' in \[training\]"),
        (MINIMAL + "[float8]\nrecipe = 'rowwise'\n", r"unknown key 'recipe' in \[float8\]"),
        (MINIMAL.replace("seq_len = 4096", ""), r"missing key 'seq_len' in \[training\]"),
        (
            MINIMAL.replace("local_batch_size = 2", ""),
            r"missing key 'local_batch_size' \(or 'batch_size'\) in \[training\]",
        ),
        (MINIMAL.replace('flavor = "8B"', ""), r"missing key 'flavor' in \[model\]"),
        ("[training]\nseq_len = 1\nbatch_size = 1\n", r"missing key 'name' in \[model\]"),
        (MINIMAL.replace('"8B"', '"7B"'), "no f8roof built-in for torchtitan model llama3/7B"),
        (
            MINIMAL + "[activation_checkpoint]\nmode = 'op'\n",
            "must be one of none, full, selective",
        ),
        (
            MINIMAL + "[activation_checkpoint]\nselective_ac_option = 'ops'\n",
            "must be 'op' or an integer >= 0",
        ),
        (MINIMAL + "[parallelism]\ntensor_parallel_degree = 0\n", "must be an integer >= 1"),
        (MINIMAL + "[parallelism]\ntensor_parallel_degree = '2'\n", "must be an integer >= 1"),
        (MINIMAL + "[float8]\nrecipe_name = 'mxfp8'\n", "'recipe_name' in \\[float8\\]"),
        (
            MINIMAL
            + "[float8]\nrecipe_name = 'tensorwise'\nenable_fsdp_float8_all_gather = true\n",
            "torchtitan refuses",
        ),
        (MINIMAL + "[f8roof]\nstep_ms = -1\n", "'step_ms' in \\[f8roof\\]"),
        (
            MINIMAL + "[f8roof]\nemulate_precision_casts = 'no'\n",
            "'emulate_precision_casts' in \\[f8roof\\] of x.toml must be true or false",
        ),
        ("[model\n", "is not valid TOML"),
    ],
)
def test_bad_setups_are_one_line_exit_2(text, message):
    with pytest.raises(F8RoofError, match=message) as info:
        parse_setup(text, path="x.toml")
    assert info.value.exit_code == 2
    assert "\n" not in info.value.message


def test_unreadable_file(tmp_path):
    with pytest.raises(F8RoofError, match="cannot read"):
        read_setup(tmp_path / "nope.toml")


def test_torchtitan_models_map_to_builtins():
    from f8roof.training.catalog import BUILTIN_NAMES

    assert set(TORCHTITAN_MODELS.values()) <= set(BUILTIN_NAMES)
    assert TORCHTITAN_MODELS[("llama3", "8B")] == "llama3-8b"
    assert TORCHTITAN_MODELS[("llama3", "70B")] == "llama3-70b"


@pytest.mark.parametrize(
    "flavor, model",
    [("8B", "qwen3-8b"), ("14B", "qwen3-14b"), ("32B", "qwen3-32b"), ("30B-A3B", "qwen3-30b-a3b")],
)
def test_torchtitans_qwen3_flavors_read_as_the_builtins(flavor, model):
    qwen3 = MINIMAL.replace('name = "llama3"', 'name = "qwen3"')
    assert parse_setup(qwen3.replace('"8B"', f'"{flavor}"')).run.model == model


def test_fqn_names_both_ways():
    assert to_torchtitan_fqn("lm_head") == "output"
    assert to_torchtitan_fqn("model.layers.*.self_attn.q_proj") == "layers.*.attention.wq"
    assert to_torchtitan_fqn("model.layers.*.mlp.gate_proj") == "layers.*.feed_forward.w1"
    assert to_torchtitan_fqn("model.layers.*.mlp.up_proj") == "layers.*.feed_forward.w3"
    assert to_torchtitan_fqn("model.layers.*.mlp.down_proj") == "layers.*.feed_forward.w2"
    assert to_torchtitan_fqn("model.layers.0-26.mlp.up_proj") == "layers.0-26.feed_forward.w3"
    # llama3 has no routed experts; qwen3's and deepseek_v3's are GroupedExperts parameters
    with pytest.raises(F8RoofError, match="no torchtitan name for layer"):
        to_torchtitan_fqn("model.layers.*.mlp.experts.*.gate_proj", "llama")
    expert = to_torchtitan_fqn("model.layers.*.mlp.experts.*.gate_proj", "deepseek_v3")
    assert expert == "layers.*.moe.experts.w1"
    # the catalog names qwen3's rows by torchtitan's own modules: k's converter config is `wkv`
    assert to_torchtitan_fqn("layers.*.moe.experts.w1", "qwen3_moe") == "layers.*.moe.experts.w1"
    assert to_torchtitan_fqn("layers.3.attention.qkv_linear.wk", "qwen3") == (
        "layers.3.attention.qkv_linear.wkv"
    )
    assert to_torchtitan_fqn("lm_head", "qwen3") == "lm_head"
    with pytest.raises(F8RoofError, match="torchtitan has no model for mixtral"):
        to_torchtitan_fqn("model.layers.*.self_attn.q_proj", "mixtral")


def _parsed(lines):
    """torchtitan_lines' TOML read back as a job config."""
    toml = "\n".join(line for line in lines if not line.startswith(("#", "--")))
    toml = toml.replace("[model]", "[model]\nname = 'llama3-8b'")
    return parse_setup(toml + "\n[training]\nlocal_batch_size = 1\nseq_len = 8\n")


def test_filter_fqns_and_converter_lines():
    fqns = [f"model.layers.*.self_attn.{x}_proj" for x in "qkvo"] + ["lm_head"]
    converts = [True, False, False, True, False]
    printed = printed_filters(fqns, [32] * 4 + [1], converts, [False] * 5, family="llama")
    assert printed.filter_fqns == ("output", "attention.wk", "attention.wv")
    assert printed.converted == (fqns[0], fqns[3]) and not printed.notes
    lines = torchtitan_lines(TorchtitanConfig("rowwise", printed.filter_fqns))
    assert 'recipe_name = "rowwise"' in lines
    assert 'filter_fqns = ["output", "attention.wk", "attention.wv"]' in lines
    assert lines[-1] == (
        "--model.converters float8 --float8.recipe_name rowwise "
        "--float8.filter_fqns output,attention.wk,attention.wv"
    )
    tw = torchtitan_lines(TorchtitanConfig("tensorwise", ("output",), float8_all_gather=True))
    assert not any(line.startswith("recipe_name") for line in tw)  # torchtitan refuses the pair
    assert "enable_fsdp_float8_all_gather = true" in tw
    back = _parsed(tw)  # the lines parse back into the same decisions
    assert back.run.float8_all_gather and back.run.filter_fqns == ("output",)
    assert torchtitan_lines(TorchtitanConfig(None, (), wanted="mxfp8")) == [
        "# no torchtitan recipe for mxfp8"
    ]
    assert "train in bf16" in torchtitan_lines(TorchtitanConfig("rowwise", (), converts=False))[0]


def test_converter_lines_fit_the_terminal_and_parse_back():
    """Seven filters: the TOML array spans lines, the overrides break before an option."""
    everything = (
        "output",
        *(f"attention.w{x}" for x in "qkvo"),
        "feed_forward.w1",
        "feed_forward.w3",
    )
    lines = torchtitan_lines(TorchtitanConfig("rowwise", everything))
    assert max(map(len, lines)) <= WIDTH
    assert _parsed(lines).run.filter_fqns == everything
    assert lines[-2].endswith(" \\") and lines[-1].startswith("--float8.filter_fqns output,")


def test_training_setup_of_a_setup():
    req = read_setup(FIXTURE)
    setup = training_setup(req, step_ms=762)
    assert setup.tp == 2 and setup.fsdp_on and setup.recompute.value == "selective"
    assert setup.step_s == pytest.approx(0.762)
    assert training_setup(req).step_s is None
    # torchtitan's default selective_ac_option '2': layer SAC, every 2nd block checkpointed whole
    layer_sac = training_setup(parse_setup(MINIMAL))
    assert layer_sac.recompute.value == "full" and layer_sac.recompute_every == 2
    assert layer_sac.recompute_share(32) == 0.5 and layer_sac.recompute_share(31) == 15 / 31


def test_filters_match_in_either_spelling():
    from f8roof.training.torchtitan_names import filtered

    for entries in (["output"], ["lm_head"]):
        assert filtered("lm_head", entries)
    for entries in (["attention.wk"], ["self_attn.k_proj"], ["layers.3.attention.wk"]):
        assert filtered("model.layers.3.self_attn.k_proj", entries)
    # a literal '*' is no wildcard to torchtitan: it matches no module's fqn
    assert not filtered("model.layers.*.self_attn.k_proj", ["layers.*.attention.wk"], count=32)
    # "" is a substring of every fqn: torchtitan keeps every linear in bf16 by it
    assert filtered("model.layers.*.self_attn.q_proj", ["attention.wk", ""], count=32)
    assert not filtered("model.layers.*.self_attn.k_proj", ["layers.0.moe.router.gate"], count=2)


QUANTIZE = MINIMAL.replace('converters = ["float8"]', 'converters = ["quantize.linear.float8"]')


def test_the_quantize_layout_reads_as_its_float8_twin():
    float8 = parse_setup(MINIMAL + "[float8]\nrecipe_name = 'rowwise'\nfilter_fqns = ['output']\n")
    quantize = parse_setup(
        QUANTIZE + "[quantize.linear.float8]\nrecipe_name = 'rowwise'\nfilter_fqns = ['output']\n"
    )
    assert quantize.run == float8.run and quantize.recipe == float8.recipe == "rowwise"
    assert quantize.float8


def test_the_mx_converter_takes_torchtitans_defaults_and_names():
    mx = parse_setup(MINIMAL.replace('["float8"]', '["quantize.linear.mx"]'))
    assert mx.f8roof_recipe == "mxfp8_rceil" and mx.run.filter_fqns == ("output",)
    old = parse_setup(
        MINIMAL.replace('["float8"]', '["mx"]') + "[mx]\nrecipe_name = 'mxfp8_cublas'\n"
    )
    assert old.f8roof_recipe == "mxfp8_rceil"
    for name in ("mxfp8", "mxfp8_cublas_rceil", "mxfp8_rceil_wgrad_with_hp"):
        table = f"[mx]\nrecipe_name = '{name}'\n"
        got = parse_setup(MINIMAL.replace('["float8"]', '["mx"]') + table)
        assert got.f8roof_recipe.startswith("mxfp8_rceil")
    experts = parse_setup(
        MINIMAL.replace('["float8"]', '["quantize.linear.mx", "quantize.grouped_mm.mx"]')
        + "[quantize.grouped_mm.mx]\nfqns = ['experts']\n"
    )
    assert experts.run.moe_fqns == ("experts",)


def test_mx_converter_lines_parse_back():
    config = TorchtitanConfig("mxfp8_cublas_rceil", ("output",), section="quantize.linear.mx")
    lines = torchtitan_lines(config)
    assert "[quantize.linear.mx]" in lines
    assert lines[-2].startswith("--model.converters quantize.linear.mx")
    assert _parsed(lines).f8roof_recipe == "mxfp8_rceil"


def test_mx_lines_keep_the_setups_2025_layout_and_recipe_name(tmp_path):
    # torchtitan's [mx] section (2025-05 to 2025-09) took torchao's recipe names: a file in it
    # gets its own section and recipe back, not the later [quantize.linear.mx] spelling
    text = MINIMAL.replace('["float8"]', '["mx"]') + "[mx]\nrecipe_name = 'mxfp8_cublas'\n"
    got = parse_setup(text)
    assert got.layout.mx_recipe == "mxfp8_cublas"
    setup = tmp_path / "mx.toml"
    setup.write_text(text + '[f8roof]\ngpu = "b200"\n')
    result = invoke_cli("estimate", "--setup", setup)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("[model]")
    assert lines[start : start + 5] == [
        "[model]",
        'converters = ["mx"]',
        "",
        "[mx]",
        'recipe_name = "mxfp8_cublas"',
    ]
    assert lines[-1].startswith("--model.converters mx --mx.recipe_name mxfp8_cublas")
    assert _parsed(lines[start:]).f8roof_recipe == "mxfp8_rceil"
    later = parse_setup(MINIMAL.replace('["float8"]', '["quantize.linear.mx"]'))
    assert later.layout.mx_recipe is None


@pytest.mark.parametrize(
    "text, message",
    [
        (MINIMAL + "[quantize.linear.fp4]\nx = 1\n", r"\[quantize.linear.fp4\] in x.toml; read:"),
        (MINIMAL + "[quantize.dense]\nx = 1\n", r"unknown section \[quantize.dense\]"),
        (MINIMAL + "[nvfp4]\nx = 1\n", r"read: \[float8\]/\[mx\] \(2024-25\), \[quantize"),
        (QUANTIZE + "[quantize.linear.float8]\nrecipe = 'rowwise'\n", "unknown key 'recipe'"),
        (
            QUANTIZE + "[quantize.linear.float8]\nx=1\n[float8]\nrecipe_name = 'rowwise'\n",
            "unknown key 'x'",
        ),
        (
            QUANTIZE + "[quantize.linear.float8]\n[float8]\nrecipe_name = 'rowwise'\n",
            "mixes \\[float8\\]/\\[mx\\] with \\[quantize.linear",
        ),
        (
            MINIMAL.replace('["float8"]', '["quantize.linear.mx"]')
            + "[quantize.linear.mx]\nrecipe_name = 'rowwise'\n",
            "'recipe_name' in \\[quantize.linear.mx\\]",
        ),
        (MINIMAL.replace('["float8"]', '["float8", "mx"]'), "give one linear converter"),
        (MINIMAL.replace('["float8"]', '["nvfp4"]'), "unknown converter 'nvfp4'"),
    ],
)
def test_an_unknown_layout_is_one_line_naming_the_ones_read(text, message):
    with pytest.raises(F8RoofError, match=message) as info:
        parse_setup(text, path="x.toml")
    assert "\n" not in info.value.message and len(info.value.message) <= 120


def test_converter_lines_keep_the_setups_layout():
    config = TorchtitanConfig(
        "tensorwise", ("output",), float8_all_gather=True, section="quantize.linear.float8"
    )
    lines = torchtitan_lines(config)
    assert lines[:4] == [
        "[model]",
        'converters = ["quantize.linear.float8"]',
        "",
        "[quantize.linear.float8]",
    ]
    text = " ".join(lines)
    assert "--quantize.linear.float8.enable_fsdp_float8_all_gather" in text
    assert "--float8." not in text
    back = _parsed(lines)
    assert back.layout.quantize and back.run.float8_all_gather


def test_an_estimate_answers_in_the_setups_layout(tmp_path):
    from f8roof.engine.answer import Question, answer_setup
    from f8roof.training.run_config import RunConfig

    path = tmp_path / "q.toml"
    path.write_text(QUANTIZE + "[quantize.linear.float8]\nfilter_fqns = ['output']\n")
    got = answer_setup(
        str(path),
        question=Question(),
        setup=RunConfig(),
        recipe_given=False,
        options={"gpu": "h100"},
    )
    assert got.torchtitan.section == "quantize.linear.float8"


# torchtitan's layout before 2025-03-18, as its 2024-12 benchmark's configs wrote it (the keys
# of config_manager.py at 9dec370): degrees in [training], the rest in [experimental]
EARLIER = """
[model]
name = "llama3"
flavor = "405B"
norm_type = "rmsnorm"
[training]
batch_size = 32
seq_len = 8192
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
compile = true
[experimental]
context_parallel_degree = 1
pipeline_parallel_degree = 8
pipeline_parallel_schedule = "Interleaved1F1B"
enable_async_tensor_parallel = true
[activation_checkpoint]
mode = 'full'
[float8]
enable_float8_linear = true
enable_fsdp_float8_all_gather = true
precompute_float8_dynamic_scale_for_fsdp = true
scaling_type_input = "dynamic"
"""


def test_the_earlier_layout_reads_as_the_run_it_describes():
    got = parse_setup(EARLIER + "[f8roof]\ngpus = 512\n")
    run = got.run
    assert (run.tp, run.fsdp_degree, run.async_tp, got.compile) == (8, 8, True, True)
    assert run.float8_all_gather and run.precompute_scales
    # torchtitan then split the local batch into as many microbatches as pipeline ranks
    assert run.pipeline is not None
    assert (run.pipeline.degree, run.pipeline.microbatches) == (8, 8)
    assert (run.pipeline.schedule, run.pipeline.stages_per_rank) == ("Interleaved1F1B", 2)
    # and kept the output projection in bf16 itself (no filter_fqns key yet)
    assert run.filter_fqns == ("output",)
    assert got.layout == ConfigLayout(switch=True, filters=False)
    topics = [n.topic for n in run.assumptions]
    assert Topic.SETUP_EARLIER_LAYOUT in topics
    assert not any(
        n.topic is Topic.SETUP_DEFAULT and n["key"] == "float8.filter_fqns" for n in run.assumptions
    )
    said = " ".join(sentence(n) for n in run.assumptions)
    assert "before 2025-03-18" in said and "microbatches counted" in said


def test_the_later_layout_is_not_read_as_the_earlier_one():
    got = parse_setup(MINIMAL + "[parallelism]\npipeline_parallel_degree = 2\n")
    assert got.run.pipeline.microbatches == 2  # one sequence each (microbatch size 1)
    assert got.run.filter_fqns == ()
    assert Topic.SETUP_EARLIER_LAYOUT not in {n.topic for n in got.run.assumptions}


@pytest.mark.parametrize(
    "key, microbatches",
    [
        ("pipeline_parallel_microbatches = 4", 4),  # a count, in either layout until 2025-04-07
        ("pipeline_parallel_microbatches = 32", 32),
    ],
)
def test_pipeline_microbatches_counted(key, microbatches):
    earlier = parse_setup(EARLIER.replace("enable_async", f"{key}\nenable_async"))
    assert earlier.run.pipeline.microbatches == microbatches
    later = parse_setup(
        MINIMAL.replace("local_batch_size = 2", "local_batch_size = 32")
        + f"[parallelism]\npipeline_parallel_degree = 4\n{key}\n"
    )
    assert later.run.pipeline.microbatches == microbatches


def test_the_world_size_places_fsdp_over_the_rest():
    later = MINIMAL + "[parallelism]\ntensor_parallel_degree = 2\n"
    assert parse_setup(later + "[f8roof]\ngpus = 16\n").run.fsdp_degree == 8
    assert parse_setup(later).run.fsdp_degree is None  # -1 and no world size: not known
    given = later + "data_parallel_shard_degree = 4\n[f8roof]\ngpus = 8\n"
    assert parse_setup(given).run.fsdp_degree == 4


@pytest.mark.parametrize(
    "text, message",
    [
        (
            EARLIER + "[parallelism]\ntensor_parallel_degree = 8\n",
            r"has \[parallelism\] and torchtitan's earlier parallelism keys",
        ),
        (
            EARLIER.replace("enable_async", "pipeline_parallel_microbatches = 5\nenable_async"),
            "5 pipeline microbatches do not divide the local batch of 32 sequences",
        ),
        (
            EARLIER.replace("batch_size = 32", "batch_size = 4"),
            "8 pipeline microbatches \\(by default the degree\\) do not divide the local batch of 4 sequences",
        ),
        (
            MINIMAL + "[parallelism]\npipeline_parallel_degree = 2\n"
            "pipeline_parallel_microbatches = 2\npipeline_parallel_microbatch_size = 1\n",
            "has 'pipeline_parallel_microbatches' and its successor",
        ),
        (EARLIER.replace('"rmsnorm"', '"layernorm"'), "'norm_type' = 'layernorm'"),
        (EARLIER.replace('"rmsnorm"', '"fused_rmsnorm"'), "refuses norm_type 'fused_rmsnorm'"),
        (
            EARLIER.replace('"dynamic"', '"delayed"'),
            "'scaling_type_input' = 'delayed' .* only dynamic scaling is modelled",
        ),
        (EARLIER + "[f8roof]\ngpus = 100\n", "gpus 100 in x.toml does not divide by .* 64"),
        (
            MINIMAL + "[parallelism]\ndata_parallel_shard_degree = 2\n[f8roof]\ngpus = 8\n",
            "multiply to 2 GPUs, not \\[f8roof\\] gpus 8",
        ),
    ],
)
def test_earlier_layout_and_world_size_refusals(text, message):
    with pytest.raises(F8RoofError, match=message) as info:
        parse_setup(text, path="x.toml")
    assert "\n" not in info.value.message and len(info.value.message) <= 130


def test_fused_rmsnorm_reads_eagerly_as_the_rmsnorm_it_computes():
    eager = EARLIER.replace("compile = true", "").replace(
        "enable_async_tensor_parallel = true",
        "",  # torchtitan refuses it without compile
    )
    got = parse_setup(eager.replace('"rmsnorm"', '"fused_rmsnorm"'))
    assert not got.compile


def test_converter_lines_of_the_earlier_layout_say_what_it_cannot_filter():
    config = TorchtitanConfig(
        "tensorwise", ("output", "attention.wk"), float8_all_gather=True, switch=True, filters=False
    )
    lines = torchtitan_lines(config)
    assert lines[:2] == ["[float8]", "enable_float8_linear = true"]
    assert not any(line.startswith(("filter_fqns", "[model]")) for line in lines)
    comment = " ".join(line for line in lines if line.startswith("#"))
    assert "keeping attention.wk too takes filter_fqns" in comment
    assert all(len(line) <= WIDTH for line in lines)
    assert "--float8.enable_float8_linear" in " ".join(lines)
    alone = torchtitan_lines(
        TorchtitanConfig("tensorwise", ("output",), switch=True, filters=False)
    )
    assert not any("filter_fqns" in line for line in alone)


def test_the_loss_compiles_with_the_model_as_torchtitan_compiled_it():
    compiled = MINIMAL.replace("seq_len = 4096", "seq_len = 4096\ncompile = true")
    assert parse_setup(compiled).run.loss_compiled
    assert not parse_setup(MINIMAL).run.loss_compiled  # compile off: eager
    later = MINIMAL + '[compile]\nenable = true\ncomponents = ["model"]\n'  # 2025-08-20 on
    assert not parse_setup(later).run.loss_compiled
    assert parse_setup(MINIMAL + "[compile]\nenable = true\n").run.loss_compiled
    # torchtitan compiled the model alone before 2025-04-02: its earlier layout's files
    assert parse_setup(EARLIER).compile and not parse_setup(EARLIER).run.loss_compiled


@pytest.mark.parametrize(
    "keys, message",
    [
        ("enable_cpu_offload = true", "FSDP's CPU offload is not modelled"),
        ("mixed_precision_param = 'float32'", "only 'bfloat16' is modelled"),
        ("dtype = 'bfloat16'", "'dtype' = 'bfloat16' .* only 'float32' is modelled"),
    ],
)
def test_training_keys_beyond_the_model_are_refused(keys, message):
    text = MINIMAL.replace("seq_len = 4096", f"seq_len = 4096\n{keys}")
    text += "[parallelism]\ndata_parallel_shard_degree = 8\n"
    with pytest.raises(F8RoofError, match=message):
        parse_setup(text, path="x.toml")


def test_training_keys_at_their_defaults_read():
    keys = "enable_cpu_offload = false\nmixed_precision_param = 'bfloat16'\ndtype = 'float32'\n"
    keys += "global_batch_size = 16"
    text = MINIMAL.replace("seq_len = 4096", f"seq_len = 4096\n{keys}")
    got = parse_setup(text + "[parallelism]\ndata_parallel_shard_degree = 8\n")
    assert got.run.fsdp_degree == 8 and got.run.accumulation == 1


@pytest.mark.parametrize(
    "keys, message",
    [
        (
            "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule_csv = 's.csv'\n",
            "a custom schedule is not modelled",
        ),
        ("[compile]\nenable = true\nbackend = 'aot_eager'\n", "models Inductor's kernels"),
    ],
)
def test_parallelism_and_compile_keys_beyond_the_model_are_refused(keys, message):
    with pytest.raises(F8RoofError, match=message) as info:
        parse_setup(MINIMAL + keys, path="x.toml")
    assert len(info.value.message) <= 120


def test_disable_loss_parallel_reads_as_torchtitan_runs_it(tmp_path):
    assert parse_setup(MINIMAL).run.loss_parallel
    tp = "[parallelism]\ntensor_parallel_degree = 2\n"
    got = parse_setup(MINIMAL + tp + "disable_loss_parallel = true\n")
    assert not got.run.loss_parallel and got.run.tp == 2
    outside = []
    for name, extra in (("on", ""), ("off", "disable_loss_parallel = true\n")):
        setup, out = tmp_path / f"{name}.toml", tmp_path / f"{name}.json"
        setup.write_text(MINIMAL + tp + extra + '[f8roof]\ngpu = "h100"\n')
        result = invoke_cli("estimate", "--setup", setup, "--show-all", "--out", out)
        assert result.exit_code == 0, result.output
        parts = json.loads(out.read_text())["summary"]["components"]
        outside.append(
            next(c["bf16_s"] for c in parts if c["part"] == "embedding, final norm and loss")
        )
    # compile off: torchtitan's loss runs eager
    assert "eager fp32 loss over logits gathered from the TP ranks" in result.output
    # the logits' all-gather and the whole vocabulary's loss on every rank cost more
    assert outside[1] > outside[0]


def test_the_blocks_are_compiled_where_the_setup_compiles_the_model():
    """What a block saves for the backward depends on it (training/memory.py)."""
    assert not parse_setup(MINIMAL).run.blocks_compiled  # compile off: eager autograd
    assert parse_setup(MINIMAL + "[compile]\nenable = true\n").run.blocks_compiled
    loss_only = MINIMAL + '[compile]\nenable = true\ncomponents = ["loss"]\n'
    assert not parse_setup(loss_only).run.blocks_compiled
    model = MINIMAL + '[compile]\nenable = true\ncomponents = ["model"]\n'
    assert parse_setup(model).run.blocks_compiled and not parse_setup(model).run.loss_compiled
    assert parse_setup(EARLIER).run.blocks_compiled  # training.compile: the model
