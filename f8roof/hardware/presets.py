"""GPU presets: datasheet ceilings, matched by the device name torch reports.

Peaks are dense (no 2:4 sparsity) FLOP/s and HBM bandwidth from the vendors' datasheets; every
preset lists its own `sources`, and `notes` say what no datasheet gives (an assumed SM count, a
power cap a benchmark names without a datasheet of its own). NVIDIA publishes most Blackwell
figures per 8-GPU system and with sparsity: dense per GPU = the system figure / 8 / 2.
AMD's peaks follow from clock x CUs x FLOP per CU per clock (MI300X: 2.1 GHz x 304 x 2048
bf16; MI355X: 2.4 GHz x 256 x 4096 bf16, 8192 fp8, 16384 fp4; ISSCC 2026 via
news.lavx.hu: 8192 fp8 FLOP per CU per clock on CDNA 4).

Each preset is one record of everything f8roof knows about the part: its datasheet, clocks and
power, its fabric (hardware/fabric.py), its gemm and copy fractions with their sources
(hardware/efficiency.py), the shipped calibration it reads and which public time model times
it. A power-limited part (`h100@500w`, `b200-750w`) is its preset's record by one rule
(`power_limited`). What a part can run (MX, blockwise, rowwise gemms) lives in
hardware/support.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from f8roof.errors import ModelError, term
from f8roof.hardware import efficiency, fabric
from f8roof.hardware.efficiency import PartEfficiency
from f8roof.hardware.fabric import Fabric, NoFabric

TERA = 1e12
GB = 1e9


class UnknownGPUError(ModelError):
    pass


class Vendor(str, Enum):
    NVIDIA = "nvidia"
    AMD = "amd"


class PublicModel(str, Enum):
    """Which public time model (scripts/public_fit.py) times the part: fitted on Hopper
    (the heatmap's part and its datasheet kin), transferred to Blackwell by its datasheet and
    checked on one published kernel, or none."""

    HOPPER_FIT = "hopper_fit"
    BLACKWELL_TRANSFER = "blackwell_transfer"
    NONE = "none"


@dataclass(frozen=True)
class Shipped:
    """The traffic calibration a preset ships (calibration/data/`file`): the bytes of the code
    Inductor generates for `code_from` (the build script's `--gpu`), which the build generates
    again for this part and compares where `checked`."""

    file: str
    code_from: str
    checked: bool = False


class Float8Family(str, Enum):
    """Which float8 encodings the part's gemms take. OCP: float8_e4m3fn / float8_e5m2 (NVIDIA,
    MI355X). FNUZ: float8_e4m3fnuz / float8_e5m2fnuz (MI300X/MI325X, gfx942: torch's
    `_scaled_mm_is_fnuz`, aten/src/ATen/native/cuda/ScaledBlas.cpp); same bytes, other bias."""

    OCP = "ocp"
    FNUZ = "fnuz"

    @property
    def dtypes(self) -> tuple[str, str]:
        """torch dtype names of (e4m3, e5m2) in this family."""
        if self is Float8Family.FNUZ:
            return ("float8_e4m3fnuz", "float8_e5m2fnuz")
        return ("float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_flops: float  # dense peak, FLOP/s
    fp8_flops: float  # dense peak, FLOP/s (tensorwise and rowwise scaled gemms)
    memory_bandwidth_bytes_per_s: float
    device_prefixes: tuple[str, ...] = ()
    sm_count: int = 132  # SMs (NVIDIA) or CUs (AMD)
    compute_capability: tuple[int, int] = (9, 0)  # what torch reports; gfx942 -> (9, 4)
    memory_bytes: int = 80 * 2**30
    # Everything below is keyword-only in spirit: added for Blackwell and AMD (issue #20).
    mx_flops: float | None = None  # MXFP8 dense peak, FLOP/s; None: no MX gemms
    fp4_flops: float | None = None  # MXFP4/NVFP4 dense peak, FLOP/s; None: none or unknown
    vendor: Vendor = Vendor.NVIDIA
    gfx_arch: str | None = None  # AMD LLVM target (gfx942, gfx950)
    fp8_dtype_family: Float8Family = Float8Family.OCP
    power_w: int | None = None  # board power the ceilings (and gemm fractions) belong to
    # The SMs' maximum clock (a power cap lowers the clock gemms sustain, not this one, which
    # memory-bound and fused elementwise kernels run at); None where no source gives it.
    sm_clock_hz: float | None = None
    # the preset whose generated code this part runs: the same SMs and compute capability, all
    # Inductor's heuristics read (b200's die at 750 W; the NVL boards of H100 and H200), so it
    # reads that preset's shipped bytes and times them by its own datasheet
    code_of: str | None = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # The GPU-to-GPU fabric and network (NoFabric: a part sold without one, with why); None for a
    # GPU f8roof has no record of (custom)
    fabric: Fabric | NoFabric | None = None
    # gemm and copy fractions with their sources; None: a custom GPU (H100 SXM's, saying so)
    efficiency: PartEfficiency | None = None
    shipped: Shipped | None = None  # the file this preset ships; others read their silicon's
    public_model: PublicModel = PublicModel.NONE
    limited_from: str | None = None  # the preset this part is at a power limit of

    def __post_init__(self) -> None:
        for field in ("bf16_flops", "fp8_flops", "memory_bandwidth_bytes_per_s"):
            value = getattr(self, field)
            if not (0 < value < math.inf):
                raise UnknownGPUError(
                    f"GPU {self.name!r}: {field} must be a positive finite number, got {value}"
                )
        for field in ("mx_flops", "fp4_flops"):
            value = getattr(self, field)
            if value is not None and not (0 < value < math.inf):
                raise UnknownGPUError(
                    f"GPU {self.name!r}: {field} must be None or a positive finite number"
                )
        if (self.vendor is Vendor.AMD) != (self.gfx_arch is not None):
            raise UnknownGPUError(f"GPU {self.name!r}: a gfx arch goes with AMD parts only")
        if self.fp8_dtype_family is Float8Family.FNUZ and self.vendor is not Vendor.AMD:
            raise UnknownGPUError(f"GPU {self.name!r}: fnuz float8 exists on AMD parts only")

    def peak_flops(self, dtype: str) -> float:
        """Dense peak of a gemm dtype: bf16; fp8* (tensorwise, rowwise, blockwise); mxfp8;
        mxfp4 / nvfp4."""
        if dtype == "bf16":
            return self.bf16_flops
        if dtype.startswith(("mx", "nv")):
            peak = self.mx_flops if dtype == "mxfp8" else self.fp4_flops
            if peak is None:
                raise UnknownGPUError(f"GPU {self.name!r} has no {dtype} peak (no such gemms)")
            return peak
        if dtype.startswith("fp8"):
            return self.fp8_flops
        return self.bf16_flops

    @property
    def silicon(self) -> str:
        """The preset whose code this part runs: `code_of`'s (a power-limited part's preset,
        an NVL board's SXM twin), else its own."""
        return self.code_of or self.name

    @property
    def arch_label(self) -> str:
        """sm_100 / gfx942: what the support rules and the CLI name."""
        if self.gfx_arch is not None:
            return self.gfx_arch
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100)"
# The datasheets give no clock; their FP32 peak does: 67 TFLOPS = 132 SMs x 128 FP32 lanes x
# 2 (an FMA) x 1.98 GHz, on the H100 SXM and the H200 alike.
HOPPER_SXM_CLOCK = "1.98 GHz: the datasheet's FP32 67 TFLOPS / (132 SMs x 128 lanes x 2)"
# The same rule on the other boards' FP32 peaks (the H100 and H200 datasheets' PCIe and NVL
# columns): 51 TFLOPS on 114 SMs, 60 TFLOPS on 132.
HOPPER_PCIE_CLOCK = "1.748 GHz: the datasheet's FP32 51 TFLOPS / (114 SMs x 128 lanes x 2)"
HOPPER_NVL_CLOCK = "1.776 GHz: the datasheet's FP32 60 TFLOPS / (132 SMs x 128 lanes x 2)"
H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)"
DGX_B200 = (
    "NVIDIA DGX B200 datasheet (resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet): "
    "72 PF fp8 training, 144 PF fp4 (sparse) per 8 GPUs, 1,440 GB, 64 TB/s HBM3e"
)
HGX_B200 = (
    "NVIDIA HGX B200 spec (nvidia.com/en-us/data-center/hgx): per 8 GPUs 36 PF fp16/bf16, "
    "72 PF fp8/fp6 (sparse); MXFP8 runs at the fp8 rate"
)
GB200_NVL72 = (
    "NVIDIA GB200 NVL72 spec (nvidia.com/en-us/data-center/gb200-nvl72): per 72 GPUs 360 PF "
    "bf16, 720 PF fp8, 1,440 PF fp4 (sparse), 13.4 TB HBM3e at 576 TB/s; 1,200 W per GPU"
)
HGX_B300 = (
    "NVIDIA DGX/HGX B300 datasheet (resources.nvidia.com/en-us-dgx-systems/dgx-b300-datasheet):"
    " per 8 GPUs 36 PF fp16/bf16, 72 PF fp8 (sparse), 2.3 TB HBM3e, 8 TB/s per GPU"
)
BLACKWELL_ULTRA_FP4 = (
    "NVIDIA Blackwell Ultra datasheet (resources.nvidia.com/en-us-blackwell-architecture/"
    "blackwell-ultra-datasheet) as torchao 0.18 testing/training/roofline_utils.py quotes it: "
    "B300 SXM6 AC fp4 14e15 FLOP/s dense"
)
GB300_NVL72 = (
    "NVIDIA GB300 NVL72 spec (nvidia.com/en-us/data-center/gb300-nvl72): per 72 GPUs FP4 "
    "1,440 PF sparse | 1,080 PF dense, 720 PF fp8/fp6 and 360 PF fp16/bf16 (sparse), up to "
    "20 TB HBM3e at 576 TB/s, ConnectX-8 800 Gb/s per GPU; 1,400 W per GPU"
)
# NVIDIA's pages give Blackwell Ultra 13.5-15 PF dense FP4 per GPU: the B300 preset takes its
# datasheet's 14 PF (what torchao's roofline uses), GB300 its NVL72 spec's 1,080 PF / 72 = 15
# (a 1,400 W part against B300's 1,100 W).
BLACKWELL_SMS = (
    "148 SMs: 2 dies x 74 enabled SMs (chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-"
    "juggernaut-rolling); Inductor's DeviceProperties in public B200 output code: "
    "multi_processor_count=148, cc=100"
)
BLACKWELL_CLOCKS = (
    "SM clocks as CUDA reports them in public kernel notes: GB200 152 SMs at 2062 MHz, B300 "
    "148 SMs at 2032 MHz; B200 1.98 GHz, 'similar to the H100's high power SXM5 variant' "
    "(chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut-rolling) and FP32 75.0 "
    "TFLOPS = 148 SMs x 128 lanes x 2 x 1.98 GHz (hmc-tech.com B200 spec table)"
)
CC_10X = (
    "compute capability 10.0 (B200, GB200) / 10.3 (B300, GB300): TransformerEngine support "
    "matrix (nvidia.github.io/TransformerEngine/support_matrix.html); torch ScaledBlas.cpp "
    "'B200 = 10.0, B300 = 10.3'"
)
MI300X_DATASHEET = (
    "AMD Instinct MI300X data sheet (amd.com/.../amd-instinct-mi300x-data-sheet.pdf): "
    "1307.4 TF bf16, 2614.9 TF fp8 dense, 192 GB HBM3 at 5.3 TB/s, 304 CUs, 750 W, peak engine "
    "clock 2,100 MHz"
)
MI355X_SPECS = (
    "AMD Instinct MI355X specifications (amd.com/en/products/accelerators/instinct/mi350/"
    "mi355x.html): 2.5 PF fp16/bf16, 5.0 PF OCP-fp8 and MXFP8, 10.1 PF MXFP4 dense, 288 GB "
    "HBM3E at 8 TB/s, 1,400 W, 2.4 GHz"
)
MI350X_SPECS = (
    "AMD Instinct MI350X specifications (amd.com/en/products/accelerators/instinct/mi350/"
    "mi350x.html): the MI355X silicon air-cooled at 1,000 W and 2.2 GHz (Hot Chips 2025)"
)
ROCM_GPU_SPECS = (
    "ROCm GPU specifications (rocm.docs.amd.com/en/latest/reference/gpu-specs.html): "
    "MI355X/MI350X gfx950, 256 CUs, GFXIP 9.5; MI300X gfx942, 304 CUs"
)


_BASE = (
    GPU(
        "h100",
        989.4 * TERA,
        1978.9 * TERA,
        3.35 * TERA,
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", "NVIDIA H100"),
        132,
        (9, 0),
        80 * 2**30,
        power_w=700,
        sm_clock_hz=1.98e9,
        sources=(H100_DATASHEET + ": SXM column, dense = sparse / 2", HOPPER_SXM_CLOCK),
        fabric=fabric.HGX_H100,
        efficiency=efficiency.H100,
        shipped=Shipped("h100.json", "h100"),
        public_model=PublicModel.HOPPER_FIT,
    ),
    # The H100 torchao's float8 roofline script models: "2.4 TB per second, custom to Meta's
    # H100 variant" (torchao/testing/training/roofline_utils.py). No device name is known
    # for it, so it is chosen by name only.
    GPU(
        "h100-meta",
        989.4 * TERA,
        1978.9 * TERA,
        2.4 * TERA,
        (),
        132,
        (9, 0),
        95 * 2**30,
        power_w=500,
        sm_clock_hz=1.98e9,
        sources=(
            H100_DATASHEET,
            HOPPER_SXM_CLOCK + " (the same silicon)",
            "torchao/testing/training/roofline_utils.py: 2.4 TB/s, Meta's H100 variant",
            "FBGEMM#2546: benchmarks on 'H100 500W'",
            "torchtitan's asyncTP_llama3_h100_2025-06 benchmark: 'H100 (96GB HBM2e, 500W)'",
            "95 GiB as torch reports it: '47.65GiB(50.16%)' in torchtitan#808's log",
        ),
        notes=("chosen by name only: no device name is known for this variant",),
        fabric=fabric.HGX_H100,
        efficiency=efficiency.H100_META,
        shipped=Shipped("h100-meta.json", "h100"),
        public_model=PublicModel.HOPPER_FIT,
    ),
    GPU(
        "h100-pcie",
        756.0 * TERA,
        1513.0 * TERA,
        2.0 * TERA,
        ("NVIDIA H100 PCIe",),
        114,
        (9, 0),
        80 * 2**30,
        power_w=350,
        sm_clock_hz=1.748e9,
        sources=(H100_DATASHEET + ": PCIe column", HOPPER_PCIE_CLOCK),
        fabric=fabric.H100_PCIE,
        efficiency=efficiency.borrowed_from_h100("h100-pcie"),
    ),
    GPU(
        "h100-nvl",
        835.0 * TERA,
        1671.0 * TERA,
        3.9 * TERA,
        ("NVIDIA H100 NVL",),
        132,
        (9, 0),
        94 * 2**30,
        power_w=400,
        sm_clock_hz=1.776e9,
        code_of="h100",
        sources=(H100_DATASHEET + ": NVL column, 350-400 W configurable", HOPPER_NVL_CLOCK),
        fabric=fabric.H100_NVL,
        efficiency=efficiency.borrowed_from_h100("h100-nvl"),
    ),
    GPU(
        "h200",
        989.4 * TERA,
        1978.9 * TERA,
        4.8 * TERA,
        ("NVIDIA H200",),
        132,
        (9, 0),
        141 * 2**30,
        power_w=700,
        sm_clock_hz=1.98e9,
        sources=(H200_DATASHEET + ": SXM column", HOPPER_SXM_CLOCK),
        fabric=fabric.HGX_H200,
        efficiency=efficiency.H200,
        shipped=Shipped("h200.json", "h100", checked=True),
        public_model=PublicModel.HOPPER_FIT,
    ),
    GPU(
        "h200-nvl",
        835.0 * TERA,
        1671.0 * TERA,
        4.8 * TERA,
        ("NVIDIA H200 NVL",),
        132,
        (9, 0),
        141 * 2**30,
        power_w=600,
        sm_clock_hz=1.776e9,
        code_of="h100",
        sources=(H200_DATASHEET + ": NVL column, up to 600 W configurable", HOPPER_NVL_CLOCK),
        fabric=fabric.H200_NVL,
        efficiency=efficiency.borrowed_from_h100("h200-nvl"),
    ),
    GPU(
        "b200",
        2250.0 * TERA,
        4500.0 * TERA,
        8.0 * TERA,
        ("NVIDIA B200",),
        148,
        (10, 0),
        # nvidia-smi on an HGX B200: 183359 MiB (NVIDIA/TensorRT-LLM#10278)
        183359 * 2**20,
        mx_flops=4500.0 * TERA,
        fp4_flops=9000.0 * TERA,
        power_w=1000,
        sm_clock_hz=1.98e9,
        sources=(DGX_B200, HGX_B200, BLACKWELL_SMS, BLACKWELL_CLOCKS, CC_10X),
        fabric=fabric.HGX_B200,
        efficiency=efficiency.B200,
        shipped=Shipped("b200.json", "b200"),
        public_model=PublicModel.BLACKWELL_TRANSFER,
    ),
    GPU(
        "gb200",
        2500.0 * TERA,
        5000.0 * TERA,
        8.0 * TERA,
        ("NVIDIA GB200",),
        152,
        (10, 0),
        int(186 * GB),
        mx_flops=5000.0 * TERA,
        fp4_flops=10000.0 * TERA,
        power_w=1200,
        sm_clock_hz=2.062e9,
        sources=(GB200_NVL72, BLACKWELL_CLOCKS, CC_10X),
        fabric=fabric.GB200_NVL72,
        efficiency=efficiency.GB200,
        shipped=Shipped("gb200.json", "b200", checked=True),
        public_model=PublicModel.BLACKWELL_TRANSFER,
        notes=(
            (
                "152 SMs: CUDA reports 152 at 2062 MHz on a GB200 (public GB200/B300 kernel "
                "notes: 'the local GB200 has 152 SMs at 2062 MHz', B300 '148 SMs at 2032 MHz')"
            ),
        ),
    ),
    GPU(
        "b300",
        2250.0 * TERA,
        4500.0 * TERA,
        8.0 * TERA,
        ("NVIDIA B300",),  # torch: 'NVIDIA B300 SXM6 AC' (NVIDIA/cosmos-framework#114)
        148,
        (10, 3),
        int(288 * GB),
        mx_flops=4500.0 * TERA,
        fp4_flops=14000.0 * TERA,
        power_w=1100,
        sm_clock_hz=2.032e9,
        sources=(HGX_B300, BLACKWELL_ULTRA_FP4, BLACKWELL_CLOCKS, CC_10X),
        fabric=fabric.HGX_B300,
        efficiency=efficiency.B300,
        shipped=Shipped("b300.json", "b200", checked=True),
        public_model=PublicModel.BLACKWELL_TRANSFER,
        notes=(
            "148 SMs: public B300 SXM6 AC (sm_103a) microbenchmark notes, '148 SMs, 2.032 GHz'",
        ),
    ),
    GPU(
        "gb300",
        2500.0 * TERA,
        5000.0 * TERA,
        8.0 * TERA,
        ("NVIDIA GB300",),
        148,
        (10, 3),
        int(288 * GB),
        mx_flops=5000.0 * TERA,
        fp4_flops=15000.0 * TERA,
        power_w=1400,
        sm_clock_hz=2.032e9,
        sources=(GB300_NVL72, CC_10X),
        fabric=fabric.GB300_NVL72,
        efficiency=efficiency.GB300,
        shipped=Shipped("gb300.json", "b200", checked=True),
        public_model=PublicModel.BLACKWELL_TRANSFER,
        notes=(
            "148 SMs and 2032 MHz assumed: B300's (no public GB300 device query found)",
            "288 GB HBM3e per GPU: 20 TB over 72 GPUs, as B300's 2.3 TB over 8",
        ),
    ),
    GPU(
        "mi300x",
        1307.4 * TERA,
        2614.9 * TERA,
        5.3 * TERA,
        ("AMD Instinct MI300X",),  # also matches 'AMD Instinct MI300X VF' (Azure)
        304,
        (9, 4),
        192 * 2**30,
        vendor=Vendor.AMD,
        gfx_arch="gfx942",
        fp8_dtype_family=Float8Family.FNUZ,
        power_w=750,
        sm_clock_hz=2.1e9,
        sources=(MI300X_DATASHEET, ROCM_GPU_SPECS),
        fabric=fabric.MI300X_BOARD,
        efficiency=efficiency.MI300X,
        shipped=Shipped("mi300x.json", "mi300x"),
    ),
    GPU(
        "mi355x",
        2516.6 * TERA,
        5033.2 * TERA,
        8.0 * TERA,
        ("AMD Instinct MI355X",),
        256,
        (9, 5),
        288 * 2**30,  # ROCm gpu-specs: VRAM 288 GiB
        mx_flops=5033.2 * TERA,
        fp4_flops=10066.3 * TERA,
        vendor=Vendor.AMD,
        gfx_arch="gfx950",
        power_w=1400,
        sm_clock_hz=2.4e9,
        sources=(MI355X_SPECS, ROCM_GPU_SPECS),
        fabric=fabric.MI355X_BOARD,
        efficiency=efficiency.MI355X,
        shipped=Shipped("mi355x.json", "mi355x"),
    ),
    # MI350X: the same gfx950 die capped at 1,000 W (air-cooled), 2.2 GHz: every peak scales
    # by 2.2 / 2.4 (AMD publishes 2.3 PF bf16, 4.6 PF fp8, 9.2 PF fp4).
    GPU(
        "mi350x",
        2306.9 * TERA,
        4613.7 * TERA,
        8.0 * TERA,
        ("AMD Instinct MI350X",),
        256,
        (9, 5),
        288 * 2**30,  # ROCm gpu-specs: VRAM 288 GiB
        mx_flops=4613.7 * TERA,
        fp4_flops=9227.5 * TERA,
        vendor=Vendor.AMD,
        gfx_arch="gfx950",
        power_w=1000,
        sm_clock_hz=2.2e9,
        sources=(MI350X_SPECS, ROCM_GPU_SPECS),
        fabric=fabric.MI355X_BOARD,
        efficiency=efficiency.MI350X,
        shipped=Shipped("mi350x.json", "mi355x", checked=True),
    ),
)

ALIASES = {
    "h100-sxm": "h100",
    "h200-sxm": "h200",
    "b300-sxm": "b300",
    "gb200-nvl72": "gb200",
    "gb300-nvl72": "gb300",
}


@dataclass(frozen=True)
class PowerLimit:
    """A power limit `--gpu NAME@WATTSw` takes beside a preset's own, and what says parts run
    there: a cap lowers the clock gemms sustain, not the datasheet's ceilings, so the part is
    its preset's record with its gemms capped (`power_limited`). `name`: the preset name the
    limited part goes by (b200-750w), else NAME@WATTSw."""

    base: str
    watts: int
    name: str | None = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


# 500 W on the Hopper SXM parts, where the public time model has fitted power-cap ratios
# (FBGEMM's and torchao's 'H100 500W'), and the 750 W B200s torchao's training tables ran on.
POWER_LIMITS = (
    PowerLimit(
        "h100",
        500,
        sources=("FBGEMM#2546: benchmarks on 'H100 500W'",),
    ),
    PowerLimit(
        "h200",
        500,
        sources=("FBGEMM#2546: the H100's 500 W caps, on the same SMs and clocks",),
    ),
    PowerLimit(
        "b200",
        750,
        "b200-750w",
        sources=(
            "torchao/prototype/mx_formats/README.md: '8x power limited B200 GPUs'",
            "pytorch/ao#3566: 1000W vs '750W limited' B200; pytorch/helion#347: B200 750 W",
        ),
        notes=("chosen by name only: nvidia-smi reports the same 'NVIDIA B200' name",),
    ),
)


def _limited(gpu: GPU, limit: PowerLimit) -> GPU:
    """The one rule a power-limited part follows: its preset's record, renamed, at the limit's
    power, reading its preset's code, its gemm fractions capped by hardware/efficiency.py's
    `cap_ratios` (Hopper at 500 W: FBGEMM#2546's measured ratios; any other part: watts /
    rated watts, every family alike), its memory-bound kernels as its preset's (a cap lowers
    the SM clock, not the memory clock)."""
    assert gpu.efficiency is not None and gpu.power_w is not None
    hopper = gpu.vendor is Vendor.NVIDIA and gpu.compute_capability[0] == 9
    cap = efficiency.cap_ratios(watts=limit.watts, rated_w=gpu.power_w, hopper=hopper)
    return replace(
        gpu,
        name=limit.name or f"{gpu.name}@{limit.watts}w",
        power_w=limit.watts,
        device_prefixes=(),
        code_of=gpu.silicon,
        shipped=None,
        limited_from=gpu.name,
        sources=(*gpu.sources, *limit.sources),
        notes=(
            *gpu.notes,
            *limit.notes,
            f"limited to {limit.watts} W: ceilings as {gpu.name}'s, gemms capped",
        ),
        efficiency=efficiency.power_capped(gpu.efficiency, cap),
    )


def _presets() -> dict[str, GPU]:
    """Every preset by name, each named power limit right after its preset."""
    presets: dict[str, GPU] = {}
    for gpu in _BASE:
        presets[gpu.name] = gpu
        for limit in POWER_LIMITS:
            if limit.base == gpu.name and limit.name is not None:
                presets[limit.name] = _limited(gpu, limit)
    return presets


PRESETS: dict[str, GPU] = _presets()


def power_limited(gpu: GPU, watts: int) -> GPU:
    """The part at a power limit: its preset at its own power, a preset that is that limit, or
    the preset renamed `NAME@WATTSw` (`_limited`)."""
    if watts == gpu.power_w:
        return gpu
    mine = [limit for limit in POWER_LIMITS if limit.base == gpu.name]
    limit = next((limit for limit in mine if limit.watts == watts), None)
    if limit is None:
        known = [f"{gpu.name}@{limit.watts}w" for limit in mine]
        raise UnknownGPUError(
            f"no model of {gpu.name} at {watts} W; power limits known: "
            f"{', '.join(known) or 'none'} (and its own, {gpu.power_w} W)"
        )
    if limit.name is not None:
        return PRESETS[limit.name]
    return _limited(gpu, limit)


def every_part() -> tuple[GPU, ...]:
    """Every preset, then every power-limited part f8roof accepts under a NAME@WATTSw name."""
    unnamed = (
        power_limited(PRESETS[limit.base], limit.watts)
        for limit in POWER_LIMITS
        if limit.name is None
    )
    return (*PRESETS.values(), *unnamed)


def find_gpu(name: str) -> GPU:
    """A preset by name, alias, or device name (longest matching prefix wins); `NAME@WATTSw`
    the preset at a power limit (`power_limited`)."""
    base, at, limit = name.strip().lower().partition("@")
    if at:
        watts = limit.removesuffix("w").strip()
        # ASCII digits only: str.isdigit takes '²' (int() then fails) and int() takes '٥٠٠'
        if not (watts.isascii() and watts.isdigit()):
            raise UnknownGPUError(
                f"{term('gpu')} {name!r}: bad power limit; expected NAME@WATTSw, "
                "watts in ASCII digits (h100@500w)"
            )
        return power_limited(find_gpu(base), int(watts))
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key in PRESETS:
        return PRESETS[key]
    matches = [
        (len(prefix), gpu)
        for gpu in PRESETS.values()
        for prefix in gpu.device_prefixes
        if name.strip().lower().startswith(prefix.lower())
    ]
    if matches:
        return max(matches, key=lambda m: m[0])[1]
    raise UnknownGPUError(
        f"unknown GPU {name!r}; known: {', '.join(PRESETS)} (or custom:bf16=..,fp8=..,bandwidth=..)"
    )


CUSTOM_KEYS = frozenset({"bf16", "fp8", "bandwidth"})


def custom_gpu(spec: str) -> GPU:
    """'custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12' -> GPU (FLOP/s, bytes/s)."""
    _, _, body = spec.partition(":")
    values: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, sep, value = item.partition("=")
        if not value.isascii():  # float() takes other scripts' digits ('١e15')
            raise UnknownGPUError(f"bad custom GPU item {item!r}; expected key=number")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise UnknownGPUError(f"bad custom GPU item {item!r}; expected key=number") from None
        if not sep:
            raise UnknownGPUError(f"bad custom GPU item {item!r}; expected key=number")
    unknown = set(values) - CUSTOM_KEYS
    if unknown:
        raise UnknownGPUError(
            f"unknown custom GPU item(s) {', '.join(sorted(unknown))}; "
            "custom takes bf16, fp8 (FLOP/s) and bandwidth (bytes/s)"
        )
    missing = CUSTOM_KEYS - set(values)
    if missing:
        raise UnknownGPUError(f"custom GPU needs {', '.join(sorted(missing))} (FLOP/s, bytes/s)")
    return GPU("custom", values["bf16"], values["fp8"], values["bandwidth"])


def resolve_gpu(spec: str) -> GPU:
    return custom_gpu(spec) if spec.lower().startswith("custom:") else find_gpu(spec)
