"""Trace parsing on a real CPU trace and a hand-written CUDA-format trace.

tests/data/trace_cpu_tensorwise_32x48x64.json was recorded on CPU (torch 2.13) with
`profile_step(..., warmup=2, iters=2, device="cpu", trace_path=...)` on a compiled
`make_linear(Recipe.from_name("tensorwise"), in_features=48, out_features=64)` forward+backward
at M=32, with `force_disable_caches=True`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from f8roof.profiler.trace import (
    STEP_ANNOTATION,
    EventKind,
    is_gemm_kernel,
    parse_chrome_trace,
    profile_step,
    step_totals,
)

CPU_TRACE = Path(__file__).parent / "data" / "trace_cpu_tensorwise_32x48x64.json"
# The C++ kernels Inductor generated for that step (forward 0, 1; backward 0, 1).
CPU_KERNELS = (
    "cpp_fused__scaled_mm__to_copy_abs_amax_clamp_mul_reciprocal_t_0",
    "cpp_fused__to_copy_clamp_clone_mul_reciprocal_t_1",
    "cpp_fused__scaled_mm__to_copy_abs_amax_clamp_clone_mul_reciprocal_t_0",
    "cpp_fused__scaled_mm__to_copy_clamp_clone_mul_reciprocal_t_1",
)


def test_parse_cpu_trace() -> None:
    events = parse_chrome_trace(CPU_TRACE.read_text())
    assert all(e.kind is EventKind.CPU_KERNEL and e.duration_s > 0 for e in events)
    assert all(e.launch_s is not None for e in events)  # a CPU kernel launches at its start
    for step in (0, 1):
        names = [e.name for e in events if e.step == step]
        # Forward: cast kernel, output gemm, kernel saving copies for backward; backward:
        # grad_output cast, grad_input gemm, transposed copy, grad_weight gemm.
        assert names == [
            CPU_KERNELS[0],
            "aten::_scaled_mm",
            CPU_KERNELS[1],
            CPU_KERNELS[2],
            "aten::_scaled_mm",
            CPU_KERNELS[3],
            "aten::_scaled_mm",
        ]
    # Nested ops (aten::mm, aten::copy_ inside the CPU _scaled_mm emulation) are not kernels.
    assert len(events) == 14


def test_parse_keeps_raw_durations() -> None:
    raw = json.loads(CPU_TRACE.read_text())["traceEvents"]
    first = next(e for e in raw if e["name"].endswith(CPU_KERNELS[0]))
    assert first["name"] == "graph_0_" + CPU_KERNELS[0]
    event = parse_chrome_trace(CPU_TRACE.read_text())[0]
    assert event.duration_s == pytest.approx(first["dur"] * 1e-6, rel=1e-9)


def test_step_totals_cpu_trace() -> None:
    events = parse_chrome_trace(CPU_TRACE.read_text())
    totals = step_totals(events)
    per_step = {s: [e for e in events if e.step == s] for s in (0, 1)}
    # two steps: each median is the mean of the two steps' sums
    device = [sum(e.duration_s for e in step) for step in per_step.values()]
    gemms = [
        sum(e.duration_s for e in step if e.name.startswith("aten")) for step in per_step.values()
    ]
    assert totals.device_s == pytest.approx(sum(device) / 2)
    assert totals.gemm_s == pytest.approx(sum(gemms) / 2)
    assert 0 < totals.gemm_s < totals.device_s
    assert (
        totals.launches
        == len(per_step[0])
        == len(CPU_KERNELS) + len([e for e in per_step[0] if e.name.startswith("aten")])
    )


def _x(name: str, cat: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": 2,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


# Hand-written in the format kineto writes for CUDA (event categories, `correlation` args).
# Step 0's second kernel starts after the step's CPU range ends (the CPU ran ahead); a
# gpu_user_annotation for step 1 overlaps step 0's launches on the CPU timeline's clock.
CUDA_TRACE = {
    "traceEvents": [
        _x(f"{STEP_ANNOTATION}0", "user_annotation", 100.0, 50.0),
        _x("cudaLaunchKernel", "cuda_runtime", 110.0, 2.0, correlation=1),
        _x("cuLaunchKernelEx", "cuda_driver", 120.0, 2.0, correlation=2),
        _x("cudaMemsetAsync", "cuda_runtime", 125.0, 1.0, correlation=3),
        _x(f"{STEP_ANNOTATION}1", "user_annotation", 200.0, 50.0),
        _x("cuLaunchKernelEx", "cuda_driver", 210.0, 2.0, correlation=4),
        _x("cudaLaunchKernel", "cuda_runtime", 220.0, 2.0, correlation=5),
        _x(f"{STEP_ANNOTATION}1", "gpu_user_annotation", 90.0, 200.0),
        _x("nvjet_qqtst_128x256_64x4_2x1_v_bz_coopA_TNN", "kernel", 140.0, 30.0, correlation=1),
        _x("triton_poi_fused_abs_amax_0", "kernel", 170.0, 4.0, correlation=2),
        _x("Memset (Device)", "gpu_memset", 175.0, 1.0, correlation=3),
        _x("triton_poi_fused_abs_amax_0", "kernel", 230.0, 6.0, correlation=4),
        _x(
            "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16>(Params)",
            "kernel",
            240.0,
            40.0,
            correlation=5,
        ),
        _x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 10.0, 3.0, correlation=99),
    ]
}


def test_parse_cuda_trace_assigns_steps_by_launch() -> None:
    events = parse_chrome_trace(json.dumps(CUDA_TRACE))
    assert [(e.name[:12], e.step, e.kind) for e in events] == [
        ("Memcpy HtoD ", None, EventKind.DEVICE_MEMORY),  # launch outside any step
        ("nvjet_qqtst_", 0, EventKind.DEVICE_KERNEL),
        ("triton_poi_f", 0, EventKind.DEVICE_KERNEL),  # starts after step 0's range
        ("Memset (Devi", 0, EventKind.DEVICE_MEMORY),
        ("triton_poi_f", 1, EventKind.DEVICE_KERNEL),
        ("void cutlass", 1, EventKind.DEVICE_KERNEL),
    ]
    # CPU ops are launches on a CUDA trace, never kernels.
    assert all(not e.name.startswith("cu") for e in events)
    assert [e.launch_s for e in events] == pytest.approx(
        [None, 110e-6, 120e-6, 125e-6, 210e-6, 220e-6]
    )


def test_step_totals_cuda_trace() -> None:
    totals = step_totals(parse_chrome_trace(json.dumps(CUDA_TRACE)))
    # step 0: gemm 30 + amax 4 + memset 1 us; step 1: amax 6 + gemm 40 us; the memcpy launched
    # outside the steps is left out
    assert totals.device_s == pytest.approx((35e-6 + 46e-6) / 2)
    assert totals.gemm_s == pytest.approx(35e-6)  # median of 30 and 40 us
    assert totals.launches == round((3 + 2) / 2)


def test_step_totals_without_steps() -> None:
    trace = {
        "traceEvents": [
            e
            for e in CUDA_TRACE["traceEvents"]
            if e["cat"] not in ("user_annotation", "gpu_user_annotation")
        ]
    }
    events = parse_chrome_trace(json.dumps(trace))
    assert {e.step for e in events} == {None}
    totals = step_totals(events)  # one "step": the whole trace, the memcpy included
    assert totals.device_s == pytest.approx(84e-6) and totals.gemm_s == pytest.approx(70e-6)
    with pytest.raises(ValueError, match="no kernel"):
        step_totals([])


def test_many_steps_each_kernel_in_the_step_of_its_launch() -> None:
    """A calibration's gemm grid profiles thousands of annotated steps in one trace (343 gemm
    shapes x iterations): each launch is looked up among them (bisect, not a scan). Steps of
    9 us, 1 us apart, then two that touch; launches inside, in the gaps and on the edges."""
    events: list[dict[str, object]] = []
    expected: list[int | None] = []
    steps = 3430
    for i in range(steps):
        start = 100.0 + 10.0 * i
        events.append(_x(f"{STEP_ANNOTATION}{i}", "user_annotation", start, 9.0))
        for offset, step in ((0.0, i), (4.5, i), (9.0, i), (9.5, None)):
            correlation = len(expected)
            events.append(
                _x("cudaLaunchKernel", "cuda_runtime", start + offset, 0.1, correlation=correlation)
            )
            events.append(_x("k", "kernel", 1e6 + correlation, 1.0, correlation=correlation))
            expected.append(step)
    touching = 100.0 + 10.0 * steps
    events.append(_x(f"{STEP_ANNOTATION}{steps}", "user_annotation", touching, 5.0))
    events.append(_x(f"{STEP_ANNOTATION}{steps + 1}", "user_annotation", touching + 5.0, 5.0))
    for offset, step in ((5.0, steps), (5.5, steps + 1), (10.5, None)):
        correlation = len(expected)
        events.append(
            _x("cudaLaunchKernel", "cuda_runtime", touching + offset, 0.1, correlation=correlation)
        )
        events.append(_x("k", "kernel", 1e6 + correlation, 1.0, correlation=correlation))
        expected.append(step)
    parsed = parse_chrome_trace(json.dumps({"traceEvents": events[::-1]}))  # any order
    assert [e.step for e in parsed] == expected


@pytest.mark.parametrize(
    "name",
    [
        "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1",
        "nvjet_qqtst_128x256_64x4_2x1_v_bz_coopA_TNN",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<...>>(Params)",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(...)",
        "void gemv2T_kernel_val<int, int, float, 128, 16, cublasGemvParams<...> >(...)",
        "void epilogue::impl::globalKernel<float, true>(int, float*, cublasLtEpilogue_t, int*)",
        "aten::_scaled_mm",
        "aten::mm",
    ],
)
def test_gemm_kernels(name: str) -> None:
    assert is_gemm_kernel(name)


@pytest.mark.parametrize(
    "name",
    [
        "triton_poi_fused__to_copy_abs_amax_clamp_0",
        "triton_red_fused_abs_amax_1",
        "cpp_fused__scaled_mm__to_copy_abs_amax_clamp_mul_reciprocal_t_0",
        "Memset (Device)",
        "aten::copy_",
        # FBGEMM's sparse and embedding kernels (a real training trace, test_trace_cuda.py)
        "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)",
        "void bounds_check_indices_kernel<long, false>(..., fbgemm_gpu::BoundsCheckMode, ...)",
    ],
)
def test_not_gemm_kernels(name: str) -> None:
    assert not is_gemm_kernel(name)


@pytest.mark.slow
def test_profile_step_cpu(tmp_path: Path) -> None:
    """A real profiled compiled step: C++ kernels and gemms in every step, trace exported."""
    from f8roof.profiler.float8_linear import make_linear
    from f8roof.traffic.recipes import Recipe

    # Dynamo would reuse a graph compiled by an earlier test without C++ kernel profiling.
    torch._dynamo.reset()
    module = torch.compile(
        make_linear(Recipe.from_name("tensorwise"), in_features=48, out_features=64), fullgraph=True
    )
    x = torch.randn(32, 48, dtype=torch.bfloat16, requires_grad=True)
    grad_output = torch.randn(32, 64, dtype=torch.bfloat16)
    path = tmp_path / "trace.json"
    with torch._inductor.config.patch(force_disable_caches=True):
        events = profile_step(
            lambda: module(x).backward(grad_output),
            warmup=2,
            iters=3,
            device="cpu",
            trace_path=str(path),
        )
    assert path.exists() and parse_chrome_trace(path.read_text()) == events
    assert {e.step for e in events} == {0, 1, 2}
    for step in (0, 1, 2):
        names = [e.name for e in events if e.step == step]
        assert names.count("aten::_scaled_mm") == 3
        assert sum(n.startswith("cpp_fused") for n in names) >= 2
