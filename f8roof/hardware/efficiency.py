"""How close each part's gemms and copies come to its datasheet, as published facts: a fraction
per gemm family, each with its source, and the copy fraction of memory-bound kernels. None of
these numbers comes from a float8 linear's measured speedup (what f8roof is judged against).
`timing/datasheet.py` times with them; `hardware/presets.py` gives each preset its record.

Families: bf16; fp8 (one scale per tensor); fp8_rowwise; fp8_blockwise (1x128 x 128x128
scales); mxfp8; nvfp4. Which a part runs is hardware/support.py's.

Memory-bound kernels: time = floor + bytes / (bandwidth x the copy fraction).
- H100 SXM: a device copy reaches 2.90 of 3.35 TB/s (0.87; Azure NDv5 benchmark results);
  H200 SXM: 4.01-4.19 of 4.8 TB/s in Azure's published ND H200 v5 results, so 0.85 (4.1).
  Nobody in this project has measured the copy bandwidth of the H200 it is lent (an earlier
  version cited 0.90 as measured there: it was not). `timing/kernel_classes.py` gives each
  kernel class its own range around these.

Gemms, tiled (`timing/gemm.py`'s `TiledGemm`: waves of output tiles over the SMs). Fitted to
public sweeps of stock 700 W H100 SXM parts:
- bf16 (cuBLAS via torch.mm): peak fraction 0.84, 192 K-steps of tile overhead, 3 us; fits
  openxla's sm_90 matmul perf table (256^3 .. 4096^3 and rectangles) and a torch 2.7 sweep
  (zzc0721/torch-performance-test-data#79: 1024^3 177, 2048^3 677, 4096^3 789, 8192^3 798
  TFLOP/s) with 6% RMS log error;
- fp8 with one scale per tensor (cuBLASLt, fast accumulation): 0.70, 128, 4 us; fits Azure's
  superbench cublaslt fp8 sweep on NDv5 (1024^3 274 .. 16384^3 1377 TFLOP/s) with 2.3% RMS log
  error. The backward gemms run without fast accumulation; no public sweep separates that on
  cuBLAS Hopper kernels, so they share these numbers (an assumption);
- fp8 with row/column scales (PyTorch's CUTLASS `f8f8bf16_rowwise`): 0.95 of tensorwise's
  fraction (pytorch/pytorch#147971: mostly 90-100% of tensorwise with fast accumulation;
  FBGEMM#2764: 0-10% slower), tiles 64x128 or 128x128 as RowwiseScaledMM.cu picks them;
- blockwise (1x128 x 128x128 scales): 0.77 of the rowwise fraction (FBGEMM#2546, H100 500W,
  8192^3: block gemm 870 vs row gemm 1126 TFLOP/s; 65536x8192x7168: 828 vs 1083), from FBGEMM's
  CUTLASS kernels where torch runs cuBLAS 12.9's (an assumption).
H200 SXM: the same compute as H100 SXM (same SMs and clocks; stas00's ml-engineering MAMF table
finds bf16 identical).

Blackwell and AMD parts (issue #20): peak fractions fitted to stas00's ml-engineering "Maximum
Achievable Matmul FLOPS" table (compute/accelerator/README.md, 2026-08; mamf-finder: torch.mm
or torch._scaled_mm, mean of 100 runs, best of a shape search): the fraction at which the tiled
model's maximum over the published best shape and the 4096..16384 cubes equals the published
MAMF. The same rule applied to H100 SXM gives bf16 0.818 and fp8 0.719 against the sweep-fitted
0.84 and 0.70 above, so the two ways agree within 3%. K-step overheads and latencies are H100's
(no public small-shape sweep of these parts separates them): an assumption every one of them
states. Where a family's fraction (or its ratio to another family) is H100 SXM's carried over
with no source for the part, its record says so (`FamilyEfficiency.hopper_carried`), and a
datasheet-timed answer on it names those families in its provenance line.

AMD parts (issue #55): bf16 from stas00's MAMF table (MI300X 668.4 TFLOP/s, torch 2.5.1 ROCm 6.3
with TunableOp; MI355X 1565.0, torch 2.8 ROCm 7.0.2; the table's MI325X, the same gfx942
compute at 1000 W, reaches 784.9, 0.60 of 1307: no f8roof preset), fp8 with one scale per
tensor from hipBLASLt. What public material there is, as of 2026-08: MI300X's fp8 is one
hipblaslt-bench point at 8192^3 on a part clocked down to 1005 MHz (ROCm/hipBLASLt#1721; the
MAMF table's MI300X fp8 row is empty, and torch._scaled_mm ran ~110 TFLOP/s on a 2024-12
nightly, pytorch/pytorch#143465); MI355X has no dense hipBLASLt fp8 sweep, so its fp8 takes
bf16's fraction (`assumed_as`), bracketed by hipBLASLt's fp8 grouped gemm at 1.2x its bf16 one
(AMD-AGI/Primus-Turbo#252, quantization included) and a hand-written fp8 gemm at 58% of peak
(HazyResearch/HipKittens#19). torch's row-scaled `_scaled_mm` on gfx942/gfx950 is hipBLASLt
with outer-vector scales; nobody has published its timing (AMD-AGI/Primus-Turbo#268 times CK's
rowwise kernels, not torch's path), so rowwise takes tensorwise's fraction (`assumed_as`).
MXFP8 (gfx950) is modelled at bf16's throughput, an upper bound (pytorch/ao#4290; hipBLASLt's
MXFP8 averages 1132 TFLOP/s forward, AMD-AGI/Primus-Turbo#274). A datasheet-timed answer on
the part names every assumed family in its provenance line.

Row-scaled fp8 on Blackwell, as torch dispatches it (issue #55): `torch._scaled_mm` with
row/column scales runs PyTorch's own CUTLASS kernel (`f8f8bf16_rowwise`,
aten/src/ATen/native/cuda/RowwiseScaledMM.cu) on sm100 and sm103 in every torch since 2.7
(pytorch/pytorch#148421 added the sm100 kernel, 2025-03, "not optimized yet"): cuBLASLt's
outer-vector scaling, which torch calls for rowwise on sm90 from CUDA 12.9, is sm90-only
(pytorch/pytorch#160693, NVIDIA/CUDALibrarySamples#270; ScaledBlas.cpp sends major >= 10 to
CUTLASS), and pytorch/pytorch#153555 calls that sm100 template "not optimal". Measured:
torch._scaled_mm rowwise ~1860 TFLOP/s at 4096^3 on a B200 (pytorch/helion#2756, 2026-06),
where cuBLAS's tensorwise runs 2765 (OpenXLA's sm_100 table). Its fraction is fitted as the
MAMF fractions are (the tiled model at 4096^3 gives 1860): 0.456, 0.591 of B200's tensorwise.
GB200 runs the same sm100 kernel and B300/GB300 (sm103) the same CUTLASS family: B200's ratio
to tensorwise, said in their records. Tensorwise is cuBLASLt (nvjet kernels) on every
Blackwell part; torchao's rowwise backward gemms run it (with unit scales, `timing/gemm.py`'s
`fp8_gemm_dtype`). Slow accumulation: no public sm100 sweep separates it, so no factor.

A power cap (`h100-meta`, and every part `presets.power_limited` derives; issue #59) lowers the
SM clock, never the memory clock: memory-bound kernels keep their bandwidth (an RTX 3090 at its
315 W cap throttles its SM clock in every busy sample and runs its memory clock at spec in
every one, ashalliants/ninfer-3090#72). One rule (`cap_ratios`): where a public sweep measured
the part's silicon at that cap, its ratios per family (Hopper at 500 W: Meta's FBGEMM
benchmarks name their H100 "500W", FBGEMM#2546: bf16 8192^3 585 TFLOP/s, 0.73x a 700 W part;
fp8 about 0.87x); else every family at watts / rated watts. A gemm that draws the part's
rated power at full clocks keeps its throughput per watt under the cap: GB300's cuBLAS gemm
runs ~617 TFLOP/s at 500 W against ~1600-2174 at its rated 1400 W, 0.28-0.39 where the rule
says 0.36 (facebookexperimental/triton#2023), and H100's bf16 0.73 where it says 0.71. Every
family alike on Blackwell: bf16, fp8, MXFP8 and NVFP4 run on the same tensor cores at the one
SM clock the cap sets, and B200's sustained tensor-core work already draws its rated ~1000 W
(its SM clock falls from 1965 to ~1580 MHz there, flashinfer-ai/flashinfer#2899), so each is
power-bound at the rated power.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from f8roof.errors import ModelError

FAMILIES = ("bf16", "fp8", "fp8_rowwise", "fp8_blockwise", "mxfp8", "nvfp4")


@dataclass(frozen=True)
class GemmEfficiency:
    """How one gemm kernel family approaches peak on a GPU: `peak_fraction` of its peak FLOP/s
    per SM once the tiles fill the SMs, `k_overhead` K-steps of prologue/epilogue per tile, a
    fixed `latency_s`, the output tiles (rows, cols) its library picks from, and for float8 the
    factor on its time without fast accumulation (the backward gemms: Hopper's fp8 MMA
    accumulates in reduced precision, so cuBLAS promotes partial sums every few K-steps)."""

    peak_fraction: float
    k_overhead: int
    latency_s: float
    tiles: tuple[tuple[int, int], ...]
    slow_accum_factor: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.peak_fraction <= 1 or self.k_overhead < 0 or self.latency_s < 0:
            raise ModelError(f"bad gemm efficiency {self}")
        if not 1 <= self.slow_accum_factor <= 4:
            raise ModelError(
                f"a slow-accumulation factor lies in [1, 4], got {self.slow_accum_factor}"
            )


@dataclass(frozen=True)
class FamilyEfficiency:
    """One gemm family on one part: its tiled-gemm numbers and where its fraction comes from.
    `hopper_carried`: the fraction, or its ratio to another family, is H100 SXM's, carried over
    with no source for this part. `assumed_as`: no public sweep of this family on this part, so
    it takes the named family's fraction there (or its throughput, as its source says)."""

    family: str
    gemm: GemmEfficiency
    source: str
    hopper_carried: bool = False
    assumed_as: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ModelError(f"unknown gemm family {self.family!r}; known: {', '.join(FAMILIES)}")
        if not self.source.strip():
            raise ModelError(f"gemm family {self.family}: no source")
        if self.assumed_as and (self.assumed_as not in FAMILIES or self.assumed_as == self.family):
            raise ModelError(f"gemm family {self.family} assumed as {self.assumed_as!r}")


@dataclass(frozen=True)
class PartEfficiency:
    """How one part's kernels approach its datasheet: gemm families, the copy fraction of
    memory-bound kernels and its source, what the numbers assume (`f8roof gpus` shows them).
    `borrowed`: every number is another part's, unverified for this one."""

    families: tuple[FamilyEfficiency, ...]
    memory_efficiency: float
    memory_source: str
    assumptions: tuple[str, ...] = ()
    borrowed: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.memory_efficiency <= 1:
            raise ModelError(f"memory efficiency must be in (0, 1], got {self.memory_efficiency}")
        if not self.memory_source.strip():
            raise ModelError("a copy fraction cites its source")
        names = [f.family for f in self.families]
        if len(set(names)) != len(names):
            raise ModelError(f"a gemm family listed twice: {names}")

    @property
    def pairs(self) -> tuple[tuple[str, GemmEfficiency], ...]:
        """(family, efficiency), what a tiled gemm model takes."""
        return tuple((f.family, f.gemm) for f in self.families)

    @property
    def sources(self) -> tuple[str, ...]:
        """Every family's source and the copy fraction's, once each."""
        return tuple(dict.fromkeys((*(f.source for f in self.families), self.memory_source)))

    def family(self, name: str) -> FamilyEfficiency | None:
        return next((f for f in self.families if f.family == name), None)


LARGE_TILES = ((128, 128), (128, 256), (256, 128))
ROWWISE_TILES = ((64, 128), (128, 128))
# AMD: hipBLASLt's macro tiles reach 256x256 (its kernel names, e.g. MT256x256x64); an
# assumption of this model, as the NVIDIA tiles are.
AMD_TILES = (*LARGE_TILES, (256, 256))

BF16 = GemmEfficiency(0.84, 192, 3e-6, LARGE_TILES)
FP8 = GemmEfficiency(0.70, 128, 4e-6, LARGE_TILES)
FP8_ROWWISE = GemmEfficiency(0.70 * 0.95, 128, 4e-6, ROWWISE_TILES)
FP8_BLOCKWISE = GemmEfficiency(0.70 * 0.95 * 0.77, 128, 4e-6, ROWWISE_TILES)

# Gemm throughput at 500 W relative to a 700 W H100 (FBGEMM#2546), see the module docstring.
POWER_CAP_BF16 = 0.73
POWER_CAP_FLOAT8 = 0.87
POWER_CAP_SOURCE = (
    "FBGEMM#2546: H100 500W vs 700 W gemm throughput (bf16 0.73, float8 0.87; bf16 585 TFLOP/s "
    "at 8192^3)"
)
HOPPER_CAPPED_W = 500  # the cap FBGEMM#2546's ratios were measured at
POWER_RULE_SOURCE = (
    "gemm throughput x watts / rated watts, every family alike (one SM clock; memory clock "
    "not capped): GB300 cuBLAS 617 TFLOP/s at 500 W vs 1600-2174 at 1400 W "
    "(facebookexperimental/triton#2023); B200 at its rated ~1000 W already clock-bound "
    "(flashinfer-ai/flashinfer#2899)"
)

MAMF = (
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS "
    "table (mamf-finder.py)"
)
K_STEPS_ASSUMED = (
    "K-step overheads and latencies are H100 SXM's (192/128 K-steps, 3/4 us): no public "
    "small-shape sweep of this part"
)
# torch._scaled_mm rowwise on sm100: PyTorch's CUTLASS kernel (module docstring), measured on
# B200; its ratio to B200's tensorwise fraction (0.772) stands for the other Blackwell parts.
B200_ROWWISE = 0.456
BLACKWELL_ROWWISE_RATIO = B200_ROWWISE / 0.772
SM100_ROWWISE = (
    "torch._scaled_mm rowwise on sm100/sm103 is PyTorch's CUTLASS f8f8bf16_rowwise "
    "(ScaledBlas.cpp; cuBLASLt outer-vector scaling is sm90-only, pytorch/pytorch#160693): "
    "~1860 TFLOP/s at 4096^3 on B200 (pytorch/helion#2756) -> 0.456"
)
ROWWISE_FROM_B200 = (
    "rowwise = 0.591 x tensorwise, B200's ratio (torch's CUTLASS rowwise kernel, "
    "pytorch/helion#2756): no public rowwise sweep of this part"
)
ROWWISE_HIPBLASLT_ASSUMED = (
    "rowwise = tensorwise: torch runs row-scaled _scaled_mm on gfx942/gfx950 through hipBLASLt "
    "(ScaledBlas.cpp), and no public sweep times that gemm; the only published AMD rowwise "
    "timings are Primus-Turbo's CK kernels at M <= 16384, N 4096, K 2048 on MI300X "
    "(AMD-AGI/Primus-Turbo#268), not torch's path"
)
MX_RATIO = (
    "MXFP8 = 0.991 x fp8: cuBLAS nvjet kernels on B200, bmm_mxfp8 2347.7 vs bmm_fp8 2369.0 "
    "TFLOP/s at 128 x 512x512x4096 (flashinfer-ai/flashinfer#2256)"
)
B200_COPY = (
    "copy 0.69: torchao's MXFP8 dim0 cast compiled by torch.compile reaches 5.5 of 8 TB/s on "
    "B200 (torchao/prototype/mx_formats/README.md)"
)
# NVFP4 (issue #33): B200's fraction fitted as the MAMF fractions are (the tiled model's
# maximum over the published best cube and the 4096..16384 cubes equals the published best) to
# torch._scaled_mm's NVFP4 gemms (cuBLAS, what torchao's NVFP4 linear calls); the other
# Blackwell parts keep B200's NVFP4/fp8 ratio.
B200_NVFP4 = 0.619
NVFP4_TO_FP8 = B200_NVFP4 / 0.772
NVFP4_SWEEP = (
    "pytorch/ao#2427: torchao's bench_matmul.py, recipe nvfp4, on B200 (torch._scaled_mm, "
    "cuBLAS), 4096^3 4.46, 6144^3 5.50, 8192^3 5.37 PFLOP/s -> NVFP4 0.619 of 9 PF"
)
NVFP4_RATIO = (
    "NVFP4 = 0.802 x fp8's fraction, B200's ratio (pytorch/ao#2427's sweep against stas00's "
    "fp8 MAMF): no public NVFP4 sweep of this part"
)
MI355X_MX = (
    "pytorch/ao#4290 (MI350X): MXFP8 F.scaled_mm 'consistently slower than bf16'; hipBLASLt's "
    "MXFP8 gemm averages 1132 TFLOP/s forward on MI355X (AMD-AGI/Primus-Turbo#274), below "
    "bf16's 1565 MAMF (shapes not given): no public sweep of F.scaled_mm's MXFP8 gemm to fit, "
    "so it is modelled at bf16's throughput (an upper bound)"
)

H100_BF16 = "openxla sm_90 matmul perf table; zzc0721/torch-performance-test-data#79 (bf16)"
H100_FP8 = "Azure superbench cublaslt fp8 sweep on NDv5 (fp8)"
H100_ROWWISE = "0.95 x tensorwise: pytorch/pytorch#147971, FBGEMM#2764 (rowwise)"
H100_BLOCKWISE = (
    "0.77 x rowwise: FBGEMM#2546, H100 500W, 8192^3 block 870 vs row 1126 TFLOP/s (FBGEMM's "
    "CUTLASS kernels where torch runs cuBLAS's)"
)
H100_COPY = "Azure NDv5 benchmark results: device copy 2.90 of 3.35 TB/s"


def _family(
    name: str, gemm: GemmEfficiency, source: str, carried: bool = False, assumed_as: str = ""
):
    return FamilyEfficiency(name, gemm, source, carried, assumed_as)


H100 = PartEfficiency(
    (
        _family("bf16", BF16, H100_BF16),
        _family("fp8", FP8, H100_FP8),
        _family("fp8_rowwise", FP8_ROWWISE, H100_ROWWISE),
        _family("fp8_blockwise", FP8_BLOCKWISE, H100_BLOCKWISE),
    ),
    0.87,
    H100_COPY,
)
_SAME_SILICON = "H100 SXM's: the same SMs and clocks"
H200 = PartEfficiency(
    (
        _family("bf16", BF16, f"{H100_BF16}; H200 identical in {MAMF}"),
        _family("fp8", FP8, f"{H100_FP8}: {_SAME_SILICON}", True),
        _family("fp8_rowwise", FP8_ROWWISE, f"{H100_ROWWISE}: {_SAME_SILICON}", True),
        _family("fp8_blockwise", FP8_BLOCKWISE, f"{H100_BLOCKWISE}: {_SAME_SILICON}", True),
    ),
    0.85,
    "Azure ND H200 v5 benchmark results: device copy 4.01-4.19 of 4.8 TB/s",
    ("gemm fractions are H100 SXM's: same SMs and clocks (stas00 MAMF: bf16 identical)",),
)


def borrowed_from_h100(name: str) -> PartEfficiency:
    """H100 SXM's gemm and copy fractions for a part no public sweep covers (a PCIe or NVL
    board, a custom GPU), saying so."""
    return PartEfficiency(
        tuple(
            _family(f.family, f.gemm, f"{f.source}: H100 SXM's, unverified here", True)
            for f in H100.families
        ),
        H100.memory_efficiency,
        f"{H100.memory_source}: H100 SXM's, unverified here",
        (f"{name}: H100 SXM's gemm and copy fractions, unverified for this part",),
        borrowed=True,
    )


@dataclass(frozen=True)
class CapRatios:
    """A power cap's gemm throughput over the part's at its rated power: bf16's, every
    float8 and fp4 family's, and where the two come from."""

    bf16: float
    float8: float
    source: str

    def __post_init__(self) -> None:
        if not (0 < self.bf16 <= 1 and 0 < self.float8 <= 1):
            raise ModelError(f"a power cap's throughput ratios lie in (0, 1], got {self}")

    def of(self, family: str) -> float:
        return self.bf16 if family == "bf16" else self.float8


def cap_ratios(*, watts: int, rated_w: int, hopper: bool) -> CapRatios:
    """The one power-cap rule (module docstring): Hopper at 500 W takes FBGEMM#2546's measured
    ratios (bf16 0.73, float8 0.87); any other cap scales every family by watts / rated
    watts."""
    if not 0 < watts <= rated_w:
        raise ModelError(f"a power cap lies in (0, {rated_w}] W, got {watts}")
    if hopper and watts == HOPPER_CAPPED_W:
        return CapRatios(POWER_CAP_BF16, POWER_CAP_FLOAT8, POWER_CAP_SOURCE)
    ratio = watts / rated_w
    return CapRatios(ratio, ratio, f"{watts} W / {rated_w} W = {ratio:.3g}: {POWER_RULE_SOURCE}")


def power_capped(part: PartEfficiency, cap: CapRatios, *, assumptions=()) -> PartEfficiency:
    """A part's families at a power cap: each family's fraction times its `cap` ratio, the
    cap's source added to each."""
    families = tuple(
        replace(
            f,
            gemm=replace(f.gemm, peak_fraction=f.gemm.peak_fraction * cap.of(f.family)),
            source=f"{f.source}; capped: {cap.source}",
        )
        for f in part.families
    )
    return replace(part, families=families, assumptions=(*part.assumptions, *assumptions))


H100_META = replace(
    power_capped(
        H100,
        cap_ratios(watts=HOPPER_CAPPED_W, rated_w=700, hopper=True),
        assumptions=("500 W power cap assumed from FBGEMM's 'H100 500W' benchmarks",),
    ),
    memory_efficiency=0.92,
    memory_source="torchao roofline_utils.py: pointwise Triton kernels reach 2.2 of 2.4 TB/s",
)


def _nvidia(
    bf16: tuple[float, str],
    fp8: tuple[float, str],
    mxfp8: tuple[float, str],
    nvfp4: tuple[float, str],
    rowwise: str = ROWWISE_FROM_B200,
) -> tuple[FamilyEfficiency, ...]:
    """A Blackwell part's families: H100's K-steps and latencies (no public small-shape sweep
    of its own), rowwise (torch's CUTLASS kernel) at B200's ratio to tensorwise, NVFP4 at fp8's
    K-steps and latency."""
    return (
        _family("bf16", GemmEfficiency(bf16[0], 192, 3e-6, LARGE_TILES), bf16[1]),
        _family("fp8", GemmEfficiency(fp8[0], 128, 4e-6, LARGE_TILES), fp8[1]),
        _family(
            "fp8_rowwise",
            GemmEfficiency(fp8[0] * BLACKWELL_ROWWISE_RATIO, 128, 4e-6, ROWWISE_TILES),
            rowwise,
        ),
        _family("mxfp8", GemmEfficiency(mxfp8[0], 128, 4e-6, LARGE_TILES), mxfp8[1]),
        _family("nvfp4", GemmEfficiency(nvfp4[0], 128, 4e-6, LARGE_TILES), nvfp4[1]),
    )


def _amd(
    bf16: tuple[float, str],
    fp8: tuple[float, str],
    mxfp8: tuple[float, str] | None,
    fp8_assumed_as: str = "",
) -> tuple[FamilyEfficiency, ...]:
    """An AMD part's families: bf16 and fp8 (hipBLASLt) at their fractions, rowwise at fp8's
    (no public sweep: `assumed_as`), MXFP8 (gfx950) at bf16's throughput where given."""
    families = (
        _family("bf16", GemmEfficiency(bf16[0], 192, 3e-6, AMD_TILES), bf16[1]),
        _family(
            "fp8", GemmEfficiency(fp8[0], 128, 4e-6, AMD_TILES), fp8[1], assumed_as=fp8_assumed_as
        ),
        _family(
            "fp8_rowwise",
            GemmEfficiency(fp8[0], 128, 4e-6, AMD_TILES),
            ROWWISE_HIPBLASLT_ASSUMED,
            assumed_as="fp8",
        ),
    )
    if mxfp8 is None:
        return families
    # modelled at bf16's throughput (pytorch/ao#4290), so with bf16's K-steps and latency
    mx = _family(
        "mxfp8", GemmEfficiency(mxfp8[0], 192, 3e-6, AMD_TILES), mxfp8[1], assumed_as="bf16"
    )
    return (*families, mx)


B200 = PartEfficiency(
    _nvidia(
        (
            0.787,
            (
                f"{MAMF}: B200 bf16 1745.0 TFLOP/s at 1792x16128x3072 (MxNxK), torch 2.7.1+cu128 "
                "-> 0.787"
            ),
        ),
        (0.772, f"{MAMF}: B200 fp8 3432.5 TFLOP/s at 15360x4096x3072 -> 0.772"),
        (0.772 * 0.991, MX_RATIO),
        (B200_NVFP4, NVFP4_SWEEP),
        SM100_ROWWISE,
    ),
    0.69,
    B200_COPY,
    (
        K_STEPS_ASSUMED,
        (
            "cuBLAS 13.1 reaches 3858 TFLOP/s MXFP8 at 8192^3 (triton-lang/triton#9044); this "
            "model, fitted to cuBLAS 12.8-era sweeps, gives less"
        ),
        (
            "NVFP4 gemms at or below 3072^3 run slower than this model says (pytorch/ao#2427: "
            "2048^3 1.68 PFLOP/s, the model 2.21)"
        ),
    ),
)
GB200 = PartEfficiency(
    _nvidia(
        (
            0.739,
            f"{MAMF}: GB200 bf16 1822.0 TFLOP/s at 4096x9728x2048, torch 2.10 dev +cu130 -> 0.739",
        ),
        (0.731, f"{MAMF}: GB200 fp8 3615.6 TFLOP/s at 19456x5120x1536 -> 0.731"),
        (0.731 * 0.991, f"{MX_RATIO}: B200's ratio, the same GPU and cuBLAS kernels"),
        (0.731 * NVFP4_TO_FP8, NVFP4_RATIO),
        f"{ROWWISE_FROM_B200}: GB200 runs B200's sm100 CUTLASS kernel",
    ),
    0.69,
    "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB200 copy measurement)",
    (
        "MXFP8/fp8 ratio is B200's (same GPU and cuBLAS kernels)",
        "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB200 copy measurement)",
        K_STEPS_ASSUMED,
        ROWWISE_FROM_B200,
        NVFP4_RATIO,
    ),
)
_B300_FAMILIES = _nvidia(
    (0.798, f"{MAMF}: B300 bf16 1769.0 TFLOP/s at 12288x18432x1024, torch 2.9.1+cu130 -> 0.798"),
    (0.754, f"{MAMF}: B300 fp8 3353.3 TFLOP/s at 3072x6144x7168 -> 0.754"),
    (0.754 * 0.991, f"{MX_RATIO}: B200's ratio (no public B300 MXFP8 sweep)"),
    (0.754 * NVFP4_TO_FP8, NVFP4_RATIO),
)
B300 = PartEfficiency(
    _B300_FAMILIES,
    0.69,
    "copy 0.69 is B200's (same 8 TB/s HBM3e; no public B300 copy measurement)",
    (
        "MXFP8/fp8 ratio is B200's (no public B300 MXFP8 sweep)",
        "copy 0.69 is B200's (same 8 TB/s HBM3e; no public B300 copy measurement)",
        K_STEPS_ASSUMED,
        ROWWISE_FROM_B200,
        NVFP4_RATIO,
    ),
)
GB300 = PartEfficiency(
    tuple(
        replace(f, source=f"{f.source}; B300's: the same Blackwell Ultra silicon")
        for f in _B300_FAMILIES
    ),
    0.69,
    "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB300 copy measurement)",
    (
        (
            "gemm fractions are B300's (no public GB300 sweep); GB300 runs at 1,400 W "
            "against B300's 1,100 W, so its gemms may sustain more"
        ),
        "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB300 copy measurement)",
        K_STEPS_ASSUMED,
        ROWWISE_FROM_B200,
        NVFP4_RATIO,
    ),
)
MI300X = PartEfficiency(
    _amd(
        (
            0.518,
            (
                f"{MAMF}: MI300X bf16 668.4 TFLOP/s at 10240x15360x8192, torch 2.5.1 ROCm 6.3, "
                "PYTORCH_TUNABLEOP_ENABLED=1 -> 0.518"
            ),
        ),
        (
            0.367,
            (
                "ROCm/hipBLASLt#1721: hipblaslt-bench f8_r 907 TFLOP/s at 8192^3 (develop "
                "402603df, ROCm 6.3.1, MI300X fixed to 1005 MHz) -> 0.367"
            ),
        ),
        None,
    ),
    0.56,
    "copy 0.56 is MI350X's Triton cast kernel (pytorch/ao#4290: bf16->MX cast 4.5 TB/s)",
    (
        (
            "fp8 from one hipBLASLt point whose reporter fixed a 1005 MHz clock: stock parts "
            "may run fp8 faster; stas00's MAMF table (2026-08) leaves MI300X's fp8 row empty, "
            "and torch._scaled_mm ran ~110 TFLOP/s at 8192^3 on a 2024-12 nightly "
            "(pytorch/pytorch#143465): no public stock-clock sweep of torch's fp8 gemm"
        ),
        ROWWISE_HIPBLASLT_ASSUMED,
        (
            "copy 0.56 is MI350X's Triton cast kernel (pytorch/ao#4290): no public MI300X "
            "measurement of a Triton elementwise kernel"
        ),
        K_STEPS_ASSUMED + "; tiles up to 256x256 (hipBLASLt macro tiles)",
    ),
)
_MI355X_BF16 = (
    f"{MAMF}: MI355X bf16 1565.0 TFLOP/s at 12288x8192x8192, torch 2.8 ROCm 7.0.2 -> 0.629 of "
    "2516.6"
)
MI355X_FP8_ASSUMED = (
    "fp8 = bf16's fraction: no public dense fp8 gemm sweep of hipBLASLt on MI355X; the "
    "published points bracket it: hipBLASLt's fp8 grouped gemm forward 1589 vs bf16 1320 "
    "TFLOP/s averaged over DeepSeek-V3 expert shapes, quantization included "
    "(AMD-AGI/Primus-Turbo#252: 1.2x, where this gives up to 2x), a hand-written fp8 scaled "
    "gemm 2900+ TFLOP/s, 58% of peak (HazyResearch/HipKittens#19)"
)
_MI355X_FAMILIES = _amd(
    (0.629, _MI355X_BF16),
    (0.629, MI355X_FP8_ASSUMED),
    (0.629 * 2516.6 / 5033.2, MI355X_MX),
    fp8_assumed_as="bf16",
)
_MI_CAST = (
    "pytorch/ao#4290 (MI350X): bf16->MX cast 4.5 TB/s, 'about 55% of peak mem bw' -> copy 0.56"
)
MI355X = PartEfficiency(
    _MI355X_FAMILIES,
    0.56,
    _MI_CAST,
    (
        MI355X_FP8_ASSUMED,
        "MXFP8 modelled at bf16's throughput (an upper bound: measured slower)",
        ROWWISE_HIPBLASLT_ASSUMED,
        K_STEPS_ASSUMED + "; tiles up to 256x256 (hipBLASLt macro tiles)",
    ),
)
MI350X = PartEfficiency(
    tuple(
        replace(f, source=f"{f.source}; MI355X's: the same gfx950 die, peaks at 2.2/2.4 GHz")
        for f in _MI355X_FAMILIES
    ),
    0.56,
    _MI_CAST,
    (
        "gemm fractions are MI355X's at MI350X's clocks: no public MI350X matmul sweep",
        MI355X_FP8_ASSUMED,
        "MXFP8 modelled at bf16's throughput (an upper bound: measured slower)",
        ROWWISE_HIPBLASLT_ASSUMED,
    ),
)
