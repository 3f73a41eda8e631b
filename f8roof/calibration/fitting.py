"""Measurements -> calibration: the exact byte fits, the kernel-time model, the fixed costs.

Pure: no device, no compile. `calibrate.py` measures; this module only assembles the fits of
`models/fit.py`, so it is tested on synthetic measurements in milliseconds. Two builders, one
per calibration kind: `fit_calibration` (a device run) and `traffic_calibration` (generated code
only, timed by the datasheet model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from f8roof.calibration.file import (
    Calibration,
    CalibrationError,
    CalibrationKind,
    Ceilings,
    Environment,
    GemmMeasurement,
    KernelMeasurement,
    StepMeasurement,
    VariantFit,
)
from f8roof.models.datasheet import DatasheetTiming
from f8roof.models.fit import (
    KernelSample,
    Shape,
    ShapeSample,
    TrafficFit,
    fit_fixed_cost,
    fit_kernel_time,
    fit_traffic,
)
from f8roof.models.gemm import linear_gemm_times
from f8roof.models.kernel_time import KernelTimeModel, KindTime, Residuals
from f8roof.models.monomials import ShapeArrays
from f8roof.models.overhead import fitted_kernels
from f8roof.models.variant import Variant


@dataclass(frozen=True)
class Measurements:
    environment: Environment
    ceilings: Ceilings
    fit_shapes: tuple[Shape, ...]
    gemms: tuple[GemmMeasurement, ...]
    kernels: tuple[KernelMeasurement, ...]  # non-gemm kernels, in launch order per step
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


def fit_variants(
    samples: dict[str, list[ShapeSample]], *, verify: int = 2
) -> dict[str, TrafficFit]:
    """Exact byte fits per variant; a variant with no fitted regime is an error naming why."""
    traffic = {key: fit_traffic(s, verify=verify) for key, s in samples.items()}
    for key, fit in traffic.items():
        if not fit.regimes:
            reasons = "; ".join(u.reason for u in fit.unfitted) or "no shapes"
            raise CalibrationError(f"cannot fit the bytes of {key}: {reasons}")
    return traffic


def _regime_of(traffic: TrafficFit, shape: Shape) -> int | None:
    for index, regime in enumerate(traffic.regimes):
        if shape in regime.shapes:
            return index
    return None


def fit_calibration(m: Measurements, *, verify: int = 2) -> Calibration:
    """A measured calibration from a device run."""
    traffic = fit_variants({v: _samples(m, v) for v in m.variants}, verify=verify)
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
    if not m.kernels:
        raise CalibrationError("no non-gemm kernel was measured: nothing to fit kernel time to")
    kernel_time = fit_kernel_time(
        [k.kind for k in m.kernels],
        [k.bytes_read + k.bytes_written for k in m.kernels],
        [k.time_s for k in m.kernels],
        kernel_ids,
    )
    gemm_model = Calibration(
        CalibrationKind.MEASURED,
        m.environment,
        m.ceilings,
        m.gemms,
        None,
        (),
        (),
        (),
        kernel_time,
        m.fit_shapes,
    ).gemm_model
    variants = []
    for key in m.variants:
        steps = [s for s in m.steps if s.variant == key]
        M, K, N = (np.array([getattr(s, d) for s in steps], dtype=np.float64) for d in "MKN")
        variant = Variant.from_key(key)
        table_gemm_s, _ = linear_gemm_times(
            gemm_model, variant.recipe, M, K, N, implementation=variant.implementation
        )
        _, kernels_s = fitted_kernels(traffic[key].regimes, kernel_time, key, ShapeArrays(M, K, N))
        fixed = fit_fixed_cost(
            table_gemm_s=table_gemm_s,
            gemm_s=[s.gemm_s for s in steps],
            kernels_s=kernels_s,
            device_s=[s.device_s for s in steps],
            wall_s=[s.wall_s for s in steps],
        )
        variants.append(VariantFit(key, traffic[key], fixed))
    return Calibration(
        CalibrationKind.MEASURED,
        m.environment,
        m.ceilings,
        m.gemms,
        None,
        m.kernels,
        m.steps,
        tuple(variants),
        kernel_time,
        m.fit_shapes,
    )


def traffic_calibration(
    samples: dict[str, list[ShapeSample]],
    *,
    environment: Environment,
    fit_shapes: tuple[Shape, ...],
    timing: DatasheetTiming,
    gemms: tuple[GemmMeasurement, ...] = (),
    verify: int = 2,
) -> Calibration:
    """A traffic calibration: the exact bytes of the generated code per variant, every kernel
    timed at floor + bytes / (datasheet bandwidth x efficiency), gemms by the datasheet's
    tiled roofline or, when given, a measured table."""
    traffic = fit_variants(samples, verify=verify)
    gpu = timing.gpu
    kernel = KindTime(timing.kernel_floor_s, timing.kernel_bandwidth_bytes_per_s)
    return Calibration(
        CalibrationKind.TRAFFIC,
        environment,
        Ceilings(gpu.bf16_flops, gpu.fp8_flops, kernel.bandwidth_bytes_per_s, kernel.floor_s),
        gemms,
        None if gemms else timing.gemm,
        (),
        (),
        tuple(VariantFit(key, fit, None) for key, fit in traffic.items()),
        KernelTimeModel((), kernel, (), Residuals(0.0, 0.0, 0)),
        fit_shapes,
    )
