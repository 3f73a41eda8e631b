"""Synthetic measurements with a known truth, to test the fits (not measured data)."""

import itertools

import sympy as sp

from f8roof.calibration.file import (
    Ceilings,
    Environment,
    GemmMeasurement,
    KernelMeasurement,
    StepMeasurement,
)
from f8roof.calibration.fitting import Measurements
from f8roof.traffic.fit import FIT_SHAPES, KernelSample, from_sympy, kernel_keys
from f8roof.traffic.monomials import SYMBOLS
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.worst_ideal import worst_traffic

GRID = [2**i for i in range(8, 15)]
FLOOR_S, BANDWIDTH = 3e-6, 3e12
DEVICE_EXTRA_S, WALL_EXTRA_S, WALL_FLOOR_S = 5e-6, 2e-6, 40e-6


def gemm_time(m, k, n, dtype):
    return 2 * m * k * n / (1400e12 if dtype.startswith("fp8") else 700e12) + 4e-6


def kernel_time(nbytes):
    return FLOOR_S + nbytes / BANDWIDTH


def environment(device="cuda", name="NVIDIA H200", gpu="h200"):
    return Environment(
        device=device,
        device_name=name,
        gpu=gpu,
        sm_count=132,
        torch="2.11.0",
        triton="3.6.0",
        torchao="0.18.0",
        cuda="12.8",
        date="2026-11-29",
        f8roof="0.1.0",
    )


def measurements(recipes=("tensorwise", "rowwise"), shapes=FIT_SHAPES, device="cuda"):
    """bf16 and the reference implementation of `recipes` (its worst-case model is the truth):
    variant keys `bf16`, `reference:tensorwise`, ..."""
    gemms = tuple(
        GemmMeasurement(dtype, role, m, k, n, gemm_time(m, k, n, dtype))
        for dtype in ("bf16", "fp8", "fp8_rowwise")
        for role in ("output", "grad_input", "grad_weight")
        for m, k, n in itertools.product(GRID, repeat=3)
    )
    kernels, steps = [], []
    for variant in ("bf16", *(f"reference:{r}" for r in recipes)):
        recipe = None if variant == "bf16" else variant.partition(":")[2]
        model = None if recipe is None else worst_traffic(Recipe.from_name(recipe))
        for M, K, N in shapes:
            at = dict(zip(SYMBOLS, (M, K, N)))
            gemm_s = sum(
                gemm_time(
                    *d,
                    "bf16"
                    if variant == "bf16"
                    else ("fp8_rowwise" if recipe.startswith("row") else "fp8"),
                )
                for d in ((M, K, N), (M, N, K), (N, M, K))
            )
            device_s = gemm_s
            traffic = model.kernels if model else ()
            samples = [
                KernelSample(
                    k.name,
                    "bwd" if k.role.value == "grad_output" else "fwd",
                    "reduction" if "amax" in k.name else "pointwise",
                    k.role.value,
                    int(k.bytes_total.subs(at)),
                    0,
                    from_sympy(k.bytes_total),
                )
                for k in traffic
            ]
            for k, sample, key in zip(traffic, samples, kernel_keys(samples)):
                read, written = int(k.bytes_read.subs(at)), int(k.bytes_written.subs(at))
                t = kernel_time(read + written)
                device_s += t
                kernels.append(
                    KernelMeasurement(
                        variant,
                        M,
                        K,
                        N,
                        key,
                        k.name,
                        sample.graph,
                        sample.kind,
                        k.role.value,
                        read,
                        written,
                        0,
                        t,
                        sample.polynomial,
                    )
                )
            device_s += DEVICE_EXTRA_S
            wall = max(device_s + WALL_EXTRA_S, WALL_FLOOR_S)
            steps.append(StepMeasurement(variant, M, K, N, device_s, gemm_s, wall, 10))
    ceilings = Ceilings(800e12, 1500e12, 4.3e12, 2e-6)
    return Measurements(
        environment(device), ceilings, tuple(shapes), gemms, tuple(kernels), tuple(steps)
    )


def total_bytes(recipe, shape):
    return int(
        sp.sympify(worst_traffic(Recipe.from_name(recipe)).total).subs(dict(zip(SYMBOLS, shape)))
    )
