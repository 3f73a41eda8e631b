"""Times without a GPU: what a traffic calibration times the generated kernels and gemms with.

Each GPU preset gets a `DatasheetTiming`: its datasheet peaks (hardware/presets.py) and
bandwidth, scaled by fractions measured on such GPUs by others and published. None of these
numbers comes from a float8 linear's measured speedup (what f8roof is judged against).

Memory-bound kernels: time = `kernel_floor_s` + bytes / (bandwidth x `memory_efficiency`).
- floor 2 us: a one-element Triton kernel's device time on an H100 (torchao,
  torchao/testing/training/roofline_utils.py, KERNEL_LAUNCH_OVERHEAD_SEC).
- H100 SXM: a device copy reaches 2.90 of 3.35 TB/s (0.87; Azure NDv5 benchmark results);
  H200 SXM: 4.01-4.19 of 4.8 TB/s in Azure's published ND H200 v5 results, so 0.85 (4.1).
  Nobody in this project has measured the copy bandwidth of the H200 it is lent (an earlier
  version cited 0.90 as measured there: it was not).
  These are one efficiency for every kernel; `timing/kernel_classes.py` gives each kernel
  class its own range around them (the band).

Gemms: `TiledGemm` (waves of output tiles over the SMs). Parameters fitted to public sweeps of
stock 700 W H100 SXM parts:
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
  FBGEMM#2764: 0-10% slower), tiles 64x128 or 128x128 as RowwiseScaledMM.cu picks them.
H200 SXM: the same compute as H100 SXM (same SMs and clocks; stas00's ml-engineering MAMF
table finds bf16 identical). H100/H200 blockwise gemms (1x128 x 128x128 scales): 0.77 of the
rowwise fraction (FBGEMM#2546, H100 500W, 8192^3: block gemm 870 vs row gemm 1126 TFLOP/s;
65536x8192x7168: 828 vs 1083), from FBGEMM's CUTLASS kernels where torch runs cuBLAS 12.9's
(an assumption). The PCIe and NVL presets reuse H100 SXM's fractions, and say so.

Blackwell and AMD presets (issue #20): `PRESET_EFFICIENCIES` below, each with its sources and
the assumptions it makes. Peak fractions are fitted to stas00's ml-engineering "Maximum
Achievable Matmul FLOPS" table (compute/accelerator/README.md, 2026-08; mamf-finder: torch.mm
or torch._scaled_mm, mean of 100 runs, best of a shape search): the fraction at which the tiled
model's maximum over the published best shape and the 4096..16384 cubes equals the published
MAMF. The same rule applied to H100 SXM gives bf16 0.818 and fp8 0.719 against the sweep-fitted
0.84 and 0.70 above, so the two ways agree within 3%. K-step overheads and latencies are H100's
(no public small-shape sweep of these parts separates them): an assumption every one of them
states.

`h100-meta` is the H100 that torchao's own roofline script models ("2.4 TB per second, custom
to Meta's H100 variant", pointwise Triton kernels reaching 2.2 TB/s, i.e. 0.92). Meta's FBGEMM
benchmarks name their H100 "500W" (FBGEMM#2546: bf16 8192^3 585 TFLOP/s, 0.73x a 700 W part;
fp8 about 0.87x): we assume that power cap for this variant and scale the gemm fractions so.
"""

from __future__ import annotations

from dataclasses import dataclass

from f8roof.hardware.presets import GPU
from f8roof.timing.gemm import GEMM_DTYPES, GemmEfficiency, TiledGemm

KERNEL_FLOOR_S = 2e-6
LARGE_TILES = ((128, 128), (128, 256), (256, 128))
ROWWISE_TILES = ((64, 128), (128, 128))

BF16 = GemmEfficiency(0.84, 192, 3e-6, LARGE_TILES)
FP8 = GemmEfficiency(0.70, 128, 4e-6, LARGE_TILES)
FP8_ROWWISE = GemmEfficiency(0.70 * 0.95, 128, 4e-6, ROWWISE_TILES)
# Meta's 500 W H100: gemm throughput relative to a 700 W part (FBGEMM#2546), see above.
POWER_CAPPED = {"bf16": 0.73, "fp8": 0.87, "fp8_rowwise": 0.87}

MEMORY_EFFICIENCY = {"h100": 0.87, "h200": 0.85, "h100-meta": 0.92}
DEFAULT_MEMORY_EFFICIENCY = 0.87


FP8_BLOCKWISE = GemmEfficiency(0.70 * 0.95 * 0.77, 128, 4e-6, ROWWISE_TILES)

# AMD: hipBLASLt's macro tiles reach 256x256 (its kernel names, e.g. MT256x256x64); an
# assumption of this model, as the NVIDIA tiles are.
AMD_TILES = (*LARGE_TILES, (256, 256))

MAMF = (
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS "
    "table (mamf-finder.py)"
)
K_STEPS_ASSUMED = (
    "K-step overheads and latencies are H100 SXM's (192/128 K-steps, 3/4 us): no public "
    "small-shape sweep of this part"
)
ROWWISE_ASSUMED = (
    "rowwise = 0.95 x tensorwise, H100's ratio (pytorch/pytorch#147971): no public rowwise "
    "sweep of this part"
)
ROWWISE_HIPBLASLT_ASSUMED = "rowwise (hipBLASLt) = tensorwise: no public rowwise sweep of this part"
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


@dataclass(frozen=True)
class PresetEfficiency:
    """How one preset's kernels approach its datasheet: gemm families by dtype, the copy
    fraction of memory-bound kernels, and where each number comes from or what it assumes
    (`f8roof gpus` shows both)."""

    families: tuple[tuple[str, GemmEfficiency], ...]
    memory_efficiency: float
    sources: tuple[str, ...]
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.memory_efficiency <= 1:
            raise ValueError(f"memory efficiency must be in (0, 1], got {self.memory_efficiency}")
        if not self.sources:
            raise ValueError("a preset efficiency cites at least one source")


def _nvidia(bf16: float, fp8: float, *, mxfp8: float | None, nvfp4: float | None = None) -> tuple:
    families = [
        ("bf16", GemmEfficiency(bf16, 192, 3e-6, LARGE_TILES)),
        ("fp8", GemmEfficiency(fp8, 128, 4e-6, LARGE_TILES)),
        ("fp8_rowwise", GemmEfficiency(fp8 * 0.95, 128, 4e-6, ROWWISE_TILES)),
    ]
    if mxfp8 is not None:
        families.append(("mxfp8", GemmEfficiency(mxfp8, 128, 4e-6, LARGE_TILES)))
    if nvfp4 is not None:  # fp8's K-steps and latency (no public small-shape sweep of its own)
        families.append(("nvfp4", GemmEfficiency(nvfp4, 128, 4e-6, LARGE_TILES)))
    return tuple(families)


def _amd(bf16: float, fp8: float, *, mxfp8: float | None) -> tuple:
    families = [
        ("bf16", GemmEfficiency(bf16, 192, 3e-6, AMD_TILES)),
        ("fp8", GemmEfficiency(fp8, 128, 4e-6, AMD_TILES)),
        ("fp8_rowwise", GemmEfficiency(fp8, 128, 4e-6, AMD_TILES)),
    ]
    if mxfp8 is not None:
        # modelled at bf16's throughput (pytorch/ao#4290), so with bf16's K-steps and latency
        families.append(("mxfp8", GemmEfficiency(mxfp8, 192, 3e-6, AMD_TILES)))
    return tuple(families)


def _capped(families: tuple, ratios: dict[str, float]) -> tuple:
    return tuple(
        (dtype, GemmEfficiency(e.peak_fraction * ratios[dtype], e.k_overhead, e.latency_s, e.tiles))
        for dtype, e in families
    )


_H100_FAMILIES = (
    ("bf16", BF16),
    ("fp8", FP8),
    ("fp8_rowwise", FP8_ROWWISE),
    ("fp8_blockwise", FP8_BLOCKWISE),
)
_H100_SOURCES = (
    "openxla sm_90 matmul perf table; zzc0721/torch-performance-test-data#79 (bf16)",
    "Azure superbench cublaslt fp8 sweep on NDv5 (fp8)",
    "pytorch/pytorch#147971, FBGEMM#2764 (rowwise); FBGEMM#2546 (blockwise)",
    "Azure NDv5 benchmark results: device copy 2.90 of 3.35 TB/s",
)
_B200 = _nvidia(0.787, 0.772, mxfp8=0.772 * 0.991, nvfp4=B200_NVFP4)
_MI355X = _amd(0.629, 0.629, mxfp8=0.629 * 2516.6 / 5033.2)

PRESET_EFFICIENCIES: dict[str, PresetEfficiency] = {
    "h100": PresetEfficiency(_H100_FAMILIES, MEMORY_EFFICIENCY["h100"], _H100_SOURCES),
    "h200": PresetEfficiency(
        _H100_FAMILIES,
        MEMORY_EFFICIENCY["h200"],
        (*_H100_SOURCES[:3], "copy: see the module docstring (H200 SXM)"),
        ("gemm fractions are H100 SXM's: same SMs and clocks (stas00 MAMF: bf16 identical)",),
    ),
    "h100-meta": PresetEfficiency(
        _capped(_H100_FAMILIES, {**POWER_CAPPED, "fp8_blockwise": POWER_CAPPED["fp8"]}),
        MEMORY_EFFICIENCY["h100-meta"],
        (
            "FBGEMM#2546: H100 500W bf16 585 TFLOP/s at 8192^3 (0.73 of a 700 W part)",
            "torchao roofline_utils.py: pointwise Triton kernels reach 2.2 of 2.4 TB/s",
        ),
        ("500 W power cap assumed from FBGEMM's 'H100 500W' benchmarks",),
    ),
    "b200": PresetEfficiency(
        _B200,
        0.69,
        (
            (
                f"{MAMF}: B200 bf16 1745.0 TFLOP/s at 1792x16128x3072 (MxNxK), torch 2.7.1+cu128 "
                "-> 0.787"
            ),
            f"{MAMF}: B200 fp8 3432.5 TFLOP/s at 15360x4096x3072 -> 0.772",
            MX_RATIO,
            NVFP4_SWEEP,
            B200_COPY,
        ),
        (
            K_STEPS_ASSUMED,
            ROWWISE_ASSUMED,
            (
                "cuBLAS 13.1 reaches 3858 TFLOP/s MXFP8 at 8192^3 (triton-lang/triton#9044); this "
                "model, fitted to cuBLAS 12.8-era sweeps, gives less"
            ),
            (
                "NVFP4 gemms at or below 3072^3 run slower than this model says (pytorch/ao#2427: "
                "2048^3 1.68 PFLOP/s, the model 2.21)"
            ),
        ),
    ),
    "b200-750w": PresetEfficiency(
        _capped(
            _B200, {"bf16": 0.73, "fp8": 0.87, "fp8_rowwise": 0.87, "mxfp8": 0.87, "nvfp4": 0.87}
        ),
        0.69,
        (
            "b200's fractions (see b200)",
            "FBGEMM#2546: H100 500W vs 700 W gemm throughput (bf16 0.73, fp8 0.87)",
            B200_COPY,
        ),
        (
            (
                "no public gemm sweep of a 750 W B200: the H100 500 W/700 W throughput ratios "
                "(a similar 0.71 vs 0.75 power ratio) are applied to b200's fractions"
            ),
            K_STEPS_ASSUMED,
            ROWWISE_ASSUMED,
        ),
    ),
    "gb200": PresetEfficiency(
        _nvidia(0.739, 0.731, mxfp8=0.731 * 0.991, nvfp4=0.731 * NVFP4_TO_FP8),
        0.69,
        (
            f"{MAMF}: GB200 bf16 1822.0 TFLOP/s at 4096x9728x2048, torch 2.10 dev +cu130 -> 0.739",
            f"{MAMF}: GB200 fp8 3615.6 TFLOP/s at 19456x5120x1536 -> 0.731",
            MX_RATIO,
        ),
        (
            "MXFP8/fp8 ratio is B200's (same GPU and cuBLAS kernels)",
            "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB200 copy measurement)",
            K_STEPS_ASSUMED,
            ROWWISE_ASSUMED,
            NVFP4_RATIO,
        ),
    ),
    "b300": PresetEfficiency(
        _nvidia(0.798, 0.754, mxfp8=0.754 * 0.991, nvfp4=0.754 * NVFP4_TO_FP8),
        0.69,
        (
            f"{MAMF}: B300 bf16 1769.0 TFLOP/s at 12288x18432x1024, torch 2.9.1+cu130 -> 0.798",
            f"{MAMF}: B300 fp8 3353.3 TFLOP/s at 3072x6144x7168 -> 0.754",
            MX_RATIO,
        ),
        (
            "MXFP8/fp8 ratio is B200's (no public B300 MXFP8 sweep)",
            "copy 0.69 is B200's (same 8 TB/s HBM3e; no public B300 copy measurement)",
            K_STEPS_ASSUMED,
            ROWWISE_ASSUMED,
            NVFP4_RATIO,
        ),
    ),
    "gb300": PresetEfficiency(
        _nvidia(0.798, 0.754, mxfp8=0.754 * 0.991, nvfp4=0.754 * NVFP4_TO_FP8),
        0.69,
        ("b300's (see b300): the same Blackwell Ultra silicon",),
        (
            (
                "gemm fractions are B300's (no public GB300 sweep); GB300 runs at 1,400 W "
                "against B300's 1,100 W, so its gemms may sustain more"
            ),
            "copy 0.69 is B200's (same 8 TB/s HBM3e; no public GB300 copy measurement)",
            K_STEPS_ASSUMED,
            ROWWISE_ASSUMED,
            NVFP4_RATIO,
        ),
    ),
    "mi300x": PresetEfficiency(
        _amd(0.518, 0.367, mxfp8=None),
        0.56,
        (
            (
                f"{MAMF}: MI300X bf16 668.4 TFLOP/s at 10240x15360x8192, torch 2.5.1 ROCm 6.3, "
                "PYTORCH_TUNABLEOP_ENABLED=1 -> 0.518"
            ),
            "ROCm/hipBLASLt#1721: hipblaslt-bench f8 907 TFLOP/s at 8192^3 -> 0.367",
        ),
        (
            (
                "fp8 from one hipBLASLt point whose reporter fixed a 1005 MHz clock: stock parts "
                "may run fp8 faster"
            ),
            ROWWISE_HIPBLASLT_ASSUMED,
            (
                "copy 0.56 is MI350X's Triton cast kernel (pytorch/ao#4290): no public MI300X "
                "measurement of a Triton elementwise kernel"
            ),
            K_STEPS_ASSUMED + "; tiles up to 256x256 (hipBLASLt macro tiles)",
        ),
    ),
    "mi355x": PresetEfficiency(
        _MI355X,
        0.56,
        (
            (
                f"{MAMF}: MI355X bf16 1565.0 TFLOP/s at 12288x8192x8192, torch 2.8 ROCm 7.0.2 "
                "-> 0.629 of 2516.6"
            ),
            (
                "pytorch/ao#4290 (MI350X): MXFP8 F.scaled_mm 'consistently slower than bf16'; "
                "bf16->MX cast 4.5 TB/s, 'about 55% of peak mem bw'"
            ),
        ),
        (
            "fp8 = bf16's fraction: no public MI355X fp8 gemm sweep",
            "MXFP8 modelled at bf16's throughput (an upper bound: measured slower)",
            ROWWISE_HIPBLASLT_ASSUMED,
            K_STEPS_ASSUMED + "; tiles up to 256x256 (hipBLASLt macro tiles)",
        ),
    ),
    "mi350x": PresetEfficiency(
        _MI355X,
        0.56,
        (
            "mi355x's fractions (same gfx950 die; peaks already scaled by 2.2/2.4 GHz)",
            "pytorch/ao#4290 (MI350X): MXFP8 slower than bf16; bf16->MX cast 4.5 of 8 TB/s",
        ),
        (
            "gemm fractions are MI355X's at MI350X's clocks: no public MI350X matmul sweep",
            "MXFP8 modelled at bf16's throughput (an upper bound: measured slower)",
            ROWWISE_HIPBLASLT_ASSUMED,
        ),
    ),
}


def preset_efficiency(gpu: GPU) -> PresetEfficiency:
    """The efficiencies of a preset; any other GPU (PCIe/NVL parts, custom) gets H100 SXM's,
    saying so."""
    found = PRESET_EFFICIENCIES.get(gpu.name)
    if found is not None:
        return found
    return PresetEfficiency(
        _H100_FAMILIES,
        MEMORY_EFFICIENCY.get(gpu.name, DEFAULT_MEMORY_EFFICIENCY),
        _H100_SOURCES,
        (f"{gpu.name}: H100 SXM's gemm and copy fractions, unverified for this part",),
    )


@dataclass(frozen=True)
class DatasheetTiming:
    gpu: GPU
    gemm: TiledGemm  # the families a calibration file stores (gemm.GEMM_DTYPES)
    memory_efficiency: float
    kernel_floor_s: float = KERNEL_FLOOR_S
    all_gemms: TiledGemm | None = None  # every family the preset runs (mxfp8, fp8_blockwise)
    sources: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()

    @property
    def kernel_bandwidth_bytes_per_s(self) -> float:
        return self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency


def datasheet_timing(gpu: GPU) -> DatasheetTiming:
    """The datasheet model of a GPU preset (or a custom GPU, with H100 SXM's fractions)."""
    chosen = preset_efficiency(gpu)
    efficiency = chosen.memory_efficiency
    stored = tuple((d, e) for d, e in chosen.families if d in GEMM_DTYPES)
    return DatasheetTiming(
        gpu,
        TiledGemm(gpu, stored, efficiency),
        efficiency,
        all_gemms=TiledGemm(gpu, chosen.families, efficiency),
        sources=chosen.sources,
        assumptions=chosen.assumptions,
    )
