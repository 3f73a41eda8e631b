"""The edges of the features of issue 26: every input honoured or refused in one line naming
its field or option (exit 2), every file checked on load, no inf or NaN from a file accepted.
One test per class of case, through the CLI where a user meets it."""

import json
import math
import re
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


# --- calibration files: every field checked on load ------------------------------------------


def _shipped() -> dict:
    from f8roof.calibrations import shipped_calibration
    from f8roof.models.hardware import resolve_gpu

    return json.loads(shipped_calibration(resolve_gpu("h100")).read_text())


def _kernel(d):
    return d["variants"][1]["kernel_sets"][0]["kernels"][0]


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["datasheet_gemm"]["dtypes"]["bf16"].update(tiles=[]), "bf16.tiles: empty"),
        (
            lambda d: d["ceilings"].update(copy_bandwidth_bytes_per_s=1e-300),
            "ceilings.copy_bandwidth_bytes_per_s",
        ),
        (
            lambda d: d["kernel_time"]["pooled"].update(bandwidth_bytes_per_s=1e-3),
            "kernel_time.pooled.bandwidth_bytes_per_s",
        ),
        (lambda d: d["ceilings"].update(launch_floor_s=1e6), "ceilings.launch_floor_s"),
        (lambda d: d["kernel_time"]["pooled"].update(floor_s=1e6), "pooled.floor_s"),
        (lambda d: _kernel(d).update(kind="bogus"), "kernels[0].kind"),
        (lambda d: _kernel(d).update(graph="sideways"), "kernels[0].graph"),
        (lambda d: _kernel(d).update(role="chef"), "kernels[0].role"),
        (lambda d: _kernel(d).update(role="weight,input"), "kernels[0].role"),
        (lambda d: d["environment"].update(sm_count=0), "environment.sm_count"),
        (lambda d: d["variants"][1]["kernel_sets"][0].update(shapes=[]), "shapes: empty"),
        (lambda d: d["fit_shapes"].append(d["fit_shapes"][0]), "fit_shapes: a shape appears"),
        (lambda d: d["kernel_time"]["kinds"].update(bogus=d["kernel_time"]["pooled"]), "bogus"),
    ],
    ids=[
        "empty tiles",
        "tiny bandwidth",
        "tiny kernel bandwidth",
        "launch floor of 10^6 s",
        "kernel floor of 10^6 s",
        "kernel kind",
        "graph",
        "role",
        "roles out of order",
        "sm 0",
        "kernel set without shapes",
        "a fit shape twice",
        "kernel-time kind",
    ],
)
def test_a_damaged_calibration_is_refused_naming_the_field(edit, field, tmp_path):
    data = _shipped()
    edit(data)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    refused(run("estimate", "--calibration", path, "--shape", "4096,4096,4096"), field)


def test_a_key_twice_in_a_file_is_refused(tmp_path):
    path = tmp_path / "twice.json"
    text = json.dumps(_shipped())
    path.write_text(text.replace('"kind": "traffic"', '"kind": "traffic", "kind": "measured"', 1))
    refused(run("estimate", "--calibration", path, "--shape", "64,64,64"), "'kind' appears twice")


def test_an_estimate_that_is_not_finite_is_refused_not_printed():
    from f8roof.answer import check_finite
    from f8roof.errors import F8RoofError
    from f8roof.estimate import estimate
    from f8roof.resolve import Request, resolve

    resolved = resolve(Request(gpu="h100"))
    frame = estimate([(4096, 4096, 4096)], resolved.config, ranges=True)
    check_finite(frame, resolved)
    frame.loc[0, "speedup"] = float("inf")
    with pytest.raises(F8RoofError, match="speedup at 4096x4096x4096 is inf"):
        check_finite(frame, resolved)


# --- the sharded block file --------------------------------------------------------------------


@pytest.fixture(scope="module")
def blocks() -> dict:
    from f8roof.calibration.block_file import SHIPPED

    return json.loads(SHIPPED.read_text())


def _fit(data: dict, recipe="tensorwise") -> dict:
    return next(
        f
        for f in data["fits"]
        if f["capture"]["recipe"] == recipe
        and f["capture"]["spec"]["parallel"]["tp"] == 2
        and f["capture"]["spec"]["name"] == "llama3-8b"
        and f["capture"]["spec"]["parallel"]["recompute"] == "none"
        and f["capture"]["spec"]["tokens"] == f["capture"]["spec"]["seq_len"]
    )


def _segments(data):
    return _fit(data)["segments"]


def _duplicate(data):
    twin = json.loads(json.dumps(_fit(data, recipe=None)))
    twin["capture"]["recipe"] = "tensorwise"
    data["fits"].insert(0, twin)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: [k.update(count=["-3", "0"]) for s in _segments(d) for k in s["kernels"]],
            "count is -3",
        ),
        (
            lambda d: _segments(d)[0]["kernels"][0].update(bytes_read=["1" + "0" * 23, "0"]),
            "bytes_read is 1" + "0" * 23,
        ),
        (lambda d: _segments(d)[0]["kernels"][0].update(kind="bogus"), "kind 'bogus'"),
        (lambda d: _segments(d)[0]["gemms"][0].update(dtype="float3"), "dtype 'float3'"),
        (lambda d: _segments(d)[0]["gemms"][0].update(m=["0", "0"]), "m is 0"),
        (lambda d: _fit(d)["checks"][0].update(kernel_bytes_error=math.nan), "kernel_bytes_error"),
        (_duplicate, "two fits for llama3-8b TP 2"),
    ],
    ids=["negative count", "1e23 bytes", "kind", "dtype", "gemm dim 0", "NaN check", "twice"],
)
def test_a_damaged_block_file_is_refused_naming_the_fit(edit, message, blocks, tmp_path):
    from f8roof.calibration import block_file

    data = json.loads(json.dumps(blocks))
    edit(data)
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(block_file.BlockFileError, match=re.escape(message)):
        block_file.BlockFits.load(path)


def test_the_estimate_refuses_a_damaged_shipped_block_file(blocks, tmp_path, monkeypatch):
    from f8roof.calibration import block_file

    data = json.loads(json.dumps(blocks))
    _duplicate(data)
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(block_file, "SHIPPED", path)
    for cached in (block_file._shipped_index, block_file.shipped_fit):
        cached.cache_clear()
    try:
        result = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2")
    finally:
        monkeypatch.undo()
        for cached in (block_file._shipped_index, block_file.shipped_fit):
            cached.cache_clear()
    refused(result, "two fits for llama3-8b TP 2")
