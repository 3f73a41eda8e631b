"""calibrate: checkpoint and resume (fake measurements), device checks, the CPU pipeline for real."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import synthetic

import f8roof.device.calibrate as calibrate_module
from f8roof.calibration.file import Calibration
from f8roof.calibration.fitting import fit_calibration
from f8roof.device import runner as runner_module
from f8roof.device.calibrate import CalibrateOptions, calibrate
from f8roof.device.runner import Task
from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.profiler import torchao_float8
from f8roof.profiler.measure import launch_durations
from f8roof.profiler.trace import EventKind, KernelEvent
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Implementation, Variant

ROOT = Path(__file__).parent.parent
HAS_CUDA = __import__("torch").cuda.is_available()


def cpu_options(**kw):
    variants = (Variant(Recipe(), Implementation.REFERENCE),)
    return CalibrateOptions.defaults("cpu", variants=variants, **kw)


@pytest.fixture
def fake_run(monkeypatch):
    """Replace the measurements by counted fakes; the fit by a synthetic calibration."""
    calls = []

    def fake_tasks(options):
        return [
            Task(f"t{i}", f"task {i}", lambda i=i: calls.append(i) or {"value": i})
            for i in range(5)
        ]

    monkeypatch.setattr(calibrate_module, "tasks", fake_tasks)
    monkeypatch.setattr(calibrate_module, "measurements_from", lambda *a: synthetic.measurements())
    return calls


def test_budget_stops_and_resume_measures_only_the_rest(tmp_path, fake_run, monkeypatch):
    out = tmp_path / "cal.json"
    options = cpu_options(budget_s=0.0)
    clock = iter([0.0, 0.0, 1.0, 2.0])  # start, before task 0 (in budget), before task 1 (over)
    monkeypatch.setattr(runner_module.time, "monotonic", lambda: next(clock))
    with pytest.raises(F8RoofError, match="budget of 0 s spent before 2 shapes of every variant"):
        calibrate(options, out, resume=False)
    assert fake_run == [0] and not out.exists()
    monkeypatch.setattr(runner_module.time, "monotonic", lambda: 0.0)
    calibrate(cpu_options(), out, resume=True)
    assert fake_run == [0, 1, 2, 3, 4]  # task 0 was not measured again
    assert Calibration.load(out).environment.device_name == "NVIDIA H200"
    assert not (tmp_path / "cal.json.partial.jsonl").exists()


def test_budget_cut_run_is_fitted_on_the_shapes_every_variant_reached(tmp_path, monkeypatch):
    options = cpu_options(budget_s=10.0)
    keys = [t.key for t in calibrate_module.tasks(options)]
    # gemm grids and copy first, then shape by shape: stop after 2 shapes and a half
    steps = [k for k in keys if k.startswith("step/")]
    done = len(keys) - len(steps) + 2 * len(options.all_variants) + 1
    monkeypatch.setattr(
        calibrate_module,
        "tasks",
        lambda o: [Task(k, k, lambda: {"value": 1}) for k in keys],
    )
    monkeypatch.setattr(calibrate_module, "measurements_from", lambda *a: synthetic.measurements())
    clock = iter([0.0] * (done + 1) + [100.0] * 10)
    monkeypatch.setattr(runner_module.time, "monotonic", lambda: next(clock))
    out = tmp_path / "cal.json"
    _calibration, warnings = calibrate(options, out, resume=False)
    assert Calibration.load(out).variants
    spent = [w for w in warnings if w.topic is Topic.BUDGET_SPENT]
    assert len(spent) == 1 and (spent[0]["fitted"], spent[0]["shapes"]) == (2, 9)
    assert (tmp_path / "cal.json.partial.jsonl").exists()  # --resume can finish the run
    shapes = calibrate_module.measured_shapes([{"key": k} for k in keys[:done]], options)
    assert shapes == options.shapes[:2]


def test_interrupt_keeps_every_finished_measurement(tmp_path, fake_run, monkeypatch):
    out = tmp_path / "cal.json"

    def tasks_with_crash(options):
        def crash():
            raise KeyboardInterrupt

        return [Task("a", "a", lambda: {"v": 1}), Task("b", "b", crash)]

    monkeypatch.setattr(calibrate_module, "tasks", tasks_with_crash)
    with pytest.raises(KeyboardInterrupt):
        calibrate(cpu_options(), out, resume=False)
    lines = (tmp_path / "cal.json.partial.jsonl").read_text().splitlines()
    assert [json.loads(line).get("key") for line in lines] == [None, "a"]


def test_launch_durations_match_in_order_within_each_step():
    # fwd and bwd both call a kernel named k0: order, not name alone, tells them apart
    events = [
        KernelEvent(n, d, EventKind.DEVICE_KERNEL, step)
        for step in (0, 1)
        for n, d in (("k0", 1.0), ("gemm_a", 5.0), ("k0", 3.0 + step), ("k1", 2.0))
    ]
    assert launch_durations(events, ["k0", "k0", "k1", "missing"]) == [1.0, 3.5, 2.0, None]


@pytest.mark.skipif(HAS_CUDA, reason="checks the message on a machine without a GPU")
def test_calibrate_cuda_without_gpu_is_one_line(cli, tmp_path):
    result = cli("calibrate", "--out", str(tmp_path / "c.json"))
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == "Error: no CUDA GPU here: --device cuda needs one (without a GPU: --device cpu)"
    )


def test_unknown_recipe_is_refused_before_measuring(cli, tmp_path):
    result = cli(
        "calibrate",
        "--device",
        "cpu",
        "--recipes",
        "tensorwise,fp4",
        "--out",
        str(tmp_path / "c.json"),
    )
    assert result.exit_code == 2 and "unknown recipe 'fp4'" in result.output


def test_validate_refuses_a_calibration_of_another_device(cli, tmp_path):
    path = tmp_path / "h200.json"
    fit_calibration(synthetic.measurements()).save(path)
    result = cli(
        "validate", "--calibration", str(path), "--device", "cpu", "--out", str(tmp_path / "v")
    )
    assert result.exit_code == 2
    assert (
        "was made on NVIDIA H200 (cuda)" in result.output
        and "validate on the device" in result.output
    )


def test_estimate_refuses_a_gpu_the_calibration_did_not_measure(cli, tmp_path):
    path = tmp_path / "h200.json"
    fit_calibration(synthetic.measurements()).save(path)
    ok = cli("estimate", "--calibration", str(path), "--shape", "64,64,64")
    assert ok.exit_code == 0 and ok.output.startswith("h200 ")
    bad = cli("estimate", "--calibration", str(path), "--gpu", "h100", "--shape", "64,64,64")
    assert bad.exit_code == 2 and "describes NVIDIA H200 (cuda), not h100" in bad.output


@pytest.mark.slow
def test_cpu_pipeline_end_to_end(tmp_path):
    """The GPU session script's dry run: real compiles, profiles and fits on CPU."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    run = subprocess.run(
        ["bash", "scripts/gpu_session.sh", "--device", "cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    log = (out / "log.txt").read_text()
    assert run.returncode == 0, log[-3000:]
    calibration = Calibration.load(out / "calibration.json")
    assert calibration.environment.device == "cpu"
    key = "torchao:tensorwise" if torchao_float8.available() else "reference:tensorwise"
    tensorwise = calibration.variant(key)
    kernel_set = tensorwise.traffic.kernel_sets[0]
    assert len(kernel_set.verified) == 2  # exact on shapes the fit did not use
    for k in calibration.kernels:  # every measured kernel matches its fitted bytes exactly
        if k.variant == key and (k.M, k.K, k.N) in kernel_set.shapes + kernel_set.verified:
            fitted = next(f for f in kernel_set.kernels if f.key == k.key)
            assert (
                fitted.nbytes.exact((k.M, k.K, k.N))
                == k.bytes_read + k.bytes_written - k.workspace_bytes
            )
    assert calibration.kernel_time.residuals.count == len(calibration.kernels)
    frame = pd.read_csv(out / "validation" / "validation.csv")
    assert len(frame) == 2 and set(frame.recipe) == {"tensorwise"}
    assert (frame.measured_speedup > 0).all() and frame.predicted_speedup.notna().all()
    assert "## Accuracy" in (out / "validation" / "validation.md").read_text()
    assert (out / "artifacts.tar.gz").stat().st_size > 0
    assert "x fitted" in log
    # the --memory path: one rank of a small llama trained on a fake world, beside memory.py
    (memory,) = [json.loads(line) for line in (out / "step_memory.jsonl").read_text().splitlines()]
    assert memory["arm"] == "bf16" and memory["reserved_bytes"] is None
    assert memory["modelled_reserved_bytes"] >= memory["modelled_allocated_bytes"] > 0
    block = json.loads((out / "block_trace.json").read_text())["recipes"]["bf16"]
    assert block["device_s"] > 0 and block["launches"] >= 4  # C++ kernels and extern ops
    assert sum(block["kernels"].values()) == pytest.approx(block["device_s"], rel=0.5)


@pytest.mark.slow
@pytest.mark.cpu_rowwise  # it checks the fp8_rowwise gemms too
def test_gpu_check_script_runs_on_cpu():
    """The GPU session's first short call, on CPU: gemms, a compiled recipe, its trace."""
    run = subprocess.run(
        [
            sys.executable,
            "scripts/gpu_check.py",
            "--device",
            "cpu",
            "--shape",
            "48,64,80",
            "--variants",
            "torchao:tensorwise" if torchao_float8.available() else "reference:tensorwise",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "gemm fp8_rowwise  grad_weight  ok" in run.stdout
    assert "0 problem(s)" in run.stdout


def test_gpu_check_times_gemms_on_randn_and_on_zeros(capsys):
    """The zero-data check (the public fit's #940 float8 rows ran on zeros) on a tiny size: a
    line per dtype, the two times and their ratio, nothing failed."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.check_zero_data("cpu", size=32) == []
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["bf16", "fp8"]
    assert all("randn" in line and "zeros" in line and ": x" in line for line in lines)


def test_validate_limit_must_leave_a_shape(cli, tmp_path):
    path = tmp_path / "h200.json"
    fit_calibration(synthetic.measurements()).save(path)
    result = cli(
        "validate", "--calibration", str(path), "--limit", "0", "--out", str(tmp_path / "v")
    )
    assert (
        result.exit_code == 2
        and "Invalid value for '--limit': 0 is not in the range x>=1" in result.output
    )


def test_default_validation_shapes_are_unseen_aligned_and_span_the_range():
    from f8roof.device.validate import VALIDATION_SHAPES
    from f8roof.traffic.fit import FIT_SHAPES

    assert len(set(VALIDATION_SHAPES)) == len(VALIDATION_SHAPES) >= 30
    assert not set(VALIDATION_SHAPES) & set(FIT_SHAPES)
    assert all(d % 16 == 0 for shape in VALIDATION_SHAPES for d in shape)
    dims = [d for shape in VALIDATION_SHAPES for d in shape]
    assert min(dims) == 256 and max(dims) == 16384
    assert any(d & (d - 1) for d in dims)  # not all powers of two


def test_an_aten_launch_matches_its_native_kernel_in_order():
    # a mix-order reduction's finishing `aten.sum` is `at::native::reduce_kernel` on CUDA
    events = [
        KernelEvent(n, d, EventKind.DEVICE_KERNEL, 0)
        for n, d in (
            ("triton_per_fused_mul_sum_0", 4.0),
            ("void at::native::reduce_kernel<512, 1>(...)", 2.0),
            ("triton_poi_fused_1", 1.0),
        )
    ]
    names = ["triton_per_fused_mul_sum_0", "aten.sum", "triton_poi_fused_1"]
    assert launch_durations(events, names) == [4.0, 2.0, 1.0]
    cpu = [KernelEvent("aten::sum", 3.0, EventKind.CPU_KERNEL, 0)]
    assert launch_durations(cpu, ["aten.sum"]) == [3.0]
