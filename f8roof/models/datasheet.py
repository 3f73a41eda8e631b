"""Times without a GPU: what a traffic calibration times the generated kernels and gemms with.

Each GPU preset gets a `DatasheetTiming`: its datasheet peaks (models/hardware.py) and
bandwidth, scaled by fractions measured on such GPUs by others and published. None of these
numbers comes from a float8 linear's measured speedup (what f8roof is judged against).

Memory-bound kernels: time = `kernel_floor_s` + bytes / (bandwidth x `memory_efficiency`).
- floor 2 us: a one-element Triton kernel's device time on an H100 (torchao,
  torchao/testing/training/roofline_utils.py, KERNEL_LAUNCH_OVERHEAD_SEC).
- H100 SXM: a device copy reaches 2.90 of 3.35 TB/s (0.87; Azure NDv5 benchmark results);
  H200 SXM: 4.01-4.19 of 4.8 TB/s in Azure's published ND H200 v5 results, so 0.85 (4.1).
  Nobody in this project has measured the copy bandwidth of the H200 it is lent (an earlier
  version cited 0.90 as measured there: it was not).
  These are one efficiency for every kernel; `models/kernel_classes.py` gives each kernel
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
table finds bf16 identical). Other presets (PCIe, NVL, B200, MI300X) reuse these fractions
unverified; `f8roof gpus` lists them, and a measured calibration is the answer there.

`h100-meta` is the H100 that torchao's own roofline script models ("2.4 TB per second, custom
to Meta's H100 variant", pointwise Triton kernels reaching 2.2 TB/s, i.e. 0.92). Meta's FBGEMM
benchmarks name their H100 "500W" (FBGEMM#2546: bf16 8192^3 585 TFLOP/s, 0.73x a 700 W part;
fp8 about 0.87x): we assume that power cap for this variant and scale the gemm fractions so.
"""

from __future__ import annotations

from dataclasses import dataclass

from f8roof.models.gemm import GemmEfficiency, TiledGemm
from f8roof.models.hardware import GPU

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


@dataclass(frozen=True)
class DatasheetTiming:
    gpu: GPU
    gemm: TiledGemm
    memory_efficiency: float
    kernel_floor_s: float = KERNEL_FLOOR_S

    @property
    def kernel_bandwidth_bytes_per_s(self) -> float:
        return self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency


def datasheet_timing(gpu: GPU) -> DatasheetTiming:
    """The datasheet model of a GPU preset (or a custom GPU, with H100 SXM's fractions)."""
    efficiency = MEMORY_EFFICIENCY.get(gpu.name, DEFAULT_MEMORY_EFFICIENCY)
    families = {"bf16": BF16, "fp8": FP8, "fp8_rowwise": FP8_ROWWISE}
    if gpu.name == "h100-meta":
        families = {
            dtype: GemmEfficiency(
                e.peak_fraction * POWER_CAPPED[dtype], e.k_overhead, e.latency_s, e.tiles
            )
            for dtype, e in families.items()
        }
    gemm = TiledGemm(gpu, tuple(families.items()), efficiency)
    return DatasheetTiming(gpu, gemm, efficiency)
