"""The library speaks in its own terms: a message that names one of its parameters marks it
(`f8roof.errors.term("tp")`) and each front end calls it its own way: the command line by its
flag (`--tp`, one table in f8roof/cli/options.py), a setup file by its key
(`tensor_parallel_degree`), the Python API and `str(error)` by the parameter's own name (`tp`).

So no module outside cli/ and renderers/ holds a command-line flag in a string a user can
meet (docstrings and comments may still mention flags: they document), and the same refusal
reads right in each of the three places."""

import ast
import pickle
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import pytest
from conftest import invoke_cli

import f8roof
from f8roof.cli.options import FLAGS
from f8roof.errors import F8RoofError, ParameterError, term
from f8roof.training.setup_file import FILE_KEYS

PACKAGE = Path(__file__).resolve().parents[1] / "f8roof"
WRITERS = ("cli", "renderers")  # the packages that know the command line's words
FLAG = re.compile(r"(?<![\w-])--[a-z]")
LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in WRITERS)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def flags_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant, an f-string's literal parts included, that holds
    a command-line flag; docstrings left out."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and FLAG.search(node.value)
    )


def test_no_library_module_holds_a_command_line_flag():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
        for path in LIBRARY
        for line, text in flags_in(path.read_text())
    ]
    assert not found, "flags in the library's strings (name them with term()):\n" + "\n".join(found)


def test_the_check_finds_flags_in_strings_and_f_strings_not_in_docstrings():
    source = '''"""The module: --tp documents."""
def f(tp):
    """--tp, documented."""
    # --tp in a comment
    a = "--tp"
    b = f"{tp} x --fsdp {tp}"
    c = "tp-parallel, a --- rule, x--y, 3--4"
    return f"{term('tp')} {tp}"
'''
    assert [line for line, _ in flags_in(source)] == [5, 6]


def named_terms() -> set[str]:
    """Every parameter the library names by a literal `term("...")`."""
    names = set()
    for path in LIBRARY:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "term"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def test_every_parameter_the_library_names_has_a_flag_or_a_setup_key():
    named = named_terms()
    assert {"tp", "fsdp", "step_ms", "recipe", "shapes", "implementation"} <= named
    # dp_replicate has no flag: only a setup file sets it (data_parallel_replicate_degree)
    assert not named - set(FLAGS) - set(FILE_KEYS), named - set(FLAGS) - set(FILE_KEYS)


def test_every_flag_in_the_table_is_an_option_of_a_command():
    from f8roof.cli import main

    options = {
        opt
        for command in main.commands.values()
        for param in command.params
        for opt in (*param.opts, *param.secondary_opts)
    }
    assert set(FLAGS.values()) - {"--help"} <= options


def test_an_error_names_its_parameters_three_ways():
    error = F8RoofError(f"{term('tp')} 3 x {term('fsdp')} 2: drop {term('tp')}")
    assert str(error) == error.message == "tp 3 x fsdp 2: drop tp"
    assert error.parameters == ("tp", "fsdp")
    assert error.worded(FLAGS) == "--tp 3 x --fsdp 2: drop --tp"
    assert error.worded({"tp": "tensor_parallel_degree"}) == (
        "tensor_parallel_degree 3 x fsdp 2: drop tensor_parallel_degree"
    )
    assert "\x1f" not in repr(error)
    again = pickle.loads(pickle.dumps(error))  # from a worker process
    assert again.worded(FLAGS) == error.worded(FLAGS) and str(again) == str(error)
    quoted = F8RoofError(f"llama3-8b: {error.marked}")
    assert quoted.worded(FLAGS) == "llama3-8b: --tp 3 x --fsdp 2: drop --tp"
    plain = F8RoofError("no parameter here")
    assert plain.parameters == () and plain.worded(FLAGS) == "no parameter here"


def test_a_parameter_error_carries_its_parameter():
    error = ParameterError("tp", 0, "an int >= 1")
    assert (error.parameter, error.parameters) == ("tp", ("tp",))
    assert str(error) == "tp takes an int >= 1, got 0"


def refused(result) -> str:
    """The one line of a refusal (exit 2, no traceback)."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert len(lines[0]) <= 120 + len("Error: ")
    return lines[0]


def test_the_command_line_names_the_flag():
    line = refused(invoke_cli("estimate", "--model", "llama3-8b", "--tokens", 8192, "--tp", 3))
    assert line.startswith("Error: --tp 3 does not divide ")
    line = refused(invoke_cli("estimate", "--shape", "64,64,64", "--tp", 2))
    assert line == (
        "Error: --tp, --ep, --fsdp, --recompute, --step-ms and --filter-fqns go with --model"
    )
    line = refused(
        invoke_cli(
            "estimate",
            "--shape",
            "64,64,64",
            "--impl",
            "reference",
            "--recipe",
            "mxfp8",
            "--gpu",
            "b200",
        )
    )
    assert "--impl torchao" in line and "implementation" not in line


def test_the_python_api_names_its_argument():
    with pytest.raises(F8RoofError) as refusal:
        f8roof.answer_model("llama3-8b", 8192, tp=3)
    assert str(refusal.value).startswith("tp 3 does not divide ")
    assert refusal.value.parameters == ("tp",) and "--" not in str(refusal.value)
    with pytest.raises(F8RoofError) as refusal:
        f8roof.estimate_shapes(
            [(64, 64, 64)], gpu="b200", recipe="mxfp8", implementation="reference"
        )
    assert "use implementation torchao" in str(refusal.value)


SETUP = """[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]

[training]
local_batch_size = 1
seq_len = 6144

[parallelism]
data_parallel_shard_degree = 8
tensor_parallel_degree = 3
"""


def test_a_setup_file_names_its_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short path: the line's length is the message's
    path = Path("setup.toml")
    path.write_text(SETUP)
    line = refused(invoke_cli("estimate", "--setup", path))
    assert f"setup {path}: tensor_parallel_degree 3 does not divide" in line
    assert "--tp" not in line
    path.write_text(
        SETUP.replace("tensor_parallel_degree = 3", "tensor_parallel_degree = 1")
        + "\n[f8roof]\nnetwork_gbps = 1e9\n"
    )
    line = refused(invoke_cli("estimate", "--setup", path))
    assert line.startswith(f"Error: setup {path}: network_gbps in [f8roof] takes a NIC's line rate")
    assert "--network" not in line


def test_compare_names_the_flags_a_block_refuses():
    pytest.importorskip("torch")
    line = refused(
        invoke_cli("compare", "--model", "llama3-8b", "--tokens", 8192, "--impl", "reference")
    )
    assert line == "Error: --impl apply to one linear, not to compare --model's block"
    line = refused(invoke_cli("compare", "--model", "llama3-8b", "--tokens", 8191, "--tp", 2))
    assert line.startswith("Error: --tokens 8191: sequence parallelism") and "--tp 2" in line
