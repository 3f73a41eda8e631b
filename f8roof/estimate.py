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

from f8roof.calibration import BF16, Calibration, VariantFit
from f8roof.models.fit import nearest_regime
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
from f8roof.models.variant import FP8_DIM_MULTIPLE, fp8_reasons
from f8roof.shapes import as_array


@dataclass(frozen=True)
class EstimateConfig:
    recipe: Recipe
    gpu: GPU
    fused: frozenset[Role] = frozenset()  # the seed's F per role
    limited: frozenset[Role] = frozenset()  # the seed's L ("compile limitations") per role
    gemm: RooflineGemm | TableGemm | None = None  # None: the calibration's table, or roofline
    memory_efficiency: float = SEED_MEMORY_EFFICIENCY
    launch_floor_s: float = SEED_LAUNCH_FLOOR_S
    calibration: Calibration | None = field(default=None, compare=False)

    @property
    def gemm_model(self) -> RooflineGemm | TableGemm:
        if self.gemm is not None:
            return self.gemm
        if self.calibration is not None:
            return self.calibration.gemm_model
        return RooflineGemm(self.gpu)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """What worst and ideal bytes are timed at: measured when calibrated, else the seed's
        fraction of the datasheet."""
        if self.calibration is not None:
            return self.calibration.ceilings.copy_bandwidth_bytes_per_s
        return self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency

    @property
    def small_kernel_s(self) -> float:
        if self.calibration is not None:
            return self.calibration.ceilings.launch_floor_s
        return self.launch_floor_s


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


def estimate(shapes, config: EstimateConfig) -> pd.DataFrame:
    """The roofline-mode estimate: worst and ideal overhead beside the gemm times."""
    array = as_array(shapes)
    M, K, N = array[:, 0], array[:, 1], array[:, 2]
    Mf, Kf, Nf = (x.astype(np.float64) for x in (M, K, N))  # converted once, used by every model
    gemm = config.gemm_model
    bf16_gemm_s, bf16_extra = linear_gemm_times(gemm, None, Mf, Kf, Nf)
    fp8_gemm_s, fp8_extra = linear_gemm_times(gemm, config.recipe, Mf, Kf, Nf)
    bandwidth = config.bandwidth_bytes_per_s
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
        overhead_s = nbytes / bandwidth + small_kernels * config.small_kernel_s
        columns[f"overhead_bytes_{level.value}"] = nbytes
        columns[f"overhead_s_{level.value}"] = overhead_s
        columns[f"fp8_s_{level.value}"] = fp8_gemm_s + overhead_s
        columns[f"speedup_{level.value}"] = bf16_gemm_s / (fp8_gemm_s + overhead_s)
    if config.calibration is not None:
        columns.update(
            calibrated_columns(
                config.calibration,
                config.recipe,
                Mf,
                Kf,
                Nf,
                bf16_gemm_s=bf16_gemm_s,
                fp8_gemm_s=fp8_gemm_s,
            )
        )
    reasons = fp8_reasons(config.recipe, M, K, N)
    columns["fp8_ok"] = reasons == ""
    columns["fp8_reason"] = reasons
    columns["gemm_extrapolated"] = bf16_extra | fp8_extra
    return pd.DataFrame(columns)


def fitted_overhead(calibration: Calibration, fit: VariantFit, M, K, N):
    """Bytes and time of the fitted kernel set of a variant, each shape in its nearest regime."""
    regimes = fit.traffic.regimes
    owner = nearest_regime(regimes, M, K, N)
    nbytes, time_s = np.zeros(M.shape), np.zeros(M.shape)
    for index, regime in enumerate(regimes):
        mask = owner == index
        if not mask.any():
            continue
        m, k, n = M[mask], K[mask], N[mask]
        for kernel in regime.kernels:
            kb = kernel.nbytes(m, k, n)
            nbytes[mask] += kb
            time_s[mask] += calibration.kernel_time.time_s(
                kernel.kind, kb, kernel_id=f"{fit.variant}/{index}/{kernel.key}"
            )
    return nbytes, time_s


def calibrated_columns(
    calibration: Calibration, recipe: Recipe, M, K, N, *, bf16_gemm_s, fp8_gemm_s
) -> dict[str, np.ndarray]:
    """The calibrated end-to-end prediction on both clocks (device first)."""
    bf16, fp8 = calibration.variant(BF16), calibration.variant(recipe.name)
    _, bf16_kernels_s = fitted_overhead(calibration, bf16, M, K, N)
    nbytes, overhead_s = fitted_overhead(calibration, fp8, M, K, N)
    bf16_s = bf16_gemm_s * bf16.fixed.gemm_factor + bf16_kernels_s + bf16.fixed.device_extra_s
    fp8_s = fp8_gemm_s * fp8.fixed.gemm_factor + overhead_s + fp8.fixed.device_extra_s
    bf16_wall_s, fp8_wall_s = bf16.fixed.wall_s(bf16_s), fp8.fixed.wall_s(fp8_s)
    return {
        "overhead_bytes_fitted": nbytes,
        "overhead_s_fitted": overhead_s,
        "bf16_s": bf16_s,
        "fp8_s": fp8_s,
        "speedup": bf16_s / fp8_s,
        "bf16_wall_s": bf16_wall_s,
        "fp8_wall_s": fp8_wall_s,
        "speedup_wall": bf16_wall_s / fp8_wall_s,
    }


def codegen_columns(
    frame: pd.DataFrame, config: EstimateConfig, *, progress=None
) -> dict[str, np.ndarray]:
    """Overhead from the exact kernels Inductor generates for each shape (codegen-only, no GPU
    needed), timed with the calibration's kernel-time model. Seconds per shape, not microseconds:
    for the shapes that matter, not sweeps."""
    from f8roof.models.fit import ShapeSample, kernel_keys, kind_family
    from f8roof.models.variant import Implementation, Variant
    from f8roof.profiler.capture import capture

    calibration = config.calibration
    if calibration is None:
        raise ValueError(
            "--overhead codegen times kernels with a calibration's kernel-time model: "
            "give --calibration (or a GPU with a shipped one)"
        )
    fit = calibration.variant(config.recipe.name)
    shapes = list(zip(frame.M, frame.K, frame.N))
    owners = nearest_regime(
        fit.traffic.regimes, *(np.array(c, dtype=np.float64) for c in zip(*shapes))
    )
    nbytes, time_s = np.zeros(len(shapes)), np.zeros(len(shapes))
    for i, shape in enumerate(progress(shapes) if progress else shapes):
        samples = capture(
            Variant.of(config.recipe, Implementation.REFERENCE),
            tuple(int(x) for x in shape),
            device="codegen",
            gpu=config.gpu,
        ).samples()
        regime = fit.traffic.regimes[owners[i]]
        # The nearest calibration shape's per-kernel factors apply where it has this kernel set.
        same_set = ShapeSample(shape, tuple(samples)).signature == tuple(
            (k.graph, kind_family(k.kind), k.role, str(k.nbytes)) for k in regime.kernels
        )
        for key, sample in zip(kernel_keys(samples), samples):
            kernel_id = f"{fit.variant}/{owners[i]}/{key}" if same_set else None
            nbytes[i] += sample.nbytes
            time_s[i] += float(
                calibration.kernel_time.time_s(sample.kind, sample.nbytes, kernel_id=kernel_id)
            )
    fp8_s = (
        frame["fp8_gemm_s"].to_numpy() * fit.fixed.gemm_factor + time_s + fit.fixed.device_extra_s
    )
    return {
        "overhead_bytes_codegen": nbytes,
        "overhead_s_codegen": time_s,
        "fp8_s_codegen": fp8_s,
        "speedup_codegen": frame["bf16_s"].to_numpy() / fp8_s,
    }


def square_breakeven(
    config: EstimateConfig, column: str = "speedup_worst", *, max_size: int = 65536
) -> int | None:
    """Smallest S (a multiple of 16) where float8 wins at M = K = N = S and keeps winning up to
    `max_size`; None if it never does."""
    sizes = np.arange(FP8_DIM_MULTIPLE, max_size + 1, FP8_DIM_MULTIPLE)
    speedup = estimate(np.repeat(sizes[:, None], 3, axis=1), config)[column].to_numpy()
    losing = np.flatnonzero(speedup <= 1.0)
    if len(losing) == len(sizes):
        return None
    if len(losing) == 0:
        return int(sizes[0])
    if losing[-1] == len(sizes) - 1:
        return None
    return int(sizes[losing[-1] + 1])
