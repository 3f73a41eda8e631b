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


def speedups(gpu: str, recipe: str) -> np.ndarray:
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
    return estimate(GRID, config)["speedup_context"]


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_a_700_w_h100_against_meta_500_w_one(recipe):
    """The same silicon at 700 W and 500 W (and 3.35 vs 2.4 TB/s). A cap lowers the clock the
    tensor cores run at, for both dtypes: a gemm-bound linear's speedup at 700 W over 500 W is
    cap_bf16 / cap_fp8, bounded to 0.85-1.04 (fp8 throttled at least as much as bf16, at most
    1/0.85 as much). Faster memory speeds both graphs' LayerNorm and Sigmoid; float8's fused
    casts run at the same maximum clock at either power."""
    ratio = speedups("h100", recipe) / speedups("h100-meta", recipe)
    assert 0.85 <= ratio.min() and ratio.max() <= 1.05, (ratio.min(), ratio.max())


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_an_h200_against_an_h100(recipe):
    """An H200 is an H100's compute (132 SMs, 1.98 GHz, 700 W) with 1.43x its bandwidth: gemms
    run alike, every kernel of either graph at most 1.43x faster and never slower. Float8's
    overhead only gets faster; but bf16's memory-bound LayerNorm and Sigmoid gain more than
    float8's arithmetic-bound fused casts do, so the speedup may fall, by at most the share of
    those kernels in the step (a few percent here), and rise by at most 1.3x."""
    ratio = speedups("h200", recipe) / speedups("h100", recipe)
    assert 0.95 <= ratio.min() and ratio.max() <= 1.30, (ratio.min(), ratio.max())


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_an_h100_against_itself_at_500_w(recipe):
    """`h100@500w`: the same part, bandwidth and maximum clock, its gemms capped. Only the
    gemms change: bf16's by cap_bf16, fp8's by cap_bf16 x cap_fp8 (fp8 throttled at most 1/0.85
    as much), so the speedup at 700 W over 500 W lies between the gemms' 0.85 and 1.04."""
    ratio = speedups("h100", recipe) / speedups("h100@500w", recipe)
    assert 0.85 <= ratio.min() and ratio.max() <= 1.04, (ratio.min(), ratio.max())
