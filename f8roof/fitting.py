"""Measurements -> calibration: the exact byte fits, the kernel-time model, the fixed costs.

Pure: no device, no compile. `calibrate.py` measures; this module only fits, so it is tested
on synthetic measurements in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from f8roof.calibration import (
    BF16,
    Calibration,
    CalibrationError,
    Ceilings,
    Environment,
    GemmMeasurement,
    KernelMeasurement,
    StepMeasurement,
    VariantFit,
)
from f8roof.estimate import fitted_overhead
from f8roof.models.fit import KernelSample, Shape, ShapeSample, TrafficFit, fit_traffic
from f8roof.models.gemm import linear_gemm_times
from f8roof.models.overhead import FixedCost, fit_fixed_cost, fit_kernel_time
from f8roof.models.recipes import Recipe


@dataclass(frozen=True)
class Measurements:
    environment: Environment
    ceilings: Ceilings
    fit_shapes: tuple[Shape, ...]
    gemms: tuple[GemmMeasurement, ...]
    kernels: tuple[KernelMeasurement, ...]  # overhead kernels, in launch order per step
    steps: tuple[StepMeasurement, ...]

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(s.variant for s in self.steps))


def _samples(m: Measurements, variant: str) -> list[ShapeSample]:
    by_shape: dict[Shape, list[KernelSample]] = {}
    for k in m.kernels:
        if k.variant == variant:
            by_shape.setdefault((k.M, k.K, k.N), []).append(
                KernelSample(
                    k.kernel,
                    k.graph,
                    k.kind,
                    k.role,
                    k.bytes_read + k.bytes_written,
                    k.workspace_bytes,
                    k.polynomial,
                )
            )
    measured = [(s.M, s.K, s.N) for s in m.steps if s.variant == variant]
    return [ShapeSample(shape, tuple(by_shape.get(shape, ()))) for shape in measured]


def _regime_of(traffic: TrafficFit, shape: Shape) -> int | None:
    for index, regime in enumerate(traffic.regimes):
        if shape in regime.shapes:
            return index
    return None


def fit_calibration(m: Measurements, *, verify: int = 2) -> Calibration:
    traffic = {v: fit_traffic(_samples(m, v), verify=verify) for v in m.variants}
    for variant, fit in traffic.items():
        if not fit.regimes:
            reasons = "; ".join(u.reason for u in fit.unfitted) or "no shapes"
            raise CalibrationError(f"cannot fit the bytes of {variant}: {reasons}")
    kernel_ids = []
    for k in m.kernels:
        regime = _regime_of(traffic[k.variant], (k.M, k.K, k.N))
        kernel_ids.append(f"{k.variant}/{regime}/{k.key}" if regime is not None else "unfitted")
    # Keys are recorded as kernel_keys() made them; a mismatch would silently drop factors.
    assert all(
        k.key in {f.key for r in traffic[k.variant].regimes for f in r.kernels}
        for k, kid in zip(m.kernels, kernel_ids)
        if kid != "unfitted"
    )
    if m.kernels:
        kernel_time = fit_kernel_time(
            [k.kind for k in m.kernels],
            [k.bytes_read + k.bytes_written for k in m.kernels],
            [k.time_s for k in m.kernels],
            kernel_ids,
        )
    else:
        raise CalibrationError("no overhead kernel was measured: nothing to fit kernel time to")
    zero = FixedCost(1.0, 0.0, 0.0, 1e-9)
    draft = Calibration(
        m.environment,
        m.ceilings,
        m.gemms,
        m.kernels,
        m.steps,
        tuple(VariantFit(v, traffic[v], zero) for v in m.variants),
        kernel_time,
        m.fit_shapes,
    )
    variants = []
    for variant in m.variants:
        steps = [s for s in m.steps if s.variant == variant]
        table_gemm_s, kernels_s = modelled_device_s(draft, variant, steps)
        fixed = fit_fixed_cost(
            table_gemm_s=table_gemm_s,
            gemm_s=[s.gemm_s for s in steps],
            kernels_s=kernels_s,
            device_s=[s.device_s for s in steps],
            wall_s=[s.wall_s for s in steps],
        )
        variants.append(VariantFit(variant, traffic[variant], fixed))
    return Calibration(
        m.environment,
        m.ceilings,
        m.gemms,
        m.kernels,
        m.steps,
        tuple(variants),
        kernel_time,
        m.fit_shapes,
    )


def modelled_device_s(
    calibration: Calibration, variant: str, steps: list[StepMeasurement]
) -> tuple[np.ndarray, np.ndarray]:
    """Gemm table time and fitted kernel time at the steps' shapes."""
    M, K, N = (np.array([getattr(s, d) for s in steps], dtype=np.float64) for d in "MKN")
    recipe = None if variant == BF16 else Recipe.from_name(variant)
    gemm_s, _ = linear_gemm_times(calibration.gemm_model, recipe, M, K, N)
    _, kernels_s = fitted_overhead(calibration, calibration.variant(variant), M, K, N)
    return gemm_s, kernels_s
