"""The calibration file: what one device (or one target's generated code) showed, and the fits.

Three kinds, one format:
- `measured`: a GPU (or CPU) run: every kernel's bytes and device time, steps on both clocks,
  gemm grids; the fits made from them (exact bytes per kernel set, kernel-time model, fixed costs).
- `traffic`: no device: the exact bytes of the code Inductor generates for a target GPU
  (codegen-only), timed with the datasheet model (bytes / (bandwidth x efficiency) + a floor per
  kernel; gemms by the roofline or a given table). Nothing in it claims to be measured.
- `public`: a traffic calibration timed by the model fitted to other people's published
  measurements (`timing/public_times.py`, `calibration/public_file.py`): what an estimate uses
  by default for a GPU part that model covers. Made at load time, never measured.

Variants are keyed by `Variant.key` (`bf16`, `torchao:rowwise@layernorm+sigmoid`, ...); every
float8 variant has the bf16 baseline of its context beside it, because overhead is what the
float8 graph runs beyond the bf16 graph of the same context.

JSON with a `schema_version`. Times are seconds in fields ending `_s`, sizes bytes in fields
ending `_bytes`. Files get shared, so loading never evaluates text: polynomials are maps from a
fixed set of monomial names to integers or "p/q" strings, and every field is type-checked
before use. A file that fails a check is refused with the file and field named.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from enum import Enum
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

from f8roof.calibration.records import (
    Environment,
    GemmMeasurement,
    KernelMeasurement,
    StepMeasurement,
    coefficient_to_json,
    polynomial_to_json,
)
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.files import parse_json, read_text, write_text_atomic
from f8roof.hardware.presets import GPU, PRESETS, find_gpu
from f8roof.timing.datasheet import DatasheetTiming
from f8roof.timing.gemm import (
    GEMM_DTYPES,
    GEMM_ROLES,
    GemmEfficiency,
    GemmTableError,
    TableGemm,
    TiledGemm,
    fp8_gemm_dtype,
)
from f8roof.timing.kernel_classes import KernelClass
from f8roof.timing.kernel_time import (
    FixedCost,
    KernelTimeModel,
    KindTime,
    Residuals,
)
from f8roof.timing.public_times import PartTimes, PublicTimes
from f8roof.traffic.fit import (
    MONOMIALS,
    FittedKernel,
    KernelSample,
    KernelSet,
    Polynomial,
    Shape,
    TrafficFit,
    Unfitted,
    polynomial_sum,
)
from f8roof.traffic.variant import Variant

SCHEMA_VERSION = 3  # 3: "kernel_sets" (was "kernel sets")
# what `Calibration.to_dict` writes; any other key is refused (a misspelt one would be dropped)
TOP_LEVEL_KEYS = frozenset(
    {
        "schema_version",
        "kind",
        "environment",
        "ceilings",
        "datasheet_gemm",
        "fit_shapes",
        "gemms",
        "kernels",
        "steps",
        "variants",
        "kernel_time",
    }
)
BF16 = Variant(None, None).key  # the baseline's key when the linear stands alone
_RATIONAL = re.compile(r"-?\d{1,40}(/\d{1,40})?")


KERNEL_CLASS_VALUES = frozenset(c.value for c in KernelClass)
# What a kernel record may say (profiler/triton_code.py KernelKind, but gemms, which are no
# kernel records; fit.GRAPH_ORDER; recipes.Role): anything else is a damaged file.
KERNEL_KINDS = ("pointwise", "reduction", "persistent_reduction", "template", "cpp", "extern")
GRAPHS = ("fwd", "bwd")
ROLE_NAMES = ("input", "weight", "grad_output")
# Ranges a device's numbers fall in (a CPU's to the fastest GPU's, with room): a value outside
# is a damaged file, and would time a linear at inf or 0.
FLOPS_RANGE = (1e9, 1e18)  # FLOP/s
BANDWIDTH_RANGE = (1e8, 1e15)  # bytes/s
MAX_FLOOR_S = 1e-2  # a datasheet's launch floor or gemm latency: 10 ms is none
MAX_TIME_S = 1e4  # one measured gemm, kernel, step or fitted floor
MAX_KERNEL_BYTES = 2**50  # one kernel's traffic: a PiB is none
# A fitted factor (measured / modelled time) and a measured kernel's fitted floor have no
# physical bound but positive and finite: a CPU under load runs a kernel 1000x its model.
MAX_K_OVERHEAD = 2**20  # a gemm tile's prologue and epilogue, in K steps


class CalibrationError(F8RoofError):
    pass


# how far a ceiling may exceed the named GPU's datasheet before the file is refused (measured
# clocks above the datasheet's boost clock, rounding)
CEILING_TOLERANCE = 1.05


class CalibrationKind(str, Enum):
    MEASURED = "measured"  # kernels and gemms timed on a device
    TRAFFIC = "traffic"  # bytes from generated code, times from the datasheet model
    PUBLIC = "public"  # bytes from generated code, times fitted to published measurements


@dataclass(frozen=True)
class Ceilings:
    bf16_flops: float
    fp8_flops: float
    copy_bandwidth_bytes_per_s: float  # read + write; datasheet x efficiency for traffic
    launch_floor_s: float  # the shortest kernel the device shows (traffic: the model's floor)


def sample_to_json(sample: KernelSample) -> dict[str, Any]:
    """A generated kernel's bytes as a traffic calibration's checkpoint keeps them."""
    return {
        "kernel": sample.name,
        "graph": sample.graph,
        "kind": sample.kind,
        "role": sample.role,
        "bytes": sample.nbytes,
        "workspace_bytes": sample.workspace,
        "bytes_polynomial": None
        if sample.polynomial is None
        else polynomial_to_json(sample.polynomial),
        **({} if sample.kernel_class is None else {"class": sample.kernel_class}),
        **(
            {}
            if not sample.scattered_elements
            else {
                "scattered_elements": sample.scattered_elements,
                "scattered_polynomial": None
                if sample.scattered_polynomial is None
                else polynomial_to_json(sample.scattered_polynomial),
            }
        ),
        **(
            {}
            if not sample.reread
            else {
                "reread_bytes": sample.reread,
                "reread_polynomial": None
                if sample.reread_polynomial is None
                else polynomial_to_json(sample.reread_polynomial),
            }
        ),
        **({"arithmetic": sample.arithmetic} if sample.arithmetic else {}),
    }


def sample_from_json(data: Any, *, source: str) -> KernelSample:
    r = _Reader(data, source, "sample")
    polynomial = (
        None if r.optional_obj("bytes_polynomial") is None else r.polynomial("bytes_polynomial")
    )
    scattered = (
        r.int("scattered_elements")
        if isinstance(data, dict) and "scattered_elements" in data
        else 0
    )
    scattered_polynomial = (
        r.polynomial("scattered_polynomial")
        if scattered and r.optional_obj("scattered_polynomial") is not None
        else None
    )
    reread = r.int("reread_bytes") if isinstance(data, dict) and "reread_bytes" in data else 0
    reread_polynomial = (
        r.polynomial("reread_polynomial")
        if reread and r.optional_obj("reread_polynomial") is not None
        else None
    )
    return KernelSample(
        r.str("kernel"),
        r.choice("graph", GRAPHS),
        r.choice("kind", KERNEL_KINDS),
        r.role("role"),
        r.int("bytes", maximum=MAX_KERNEL_BYTES),
        r.int("workspace_bytes", maximum=MAX_KERNEL_BYTES),
        polynomial,
        r.kernel_class(),
        scattered,
        scattered_polynomial,
        reread,
        reread_polynomial,
        r.int("arithmetic") if isinstance(data, dict) and "arithmetic" in data else 0,
    )


@dataclass(frozen=True)
class VariantFit:
    variant: str  # Variant.key
    traffic: TrafficFit
    fixed: FixedCost | None  # None in traffic calibrations: nothing measured beyond the kernels


# Calibration.load's files, by name and content: the few a process reads (oldest dropped first).
_LOADED: dict[tuple[str, bytes], Calibration] = {}
_LOADED_MAX = 8


@dataclass(frozen=True)
class Calibration:
    kind: CalibrationKind
    environment: Environment
    ceilings: Ceilings
    gemms: tuple[GemmMeasurement, ...]
    datasheet_gemm: TiledGemm | None  # traffic calibrations without a gemm table
    kernels: tuple[KernelMeasurement, ...]
    steps: tuple[StepMeasurement, ...]
    variants: tuple[VariantFit, ...]
    kernel_time: KernelTimeModel
    fit_shapes: tuple[Shape, ...]
    schema_version: int = SCHEMA_VERSION
    # the public time model that times it (kind public), with its ranges and checks
    public: PublicTimes | None = field(default=None, compare=False)

    @property
    def is_measured(self) -> bool:
        return self.kind is CalibrationKind.MEASURED

    def has(self, key: str) -> bool:
        return any(v.variant == key for v in self.variants)

    def variant(self, key: str) -> VariantFit:
        for fit in self.variants:
            if fit.variant == key:
                return fit
        known = ", ".join(v.variant for v in self.variants)
        raise CalibrationError(f"the calibration has no variant {key!r}; it has: {known}")

    @cached_property
    def gemm_model(self) -> TableGemm | TiledGemm:
        """The gemm families the file stores (bf16 and float8), timed by its tiled roofline or
        measured table; a tiled roofline of a preset gets the preset's NVFP4 family beside
        them (its fp4 gemms run at twice fp8's rate, so no stored family stands for them),
        and a datasheet one its other block-scaled families too, as the preset's datasheet
        timing runs them (MXFP8 at bf16's throughput on MI355X, pytorch/ao#4290; blockwise
        at FBGEMM's fraction on Hopper); a public fit times them as its fitted fp8 families."""
        gemm = self.datasheet_gemm
        if gemm is None:
            return self._gemm_table()
        stored = {dtype for dtype, _ in gemm.efficiencies}
        if gemm.gpu.efficiency is None:
            return gemm
        public = self.kind is CalibrationKind.PUBLIC
        added = ("nvfp4",) if public else ("mxfp8", "fp8_blockwise", "nvfp4")
        extra = tuple(
            (dtype, efficiency)
            for dtype, efficiency in gemm.gpu.efficiency.pairs
            if dtype in added and dtype not in stored
        )
        return replace(gemm, efficiencies=gemm.efficiencies + extra) if extra else gemm

    def _gemm_table(self) -> TableGemm:
        return TableGemm.from_records(
            [(g.dtype, g.gemm, g.m, g.k, g.n, g.time_s) for g in self.gemms],
            label="calibration",
            full_grid=self.is_measured,
        )

    @property
    def source(self) -> str:
        """What an estimate from this file rests on, in words."""
        return self.describe()

    def describe(self, *, gemms: str | None = None) -> str:
        """`source`; `gemms`: how gemms are timed instead of the file's way (a --gemm-table)."""
        env = self.environment
        if self.is_measured:
            text = f"calibration measured on {env.label}, {env.date} ({env.versions})"
            return text if gemms is None else f"{text}; gemms: {gemms}"
        gemm = gemms or ("tiled roofline" if self.datasheet_gemm else "a measured table")
        if self.kind is CalibrationKind.PUBLIC and self.public is not None:
            return (
                f"traffic from generated code ({env.versions}, codegen for {env.gpu}); times "
                f"fitted to public measurements (gemms: {gemm}; heatmap cross-validated median "
                f"error {self.public.cv_median:.1%})"
            )
        return (
            f"traffic from generated code ({env.versions}, codegen for {env.gpu}); "
            f"times from the datasheet (gemms: {gemm})"
        )

    def to_dict(self) -> dict[str, Any]:
        gemm = self.datasheet_gemm
        return {
            "schema_version": self.schema_version,
            "kind": self.kind.value,
            "environment": vars(self.environment),
            "ceilings": vars(self.ceilings),
            "datasheet_gemm": None
            if gemm is None
            else {
                "gpu": gemm.gpu.name,
                "memory_efficiency": gemm.memory_efficiency,
                "dtypes": {
                    dtype: {
                        "peak_fraction": e.peak_fraction,
                        "k_overhead": e.k_overhead,
                        "latency_s": e.latency_s,
                        "tiles": [list(t) for t in e.tiles],
                        **(
                            {}
                            if e.slow_accum_factor == 1
                            else {"slow_accum_factor": e.slow_accum_factor}
                        ),
                    }
                    for dtype, e in gemm.efficiencies
                },
            },
            "fit_shapes": [list(s) for s in self.fit_shapes],
            "gemms": [vars(g) for g in self.gemms],
            "kernels": [k.to_json() for k in self.kernels],
            "steps": [vars(s) for s in self.steps],
            "variants": [_variant_to_dict(v) for v in self.variants],
            "kernel_time": _kernel_time_to_dict(self.kernel_time),
        }

    def save(self, path: str | Path) -> None:
        """Checked by the reader's own rules first: what is written always loads."""
        data = self.to_dict()
        Calibration.from_dict(json.loads(json.dumps(data)), source=str(path))
        write_text_atomic(path, json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """The calibration in a file, read and checked once per process for each content (a
        model answer resolves a calibration for every recipe it times; a calibration is
        immutable, so the one object serves them all). Known by the file's name and bytes,
        not its modification time: a file rewritten within one tick of the file system's
        clock is read again."""
        text = read_text(path, what="calibration", error=CalibrationError)
        key = (str(path), hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest())
        loaded = _LOADED.get(key)
        if loaded is None:
            data = parse_json(text, path, what="calibration", error=CalibrationError)
            loaded = cls.from_dict(data, source=str(path))
            while len(_LOADED) >= _LOADED_MAX:
                del _LOADED[next(iter(_LOADED))]
            _LOADED[key] = loaded
        return loaded

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<calibration>") -> Calibration:
        root = _Reader(data, source, "")
        version = root.int("schema_version")
        if version != SCHEMA_VERSION:
            raise CalibrationError(
                f"{source}: schema_version {version} is not supported (this f8roof reads "
                f"{SCHEMA_VERSION}): calibrate again"
            )
        unknown = sorted(set(data) - TOP_LEVEL_KEYS)
        if unknown:
            raise CalibrationError(
                f"{source}: unknown top-level key {unknown[0]!r} (schema {SCHEMA_VERSION})"
            )
        # a public calibration is a traffic file timed at load time: files hold the other two
        kind = CalibrationKind(root.choice("kind", ("measured", "traffic")))
        env = root.obj("environment")
        environment = Environment(
            device=env.choice("device", ("cuda", "cpu", "codegen")),
            device_name=env.str("device_name"),
            gpu=env.optional_str("gpu"),
            sm_count=env.int("sm_count", minimum=1),
            torch=env.str("torch"),
            triton=env.str("triton"),
            torchao=env.str("torchao"),
            cuda=env.str("cuda"),
            date=env.optional_str("date"),
            f8roof=env.str("f8roof"),
        )
        if environment.gpu is not None and environment.gpu not in PRESETS:
            env.fail("gpu", f"{environment.gpu!r} is not a GPU preset ({', '.join(PRESETS)})")
        ceil = root.obj("ceilings")
        ceilings = Ceilings(
            ceil.num("bf16_flops", within=FLOPS_RANGE),
            ceil.num("fp8_flops", within=FLOPS_RANGE),
            ceil.num("copy_bandwidth_bytes_per_s", within=BANDWIDTH_RANGE),
            ceil.num("launch_floor_s", positive=True, at_most=MAX_FLOOR_S),
        )
        fit_shapes = tuple(_shape(r, r.where) for r in root.items("fit_shapes"))
        shape_set = set(fit_shapes)
        if len(shape_set) != len(fit_shapes):
            root.fail("fit_shapes", "a shape appears twice")
        gemms = tuple(
            GemmMeasurement(
                g.choice("dtype", GEMM_DTYPES),
                g.choice("gemm", tuple(r.value for r in GEMM_ROLES)),
                g.int("m", minimum=1),
                g.int("k", minimum=1),
                g.int("n", minimum=1),
                g.num("time_s", positive=True, at_most=MAX_TIME_S),
            )
            for g in root.objs("gemms")
        )
        kernels = tuple(_kernel_from(k, shape_set) for k in root.objs("kernels"))
        steps = tuple(
            StepMeasurement(
                s.str("variant"),
                *_known_shape(s, shape_set),
                s.num("device_s", positive=True, at_most=MAX_TIME_S),
                s.num("gemm_s", positive=True, at_most=MAX_TIME_S),
                s.num("wall_s", positive=True, at_most=MAX_TIME_S),
                s.int("launches"),
            )
            for s in root.objs("steps")
        )
        measured = kind is CalibrationKind.MEASURED
        classed = _classed(data)
        variants = tuple(
            _variant_from(v, shape_set, measured=measured, classed=classed)
            for v in root.objs("variants")
        )
        calibration = cls(
            kind,
            environment,
            ceilings,
            gemms,
            _datasheet_gemm_from(root),
            kernels,
            steps,
            variants,
            _kernel_time_from(root.obj("kernel_time")),
            fit_shapes,
            version,
        )
        calibration._check_complete(source)
        calibration._check_gpu(source)
        return calibration

    def _check_gpu(self, source: str) -> None:
        """The GPU the file names must be the one its device name and numbers describe: an
        edited `environment.gpu` would label (and time) the estimate as another GPU's."""
        env = self.environment
        claim = f"{source}: environment.gpu {env.gpu!r}"
        if env.gpu is None:
            if env.device == "codegen":
                raise CalibrationError(f"{claim}: a traffic calibration names its target GPU")
            return
        preset = PRESETS[env.gpu]
        if env.device == "cpu":
            raise CalibrationError(f"{claim}, but the file was measured on a CPU ({env.label})")
        if env.device == "codegen" and env.device_name != env.gpu:
            raise CalibrationError(f"{claim} disagrees with its device_name {env.device_name!r}")
        if env.device == "cuda":
            try:
                named = find_gpu(env.device_name).name
            except ModelError:
                named = None
            if named != env.gpu:
                raise CalibrationError(
                    f"{claim} disagrees with its device_name {env.device_name!r} "
                    f"({'no GPU preset' if named is None else named})"
                )
        gemm = self.datasheet_gemm
        if gemm is not None and gemm.gpu.name != env.gpu:
            raise CalibrationError(f"{claim} disagrees with datasheet_gemm.gpu {gemm.gpu.name!r}")
        # a GPU does not beat its datasheet: traffic files hold the peaks, measured ones less
        for name, peak in (
            ("bf16_flops", preset.bf16_flops),
            ("fp8_flops", preset.fp8_flops),
            ("copy_bandwidth_bytes_per_s", preset.memory_bandwidth_bytes_per_s),
        ):
            value = getattr(self.ceilings, name)
            if value > peak * CEILING_TOLERANCE:
                raise CalibrationError(
                    f"{claim}: ceilings.{name} {value:.4g} exceeds that GPU's datasheet "
                    f"{peak:.4g}: the file describes another GPU"
                )

    def _check_complete(self, source: str) -> None:
        keys = [v.variant for v in self.variants]
        if len(set(keys)) != len(keys):
            raise CalibrationError(f"{source}: variants: a variant appears twice")
        variants = [Variant.from_key(k) for k in keys]
        for variant in variants:
            if variant.baseline.key not in keys:
                what = "the bf16 baseline" + (
                    "" if variant.context.is_standalone else f" of context {variant.context.name}"
                )
                raise CalibrationError(f"{source}: variants: {what} is missing")
        for v in self.variants:
            if not v.traffic.kernel_sets:
                raise CalibrationError(f"{source}: variants.{v.variant}: no fitted kernel set")
            if self.is_measured and not any(s.variant == v.variant for s in self.steps):
                raise CalibrationError(f"{source}: steps: no measurement of {v.variant}")
        if self.is_measured and self.datasheet_gemm is not None:
            raise CalibrationError(f"{source}: datasheet_gemm: a measured calibration times gemms")
        if self.datasheet_gemm is not None and self.gemms:
            raise CalibrationError(f"{source}: gemms and datasheet_gemm: give one or the other")
        if self.datasheet_gemm is not None:
            return
        try:
            table = self._gemm_table()
        except GemmTableError as e:
            raise CalibrationError(f"{source}: gemms: {e}") from None
        for variant in variants:
            for role in GEMM_ROLES:
                dtype = fp8_gemm_dtype(variant.recipe, role, variant.implementation)
                if (dtype, role) not in table.tables:
                    raise CalibrationError(f"{source}: gemms: no {dtype} {role.value} times")


def timed_publicly(
    calibration: Calibration, times: PublicTimes, part: str | None = None
) -> Calibration:
    """A traffic calibration timed by the public time model's part for its GPU, or `part` (the
    calibration's GPU at a power limit): the part's kernel classes, launch floor and gemm
    families; the copy ceiling at its pointwise fraction. CalibrationError where the model has
    no such part."""
    env = calibration.environment
    fitted = times.part(part or env.gpu or "")
    if calibration.kind is not CalibrationKind.TRAFFIC or fitted is None:
        names = ", ".join(p.part for p in times.parts)
        raise CalibrationError(
            f"no public time model for {part or env.label} (fitted: {names}): use "
            f"{term('times')} datasheet"
        )
    return replace(retimed(calibration, fitted, find_gpu(fitted.part)), public=times)


def datasheet_kernels(timing: DatasheetTiming) -> tuple[Ceilings, KernelTimeModel]:
    """A datasheet model's ceilings and kernel time: every kernel at its floor + bytes /
    (datasheet bandwidth x copy fraction), the way a traffic calibration times its bytes."""
    gpu = timing.gpu
    kernel = KindTime(timing.kernel_floor_s, timing.kernel_bandwidth_bytes_per_s)
    ceilings = Ceilings(gpu.bf16_flops, gpu.fp8_flops, kernel.bandwidth_bytes_per_s, kernel.floor_s)
    return ceilings, KernelTimeModel((), kernel, (), Residuals(0.0, 0.0, 0))


def datasheet_timed(calibration: Calibration, timing: DatasheetTiming) -> Calibration:
    """A traffic calibration's bytes timed by another datasheet model: a part that runs the
    code generated for another (`GPU.code_of`) at its own gemm fractions and bandwidth."""
    ceilings, kernel_time = datasheet_kernels(timing)
    return replace(
        calibration,
        ceilings=ceilings,
        datasheet_gemm=None if calibration.gemms else timing.gemm,
        kernel_time=kernel_time,
    )


def retimed(calibration: Calibration, part: PartTimes, gpu: GPU) -> Calibration:
    """The calibration's bytes timed by one part of the public time model (kind public)."""
    ceilings = replace(
        calibration.ceilings,
        copy_bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s * part.fraction("pointwise"),
        launch_floor_s=part.floor_s,
    )
    return replace(
        calibration,
        kind=CalibrationKind.PUBLIC,
        ceilings=ceilings,
        datasheet_gemm=part.gemm_model(gpu),
        kernel_time=part.kernel_time(gpu),
    )


class _Reader:
    """Typed access to one JSON object, naming the file and field in every error."""

    def __init__(self, data: Any, source: builtins.str, where: builtins.str) -> None:
        self.data, self.source, self.where = data, source, where

    def fail(self, key: builtins.str, problem: builtins.str):
        field = f"{self.where}.{key}" if self.where else key
        raise CalibrationError(f"{self.source}: field {field}: {problem}")

    def _get(self, key: builtins.str, kind: builtins.str) -> Any:
        if not isinstance(self.data, dict):
            raise CalibrationError(
                f"{self.source}: field {self.where or '<top>'}: expected an object"
            )
        if key not in self.data:
            self.fail(key, f"missing (expected {kind})")
        return self.data[key]

    def num(
        self,
        key: builtins.str,
        *,
        positive: bool = False,
        within: tuple[float, float] | None = None,
        at_most: float | None = None,
    ) -> float:
        value = self._get(key, "a number")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            self.fail(
                key, f"expected a finite number, got {type(value).__name__} {str(value)[:40]!r}"
            )
        if value < 0 or (positive and value == 0):
            self.fail(key, f"must be {'positive' if positive else 'non-negative'}, got {value}")
        if within is not None and not within[0] <= value <= within[1]:
            self.fail(key, f"{value:.4g} is outside {within[0]:.0e}..{within[1]:.0e}")
        if at_most is not None and value > at_most:
            self.fail(key, f"{value:.4g} exceeds {at_most:.4g}")
        return float(value)

    def int(
        self, key: builtins.str, *, minimum: builtins.int = 0, maximum: builtins.int | None = None
    ) -> builtins.int:
        value = self._get(key, "an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected an integer, got {type(value).__name__} {str(value)[:40]!r}")
        if value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            self.fail(key, f"{value} exceeds {maximum}")
        return value

    def role(self, key: builtins.str) -> builtins.str | None:
        """A kernel's roles: null, or roles.Role values joined by commas, in that order."""
        value = self.optional_str(key)
        if value is not None:
            parts = value.split(",")
            if [r for r in ROLE_NAMES if r in parts] != parts:
                self.fail(key, f"{value!r} is not a comma list of {', '.join(ROLE_NAMES)}")
        return value

    def str(self, key: builtins.str) -> builtins.str:
        value = self._get(key, "a string")
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {type(value).__name__}")
        return value

    def optional_str(self, key: builtins.str) -> builtins.str | None:
        value = self._get(key, "a string or null")
        if value is not None and not isinstance(value, str):
            self.fail(key, f"expected a string or null, got {type(value).__name__}")
        return value

    def choice(self, key: builtins.str, options: tuple[builtins.str, ...]) -> builtins.str:
        value = self.str(key)
        if value not in options:
            self.fail(key, f"{value!r} is not one of {', '.join(options)}")
        return value

    def obj(self, key: builtins.str) -> _Reader:
        value = self._get(key, "an object")
        if not isinstance(value, dict):
            self.fail(key, "expected an object")
        return _Reader(value, self.source, f"{self.where}.{key}" if self.where else key)

    def kernel_class(self, *, required: bool = False) -> builtins.str | None:
        """A kernel's "class", a KernelClass value: optional in a file written before kernel
        classes (none has one: each is timed by its kind's widest range), `required` where
        the file's other kernels carry theirs (one lacking it is damaged, not old)."""
        if not isinstance(self.data, dict) or self.data.get("class") is None:
            if required:
                self.fail("class", "missing, where the file's other kernels carry theirs")
            return None
        value = self.str("class")
        if value not in KERNEL_CLASS_VALUES:
            self.fail("class", f"unknown kernel class {value!r}")
        return value

    def optional_obj(self, key: builtins.str) -> _Reader | None:
        return None if self._get(key, "an object or null") is None else self.obj(key)

    def items(self, key: builtins.str) -> list[_Reader]:
        value = self._get(key, "a list")
        if not isinstance(value, list):
            self.fail(key, "expected a list")
        base = f"{self.where}.{key}" if self.where else key
        return [_Reader(item, self.source, f"{base}[{i}]") for i, item in enumerate(value)]

    def objs(self, key: builtins.str) -> list[_Reader]:
        readers = self.items(key)
        for r in readers:
            if not isinstance(r.data, dict):
                raise CalibrationError(f"{self.source}: field {r.where}: expected an object")
        return readers

    def polynomial(self, key: builtins.str) -> Polynomial:
        terms = self.obj(key)
        coefficients: dict[str, Fraction] = {}
        for name, value in terms.data.items():
            if name not in MONOMIALS:
                terms.fail(name, f"unknown monomial; known: {', '.join(MONOMIALS)}")
            exact = isinstance(value, int) and not isinstance(value, bool)
            if not exact and not (isinstance(value, str) and _RATIONAL.fullmatch(value)):
                terms.fail(name, f"expected an integer or a 'p/q' string, got {str(value)[:40]!r}")
            numerator, _, denominator = str(value).partition("/")
            if denominator and int(denominator) == 0:
                terms.fail(name, f"zero denominator in {value!r}")
            if abs(int(numerator)) >= 2**63:
                terms.fail(name, f"coefficient {str(value)[:40]} is beyond 64 bits")
            coefficient = Fraction(value)
            if coefficient == 0:
                terms.fail(name, "zero coefficient: leave the term out")
            canonical = coefficient_to_json(coefficient)
            if value != canonical:  # one spelling per value, so the file saves back unchanged
                terms.fail(name, f"write {value!r} as {canonical!r}")
            coefficients[name] = coefficient
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
    return tuple(value)


def _known_shape(reader: _Reader, shapes: set[Shape]) -> Shape:
    shape = (reader.int("M", minimum=1), reader.int("K", minimum=1), reader.int("N", minimum=1))
    if shape not in shapes:
        raise CalibrationError(
            f"{reader.source}: field {reader.where}: shape {shape} is not in fit_shapes"
        )
    return shape


def kernel_from_json(data: Any, *, source: str, shapes: set[Shape]) -> KernelMeasurement:
    """A kernel timing as a checkpoint or a calibration file keeps it, checked field by field."""
    return _kernel_from(_Reader(data, source, "kernel"), shapes)


def _kernel_from(k: _Reader, shapes: set[Shape]) -> KernelMeasurement:
    return KernelMeasurement(
        k.str("variant"),
        *_known_shape(k, shapes),
        k.str("key"),
        k.str("kernel"),
        k.choice("graph", GRAPHS),
        k.choice("kind", KERNEL_KINDS),
        k.role("role"),
        k.int("bytes_read", maximum=MAX_KERNEL_BYTES),
        k.int("bytes_written", maximum=MAX_KERNEL_BYTES),
        k.int("workspace_bytes", maximum=MAX_KERNEL_BYTES),
        k.num("time_s", positive=True, at_most=MAX_TIME_S),
        k.polynomial("bytes_polynomial"),
        k.kernel_class(),
    )


def kernel_set_to_dict(r: KernelSet, polynomial=polynomial_to_json) -> dict[str, Any]:
    """A kernel set as JSON; `polynomial` writes its polynomials (compare adds expressions)."""
    return {
        "shapes": [list(s) for s in r.shapes],
        "verified": [list(s) for s in r.verified],
        "workspace_max_bytes": r.workspace_max,
        "total": polynomial(r.total),
        "kernels": [
            {
                "key": k.key,
                "name": k.name,
                "graph": k.graph,
                "kind": k.kind,
                "role": k.role,
                "bytes": polynomial(k.nbytes),
                **({} if k.kernel_class is None else {"class": k.kernel_class}),
                **(
                    {"scattered_elements": polynomial(k.scattered_elements)}
                    if k.scattered_elements.terms
                    else {}
                ),
                **({"reread_bytes": polynomial(k.reread)} if k.reread.terms else {}),
                **({"arithmetic_per_byte": k.arithmetic_per_byte} if k.arithmetic_per_byte else {}),
            }
            for k in r.kernels
        ],
    }


def _variant_to_dict(v: VariantFit) -> dict[str, Any]:
    return {
        "variant": v.variant,
        "fixed": None if v.fixed is None else vars(v.fixed),
        "kernel_sets": [kernel_set_to_dict(r) for r in v.traffic.kernel_sets],
        "unfitted": [
            {"shapes": [list(s) for s in u.shapes], "reason": u.reason} for u in v.traffic.unfitted
        ],
    }


def _classed(data: Any) -> bool:
    """Whether any fitted kernel of a file carries its class: then every one must (a file
    from before kernel classes carries none). A malformed file is the readers' to refuse."""
    try:
        return any(
            k.get("class") is not None
            for v in data["variants"]
            for r in v["kernel_sets"]
            for k in r["kernels"]
        )
    except (KeyError, TypeError, AttributeError):
        return False


def _variant_from(
    reader: _Reader, shapes: set[Shape], *, measured: bool, classed: bool = False
) -> VariantFit:
    key = reader.str("variant")
    try:
        Variant.from_key(key)
    except ModelError as e:
        reader.fail("variant", e.marked)
    kernel_sets = []
    for r in reader.objs("kernel_sets"):
        kernel_set_shapes = tuple(_shape(s, s.where) for s in r.items("shapes"))
        if not kernel_set_shapes:
            r.fail("shapes", "empty: a kernel set is fitted at one calibration shape or more")
        verified = tuple(_shape(s, s.where) for s in r.items("verified"))
        for shape in kernel_set_shapes + verified:
            if shape not in shapes:
                raise CalibrationError(
                    f"{r.source}: field {r.where}: shape {shape} is not in fit_shapes"
                )
        kernels = tuple(
            FittedKernel(
                k.str("key"),
                k.str("name"),
                k.choice("graph", GRAPHS),
                k.choice("kind", KERNEL_KINDS),
                k.role("role"),
                k.polynomial("bytes"),
                k.kernel_class(required=classed),
                k.polynomial("scattered_elements")
                if "scattered_elements" in k.data
                else Polynomial.from_map({}),
                k.polynomial("reread_bytes")
                if "reread_bytes" in k.data
                else Polynomial.from_map({}),
                k.num("arithmetic_per_byte") if "arithmetic_per_byte" in k.data else 0.0,
            )
            for k in r.objs("kernels")
        )
        if len({k.key for k in kernels}) != len(kernels):
            r.fail("kernels", "a kernel key appears twice")
        total = r.polynomial("total")
        if polynomial_sum(k.nbytes for k in kernels) != total:
            raise CalibrationError(
                f"{r.source}: field {r.where}.total: is not the sum of its kernels"
            )
        kernel_sets.append(
            KernelSet(
                kernel_set_shapes,
                kernels,
                total,
                verified,
                r.int("workspace_max_bytes", maximum=MAX_KERNEL_BYTES),
            )
        )
    unfitted = tuple(
        Unfitted(tuple(_shape(s, s.where) for s in u.items("shapes")), u.str("reason"))
        for u in reader.objs("unfitted")
    )
    fixed = reader.optional_obj("fixed")
    if measured and fixed is None:
        reader.fail("fixed", "missing: a measured calibration fits fixed costs per variant")
    cost = None
    if fixed is not None:
        cost = FixedCost(
            fixed.num("gemm_factor", positive=True),
            fixed.num("device_extra_s", at_most=MAX_TIME_S),
            fixed.num("wall_extra_s", at_most=MAX_TIME_S),
            fixed.num("wall_floor_s", positive=True, at_most=MAX_TIME_S),
        )
    return VariantFit(key, TrafficFit(tuple(kernel_sets), unfitted), cost)


def _datasheet_gemm_from(root: _Reader) -> TiledGemm | None:
    reader = root.optional_obj("datasheet_gemm")
    if reader is None:
        return None
    gpu = PRESETS[reader.choice("gpu", tuple(PRESETS))]
    dtypes = reader.obj("dtypes")
    families = []
    for dtype in dtypes.data:
        if dtype not in GEMM_DTYPES:
            dtypes.fail(dtype, f"unknown gemm dtype; known: {', '.join(GEMM_DTYPES)}")
        e = dtypes.obj(dtype)
        tiles = tuple(_tile(t) for t in e.items("tiles"))
        if not tiles:
            e.fail("tiles", "empty: a gemm runs in tiles of one shape or more")
        try:
            family = GemmEfficiency(
                e.num("peak_fraction", positive=True),
                e.int("k_overhead", maximum=MAX_K_OVERHEAD),
                e.num("latency_s", at_most=MAX_FLOOR_S),
                tiles,
                e.num("slow_accum_factor", positive=True) if "slow_accum_factor" in e.data else 1.0,
            )
        except ModelError as error:
            e.fail("peak_fraction", str(error))
        families.append((dtype, family))
    missing = set(GEMM_DTYPES) - {d for d, _ in families}
    if missing:
        dtypes.fail(min(missing), "missing")
    efficiency = reader.num("memory_efficiency", positive=True)
    if efficiency > 1:
        reader.fail("memory_efficiency", f"must be at most 1, got {efficiency}")
    return TiledGemm(gpu, tuple(families), efficiency)


def _tile(reader: _Reader) -> tuple[int, int]:
    value = reader.data
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= 1024 for x in value)
    ):
        raise CalibrationError(f"{reader.source}: field {reader.where}: expected [rows, cols]")
    return tuple(value)


def _kind_to_dict(kind: KindTime) -> dict[str, float]:
    return {"floor_s": kind.floor_s, "bandwidth_bytes_per_s": kind.bandwidth_bytes_per_s}


def _kernel_time_to_dict(model: KernelTimeModel) -> dict[str, Any]:
    return {
        "kinds": {name: _kind_to_dict(k) for name, k in model.kinds},
        "pooled": _kind_to_dict(model.pooled),
        "factors": dict(model.factors),
        "residuals": vars(model.residuals),
        **(
            {"classes": {name: _kind_to_dict(k) for name, k in model.classes}}
            if model.classes
            else {}
        ),
        **(
            {"scattered_bytes_per_element": model.scattered_bytes_per_element}
            if model.scattered_bytes_per_element
            else {}
        ),
        **({"reread_share": model.reread_share} if model.reread_share else {}),
        **({"arithmetic_per_s": model.arithmetic_per_s} if model.arithmetic_per_s else {}),
    }


def _kind_from(reader: _Reader) -> KindTime:
    return KindTime(
        reader.num("floor_s", at_most=MAX_TIME_S),
        reader.num("bandwidth_bytes_per_s", within=BANDWIDTH_RANGE),
    )


def _kernel_time_from(reader: _Reader) -> KernelTimeModel:
    kinds = reader.obj("kinds")
    factors = reader.obj("factors")
    res = reader.obj("residuals")
    for name in kinds.data:
        if name not in KERNEL_KINDS:
            kinds.fail(name, f"unknown kernel kind; known: {', '.join(KERNEL_KINDS)}")
    classes = reader.obj("classes") if "classes" in reader.data else None
    if classes is not None:
        for name in classes.data:
            if name not in KERNEL_CLASS_VALUES:
                classes.fail(name, "unknown kernel class")
    return KernelTimeModel(
        tuple((name, _kind_from(kinds.obj(name))) for name in kinds.data),
        _kind_from(reader.obj("pooled")),
        tuple((name, factors.num(name, positive=True)) for name in factors.data),
        Residuals(res.num("median"), res.num("max"), res.int("count")),
        ()
        if classes is None
        else tuple((name, _kind_from(classes.obj(name))) for name in classes.data),
        reader.num("scattered_bytes_per_element")
        if "scattered_bytes_per_element" in reader.data
        else 0.0,
        reader.num("reread_share") if "reread_share" in reader.data else 0.0,
        reader.num("arithmetic_per_s") if "arithmetic_per_s" in reader.data else 0.0,
    )
