"""compare: models beside the kernels Inductor generates (codegen-only CUDA, no GPU needed)."""

import json

import pytest
from click.testing import CliRunner

from f8roof.cli import main
from f8roof.compare import compare
from f8roof.models.hardware import find_gpu
from f8roof.models.recipes import Recipe


@pytest.mark.slow
def test_text_report_shows_levels_kernels_and_the_verdict():
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "--recipe",
            "tensorwise",
            "--shape",
            "1024,2048,512",
            "--device",
            "codegen",
            "--no-fit",
        ],
    )
    assert result.exit_code == 0, result.output
    text = result.output
    for label in ("worst", "ideal", "actual"):
        assert f"  {label} " in text
    assert "triton_red_fused" in text and "(gemm)" in text
    assert "worst = 6*K*M + 6*K*N + 6*M*N" in text


@pytest.mark.slow
def test_json_report_counts_bytes_three_ways():
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "--recipe",
            "rowwise",
            "--shape",
            "512,1024,768",
            "--device",
            "codegen",
            "--no-fit",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    shape = data["shapes"][0]
    assert {"bytes_worst", "bytes_ideal", "bytes_actual", "kernels"} <= set(shape)
    overhead = [k for k in shape["kernels"] if not k["gemm"]]
    assert shape["bytes_actual"] == sum(k["bytes_read"] + k["bytes_written"] for k in overhead)
    for k in shape["kernels"]:
        assert k["bytes_code"] == k["bytes_scheduler"] == k["bytes_read"] + k["bytes_written"]
        if k["kind"] != "extern_gemm":
            assert k["bytes_inductor"] == k["bytes_code"]
    assert data["fitted"] is None


@pytest.mark.slow
def test_fit_reproduces_actual_bytes_at_the_asked_shape():
    shape = (3000 // 16 * 16, 1000 // 16 * 16, 2000 // 16 * 16)
    result = compare(
        Recipe.from_name("tensorwise"), [shape], device="codegen", gpu=find_gpu("h100"), fit=True
    )
    assert result.fit.regimes, [u.reason for u in result.fit.unfitted]
    regime = result.fit.regimes[0]
    row = result.shapes[0]
    workspace = sum(row.capture.workspace_bytes(k) for k in row.capture.overhead_launches)
    assert regime.total.exact(shape) + workspace == row.bytes_actual
    assert 0 < workspace <= regime.workspace_max * 4


def test_cuda_shape_not_multiple_of_16_is_refused_before_compiling():
    result = CliRunner().invoke(
        main, ["compare", "--shape", "1000,1000,1000", "--device", "codegen", "--no-fit"]
    )
    assert result.exit_code == 2
    assert "not a multiple of 16" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_capture_differences_are_order_free_and_name_free():
    from f8roof.compare import capture_differences
    from f8roof.profiler.capture import capture

    recipe, shape = Recipe.from_name("tensorwise"), (256, 512, 768)
    h100 = capture(recipe, shape, device="codegen", gpu=find_gpu("h100"))
    again = capture(recipe, shape, device="codegen", gpu=find_gpu("h200"))
    assert capture_differences(h100, again) == []
    cpu = capture(recipe, shape, device="cpu")
    lines = capture_differences(h100, cpu)
    assert any(line.startswith("only in codegen:") for line in lines)
    assert any(line.startswith("only in cpu:") for line in lines)
