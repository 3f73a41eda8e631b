"""Times without a GPU: what a traffic calibration times the generated kernels and gemms with.

Each GPU preset's record (hardware/presets.py) holds its datasheet peaks and bandwidth and the
fractions of them its gemm families and copies reach, each with its source
(hardware/efficiency.py); a `DatasheetTiming` is that record as a timing model: gemms tiled at
the families' fractions, memory-bound kernels at floor + bytes / (bandwidth x copy fraction).
The floor, 2 us, is a one-element Triton kernel's device time on an H100 (torchao,
torchao/testing/training/roofline_utils.py, KERNEL_LAUNCH_OVERHEAD_SEC). A GPU without a record
(custom) takes H100 SXM's fractions and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from f8roof.hardware.efficiency import PartEfficiency, borrowed_from_h100
from f8roof.hardware.presets import GPU
from f8roof.timing.gemm import GEMM_DTYPES, TiledGemm

KERNEL_FLOOR_S = 2e-6


def preset_efficiency(gpu: GPU) -> PartEfficiency:
    """The efficiencies of a part's record; a GPU without one (custom) gets H100 SXM's, saying
    so."""
    return gpu.efficiency if gpu.efficiency is not None else borrowed_from_h100(gpu.name)


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
    stored = tuple((d, e) for d, e in chosen.pairs if d in GEMM_DTYPES)
    return DatasheetTiming(
        gpu,
        TiledGemm(gpu, stored, efficiency),
        efficiency,
        all_gemms=TiledGemm(gpu, chosen.pairs, efficiency),
        sources=chosen.sources,
        assumptions=chosen.assumptions,
    )
