"""The benchmark scripts run (tiny sizes): a benchmark that no longer runs is a claim no one
can check. Their figures are printed, not asserted."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_estimate_throughput_runs():
    assert "shapes/s" in run("estimate_throughput.py", "--shapes", "1000", "--repeats", "1")


def test_cli_throughput_runs():
    assert "shapes/s" in run("cli_throughput.py", "--shapes", "1000", "--repeats", "1")


@pytest.mark.slow
def test_compare_cost_runs_one_shape():
    pytest.importorskip("triton")
    pytest.importorskip("torchao")
    out = run("compare_cost.py", "--shape", "256,512,1024", "--one-shape")
    assert "torchao:tensorwise on h100, one shape" in out
    assert "disagreements 0" in out


@pytest.mark.slow
def test_block_codegen_cost_runs_small():
    pytest.importorskip("triton")
    out = run("block_codegen_cost.py", "--small", "--recipe", "bf16", "--tp", "2")
    assert "small bf16 tp=2" in out and "codegen" in out and "collectives" in out


def test_model_answer_cost_runs():
    out = run("model_answer_cost.py", "--repeat", "1")
    assert "model answer from shipped files: first" in out and "fresh process" in out


def test_plan_search_cost_runs_a_small_search():
    out = run("plan_search_cost.py", "--only", "gpt2:h100:2", "--seq-len", "1024")
    assert "layouts" in out and "re-tuned" in out
