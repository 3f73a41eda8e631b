"""Measurements -> calibration: the exact byte fits, the kernel-time model, the fixed costs.

Pure: no device, no compile. `calibrate.py` measures; this module only assembles the fits of
`traffic/fit.py`, so it is tested on synthetic measurements in milliseconds. Two builders, one
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
    datasheet_kernels,
)
from f8roof.timing.datasheet import DatasheetTiming
from f8roof.timing.gemm import linear_gemm_times
from f8roof.timing.kernel_time import FixedCost, KernelTimeModel, KindTime, Residuals
from f8roof.timing.overhead import fitted_kernels
from f8roof.traffic.fit import (
    FitError,
    KernelSample,
    Shape,
    ShapeSample,
    TrafficFit,
    fit_traffic,
)
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.variant import Variant


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
                    k.kernel_class,
                )
            )
    measured = [(s.M, s.K, s.N) for s in m.steps if s.variant == variant]
    return [ShapeSample(shape, tuple(by_shape.get(shape, ()))) for shape in measured]


def fit_variants(
    samples: dict[str, list[ShapeSample]], *, verify: int = 2
) -> dict[str, TrafficFit]:
    """Exact byte fits per variant; a variant with no fitted kernel set is an error naming why."""
    traffic = {key: fit_traffic(s, verify=verify) for key, s in samples.items()}
    for key, fit in traffic.items():
        if not fit.kernel_sets:
            reasons = "; ".join(u.reason for u in fit.unfitted) or "no shapes"
            raise CalibrationError(f"cannot fit the bytes of {key}: {reasons}")
    return traffic


def _kernel_set_of(traffic: TrafficFit, shape: Shape) -> int | None:
    for index, kernel_set in enumerate(traffic.kernel_sets):
        if shape in kernel_set.shapes:
            return index
    return None


def fit_calibration(m: Measurements, *, verify: int = 2) -> Calibration:
    """A measured calibration from a device run."""
    traffic = fit_variants({v: _samples(m, v) for v in m.variants}, verify=verify)
    kernel_ids = []
    for k in m.kernels:
        kernel_set = _kernel_set_of(traffic[k.variant], (k.M, k.K, k.N))
        kernel_ids.append(
            f"{k.variant}/{kernel_set}/{k.key}" if kernel_set is not None else "unfitted"
        )
    # Keys are recorded as kernel_keys() made them; a mismatch would silently drop factors.
    assert all(
        k.key in {f.key for r in traffic[k.variant].kernel_sets for f in r.kernels}
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
        _, kernels_s = fitted_kernels(
            traffic[key].kernel_sets, kernel_time, key, ShapeArrays(M, K, N)
        )
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
    ceilings, kernel_time = datasheet_kernels(timing)
    return Calibration(
        CalibrationKind.TRAFFIC,
        environment,
        ceilings,
        gemms,
        None if gemms else timing.gemm,
        (),
        (),
        tuple(VariantFit(key, fit, None) for key, fit in traffic.items()),
        kernel_time,
        fit_shapes,
    )


# --- kernel time and fixed costs (see timing/kernel_time.py for the models) ---------------------


def fit_kind(nbytes: np.ndarray, time_s: np.ndarray) -> KindTime:
    """Least squares on relative error: rows (1/t, bytes/t) . (floor, 1/bandwidth) = 1."""
    nbytes, time_s = np.asarray(nbytes, np.float64), np.asarray(time_s, np.float64)
    if len(time_s) == 0 or (time_s <= 0).any():
        raise FitError("kernel times must be positive")
    A = np.stack([1 / time_s, nbytes / time_s], axis=1)
    floor, inverse_bw = np.linalg.lstsq(A, np.ones(len(time_s)), rcond=None)[0]
    if floor < 0 or inverse_bw <= 0 or len(time_s) == 1:
        # A negative floor or bandwidth means the points don't span sizes enough for two
        # parameters: fall back to one, the bandwidth through the origin (or a pure floor).
        floor = 0.0
        inverse_bw = float(np.median(time_s / np.maximum(nbytes, 1)))
    return KindTime(float(floor), float(1 / inverse_bw))


def residuals(predicted, measured) -> Residuals:
    error = np.abs(np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)
    return Residuals(float(np.median(error)), float(error.max()), len(error))


def fit_kernel_time(kinds: list[str], nbytes, time_s, kernel_ids: list[str]) -> KernelTimeModel:
    """Fit per kind (pooled where a kind has under 3 points), then per-kernel factors."""
    nbytes, time_s = np.asarray(nbytes, np.float64), np.asarray(time_s, np.float64)
    kinds_arr, ids = np.asarray(kinds), np.asarray(kernel_ids)
    pooled = fit_kind(nbytes, time_s)
    by_kind = {
        kind: fit_kind(nbytes[kinds_arr == kind], time_s[kinds_arr == kind])
        for kind in sorted(set(kinds))
        if (kinds_arr == kind).sum() >= 3
    }
    base = np.array([by_kind.get(k, pooled).time_s(b) for k, b in zip(kinds, nbytes)])
    factors = {
        kid: float(np.median(time_s[ids == kid] / base[ids == kid]))
        for kid in sorted(set(kernel_ids))
    }
    predicted = base * np.array([factors[k] for k in kernel_ids])
    return KernelTimeModel(
        tuple(by_kind.items()), pooled, tuple(factors.items()), residuals(predicted, time_s)
    )


def fit_fixed_cost(*, table_gemm_s, gemm_s, kernels_s, device_s, wall_s) -> FixedCost:
    """gemm_factor: median in-step / table gemm time. device_extra: median of what the device
    time shows beyond the corrected gemms and the modelled kernels, at least 0. wall_floor: the smallest wall time. wall_extra: median wall - device over
    device-bound steps (device time at least twice the floor), else 0."""
    table_gemm_s, gemm_s, kernels_s, device_s, wall_s = (
        np.asarray(x, np.float64) for x in (table_gemm_s, gemm_s, kernels_s, device_s, wall_s)
    )
    factor = float(np.median(gemm_s / table_gemm_s))
    # Negative when the kernel model runs high: the per-kernel factors absorb that, and a
    # negative constant would make small steps take negative time, so it stops at 0.
    extra_device = max(0.0, float(np.median(device_s - factor * table_gemm_s - kernels_s)))
    floor = float(wall_s.min())
    bound = device_s >= 2 * floor
    extra = float(np.median(wall_s[bound] - device_s[bound])) if bound.any() else 0.0
    return FixedCost(factor, extra_device, max(extra, 0.0), floor)
