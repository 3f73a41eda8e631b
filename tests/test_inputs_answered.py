"""Inputs a new user tries that used to pass without a word: each is answered or refused in one
line of at most 120 characters."""

import ast
import json
from pathlib import Path

import pytest

from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.renderers.notes import sentence
from f8roof.training.setup_file import parse_setup

PACKAGE = Path(__file__).resolve().parents[1] / "f8roof"
LINE = 120
SETUP = """
[model]
name = "llama3"
flavor = "8B"
converters = "float8"
[training]
local_batch_size = 2
seq_len = 4096
"""


def one_line(result, path: str = "") -> str:
    """The refusal's one line, within LINE but for the file it names (a test's is long)."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) - len(path) <= LINE, result.output
    return lines[0]


@pytest.fixture(scope="module")
def calibration_data():
    import synthetic

    from f8roof.calibration.fitting import fit_calibration

    return fit_calibration(synthetic.measurements()).to_dict()


def written(tmp_path, data) -> str:
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_converters_given_as_a_string_is_read_as_its_list_and_said_so():
    run = parse_setup(SETUP).run
    said = [sentence(n) for n in run.assumptions if n.topic is Topic.SETUP_STRING_LIST]
    assert said == [
        (
            "setup: converters = 'float8' in [model] is a string: read as ['float8'], split at "
            "commas as torchtitan splits it"
        )
    ]
    assert len(said[0]) <= LINE


def test_a_calibration_with_an_unknown_top_level_key_is_refused_naming_file_and_key(
    cli, tmp_path, calibration_data
):
    path = written(tmp_path, calibration_data | {"gemm_tables": []})
    line = one_line(cli("estimate", "--calibration", path, "--shape", "4096,4096,4096"), path)
    assert path in line and "unknown top-level key 'gemm_tables'" in line


def test_a_calibration_of_another_torch_says_which_torch_its_bytes_are_of(
    cli, tmp_path, calibration_data
):
    data = json.loads(json.dumps(calibration_data))
    data["environment"]["torch"] = "2.11.0"
    path = written(tmp_path, data)
    shown = cli("estimate", "--calibration", path, "--shape", "4096,4096,4096", "--show-all")
    assert shown.exit_code == 0, shown.output
    assert "traffic from generated code: torch 2.11.0" in shown.output


def test_a_budget_cut_calibration_with_a_zero_floor_answers(cli, tmp_path, calibration_data):
    """A kernel-time fit over too few sizes falls back to the bandwidth through the origin:
    a floor of 0 s, which the band used to refuse with a range naming no file or field."""
    data = json.loads(json.dumps(calibration_data))
    for kind in data["kernel_time"]["kinds"].values():
        kind["floor_s"] = 0.0
    data["kernel_time"]["pooled"]["floor_s"] = 0.0
    result = cli("estimate", "--calibration", written(tmp_path, data), "--shape", "4096,4096,4096")
    assert result.exit_code == 0, result.output
    assert "4096x4096x4096" in result.output


@pytest.mark.parametrize("second", [["--gpu", "h200"], ["--gpu=h200"]])
def test_an_option_given_twice_is_refused(cli, second):
    line = one_line(cli("estimate", "--gpu", "h100", *second, "--shape", "4096,4096,4096"))
    assert line == "Error: --gpu given 2 times: give it once"


def test_a_repeatable_option_may_repeat(cli):
    result = cli("estimate", "--shape", "4096,4096,4096", "--shape", "8192,8192,8192")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("columns", [80, 100])
def test_show_all_fits_the_terminal_s_columns(cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    for args in (
        ("--model", "llama3-8b", "--tokens", "8192"),
        ("--shape", "4096,4096,4096", "--shape", "1024,8192,2048"),
    ):
        result = cli("estimate", "--gpu", "h100", *args, "--show-all")
        assert result.exit_code == 0, result.output
        commands = ("f8roof ", "&& ", "--")
        wide = [
            line
            for line in result.output.splitlines()
            if len(line) > columns
            and not line.lstrip().startswith(commands)
            and not line.endswith("\\")
        ]
        assert not wide, wide


def _literal_length(node: ast.expr, placeholder: int) -> int | None:
    """A message's length with each interpolated value counted `placeholder` characters."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return len(node.value)
    if isinstance(node, ast.JoinedStr):
        return sum(
            len(v.value) if isinstance(v, ast.Constant) else placeholder for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = (_literal_length(n, placeholder) for n in (node.left, node.right))
        return None if left is None or right is None else left + right
    return None


BUILTIN_ERRORS = {"ValueError", "TypeError", "RuntimeError", "KeyError", "AttributeError"}


def test_no_one_line_error_runs_past_120_characters():
    """Every message the library raises as an error, written out in the source (a value in
    it counted as 8 characters), fits a line of 120."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            func = node.exc.func
            name = getattr(func, "id", getattr(func, "attr", ""))
            if not name.endswith("Error") or name in BUILTIN_ERRORS or not node.exc.args:
                continue
            length = _literal_length(node.exc.args[0], 8)
            if length is not None and length > LINE:
                long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} ({length})")
    assert not long, long


def test_an_out_name_that_is_not_utf8_is_written(tmp_path):
    from conftest import invoke_cli

    name = str(tmp_path) + "/\udcff.csv"  # the byte 0xff as the file system hands it to Python
    result = invoke_cli("estimate", "--shape", "4096,4096,4096", "--out", name)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "\udcff.csv").is_file()


def test_setup_refuses_fsdp_1_beside_it_as_it_refuses_fsdp_8(tmp_path):
    from conftest import invoke_cli

    setup = tmp_path / "s.toml"
    setup.write_text(SETUP.replace('"float8"', '["float8"]'))
    for degree in ("1", "8"):
        result = invoke_cli("estimate", "--setup", str(setup), "--fsdp", degree)
        assert "drop --tp, --ep, --fsdp, --recompute" in one_line(result)


def test_report_refuses_a_step_no_gpu_can_run_as_estimate_does(tmp_path):
    from conftest import invoke_cli

    args = ("--model", "llama3-8b", "--tokens", "8192", "--step-ms", "1")
    refusals = [
        one_line(invoke_cli("estimate", *args)),
        one_line(invoke_cli("report", *args, "--out", str(tmp_path / "r.md"))),
    ]
    assert refusals[0] == refusals[1] and "shorter than its bf16 gemms" in refusals[0]


def test_a_float8_all_gather_without_fsdp_is_said_to_do_nothing():
    text = SETUP.replace('"float8"', '["float8"]') + (
        "[parallelism]\ndata_parallel_shard_degree = 1\n"
        "[float8]\nenable_fsdp_float8_all_gather = true\n"
    )
    setup = parse_setup(text)
    assert not setup.run.float8_all_gather
    said = [n for n in setup.run.assumptions if n.topic is Topic.FLOAT8_ALL_GATHER_UNUSED]
    assert len(said) == 1 and "does nothing" in sentence(said[0])


# --- each input as torchtitan runs it, or refused naming it: the CLI, a setup file, the API -----

LLAMA_SETUP = """[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]
[training]
local_batch_size = 1
seq_len = 8192
compile = true
[parallelism]
data_parallel_shard_degree = 8
"""
MODEL = ("--model", "llama3-8b", "--tokens", "8192")


def _cli(*args):
    from conftest import invoke_cli

    return invoke_cli(*args)


def _setup(tmp_path, text: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def _api_refusal(call) -> F8RoofError:
    with pytest.raises(F8RoofError) as info:
        call()
    return info.value


@pytest.mark.parametrize("watts", ["²", "¹", "³", "٥٠٠", "５００"])
def test_a_power_limit_in_other_digits_is_refused_naming_the_gpu(watts, tmp_path):
    """int() fails on '²' and takes '٥٠٠' as 500: only ASCII digits are a power limit."""
    import f8roof

    gpu = f"h100@{watts}w"
    assert "--gpu" in one_line(_cli("estimate", "--gpu", gpu, "--shape", "64,64,64"))
    assert "--gpu" in one_line(_cli("plot", "--gpu", gpu, "--out", str(tmp_path / "p.png")))
    setup = _setup(tmp_path, LLAMA_SETUP + f'[f8roof]\ngpu = "{gpu}"\n')
    assert "gpu in [f8roof]" in one_line(_cli("estimate", "--setup", setup), setup)
    error = _api_refusal(lambda: f8roof.estimate_shapes([(64, 64, 64)], gpu=gpu))
    assert error.parameters == ("gpu",) and "ASCII" in str(error)


@pytest.mark.parametrize("more", [(), ("--fsdp", "8")], ids=["alone", "with fsdp"])
def test_cp_0_is_refused_as_a_degree_not_divided_by(more, tmp_path):
    for command in (("estimate",), ("report", "--out", str(tmp_path / "r.md"))):
        line = one_line(_cli(*command, *MODEL, "--cp", "0", *more))
        assert "--cp must be a positive integer (got 0)" in line


@pytest.mark.parametrize("recipe, gpu", [("rowwise", "h100"), ("mxfp8", "b200"), ("nvfp4", "b200")])
def test_a_float8_all_gather_beside_another_recipe_than_tensorwise_is_refused(recipe, gpu):
    """torchao gathers float8 weights for tensorwise only: the setup path and compare refuse
    it, and so do estimate and the API."""
    import f8roof

    args = (*MODEL, "--gpu", gpu, "--fsdp", "8", "--float8-all-gather", "--recipe", recipe)
    line = one_line(_cli("estimate", *args))
    assert "--float8-all-gather needs --recipe tensorwise" in line and recipe in line
    error = _api_refusal(
        lambda: f8roof.answer_model(
            "llama3-8b", 8192, gpu=gpu, fsdp=8, float8_all_gather=True, recipe=recipe
        )
    )
    assert "float8_all_gather" in error.parameters
    assert _cli("estimate", *MODEL, "--fsdp", "8", "--float8-all-gather").exit_code == 0


@pytest.mark.parametrize(
    "args, name",
    [(("--microbatches", "4"), "--microbatches"), (("--pp-schedule", "GPipe"), "--pp-schedule")],
)
def test_a_pipeline_option_without_a_pipeline_is_refused(args, name):
    import f8roof

    assert f"{name} shapes a pipeline: give --pp 2 or more" in one_line(
        _cli("estimate", *MODEL, *args)
    )
    keyword = name.removeprefix("--").replace("-", "_")
    value: object = 4 if keyword == "microbatches" else "GPipe"
    error = _api_refusal(lambda: f8roof.answer_model("llama3-8b", 8192, **{keyword: value}))
    assert keyword in error.parameters
    assert _cli("estimate", *MODEL, "--pp", "2", *args).exit_code == 0


def test_an_empty_filter_entry_keeps_every_linear_as_torchtitans_substring_rule_does(tmp_path):
    """`"" in fqn` is true for every fqn: a TOML list or the API's [""] keeps every linear in
    bf16; the command line's '' is a comma list with no entry (torchtitan's string_list drops
    blanks), so it converts every linear."""
    import f8roof

    setup = _setup(tmp_path, LLAMA_SETUP + '[float8]\nfilter_fqns = [""]\n')
    out = tmp_path / "o.json"
    result = _cli("estimate", "--setup", setup, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["summary"]["speedup"] == pytest.approx(1.0)
    api = f8roof.answer_model("llama3-8b", 8192, filter_fqns=[""])
    assert api.step.as_run.speedup == pytest.approx(1.0)
    assert f8roof.answer_model("llama3-8b", 8192, filter_fqns=[]).step.as_run.speedup > 1.05
    cli = _cli("estimate", *MODEL, "--filter-fqns", "", "--out", str(out))
    assert cli.exit_code == 0 and "as torchtitan converts (every linear)" in cli.output


def test_the_nvfp4_tail_is_no_float8_filter(tmp_path):
    setup = _setup(tmp_path, LLAMA_SETUP + '[float8]\nfilter_fqns = ["nvfp4_bf16_tail"]\n')
    line = one_line(_cli("estimate", "--setup", setup), setup)
    assert "filter_fqns 'nvfp4_bf16_tail' in [float8]" in line and "matches no linear" in line
    line = one_line(_cli("estimate", *MODEL, "--filter-fqns", "nvfp4_bf16_tail"))
    assert "--filter-fqns nvfp4_bf16_tail" in line and "not --recipe tensorwise's" in line
    args = (*MODEL, "--gpu", "b200", "--recipe", "mxfp8", "--filter-fqns", "nvfp4_bf16_tail")
    assert "layers.27-31" in _cli("estimate", *args).output


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda t: t.replace('converters = ["float8"]', "converters = []"), "converts nothing"),
        (lambda t: t.replace("compile = true", "compile = false"), "times are the compiled"),
    ],
    ids=["converters []", "compile false"],
)
def test_what_the_setup_runs_differently_is_said_in_the_default_view(edit, said, tmp_path):
    result = _cli("estimate", "--setup", _setup(tmp_path, edit(LLAMA_SETUP)))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note: setup:")]
    assert len(notes) == 1 and said in notes[0] and all(len(n) <= LINE for n in notes)


def test_async_tp_without_compile_is_refused_as_torchtitan_refuses_it(tmp_path):
    text = LLAMA_SETUP.replace("compile = true", "compile = false").replace(
        "data_parallel_shard_degree = 8",
        "data_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n"
        "enable_async_tensor_parallel = true",
    )
    setup = _setup(tmp_path, text)
    assert "enable_async_tensor_parallel without compile" in one_line(
        _cli("estimate", "--setup", setup), setup
    )
    compiled = _setup(tmp_path, text.replace("compile = false", "compile = true"))
    assert _cli("estimate", "--setup", compiled).exit_code == 0


def test_fsdp_off_and_no_fsdp_are_one_run_for_memory_on_the_cli_and_the_api(tmp_path):
    """The API's default is the CLI's (no FSDP); a run that does not fit is answered, not
    refused, with what would fit: 70B's states need FSDP."""
    import f8roof

    outs = []
    for i, more in enumerate(((), ("--fsdp", "1"))):
        out = tmp_path / f"{i}.json"
        result = _cli("estimate", "--model", "llama3-70b", "--tokens", "8192", *more, "--out", out)
        assert result.exit_code == 0 and "neither fits" in result.output, result.output
        assert "bf16 fits at FSDP" in result.output
        outs.append(json.loads(out.read_text())["summary"]["memory"])
    assert outs[0]["bf16_peak_bytes"] == outs[1]["bf16_peak_bytes"]
    api = f8roof.answer_model("llama3-70b", 8192)
    assert (
        api.memory is not None and api.memory.estimate.bf16.peak_bytes == outs[0]["bf16_peak_bytes"]
    )
    assert api.memory.fsdp_fits is not None and api.memory.fsdp_fits[0] >= 2


def test_a_run_that_fits_with_more_recompute_names_that_recompute():
    """llama3-8b, 32k tokens a rank over FSDP 8: no recompute does not fit; the answer names
    the cheapest mode that does, and that mode's own answer fits."""
    args = ("--model", "llama3-8b", "--tokens", "32768", "--fsdp", "8")
    lines = _cli("estimate", *args).output.splitlines()
    assert "neither fits" in next(line for line in lines if "peak memory" in line)
    hint = next(line for line in lines if line.startswith("  cheapest recompute that fits: "))
    mode = hint.split("bf16 ")[1].split(",")[0]
    assert mode in ("selective", "full")
    again = _cli("estimate", *args, "--recompute", mode).output
    assert "fits" not in next(line for line in again.splitlines() if "peak memory" in line)


def test_accumulation_global_batch_and_replicas_meet_one_bound_each(tmp_path):
    import f8roof

    line = one_line(_cli("estimate", *MODEL, "--accumulation", "1000000000000"))
    assert "--accumulation makes" in line and "more than 2^32" in line
    error = _api_refusal(lambda: f8roof.answer_model("llama3-8b", 8192, accumulation=10**12))
    assert "accumulation" in error.parameters
    big = _setup(
        tmp_path,
        LLAMA_SETUP.replace("seq_len = 8192", "seq_len = 8192\nglobal_batch_size = 80000000"),
    )
    assert "global_batch_size makes" in one_line(_cli("estimate", "--setup", big), big)
    assert _cli("estimate", *MODEL, "--accumulation", "4").exit_code == 0
    replicas = LLAMA_SETUP.replace(
        "data_parallel_shard_degree = 8",
        "data_parallel_shard_degree = 8\ndata_parallel_replicate_degree = 100000",
    )
    path = _setup(tmp_path, replicas)
    line = one_line(_cli("estimate", "--setup", path), path)
    assert (
        "data_parallel_replicate_degree 100000 x data_parallel_shard_degree 8 ranks exceed" in line
    )
    assert "--fsdp 1000000 exceeds 262144" in one_line(
        _cli("estimate", *MODEL, "--fsdp", "1000000")
    )


def test_a_context_parallel_shard_below_torchs_split_is_refused(tmp_path):
    line = one_line(_cli("estimate", *MODEL, "--cp", "4096"))
    assert line.startswith("Error: --cp 4096 leaves 2 of 8192 tokens per rank")
    assert _cli("estimate", *MODEL, "--cp", "32", "--fsdp", "8").exit_code == 0  # 256 a rank
    setup = _setup(
        tmp_path,
        LLAMA_SETUP.replace(
            "data_parallel_shard_degree = 8",
            "data_parallel_shard_degree = 1\ncontext_parallel_degree = 128",
        ),
    )
    assert "context_parallel_degree 128 leaves 64 of 8192" in one_line(
        _cli("estimate", "--setup", setup), setup
    )


def test_filter_compare_refuses_the_step_estimate_refuses():
    args = (*MODEL, "--step-ms", "1e-9")
    refusal = one_line(_cli("estimate", *args))
    assert one_line(_cli("filter-compare", *args)) == refusal
    assert "shorter than its bf16 gemms" in refusal


def test_a_filter_that_matches_no_linear_is_noted_in_the_default_view(tmp_path):
    result = _cli("estimate", *MODEL, "--filter-fqns", "OUTPUT,.*,layers.99.,output")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note: filter_fqns")]
    named = [n.split("'")[1] for n in notes]
    assert named == ["OUTPUT", ".*", "layers.99."] and all(len(n) <= LINE for n in notes)
    setup = _setup(tmp_path, LLAMA_SETUP + '[float8]\nfilter_fqns = ["output", "layers.40."]\n')
    from_file = _cli("estimate", "--setup", setup)
    assert "note: filter_fqns entry 'layers.40.' is a substring of no linear" in from_file.output


def test_a_kernel_without_its_class_beside_classed_ones_is_refused(tmp_path):
    """One kernel lacking the class the file's others carry is a damaged file, refused naming
    the field; a file from before kernel classes (none has one) still loads."""
    from f8roof.calibration.shipped import shipped_calibration
    from f8roof.hardware.presets import resolve_gpu

    data = json.loads(shipped_calibration(resolve_gpu("h100")).read_text())
    del data["variants"][1]["kernel_sets"][0]["kernels"][0]["class"]
    path = written(tmp_path, data)
    line = one_line(_cli("estimate", "--calibration", path, "--shape", "4096,4096,4096"), path)
    assert "kernels[0].class: missing, where the file's other kernels carry theirs" in line
    for variant in data["variants"]:
        for kernel_set in variant["kernel_sets"]:
            for kernel in kernel_set["kernels"]:
                kernel.pop("class", None)
    older = written(tmp_path, data)
    assert _cli("estimate", "--calibration", older, "--shape", "4096,4096,4096").exit_code == 0


@pytest.mark.parametrize("column", ["recipe", "before", "gpu"])
def test_a_shapes_file_column_the_request_sets_is_refused(column, tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(f"M,K,N,{column}\n4096,4096,4096,rowwise\n")
    line = one_line(_cli("estimate", "--shapes-file", str(path)), str(path))
    assert f"has a '{column}' column" in line and "never per row" in line
    path.write_text("M,K,N,note\n4096,4096,4096,mine\n")
    assert _cli("estimate", "--shapes-file", str(path)).exit_code == 0


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"num_local_experts": 1, "num_experts_per_tok": 2}, "top_k 2 exceeds the 1 experts"),
        ({"num_local_experts": None}, "num_local_experts is null"),
        ({"num_experts_per_tok": None}, "num_experts_per_tok is null"),
    ],
    ids=["one expert, top 2", "experts null", "top_k null"],
)
def test_a_mixtral_config_routes_as_written_or_is_refused(fields, message, tmp_path):
    config = {
        "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
        "vocab_size": 32000, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, **fields,
    }  # fmt: skip
    path = written(tmp_path, config)
    assert message in one_line(_cli("estimate", "--model", path, "--tokens", "8192"), path)


@pytest.mark.parametrize(
    "extra, message",
    [
        ('[activation_checkpoint]\nmode = "FULL"\n', "must be one of none, full, selective"),
        ('[activation_checkpoint]\nmode = "Selective"\n', "(got 'Selective')"),
    ],
)
def test_activation_checkpoint_mode_is_case_sensitive_as_torchtitans(extra, message, tmp_path):
    path = _setup(tmp_path, LLAMA_SETUP + extra)
    assert message in one_line(_cli("estimate", "--setup", path), path)


def test_a_known_section_that_is_no_table_is_refused_naming_it(tmp_path):
    path = _setup(tmp_path, "job = 5\n" + LLAMA_SETUP)
    assert "'job' in" in one_line(_cli("estimate", "--setup", path), path)
    fine = _setup(tmp_path, LLAMA_SETUP + '[job]\ndump_folder = "./outputs"\n')
    assert _cli("estimate", "--setup", fine).exit_code == 0


def test_help_prints_its_percentages_once():
    text = _cli("estimate", "--help").output
    assert "%%" not in text and "15%" in text


def test_seq_len_and_local_batch_size_make_the_tokens_as_torchtitan_lays_them_out(tmp_path):
    """torchtitan#3914's run (sequences of 2048, local batch 32) from the command line, the
    API and a setup file alike; inconsistent combinations refused in one line."""
    import f8roof

    common = ("--model", "llama3-8b", "--gpu", "gb200", "--fsdp", "4")
    outs = {}
    for name, more in (
        ("pair", ("--seq-len", "2048", "--local-batch-size", "32")),
        ("tokens", ("--tokens", "65536", "--seq-len", "2048")),
    ):
        out = tmp_path / f"{name}.json"
        result = _cli("estimate", *common, *more, "--out", str(out))
        assert result.exit_code == 0, result.output
        outs[name] = json.loads(out.read_text())["summary"]
    assert outs["pair"]["bf16_s"] == outs["tokens"]["bf16_s"]
    assert "S = 2048" in json.dumps(outs["pair"])  # attention at its sequences
    api = f8roof.answer_model("llama3-8b", seq_len=2048, local_batch_size=32, gpu="gb200", fsdp=4)
    assert api.step.as_run.bf16_s == pytest.approx(outs["pair"]["bf16_s"])
    file = (
        LLAMA_SETUP.replace("local_batch_size = 1", "local_batch_size = 32")
        .replace("seq_len = 8192", "seq_len = 2048")
        .replace("data_parallel_shard_degree = 8", "data_parallel_shard_degree = 4")
    )
    out = tmp_path / "file.json"
    setup = _setup(tmp_path, file + '[f8roof]\ngpu = "gb200"\n')
    assert _cli("estimate", "--setup", setup, "--out", str(out)).exit_code == 0
    assert "S = 2048" in out.read_text()
    for more, message in (
        (("--seq-len", "2048", "--local-batch-size", "32", "--tokens", "1000"), "is not --local"),
        (("--tokens", "1000", "--seq-len", "2048"), "no whole sequences of --seq-len 2048"),
        (("--seq-len", "2048"), "give both, or --tokens"),
        (("--tokens", "16382", "--seq-len", "8191", "--tp", "2"), "does not split over --tp 2"),
    ):
        assert message in one_line(_cli("estimate", "--model", "llama3-8b", *more))
    error = _api_refusal(lambda: f8roof.answer_model("llama3-8b", 1000, seq_len=2048))
    assert error.parameters == ("tokens", "seq_len")


def test_the_float8_recipes_default_is_named_with_the_layout_it_belongs_to():
    from f8roof.traffic.recipes import canonical_name

    text = " ".join(_cli("estimate", "--help").output.split())
    assert "float8: rowwise, the default of torchtitan's 2026 Python Float8LinearConverter" in text
    assert "[float8] defaulted to tensorwise" in text
    assert canonical_name("float8") == "rowwise"
    setup = parse_setup(LLAMA_SETUP)
    assert setup.recipe == "tensorwise"
    said = [sentence(n) for n in setup.run.assumptions if "recipe_name" in sentence(n)]
    assert len(said) == 1 and "tensorwise, in the TOML layouts" in said[0]
    assert "2026 Python Float8LinearConverter defaults to rowwise" in said[0]
