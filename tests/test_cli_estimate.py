import json
import re

import pandas as pd
import pytest
from conftest import invoke_cli


def run(*args):
    return invoke_cli(*args)


def test_seed_sweep_writes_343_rows(tmp_path):
    out = tmp_path / "x.csv"
    result = run("estimate", "--gpu", "h100", "--sweep", "pr668", "--out", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert len(frame) == 343
    assert set(frame["M"]) == {2**i for i in range(9, 16)}
    assert "breakeven (fitted)" in result.output  # the level decisions are made on
    assert len(result.output.splitlines()) < 80  # 60 rows at most, then where the rest went
    assert "... 283 more rows (all of them: --out)" in result.output


@pytest.mark.parametrize("suffix", [".json", ".md", ".csv"])
def test_output_formats(tmp_path, suffix):
    out = tmp_path / f"x{suffix}"
    result = run(
        "estimate", "--shape", "1024,2048,4096", "--shape", "4096,4096,4096", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if suffix == ".json":
        rows = json.loads(text)
        assert [r["M"] for r in rows] == [1024, 4096] and "speedup_worst" in rows[0]
    elif suffix == ".md":
        assert text.splitlines()[0].startswith("| M | K | N | recipe")
        assert len(text.splitlines()) == 4
    else:
        assert pd.read_csv(out)["K"].tolist() == [2048, 4096]


def test_the_default_view_is_short_and_the_full_one_marks_speedups():
    shapes = ("--shape", "256,256,256", "--shape", "8192,8192,8192")
    result = run("estimate", *shapes)
    lines = result.output.splitlines()
    assert lines[0].startswith("h100 tensorwise (shipped h100.json): times fitted on h100-meta")
    assert lines[1].split() == [
        *("shape", "recipe", "bf16", "us", "float8", "us"),
        *("speedup", "(low-high)", "decision"),
    ]
    small = next(line for line in lines if line.startswith("256x256x256 "))
    large = next(line for line in lines if line.startswith("8192x8192x8192 "))
    assert "keep bf16" in small and "convert" in large
    assert max(len(line) for line in lines) <= 120
    full = run("estimate", *shapes, "--show-all").output.splitlines()
    small = next(line for line in full if line.startswith("256 "))
    large = next(line for line in full if line.startswith("8192 "))
    # ... x fitted, band, x worst (seed), decision
    assert small.split()[-4].endswith("-") and small.split()[-2].endswith("-")
    assert large.split()[-4].endswith("+") and large.split()[-2].endswith("+")
    assert small.split()[-1] == "keep" and large.split()[-1] == "convert"
    assert "traffic from generated code: torch" in "\n".join(full)


def test_the_band_and_a_straddling_decision(tmp_path):
    """rowwise at 10240^3 straddles 1: the expected default converts it, marks it and names
    the command that settles it; the conservative policy says uncertain; 2048^3 loses even at
    its high end: keep. The breakeven has a band of its own."""
    shapes = ("--shape", "2048,2048,2048", "--shape", "10240,10240,10240")
    out = tmp_path / "rows.csv"
    result = run("estimate", "--gpu", "h100", "--recipe", "rowwise", *shapes, "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out).set_index("M")
    big = rows.loc[10240]
    assert big["speedup_low"] < 1 < big["speedup"] < big["speedup_high"]
    assert list(rows["decision"]) == ["keep", "convert"]
    assert list(rows["straddles"]) == [False, True]
    row = next(line for line in result.output.splitlines() if line.startswith("10240x"))
    assert row.endswith("convert *")
    assert "* the band straddles 1 on 1 shape: measure them on a GPU with" in result.output
    assert "f8roof validate" in result.output and "--shape 10240,10240,10240" in result.output
    found = re.search(
        r"breakeven \(fitted\): float8 wins for M = K = N >= (\d+) \(band", result.output
    )
    assert found and 2048 < int(found.group(1)) < 10240
    careful = run(
        "estimate", "--gpu", "h100", "--recipe", "rowwise", *shapes, "--policy", "conservative"
    )
    row = next(line for line in careful.output.splitlines() if line.startswith("10240x"))
    assert row.endswith("uncertain *")


def test_seed_switches_change_the_worst_case():
    plain = run("estimate", "--shape", "4096,4096,4096", "--show-all")
    seed = run(
        "estimate",
        "--shape",
        "4096,4096,4096",
        "--fused",
        "input,grad_output",
        "--compile-limitations",
        "--show-all",
    )
    assert seed.exit_code == 0
    assert plain.output != seed.output


def test_scaling_per_role_is_in_the_recipe_name():
    result = run("estimate", "--shape", "4096,4096,4096", "--scaling", "weight=delayed")
    assert result.exit_code == 0
    assert "tensorwise:input=dynamic,weight=delayed,grad_output=dynamic" in result.output


def test_gemm_table_interpolates(tmp_path):
    sizes = [512, 2048, 8192]
    rows = [
        {
            "M": m,
            "K": k,
            "N": n,
            "bf16_time_s": 2 * m * k * n / 600e12,
            "fp8_time_s": 2 * m * k * n / 1100e12,
        }
        for m in sizes
        for k in sizes
        for n in sizes
    ]
    table = tmp_path / "gemms.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    out = tmp_path / "o.csv"
    result = run(
        "estimate",
        "--gemm-table",
        str(table),
        "--shape",
        "1000,3000,5000",
        "--shape",
        "16384,512,512",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["bf16_gemm_s"][0] == pytest.approx(3 * 2 * 1000 * 3000 * 5000 / 600e12)
    assert list(frame["gemm_extrapolated"]) == [False, True]
    assert "gemm time extrapolated" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", "1,2"], "bad shape '1,2'"),
        (["--shape", "0,16,16"], "bad shape '0,16,16'"),
        (["--shape", "a,b,c"], "bad shape 'a,b,c'"),
        (["--gpu", "a100", "--shape", "16,16,16"], "unknown GPU 'a100'; known: h100"),
        (["--gpu", "custom:bf16=1e15", "--shape", "16,16,16"], "custom GPU needs bandwidth, fp8"),
        (
            ["--recipe", "rowwise", "--scaling", "weight=delayed", "--shape", "16,16,16"],
            "dynamic only",
        ),
        (
            ["--scaling", "grad_output=static", "--shape", "16,16,16"],
            "grad_output cannot use static",
        ),
        (["--scaling", "bias=dynamic", "--shape", "16,16,16"], "unknown role 'bias'"),
        (["--recipe", "mxfp9", "--shape", "16,16,16"], "unknown recipe 'mxfp9'"),
        (["--fused", "inputs", "--shape", "16,16,16"], "bad role list"),
        (["--sweep", "huge"], "unknown sweep 'huge'"),
        ([], "no shapes"),
        (["--shape", "16,16,16", "--out", "x.txt"], "use a .csv, .parquet, .json or .md"),
        (["--gemm-table", "nope.csv", "--shape", "16,16,16"], "cannot read gemm table nope.csv"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, message):
    result = run("estimate", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_gemm_table_missing_column(tmp_path):
    table = tmp_path / "t.csv"
    pd.DataFrame([{"M": 512, "K": 512, "N": 512, "bf16_time_s": 1e-5}]).to_csv(table, index=False)
    result = run("estimate", "--gemm-table", str(table), "--shape", "16,16,16")
    assert result.exit_code == 2 and "lacks a time column" in result.output


def test_gemm_table_at_a_model_s_own_shapes(tmp_path):
    """Measured shapes are used as measured; others come from the nearest and are flagged."""
    shapes = [(8192, 4096, 4096), (8192, 4096, 14336), (8192, 14336, 4096)]
    rows = [
        {
            "M": m,
            "K": k,
            "N": n,
            "bf16_time_s": 2 * m * k * n / 600e12,
            "fp8_time_s": 2 * m * k * n / (900e12 + m),
        }
        for m, k, n in shapes
    ]
    table = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    out = tmp_path / "o.csv"
    result = run(
        "estimate",
        "--gemm-table",
        str(table),
        "--shape",
        "8192,4096,4096",
        "--shape",
        "8192,6144,6144",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    # the wide table's one gemm stands for all three of its linear: a measured linear is
    # measured in every role; one between rows comes from the nearest and is flagged
    assert list(frame["gemm_extrapolated"]) == [False, True]
    assert frame["bf16_gemm_s"][0] == pytest.approx(3 * 2 * 8192 * 4096 * 4096 / 600e12)
    # between measured points, the measured throughput (all points: 900e12 + 8192 FLOP/s)
    flops = 3 * 2 * 8192 * 6144 * 6144 / frame["fp8_gemm_s"][1]
    assert flops == pytest.approx(900e12 + 8192, rel=1e-6)  # CSV keeps float32 digits


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"M": 0}, "must be positive integers"),
        ({"bf16_time_s": float("inf")}, "positive finite"),
        ({"fp8_time_s": -1.0}, "positive finite"),
    ],
)
def test_gemm_table_bad_values(tmp_path, bad, message):
    row = {"M": 512, "K": 512, "N": 512, "bf16_time_s": 1e-5, "fp8_time_s": 1e-5} | bad
    table = tmp_path / "t.csv"
    pd.DataFrame([row]).to_csv(table, index=False)
    result = run("estimate", "--gemm-table", str(table), "--shape", "16,16,16")
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_shapes_file(tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,K,N\n1024,1024,1024\n2048,1024,4096\n")
    result = run("estimate", "--shapes-file", str(shapes))
    assert result.exit_code == 0 and "2048x1024x4096" in result.output
    shapes.write_text("M,K,N\n1024,-5,1024\n")
    result = run("estimate", "--shapes-file", str(shapes))
    assert result.exit_code == 2 and "row 2" in result.output


def test_gpus_lists_presets():
    result = run("gpus")
    assert result.exit_code == 0
    for name in ("h100", "h100-pcie", "h200", "b200", "mi300x"):
        assert name in result.output


def test_plot_draws_the_step_and_memory_of_a_model_or_a_setup(tmp_path):
    pytest.importorskip("matplotlib")
    for name, args in (
        ("model.png", ("--model", "llama3-8b", "--tokens", "8192", "--fsdp", "8")),
        ("setup.svg", ("--setup", "llama3:llama3_8b")),
    ):
        out = tmp_path / name
        result = run("estimate", *args, "--plot", str(out))
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1] == f"wrote {out}"
        assert out.read_bytes()[:4] in (b"\x89PNG", b"<?xm")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", "4096,4096,4096", "--plot", "x.png"], "--plot draws a model's step"),
        (["--model", "llama3-8b", "--tokens", "8192", "--plot", "x.jpg"], "use a .png or .svg"),
        (
            ["--model", "llama3-8b", "--tokens", "8192", "--plot", "no/such/dir/x.png"],
            "no/such/dir",
        ),
    ],
)
def test_plot_is_refused_before_the_work(tmp_path, args, message):
    result = run("estimate", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
