"""The CPU row-wise `_scaled_mm` probe, and the CPU paths that refuse rowwise where it fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from f8roof.device import validate as validate_module
from f8roof.device.calibrate import CalibrateOptions, calibrate, parse_variants
from f8roof.errors import F8RoofError
from f8roof.profiler import device
from f8roof.profiler.device import cpu_rowwise_refusal, require_cpu_rowwise
from f8roof.profiler.timing import gemm_fn
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation

TORCH = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
REFUSAL = "CPU torch._scaled_mm refuses row-wise scales on torch 2.11.0: RuntimeError: no"
VARIANTS = parse_variants(
    ("tensorwise", "rowwise"), implementation=Implementation.REFERENCE, contexts=(Context(),)
)


def test_probe_passes_from_torch_2_13() -> None:
    """Here (torch 2.13) CPU runs row-wise scales: no test marked cpu_rowwise is skipped."""
    if TORCH >= (2, 13):
        assert cpu_rowwise_refusal() is None
    else:  # torch 2.11, the GPU machine's: refused, with the reason on one line
        refusal = cpu_rowwise_refusal()
        assert refusal is not None and "\n" not in refusal
        assert refusal.startswith("CPU torch._scaled_mm refuses row-wise scales on torch 2.")


@pytest.mark.cpu_rowwise
def test_marked_test_runs_a_rowwise_gemm_on_cpu() -> None:
    out = gemm_fn("fp8_rowwise", "output", 32, 48, 64, device="cpu")()
    assert out.shape == (32, 64) and out.dtype == torch.bfloat16


def test_probe_names_the_refusal_in_one_line(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise RuntimeError("INTERNAL ASSERT FAILED at Linear.cpp:516\nonly per-tensor on CPU")

    monkeypatch.setattr(torch, "_scaled_mm", refuse)
    cpu_rowwise_refusal.cache_clear()
    try:
        refusal = cpu_rowwise_refusal()
    finally:
        cpu_rowwise_refusal.cache_clear()
    assert refusal == (
        f"CPU torch._scaled_mm refuses row-wise scales on torch {torch.__version__}: "
        "RuntimeError: INTERNAL ASSERT FAILED at Linear.cpp:516"
    )


def test_probe_catches_ignored_scales(monkeypatch) -> None:
    real = torch._scaled_mm
    monkeypatch.setattr(
        torch,
        "_scaled_mm",
        lambda a, b, *, scale_a, scale_b, out_dtype: real(
            a, b, scale_a=torch.ones(()), scale_b=torch.ones(()), out_dtype=out_dtype
        ),
    )
    cpu_rowwise_refusal.cache_clear()
    try:
        assert "ignores row-wise scales" in cpu_rowwise_refusal()
    finally:
        cpu_rowwise_refusal.cache_clear()


@pytest.fixture
def refused(monkeypatch) -> None:
    monkeypatch.setattr(device, "cpu_rowwise_refusal", lambda: REFUSAL)


def test_require_refuses_only_rowwise_on_cpu(refused) -> None:
    tensorwise, rowwise = Recipe.from_name("tensorwise"), Recipe.from_name("rowwise_gw_hp")
    require_cpu_rowwise([None, tensorwise], device="cpu")  # None: the bf16 baseline
    require_cpu_rowwise([tensorwise, rowwise], device="cuda")
    require_cpu_rowwise([tensorwise, rowwise], device="codegen")  # nothing runs
    with pytest.raises(F8RoofError, match=r"^rowwise_gw_hp cannot run on cpu here .*RuntimeError"):
        require_cpu_rowwise([tensorwise, rowwise, rowwise], device="cpu")


def test_calibrate_cpu_rowwise_refused_before_measuring(
    cli, refused, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("f8roof.device.calibrate.tasks", pytest.fail)  # nothing may be measured
    options = CalibrateOptions.defaults("cpu", variants=VARIANTS)
    with pytest.raises(F8RoofError, match="rowwise cannot run on cpu here"):
        calibrate(options, tmp_path / "c.json", resume=False)
    result = cli(
        "calibrate", "--device", "cpu", "--recipes", "rowwise", "--out", str(tmp_path / "c.json")
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: rowwise cannot run on cpu here (use --device cuda, or torch 2.13 on cpu): "
        + REFUSAL
    ]


def test_validate_cpu_rowwise_refused(refused, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("f8roof.profiler.device.check_same_device", lambda made, device: None)
    calibration = SimpleNamespace(is_measured=True, environment=None)  # read no further
    options = validate_module.ValidateOptions.defaults("cpu", variants=VARIANTS)
    with pytest.raises(F8RoofError, match="rowwise cannot run on cpu here"):
        validate_module.validate(calibration, options, tmp_path, resume=False)


def test_compare_cpu_rowwise_refused(cli, refused) -> None:
    result = cli("compare", "--device", "cpu", "--recipe", "rowwise", "--shape", "32,48,64")
    assert result.exit_code == 2 and REFUSAL in result.output
    assert "Traceback" not in result.output
