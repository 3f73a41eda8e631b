import json

import pytest
import synthetic

from f8roof.calibration.file import SCHEMA_VERSION, Calibration, CalibrationError
from f8roof.calibration.fitting import fit_calibration


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    fit_calibration(synthetic.measurements()).save(path)
    return path


def edited(saved, tmp_path, edit):
    data = json.loads(saved.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_round_trip_is_lossless(saved, tmp_path):
    loaded = Calibration.load(saved)
    again = tmp_path / "again.json"
    loaded.save(again)
    assert again.read_text() == saved.read_text()
    assert Calibration.load(again) == loaded


def test_save_is_atomic(saved, tmp_path, monkeypatch):
    target = tmp_path / "c.json"
    target.write_text("old")
    calibration = Calibration.load(saved)
    monkeypatch.setattr("json.dumps", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        calibration.save(target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


BAD = [
    ("schema", lambda d: d.update(schema_version=1), "schema_version 1 is not supported"),
    ("kind", lambda d: d.update(kind="guessed"), "field kind: 'guessed' is not one of"),
    (
        "negative extra",
        lambda d: d["variants"][1]["fixed"].update(device_extra_s=-1e-6),
        "device_extra_s: must be non-negative",
    ),
    (
        "zero denominator",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M": "1/0"}),
        "zero denominator",
    ),
    (
        "zero coefficient",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M": 0}),
        "zero coefficient: leave the term out",
    ),
    (
        "coefficient spelt two ways",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M": "6/4"}),
        "write '6/4' as '3/2'",
    ),
    (
        "integer as a string",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M": "-5"}),
        "write '-5' as -5",
    ),
    (
        "huge coefficient",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M": 2**70}),
        "beyond 64 bits",
    ),
    (
        "unknown variant",
        lambda d: d["variants"][1].update(variant="torchao:fp4"),
        "unknown recipe 'fp4'",
    ),
    ("unknown preset", lambda d: d["environment"].update(gpu="a100"), "is not a GPU preset"),
    ("infinite", lambda d: d["ceilings"].update(fp8_flops=float("inf")), "finite number"),
    (
        "negative time",
        lambda d: d["gemms"][5].update(time_s=-1.0),
        "field gemms[5].time_s: must be positive",
    ),
    (
        "code for a number",
        lambda d: d["steps"][0].update(wall_s="__import__('os').system('echo hi')"),
        "field steps[0].wall_s: expected a finite number, got str",
    ),
    (
        "code for a coefficient",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M*K": "__import__('os')"}),
        "expected an integer or a 'p/q' string",
    ),
    (
        "unknown monomial",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M*K*N": 1}),
        "unknown monomial",
    ),
    (
        "inconsistent total",
        lambda d: d["variants"][1]["kernel_sets"][0]["total"].update({"M*K": 99}),
        "is not the sum of its kernels",
    ),
    ("missing shape", lambda d: d["fit_shapes"].pop(0), "is not in fit_shapes"),
    (
        "missing field",
        lambda d: d["ceilings"].pop("fp8_flops"),
        "field ceilings.fp8_flops: missing",
    ),
    ("missing gemm point", lambda d: d["gemms"].pop(7), "not a full grid"),
    ("no bf16", lambda d: d["variants"].pop(0), "bf16 baseline is missing"),
    ("bool for int", lambda d: d["steps"][0].update(launches=True), "expected an integer"),
    ("nan", lambda d: d["kernels"][0].update(time_s=float("nan")), "expected a finite number"),
    ("bad dtype", lambda d: d["gemms"][0].update(dtype="fp4"), "'fp4' is not one of"),
]


@pytest.mark.parametrize("name, edit, message", BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_refused_naming_the_field(saved, tmp_path, name, edit, message):
    path = edited(saved, tmp_path, edit)
    with pytest.raises(CalibrationError) as error:
        Calibration.load(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_truncated_and_not_json(saved, tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(saved.read_text()[:1000])
    with pytest.raises(CalibrationError, match="not valid JSON"):
        Calibration.load(path)
    path.write_text("[1, 2]")
    with pytest.raises(CalibrationError, match="expected an object"):
        Calibration.load(path)


def test_loading_never_evaluates(saved, tmp_path, monkeypatch):
    import builtins

    import sympy

    def refuse(*args, **kwargs):
        raise AssertionError("loading evaluated text")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(sympy, "sympify", refuse)
    monkeypatch.setattr(sympy, "parse_expr", refuse, raising=False)
    assert Calibration.load(saved).schema_version == SCHEMA_VERSION == 3


def test_cli_estimate_with_calibration(cli, saved):
    result = cli(
        "estimate",
        "--gpu",
        "h200",
        "--calibration",
        str(saved),
        "--recipe",
        "rowwise",
        "--impl",
        "reference",
        "--shape",
        "4096,4096,4096",
    )
    assert result.exit_code == 0, result.output
    assert f"({saved}): measured on NVIDIA H200 (cuda)" in result.output.splitlines()[0]
    assert "breakeven (fitted)" in result.output


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["steps"][0].update(wall_s=-1), "must be positive"),
        (lambda d: d.update(schema_version=0), "schema_version 0"),
        (lambda d: d.update(variants=[[[[]]]] * 3), "expected an object"),
    ],
)
def test_cli_refuses_bad_calibration_in_one_line(cli, saved, tmp_path, edit, message):
    path = edited(saved, tmp_path, edit)
    result = cli("estimate", "--calibration", str(path), "--shape", "64,64,64")
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_refuses_recipe_the_calibration_lacks(cli, saved):
    result = cli(
        "estimate",
        "--calibration",
        str(saved),
        "--recipe",
        "tensorwise_delayed",
        "--shape",
        "64,64,64",
    )
    assert result.exit_code == 2
    assert (
        "has no variant 'reference:tensorwise_delayed'; it has: bf16, reference:tensorwise, "
        "reference:rowwise" in result.output
    )


def test_deep_nesting_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CalibrationError, match="nests deeper"):
        Calibration.load(path)


def test_saved_files_are_readable_by_others(saved):
    assert saved.stat().st_mode & 0o777 == 0o644


def test_a_measured_factor_far_from_its_model_still_loads(saved, tmp_path):
    """A CPU under load runs a kernel 1000x its model: a measured ratio has no bound but
    positive and finite, so what calibrate writes, its reader reads."""
    path = edited(
        saved,
        tmp_path,
        lambda d: d["kernel_time"]["factors"].update(
            {k: 1159.0 for k in d["kernel_time"]["factors"]}
        ),
    )
    loaded = Calibration.load(path)
    assert loaded.kernel_time.factors and all(v == 1159.0 for _, v in loaded.kernel_time.factors)
    loaded.save(tmp_path / "again.json")
    assert Calibration.load(tmp_path / "again.json") == loaded


def test_save_refuses_what_load_would_refuse(saved, tmp_path):
    """The writer checks by the reader's rules: a calibration nobody can load is never
    written, and the file already there is kept."""
    import dataclasses

    calibration = Calibration.load(saved)
    broken = dataclasses.replace(calibration, fit_shapes=calibration.fit_shapes[1:])
    target = tmp_path / "c.json"
    target.write_text("old")
    with pytest.raises(CalibrationError, match="is not in fit_shapes"):
        broken.save(target)
    assert target.read_text() == "old"
