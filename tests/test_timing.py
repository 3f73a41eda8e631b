"""Timing: exact statistics from a fake clock, operand layouts, and tiny real CPU runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requires
import torch

from f8roof.profiler.timing import (
    TimingResult,
    gemm_fn,
    gemm_operands,
    linear_step,
    summarize,
    time_fn,
)
from f8roof.timing.gemm import GEMM_ROLES, GemmRole, gemm_dims
from f8roof.traffic.variant import Variant

M, K, N = 32, 48, 64


def _fake_clock(durations_ns: list[int]) -> Iterator[int]:
    """Readings whose successive start/end pairs are `durations_ns` apart."""
    now = 1_000_000
    for duration in durations_ns:
        yield now
        yield now + duration
        now += duration + 777  # time between iterations is never measured


def test_time_fn_fake_clock_exact() -> None:
    calls = []
    clock = _fake_clock([5_000, 1_000, 3_000, 2_000, 4_000])
    result = time_fn(
        lambda: calls.append(1), warmup=2, iters=5, device="cpu", clock=lambda: next(clock)
    )
    assert len(calls) == 7  # warm-up calls are untimed but made
    # sorted 1..5 us: median 3, p10 = 1 + 0.4 * 1, p90 = 4 + 0.6 * 1 (linear interpolation)
    assert (result.median_s, result.p10_s, result.p90_s) == pytest.approx((3e-6, 1.4e-6, 4.6e-6))
    assert result.n == 5


def test_time_fn_fake_clock_single_and_even() -> None:
    clock = _fake_clock([7_000])
    result = time_fn(lambda: None, warmup=0, iters=1, device="cpu", clock=lambda: next(clock))
    assert (result.median_s, result.p10_s, result.p90_s) == pytest.approx((7e-6,) * 3)
    assert result.n == 1
    clock = _fake_clock([2_000, 8_000, 4_000, 6_000])
    result = time_fn(lambda: None, warmup=0, iters=4, device="cpu", clock=lambda: next(clock))
    assert result.median_s == pytest.approx(5e-6)


def test_time_fn_rejects_bad_counts() -> None:
    with pytest.raises(ValueError):
        time_fn(lambda: None, warmup=0, iters=0, device="cpu")
    with pytest.raises(ValueError):
        time_fn(lambda: None, warmup=-1, iters=1, device="cpu")


def test_timing_result_validates() -> None:
    with pytest.raises(ValueError):
        TimingResult(median_s=1.0, p10_s=2.0, p90_s=3.0, n=3)
    assert summarize([3.0, 1.0, 2.0]).median_s == 2.0


def _row_major(t: torch.Tensor) -> bool:
    return t.stride(1) == 1


def _col_major(t: torch.Tensor) -> bool:
    return t.stride(0) == 1


@pytest.mark.parametrize("gemm", [r.value for r in GEMM_ROLES])
def test_gemm_operands(gemm: str) -> None:
    m, k, n = gemm_dims(GemmRole(gemm), M, K, N)
    a, b = gemm_operands("fp8", gemm, M, K, N, device="cpu")
    assert a.shape == (m, k) and b.shape == (k, n)
    assert _row_major(a) and _col_major(b)  # what CUDA _scaled_mm requires
    assert a.dtype == (torch.float8_e4m3fn if gemm == "output" else torch.float8_e5m2)
    assert b.dtype == torch.float8_e4m3fn
    a, b = gemm_operands("bf16", gemm, M, K, N, device="cpu")
    assert a.shape == (m, k) and b.shape == (k, n) and a.dtype == b.dtype == torch.bfloat16
    # The plain linear's layouts: weight.T, weight, grad_output.T and input as stored.
    expected = {"output": (True, False), "grad_input": (True, True), "grad_weight": (False, True)}
    assert (_row_major(a), _row_major(b)) == expected[gemm]
    assert a.float().std() > 0 and b.float().std() > 0  # random, never zeros


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_gemm_fn_times_on_cpu(dtype: str) -> None:
    result = time_fn(
        gemm_fn(dtype, "grad_weight", M, K, N, device="cpu"), warmup=1, iters=3, device="cpu"
    )
    assert result.n == 3 and result.median_s > 0


BF16 = Variant(None, None)


def test_linear_step_eager_cpu() -> None:
    step = linear_step(BF16, M, K, N, device="cpu", compiled=False)
    result = time_fn(step, warmup=1, iters=3, device="cpu")
    assert result.n == 3 and result.median_s > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "key",
    [
        "reference:tensorwise",
        pytest.param(
            "torchao:rowwise@silu_mul+gelu", marks=[requires.torchao, requires.cpu_rowwise]
        ),
        "bf16@rmsnorm+none",
    ],
)
def test_linear_step_compiled_cpu(key: str) -> None:
    step = linear_step(Variant.from_key(key), M, K, N, device="cpu")
    result = time_fn(step, warmup=2, iters=3, device="cpu")
    assert result.n == 3 and 0 < result.p10_s <= result.p90_s
