"""Gemm time for the three gemms of a linear: roofline, or a measured table.

The three gemms of a linear of shape (M, K, N), each as (m, k, n) of an (m, k) @ (k, n) product:
output (M, K, N), grad_input (M, N, K), grad_weight (N, M, K).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from f8roof.errors import ModelError
from f8roof.hardware.efficiency import GemmEfficiency
from f8roof.hardware.presets import GPU
from f8roof.traffic.gemm_roles import GEMM_ROLES, GemmRole, gemm_dims
from f8roof.traffic.recipes import Granularity, Recipe
from f8roof.traffic.variant import Implementation

# Seed defaults (torchao PR #668): gemms reach 60% of peak (later torchao used 78%), memory
# passes 92% of bandwidth, and nothing on the device takes less than about 2 us.
SEED_GEMM_EFFICIENCY = 0.6
SEED_MEMORY_EFFICIENCY = 0.92
SEED_LAUNCH_FLOOR_S = 2e-6

# Gemm dtypes: bf16, fp8 with one scale per tensor, fp8 with a scale per row and column
# (a different cuBLAS/CUTLASS kernel, so measured tables keep it apart).
OPERAND_BYTES = {"bf16": 2, "fp8": 1, "fp8_rowwise": 1}
GEMM_DTYPES = tuple(OPERAND_BYTES)
OUTPUT_BYTES = 2  # every gemm of the linear writes bf16
# Block-scaled gemms (issue #20), kept out of GEMM_DTYPES (the calibration file's required
# set): operand bytes per element with their scales. MXFP8: one e8m0 byte per 32 elements
# along K; blockwise: one fp32 scale per 128 (1x128 activations; 128x128 weights carry fewer,
# counted the same as an upper bound).
# NVFP4: half a byte per e2m1 element and one e4m3 scale byte per 16 along K (the fp32 scale per
# tensor is a scalar).
BLOCK_SCALED_OPERAND_BYTES = {
    "mxfp8": 1 + 1 / 32,
    "fp8_blockwise": 1 + 4 / 128,
    "nvfp4": 1 / 2 + 1 / 16,
}


def operand_bytes(dtype: str) -> float:
    """Bytes per operand element a gemm dtype reads, scales included."""
    if dtype in OPERAND_BYTES:
        return OPERAND_BYTES[dtype]
    if dtype in BLOCK_SCALED_OPERAND_BYTES:
        return BLOCK_SCALED_OPERAND_BYTES[dtype]
    raise ModelError(f"unknown gemm dtype {dtype!r}")


class GemmTableError(ModelError):
    pass


def fp8_gemm_dtype(
    recipe: Recipe | None, role: GemmRole, implementation: Implementation | None = None
) -> str:
    """The gemm kernel a recipe's gemm runs: bf16 (the baseline, rowwise_gw_hp's grad_weight),
    fp8 with one scale per tensor, or fp8 with row/column scales. torchao (0.18) runs its
    rowwise backward gemms as tensorwise `_scaled_mm` with unit scales and rescales the bf16
    result in a kernel of its own: without fast accumulation the rowwise CUTLASS kernel is
    slower than cuBLAS (torchao/float8/float8_ops.py, `addmm_float8_unwrapped`).
    Block-scaled recipes until gemm families of their own are measured: MX gemms as fp8 (on
    Blackwell the block-scaled tcgen05 MMA runs at the dense fp8 rate), blockwise as
    fp8_rowwise (a scaled kernel below tensorwise's rate), mxfp8_emulated_rceil as bf16 (its
    gemms multiply dequantized bf16 copies). NVFP4 gemms are nvfp4, every one of them: fp4 runs
    at twice fp8's rate, so no float8 family stands for it (a model without an nvfp4 family
    refuses it, naming the families it has)."""
    if recipe is None or (role is GemmRole.GRAD_WEIGHT and recipe.grad_weight_in_bf16):
        return "bf16"
    if recipe.is_nvfp4:
        return "nvfp4"
    if recipe.emulated:
        return "bf16"
    if recipe.granularity is Granularity.BLOCKWISE:
        return "fp8_rowwise"
    if not recipe.is_rowwise:
        return "fp8"
    if implementation is Implementation.TORCHAO and role is not GemmRole.OUTPUT:
        return "fp8"
    return "fp8_rowwise"


@dataclass(frozen=True)
class RooflineGemm:
    """Per gemm max(compute at an efficiency, memory traffic at an efficiency, launch floor)."""

    gpu: GPU
    gemm_efficiency: float = SEED_GEMM_EFFICIENCY
    memory_efficiency: float = SEED_MEMORY_EFFICIENCY
    launch_floor_s: float = SEED_LAUNCH_FLOOR_S

    def __post_init__(self) -> None:
        for name in ("gemm_efficiency", "memory_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ModelError(f"{name} must be in (0, 1], got {getattr(self, name)}")

    def time_s(
        self, dtype: str, role: GemmRole, M, K, N, groups=1, *, slow_accum: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(time, extrapolated flags); the roofline never extrapolates. `groups`: a grouped gemm
        of that many gemms of this shape, one launch. `slow_accum` changes nothing: the given
        efficiency holds for every gemm."""
        m, k, n = (np.asarray(x, dtype=np.float64) for x in gemm_dims(role, M, K, N))
        compute = 2 * m * k * n * groups / (self.gpu.peak_flops(dtype) * self.gemm_efficiency)
        traffic = (operand_bytes(dtype) * (m * k + k * n) + OUTPUT_BYTES * m * n) * groups
        memory = traffic / (self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency)
        time = np.maximum(np.maximum(compute, memory), self.launch_floor_s)
        return time, np.zeros(time.shape, dtype=bool)


# Split-K (TiledGemm): when the output tiles fill under half the SMs and K exceeds this many
# times the larger output dim, K is split across the idle SMs in slices of at least SPLIT_K_MIN.
# cuBLAS's heuristics are not public: these thresholds only keep thin long-K gemms from being
# modelled on one SM, and no measured point the model cites is a split-K gemm. So that time
# never falls as a dimension grows, a split is priced at K = max(K, SPLIT_K_RATIO x the larger
# output dim) (below the ratio a split gemm costs what it costs there) and chosen only where it
# beats the unsplit one; its slices are at least SPLIT_K_MIN K-steps (a shorter one costs that).
SPLIT_K_RATIO = 4
SPLIT_K_MIN = 256


@dataclass(frozen=True)
class TiledGemm:
    """A roofline that knows gemms run in waves of output tiles over the SMs.

    compute = latency + waves x (2 x tile_rows x tile_cols x (k + k_overhead)) / (per-SM peak x
    peak_fraction), waves = ceil(tiles / SMs), the best of the library's tile shapes; time =
    max(compute, bytes / (bandwidth x memory_efficiency)). Small and ragged gemms lose to wave
    quantization and latency, large ones approach `peak_fraction` of peak: what measured
    cuBLAS/CUTLASS sweeps show and a flat efficiency cannot (see timing/datasheet.py for the
    numbers and their sources).
    """

    gpu: GPU
    efficiencies: tuple[tuple[str, GemmEfficiency], ...]  # by dtype: bf16, fp8, fp8_rowwise
    memory_efficiency: float

    def efficiency(self, dtype: str) -> GemmEfficiency:
        found = dict(self.efficiencies).get(dtype)
        if found is None:
            known = ", ".join(d for d, _ in self.efficiencies)
            raise ModelError(f"{self.gpu.name}: no {dtype} gemm model (has {known})")
        return found

    def time_s(
        self, dtype: str, role: GemmRole, M, K, N, groups=1, *, slow_accum: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(time, extrapolated flags); a model never extrapolates. `groups`: a grouped gemm of
        that many gemms of this shape, one launch whose tiles share the waves. `slow_accum`:
        float8 without fast accumulation; by default the backward roles (grad_input,
        grad_weight), as torchao and the reference run them."""
        tiling = _tiling(role, M, K, N, groups, self.efficiency(dtype).tiles, self.gpu.sm_count)
        return self._time_s(dtype, role, tiling, slow_accum), np.zeros(tiling.shape, dtype=bool)

    def _time_s(
        self, dtype: str, role: GemmRole, tiling: _Tiling, slow_accum: bool | None
    ) -> np.ndarray:
        eff = self.efficiency(dtype)
        per_sm = self.gpu.peak_flops(dtype) * eff.peak_fraction / self.gpu.sm_count
        k_steps = tiling.k + eff.k_overhead
        compute = np.empty(k_steps.shape)  # the first tile's time, then the best so far
        tile_s = np.empty(k_steps.shape)
        for index, ((rows, cols), waves, split, slice_k) in enumerate(
            zip(eff.tiles, tiling.waves, tiling.split, tiling.slice_k)
        ):
            out = compute if index == 0 else tile_s
            np.multiply(waves, k_steps, out=out)
            # Split-K: a small output over a long reduction (the grad_weight gemm of a thin
            # layer) is spread over the idle SMs by splitting K, as cuBLAS does: sms // tiles
            # slices, one wave. Rare: only those shapes are recomputed.
            if len(split):
                out[split] = np.minimum(out[split], slice_k + eff.k_overhead)
            out *= 2 * rows * cols / per_sm
            if index:
                np.minimum(compute, tile_s, out=compute)
        bandwidth = self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency
        memory = tiling.traffic(operand_bytes(dtype)) / bandwidth
        if slow_accum is None:
            slow_accum = role is not GemmRole.OUTPUT
        if slow_accum and dtype != "bf16":
            compute *= eff.slow_accum_factor
        compute += eff.latency_s
        return np.maximum(compute, memory, out=compute).reshape(tiling.shape)


@dataclass(frozen=True)
class _Tiling:
    """What `TiledGemm` needs of one gemm at many shapes that no rate changes: the reduction
    length, the elements its operands and output move (`operands`, `outputs` in bytes: output
    elements x OUTPUT_BYTES), and per tile shape the waves of tiles over the SMs and the
    split-K shapes (their indices, and their slices' K before the kernel's K overhead)."""

    shape: tuple[int, ...]
    k: np.ndarray
    operands: np.ndarray
    outputs: np.ndarray
    waves: tuple[np.ndarray, ...]
    split: tuple[np.ndarray, ...]
    slice_k: tuple[np.ndarray, ...]
    _traffic: dict[float, np.ndarray] = field(default_factory=dict, compare=False)

    def traffic(self, operand_bytes: float) -> np.ndarray:
        """Bytes moved at `operand_bytes` per operand element, computed once per operand width
        (bf16 and float8 gemms, each under several rates); not to be written to."""
        if operand_bytes not in self._traffic:
            self._traffic[operand_bytes] = operand_bytes * self.operands + self.outputs
        return self._traffic[operand_bytes]


# TiledGemm.time_s's tilings, shared while `shared_tilings` is open (None: not shared).
_SHARED_TILINGS: ContextVar[dict | None] = ContextVar("f8roof_shared_tilings", default=None)


@contextmanager
def shared_tilings() -> Iterator[None]:
    """Inside, each gemm's tiling (`_Tiling`) is computed once per set of M, K, N arrays and
    reused: an estimate times the same gemms at the same shapes up to 18 times (bf16 and
    float8, three roles, under its own rates and the band's two alternative fits, which
    differ in rates, not in tiles), and the tiling is most of the arithmetic. The arrays are
    known by identity: whoever opens it keeps them alive and unchanged inside."""
    token = _SHARED_TILINGS.set({})
    try:
        yield
    finally:
        _SHARED_TILINGS.reset(token)


def _tiling(role: GemmRole, M, K, N, groups, tiles, sms: int) -> _Tiling:
    shared = _SHARED_TILINGS.get()
    grouped = not (np.isscalar(groups) and groups == 1)
    if shared is None or grouped:
        return _new_tiling(role, M, K, N, groups, tiles, sms)
    key = (role, id(M), id(K), id(N), tiles, sms)
    if key not in shared:
        # the arrays ride along, so that no id is reused while the entry lives
        shared[key] = (_new_tiling(role, M, K, N, groups, tiles, sms), (M, K, N))
    return shared[key][0]


def _new_tiling(role: GemmRole, M, K, N, groups, tiles, sms: int) -> _Tiling:
    grouped = not (np.isscalar(groups) and groups == 1)
    values = (*gemm_dims(role, M, K, N), *((groups,) if grouped else ()))
    dims = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in values))
    shape = dims[0].shape
    m, k, n, *g = (np.atleast_1d(d).ravel() for d in dims)
    # the K a split is priced at (see SPLIT_K_RATIO)
    split_k = np.maximum(k, SPLIT_K_RATIO * np.maximum(m, n))
    waves, splits, slice_ks = [], [], []
    for rows, cols in tiles:
        count = np.ceil(np.multiply(m, 1 / rows))
        count *= np.ceil(np.multiply(n, 1 / cols))
        if grouped:
            count *= g[0]
        waves.append(np.ceil(np.multiply(count, 1 / sms)))
        split = np.flatnonzero(count < sms / 2)
        slices = sms // count[split]
        splits.append(split)
        slice_ks.append(np.maximum(np.ceil(split_k[split] / slices), SPLIT_K_MIN))
    operands = m * k + k * n
    outputs = OUTPUT_BYTES * m * n
    if grouped:
        operands *= g[0]
        outputs *= g[0]
    return _Tiling(shape, k, operands, outputs, tuple(waves), tuple(splits), tuple(slice_ks))


@dataclass(frozen=True)
class GridTable:
    """Measured times of one (dtype, gemm role) on a full m x k x n grid.

    Interpolation is trilinear in log2(m), log2(k), log2(n) of log2(FLOP/s): throughput varies
    slowly and smoothly with size where time spans six orders of magnitude. Outside the grid
    the throughput of the nearest edge is used and the value is flagged as extrapolated.
    """

    ms: np.ndarray
    ks: np.ndarray
    ns: np.ndarray
    log_flops: np.ndarray  # shape (len(ms), len(ks), len(ns)): log2 of achieved FLOP/s

    @classmethod
    def from_points(cls, m, k, n, time_s, *, label: str) -> GridTable:
        m, k, n, t = _checked(m, k, n, time_s, label=label)
        axes = [np.unique(a) for a in (m, k, n)]
        grid = np.full(tuple(len(a) for a in axes), np.nan)
        idx = [np.searchsorted(a, v) for a, v in zip(axes, (m, k, n))]
        grid[tuple(idx)] = np.log2(2 * m * k * n / t)
        if np.isnan(grid).any():
            i, j, l = (int(x[0]) for x in np.nonzero(np.isnan(grid)))
            raise GemmTableError(
                f"gemm table {label} is not a full grid: missing m={axes[0][i]:.0f}, "
                f"k={axes[1][j]:.0f}, n={axes[2][l]:.0f}"
            )
        return cls(axes[0], axes[1], axes[2], grid)

    def time_s(self, m, k, n) -> tuple[np.ndarray, np.ndarray]:
        m, k, n = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (m, k, n)))
        extrapolated = np.zeros(m.shape, dtype=bool)
        positions, weights = [], []
        for axis, values in zip((self.ms, self.ks, self.ns), (m, k, n)):
            outside = (values < axis[0]) | (values > axis[-1])
            extrapolated = extrapolated | outside
            pos, w = _bracket(np.log2(axis), np.log2(np.clip(values, axis[0], axis[-1])))
            positions.append(pos)
            weights.append(w)
        log_flops = np.zeros(extrapolated.shape)
        for corner in range(8):
            bits = [(corner >> b) & 1 for b in range(3)]
            # an axis of one value has weight 0 on its upper corner, which must still index it
            index = tuple(
                np.minimum(p + bit, len(axis) - 1)
                for p, bit, axis in zip(positions, bits, (self.ms, self.ks, self.ns))
            )
            weight = np.prod([w if bit else 1 - w for w, bit in zip(weights, bits)], axis=0)
            log_flops = log_flops + weight * self.log_flops[index]
        return 2 * m * k * n / np.exp2(log_flops), extrapolated


def _bracket(axis: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower grid index and fractional weight of each value on a sorted axis."""
    if len(axis) == 1:
        return np.zeros(values.shape, dtype=np.intp), np.zeros(values.shape)
    pos = np.clip(np.searchsorted(axis, values, side="right") - 1, 0, len(axis) - 2)
    weight = (values - axis[pos]) / (axis[pos + 1] - axis[pos])
    return pos, weight


@dataclass(frozen=True)
class PointsTable:
    """Measured times of one (dtype, gemm role) at any set of shapes (most users benchmark
    exactly their model's gemms). A measured shape is used as measured; any other takes the
    log2 FLOP/s of its nearest measured shapes in log2(m, k, n) space, weighted by inverse
    squared distance, and is flagged (`gemm_extrapolated`): it was not measured."""

    log_dims: np.ndarray  # (points, 3): log2 of m, k, n
    log_flops: np.ndarray  # (points,)

    NEAREST = 4

    @classmethod
    def from_points(cls, m, k, n, time_s, *, label: str) -> PointsTable:
        m, k, n, t = _checked(m, k, n, time_s, label=label)
        return cls(np.log2(np.stack([m, k, n], axis=1)), np.log2(2 * m * k * n / t))

    def time_s(self, m, k, n) -> tuple[np.ndarray, np.ndarray]:
        m, k, n = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (m, k, n)))
        query = np.log2(np.stack([m.ravel(), k.ravel(), n.ravel()], axis=1))
        nearest = min(self.NEAREST, len(self.log_flops))
        distance2 = ((query[:, None, :] - self.log_dims[None, :, :]) ** 2).sum(axis=-1)
        index = np.argpartition(distance2, nearest - 1, axis=1)[:, :nearest]
        d2 = np.take_along_axis(distance2, index, axis=1)
        exact = d2.min(axis=1) == 0
        weight = 1 / np.maximum(d2, 1e-12)  # an exact hit outweighs everything else
        log_flops = (weight * self.log_flops[index]).sum(axis=1) / weight.sum(axis=1)
        time = 2 * m * k * n / np.exp2(log_flops.reshape(m.shape))
        return time, ~exact.reshape(m.shape)


def _checked(m, k, n, time_s, *, label: str):
    m, k, n, t = (np.asarray(x, dtype=np.float64) for x in (m, k, n, time_s))
    if not len(t):
        raise GemmTableError(f"gemm table {label} has no times")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise GemmTableError(f"gemm table {label}: times must be positive finite numbers")
    dims = np.stack([m, k, n])
    if np.any(~np.isfinite(dims)) or np.any(dims < 1) or np.any(dims % 1):
        raise GemmTableError(f"gemm table {label}: M, K, N must be positive integers")
    if len(np.unique(dims, axis=1).T) != len(t):
        raise GemmTableError(f"gemm table {label}: a shape appears twice")
    return m, k, n, t


@dataclass(frozen=True)
class TableGemm:
    """Measured gemm times keyed by (dtype, gemm role): a full grid is interpolated between its
    points (GridTable), any other set of shapes from its nearest ones (PointsTable)."""

    tables: dict[tuple[str, GemmRole], GridTable | PointsTable] = field(default_factory=dict)

    def time_s(
        self, dtype: str, role: GemmRole, M, K, N, groups=1, *, slow_accum: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`groups`: a grouped gemm, timed as that many measured gemms (launch included in
        each: an overcount for small groups, which a table of single gemms cannot avoid).
        `slow_accum` changes nothing: a measured time is that of the kernel as it accumulated."""
        table = self.tables.get((dtype, role))
        if table is None:
            raise GemmTableError(f"gemm table has no {dtype} {role.value} times")
        time, extrapolated = table.time_s(*gemm_dims(role, M, K, N))
        return time * groups, extrapolated

    @classmethod
    def from_records(cls, records, *, label: str, full_grid: bool = False) -> TableGemm:
        """records: iterable of (dtype, gemm role, m, k, n, time_s) in gemm dims. With
        `full_grid` (a calibration's protocol) a missing grid point is an error."""
        rows: dict[tuple[str, GemmRole], list[tuple[float, ...]]] = {}
        for dtype, role, m, k, n, t in records:
            if dtype not in OPERAND_BYTES:
                raise GemmTableError(f"gemm table {label}: unknown dtype {dtype!r}")
            try:
                key = (dtype, GemmRole(role))
            except ValueError:
                raise GemmTableError(f"gemm table {label}: unknown gemm {role!r}") from None
            rows.setdefault(key, []).append((m, k, n, t))
        tables: dict[tuple[str, GemmRole], GridTable | PointsTable] = {}
        for key, values in rows.items():
            cols = np.array(values, dtype=np.float64).T
            where = f"{label} ({key[0]} {key[1].value})"
            try:
                tables[key] = GridTable.from_points(*cols, label=where)
            except GemmTableError:
                if full_grid:
                    raise
                tables[key] = PointsTable.from_points(*cols, label=where)
        return cls(tables)


def linear_gemm_times(
    model,
    recipe: Recipe | None,
    M,
    K,
    N,
    *,
    implementation: Implementation | None = None,
    groups=1,
):
    """Summed time of the three gemms, and whether any was extrapolated. None = bf16.
    `groups`: grouped gemms of that many (M, K, N) gemms each (routed experts)."""
    total = 0.0
    extrapolated = False
    for role in GEMM_ROLES:
        dtype = fp8_gemm_dtype(recipe, role, implementation)
        time, extra = model.time_s(dtype, role, M, K, N, groups)
        total = total + time
        extrapolated = extrapolated | extra
    return total, extrapolated


@dataclass(frozen=True)
class BlockScaledGemm:
    """A gemm model whose block-scaled recipe's gemms run their own kernel family. Recipes name
    their gemms by `fp8_gemm_dtype` (MX as fp8, blockwise as fp8_rowwise: the families a
    measured table keeps); a model that has the block-scaled families (a preset's datasheet
    timing: mxfp8, fp8_blockwise) times them as those, not as tensorwise or rowwise fp8."""

    base: TiledGemm
    families: tuple[tuple[str, str], ...]  # requested dtype -> the family that runs it

    def time_s(
        self, dtype: str, role: GemmRole, M, K, N, groups=1, *, slow_accum: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        family = dict(self.families).get(dtype, dtype)
        return self.base.time_s(family, role, M, K, N, groups, slow_accum=slow_accum)

    @classmethod
    def of(cls, model: TiledGemm, recipe: Recipe) -> TiledGemm | BlockScaledGemm:
        """`model` as `recipe` runs its gemms: unchanged unless the recipe is block-scaled
        and the model has that family."""
        has = {d for d, _ in model.efficiencies}
        if recipe.emulated:  # dequantized bf16 gemms
            return model
        if recipe.granularity is Granularity.MX and "mxfp8" in has:
            return cls(model, (("fp8", "mxfp8"),))
        if recipe.granularity is Granularity.BLOCKWISE and "fp8_blockwise" in has:
            return cls(model, (("fp8_rowwise", "fp8_blockwise"),))
        return model


# every gemm model an estimate may time with
GemmModel = RooflineGemm | TiledGemm | TableGemm | BlockScaledGemm
