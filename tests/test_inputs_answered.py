"""Inputs a new user tries that used to pass without a word: each is answered or refused in one
line of at most 120 characters."""

import ast
import json
from pathlib import Path

import pytest

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
