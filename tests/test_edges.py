"""The edges of the features of issue 26: every input honoured or refused in one line naming
its field or option (exit 2), every file checked on load, no inf or NaN from a file accepted.
One test per class of case, through the CLI where a user meets it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py
import pytest
from click.testing import CliRunner

from f8roof.cli import main


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, *texts: str) -> None:
    """One line, exit 2, naming the problem; no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("warning")]
    assert len(lines) == 1, result.output
    for text in texts:
        assert text in lines[0], result.output


# --- output files --------------------------------------------------------------------------------


def test_an_output_name_too_long_is_refused_and_one_near_the_limit_written(tmp_path):
    refused(
        run("estimate", "--shape", "64,64,64", "--out", tmp_path / ("a" * 300 + ".csv")), "long"
    )
    near = tmp_path / ("b" * 246 + ".csv")  # 250 bytes: its temporary file's name must fit too
    result = run("estimate", "--shape", "64,64,64", "--out", near)
    assert result.exit_code == 0, result.output
    assert near.is_file() and [p.name for p in tmp_path.iterdir()] == [near.name]


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--shape", "64,64,64", "--out"],
        ["plot", "--out"],
        ["report", "--model", "gpt2", "--tokens", "64", "--out"],
    ],
    ids=["estimate", "plot", "report"],
)
def test_an_output_in_a_missing_directory_is_refused_not_created(command, tmp_path):
    name = {"plot": "p.png", "report": "r.md"}.get(command[0], "x.csv")
    target = tmp_path / "missing" / "sub" / name
    refused(run(*command, target), f"no directory {tmp_path / 'missing'}")
    assert not (tmp_path / "missing").exists()


def test_an_output_directory_is_created_only_under_an_existing_one(tmp_path):
    from f8roof.files import OutputError, check_output_dir

    assert check_output_dir(tmp_path / "new") == tmp_path / "new"  # one level: created later
    with pytest.raises(OutputError, match="no directory"):
        check_output_dir(tmp_path / "a" / "b")


def test_an_interrupted_report_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from f8roof.renderers import plot

    out = tmp_path / "r.md"
    assert run("report", "--model", "gpt2", "--tokens", "1024", "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(before) == 4  # the report and its three plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the last plot is drawn

    monkeypatch.setattr(plot, "overhead_share", interrupted)
    result = run("report", "--model", "gpt2", "--tokens", "2048", "--out", out)
    assert result.exit_code != 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporaries


def test_a_model_table_and_its_summary_are_written_as_one_set(tmp_path, monkeypatch):
    from f8roof.renderers import frames

    out = tmp_path / "m.csv"

    def broken(summary):
        raise KeyboardInterrupt

    monkeypatch.setattr(frames, "summary_csv", broken)
    result = run("estimate", "--model", "gpt2", "--tokens", "1024", "--out", out)
    assert result.exit_code != 0 and list(tmp_path.iterdir()) == []
