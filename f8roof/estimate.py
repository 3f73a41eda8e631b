"""Shapes x recipe x GPU -> a pandas DataFrame of bf16 vs float8 times and speedups.

The sympy traffic models are compiled once per configuration (lambdify) and every shape is then
a numpy array operation: a million shapes take well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
import sympy as sp

from f8roof.models.gemm import (
    SEED_LAUNCH_FLOOR_S,
    SEED_MEMORY_EFFICIENCY,
    RooflineGemm,
    TableGemm,
    linear_gemm_times,
)
from f8roof.models.hardware import GPU
from f8roof.models.recipes import Recipe, Role
from f8roof.models.traffic import SYMBOLS, Level, ideal_traffic, worst_traffic
from f8roof.shapes import as_array

FP8_ALIGNMENT = 16  # float8 gemms on CUDA need K and N multiples of 16


@dataclass(frozen=True)
class EstimateConfig:
    recipe: Recipe
    gpu: GPU
    fused: frozenset[Role] = frozenset()  # the seed's F per role
    limited: frozenset[Role] = frozenset()  # the seed's L ("compile limitations") per role
    gemm: RooflineGemm | TableGemm | None = None  # None: roofline on `gpu` at seed defaults
    memory_efficiency: float = SEED_MEMORY_EFFICIENCY
    launch_floor_s: float = SEED_LAUNCH_FLOOR_S
    gemm_source: str = field(default="roofline", compare=False)

    @property
    def gemm_model(self) -> RooflineGemm | TableGemm:
        return self.gemm if self.gemm is not None else RooflineGemm(self.gpu)


@lru_cache(maxsize=64)
def _compiled_bytes(recipe: Recipe, fused: frozenset, limited: frozenset, level: Level):
    """numpy function (M, K, N) -> overhead bytes, built once per model."""
    if level is Level.WORST:
        model = worst_traffic(recipe, fused=fused, limited=limited)
    else:
        model = ideal_traffic(recipe, fused=fused)
    return sp.lambdify(SYMBOLS, model.total, modules="numpy"), model.small_kernels


def overhead_bytes(config: EstimateConfig, level: Level, M, K, N) -> tuple[np.ndarray, int]:
    """Overhead bytes at float64 arrays M, K, N, and the model's small-kernel count."""
    fn, small_kernels = _compiled_bytes(config.recipe, config.fused, config.limited, level)
    values = fn(M, K, N)
    return np.broadcast_to(np.asarray(values, dtype=np.float64), M.shape), small_kernels


def fp8_reason(K: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Why a float8 gemm cannot run this shape ('' where it can)."""
    k_bad = K % FP8_ALIGNMENT != 0
    n_bad = N % FP8_ALIGNMENT != 0
    reasons = np.full(K.shape, "", dtype=object)
    reasons[k_bad] = "K not a multiple of 16"
    reasons[n_bad] = "N not a multiple of 16"
    reasons[k_bad & n_bad] = "K and N not multiples of 16"
    return reasons


def estimate(shapes, config: EstimateConfig) -> pd.DataFrame:
    """The roofline-mode estimate: worst and ideal overhead beside the gemm times."""
    array = as_array(shapes)
    M, K, N = array[:, 0], array[:, 1], array[:, 2]
    Mf, Kf, Nf = (x.astype(np.float64) for x in (M, K, N))  # converted once, used by every model
    gemm = config.gemm_model
    bf16_gemm_s, bf16_extra = linear_gemm_times(gemm, None, Mf, Kf, Nf)
    fp8_gemm_s, fp8_extra = linear_gemm_times(gemm, config.recipe, Mf, Kf, Nf)
    bandwidth = config.gpu.memory_bandwidth_bytes_per_s * config.memory_efficiency
    columns: dict[str, object] = {
        "M": M,
        "K": K,
        "N": N,
        "recipe": pd.Categorical.from_codes(np.zeros(len(M), dtype=np.int8), [config.recipe.name]),
        "bf16_gemm_s": bf16_gemm_s,
        "fp8_gemm_s": fp8_gemm_s,
    }
    for level in (Level.WORST, Level.IDEAL):
        nbytes, small_kernels = overhead_bytes(config, level, Mf, Kf, Nf)
        overhead_s = nbytes / bandwidth + small_kernels * config.launch_floor_s
        columns[f"overhead_bytes_{level.value}"] = nbytes
        columns[f"overhead_s_{level.value}"] = overhead_s
        columns[f"fp8_s_{level.value}"] = fp8_gemm_s + overhead_s
        columns[f"speedup_{level.value}"] = bf16_gemm_s / (fp8_gemm_s + overhead_s)
    reasons = fp8_reason(K, N)
    columns["fp8_ok"] = reasons == ""
    columns["fp8_reason"] = reasons
    columns["gemm_extrapolated"] = bf16_extra | fp8_extra
    return pd.DataFrame(columns)


def square_breakeven(config: EstimateConfig, column: str = "speedup_worst", *,
                     max_size: int = 65536) -> int | None:
    """Smallest S (a multiple of 16) where float8 wins at M = K = N = S and keeps winning up to
    `max_size`; None if it never does."""
    sizes = np.arange(FP8_ALIGNMENT, max_size + 1, FP8_ALIGNMENT)
    speedup = estimate(np.repeat(sizes[:, None], 3, axis=1), config)[column].to_numpy()
    losing = np.flatnonzero(speedup <= 1.0)
    if len(losing) == len(sizes):
        return None
    if len(losing) == 0:
        return int(sizes[0])
    if losing[-1] == len(sizes) - 1:
        return None
    return int(sizes[losing[-1] + 1])
