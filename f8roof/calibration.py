"""The calibration file: what one device measured, and the fits made from it.

JSON with a `schema_version`. Times are seconds in fields ending `_s`, sizes bytes in fields
ending `_bytes`. Files get shared, so loading never evaluates text: polynomials are maps from a
fixed set of monomial names to integers or "p/q" strings, and every field is type-checked
before use. A file that fails a check is refused with the file and field named.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError
from f8roof.files import read_json, write_text_atomic
from f8roof.models.fit import (
    MONOMIALS,
    FittedKernel,
    Polynomial,
    Regime,
    Shape,
    TrafficFit,
    Unfitted,
)
from f8roof.models.gemm import GEMM_ROLES, GemmTableError, TableGemm
from f8roof.models.overhead import FixedCost, KernelTimeModel, KindTime, Residuals

SCHEMA_VERSION = 1
BF16 = "bf16"  # the baseline variant's name beside the recipe names
_RATIONAL = re.compile(r"-?\d+(/\d+)?")


class CalibrationError(F8RoofError):
    pass


@dataclass(frozen=True)
class Environment:
    device: str  # "cuda" or "cpu"
    device_name: str
    sm_count: int
    torch: str
    triton: str
    cuda: str
    date: str
    f8roof: str


@dataclass(frozen=True)
class Ceilings:
    bf16_flops: float
    fp8_flops: float
    copy_bandwidth_bytes_per_s: float  # read + write
    launch_floor_s: float  # the shortest kernel the device shows


@dataclass(frozen=True)
class GemmMeasurement:
    dtype: str  # bf16, fp8, fp8_rowwise
    gemm: str  # output, grad_input, grad_weight
    m: int
    k: int
    n: int
    time_s: float


@dataclass(frozen=True)
class KernelMeasurement:
    variant: str
    M: int
    K: int
    N: int
    key: str
    kernel: str
    graph: str
    kind: str
    role: str | None
    bytes_read: int
    bytes_written: int
    workspace_bytes: int  # split-reduction workspace among those bytes (see models/fit.py)
    time_s: float
    polynomial: Polynomial  # the other bytes, read off the kernel's buffer shapes

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "polynomial"}
        return {**data, "bytes_polynomial": _poly_to_json(self.polynomial)}

    @classmethod
    def from_json(cls, data: Any, *, source: str, shapes: set[Shape]) -> KernelMeasurement:
        return _kernel_from(_Reader(data, source, "kernel"), shapes)


@dataclass(frozen=True)
class StepMeasurement:
    """One compiled forward+backward of a variant at a shape: both clocks."""

    variant: str
    M: int
    K: int
    N: int
    device_s: float  # every device kernel of the step, summed (median over iterations)
    gemm_s: float  # the gemm kernels among them
    wall_s: float
    launches: int


@dataclass(frozen=True)
class VariantFit:
    variant: str
    traffic: TrafficFit
    fixed: FixedCost


@dataclass(frozen=True)
class Calibration:
    environment: Environment
    ceilings: Ceilings
    gemms: tuple[GemmMeasurement, ...]
    kernels: tuple[KernelMeasurement, ...]
    steps: tuple[StepMeasurement, ...]
    variants: tuple[VariantFit, ...]
    kernel_time: KernelTimeModel
    fit_shapes: tuple[Shape, ...]
    schema_version: int = SCHEMA_VERSION

    def variant(self, name: str) -> VariantFit:
        for fit in self.variants:
            if fit.variant == name:
                return fit
        known = ", ".join(v.variant for v in self.variants if v.variant != BF16)
        raise CalibrationError(f"the calibration has no recipe {name!r}; it has: {known}")

    @cached_property
    def gemm_model(self) -> TableGemm:
        return TableGemm.from_records(
            [(g.dtype, g.gemm, g.m, g.k, g.n, g.time_s) for g in self.gemms], label="calibration"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "environment": vars(self.environment),
            "ceilings": vars(self.ceilings),
            "fit_shapes": [list(s) for s in self.fit_shapes],
            "gemms": [vars(g) for g in self.gemms],
            "kernels": [k.to_json() for k in self.kernels],
            "steps": [vars(s) for s in self.steps],
            "variants": [_variant_to_dict(v) for v in self.variants],
            "kernel_time": _kernel_time_to_dict(self.kernel_time),
        }

    def save(self, path: str | Path) -> None:
        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        data = read_json(path, what="calibration", error=CalibrationError)
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<calibration>") -> Calibration:
        root = _Reader(data, source, "")
        version = root.int("schema_version")
        if version != SCHEMA_VERSION:
            raise CalibrationError(
                f"{source}: schema_version {version} is not supported (this f8roof reads {SCHEMA_VERSION})"
            )
        env = root.obj("environment")
        environment = Environment(
            **{
                f: env.str(f)
                for f in ("device", "device_name", "torch", "triton", "cuda", "date", "f8roof")
            },
            sm_count=env.int("sm_count"),
        )
        ceil = root.obj("ceilings")
        ceilings = Ceilings(
            *(
                ceil.num(f, positive=True)
                for f in ("bf16_flops", "fp8_flops", "copy_bandwidth_bytes_per_s", "launch_floor_s")
            )
        )
        fit_shapes = tuple(_shape(r, r.where) for r in root.items("fit_shapes"))
        shape_set = set(fit_shapes)
        gemms = tuple(
            GemmMeasurement(
                g.choice("dtype", ("bf16", "fp8", "fp8_rowwise")),
                g.choice("gemm", tuple(r.value for r in GEMM_ROLES)),
                g.int("m", minimum=1),
                g.int("k", minimum=1),
                g.int("n", minimum=1),
                g.num("time_s", positive=True),
            )
            for g in root.objs("gemms")
        )
        kernels = tuple(_kernel_from(k, shape_set) for k in root.objs("kernels"))
        steps = tuple(
            StepMeasurement(
                s.str("variant"),
                *_known_shape(s, shape_set),
                s.num("device_s", positive=True),
                s.num("gemm_s", positive=True),
                s.num("wall_s", positive=True),
                s.int("launches"),
            )
            for s in root.objs("steps")
        )
        variants = tuple(_variant_from(v, shape_set) for v in root.objs("variants"))
        calibration = cls(
            environment,
            ceilings,
            gemms,
            kernels,
            steps,
            variants,
            _kernel_time_from(root.obj("kernel_time")),
            fit_shapes,
            version,
        )
        calibration._check_complete(source)
        return calibration

    def _check_complete(self, source: str) -> None:
        names = [v.variant for v in self.variants]
        if BF16 not in names:
            raise CalibrationError(f"{source}: variants: the bf16 baseline is missing")
        if len(set(names)) != len(names):
            raise CalibrationError(f"{source}: variants: a variant appears twice")
        for v in self.variants:
            if not v.traffic.regimes:
                raise CalibrationError(f"{source}: variants.{v.variant}: no fitted regime")
            if not any(s.variant == v.variant for s in self.steps):
                raise CalibrationError(f"{source}: steps: no measurement of {v.variant}")
        try:
            table = self.gemm_model
        except GemmTableError as e:
            raise CalibrationError(f"{source}: gemms: {e}") from None
        needed = {"bf16"} | {
            "fp8_rowwise" if n.startswith("rowwise") else "fp8" for n in names if n != BF16
        }
        for dtype in needed:
            for role in GEMM_ROLES:
                if (dtype, role) not in table.tables:
                    raise CalibrationError(f"{source}: gemms: no {dtype} {role.value} times")


class _Reader:
    """Typed access to one JSON object, naming the file and field in every error."""

    def __init__(self, data: Any, source: str, where: str) -> None:
        self.data, self.source, self.where = data, source, where

    def _fail(self, key: str, problem: str):
        field = f"{self.where}.{key}" if self.where else key
        raise CalibrationError(f"{self.source}: field {field}: {problem}")

    def _get(self, key: str, kind: str) -> Any:
        if not isinstance(self.data, dict):
            raise CalibrationError(
                f"{self.source}: field {self.where or '<top>'}: expected an object"
            )
        if key not in self.data:
            self._fail(key, f"missing (expected {kind})")
        return self.data[key]

    def num(self, key: str, *, positive: bool = False) -> float:
        value = self._get(key, "a number")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            self._fail(key, f"expected a number, got {type(value).__name__} {str(value)[:40]!r}")
        if positive and value <= 0:
            self._fail(key, f"must be positive, got {value}")
        return float(value)

    def int(self, key: str, *, minimum: int = 0) -> int:
        value = self._get(key, "an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            self._fail(key, f"expected an integer, got {type(value).__name__} {str(value)[:40]!r}")
        if value < minimum:
            self._fail(key, f"must be at least {minimum}, got {value}")
        return value

    def str(self, key: str) -> str:
        value = self._get(key, "a string")
        if not isinstance(value, str):
            self._fail(key, f"expected a string, got {type(value).__name__}")
        return value

    def optional_str(self, key: str) -> str | None:
        value = self._get(key, "a string or null")
        if value is not None and not isinstance(value, str):
            self._fail(key, f"expected a string or null, got {type(value).__name__}")
        return value

    def choice(self, key: str, options: tuple[str, ...]) -> str:
        value = self.str(key)
        if value not in options:
            self._fail(key, f"{value!r} is not one of {', '.join(options)}")
        return value

    def obj(self, key: str) -> _Reader:
        value = self._get(key, "an object")
        if not isinstance(value, dict):
            self._fail(key, "expected an object")
        return _Reader(value, self.source, f"{self.where}.{key}" if self.where else key)

    def items(self, key: str) -> list[_Reader]:
        value = self._get(key, "a list")
        if not isinstance(value, list):
            self._fail(key, "expected a list")
        base = f"{self.where}.{key}" if self.where else key
        return [_Reader(item, self.source, f"{base}[{i}]") for i, item in enumerate(value)]

    def objs(self, key: str) -> list[_Reader]:
        readers = self.items(key)
        for r in readers:
            if not isinstance(r.data, dict):
                raise CalibrationError(f"{self.source}: field {r.where}: expected an object")
        return readers

    def polynomial(self, key: str) -> Polynomial:
        terms = self.obj(key)
        coefficients: dict[str, Fraction] = {}
        for name, value in terms.data.items():
            if name not in MONOMIALS:
                terms._fail(name, f"unknown monomial; known: {', '.join(MONOMIALS)}")
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                or isinstance(value, str)
                and _RATIONAL.fullmatch(value)
            ):
                coefficients[name] = Fraction(value)
            else:
                terms._fail(name, f"expected an integer or a 'p/q' string, got {str(value)[:40]!r}")
        return Polynomial.from_map(coefficients)


def _shape(reader: _Reader, where: str) -> Shape:
    value = reader.data
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value)
    ):
        raise CalibrationError(
            f"{reader.source}: field {where}: expected [M, K, N] positive integers"
        )
    return tuple(value)  # type: ignore[return-value]


def _known_shape(reader: _Reader, shapes: set[Shape]) -> Shape:
    shape = (reader.int("M", minimum=1), reader.int("K", minimum=1), reader.int("N", minimum=1))
    if shape not in shapes:
        raise CalibrationError(
            f"{reader.source}: field {reader.where}: shape {shape} is not in fit_shapes"
        )
    return shape


def _kernel_from(k: _Reader, shapes: set[Shape]) -> KernelMeasurement:
    return KernelMeasurement(
        k.str("variant"),
        *_known_shape(k, shapes),
        k.str("key"),
        k.str("kernel"),
        k.str("graph"),
        k.str("kind"),
        k.optional_str("role"),
        k.int("bytes_read"),
        k.int("bytes_written"),
        k.int("workspace_bytes"),
        k.num("time_s", positive=True),
        k.polynomial("bytes_polynomial"),
    )


def _poly_to_json(poly: Polynomial) -> dict[str, int | str]:
    return {
        m: (c.numerator if c.denominator == 1 else f"{c.numerator}/{c.denominator}")
        for m, c in poly.terms
    }


def _variant_to_dict(v: VariantFit) -> dict[str, Any]:
    return {
        "variant": v.variant,
        "fixed": vars(v.fixed),
        "regimes": [
            {
                "shapes": [list(s) for s in r.shapes],
                "verified": [list(s) for s in r.verified],
                "workspace_max_bytes": r.workspace_max,
                "total": _poly_to_json(r.total),
                "kernels": [
                    {
                        "key": k.key,
                        "name": k.name,
                        "graph": k.graph,
                        "kind": k.kind,
                        "role": k.role,
                        "bytes": _poly_to_json(k.nbytes),
                    }
                    for k in r.kernels
                ],
            }
            for r in v.traffic.regimes
        ],
        "unfitted": [
            {"shapes": [list(s) for s in u.shapes], "reason": u.reason} for u in v.traffic.unfitted
        ],
    }


def _variant_from(reader: _Reader, shapes: set[Shape]) -> VariantFit:
    regimes = []
    for r in reader.objs("regimes"):
        regime_shapes = tuple(_shape(s, s.where) for s in r.items("shapes"))
        verified = tuple(_shape(s, s.where) for s in r.items("verified"))
        for shape in regime_shapes + verified:
            if shape not in shapes:
                raise CalibrationError(
                    f"{r.source}: field {r.where}: shape {shape} is not in fit_shapes"
                )
        kernels = tuple(
            FittedKernel(
                k.str("key"),
                k.str("name"),
                k.str("graph"),
                k.str("kind"),
                k.optional_str("role"),
                k.polynomial("bytes"),
            )
            for k in r.objs("kernels")
        )
        total = r.polynomial("total")
        if sum((k.nbytes for k in kernels), Polynomial.from_map({})) != total:
            raise CalibrationError(
                f"{r.source}: field {r.where}.total: is not the sum of its kernels"
            )
        regimes.append(
            Regime(regime_shapes, kernels, total, verified, r.int("workspace_max_bytes"))
        )
    unfitted = tuple(
        Unfitted(tuple(_shape(s, s.where) for s in u.items("shapes")), u.str("reason"))
        for u in reader.objs("unfitted")
    )
    fixed = reader.obj("fixed")
    cost = FixedCost(
        fixed.num("gemm_factor", positive=True),
        fixed.num("device_extra_s"),
        fixed.num("wall_extra_s"),
        fixed.num("wall_floor_s", positive=True),
    )
    return VariantFit(reader.str("variant"), TrafficFit(tuple(regimes), unfitted), cost)


def _kind_to_dict(kind: KindTime) -> dict[str, float]:
    return {"floor_s": kind.floor_s, "bandwidth_bytes_per_s": kind.bandwidth_bytes_per_s}


def _kernel_time_to_dict(model: KernelTimeModel) -> dict[str, Any]:
    return {
        "kinds": {name: _kind_to_dict(k) for name, k in model.kinds},
        "pooled": _kind_to_dict(model.pooled),
        "factors": dict(model.factors),
        "residuals": vars(model.residuals),
    }


def _kind_from(reader: _Reader) -> KindTime:
    floor = reader.num("floor_s")
    if floor < 0:
        reader._fail("floor_s", f"must not be negative, got {floor}")
    return KindTime(floor, reader.num("bandwidth_bytes_per_s", positive=True))


def _kernel_time_from(reader: _Reader) -> KernelTimeModel:
    kinds = reader.obj("kinds")
    factors = reader.obj("factors")
    res = reader.obj("residuals")
    return KernelTimeModel(
        tuple((name, _kind_from(kinds.obj(name))) for name in kinds.data),
        _kind_from(reader.obj("pooled")),
        tuple((name, factors.num(name, positive=True)) for name in factors.data),
        Residuals(res.num("median"), res.num("max"), res.int("count")),
    )
