"""The time model fitted to public measurements: its file, its fit script, and the estimate
that uses it by default (`--times public`)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))  # public_fit
from conftest import invoke_cli

from f8roof.calibration import public_file
from f8roof.calibration.file import CalibrationError
from f8roof.errors import ModelError
from f8roof.timing.kernel_time import KernelTimeModel, KindTime, Residuals

ROOT = Path(__file__).resolve().parent.parent


def shipped() -> dict:
    return json.loads(public_file.SHIPPED.read_text())


# What a rebuild must reproduce, on any machine with the pinned packages: the fit is identified
# (each parameter determined by the data or held by its prior, the cost smooth), so another
# BLAS or CPU moves its minimum by far less than these, rounding included.
PREDICTION_TOLERANCE = 1e-3  # relative, at every cell and gemm row of the data
PARAMETER_TOLERANCE = 0.01  # of each parameter's prior width


@pytest.mark.slow
def test_the_fit_script_rebuilds_what_the_data_determine(tmp_path):
    """The rebuilt file's predictions at the data's points, parameters (fitted, and their range
    over the alternative fits) and cross-validated errors match the shipped file's."""
    import public_fit

    out = tmp_path / "public_times.json"
    done = subprocess.run(
        [sys.executable, "scripts/fit_public_times.py", "--out", str(out), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rebuilt, ours = public_file.load(out), public_file.load(public_file.SHIPPED)
    data = public_fit.load(ROOT)

    def predictions(times, parts):
        named = {p.part: p for p in parts}
        bf16, fp8 = public_fit.cell_times(named["h100-meta"], data.cells)
        return bf16 / fp8

    for which in ("parts", "low_parts", "high_parts"):
        a = predictions(rebuilt, getattr(rebuilt, which))
        b = predictions(ours, getattr(ours, which))
        assert np.allclose(a, b, rtol=PREDICTION_TOLERANCE, atol=0), which
    fitted = [np.array([r.value for r in times.ranges]) for times in (rebuilt, ours)]
    a, b = (public_fit.gemm_times(x, data.gemms) for x in fitted)
    assert np.allclose(a, b, rtol=PREDICTION_TOLERANCE, atol=0)
    widths = {p.name: p.width for p in public_fit.PARAMETERS}
    for a, b in zip(rebuilt.ranges, ours.ranges, strict=True):
        assert a.name == b.name
        for x, y in ((a.value, b.value), (a.low, b.low), (a.high, b.high)):
            assert abs(x - y) <= PARAMETER_TOLERANCE * widths[a.name], (a, b)
    assert rebuilt.cv_median == pytest.approx(ours.cv_median, abs=1e-3)
    assert rebuilt.coverage == pytest.approx(ours.coverage, abs=0.01)
    assert rebuilt.residual_low == pytest.approx(ours.residual_low, abs=2e-3)
    assert rebuilt.residual_high == pytest.approx(ours.residual_high, abs=2e-3)


def test_the_shipped_fit_meets_its_cross_validated_targets():
    times = public_file.load(public_file.SHIPPED)
    assert times.cv_median <= 0.10
    assert max(error for _, error in times.cv_by_n) <= 0.15
    assert times.coverage >= 0.80
    hopper = {"h100", "h100-meta", "h200", "h100@500w", "h200@500w"}
    blackwell = {"b200", "b200-750w", "gb200", "b300", "gb300"}
    assert {p.part for p in times.parts} == hopper | blackwell
    assert {p for p in hopper | blackwell if times.is_default(p)} == hopper


def test_blackwell_keeps_datasheet_times_unless_public_ones_are_asked_for():
    """Hopper's kernel model transferred to Blackwell by the datasheet is what `--times public`
    gives there, with the published check beside it; without it, the datasheet timing."""
    shape = ("--gpu", "b200", "--recipe", "rowwise", "--shape", "8192,4096,14336")
    default = run(*shape)
    public = run(*shape, "--times", "public", "--show-all")
    assert default.exit_code == 0 and public.exit_code == 0, default.output + public.output
    assert "datasheet times" in default.output.splitlines()[0]
    assert "times: public" in public.output
    check = public_file.load(public_file.SHIPPED).transfer_check("b200")
    assert f"runs up to {check:.2f}x as fast as it says" in public.output


def test_blackwell_parts_take_an_nvfp4_family_and_the_capped_part_its_caps():
    import public_fit

    from f8roof.hardware.efficiency import NVFP4_TO_FP8
    from f8roof.hardware.presets import find_gpu

    times = public_file.load(public_file.SHIPPED)
    b200, capped, h100 = (dict(times.part(n).gemms) for n in ("b200", "b200-750w", "h100"))
    assert "nvfp4" not in h100
    assert b200["nvfp4"].peak_fraction == pytest.approx(b200["fp8"].peak_fraction * NVFP4_TO_FP8)
    assert capped["bf16"].peak_fraction < b200["bf16"].peak_fraction
    # the datasheet model's rule, not the H100's 500 W caps: 750 of 1000 W, every family alike
    for family in ("bf16", "fp8", "fp8_rowwise", "nvfp4"):
        assert capped[family].peak_fraction == pytest.approx(0.75 * b200[family].peak_fraction)
    assert public_fit.capped(find_gpu("b200-750w")) and not public_fit.capped(find_gpu("b200"))


def test_the_blackwell_check_is_arithmetic_bound_and_shipped_as_the_data_give_it():
    """torchao's compiled MXFP8 dim0 cast on B200: the transferred model has it bound by its
    arithmetic, slower than published; the shipped ratio is what the data and the fit give."""
    import public_fit

    times = public_file.load(public_file.SHIPPED)
    x = np.array([r.value for r in times.ranges])
    check = public_fit.blackwell_check(ROOT)
    assert check.arithmetic_share(x) > 0.9
    ratio = check.published_bytes_per_s / check.predicted_bytes_per_s(x)
    assert ratio == pytest.approx(times.transfer_check("b300"), rel=1e-3)
    assert ratio > 1


def test_ao940_float8_rows_are_read_as_zero_filled_operands(monkeypatch):
    """#940 timed `_scaled_mm` on zeros and bf16 on randn: only its float8 rows are read as
    ZERO_DATA_SPEEDUP faster than the real data the model times."""
    import public_fit

    data = public_fit.load(ROOT)
    x = np.array([r.value for r in public_file.load(public_file.SHIPPED).ranges])
    zeros = public_fit.gemm_times(x, data.gemms)
    monkeypatch.setattr(public_fit, "ZERO_DATA_SPEEDUP", 1.0)
    real = public_fit.gemm_times(x, data.gemms)
    read = (data.gemms.source == "ao#940") & (data.gemms.family == "fp8")
    assert read.sum() == 16  # eight squares, with and without fast accumulation
    assert np.allclose(real[read] / zeros[read], 295 / 257)
    assert np.array_equal(real[~read], zeros[~read])


def test_the_file_round_trips(tmp_path):
    times = public_file.load(public_file.SHIPPED)
    path = tmp_path / "again.json"
    public_file.save(times, path)
    assert public_file.load(path) == times


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["parts"]["h100"]["fractions"].update(pointwise=1.5), "pointwise"),
        (lambda d: d["parts"]["h100"]["fractions"].pop("reduction_inner"), "fractions"),
        (lambda d: d["parts"]["h100"]["gemms"]["bf16"].update(peak_fraction="x"), "peak_fraction"),
        (lambda d: d["parts"]["h100"].update(floor_s=-1.0), "floor_s"),
        (lambda d: d["parts"]["h100"].update(scattered_bytes_per_element=64), "scattered"),
        (lambda d: d["parts"]["h100"].update(arithmetic_per_s=0), "arithmetic_per_s"),
        (lambda d: d["parts"].update(nope=d["parts"]["h100"]), "nope"),
        (lambda d: d.update(residual_quantiles=[0.1, 0.2]), "bracket 0"),
        (lambda d: d.update(schema_version=9), "schema_version"),
        (lambda d: d.pop("band_low_parts"), "band_low_parts"),
        (lambda d: d["checks"].update(nope=1.6), "nope"),
        (lambda d: d["checks"].update(b200="fast"), "b200"),
        (
            lambda d: d["parts"]["b200"]["gemms"].update(fp4=d["parts"]["b200"]["gemms"]["nvfp4"]),
            "fp4",
        ),
    ],
)
def test_a_damaged_file_is_refused_naming_the_field(tmp_path, edit, field):
    data = shipped()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError) as found:
        public_file.load(path)
    message = str(found.value)
    assert str(path) in message and field in message and "\n" not in message


def test_a_kernel_takes_the_longer_of_its_traffic_and_its_arithmetic():
    """Overlapped: the longer of the two, rounded at the ridge where they take as long."""
    model = KernelTimeModel(
        (),
        KindTime(2e-6, 1e12),
        (),
        Residuals(0.0, 0.0, 0),
        arithmetic_per_s=1e13,
        scattered_bytes_per_element=8.0,
    )
    memory = model.time_s("reduction", 1e9)  # 1 ms of traffic
    assert memory == pytest.approx(2e-6 + 1e-3)
    assert model.time_s("reduction", 1e9, arithmetic=5e9) == pytest.approx(memory, rel=1e-3)
    assert model.time_s("reduction", 1e9, arithmetic=2e10) == pytest.approx(2e-6 + 2e-3, rel=1e-3)
    ridge = model.time_s("reduction", 1e9, arithmetic=1e10)
    assert ridge == pytest.approx(2e-6 + 1e-3 * 2 ** (1 / 8))
    # each scattered element moves 8 bytes more, at the kernel's bandwidth
    assert model.time_s("reduction", 1e9, scattered_elements=1e8) == pytest.approx(2e-6 + 1.8e-3)
    with pytest.raises(ModelError):
        KernelTimeModel((), KindTime(0, 1), (), Residuals(0, 0, 0), scattered_bytes_per_element=33)


def run(*args):
    return invoke_cli("estimate", *args)


def test_public_times_are_the_default_and_datasheet_times_an_option():
    shape = ["--shape", "8192,4096,4096", "--recipe", "rowwise"]
    public = run("--gpu", "h100-meta", *shape)
    datasheet = run("--gpu", "h100-meta", *shape, "--times", "datasheet")
    assert public.exit_code == datasheet.exit_code == 0, public.output + datasheet.output
    assert "times fitted to public data (CV error" in public.output.splitlines()[0]
    coverage = public_file.shipped().coverage
    assert f"{coverage:.0%} of held-out cells in its band" in public.output.splitlines()[0]
    scaled = run("--gpu", "h100", *shape)
    assert (
        "times fitted on h100-meta, scaled to h100 by its datasheet (unchecked here)"
        in (scaled.output.splitlines()[0])
    )
    assert "datasheet times" in datasheet.output.splitlines()[0]

    def row(output):
        return next(line for line in output.splitlines() if line.startswith("8192x"))

    assert row(public.output) != row(datasheet.output)


def test_public_times_for_a_part_without_a_fit_is_one_line():
    result = run("--gpu", "h100-nvl", "--shape", "4096,4096,4096", "--times", "public")
    assert result.exit_code == 2
    assert "no public time model for" in result.output and "--times datasheet" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_band_holds_the_expected_speedup_and_widens_below_it(tmp_path):
    out = tmp_path / "rows.csv"
    shapes = [
        "--shape",
        "1024,1024,1024",
        "--shape",
        "16384,8192,1024",
        "--shape",
        "8192,8192,8192",
    ]
    result = run("--gpu", "h100-meta", "--recipe", "rowwise", *shapes, "--out", str(out))
    assert result.exit_code == 0, result.output
    import pandas as pd

    frame = pd.read_csv(out)
    assert np.all(frame["speedup_low"] < frame["speedup"])
    assert np.all(frame["speedup"] < frame["speedup_high"])
    width = (frame["speedup_high"] - frame["speedup_low"]) / frame["speedup"]
    assert np.all(width < 0.6)


def test_the_band_stops_where_float8_gemms_at_the_peaks_would(tmp_path):
    """A huge square linear on an H200 estimates 1.83x; widened by the residuals its high end
    passes the fp8/bf16 peak ratio (2), which a bf16 gemm below its peak allows, but never
    what float8's gemms at the part's dense peaks would give (float8 saves gemm time only)."""
    out = tmp_path / "rows.csv"
    result = run("--gpu", "h200", "--shape", "65536,65536,65536", "--out", str(out))
    assert result.exit_code == 0, result.output
    import pandas as pd

    from f8roof.hardware.presets import find_gpu

    row = pd.read_csv(out).iloc[0]
    floor = 6 * 65536.0**3 / find_gpu("h200").fp8_flops
    assert 1.5 < row["speedup"] < 2.0 < row["speedup_high"] <= row["bf16_s"] / floor
    assert "exceeds" not in result.output


@pytest.mark.slow
def test_the_blackwell_check_code_is_what_torch_compile_generates(tmp_path):
    out = tmp_path / "mx_cast.json"
    done = subprocess.run(
        [sys.executable, "scripts/codegen_mx_cast.py", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shipped_code = json.loads((ROOT / "data/codegen/mx_cast_b200.json").read_text())
    assert json.loads(out.read_text())["kernels"] == shipped_code["kernels"]
