"""Times fitted to public measurements: how long a generated kernel and a gemm take on a GPU part
that f8roof never ran on, from what others measured on it.

One `PartTimes` per part holds a handful of physical parameters, each bounded:
- per memory kernel class (read off the generated code, `timing/kernel_classes.py`), the
  fraction of the datasheet HBM bandwidth it reaches, in (0, 1];
- the traffic each element a reduction walks along its strided index adds (a transposed float8
  copy stored from a row reduction, a column amax read by a row-shaped reduction: one memory
  sector per element), in bytes: 0 if the caches merged every sector, 32 if none;
- the share of a DRAM byte that a byte a reduction loads again in a later loop over its row
  costs (0: the row is still in cache; 1: read again from HBM);
- the rate of a kernel's arithmetic (FP32-lane cycles per second: the fit's lane cycles per SM per
  clock times the part's SMs and clock, below the FP32 lanes' peak: 132 SMs x 128 lanes x
  1.98 GHz = 33.5 T/s on an H100 SXM): a fused float8 cast that
  evaluates a norm, an amax, a power-of-2 scale and a clamp per element, pass after pass, is
  bound by it rather than by memory; a kernel takes the longer of the two;
- one launch floor (the time of an empty kernel) for every class;
- per gemm family (bf16, fp8 with one scale per tensor, fp8 with row scales; NVFP4 on parts
  with fp4 tensor cores) a tiled roofline (`models/gemm.TiledGemm`: peak fraction, K-step
  overhead, latency) and, for float8, the factor on its time without fast accumulation.
A kernel then takes floor + (bytes + scattered elements x those bytes + reloaded bytes x
that share) / (bandwidth x its class's fraction), exactly as `KernelTimeModel` times it.

`PublicTimes` holds the parts, each parameter's range over the fits that left out one source
or one fold, the two of those fits whose heatmap speedups run lowest and highest (the band's
ends before the residual spread: the disagreement between sources, as parameters that move
together), the cross-validated residual quantiles, and what the fit was checked on. `scripts/fit_public_times.py` makes it from the repository's data
(`data/published`, `data/codegen`); nothing in it is a measured float8 linear of f8roof's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from f8roof.errors import ModelError
from f8roof.hardware.efficiency import LARGE_TILES, ROWWISE_TILES, GemmEfficiency
from f8roof.hardware.presets import GPU, find_gpu
from f8roof.timing.gemm import TiledGemm
from f8roof.timing.kernel_classes import KernelClass
from f8roof.timing.kernel_time import SECTOR_BYTES, KernelTimeModel, KindTime, Residuals

# The memory classes the fit has data for, and those it ties to one of them (no public data
# separates them): a column reduction (outer) walks memory as a split reduction's first pass
# does; an extern copy and a Triton template's epilogue stream like a pointwise kernel.
FITTED_CLASSES = (
    KernelClass.POINTWISE.value,
    KernelClass.POINTWISE_TRANSPOSE.value,
    KernelClass.REDUCTION_INNER.value,
    KernelClass.REDUCTION_PERSISTENT.value,
    KernelClass.REDUCTION_SPLIT.value,
)
TIED_CLASSES = {
    KernelClass.REDUCTION_OUTER.value: KernelClass.REDUCTION_SPLIT.value,
    KernelClass.ATOMIC.value: KernelClass.REDUCTION_SPLIT.value,
    KernelClass.EXTERN.value: KernelClass.POINTWISE.value,
}
GEMM_FAMILIES = ("bf16", "fp8", "fp8_rowwise")
# A part whose tensor cores run fp4 (Blackwell) also has an NVFP4 family: fp4 runs at twice
# fp8's rate, so no float8 family stands for it (`public_fit.part_gemms` derives it).
FP4_FAMILY = "nvfp4"
# The part the heatmap ran on: its cells' cross-validated error is that part's; no float8
# linear measured on another part is in the fit, so the others have none.
CROSS_VALIDATED_PART = "h100-meta"
TILES = {
    "bf16": LARGE_TILES,
    "fp8": LARGE_TILES,
    "fp8_rowwise": ROWWISE_TILES,
    FP4_FAMILY: LARGE_TILES,
}


@dataclass(frozen=True)
class PartTimes:
    """The fitted time model of one GPU part (a preset name)."""

    part: str
    floor_s: float
    fractions: tuple[tuple[str, float], ...]  # FITTED_CLASSES -> fraction of datasheet HBM
    gemms: tuple[tuple[str, GemmEfficiency], ...]  # GEMM_FAMILIES
    scattered_bytes_per_element: float
    reread_share: float
    arithmetic_per_s: float

    def __post_init__(self) -> None:
        if not 0 < self.floor_s <= 1e-4:
            raise ModelError(f"{self.part}: a launch floor in (0, 100 us], got {self.floor_s}")
        names = [name for name, _ in self.fractions]
        if sorted(names) != sorted(FITTED_CLASSES):
            raise ModelError(f"{self.part}: fractions for {', '.join(FITTED_CLASSES)}")
        for name, value in self.fractions:
            if not 0 < value <= 1:
                raise ModelError(f"{self.part}: {name} fraction {value} outside (0, 1]")
        if not 0 <= self.scattered_bytes_per_element <= SECTOR_BYTES:
            raise ModelError(f"{self.part}: scattered bytes per element outside [0, 32]")
        if not 0 <= self.reread_share <= 1:
            raise ModelError(f"{self.part}: reread share outside [0, 1]")
        if not 0 < self.arithmetic_per_s < 1e15:
            raise ModelError(f"{self.part}: an arithmetic rate in (0, 1e15) operations/s")
        families = sorted(d for d, _ in self.gemms if d != FP4_FAMILY)
        if families != sorted(GEMM_FAMILIES):
            raise ModelError(
                f"{self.part}: gemm families {', '.join(GEMM_FAMILIES)} (and {FP4_FAMILY})"
            )

    def fraction(self, kernel_class: str) -> float:
        return dict(self.fractions)[TIED_CLASSES.get(kernel_class, kernel_class)]

    def kernel_time(self, gpu: GPU) -> KernelTimeModel:
        """Every class's rate on `gpu` (the part's fractions of its datasheet bandwidth)."""
        bandwidth = gpu.memory_bandwidth_bytes_per_s
        classes = [
            (c.value, KindTime(self.floor_s, bandwidth * self.fraction(c.value)))
            for c in KernelClass
            if c.is_memory
        ]
        pooled = KindTime(self.floor_s, bandwidth * self.fraction(KernelClass.POINTWISE.value))
        return KernelTimeModel(
            (),
            pooled,
            (),
            Residuals(0.0, 0.0, 0),
            tuple(classes),
            self.scattered_bytes_per_element,
            self.reread_share,
            self.arithmetic_per_s,
        )

    def gemm_model(self, gpu: GPU) -> TiledGemm:
        memory = self.fraction(KernelClass.POINTWISE.value)
        return TiledGemm(gpu, self.gemms, memory)


@dataclass(frozen=True)
class ParameterRange:
    """One parameter's fitted value and its range over the alternative fits."""

    name: str
    value: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low <= self.value <= self.high:
            raise ModelError(f"{self.name}: range {self.low}..{self.high} misses {self.value}")


@dataclass(frozen=True)
class PublicTimes:
    """Parts fitted to public measurements, with what the band and the README need."""

    parts: tuple[PartTimes, ...]
    low_parts: tuple[PartTimes, ...]  # the alternative fit whose speedups run lowest
    high_parts: tuple[PartTimes, ...]  # and highest
    ranges: tuple[ParameterRange, ...]  # the shared parameters, over the alternative fits
    residual_low: float  # log(measured / predicted) quantiles of the cross-validated cells
    residual_high: float
    coverage: float  # the band's cross-validated coverage of the cells
    cv_median: float  # median |speedup error| over the cells, k-fold
    cv_by_n: tuple[tuple[int, float], ...]  # the same per N
    derived: tuple[tuple[str, str], ...]  # part -> what its times rest on
    sources: tuple[str, ...]
    # part -> published / modelled throughput of a kernel checked on it, not fitted to
    checks: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if not self.residual_low <= 0 <= self.residual_high:
            raise ModelError("residual quantiles must bracket 0")
        names = sorted(p.part for p in self.parts)
        for ends in (self.low_parts, self.high_parts):
            if sorted(p.part for p in ends) != names:
                raise ModelError("the band's ends hold the same parts as the fit")

    def part(self, name: str) -> PartTimes | None:
        return next((p for p in self.parts if p.part == name), None)

    def rests_on(self, name: str) -> str:
        return dict(self.derived).get(name, "")

    def is_default(self, name: str) -> bool:
        """Whether an estimate on the part takes these times without being asked: parts of
        the architecture the kernels were fitted on (the heatmap's). Elsewhere the kernel model
        is a transfer by the datasheet, checked on one published kernel (`checks`) and on no
        float8 linear, so the datasheet timing stays the default there."""
        arch = find_gpu(CROSS_VALIDATED_PART).compute_capability
        return find_gpu(name).compute_capability == arch

    def transfer_check(self, name: str) -> float:
        """How much faster a published kernel ran than modelled on the part's architecture
        (nan: none checked)."""
        arch = find_gpu(name).compute_capability[0]
        found = [r for p, r in self.checks if find_gpu(p).compute_capability[0] == arch]
        return found[0] if found else float("nan")

    def cv_error(self, name: str) -> float | None:
        """The cells' cross-validated median error where it applies to the part, else None."""
        return self.cv_median if name == CROSS_VALIDATED_PART else None

    def band_coverage(self, name: str) -> float | None:
        """The share of held-out cells inside the band, where that applies to the part (the
        heatmap's), else None: nothing measured on another part checks its band."""
        return self.coverage if name == CROSS_VALIDATED_PART else None

    def ends(self, name: str) -> tuple[PartTimes, PartTimes]:
        """The part as the lowest- and the highest-speedup alternative fits have it."""
        low = next(p for p in self.low_parts if p.part == name)
        high = next(p for p in self.high_parts if p.part == name)
        return low, high
