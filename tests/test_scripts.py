"""The GPU session's scripts report every failure with its reason and never stop at the first.

The measurements are faked (monkeypatched in the loaded script), so these run in milliseconds;
test_calibrate.py runs gpu_check.py for real on CPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from f8roof.profiler.trace import EventKind, KernelEvent

SCRIPTS = Path(__file__).parent.parent / "scripts"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _captured(*, samples_error: Exception | None = None) -> SimpleNamespace:
    kernel = SimpleNamespace(name="triton_poi_fused_0")

    def samples():
        if samples_error is not None:
            raise samples_error
        return [SimpleNamespace(name=kernel.name, polynomial="2*K*M")]

    return SimpleNamespace(
        overhead_launches=[kernel],
        launches=[kernel, SimpleNamespace(name="extern_kernels._scaled_mm")],
        overhead_bytes=4096,
        samples=samples,
        disagreements=lambda: (),
    )


def _times() -> SimpleNamespace:
    events = [KernelEvent("triton_poi_fused_0", 2e-6, EventKind.DEVICE_KERNEL, 0)]
    return SimpleNamespace(events=events, device_s=5e-6, gemm_s=3e-6, wall_s=2e-5)


@pytest.fixture
def gpu_check(monkeypatch) -> tuple[ModuleType, list[str]]:
    """gpu_check with fake gemms and captures: fp8_rowwise gemms, the rowwise recipe's compile
    and the tensorwise_delayed recipe's kernel reading fail."""
    module = _load("gpu_check")
    ran: list[str] = []

    def gemm_fn(dtype, gemm, m, k, n, *, device):
        ran.append(f"gemm {dtype} {gemm}")
        if dtype == "fp8_rowwise":
            raise RuntimeError("row-wise scales refused\n  at Linear.cpp:516\n  more")
        return lambda: torch.ones(m, n)

    def capture_and_measure(variant, shape, *, device, measure):
        ran.append(variant.key)
        name = variant.recipe_name
        if name == "rowwise":
            raise RuntimeError("compiling rowwise failed: boom\ntraceback...")
        if name == "tensorwise_delayed":
            return _captured(samples_error=KeyError("buf3")), _times()
        return _captured(), _times()

    monkeypatch.setattr(module, "gemm_fn", gemm_fn)
    monkeypatch.setattr(module, "capture_and_measure", capture_and_measure)
    return module, ran


def test_gpu_check_reports_every_failure_and_checks_the_rest(gpu_check, capsys) -> None:
    module, ran = gpu_check
    recipes = (
        "reference:tensorwise,reference:tensorwise_delayed,reference:rowwise,torchao:rowwise_gw_hp"
    )
    assert module.main(["--device", "cpu", "--variants", recipes]) == 1
    out = capsys.readouterr().out
    # Every gemm and recipe was tried, failures or not.
    assert len([r for r in ran if r.startswith("gemm")]) == 9
    assert [r for r in ran if not r.startswith("gemm")] == ["bf16", *recipes.split(",")]
    problems = [
        "gemm fp8_rowwise output: failed: RuntimeError: row-wise scales refused",
        "gemm fp8_rowwise grad_input: failed: RuntimeError: row-wise scales refused",
        "gemm fp8_rowwise grad_weight: failed: RuntimeError: row-wise scales refused",
        "reference:tensorwise_delayed: reading its kernels and trace failed: KeyError: 'buf3'",
        (
            "reference:rowwise: compile and measure failed: RuntimeError: compiling rowwise failed: "
            "boom"
        ),
    ]
    lines = out.splitlines()
    for problem in problems:
        assert problem in lines  # printed where it happened, its reason on one line
        assert f"    {problem}" in lines  # and listed again at the end
    assert "5 problem(s):" in lines
    assert "traceback..." not in out and "Linear.cpp" not in out  # first line only
    for name in ("bf16", "reference:tensorwise", "torchao:rowwise_gw_hp"):
        assert any(line.startswith(f"{name} ") and "launches" in line for line in lines)
    assert "gemm bf16         grad_weight  ok (256, 768)" in lines


def test_gpu_check_clean_run_exits_0(gpu_check, capsys) -> None:
    module, _ = gpu_check
    module.gemm_fn = lambda dtype, gemm, m, k, n, *, device: lambda: torch.ones(m, n)
    assert module.main(["--device", "cpu", "--variants", "reference:tensorwise"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 problem(s)"


def test_gpu_check_reports_a_kernel_missing_from_the_trace(gpu_check, capsys) -> None:
    module, _ = gpu_check
    captured = _captured()
    captured.overhead_launches = [SimpleNamespace(name="triton_never_ran_1")]
    module.capture_and_measure = lambda *a, **k: (captured, _times())
    assert module.check_recipe("reference:tensorwise", (48, 64, 80), "cpu") == [
        "reference:tensorwise: not in the trace: triton_never_ran_1"
    ]


@pytest.fixture
def codegen_vs_gpu(monkeypatch) -> tuple[ModuleType, list[tuple[str, tuple, str]]]:
    """Fake captures: the rowwise capture on the device fails at the second shape; tensorwise
    generates a kernel the device does not."""
    module = _load("codegen_vs_gpu")
    calls: list[tuple[str, tuple, str]] = []

    def capture(variant, shape, *, device, gpu):
        name = variant.recipe_name
        calls.append((name, shape, device))
        if name == "rowwise" and shape == (48, 32, 80) and device != "codegen":
            raise AssertionError("Triton codegen failed\nwith a long traceback")
        return SimpleNamespace(recipe=name, overhead_launches=[1, 2], overhead_bytes=100)

    def capture_differences(generated, compiled):
        return [("codegen", ("fwd", "reduction", "input", 2048))] * (
            generated.recipe == "tensorwise"
        )

    monkeypatch.setattr(module, "capture", capture)
    monkeypatch.setattr(module, "capture_differences", capture_differences)
    return module, calls


SHAPE_ARGS = ["--shape", "32,48,64", "--shape", "48,32,80"]


def test_codegen_vs_gpu_goes_on_after_a_failed_capture(codegen_vs_gpu, capsys) -> None:
    module, calls = codegen_vs_gpu
    variants = "reference:rowwise,reference:tensorwise"
    rc = module.main(["--device", "cpu", "--variants", variants, *SHAPE_ARGS])
    assert rc == 1
    assert len(calls) == 8  # both captures of all four recipe/shape pairs
    lines = capsys.readouterr().out.splitlines()
    failure = (
        "reference:rowwise (48, 32, 80): cpu capture failed: AssertionError: Triton codegen failed"
    )
    assert failure in lines and f"    {failure}" in lines
    assert "with a long traceback" not in "\n".join(lines)
    assert (
        "reference:rowwise (32, 48, 64): 2 vs 2 overhead kernels, overhead bytes 100 vs 100: "
        + ("same kernels")
        in lines
    )
    assert sum("tensorwise" in line and "1 differences" in line for line in lines) == 2
    assert "3 recipe/shape pair(s) compared: 1 same, 2 differ; 1 capture(s) failed:" in lines


def test_codegen_vs_gpu_differences_are_findings_not_failures(codegen_vs_gpu, capsys) -> None:
    module, _ = codegen_vs_gpu
    assert module.main(["--device", "cpu", "--variants", "reference:tensorwise", *SHAPE_ARGS]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "2 recipe/shape pair(s) compared: 0 same, 2 differ; 0 capture(s) failed"


def test_published_blackwell_runs_are_read_as_their_sources_state_them() -> None:
    """runs_blackwell_dev.csv's two rows become the setups their sources state: Qwen3-14B on
    8 B200s (FSDP 8 never resharded after forward, 4 x 4096 tokens, the model compiled alone,
    lm_head and the fused k/v projection kept in bf16) and Llama3-8B on 8 B200s at 750 W
    (b200-750w, torchao's MX converter); the H100 runs stay as they were read."""
    published = _load("published_runs")
    qwen, mx = published.blackwell_runs()
    assert (qwen.model, qwen.gpu, qwen.fsdp, qwen.tp) == ("qwen3-14b", "b200", 8, 1)
    assert (qwen.local_batch, qwen.seq_len, qwen.tokens) == (4, 4096, 16384)
    assert qwen.filter_fqns == ("lm_head", "attention.qkv_linear.wkv")
    assert qwen.reshard_after_forward == "never" and qwen.compiled and not qwen.loss_compiled
    assert qwen.measured == pytest.approx(8399 / 7898)
    assert qwen.step_ms == pytest.approx(4 * 4096 / 7898 * 1e3)
    toml = qwen.toml()
    assert 'fsdp_reshard_after_forward = "never"' in toml and "[float8]" in toml
    assert (mx.model, mx.gpu, mx.recipe, mx.local_batch, mx.seq_len) == (
        "llama3-8b",
        "b200-750w",
        "mxfp8_cublas",
        1,
        8192,
    )
    assert '[mx]\nrecipe_name = "mxfp8_cublas"' in mx.toml() and "[float8]" not in mx.toml()
    h100 = published.runs()
    assert len(h100) == 16 and {r.gpu for r in h100} == {"h100-meta"}  # ao#1793 too
    assert all("fsdp_reshard" not in r.toml() and r.seq_len == 8192 for r in h100)
