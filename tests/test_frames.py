"""Output files: one writer per format, (rows, path) -> None, atomic; Parquet keeps every value,
CSV every byte count and string and every other float to float32's precision."""

import errno
import json

import numpy as np
import pandas as pd
import pytest

from f8roof.columns import Columns, Labels
from f8roof.engine.estimate import estimate
from f8roof.engine.resolve import Request, resolve
from f8roof.errors import F8RoofError
from f8roof.renderers import frames as render
from f8roof.renderers.frames import RENDERERS, renderer_for, write_csv, write_parquet


@pytest.fixture(scope="module")
def frame():
    config = resolve(Request(gpu="h100", no_calibration=True)).config
    # aligned and misaligned shapes: fp8_reason is '' for some rows, a sentence for others
    shapes = [(4096, 4096, 4096), (1000, 4096, 4096), (4096, 100, 10), (16, 16, 16)]
    frame = estimate(shapes, config)
    assert isinstance(dict(frame.items())["recipe"], Labels) and set(frame["fp8_reason"]) > {""}
    return frame


def test_one_signature_for_every_format(tmp_path, frame):
    assert set(RENDERERS) == {".csv", ".parquet", ".json", ".md"}
    for suffix, writer in RENDERERS.items():
        out = tmp_path / f"x{suffix}"
        assert renderer_for(str(out)) is writer and writer(frame, out) is None
        assert out.stat().st_size > 0
    assert [r["M"] for r in json.loads((tmp_path / "x.json").read_text())] == [4096, 1000, 4096, 16]
    with pytest.raises(F8RoofError, match=r"use a \.csv, \.parquet, \.json or \.md file name"):
        renderer_for("x.xlsx")


def test_csv_round_trip(tmp_path, frame):
    """Byte counts come back exactly (integers), other floats as the float32 nearest them."""
    out = tmp_path / "x.csv"
    write_csv(frame, out)
    back = pd.read_csv(out, keep_default_na=False)
    assert list(back.columns) == list(frame.columns)
    for column in frame.columns:
        ours = frame[column]
        if "_bytes" in column:
            assert (back[column].to_numpy(np.float64) == ours).all(), column
            assert back[column].dtype == np.int64, column
        elif ours.dtype == np.float64:
            nearest = ours.astype(np.float32)
            assert (back[column].to_numpy(np.float32) == nearest).all(), column
        else:
            assert back[column].astype(str).tolist() == ours.astype(str).tolist(), column
    assert back["fp8_reason"].tolist()[1] == "M not a multiple of 16"


def test_csv_values_read_back_as_the_estimate_to_float32_precision(tmp_path, monkeypatch):
    """Random shapes, the shipped calibration's columns (some with the same values as another,
    formatted once), in parts on threads: every float reads back as the float32 nearest the
    estimate's (its text within 2**-23 of the value), byte counts and dimensions exactly."""
    rng = np.random.default_rng(37)
    shapes = rng.integers(1, 65536, size=(3000, 3))
    shapes[::2] = shapes[::2] // 16 * 16 + 16
    rows = estimate(shapes, resolve(Request(gpu="h100")).config)
    monkeypatch.setattr(render, "CSV_PART_ROWS", 700)
    monkeypatch.setattr(render, "CSV_THREAD_ROWS", 700)
    sources, _ = render.csv_sources(rows)
    assert len(sources) == len(rows.columns) - 4  # bf16_s, speedup_context*: formatted once
    out = tmp_path / "x.csv"
    write_csv(rows, out)
    back = pd.read_csv(out, keep_default_na=False)
    assert list(back.columns) == rows.columns and len(back) == len(rows)
    floats = 0
    for column in rows.columns:
        ours = rows[column]
        if ours.dtype.kind == "f" and "_bytes" not in column:
            read = back[column].to_numpy(np.float64)
            assert (read.astype(np.float32) == ours.astype(np.float32)).all(), column
            assert (np.abs(read - ours) <= 2.0**-23 * np.abs(ours)).all(), column
            floats += 1
        elif ours.dtype.kind in "fi":
            assert (back[column].to_numpy(np.int64) == ours).all(), column
        else:
            assert back[column].astype(str).tolist() == ours.astype(str).tolist(), column
    assert floats >= 15


def test_csv_text_nan_bool_and_header(tmp_path):
    frame = Columns(
        {
            "M": [1, 2],
            "x": [0.1, np.nan],
            "ok": [True, False],
            "reason": ["", "K, N"],
            "recipe": Labels.repeat("rowwise", 2),
        }
    )
    out = tmp_path / "x.csv"
    write_csv(frame, out)
    assert out.read_text().splitlines() == [
        '"M","x","ok","reason","recipe"',
        '1,0.1,true,"","rowwise"',
        '2,,false,"K, N","rowwise"',  # NaN: an empty field; a comma in a string: quoted
    ]


def test_parquet_keeps_types(tmp_path, frame):
    out = tmp_path / "x.parquet"
    write_parquet(frame, out)
    back = pd.read_parquet(out)
    assert back["recipe"].dtype == "category" and back["recipe"].tolist() == ["tensorwise"] * 4
    assert back["fp8_reason"].tolist() == frame["fp8_reason"].tolist()
    assert back["fp8_ok"].dtype == bool
    pd.testing.assert_frame_equal(
        back.drop(columns=["fp8_reason"]),
        frame.to_frame().drop(columns=["fp8_reason"]),
        check_exact=True,
    )


def test_object_columns_of_mixed_values_become_strings(tmp_path):
    frame = Columns({"M": [1, 2, 3], "note": np.array(["a", 7, None], dtype=object)})
    for writer, out in ((write_csv, tmp_path / "m.csv"), (write_parquet, tmp_path / "m.parquet")):
        writer(frame, out)
    assert pd.read_parquet(tmp_path / "m.parquet")["note"].tolist()[:2] == ["a", "7"]
    assert pd.read_csv(tmp_path / "m.csv")["note"].tolist()[:2] == ["a", "7"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, frame, monkeypatch):
    out = tmp_path / "x.csv"
    out.write_text("old\n")
    real, calls = render._csv_lines, []

    def second_part_fails(sources, which):
        calls.append(len(sources[0]))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "disk full")
        return real(sources, which)

    monkeypatch.setattr(render, "CSV_PART_ROWS", 2)  # 4 rows: two parts
    monkeypatch.setattr(render, "CSV_MAX_THREADS", 1)
    monkeypatch.setattr(render, "_csv_lines", second_part_fails)
    with pytest.raises(F8RoofError, match=f"cannot write {out}: disk full"):
        write_csv(frame, out)
    assert calls == [2, 2] and out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]


def test_an_unwritable_place_is_a_user_error(tmp_path, frame):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for suffix, writer in RENDERERS.items():
        with pytest.raises(F8RoofError, match="cannot write .*file/x"):
            writer(frame, blocker / f"x{suffix}")  # a directory that is a file


def test_written_files_get_ordinary_permissions(tmp_path, frame):
    plain = tmp_path / "plain"
    plain.write_text("")  # what open() gives a new file here (0o666 less the umask)
    for writer, name in ((write_csv, "x.csv"), (write_parquet, "x.parquet")):
        writer(frame, tmp_path / name)
        assert (tmp_path / name).stat().st_mode == plain.stat().st_mode
    (tmp_path / "x.csv").chmod(0o640)
    write_csv(frame, tmp_path / "x.csv")  # a replaced file keeps its permissions
    assert (tmp_path / "x.csv").stat().st_mode & 0o777 == 0o640


def test_csv_slices_on_threads_are_one_file(tmp_path, frame, monkeypatch):
    whole = tmp_path / "whole.csv"
    write_csv(frame, whole)
    monkeypatch.setattr(render, "CSV_PART_ROWS", 1)  # a part per row, on up to three threads
    monkeypatch.setattr(render, "CSV_THREAD_ROWS", 1)
    monkeypatch.setattr(render, "CSV_MAX_THREADS", 3)
    sliced = tmp_path / "sliced.csv"
    write_csv(frame, sliced)
    assert sliced.read_bytes() == whole.read_bytes()
    assert len(whole.read_text().splitlines()) == 1 + len(frame)
    write_csv(frame.head(0), tmp_path / "empty.csv")
    assert (tmp_path / "empty.csv").read_text().startswith('"M","K","N","recipe"')


def test_cli_writes_parquet_and_csv(cli, tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,K,N\n" + "\n".join(f"{m},4096,1024" for m in range(16, 16 * 41, 16)))
    for name in ("x.parquet", "x.csv"):
        result = cli("estimate", "--shapes-file", str(shapes), "--out", str(tmp_path / name))
        assert result.exit_code == 0, result.output
        assert f"wrote 40 rows to {tmp_path / name}" in result.output
    parquet, csv = pd.read_parquet(tmp_path / "x.parquet"), pd.read_csv(tmp_path / "x.csv")
    assert parquet["M"].tolist() == csv["M"].tolist() == list(range(16, 16 * 41, 16))
    assert (
        parquet["speedup_worst"].astype(np.float32) == csv["speedup_worst"].astype(np.float32)
    ).all()


def test_cli_shapes_file_error_is_one_line(cli, tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,K,N\n4096,4096,4096\n4096,4096,4096,5\n")
    result = cli("estimate", "--shapes-file", str(shapes))
    assert result.exit_code == 2
    expected = (
        f"Error: shapes file {shapes}, row 3 has 4 fields, the header 3 (M, K, N): "
        "a value too many, or a comma inside a value?"
    )
    assert result.output.strip().splitlines() == [expected]
    result = cli("estimate", "--shape", "1,2," + "9" * 400)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
