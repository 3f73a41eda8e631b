"""An estimate from a shipped calibration imports only what it uses: sympy, scipy and torch
serve compare, calibrate, codegen and the public fit, and pandas the Python API and the
Parquet and JSON files; each costs a model answer half a second or so of a fresh process
(benchmarks/model_answer_cost.py times it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sympy", "scipy", "torch", "pandas")
RUN_AND_LIST = (
    "import runpy, sys\n"
    "sys.argv = ['f8roof', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('f8roof', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as e:\n"
    "    assert not e.code, e.code\n"
    f"print('heavy:', *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
)


def heavy_imports(*args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("heavy:"))
    return line.split()[1:]


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "--gpu", "h100", "--model", "llama3-8b", "--tokens", "8192"),
        ("estimate", "--gpu", "h100", "--shape", "4096,4096,4096"),
        ("estimate", "--model", "llama3-8b", "--tokens", "8192", "--recompute", "full"),
    ],
    ids=["model", "shape", "full-recompute"],
)
def test_an_estimate_on_the_terminal_imports_no_sympy_scipy_torch_or_pandas(args):
    assert heavy_imports(*args) == []


def test_a_csv_or_markdown_file_is_written_without_pandas(tmp_path):
    model = ("--model", "llama3-8b", "--tokens", "8192")
    for question, name in ((("--shape", "4096,4096,4096"), "x.csv"), (model, "m.md")):
        out = str(tmp_path / name)
        assert heavy_imports("estimate", "--gpu", "h100", *question, "--out", out) == []


def test_import_f8roof_is_light():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys, f8roof; print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.stdout.strip() == "[]", done.stderr
