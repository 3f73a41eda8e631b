"""compare: models beside the kernels Inductor generates (codegen-only CUDA, no GPU needed)."""

import json

import pytest
import requires

from f8roof.engine.compare import compare
from f8roof.hardware.presets import find_gpu
from f8roof.profiler import torchao_float8
from f8roof.renderers.comparison import calibration_check_lines
from f8roof.traffic.variant import Variant


def run_json(cli, *args: str) -> dict:
    result = cli("compare", *args, "--device", "codegen", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_text_report_shows_levels_kernels_and_the_verdict(cli):
    result = cli(
        "compare",
        "--recipe",
        "tensorwise",
        "--shape",
        "1024,2048,512",
        "--device",
        "codegen",
        "--no-fit",
    )
    assert result.exit_code == 0, result.output
    text = result.output
    for label in ("worst", "ideal", "actual"):
        assert f"  {label} " in text
    assert "triton_red_fused" in text and " gemm " in text
    assert "worst (the seed's model) = 6*K*M + 6*K*N + 6*M*N" in text
    default = "torchao" if torchao_float8.available() else "reference"
    assert f"implementation: {default} (the default here" in result.stderr
    assert f"implementation {default}" in text and "versions: torch " in text


@pytest.mark.slow
def test_json_report_counts_bytes_three_ways(cli):
    result = cli(
        "compare",
        "--recipe",
        "rowwise",
        "--shape",
        "512,1024,768",
        "--device",
        "codegen",
        "--no-fit",
        "--json",
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
    assert set(data["versions"]) == {"torch", "triton", "torchao"}
    assert data["implementation"] in ("torchao", "reference")


@pytest.mark.slow
def test_fit_reproduces_actual_bytes_at_the_asked_shape():
    shape = (3000 // 16 * 16, 1000 // 16 * 16, 2000 // 16 * 16)
    result = compare(
        Variant.from_key("reference:tensorwise"),
        [shape],
        device="codegen",
        gpu=find_gpu("h100"),
        fit=True,
    )
    assert result.fit.kernel_sets, [u.reason for u in result.fit.unfitted]
    kernel_set = result.fit.kernel_sets[0]
    row = result.shapes[0]
    workspace = sum(row.capture.workspace_bytes(k) for k in row.capture.overhead_launches)
    assert kernel_set.total.exact(shape) + workspace == row.bytes_actual
    assert 0 < workspace <= kernel_set.workspace_max * 4


def test_cuda_shape_not_multiple_of_16_is_refused_before_compiling(cli):
    result = cli("compare", "--shape", "1000,1000,1000", "--device", "codegen", "--no-fit")
    assert result.exit_code == 2
    assert "not a multiple of 16" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_capture_differences_are_order_free_and_name_free():
    from f8roof.engine.compare import capture_differences
    from f8roof.profiler.capture import capture

    recipe, shape = Variant.from_key("reference:tensorwise"), (256, 512, 768)
    h100 = capture(recipe, shape, device="codegen", gpu=find_gpu("h100"))
    again = capture(recipe, shape, device="codegen", gpu=find_gpu("h200"))
    assert capture_differences(h100, again) == []
    cpu = capture(recipe, shape, device="cpu")
    only = capture_differences(h100, cpu)
    assert {device for device, _ in only} == {"codegen", "cpu"}
    assert all(len(kernel) == 4 for _, kernel in only)


def one_line_error(cli, args: list[str]) -> str:
    result = cli("compare", *args, "--device", "codegen", "--no-fit")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_unknown_implementation_is_one_line(cli):
    error = one_line_error(cli, ["--impl", "tensorrt"])  # click's Choice: one line, the choices
    assert "Invalid value for '--impl': 'tensorrt' is not one of 'torchao', 'reference'" in error


def test_torchao_asked_for_but_missing_is_one_line(cli, monkeypatch):
    def missing():
        raise torchao_float8.TorchaoMissing("torchao is not importable here (simulated)")

    monkeypatch.setattr(torchao_float8, "import_float8", missing)
    assert "torchao is not importable" in one_line_error(cli, ["--impl", "torchao"])
    # Not asked for: the default falls back to the reference and says so.
    result = cli("compare", "--shape", "100,100,100", "--device", "codegen")
    assert "implementation: reference (the default here" in result.stderr


@requires.torchao
def test_recipe_torchao_lacks_is_one_line(cli):
    line = one_line_error(cli, ["--impl", "torchao", "--recipe", "tensorwise_delayed"])
    assert "torchao has no recipe 'tensorwise_delayed'" in line and "--impl reference" in line


def test_unknown_context_op_is_one_line(cli):
    error = one_line_error(cli, ["--before", "batchnorm"])
    assert "Invalid value for '--before': 'batchnorm' is not one of 'none', 'layernorm'" in error


# What torch 2.13 + torchao 0.18 generate for h100: torchao's rowwise rescales the
# backward gemms' outputs in separate kernels; its rowwise_with_gw_hp casts the weight for
# grad_input with one tensorwise scale.
EXPECTED = [
    ("torchao:rowwise", (4096, 4096, 4096), 16, 473_030_660),
    ("reference:rowwise", (4096, 4096, 4096), 13, 338_837_504),
    ("torchao:tensorwise", (4096, 4096, 4096), 13, 335_556_634),
    ("reference:tensorwise", (4096, 4096, 4096), 13, 335_556_634),
    ("torchao:rowwise_gw_hp", (16384, 8192, 1024), 11, 1_057_107_978),
    ("reference:rowwise_gw_hp", (16384, 8192, 1024), 9, 520_818_688),
]


@pytest.mark.slow
@requires.torch_213_torchao_018
@pytest.mark.parametrize("key, shape, kernels, overhead", EXPECTED)
def test_kernels_and_bytes_per_implementation(cli, key, shape, kernels, overhead):
    impl, recipe = key.split(":")
    data = run_json(
        cli, "--impl", impl, "--recipe", recipe, "--shape", ",".join(map(str, shape)), "--no-fit"
    )
    assert data["variant"] == key and data["versions"]["torchao"] == "0.18.0"
    row = data["shapes"][0]
    assert (len(row["kernels"]), row["bytes_actual"]) == (kernels, overhead)
    assert row["disagreements"] == []


@pytest.mark.slow
@requires.torchao
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "rowwise_gw_hp"])
def test_torchao_fits_exactly_over_the_fit_shapes(recipe):
    """12 codegen compiles: every fit shape in a kernel set. Tensorwise's largest set is also solved
    for on its own and matches the held-out shapes. Rowwise's row reductions loop, loading each
    row again, once a row outgrows Inductor's persistent reduction, and a kernel's threshold is
    its own: its shapes fall into sets by which kernels reload."""
    result = compare(
        Variant.from_key(f"torchao:{recipe}"), [], device="codegen", gpu=find_gpu("h100"), fit=True
    )
    sets = result.fit.kernel_sets
    assert result.fit.unfitted == ()
    assert sum(len(r.shapes) for r in sets) == 12
    assert all(len(s.verified) == 2 for s in sets if len(s.shapes) >= 9)
    if recipe == "tensorwise":
        assert len(sets[0].shapes) >= 9
        return

    reloads = [tuple(str(k.reread) for k in s.kernels if k.reread.terms) for s in sets]
    assert len(sets) > 1 and len(set(reloads)) == len(sets)


@pytest.mark.slow
@requires.torchao
def test_context_overhead_is_the_difference_with_the_bf16_graph(cli):
    """LayerNorm -> Linear -> Sigmoid (torchao's float8 benchmark): the norm and activation
    kernels are listed in both graphs, and the input's amax and cast and grad_output's amax
    and cast fuse into them, so the overhead is below the standalone linear's."""
    args = ["--impl", "torchao", "--recipe", "tensorwise", "--shape", "4096,4096,4096"]
    alone = run_json(cli, *args, "--no-fit")["shapes"][0]
    data = run_json(cli, *args, "--before", "layernorm", "--after", "sigmoid", "--no-fit")
    row = data["shapes"][0]
    assert data["context"] == "layernorm+sigmoid"
    assert row["bytes_actual"] == row["bytes_float8_graph"] - row["bytes_bf16_graph"]
    bf16_work = {(k["work"], tuple(k["context_modules"])) for k in row["bf16_kernels"]}
    assert bf16_work == {("gemm", ()), ("context", ("LayerNorm",)), ("context", ("Sigmoid",))}
    fused = {
        (f["graph"], f["context_modules"][0], f["float8_steps"][0].split(" ")[0])
        for f in row["fused_into_neighbours"]
    }
    assert {
        ("fwd", "LayerNorm", "amax"),
        ("fwd", "LayerNorm", "cast"),
        ("bwd", "Sigmoid", "amax"),
    } <= fused
    assert row["bytes_actual"] < alone["bytes_actual"]
    assert row["disagreements"] == row["bf16_disagreements"] == []


@pytest.mark.slow
@requires.torch_213_torchao_018
def test_shipped_calibration_beside_this_compile_differs_by_the_workspace_only():
    """At a shape the shipped calibration was fitted on, with the versions that built it, its
    overhead and this compile's differ by exactly the split-reduction workspace the fits leave
    out: the shipped file still describes the code generated here."""
    from f8roof.calibration.file import Calibration
    from f8roof.calibration.shipped import shipped_calibration
    from f8roof.engine.compare import against_calibration

    gpu = find_gpu("h100")
    variant = Variant.from_key("torchao:rowwise@layernorm+sigmoid")
    shape = (1536, 2560, 1024)  # one of models.fit.FIT_SHAPES
    result = compare(variant, [shape], device="codegen", gpu=gpu, fit=False)
    check = against_calibration(result, Calibration.load(shipped_calibration(gpu)), "h100.json")
    row = result.shapes[0]
    workspace = sum(
        capture.workspace_bytes(launch) * sign
        for capture, sign in ((row.capture, 1), (row.baseline, -1))
        for launch in capture.overhead_launches
    )
    assert check.generated == (row.bytes_actual,)
    assert check.generated[0] - check.fitted[0] == workspace
    assert "M=1536 K=2560 N=1024: calibration" in "\n".join(calibration_check_lines(check))


def test_calibration_without_the_variant_is_refused_before_compiling(cli):
    args = ["--impl", "reference", "--recipe", "tensorwise", "--before", "rmsnorm"]
    result = cli("compare", *args, "--calibration", "shipped")
    assert result.exit_code != 0
    expected = "Error: the calibration has no variant 'reference:tensorwise@rmsnorm+none'"
    assert result.output.startswith(expected)
    assert "Traceback" not in result.output and len(result.output.splitlines()) == 1


@pytest.mark.slow
def test_calibration_from_other_versions_is_warned_about(cli, tmp_path):
    from f8roof.calibration.shipped import shipped_calibration

    data = json.loads(shipped_calibration(find_gpu("h100")).read_text())
    data["environment"]["torch"] = "2.9.0"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    args = ["--impl", "reference", "--shape", "256,768,512", "--device", "codegen", "--no-fit"]
    result = cli("compare", *args, "--calibration", str(path))
    assert result.exit_code == 0, result.output
    assert "warning: the calibration's code came from other versions: torch 2.9.0 there" in (
        result.stderr
    )
    assert f"calibration {path} (traffic from generated code" in result.stdout


def test_each_kernel_shows_its_class_and_time_range():
    """compare's text and JSON carry each launch's class and, for a memory kernel, its time
    at the class's range on the target GPU (no compile: a recorded sample's launches)."""
    from pathlib import Path

    from f8roof.engine.compare import Comparison, ShapeComparison, class_rates_for
    from f8roof.profiler import capture as capture_module
    from f8roof.profiler.capture import Capture, CaptureDevice, GraphKind
    from f8roof.profiler.triton_code import parse_output_code
    from f8roof.renderers.comparison import render_text, to_json
    from f8roof.traffic.fit import Polynomial

    code = (Path(__file__).parent / "data" / "codegen_h100_rowwise_bwd.py.txt").read_text()
    launches = tuple(
        capture_module._launch(GraphKind.BWD, parsed, [], set(), {}, {})
        for parsed in parse_output_code(code).launches
    )
    captured = Capture("reference:rowwise", (64, 96, 128), CaptureDevice.CODEGEN, {}, launches)
    zero = Polynomial(())
    comparison = Comparison(
        Variant.from_key("reference:rowwise"),
        "codegen",
        "h100",
        {},
        zero,
        zero,
        (ShapeComparison((64, 96, 128), 10**6, 1, captured, None),),
        None,
        None,
        class_rates_for(find_gpu("h100")),
    )
    text = render_text(comparison)
    assert "class" in text and "us (range)" in text
    outer = next(line for line in text.splitlines() if "triton_red_fused" in line)
    assert "reduction_outer" in outer
    low, high = (float(x) for x in outer.split("reduction_outer")[1].split()[0].split("-"))
    assert 1.5 <= low < high  # at least the launch floor; the slow end above the fast
    gemm = next(line for line in text.splitlines() if "extern_kernels._scaled_mm" in line)
    assert "gemm_fp8_rowwise_slow" in gemm
    kernels = json.loads(to_json(comparison))["shapes"][0]["kernels"]
    assert [k["class"] for k in kernels][2] == "gemm_fp8_rowwise_slow"
    assert kernels[2]["time_s_range"] is None
    assert kernels[1]["time_s_range"][0] < kernels[1]["time_s_range"][2]
