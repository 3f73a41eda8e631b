"""The public time model across parts: one fit, each part through its own datasheet, so the
speedups of parts that differ only in power or bandwidth keep the order physics gives them.

The grid: LayerNorm -> Linear -> Sigmoid (torchao), M 8192-32768, K and N 2048-16384.
"""

import itertools

import numpy as np
import pytest

from f8roof.calibration import public_file
from f8roof.calibration.file import Calibration, timed_publicly
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation

GRID = np.array(
    [
        (m, k, n)
        for m in (8192, 16384, 32768)
        for k, n in itertools.product((2048, 4096, 8192, 16384), repeat=2)
    ]
)


def estimated(gpu: str, recipe: str):
    part = find_gpu(gpu)
    calibration = timed_publicly(
        Calibration.load(shipped_calibration(part)),
        public_file.load(public_file.SHIPPED),
        part.name,
    )
    config = EstimateConfig(
        gpu=part,
        calibration=calibration,
        recipe=Recipe.from_name(recipe),
        implementation=Implementation.TORCHAO,
        context=Context.from_names("layernorm", "sigmoid"),
    )
    return estimate(GRID, config)


def speedups(gpu: str, recipe: str) -> np.ndarray:
    return np.asarray(estimated(gpu, recipe)["speedup_context"])


def physical_range(slow: str, fast: str, recipe: str) -> tuple[np.ndarray, np.ndarray]:
    """What physics lets the speedup on `fast` be, per shape, given `slow`'s parts: gemms
    scaled as the fit scales each dtype's peak between the parts; each graph's other kernels
    (bf16's LayerNorm and Sigmoid, float8's with its casts fused in) at most the bandwidth
    ratio faster and never slower (memory-bound kernels gain it all, arithmetic-bound ones, at
    the same clock, none). Returned as the lowest and highest ratio to `slow`'s speedup."""
    rows = estimated(slow, recipe)
    g16, g8 = np.asarray(rows["bf16_s"]), np.asarray(rows["fp8_gemm_s"])
    bf16_kernels = np.asarray(rows["context_s"])
    fp8_kernels = np.asarray(rows["fp8_s"]) - g8 + bf16_kernels  # float8 graph's, in full
    fit = public_file.load(public_file.SHIPPED)
    family = "fp8_rowwise" if recipe.startswith("rowwise") else "fp8"

    def gemm_factor(dtype: str) -> float:
        fraction = {p: dict(fit.part(p).gemms)[dtype].peak_fraction for p in (slow, fast)}
        return fraction[slow] / fraction[fast]

    gpus = find_gpu(fast), find_gpu(slow)
    faster = gpus[0].memory_bandwidth_bytes_per_s / gpus[1].memory_bandwidth_bytes_per_s
    before = (g16 + bf16_kernels) / (g8 + fp8_kernels)
    corners = [
        (g16 * gemm_factor("bf16") + b) / (g8 * gemm_factor(family) + f) / before
        for b in (bf16_kernels, bf16_kernels / faster)
        for f in (fp8_kernels, fp8_kernels / faster)
    ]
    return np.min(corners, axis=0), np.max(corners, axis=0)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_a_700_w_h100_against_meta_500_w_one(recipe):
    """The same silicon at 700 W and 500 W (and 3.35 vs 2.4 TB/s). A cap lowers the clock the
    tensor cores run at, for both dtypes: a gemm-bound linear's speedup at 700 W over 500 W is
    cap_bf16 / cap_fp8, bounded to 0.85-1.04 (fp8 throttled at least as much as bf16, at most
    1/0.85 as much). Faster memory speeds both graphs' LayerNorm and Sigmoid; float8's fused
    casts, bound by their arithmetic, run at the same maximum clock at either power, so a
    linear whose casts weigh can fall below the gemms' 0.85, as far as `physical_range`
    allows."""
    ratio = speedups("h100", recipe) / speedups("h100-meta", recipe)
    low, high = physical_range("h100-meta", "h100", recipe)
    assert np.all(ratio >= low - 1e-6) and np.all(ratio <= high + 1e-6)
    assert ratio.max() <= 1.05, ratio.max()


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_an_h200_against_an_h100(recipe):
    """An H200 is an H100's compute (132 SMs, 1.98 GHz, 700 W) with 1.43x its bandwidth: gemms
    run alike, every kernel of either graph at most 1.43x faster and never slower. Float8's
    overhead only gets faster; but bf16's memory-bound LayerNorm and Sigmoid gain more than
    float8's arithmetic-bound fused casts do, so the speedup may fall, by at most the share of
    those kernels in the step (`physical_range`: a few percent here), and rise by at most
    1.3x."""
    ratio = speedups("h200", recipe) / speedups("h100", recipe)
    low, high = physical_range("h100", "h200", recipe)
    assert np.all(ratio >= low - 1e-6) and np.all(ratio <= high + 1e-6)
    assert ratio.max() <= 1.30, ratio.max()


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_an_h100_against_itself_at_500_w(recipe):
    """`h100@500w`: the same part, bandwidth and maximum clock, its gemms capped. Only the
    gemms change: bf16's by cap_bf16, fp8's by cap_bf16 x cap_fp8 (fp8 throttled at most 1/0.85
    as much), so the speedup at 700 W over 500 W lies between the gemms' 0.85 and 1.04."""
    ratio = speedups("h100", recipe) / speedups("h100@500w", recipe)
    assert 0.85 <= ratio.min() and ratio.max() <= 1.04, (ratio.min(), ratio.max())
