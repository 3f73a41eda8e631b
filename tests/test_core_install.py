"""The estimator runs without torch: `pip install f8roof` gives estimate, models, plots."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
NO_TORCH = "import sys; sys.modules.update(torch=None, triton=None, torchao=None); "


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_estimate_without_torch():
    result = run(
        "from f8roof.cli import main; "
        "main(['estimate', '--gpu', 'h100', '--shape', '4096,4096,4096'])"
    )
    assert result.returncode == 0, result.stderr
    assert "4096x4096x4096  tensorwise" in result.stdout and "convert" in result.stdout


def test_model_estimate_without_torch():
    result = run(
        "from f8roof.cli import main; "
        "main(['estimate', '--model', 'llama3-8b', '--tokens', '8192', '--recipe', 'all'])"
    )
    assert result.returncode == 0, result.stderr
    assert "step: x" in result.stdout and "as torchtitan converts" in result.stdout


@pytest.mark.parametrize("command", [["compare"], ["calibrate", "--out", "x.json"]])
def test_compiling_commands_say_what_they_need(command, tmp_path):
    args = (
        [*command[:-1], str(tmp_path / command[-1])] if command[-1].endswith(".json") else command
    )
    result = run(f"from f8roof.cli import main; main({args!r})")
    assert result.returncode == 2
    assert "compiles with torch: pip install 'f8roof[profile]'" in result.stderr
    assert "Traceback" not in result.stderr
