"""Kernel classes and how fast each runs: the ranges the band on every answer comes from.

A generated kernel's class is read off its code (`f8roof.profiler.triton_code.classify_launches`):
how it walks memory (elementwise, a reduction along rows or along columns, a split reduction with
a workspace and a second pass, a persistent reduction, a transposed store), whether it uses
atomics, and for an extern gemm which cuBLAS/CUTLASS mode `_scaled_mm` runs in.

Per class and GPU family, `EFFICIENCY_TABLE` gives a range (low, expected, high):
- memory kernels: the fraction of the datasheet HBM bandwidth they reach;
- gemms: a time factor on the gemm model's time for that dtype (the model is fitted to
  fast-accumulation fp8 sweeps; slow accumulation and CUTLASS rowwise cost extra);
and per family a launch floor (a kernel's time at zero bytes).

Every row cites what was measured and where, or says `assumption=True` with a wide range. No row
comes from a float8 linear's measured speedup: those are what f8roof is judged against.
Low/expected/high name the value, not the time: a low bandwidth fraction is a slow kernel, a low
gemm factor a fast gemm; `timing/band.py` turns them into time_low (fast) and time_high (slow).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from f8roof.errors import ModelError


class KernelClass(str, Enum):
    """What a kernel does to memory, read from its generated code."""

    POINTWISE = "pointwise"  # elementwise, every load and store in one layout
    POINTWISE_TRANSPOSE = "pointwise_transpose"  # a store (or load) in another layout
    REDUCTION_INNER = "reduction_inner"  # reduces along contiguous rows (row amax, a norm)
    REDUCTION_OUTER = "reduction_outer"  # reduces along strided columns (column amax over M)
    REDUCTION_SPLIT = "reduction_split"  # a partial reduction into a workspace, or its 2nd pass
    REDUCTION_PERSISTENT = "reduction_persistent"  # one program holds a whole row in registers
    ATOMIC = "atomic"  # tl.atomic_* (scatter, deterministic-off reductions)
    GEMM_BF16 = "gemm_bf16"  # mm/addmm/bmm in bf16 (or any non-float8 dtype)
    GEMM_FP8_TENSORWISE_FAST = "gemm_fp8_tensorwise_fast"  # cuBLASLt, fast accumulation
    GEMM_FP8_TENSORWISE_SLOW = "gemm_fp8_tensorwise_slow"  # cuBLASLt, promoted accumulation
    GEMM_FP8_ROWWISE_FAST = "gemm_fp8_rowwise_fast"  # CUTLASS f8f8bf16_rowwise, fast accumulation
    GEMM_FP8_ROWWISE_SLOW = "gemm_fp8_rowwise_slow"  # CUTLASS rowwise, promoted accumulation
    EXTERN = "extern"  # another ATen kernel Inductor left alone
    CPU = "cpu"  # a C++ kernel (CPU compile): no GPU efficiency applies

    @property
    def is_gemm(self) -> bool:
        return self.value.startswith("gemm_")

    @property
    def is_memory(self) -> bool:
        """Timed as floor + bytes / bandwidth."""
        return not self.is_gemm and self is not KernelClass.CPU


def gemm_class(*, float8: bool, rowwise: bool = False, fast_accum: bool = True) -> KernelClass:
    """The class of an extern gemm by its mode."""
    if not float8:
        return KernelClass.GEMM_BF16
    name = f"gemm_fp8_{'rowwise' if rowwise else 'tensorwise'}_{'fast' if fast_accum else 'slow'}"
    return KernelClass(name)


class GpuFamily(str, Enum):
    HOPPER = "hopper"  # H100, H200 (sm_90)
    BLACKWELL = "blackwell"  # B200, GB200, B300 (sm_100, sm_103)
    MI300X = "mi300x"  # AMD CDNA3

    @classmethod
    def of(cls, *, name: str, compute_capability: tuple[int, int]) -> GpuFamily:
        """A GPU preset's family: AMD by name, NVIDIA by compute capability."""
        if name.lower().startswith("mi3"):
            return cls.MI300X
        if compute_capability[0] == 9:
            return cls.HOPPER
        if compute_capability[0] == 10:
            return cls.BLACKWELL
        raise ModelError(
            f"no kernel-class efficiencies for GPU {name!r} (compute capability "
            f"{compute_capability[0]}.{compute_capability[1]}): known families are "
            + ", ".join(f.value for f in cls)
        )


@dataclass(frozen=True)
class Range:
    """0 <= low <= expected <= high. Zero is a measured floor's value where the kernel-time
    fit falls back to the bandwidth through the origin (`calibration.fitting.fit_kind`, a
    budget-cut run's few sizes); bandwidths are positive where they are read."""

    low: float
    expected: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.expected <= self.high:
            raise ModelError(
                f"a range needs 0 <= low <= expected <= high, got "
                f"{self.low}, {self.expected}, {self.high}"
            )

    @classmethod
    def point(cls, value: float) -> Range:
        return cls(value, value, value)

    def widened(self, relative: float) -> Range:
        """expected x (1 -/+ relative), for a measured value and its fit residual."""
        if not 0 <= relative < 1:
            raise ModelError(f"a relative residual must be in [0, 1), got {relative}")
        return Range(self.expected * (1 - relative), self.expected, self.expected * (1 + relative))


@dataclass(frozen=True)
class ClassEfficiency:
    """One row of the table: a class on a family, its range and where the range comes from.

    `value` is a fraction of datasheet HBM bandwidth (memory classes) or a factor on the gemm
    model's time (gemm classes)."""

    kernel_class: KernelClass
    family: GpuFamily
    value: Range
    source: str
    assumption: bool

    def __post_init__(self) -> None:
        if self.kernel_class.is_memory and self.value.high > 1:
            raise ModelError(f"{self.kernel_class.value}: a bandwidth fraction above 1")
        if (
            self.kernel_class.is_gemm
            and self.value.low < 1
            and self.kernel_class.value.endswith("_slow")
        ):
            raise ModelError(f"{self.kernel_class.value}: slow accumulation faster than fast")
        if not self.source.strip():
            raise ModelError(f"{self.kernel_class.value} on {self.family.value}: no source")


@dataclass(frozen=True)
class LaunchFloor:
    family: GpuFamily
    floor_s: Range
    source: str
    assumption: bool


_C, _F = KernelClass, GpuFamily

# ---- sources, quoted once -------------------------------------------------------------------
_AZURE_COPY = (
    "Azure NDv5 (H100 SXM) benchmark results: device copy 2.90 of 3.35 TB/s (0.87); "
    "torchao roofline_utils.py: pointwise Triton kernels reach 2.2 of 2.4 TB/s (0.92) on "
    "Meta's H100"
)
_NORM_BLOG = (
    "PyTorch blog 'SOTA Normalization Performance with torch.compile' (2025, H100/B200): "
    "Inductor's LayerNorm/RMSNorm (inner, persistent) kernels ran at about 50% of QuACK's "
    "before the fixes it describes and at parity after; QuACK's blog ('Getting Memory-bound "
    "Kernels to Speed-of-Light', Dao-AILab) puts QuACK near 3 TB/s (~0.9) on an H100"
)
_GB300_PR = (
    "pytorch/pytorch#193774 (2026): Inductor reduction kernels at 4 elements/thread reach "
    "69% of peak HBM on B200 and 33% on GB300 (sm_103), fixed by 16 elements/thread"
)
_NO_FIGURE = "no public measurement found of this kernel shape; a stated assumption"
_FAST_MODEL = (
    "the gemm model's own fit (timing/datasheet.py: cuBLASLt fp8 sweeps run with fast "
    "accumulation, Azure superbench NDv5)"
)
_SLOW_TENSORWISE = (
    "pytorch/ao#1325 (lw, H100, 2024-12): cuBLAS tensorwise with slow accumulation plus a "
    "manual rescale was chosen because CUTLASS rowwise was far slower without fast "
    "accumulation, i.e. cuBLAS's slowdown was small; triton-lang/triton#2513 (H100): fast "
    "accumulation 'a significant positive impact' on Triton fp8 gemms. No figure for cuBLAS "
    "itself was found: the range is an assumption"
)
_ROWWISE_FAST = (
    "pytorch/pytorch#147971 (lw, H100, 2025-02): CUTLASS rowwise with fast accumulation "
    "within 90-100% of tensorwise for most shapes, a long tail down to 50% (already in the "
    "gemm model's rowwise fraction, 0.95 of tensorwise)"
)
_ROWWISE_SLOW = (
    "pytorch/pytorch#144809 (ngimel, 2025-01): a cooperative schedule made slow-accumulation "
    "CUTLASS rowwise more than 2x faster for large matrices, so it was more than 2x slower "
    "before; pytorch/ao#2184: whether it is still slower is open. Range: an assumption"
)


def _row(
    kernel_class: KernelClass,
    family: GpuFamily,
    low: float,
    expected: float,
    high: float,
    source: str,
    *,
    assumption: bool,
) -> ClassEfficiency:
    return ClassEfficiency(kernel_class, family, Range(low, expected, high), source, assumption)


def _hopper() -> list[ClassEfficiency]:
    h = _F.HOPPER
    return [
        _row(_C.POINTWISE, h, 0.70, 0.87, 0.92, _AZURE_COPY, assumption=False),
        # The assumed rows reach at best what a measured pointwise kernel reaches (0.92, the
        # row above): no kernel shape is assumed faster than a plain streaming pass.
        # Inductor tiles a transpose in 2D (YBLOCK x XBLOCK) so both sides coalesce in part.
        _row(_C.POINTWISE_TRANSPOSE, h, 0.40, 0.70, 0.92, _NO_FIGURE, assumption=True),
        _row(_C.REDUCTION_INNER, h, 0.45, 0.80, 0.92, _NORM_BLOG, assumption=False),
        _row(_C.REDUCTION_PERSISTENT, h, 0.45, 0.80, 0.92, _NORM_BLOG, assumption=False),
        _row(_C.REDUCTION_OUTER, h, 0.30, 0.65, 0.92, _NO_FIGURE, assumption=True),
        _row(_C.REDUCTION_SPLIT, h, 0.30, 0.70, 0.92, _NO_FIGURE, assumption=True),
        _row(_C.ATOMIC, h, 0.15, 0.50, 0.85, _NO_FIGURE, assumption=True),
        _row(_C.EXTERN, h, 0.40, 0.80, 0.92, _NO_FIGURE, assumption=True),
        _row(_C.GEMM_BF16, h, 1.0, 1.0, 1.0, _FAST_MODEL, assumption=False),
        _row(_C.GEMM_FP8_TENSORWISE_FAST, h, 1.0, 1.0, 1.0, _FAST_MODEL, assumption=False),
        _row(_C.GEMM_FP8_TENSORWISE_SLOW, h, 1.0, 1.05, 1.30, _SLOW_TENSORWISE, assumption=True),
        _row(_C.GEMM_FP8_ROWWISE_FAST, h, 1.0, 1.0, 1.30, _ROWWISE_FAST, assumption=False),
        _row(_C.GEMM_FP8_ROWWISE_SLOW, h, 1.0, 1.30, 2.50, _ROWWISE_SLOW, assumption=True),
    ]


def _assumed(family: GpuFamily, rows: list[ClassEfficiency], note: str) -> list[ClassEfficiency]:
    """Hopper's rows for another family, widened downwards, each marked an assumption."""
    out = []
    for row in rows:
        v = row.value
        if row.kernel_class.is_memory:
            value = Range(v.low * 0.7, v.expected * 0.95, v.high)
        else:
            value = Range(v.low, v.expected, v.high * 1.2)
        out.append(ClassEfficiency(row.kernel_class, family, value, f"{note}; {_NO_FIGURE}", True))
    return out


def _blackwell(hopper: list[ClassEfficiency]) -> list[ClassEfficiency]:
    rows = _assumed(_F.BLACKWELL, hopper, "Hopper's range widened for Blackwell")
    # The one Blackwell figure: Inductor reductions at 69% of HBM on B200 before a fix.
    measured = (_C.REDUCTION_INNER, _C.REDUCTION_PERSISTENT)
    return [
        _row(r.kernel_class, _F.BLACKWELL, 0.33, 0.75, 0.92, _GB300_PR, assumption=False)
        if r.kernel_class in measured
        else r
        for r in rows
    ]


def _mi300x(hopper: list[ClassEfficiency]) -> list[ClassEfficiency]:
    return _assumed(_F.MI300X, hopper, "Hopper's range assumed for MI300X (ROCm Triton)")


_HOPPER = _hopper()
EFFICIENCY_TABLE: tuple[ClassEfficiency, ...] = (*_HOPPER, *_blackwell(_HOPPER), *_mi300x(_HOPPER))

LAUNCH_FLOORS: tuple[LaunchFloor, ...] = (
    LaunchFloor(
        _F.HOPPER,
        Range(1.5e-6, 2e-6, 4e-6),
        "torchao roofline_utils.py KERNEL_LAUNCH_OVERHEAD_SEC = 2 us (H100); a one-kernel "
        "Triton trace (HolisticTraceAnalysis test data, tests/data, A100) shows 1.76 us; the "
        "high end (4 us: kernels with many programs' tails) is an assumption",
        False,
    ),
    LaunchFloor(_F.BLACKWELL, Range(1.5e-6, 2.5e-6, 5e-6), _NO_FIGURE, True),
    LaunchFloor(_F.MI300X, Range(2e-6, 4e-6, 8e-6), _NO_FIGURE, True),
)


def class_efficiency(kernel_class: KernelClass, family: GpuFamily) -> ClassEfficiency:
    for row in EFFICIENCY_TABLE:
        if row.kernel_class is kernel_class and row.family is family:
            return row
    raise ModelError(f"no efficiency for {kernel_class.value} on {family.value}")


def launch_floor(family: GpuFamily) -> LaunchFloor:
    return next(f for f in LAUNCH_FLOORS if f.family is family)
