"""Gemm and end-to-end (wall-clock) timing.

Every measurement: warm-up (and compilation) outside the timed region, one sample per
iteration, median with p10/p90. On CUDA each iteration is
timed with CUDA events after a 256 MB write that evicts the inputs from L2 (50 MB on H100/H200),
so a gemm is timed reading its operands from HBM as it does inside a training step. On CPU,
and whenever a clock is injected (tests), a host clock brackets each synchronized iteration.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from f8roof.profiler import torchao_float8
from f8roof.profiler.float8_linear import E4M3, E5M2, USE_FAST_ACCUM
from f8roof.profiler.graphs import build_step
from f8roof.profiler.trace import L2_FLUSH_BYTES, KernelEvent, profile_step, step_totals
from f8roof.timing.gemm import GemmRole, gemm_dims
from f8roof.traffic.variant import Variant


@dataclass(frozen=True)
class TimingResult:
    median_s: float
    p10_s: float
    p90_s: float
    n: int

    def __post_init__(self) -> None:
        if self.n < 1 or not 0 <= self.p10_s <= self.median_s <= self.p90_s:
            raise ValueError(f"inconsistent timing {self}")


def _percentile(sorted_samples: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = (len(sorted_samples) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (position - low)


def summarize(samples_s: list[float]) -> TimingResult:
    ordered = sorted(samples_s)
    return TimingResult(
        median_s=_percentile(ordered, 0.5),
        p10_s=_percentile(ordered, 0.1),
        p90_s=_percentile(ordered, 0.9),
        n=len(ordered),
    )


def time_fn(
    fn: Callable[[], object],
    *,
    warmup: int,
    iters: int,
    device: str,
    clock: Callable[[], int] | None = None,
) -> TimingResult:
    """Time `fn` per iteration after `warmup` untimed calls.

    `clock` returns nanoseconds (default `time.perf_counter_ns`); it is used on CPU and on
    CUDA when given, with a device synchronize on both sides of every call. Without it, CUDA
    iterations are timed with CUDA events.
    """
    if warmup < 0 or iters < 1:
        raise ValueError(f"need warmup >= 0 and iters >= 1, got {warmup=} {iters=}")
    is_cuda = torch.device(device).type == "cuda"
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if is_cuda else None

    def synchronize() -> None:
        if is_cuda:
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        fn()
    synchronize()
    if is_cuda and clock is None:
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(iters)
        ]
        assert flush is not None, "a CUDA clock flushes L2"
        for start, end in events:
            flush.fill_(1)
            start.record()
            fn()
            end.record()
        synchronize()
        return summarize([start.elapsed_time(end) * 1e-3 for start, end in events])
    clock = clock or time.perf_counter_ns
    samples_s = []
    for _ in range(iters):
        if flush is not None:
            flush.fill_(1)
            synchronize()
        start_ns = clock()
        fn()
        synchronize()
        samples_s.append((clock() - start_ns) * 1e-9)
    return summarize(samples_s)


def gemm_operands(
    dtype: str, gemm: str, M: int, K: int, N: int, *, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random operands (a, b) of one linear gemm, `a @ b`, in the layouts training uses.

    float8: `a` row-major, `b` column-major (what `_scaled_mm` requires), grad_output in
    e5m2, input and weight in e4m3. bf16: the layouts of the plain linear, where grad_input
    reads the (N, K) weight row-major and grad_weight reads grad_output transposed.
    """
    m, k, n = gemm_dims(GemmRole(gemm), M, K, N)

    def rand(rows: int, cols: int, *, column_major: bool) -> torch.Tensor:
        # randn, never zeros: gemms on zeros draw less power and run faster than on real data.
        if column_major:
            return torch.randn(cols, rows, device=device).t()
        return torch.randn(rows, cols, device=device)

    if dtype != "bf16":
        a_dtype = E4M3 if gemm == "output" else E5M2
        return (rand(m, k, column_major=False).to(a_dtype), rand(k, n, column_major=True).to(E4M3))
    layouts = {"output": (False, True), "grad_input": (False, False), "grad_weight": (True, False)}
    a_col, b_col = layouts[gemm]
    return (
        rand(m, k, column_major=a_col).to(torch.bfloat16),
        rand(k, n, column_major=b_col).to(torch.bfloat16),
    )


def gemm_fn(
    dtype: str, gemm: str, M: int, K: int, N: int, *, device: str
) -> Callable[[], torch.Tensor]:
    """One gemm of a (M, K, N) linear, ready to call: bf16 `torch.mm`, or float8 `_scaled_mm`
    with one scale per tensor (fp8) or per row of `a` and column of `b` (fp8_rowwise)."""
    a, b = gemm_operands(dtype, gemm, M, K, N, device=device)
    if dtype == "bf16":
        return lambda: torch.mm(a, b)
    if dtype == "fp8_rowwise":
        scale_a = torch.rand(a.shape[0], 1, device=device) + 0.5
        scale_b = torch.rand(1, b.shape[1], device=device) + 0.5
    else:
        scale_a = torch.ones((), device=device)
        scale_b = torch.ones((), device=device)
    return lambda: torch._scaled_mm(
        a,
        b,
        scale_a=scale_a,
        scale_b=scale_b,
        out_dtype=torch.bfloat16,
        use_fast_accum=USE_FAST_ACCUM[gemm],
    )


def linear_step(
    variant: Variant, M: int, K: int, N: int, *, device: str, compiled: bool = True
) -> Callable[[], None]:
    """Forward + backward of the variant's graph at (M, K, N) on random data; compiled here.

    Compiled with static shapes, as a training step with fixed shapes runs, after
    `torch.compiler.reset()`: the linear's code object is shared by every call, so calls
    over many shapes and variants would otherwise pile up guards, switch to dynamic shapes and
    reach Dynamo's recompile limit. It runs once here, inside `inductor_patch_scope`, so that
    torchao's process-wide Inductor patch applies to its own graphs and to no later compile.
    Gradients are reset to None before each step, as `zero_grad(set_to_none=True)` does, so
    backward writes them instead of accumulating (no extra add kernel).
    """
    if compiled:
        torch.compiler.reset()
    with torchao_float8.inductor_patch_scope():
        step = build_step(variant, (M, K, N), device=device, initialize=True)
        module = step.module
        run_module = torch.compile(module, fullgraph=True, dynamic=False) if compiled else module

        def run() -> None:
            for tensor in (*step.inputs, *module.parameters()):
                tensor.grad = None
            run_module(*step.inputs).backward(step.grad_output)

        if compiled:
            run()
    return run


@dataclass(frozen=True)
class StepTimes:
    """A step on both clocks: device (profiler kernel durations) and wall (synchronized)."""

    device_s: float  # all kernels of a step, summed; median over steps
    gemm_s: float  # the gemm kernels among them
    wall_s: float
    launches: int  # kernels per step
    events: tuple[KernelEvent, ...]


def measure_step(
    step: Callable[[], object],
    *,
    device: str,
    warmup: int,
    iters: int,
    trace_path: str | None = None,
) -> StepTimes:
    """Profile `step` (warm-up compiles), then time it on the wall clock."""
    events = profile_step(step, warmup=warmup, iters=iters, device=device, trace_path=trace_path)
    wall = time_fn(step, warmup=1, iters=iters, device=device)
    totals = step_totals(events)
    return StepTimes(
        device_s=totals.device_s,
        gemm_s=totals.gemm_s,
        wall_s=wall.median_s,
        launches=totals.launches,
        events=tuple(events),
    )
