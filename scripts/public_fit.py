"""Fit the public time model (`timing/public_times.py`) to published measurements, and check it.

Data (all in the repository, each row with its source):
- cells: torchao's rowwise heatmap (LayerNorm -> Linear -> Sigmoid forward + backward speedups,
  `data/published/linear_rowwise_heatmap_h100.csv`), each cell timed from the exact kernels
  torch.compile generates for it (`data/codegen/heatmap_h100.jsonl`);
- gemms: bf16 and float8 gemm times (`data/published/gemms_*.csv`), the rows whose part, kernel
  and accumulation are known (`gemm_rows` says which are left out and why);
- kernels: published copy efficiencies of memory-bound kernels (`kernels_h100.csv`).

Which part each source ran on: the heatmap, pytorch/ao#940, FBGEMM#2546 and float8_experimental
on Meta's 500 W, 2.4 TB/s H100 (`h100-meta`): #940's bf16 at 16384^3 runs 585 TFLOP/s, FBGEMM's
"H100 500W" figure, against 790-800 on 700 W SXM parts (zzc0721#79, OpenXLA), and torchao's own
roofline script models that variant; Azure, OpenXLA and zzc0721 on 700 W H100 SXM (`h100`),
Azure on H200s; ao#2427, vllm and TransformerEngine on B200 and B300; a fork of Azure's guide on
MI300X. One parameterisation serves every part (`part_times`, `part_gemms`): fractions of its
own datasheet bandwidth and peaks, FP32-lane cycles per SM per clock times its SMs and clock, a
factor per architecture on the gemm fractions, a power-cap ratio per dtype at 500 W.

Residuals are logs (speedups and times span decades): log(predicted / measured), beside one
residual per parameter holding it at a cited prior (`PARAMETERS`) where the data do not
determine it; the minimum is then unique (`conditioning` says how well the data determine each
parameter) and the values are rounded to 4 significant digits.
Cross-validation: 10 folds over the cells (cell i in fold i mod 10, cells sorted by shape),
each predicted by a fit without its fold; every source left out in turn; every part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from f8roof.errors import ModelError
from f8roof.hardware.efficiency import NVFP4_TO_FP8, GemmEfficiency, cap_ratios
from f8roof.hardware.presets import GPU, PublicModel, every_part, find_gpu
from f8roof.timing.band import speedup_bound, widened
from f8roof.timing.gemm import GemmRole, TiledGemm, linear_gemm_times
from f8roof.timing.public_times import (
    CROSS_VALIDATED_PART,
    FITTED_CLASSES,
    FP4_FAMILY,
    TIED_CLASSES,
    TILES,
    ParameterRange,
    PartTimes,
    PublicTimes,
)
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Implementation

DATA = Path("data")
HEATMAP = DATA / "published" / "linear_rowwise_heatmap_h100.csv"
CELLS = DATA / "codegen" / "heatmap_h100.jsonl"
MX_CAST_CODE = DATA / "codegen" / "mx_cast_b200.json"
FOLDS = 10
SOURCE_ROWS = 20
RESIDUAL_QUANTILES = (0.05, 0.95)
# ao#940's float8 rows ran `_scaled_mm` on zero-filled operands, its bf16 reference on randn
# (torchao's benchmarks/float8/bench_matmul.py at dec0313). Zeros flip fewer bits, draw less
# power and so keep a power-capped part's clock higher: cuBLAS's bf16 8192^3 gemm on an A100 runs
# 295 TFLOP/s on zeros and 257 on randn (Horace He, "Strangely, Matrix Multiplications on GPUs
# Run Faster When Given 'Predictable' Data!", thonking.ai, 2024), the one published size of the
# effect. Those rows are read as that much faster than the real data the model times; a 500 W
# H100 is at least as power-bound as that A100 (bf16 at 59-67% of peak), so this is the least
# the effect can be.
ZERO_DATA_SPEEDUP = 295 / 257
ZERO_DATA_SOURCE = "ao#940"


@dataclass(frozen=True)
class Parameter:
    """A fitted parameter: its physical bounds and a prior (value, width) it is held at where
    the data do not determine it (`fit` adds (x - prior) / width x PRIOR_SCALE as a residual)."""

    name: str
    prior: float
    width: float
    low: float
    high: float
    unit: str
    what: str
    why: str  # what bounds it and where the prior comes from


# A data residual is a log error; the heatmap's cross-validated error is about 5%, so a parameter
# one prior width off its prior costs as much as one cell missed by 5%: 144 cells and 200 gemm
# rows outweigh it wherever they act, and it holds a parameter the data leave free.
PRIOR_SCALE = 0.05
# A parameter is determined by the data where they narrow its prior at least twofold (its
# posterior standard deviation below half the prior width); else it is held by its prior.
DETERMINED = 0.5

# The fitted parameters: prior, width, physical bounds, and why.
PARAMETERS = (
    Parameter(
        "pointwise",
        0.85,
        0.15,
        0.3,
        1.0,
        "of HBM",
        "pointwise kernels",
        "a fraction of HBM; streaming copies reach 0.87-0.92 (Azure copy, torchao roofline_utils)",
    ),
    Parameter(
        "pointwise_transpose",
        0.7,
        0.2,
        0.05,
        1.0,
        "of HBM",
        "pointwise kernels, 2D-tiled",
        "a fraction of HBM; a tiled transpose loses some of a copy's rate to its tile edges",
    ),
    Parameter(
        "reduction_inner",
        0.8,
        0.2,
        0.05,
        1.0,
        "of HBM",
        "row reductions (norms, row amax)",
        "a fraction of HBM; a looped row reduction streams as a copy, less its loop tails",
    ),
    Parameter(
        "reduction_persistent",
        0.8,
        0.2,
        0.05,
        1.0,
        "of HBM",
        "one-program-per-row reductions",
        "a fraction of HBM; one program per row streams as a copy, less its occupancy",
    ),
    Parameter(
        "reduction_split",
        0.6,
        0.2,
        0.05,
        1.0,
        "of HBM",
        "split and column reductions",
        "a fraction of HBM; two passes and partial sums cost a split reduction some of it",
    ),
    Parameter(
        "scattered",
        16.0,
        16.0,
        0.0,
        32.0,
        "B/element",
        "traffic of a strided access",
        "0 if the caches merge every sector, 32 (one sector) if none; prior half-way",
    ),
    Parameter(
        "reread",
        0.5,
        0.5,
        0.0,
        1.0,
        "of a byte",
        "a row loaded again in a later loop",
        "0 if the row is still in cache, 1 if read again from HBM; prior half-way",
    ),
    Parameter(
        "arithmetic",
        32.0,
        32.0,
        4.0,
        128.0,
        "lane/SM/clk",
        "a kernel's arithmetic in FP32-lane cycles per SM per clock (x SMs x clock: each "
        "part's rate; hardware/instruction_costs weighs each operation)",
        "at most an SM's 128 FP32 lanes; Triton's index and mask work shares the lanes, so a "
        "quarter of them a priori",
    ),
    Parameter(
        "floor_us",
        3.0,
        2.0,
        1.0,
        6.0,
        "us",
        "an empty kernel's time",
        "2 us: a one-element Triton kernel on an H100 (torchao roofline_utils); 6 us a launch "
        "gap's upper end",
    ),
    Parameter(
        "bf16_peak",
        0.8,
        0.1,
        0.3,
        1.0,
        "of peak",
        "bf16 gemms, 700 W",
        "of the dense peak; cuBLAS runs 790-800 of 989 TFLOP/s on big squares (zzc0721#79)",
    ),
    Parameter(
        "fp8_peak",
        0.7,
        0.15,
        0.3,
        1.0,
        "of peak",
        "fp8 gemms (one scale per tensor), 700 W",
        "of the dense peak; Azure's cuBLASLt sweep tops at 1377 of 1979 TFLOP/s",
    ),
    Parameter(
        "slow_accum",
        1.1,
        0.2,
        1.0,
        4.0,
        "x",
        "fp8 time without fast accumulation",
        "1: no cost; promoting partial sums to FP32 costs a few percent (ao#940)",
    ),
    Parameter(
        "rowwise",
        0.95,
        0.1,
        0.4,
        1.0,
        "x fp8",
        "row-scaled fp8 gemm's peak fraction",
        "at most tensorwise's; 90-100% of it (pytorch/pytorch#147971, FBGEMM#2764)",
    ),
    Parameter(
        "cap_bf16",
        0.75,
        0.1,
        0.4,
        1.0,
        "x",
        "bf16 gemm throughput at 500 W / 700 W",
        "at most 1 (a cap lowers clocks); FBGEMM#2546's 500 W bf16 585 vs 790-800 TFLOP/s",
    ),
    Parameter(
        "cap_fp8",
        1.0,
        0.1,
        1 / 1.04,
        1 / 0.85,
        "x cap_bf16",
        "fp8 gemm throughput at 500 W / 700 W, over bf16's",
        "a cap lowers the clock both dtypes' tensor cores run at: a gemm-bound linear's "
        "speedup at 700 W over 500 W, cap_bf16 / this, lies in 0.85-1.04 (issue #36)",
    ),
    Parameter(
        "azure_fp8",
        1.0,
        0.2,
        0.5,
        2.0,
        "x time",
        "Azure's cuBLASLt fp8 sweep's times over the model's",
        "a library, not a part: Azure's superbench cuBLASLt runs 1290 TFLOP/s at 8192^3 on a "
        "700 W part, ao#940's cuBLAS 1617 on a 500 W one on zeros (1409 on real data: "
        "ZERO_DATA_SPEEDUP); no power cap makes a part faster, so what remains is another "
        "library's; 1 a priori",
    ),
    Parameter(
        "blackwell",
        1.0,
        0.15,
        0.5,
        1.3,
        "x fraction",
        "B200/B300 gemms' peak fractions over Hopper's",
        "another tensor core (tcgen05) and library: stas00's MAMF puts B200 bf16 at 0.79 of "
        "peak against H100's 0.82 and fp8 0.77 against 0.72, so 1 a priori",
    ),
    Parameter(
        "cdna3",
        0.8,
        0.3,
        0.3,
        1.3,
        "x fraction",
        "MI300X gemms' peak fractions over Hopper's",
        "hipBLASLt on 304 CUs reaches a smaller share of its larger peak (the datasheet model's "
        "MAMF fit), so below 1 a priori",
    ),
    Parameter(
        "latency_us",
        4.0,
        2.0,
        1.0,
        12.0,
        "us",
        "a gemm's fixed time",
        "a launch and one tile's pipeline fill: a few us (ao#940's 256^3 gemms take 4-6 us)",
    ),
    Parameter(
        "k_steps_bf16",
        192.0,
        128.0,
        0.0,
        1024.0,
        "K-steps",
        "bf16 prologue/epilogue per tile",
        "at least 0; the datasheet model's 192 (OpenXLA sm_90 sweep)",
    ),
    Parameter(
        "k_steps_fp8",
        128.0,
        128.0,
        0.0,
        1024.0,
        "K-steps",
        "fp8 prologue/epilogue per tile",
        "at least 0; the datasheet model's 128 (Azure cuBLASLt sweep)",
    ),
)
NAMES = tuple(p.name for p in PARAMETERS)
PRIOR = np.array([p.prior for p in PARAMETERS])
WIDTH = np.array([p.width for p in PARAMETERS])
LOW = np.array([p.low for p in PARAMETERS])
HIGH = np.array([p.high for p in PARAMETERS])
# The parts the fit times, read off the records (`GPU.public_model`): those with a shipped
# traffic calibration (Hopper, Blackwell), and those at a power limit the fit has caps for.
# Each takes the shared parameters through its own datasheet (bandwidth, SMs, clock); a capped
# part takes the power-cap ratios on its gemm fractions (`capped`).
HOPPER_PARTS = tuple(g.name for g in every_part() if g.public_model is PublicModel.HOPPER_FIT)
BLACKWELL_PARTS = tuple(
    g.name for g in every_part() if g.public_model is PublicModel.BLACKWELL_TRANSFER
)
PARTS = HOPPER_PARTS + BLACKWELL_PARTS
CAPPED_W = 500  # FBGEMM's and torchao's 'H100 500W'
INTEGER = ("k_steps_bf16", "k_steps_fp8")


def rounded(x: np.ndarray) -> np.ndarray:
    """4 significant digits (K-steps: whole): a rebuild's numbers move only where the fit does."""
    out = np.array([float(f"{v:.4g}") for v in x])
    for name in INTEGER:
        i = NAMES.index(name)
        out[i] = round(out[i])
    return out


def parts_of(x: np.ndarray) -> dict[str, PartTimes]:
    """Every part from a parameter vector, each through its own preset."""
    return {name: part_times(x, find_gpu(name)) for name in PARTS}


def part_times(x: np.ndarray, gpu: GPU) -> PartTimes:
    """One part: the shared fractions of its own bandwidth, the arithmetic per SM and clock
    times its SMs and clock, its gemm families (`part_gemms`)."""
    p = dict(zip(NAMES, x))
    if gpu.sm_clock_hz is None:
        raise ModelError(f"{gpu.name}: no SM clock, so no arithmetic rate")
    return PartTimes(
        gpu.name,
        p["floor_us"] * 1e-6,
        tuple((c, float(p[c])) for c in FITTED_CLASSES),
        part_gemms(x, gpu),
        p["scattered"],
        p["reread"],
        p["arithmetic"] * gpu.sm_count * gpu.sm_clock_hz,
    )


def part_gemms(x: np.ndarray, gpu: GPU) -> tuple:
    """A part's gemm families: the 700 W Hopper fractions of its own dense peaks, times its
    architecture's factor (Blackwell, CDNA 3), capped where it runs below its full power
    (`capped`). Blackwell's NVFP4 family is its fp8 family at the datasheet model's published
    NVFP4/fp8 ratio (pytorch/ao#2427's NVFP4 sweep against stas00's fp8 MAMF on B200): the fit
    has no NVFP4 rows of its own beside them, and fp4 runs at twice fp8's rate, so no float8
    family stands for it."""
    p = dict(zip(NAMES, x))
    arch = 1.0
    if gpu.compute_capability[0] == 10:
        arch = p["blackwell"]
    elif gpu.gfx_arch == "gfx942":
        arch = p["cdna3"]
    cap_bf16, cap_fp8 = cap_factors(x, gpu)
    bf16 = arch * cap_bf16
    fp8 = arch * cap_fp8
    families = (
        ("bf16", _gemm(p["bf16_peak"] * bf16, p["k_steps_bf16"], p, "bf16", 1.0)),
        ("fp8", _gemm(p["fp8_peak"] * fp8, p["k_steps_fp8"], p, "fp8", None)),
        (
            "fp8_rowwise",
            _gemm(p["fp8_peak"] * fp8 * p["rowwise"], p["k_steps_fp8"], p, "fp8_rowwise", None),
        ),
    )
    if gpu.compute_capability[0] != 10:
        return families
    fp4 = p["fp8_peak"] * fp8 * NVFP4_TO_FP8
    return (*families, (FP4_FAMILY, _gemm(fp4, p["k_steps_fp8"], p, FP4_FAMILY, 1.0)))


def capped(gpu: GPU) -> bool:
    """Whether a part's gemms run below its rated power: at CAPPED_W, or a preset that is a
    power limit of another (b200-750w)."""
    return gpu.power_w == CAPPED_W or gpu.limited_from is not None


def cap_factors(x: np.ndarray, gpu: GPU) -> tuple[float, float]:
    """bf16's and float8's gemm factors at the part's power: 1 at its rated power; on Hopper
    the fitted 500 W caps; on a power limit of another architecture the datasheet model's rule
    (hardware/efficiency.py's `cap_ratios`: watts / rated watts, every family alike), which
    no row of the fit measures."""
    if not capped(gpu):
        return 1.0, 1.0
    if gpu.compute_capability[0] != 9 and gpu.limited_from is not None:
        rated = find_gpu(gpu.limited_from).power_w
        assert gpu.power_w is not None and rated is not None
        cap = cap_ratios(watts=gpu.power_w, rated_w=rated, hopper=False)
        return cap.bf16, cap.float8
    p = dict(zip(NAMES, x))
    return p["cap_bf16"], p["cap_bf16"] * p["cap_fp8"]


def _gemm(fraction: float, k_steps: float, p: dict, family: str, slow: float | None):
    whole = float(k_steps).is_integer()
    return GemmEfficiency(
        min(float(fraction), 1.0),
        int(k_steps) if whole else k_steps,  # type: ignore[arg-type]  # float while fitting
        p["latency_us"] * 1e-6,
        TILES[family],
        p["slow_accum"] if slow is None else slow,
    )


# ---- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cells:
    """The heatmap's cells (shapes, measured speedups) and every kernel the code generated for
    each has (its cell, graph, fitted class, bytes, scattered elements, bytes loaded again,
    arithmetic): one array each, a kernel per entry."""

    shape: np.ndarray  # (cells, 3)
    measured: np.ndarray
    cell: np.ndarray  # per kernel: its cell's index
    fp8: np.ndarray  # per kernel: in the float8 graph (else bf16)
    kernel_class: np.ndarray  # per kernel: index into FITTED_CLASSES
    nbytes: np.ndarray
    scattered: np.ndarray
    reread: np.ndarray
    arithmetic: np.ndarray
    versions: str
    source: str


def load_cells(root: Path = Path(".")) -> Cells:
    frame = pd.read_csv(root / HEATMAP)
    lines = (root / CELLS).read_text().splitlines()
    header = json.loads(lines[0])
    records = [json.loads(line) for line in lines[1:]]
    shapes = sorted({(r["M"], r["K"], r["N"]) for r in records})
    index = {s: i for i, s in enumerate(shapes)}
    rows = []
    for r in records:
        for k in r["kernels"]:
            rows.append(
                (
                    index[(r["M"], r["K"], r["N"])],
                    not r["variant"].startswith("bf16"),
                    FITTED_CLASSES.index(TIED_CLASSES.get(k["class"], k["class"])),
                    k["bytes"],
                    k["scattered_elements"],
                    k["reread_bytes"],
                    k["arithmetic"],
                )
            )
    columns = list(zip(*rows))
    measured = np.full(len(shapes), np.nan)
    for row in frame.itertuples():
        measured[index[(row.M, row.K, row.N)]] = row.measured_speedup
    if np.isnan(measured).any():
        raise ValueError("a compiled cell has no measured speedup")
    nbytes, scattered, reread, arithmetic = (np.array(c, dtype=np.float64) for c in columns[3:])
    return Cells(
        np.array(shapes, dtype=np.float64),
        measured,
        np.array(columns[0]),
        np.array(columns[1], dtype=bool),
        np.array(columns[2]),
        nbytes,
        scattered,
        reread,
        arithmetic,
        header["versions"],
        frame.source.iloc[0],
    )


@dataclass(frozen=True)
class GemmRows:
    source: np.ndarray  # short source names
    part: np.ndarray
    family: np.ndarray
    slow: np.ndarray
    mkn: np.ndarray  # (rows, 3)
    time_s: np.ndarray
    left_out: tuple[str, ...] = field(default=())

    @property
    def weight(self) -> np.ndarray:
        """sqrt(min(1, SOURCE_ROWS / rows of the row's source)): a sweep of 125 shapes counts
        as much as SOURCE_ROWS rows, not as 125 (its rows are not independent: one GPU, one
        library, one day)."""
        names, counts = np.unique(self.source, return_counts=True)
        rows = dict(zip(names, counts))
        return np.sqrt(np.minimum(1.0, SOURCE_ROWS / np.array([rows[s] for s in self.source])))


SOURCE_NAMES = {
    "pytorch/ao PR #940": "ao#940",
    "pytorch-labs/float8_experimental PR #100": "float8_experimental#100",
    "meta-pytorch/float8_experimental PR #38": "float8_experimental#38",
    "pytorch/FBGEMM PR #2546": "FBGEMM#2546",
    "Azure/AI-benchmarking-guide": "Azure",
    "openxla/xla": "OpenXLA",
    "zzc0721": "zzc0721#79",
    "pytorch/ao PR #2427": "ao#2427",
    "vllm-project/vllm PR #18778": "vllm#18778",
    "vllm-project/vllm PR #19566": "vllm#19566",
    "NVIDIA/TransformerEngine": "TransformerEngine",
    "yosoyjay/AI-benchmarking-guide": "Azure MI300X",
}
# Other parts' gemm rows: which preset each ran on, its dtype's family (None: left out).
OTHER_PARTS = {"B200": "b200", "SM100": "b200", "B300 SXM6 AC": "b300", "MI300X": "mi300x"}
OTHER_FAMILIES = {
    "bf16": "bf16",
    "bf16 (torch)": "bf16",
    "fp8 tensor-w/tensor-a no-quant": "fp8",
    "fp8 channel-w/token-a no-quant": "fp8_rowwise",
    "fp8 (hipBLASLt)": "fp8",
}
SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _short(source: str) -> str:
    return next((v for k, v in SOURCE_NAMES.items() if source.startswith(k)), source[:30])


def _other_part(gpu: str) -> str | None:
    """The preset a non-H100 row ran on, by the start of its gpu column (None: an H100's)."""
    return next((v for k, v in OTHER_PARTS.items() if gpu.startswith(k)), None)


def gemm_rows(root: Path = Path(".")) -> GemmRows:
    """The gemm rows the fit uses, every part's, in (m, k, n) of (m, k) @ (k, n); what is left
    out, why."""
    rows: list[tuple] = []
    left_out = [
        (
            "ao#940 rowwise rows: the CUTLASS rowwise kernel of 2024-10, replaced since "
            "(pytorch/pytorch#144809, #147971)"
        ),
        "float8_experimental fp8 rows: 2023 cuBLASLt, accumulation mode not stated",
        "FBGEMM#2546 blockwise and 'incl. scaling' rows: not a gemm alone",
        "OpenXLA sm_90 fp8 rows: the median takes in a transpose kernel (values above peak)",
        (
            "H200 NVL rows: a layer's 12 gemms, not a gemm alone; B300 fp8 and MXFP8 rows: "
            "autocast, quantisation included; nvfp4 and grouped MXFP8 rows: no such family"
        ),
        "OpenXLA sm_100 rows: SKU and power not stated",
    ]
    a = pd.read_csv(root / DATA / "published" / "gemms_a.csv")
    for r in a.itertuples():
        source = _short(r.source)
        if source == "ao#940" and r.dtype in ("bf16", "fp8_tensorwise"):
            slow = r.dtype != "bf16" and str(r.fast_accum) == "False"
            family = "bf16" if r.dtype == "bf16" else "fp8"
            rows.append((source, "h100-meta", family, slow, r.M, r.K, r.N, r.time_s))
        elif source == "float8_experimental#100" and r.dtype == "bf16":
            rows.append((source, "h100-meta", "bf16", False, r.M, r.K, r.N, r.time_s))
        elif source == "FBGEMM#2546" and r.dtype in ("bf16", "fp8_rowwise"):
            family = "bf16" if r.dtype == "bf16" else "fp8_rowwise"
            rows.append((source, "h100-meta", family, False, r.M, r.K, r.N, r.time_s))
    b = pd.read_csv(root / DATA / "published" / "gemms_b.csv")
    for r in b.itertuples():
        source = _short(r.source)
        if source == "OpenXLA" or not str(r.N).isdigit():
            continue
        m, k, n = int(r.M), int(r.K), int(r.N)
        if source == "float8_experimental#38" and r.dtype == "bf16":
            rows.append((source, "h100-meta", "bf16", False, m, k, n, float(r.time_us_or_tflops)))
        elif (part := _other_part(str(r.gpu))) and r.dtype in OTHER_FAMILIES:
            value = float(r.time_us_or_tflops)
            unit = str(r.unit)
            seconds = (
                value * SECONDS[unit]
                if unit in SECONDS
                else 2 * m * k * n / (value * (1.0 if unit == "FLOP/s" else 1e12))
            )
            rows.append((source, part, OTHER_FAMILIES[r.dtype], False, m, k, n, seconds))
        elif source == "Azure" and r.dtype == "fp8 (cuBLASLt)":
            part = "h100" if str(r.gpu).startswith("H100") else "h200"
            seconds = 2 * m * k * n / (float(r.time_us_or_tflops) * 1e12)
            rows.append((source, part, "fp8", False, m, k, n, seconds))
    c = pd.read_csv(root / DATA / "published" / "gemms_h100_bf16.csv")
    for r in c.itertuples():
        scale = 1e12 if r.unit == "TFLOP/s" else 1.0
        flops = 2 * r.M * r.K * r.N
        rows.append(
            (
                _short(r.source),
                "h100",
                "bf16",
                False,
                r.M,
                r.K,
                r.N,
                flops / (float(r.time_s_or_flops) * scale),
            )
        )
    cols = list(zip(*rows))
    return GemmRows(
        np.array(cols[0]),
        np.array(cols[1]),
        np.array(cols[2]),
        np.array(cols[3], dtype=bool),
        np.array(cols[4:7], dtype=np.float64).T,
        np.array(cols[7], dtype=np.float64),
        tuple(left_out),
    )


@dataclass(frozen=True)
class KernelRows:
    source: np.ndarray
    part: np.ndarray
    kernel_class: np.ndarray
    fraction: np.ndarray


def kernel_rows(root: Path = Path(".")) -> KernelRows:
    frame = pd.read_csv(root / DATA / "published" / "kernels_h100.csv")
    part = np.array(["h100-meta" if "Meta" in g else "h100" for g in frame.gpu])
    source = np.array(
        ["torchao roofline_utils" if "ao" in s else "Azure copy" for s in frame.source]
    )
    return KernelRows(
        source,
        part,
        frame.kernel_class.to_numpy(),
        frame.fraction_of_datasheet_bandwidth.to_numpy(float),
    )


@dataclass(frozen=True)
class KernelCheck:
    """A published kernel throughput on a part whose kernels the fit has no data for, and the
    code Inductor generates for that kernel there: what the model's transfer to the part is
    checked against (nothing is fitted to it)."""

    part: str
    what: str
    source: str
    published_bytes_per_s: float
    published_bytes: float  # what the publication counts as moved
    kernels: tuple[tuple[str, float, float, float, float], ...]  # class, bytes, scattered,
    # reread, arithmetic
    versions: str

    def predicted_s(self, x: np.ndarray) -> float:
        """The generated kernels' time on the part under the parameters `x`."""
        gpu = find_gpu(self.part)
        model = part_times(x, gpu).kernel_time(gpu)
        return float(
            sum(
                model.time_s(
                    "",
                    nbytes,
                    kernel_class=kernel_class,
                    scattered_elements=scattered,
                    reread_bytes=reread,
                    arithmetic=arithmetic,
                )
                for kernel_class, nbytes, scattered, reread, arithmetic in self.kernels
            )
        )

    def predicted_bytes_per_s(self, x: np.ndarray) -> float:
        """The predicted throughput, counted as the publication counts it."""
        return self.published_bytes / self.predicted_s(x)

    def arithmetic_share(self, x: np.ndarray) -> float:
        """How much of the predicted time the arithmetic alone takes (1: bound by it)."""
        gpu = find_gpu(self.part)
        rate = part_times(x, gpu).arithmetic_per_s
        return sum(k[4] for k in self.kernels) / rate / self.predicted_s(x)


def blackwell_check(root: Path = Path(".")) -> KernelCheck:
    """torchao's compiled MXFP8 dim0 cast on B200 (`kernels_b200.csv`, the code in
    `data/codegen/mx_cast_b200.json`): bf16 read, float8 data and e8m0 scales written."""
    row = pd.read_csv(root / DATA / "published" / "kernels_b200.csv").iloc[0]
    code = json.loads((root / MX_CAST_CODE).read_text())
    m, k = int(row.M), int(row.K)
    return KernelCheck(
        code["gpu"],
        str(row.kernel),
        "torchao mx_formats README",
        float(row.tb_per_s) * 1e12,
        m * k * (2 + 1 + 1 / 32),
        tuple(
            (
                c["class"],
                float(c["bytes"]),
                float(c["scattered_elements"]),
                float(c["reread_bytes"]),
                float(c["arithmetic"]),
            )
            for c in code["kernels"]
        ),
        code["versions"],
    )


@dataclass(frozen=True)
class Data:
    cells: Cells
    gemms: GemmRows
    kernels: KernelRows
    blackwell: KernelCheck  # checked against, not fitted to


def load(root: Path = Path(".")) -> Data:
    return Data(load_cells(root), gemm_rows(root), kernel_rows(root), blackwell_check(root))


# ---- the model on the data ------------------------------------------------------------------

ROWWISE = Recipe.from_name("rowwise")


def cell_times(part: PartTimes, cells: Cells, rows=slice(None)) -> tuple[np.ndarray, np.ndarray]:
    """bf16 and float8 graph times of the cells (heatmap: torchao rowwise, its context in both),
    each kernel timed as `KernelTimeModel` times it, gemms by the part's tiled roofline."""
    gpu = find_gpu(part.part)
    model = part.kernel_time(gpu)
    gemm = part.gemm_model(gpu)
    bandwidth = np.array([model.kind("", c).bandwidth_bytes_per_s for c in FITTED_CLASSES])
    extra = model.extra_bytes(cells.scattered, cells.reread)
    busy = model.busy_s(bandwidth[cells.kernel_class], cells.nbytes, extra, cells.arithmetic)
    kernel_s = part.floor_s + busy
    n = len(cells.measured)
    M, K, N = (cells.shape[rows, i] for i in range(3))
    out = []
    for fp8, recipe in ((False, None), (True, ROWWISE)):
        pick = cells.fp8 == fp8
        kernels = np.bincount(cells.cell[pick], weights=kernel_s[pick], minlength=n)[rows]
        gemm_s, _ = linear_gemm_times(gemm, recipe, M, K, N, implementation=Implementation.TORCHAO)
        out.append(gemm_s + kernels)
    return out[0], out[1]


def gemm_times(x: np.ndarray, gemms: GemmRows) -> np.ndarray:
    """Each row's time by its part's gemm families (`part_gemms`); Azure's fp8 rows times their
    library's factor, ao#940's fp8 rows (zero-filled operands) over ZERO_DATA_SPEEDUP."""
    p = dict(zip(NAMES, x))
    out = np.empty(len(gemms.time_s))
    for name in np.unique(gemms.part):
        gpu = find_gpu(name)
        model = TiledGemm(gpu, part_gemms(x, gpu), p["pointwise"])
        for family in np.unique(gemms.family):
            for slow in (False, True):
                pick = (gemms.part == name) & (gemms.family == family) & (gemms.slow == slow)
                if pick.any():
                    m, k, n = gemms.mkn[pick].T
                    out[pick] = model.time_s(family, GemmRole.OUTPUT, m, k, n, slow_accum=slow)[0]
    out[(gemms.source == "Azure") & (gemms.family == "fp8")] *= p["azure_fp8"]
    out[(gemms.source == ZERO_DATA_SOURCE) & (gemms.family == "fp8")] /= ZERO_DATA_SPEEDUP
    return out


def residuals(
    x: np.ndarray, data: Data, *, cells=None, gemms=None, kernels=None, weighted=False
) -> np.ndarray:
    """log(predicted / measured) of the chosen cells, gemm rows and kernel rows (masks);
    `weighted`: each gemm source's rows scaled so no source outweighs SOURCE_ROWS rows."""
    parts = parts_of(x)
    c = slice(None) if cells is None else cells
    bf16, fp8 = cell_times(parts["h100-meta"], data.cells, c)
    out = [np.log(bf16 / fp8) - np.log(data.cells.measured[c])]
    g = np.ones(len(data.gemms.time_s), bool) if gemms is None else gemms
    if g.any():
        weight = data.gemms.weight[g] if weighted else 1.0
        predicted = gemm_times(x, data.gemms)
        out.append(weight * np.log(predicted[g] / data.gemms.time_s[g]))
    k = np.ones(len(data.kernels.fraction), bool) if kernels is None else kernels
    if k.any():
        predicted = np.array(
            [parts[p].fraction(kc) for p, kc in zip(data.kernels.part, data.kernels.kernel_class)]
        )
        out.append(np.log(predicted[k] / data.kernels.fraction[k]))
    return np.concatenate(out)


def prior_residuals(x: np.ndarray) -> np.ndarray:
    """PRIOR_SCALE x (x - prior) / width per parameter: what holds a parameter the data leave free."""
    return PRIOR_SCALE * (x - PRIOR) / WIDTH


def fit(data: Data, *, cells=None, gemms=None, kernels=None) -> np.ndarray:
    """The parameters minimising the squared log residuals of the chosen rows and the priors'
    residuals, rounded. The priors make the minimum unique, so the optimiser's path (BLAS, CPU)
    moves it by far less than the rounding."""
    from scipy.optimize import least_squares

    found = least_squares(
        lambda x: np.concatenate(
            [
                residuals(x, data, cells=cells, gemms=gemms, kernels=kernels, weighted=True),
                prior_residuals(x),
            ]
        ),
        PRIOR,
        bounds=(LOW, HIGH),
        x_scale=WIDTH,
        xtol=1e-10,
        ftol=1e-10,
    )
    # a millionth of a prior width from a bound is at it (the optimiser stops just short)
    low = found.x - LOW < 1e-6 * WIDTH
    high = HIGH - found.x < 1e-6 * WIDTH
    return np.where(low, LOW, np.where(high, HIGH, np.clip(rounded(found.x), LOW, HIGH)))


@dataclass(frozen=True)
class Conditioning:
    """How well the data determine each parameter at the fit, in units of its prior width: the
    singular values of the data's Jacobian (over PRIOR_SCALE: 1 is as much as the prior says),
    each parameter's posterior standard deviation (data and prior; a 95% interval is 2 of them
    either side), and which bound a parameter sits at (-1 low, 1 high, 0 none) with the sign
    of the data's pull there (the same sign: the data push it out)."""

    singular_values: np.ndarray
    sd: np.ndarray  # per parameter, in prior widths
    at_bound: np.ndarray
    pull: np.ndarray  # -1 down, 1 up: where the data alone would move it

    @property
    def determined(self) -> np.ndarray:
        return self.sd < DETERMINED


def conditioning(x: np.ndarray, data: Data) -> Conditioning:
    """The weighted data Jacobian at `x` by finite differences (a thousandth of a prior width,
    one-sided at a bound), and what it says of each parameter."""
    r0 = residuals(x, data, weighted=True)
    columns = []
    for i in range(len(x)):
        step = 1e-3 * WIDTH[i]
        up, down = x.copy(), x.copy()
        up[i] = min(x[i] + step, HIGH[i])
        down[i] = max(x[i] - step, LOW[i])
        ru = residuals(up, data, weighted=True)
        rd = residuals(down, data, weighted=True)
        columns.append((ru - rd) / ((up[i] - down[i]) / WIDTH[i]))
    jacobian = np.array(columns).T / PRIOR_SCALE  # per prior width, in prior units
    singular = np.linalg.svd(jacobian, compute_uv=False)
    information = jacobian.T @ jacobian + np.eye(len(x))
    sd = np.sqrt(np.diag(np.linalg.inv(information)))
    gradient = jacobian.T @ (r0 / PRIOR_SCALE)  # of half the data's cost, per prior width
    at_bound = np.where(x <= LOW, -1, np.where(x >= HIGH, 1, 0))
    return Conditioning(singular, sd, at_bound, -np.sign(gradient))


def cell_speedups(x: np.ndarray, data: Data) -> np.ndarray:
    bf16, fp8 = cell_times(parts_of(x)["h100-meta"], data.cells)
    return bf16 / fp8


# ---- checks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    x: np.ndarray
    kfold_predicted: np.ndarray  # per cell, by a fit without its fold
    folds: tuple[np.ndarray, ...]  # each fold's parameters
    leave_out: dict[str, tuple[np.ndarray, float, int]]  # source -> (params, median |err|, rows)
    in_sample_gemm_error: np.ndarray
    conditioning: Conditioning
    leave_part_out: dict[str, tuple[float, int]]  # part -> (median |gemm time error|, rows)


def cross_validate(data: Data) -> Report:
    n = len(data.cells.measured)
    fold_of = np.arange(n) % FOLDS
    x = fit(data)
    predicted = np.empty(n)
    folds = []
    for f in range(FOLDS):
        xf = fit(data, cells=fold_of != f)
        folds.append(xf)
        predicted[fold_of == f] = cell_speedups(xf, data)[fold_of == f]
    leave_out = {}
    g, k = data.gemms, data.kernels
    all_g, all_k = np.ones(len(g.time_s), bool), np.ones(len(k.fraction), bool)
    for source in [*dict.fromkeys(g.source), *dict.fromkeys(k.source)]:
        keep_g, keep_k = g.source != source, k.source != source
        xs = fit(data, gemms=keep_g, kernels=keep_k)
        err = (
            np.exp(
                np.abs(
                    residuals(
                        xs,
                        data,
                        cells=np.zeros(len(data.cells.measured), bool),
                        gemms=~keep_g,
                        kernels=~keep_k,
                    )
                )
            )
            - 1
        )
        leave_out[str(source)] = (xs, float(np.median(err)), int((~keep_g).sum() + (~keep_k).sum()))
    xh = fit(data, cells=np.zeros(n, bool))
    err = np.abs(cell_speedups(xh, data) / data.cells.measured - 1)
    leave_out["heatmap"] = (xh, float(np.median(err)), n)
    gemm_error = (
        np.exp(residuals(x, data, cells=np.zeros(n, bool), gemms=all_g, kernels=~all_k)) - 1
    )
    return Report(
        x,
        predicted,
        tuple(folds),
        leave_out,
        gemm_error,
        conditioning(x, data),
        leave_part_out(data),
    )


def leave_part_out(data: Data) -> dict[str, tuple[float, int]]:
    """Each part's gemm rows predicted by a fit without any of that part's rows (for h100-meta:
    without the heatmap, its gemm and kernel rows): what the part inherits from the others
    through its datasheet."""
    n = len(data.cells.measured)
    out = {}
    for part in dict.fromkeys(str(p) for p in data.gemms.part):
        mine_g, mine_k = data.gemms.part == part, data.kernels.part == part
        cells = np.full(n, part != CROSS_VALIDATED_PART)
        xs = fit(data, cells=cells, gemms=~mine_g, kernels=~mine_k)
        none = np.zeros(n, bool)
        r = residuals(xs, data, cells=none, gemms=mine_g, kernels=np.zeros_like(mine_k))
        out[part] = (float(np.median(np.exp(np.abs(r)) - 1)), int(mine_g.sum()))
    return out


def parameter_ranges(report: Report) -> tuple[ParameterRange, ...]:
    """Each parameter over the fold fits and the leave-one-source-out fits (not the fit
    without the heatmap: nothing else constrains the kernel classes, they sit at their start)."""
    fits = [report.x, *report.folds, *(v[0] for s, v in report.leave_out.items() if s != "heatmap")]
    stack = np.array(fits)
    return tuple(
        ParameterRange(name, float(report.x[i]), float(stack[:, i].min()), float(stack[:, i].max()))
        for i, name in enumerate(NAMES)
    )


def source_alternatives(report: Report) -> list[np.ndarray]:
    """The leave-one-source-out fits (not the one without the heatmap): how far the sources
    disagree. The fold fits are left out: their spread is the sampling noise the
    cross-validated residual quantiles already carry, and counting it twice only widens the
    band."""
    return [v[0] for s, v in report.leave_out.items() if s != "heatmap"]


def band_ends(data: Data, report: Report) -> tuple[np.ndarray, np.ndarray]:
    """The leave-one-source-out fits whose heatmap speedups run lowest and highest on average
    (log): the band's ends before the residual quantiles widen them."""
    fits = source_alternatives(report)
    mean = [float(np.mean(np.log(cell_speedups(x, data)))) for x in fits]
    return fits[int(np.argmin(mean))], fits[int(np.argmax(mean))]


def cell_band(data: Data, report: Report, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """The estimate's band at the cells, by the estimate's own rule (`timing.band.widened`):
    the ends' speedups (and the fit's), widened by the residual quantiles, capped by
    physics."""
    ends = band_ends(data, report)
    speedups = [cell_speedups(x, data) for x in (report.x, *ends)]
    bf16, _ = cell_times(parts_of(report.x)["h100-meta"], data.cells)
    M, K, N = (data.cells.shape[:, i] for i in range(3))
    gpu = find_gpu("h100-meta")
    bound = speedup_bound(gpu, ROWWISE, Implementation.TORCHAO, M, K, N, bf16)
    return widened(speedups, low, high, bound)


def band_quantiles(data: Data, report: Report) -> tuple[float, float, float]:
    """log(measured / predicted) quantiles of the cross-validated cells, and the band's
    coverage: each fold's cells checked against quantiles taken from the other folds."""
    r = np.log(data.cells.measured / report.kfold_predicted)
    low, high = (float(np.quantile(r, q)) for q in RESIDUAL_QUANTILES)
    fold_of = np.arange(len(r)) % FOLDS
    ends = np.array([cell_speedups(x, data) for x in band_ends(data, report)])
    # each fold's cells: their cross-validated prediction and the ends, relative to the fit's
    spread = ends / cell_speedups(report.x, data)
    inside = 0
    for f in range(FOLDS):
        rest = r[fold_of != f]
        lo = min(float(np.quantile(rest, RESIDUAL_QUANTILES[0])), 0.0)
        hi = max(float(np.quantile(rest, RESIDUAL_QUANTILES[1])), 0.0)
        mine = fold_of == f
        predicted = report.kfold_predicted[mine]
        band_low = predicted * np.minimum(1.0, spread[:, mine].min(axis=0)) * np.exp(lo)
        band_high = predicted * np.maximum(1.0, spread[:, mine].max(axis=0)) * np.exp(hi)
        measured = data.cells.measured[mine]
        inside += int(((measured >= band_low) & (measured <= band_high)).sum())
    return min(low, 0.0), max(high, 0.0), inside / len(r)


def public_times(data: Data, report: Report) -> PublicTimes:
    x, check = report.x, data.blackwell
    parts = parts_of(x)
    low, high, coverage = band_quantiles(data, report)
    error = np.abs(report.kfold_predicted / data.cells.measured - 1)
    by_n = tuple(
        (int(v), float(f"{np.median(error[data.cells.shape[:, 2] == v]):.4g}"))
        for v in np.unique(data.cells.shape[:, 2])
    )
    low_end, high_end = band_ends(data, report)
    return PublicTimes(
        tuple(parts.values()),
        tuple(parts_of(low_end).values()),
        tuple(parts_of(high_end).values()),
        parameter_ranges(report),
        float(f"{low:.4g}"),
        float(f"{high:.4g}"),
        float(f"{coverage:.4g}"),
        float(f"{np.median(error):.4g}"),
        by_n,
        (
            (
                "h100-meta",
                "fitted on h100-meta (the heatmap, ao#940, FBGEMM#2546, float8_experimental)",
            ),
            (
                "h100",
                (
                    "fitted on h100-meta, scaled to h100 by its datasheet (700 W gemm rows: "
                    "Azure, OpenXLA, zzc0721)"
                ),
            ),
            (
                "h200",
                "fitted on h100-meta, scaled to h200 by its datasheet (Azure's H200 fp8 gemm rows)",
            ),
            *(
                (name, f"fitted on h100-meta, scaled to {name} by its datasheet and 500 W caps")
                for name in HOPPER_PARTS
                if find_gpu(name).limited_from is not None
            ),
            *((name, _blackwell_rests_on(name, check, x)) for name in BLACKWELL_PARTS),
        ),
        (
            data.cells.source,
            *dict.fromkeys(str(s) for s in data.gemms.source),
            *dict.fromkeys(str(s) for s in data.kernels.source),
        ),
        (
            (
                check.part,
                float(f"{check.published_bytes_per_s / check.predicted_bytes_per_s(x):.4g}"),
            ),
        ),
    )


def _blackwell_rests_on(name: str, check: KernelCheck, x: np.ndarray) -> str:
    gpu = find_gpu(name)
    caps = f" and its {gpu.power_w} W cap (watts / rated)" if capped(gpu) else ""
    predicted = check.predicted_bytes_per_s(x) / 1e12
    published = check.published_bytes_per_s / 1e12
    return (
        f"kernels fitted on h100-meta, scaled to {name} by its datasheet{caps}, checked on the "
        f"one published Blackwell kernel (torchao's compiled MXFP8 cast on {check.part}: "
        f"{predicted:.1f} TB/s modelled, up to {published:.1f} published); gemms fitted to B200 "
        "and B300 rows"
    )
