"""Shapes x variant x GPU -> columns (`f8roof.columns`) of bf16 vs float8 times and speedups.

The worst and ideal byte models are polynomials read once per configuration (from the shipped
table, `traffic.byte_table`) and every shape is then a numpy array operation: a million shapes
take well under a second.

Levels of overhead, side by side: `worst` and `ideal` (sympy models), `fitted` (a calibration:
the exact bytes of the generated code per kernel set, timed by its kernel-time model) and `codegen`
(the kernels Inductor generates for this very shape). With a context (the norm before the
linear, the activation after it), fitted overhead is what the float8 graph runs beyond the bf16
graph of the same context; `speedup` is the linear's (the context's kernels run in both
precisions and cancel from the saving) and `speedup_context` the whole graph's, context kernels
included in both times, as torchao's float8 benchmark measures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from f8roof.calibration.file import Calibration, retimed
from f8roof.columns import Column, Columns, Labels
from f8roof.engine.decision import DECISIONS, DecisionPolicy, frame_decisions
from f8roof.errors import ModelError
from f8roof.hardware.presets import GPU
from f8roof.inputs.shapes import as_array
from f8roof.notes import Note, Topic, note
from f8roof.timing.band import (
    ClassRates,
    CornerTimes,
    TimeBand,
    corner_times,
    kernel_set_spread,
    kind_rate,
    linear_gemm_band,
    linear_speedup_bands,
    measured_rates,
    speedup_bound,
    widened,
)
from f8roof.timing.gemm import (
    SEED_LAUNCH_FLOOR_S,
    SEED_MEMORY_EFFICIENCY,
    BlockScaledGemm,
    GemmModel,
    RooflineGemm,
    TiledGemm,
    linear_gemm_times,
    shared_tilings,
)
from f8roof.timing.kernel_classes import GpuFamily
from f8roof.timing.overhead import fitted_kernels, fitted_kind_bytes, kernel_set_range
from f8roof.traffic.block_scaled import is_read_off, kernel_kind, torchao_kernels
from f8roof.traffic.byte_table import ModelKey, model_bytes, sympy_model
from f8roof.traffic.fit import FitError, from_sympy
from f8roof.traffic.grouped import is_grouped_recipe
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.te import (
    IN_BF16_GRAPH,
    KERNEL_KINDS,
    SCALE_KERNEL,
    scale_kernels,
    te_kernels,
)
from f8roof.traffic.variant import (
    FP8_DIM_MULTIPLE,
    Context,
    Implementation,
    Level,
    Variant,
    check_gpu_support,
    context_fused_roles,
    fp8_reason_codes,
)

if TYPE_CHECKING:
    import sympy as sp

# numpy (M, K, N) -> a value per shape (bytes, a share): a byte model's polynomial, or a sympy
# expression through lambdify
ShapeFunction = Callable[[np.ndarray, np.ndarray, np.ndarray], npt.ArrayLike]


@dataclass(frozen=True)
class EstimateConfig:
    recipe: Recipe
    gpu: GPU
    implementation: Implementation = Implementation.TORCHAO
    context: Context = field(default_factory=Context)
    fused: frozenset[Role] = frozenset()  # the seed's F per role
    limited: frozenset[Role] = frozenset()  # the seed's L ("compile limitations") per role
    gemm: GemmModel | None = None  # None: the calibration's gemms, or roofline
    memory_efficiency: float = SEED_MEMORY_EFFICIENCY
    launch_floor_s: float = SEED_LAUNCH_FLOOR_S
    calibration: Calibration | None = field(default=None, compare=False)
    # routed experts: torchao's float8 grouped-gemm path (`traffic.grouped`), rowwise, standalone
    grouped: bool = False

    def __post_init__(self) -> None:
        # A recipe the implementation lacks (torchao has no delayed scaling), or whose gemms
        # the GPU has no kernel for (MX before Blackwell), is refused here.
        Variant(self.recipe, self.implementation, self.context)
        check_gpu_support(self.recipe, self.gpu)
        if self.grouped and (
            not is_grouped_recipe(self.recipe)
            or self.context != Context()
            or self.fused
            or self.limited
            or self.calibration is not None
        ):
            # a calibration's fitted overhead is Float8Linear's, not the grouped path's
            raise ValueError(
                "a grouped config is rowwise or MXFP8, standalone, uncalibrated, without F/L"
            )

    @property
    def variant(self) -> Variant:
        return Variant(self.recipe, self.implementation, self.context)

    @property
    def gemm_model(self) -> GemmModel:
        if self.gemm is not None:
            return self.gemm
        if self.calibration is not None:
            model = self.calibration.gemm_model
            # a block-scaled recipe's gemms run their own family where the model has it
            return BlockScaledGemm.of(model, self.recipe) if isinstance(model, TiledGemm) else model
        return RooflineGemm(self.gpu)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """What worst and ideal bytes are timed at: the calibration's, else the seed's
        fraction of the datasheet."""
        if self.calibration is not None:
            return self.calibration.ceilings.copy_bandwidth_bytes_per_s
        return self.gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency

    @property
    def small_kernel_s(self) -> float:
        if self.calibration is not None:
            return self.calibration.ceilings.launch_floor_s
        return self.launch_floor_s

    @property
    def class_rates(self) -> ClassRates | None:
        """What the band times each kernel class at: a measured calibration's kernel-time model
        widened by its residual, else the public ranges of `timing/kernel_classes.py` for this
        GPU's family; None for a GPU of no known family (no band then)."""
        calibration = self.calibration
        if calibration is not None and calibration.is_measured:
            model = calibration.kernel_time
            return measured_rates(
                kinds={k: (t.floor_s, t.bandwidth_bytes_per_s) for k, t in model.kinds},
                pooled=(model.pooled.floor_s, model.pooled.bandwidth_bytes_per_s),
                residual=model.residuals.median,
            )
        try:
            family = GpuFamily.of(
                name=self.gpu.name, compute_capability=self.gpu.compute_capability
            )
        except ModelError:
            return None
        return ClassRates.from_table(
            family=family, bandwidth_bytes_per_s=self.gpu.memory_bandwidth_bytes_per_s
        )

    def model_key(self, level: Level) -> ModelKey:
        """Which byte model times this config's overhead at `level`."""
        fused = self.fused
        if self.implementation is Implementation.TE:  # TE fuses what its modules fuse, no more
            fused = context_fused_roles(self.context, Implementation.TE)
        return ModelKey(self.recipe, level, self.implementation, fused, self.limited, self.grouped)


@lru_cache(maxsize=64)
def _compiled_bytes(key: ModelKey) -> tuple[ShapeFunction, int]:
    """numpy function (M, K, N) -> overhead bytes, built once per model: its polynomial, or
    (a model outside the monomials) the sympy model through lambdify."""
    found = model_bytes(key)
    if found is not None:
        return found.total, found.small_kernels
    import sympy as sp

    from f8roof.traffic import monomials

    model = sympy_model(key)
    return sp.lambdify(monomials.SYMBOLS, model.total, modules="numpy"), model.small_kernels


def _numpy_function(expr: sp.Expr) -> ShapeFunction:
    """numpy (M, K, N) -> the value of a sympy byte count: its polynomial in the monomials,
    evaluated from the coefficients with no code generated (`sp.lambdify` prints and compiles
    Python per model: ~20 ms each); anything else through lambdify."""
    try:
        return from_sympy(expr)
    except FitError:
        import sympy as sp

        from f8roof.traffic import monomials

        # lambdify's generated function is untyped
        function: ShapeFunction = sp.lambdify(monomials.SYMBOLS, expr, modules="numpy")
        return function


def overhead_bytes(
    config: EstimateConfig, level: Level, M: np.ndarray, K: np.ndarray, N: np.ndarray
) -> tuple[np.ndarray, int]:
    """Overhead bytes at float64 arrays M, K, N, and the model's small-kernel count."""
    fn, small_kernels = _compiled_bytes(config.model_key(level))
    values = fn(M, K, N)
    return np.broadcast_to(np.asarray(values, dtype=np.float64), M.shape), small_kernels


def estimate(
    shapes: npt.ArrayLike,
    config: EstimateConfig,
    *,
    groups: npt.ArrayLike | None = None,
    ranges: bool = False,
) -> Columns:
    """Worst and ideal overhead beside the gemm times; the fitted level with a calibration.
    `groups` (a grouped config only, one count per shape): each shape is one expert of a
    grouped gemm over that many; times and bytes are the whole grouped gemm's. `ranges`: also
    the fitted overhead's range over nearby kernel sets (`overhead_bytes_fitted_low/high`,
    what the CLI and model tables show, for variants whose kernel sets vary with the shape)."""
    # Speed (issue 29): the gemms' tilings are computed once for all the gemm models below
    # (this estimate's and the band's alternative fits: `timing.gemm.shared_tilings`), on the
    # float64 arrays made here and kept unchanged until the columns are built.
    with shared_tilings():
        return _estimate(shapes, config, groups=groups, ranges=ranges)


def _estimate(
    shapes: npt.ArrayLike, config: EstimateConfig, *, groups: npt.ArrayLike | None, ranges: bool
) -> Columns:
    array = as_array(shapes)
    M, K, N = array[:, 0], array[:, 1], array[:, 2]
    Mf, Kf, Nf = (x.astype(np.float64) for x in (M, K, N))  # converted once, used by every model
    if groups is not None and not config.grouped:
        raise ValueError("groups are for a grouped config (routed experts)")
    groups = 1 if groups is None else np.asarray(groups, dtype=np.float64)
    gemm = config.gemm_model
    bf16_gemm_s, bf16_extra = linear_gemm_times(gemm, None, Mf, Kf, Nf, groups=groups)
    fp8_gemm_s, fp8_extra = linear_gemm_times(
        gemm, config.recipe, Mf, Kf, Nf, implementation=config.implementation, groups=groups
    )
    bandwidth = config.bandwidth_bytes_per_s
    columns: dict[str, Column] = {
        "M": M,
        "K": K,
        "N": N,
        "recipe": Labels.repeat(config.recipe.name, len(M)),
        "implementation": Labels.repeat(config.implementation.value, len(M)),
        "context": Labels.repeat(config.context.name, len(M)),
        "bf16_gemm_s": bf16_gemm_s,
        "fp8_gemm_s": fp8_gemm_s,
    }
    for level in (Level.WORST, Level.IDEAL):
        nbytes, small_kernels = overhead_bytes(config, level, Mf, Kf, Nf)
        nbytes = nbytes * groups
        overhead_s = nbytes / bandwidth + small_kernels * config.small_kernel_s
        columns[f"overhead_bytes_{level.value}"] = nbytes
        columns[f"overhead_s_{level.value}"] = overhead_s
        columns[f"fp8_s_{level.value}"] = fp8_gemm_s + overhead_s
        columns[f"speedup_{level.value}"] = bf16_gemm_s / (fp8_gemm_s + overhead_s)
    if config.calibration is not None:
        columns.update(
            calibrated_columns(
                config.calibration,
                config.variant,
                Mf,
                Kf,
                Nf,
                bf16_gemm_s=bf16_gemm_s,
                fp8_gemm_s=fp8_gemm_s,
                ranges=ranges,
            )
        )
        rates = config.class_rates
        if config.calibration.public is not None and config.gemm is None:
            columns.update(public_band_columns(config, columns, Mf, Kf, Nf))
        elif rates is not None:
            columns.update(band_columns(config, columns, rates, Mf, Kf, Nf))
    code, table = fp8_reason_codes(config.recipe, M, K, N)
    columns["fp8_ok"] = code == 0
    columns["fp8_reason"] = Labels(code, tuple(table))
    columns["gemm_extrapolated"] = bf16_extra | fp8_extra
    return Columns(columns)


def fitted_overhead(
    calibration: Calibration, variant: Variant, shapes: ShapeArrays
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The calibration's overhead at each shape: the float8 graph's fitted non-gemm kernels less
    the bf16 graph's of the same context (bytes, seconds), and the context's own seconds.
    A variant whose kernels are read off torchao's code (`traffic.block_scaled`) has no fits:
    its kernels' bytes are timed by the calibration's kernel-time model, beside the bf16
    graph's context (nothing fuses into torchao's opaque casts)."""
    bf16 = calibration.variant(variant.baseline.key)
    bf16_bytes, context_s = fitted_kernels(
        bf16.traffic.kernel_sets, calibration.kernel_time, bf16.variant, shapes
    )
    if uses_read_off(calibration, variant):
        nbytes, seconds = read_off_kernels(calibration, variant, shapes)
        return nbytes, seconds, context_s
    fp8 = calibration.variant(variant.key)
    fp8_bytes, fp8_s = fitted_kernels(
        fp8.traffic.kernel_sets, calibration.kernel_time, fp8.variant, shapes
    )
    return fp8_bytes - bf16_bytes, fp8_s - context_s, context_s


def reads_off(variant: Variant) -> bool:
    """Whether the variant's kernels are read off their code, never compiled here: torchao's
    MX, blockwise and NVFP4 casts (`traffic.block_scaled`), Transformer Engine's linears
    (`traffic.te`)."""
    return variant.implementation is Implementation.TE or is_read_off(variant.recipe)


def calibration_covers(calibration: Calibration, variant: Variant) -> bool:
    """The calibration has the variant's graphs, or (read-off kernels, `reads_off`) the bf16
    graph of its context and the kernel-time model that times them."""
    if reads_off(variant):
        return calibration.has(variant.baseline.key)
    return calibration.has(variant.key)


def uses_read_off(calibration: Calibration, variant: Variant) -> bool:
    """Whether the calibration times this variant's read-off kernels (it has no graphs of it)."""
    return reads_off(variant) and not calibration.has(variant.key)


def _read_off_kind_bytes(
    variant: Variant, M: np.ndarray, K: np.ndarray, N: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The read-off kernels' bytes and launches per kind at every shape (as
    `fitted_kind_bytes`)."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for kind, fn, launched in _read_off_functions(variant):
        nbytes = np.broadcast_to(np.asarray(fn(M, K, N), dtype=np.float64), np.shape(M))
        total, count = out.get(kind, (0.0, 0.0))
        out[kind] = (total + nbytes, count + float(launched) * np.ones(np.shape(M)))
    return out


@lru_cache(maxsize=16)
def _read_off_functions(variant: Variant) -> tuple[tuple[str, ShapeFunction, bool], ...]:
    """numpy functions (M, K, N) -> bytes of each read-off kernel, with its kind and whether
    it is a launch of its own (TE's fused norm runs in the bf16 graph too); built once."""
    recipe = variant.recipe
    assert recipe is not None, "bf16 reads nothing off"
    if variant.implementation is Implementation.TE:
        norm = Role.INPUT in context_fused_roles(variant.context, Implementation.TE)
        casts = tuple(
            (
                KERNEL_KINDS[kernel],
                _numpy_function(traffic.bytes_total),
                kernel not in IN_BF16_GRAPH,
            )
            for kernel, traffic in te_kernels(recipe, norm_before=norm)
        )
        # current scaling's compute_scale_from_amax: a launch each, no bytes worth counting
        scales = ((KERNEL_KINDS[SCALE_KERNEL], _no_bytes, True),) * scale_kernels(recipe)
        return casts + scales
    return tuple(
        (kernel_kind(kernel), _numpy_function(traffic.bytes_total), True)
        for kernel, traffic in torchao_kernels(recipe)
    )


def _no_bytes(M: np.ndarray, K: np.ndarray, N: np.ndarray) -> float:
    return 0.0


def read_off_kernels(
    calibration: Calibration, variant: Variant, shapes: ShapeArrays
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and seconds of a variant's read-off kernels at each shape (their worst model: the
    traffic their code moves), each timed by the calibration's model of its kernel kind; a
    kernel the bf16 graph runs too (TE's norm writing float8) costs its bytes' change alone."""
    nbytes = np.zeros(np.shape(shapes.M))
    seconds = np.zeros(np.shape(shapes.M))
    time_s = calibration.kernel_time.time_s
    for kind, fn, launched in _read_off_functions(variant):
        moved = np.broadcast_to(np.asarray(fn(shapes.M, shapes.K, shapes.N), float), nbytes.shape)
        nbytes = nbytes + moved
        seconds = seconds + time_s(kind, moved) - (0.0 if launched else time_s(kind, 0.0))
    return nbytes, seconds


def te_weight_cast_s(calibration: Calibration, variant: Variant, shapes: ShapeArrays) -> np.ndarray:
    """Seconds of a Transformer Engine variant's weight cast at each shape, of what
    `read_off_kernels` times: its weight kernels and (current scaling) the weight's scale
    kernel. TE caches the cast weight across a step's microbatches (`traffic.te`), so a step
    of several pays this once (`engine.step.parts`)."""
    recipe = variant.recipe
    assert recipe is not None and variant.implementation is Implementation.TE, "TE's alone"
    time_s = calibration.kernel_time.time_s
    seconds = np.zeros(np.shape(shapes.M))
    for kernel, traffic in te_kernels(recipe, norm_before=False):
        if traffic.role is Role.WEIGHT:
            moved = np.asarray(_numpy_function(traffic.bytes_total)(shapes.M, shapes.K, shapes.N))
            seconds = seconds + time_s(KERNEL_KINDS[kernel], np.broadcast_to(moved, seconds.shape))
    if scale_kernels(recipe):
        seconds = seconds + time_s(KERNEL_KINDS[SCALE_KERNEL], np.zeros(seconds.shape))
    return seconds


def calibrated_columns(
    calibration: Calibration,
    variant: Variant,
    M: np.ndarray,
    K: np.ndarray,
    N: np.ndarray,
    *,
    bf16_gemm_s: np.ndarray,
    fp8_gemm_s: np.ndarray,
    ranges: bool = False,
) -> dict[str, np.ndarray]:
    """The calibrated prediction: device clock first, the wall clock where it was measured."""
    bf16 = calibration.variant(variant.baseline.key)
    read_off = uses_read_off(calibration, variant)
    # read-off kernels: the fixed costs of the bf16 graph (no graph of theirs was compiled)
    fp8 = bf16 if read_off else calibration.variant(variant.key)
    shapes = ShapeArrays(M, K, N)  # one: the overhead and its range share its distances
    overhead_bytes, overhead_s, context_s = fitted_overhead(calibration, variant, shapes)
    bf16_s, fp8_s = bf16_gemm_s, fp8_gemm_s + overhead_s
    if bf16.fixed is not None and fp8.fixed is not None:
        bf16_s = bf16_gemm_s * bf16.fixed.gemm_factor + bf16.fixed.device_extra_s
        fp8_s = fp8_gemm_s * fp8.fixed.gemm_factor + overhead_s + fp8.fixed.device_extra_s
    columns = {"overhead_bytes_fitted": overhead_bytes}
    # over the kernel sets compiled at the calibration shapes around each shape; none where
    # every calibration shape compiled to one set
    found = (
        ranges
        and not read_off
        and kernel_set_range(fp8.traffic.kernel_sets, bf16.traffic.kernel_sets, shapes)
    )
    if found:
        columns |= {"overhead_bytes_fitted_low": found[0], "overhead_bytes_fitted_high": found[1]}
    columns |= {
        "overhead_s_fitted": overhead_s,
        "bf16_s": bf16_s,
        "fp8_s": fp8_s,
        "speedup": bf16_s / fp8_s,
        "context_s": context_s,
        "speedup_context": (bf16_s + context_s) / (fp8_s + context_s),
    }
    if calibration.is_measured and bf16.fixed is not None and fp8.fixed is not None:
        bf16_wall_s = bf16.fixed.wall_s(bf16_s + context_s)
        fp8_wall_s = fp8.fixed.wall_s(fp8_s + context_s)
        columns |= {
            "bf16_wall_s": bf16_wall_s,
            "fp8_wall_s": fp8_wall_s,
            "speedup_wall": bf16_wall_s / fp8_wall_s,
        }
    return columns


def public_band_columns(
    config: EstimateConfig,
    columns: Mapping[str, Column],
    M: np.ndarray,
    K: np.ndarray,
    N: np.ndarray,
) -> dict[str, np.ndarray]:
    """The band of a calibration timed by the public time model: the speedups under the fits
    at its two ends (`PublicTimes.ends`: the alternative fits whose heatmap speedups ran lowest
    and highest) and its own, widened by the cross-validated residual quantiles of the cells."""
    calibration = config.calibration
    assert calibration is not None and calibration.public is not None
    public = calibration.public
    speedups = [np.asarray(columns["speedup"])]
    contexts = [np.asarray(columns["speedup_context"])]
    for part in public.ends(config.gpu.name):
        alternative = retimed(calibration, part, config.gpu)
        gemm = alternative.gemm_model
        bf16_gemm_s, _ = linear_gemm_times(gemm, None, M, K, N)
        fp8_gemm_s, _ = linear_gemm_times(
            gemm, config.recipe, M, K, N, implementation=config.implementation
        )
        found = calibrated_columns(
            alternative, config.variant, M, K, N, bf16_gemm_s=bf16_gemm_s, fp8_gemm_s=fp8_gemm_s
        )
        speedups.append(found["speedup"])
        contexts.append(found["speedup_context"])
    bound = speedup_bound(
        config.gpu, config.recipe, config.implementation, M, K, N, columns["bf16_s"]
    )
    ends = (public.residual_low, public.residual_high)
    low, high = widened(speedups, *ends, bound)
    context_low, context_high = widened(contexts, *ends, bound)
    return {
        "speedup_low": low,
        "speedup_high": high,
        "speedup_context_low": context_low,
        "speedup_context_high": context_high,
    }


def band_columns(
    config: EstimateConfig,
    columns: Mapping[str, Column],
    rates: ClassRates,
    M: np.ndarray,
    K: np.ndarray,
    N: np.ndarray,
    *,
    contain: bool = True,
) -> dict[str, np.ndarray]:
    """speedup_low/speedup_high (and the context's) around the calibrated `speedup`.

    Each fitted kernel is timed at its class's range (a file without classes: the widest range
    of the classes its kind can be, `timing.band.kind_rate`), the float8 overhead as the
    float8 graph's kernels less the bf16 graph's with every class at one end of its range at a
    time (`timing.band.corner_times`), each gemm at its mode's factor (slow accumulation in
    backward), the overhead scaled over the nearby kernel sets' byte range; the ends pair
    float8's slow end with bf16's fast end (`timing.band.linear_speedup_bands`). A measured
    calibration's rates are its own, so its band is its fit residual. With `contain` the band
    is stretched to hold the calibration's own `speedup` (a measured calibration's per-kernel
    factors can put it outside the per-kind rates); for the shipped traffic calibrations it
    holds it anyway, at every fit shape (tested without `contain`)."""
    calibration = config.calibration
    assert calibration is not None
    bf16 = calibration.variant(config.variant.baseline.key)
    shapes = ShapeArrays(M, K, N)
    bf16_kinds = fitted_kind_bytes(
        bf16.traffic.kernel_sets, shapes, kernel_time=calibration.kernel_time
    )
    zero = np.zeros(len(M))
    if uses_read_off(calibration, config.variant):
        # torchao's opaque casts are the overhead on their own, beside the bf16 graph
        fp8_kinds = _read_off_kind_bytes(config.variant, M, K, N)
        fp8 = bf16
        extra = {kind: (zero, zero) for kind in bf16_kinds}
    else:
        fp8 = calibration.variant(config.variant.key)
        fp8_kinds = fitted_kind_bytes(
            fp8.traffic.kernel_sets, shapes, kernel_time=calibration.kernel_time
        )
        extra = bf16_kinds
    overhead = CornerTimes(zero, zero, zero)
    context = CornerTimes(zero, zero, zero)
    for kind in sorted(set(fp8_kinds) | set(bf16_kinds)):
        rate = kind_rate(rates, kind)
        fp8_bytes, fp8_count = fp8_kinds.get(kind, (zero, zero))
        less_bytes, less_count = extra.get(kind, (zero, zero))
        bf16_bytes, bf16_count = bf16_kinds.get(kind, (zero, zero))
        overhead = overhead + corner_times(
            rate, nbytes=fp8_bytes - less_bytes, kernels=fp8_count - less_count
        )
        context = context + corner_times(rate, nbytes=bf16_bytes, kernels=bf16_count)
    gemm = config.gemm_model
    fp8_gemm = linear_gemm_band(
        gemm, config.recipe, M, K, N, rates=rates, implementation=config.implementation
    )
    bf16_gemm = linear_gemm_band(gemm, None, M, K, N, rates=rates)
    if (
        bf16.fixed is not None and fp8.fixed is not None
    ):  # measured: in-step gemm factors and unmodelled kernels
        fp8_gemm = _scaled(fp8_gemm, fp8.fixed.gemm_factor, fp8.fixed.device_extra_s)
        bf16_gemm = _scaled(bf16_gemm, bf16.fixed.gemm_factor, bf16.fixed.device_extra_s)
    spread = None
    if "overhead_bytes_fitted_low" in columns:
        spread = kernel_set_spread(
            fitted_bytes=columns["overhead_bytes_fitted"],
            low_bytes=columns["overhead_bytes_fitted_low"],
            high_bytes=columns["overhead_bytes_fitted_high"],
        )
    alone, with_context = linear_speedup_bands(
        bf16_gemm=bf16_gemm,
        fp8_gemm=fp8_gemm,
        overhead=overhead,
        context=context,
        spread=spread,
    )
    speedup = np.asarray(columns["speedup"])
    context_speedup = np.asarray(columns["speedup_context"])
    if not contain:
        speedup = context_speedup = np.full(len(M), np.nan)
    return {
        "speedup_low": np.fmin(alone.low, speedup),
        "speedup_high": np.fmax(alone.high, speedup),
        "speedup_context_low": np.fmin(with_context.low, context_speedup),
        "speedup_context_high": np.fmax(with_context.high, context_speedup),
    }


def _scaled(band: TimeBand, factor: float, extra_s: float) -> TimeBand:
    return TimeBand(
        band.low * factor + extra_s, band.expected * factor + extra_s, band.high * factor + extra_s
    )


def square_breakeven(
    config: EstimateConfig, column: str = "speedup_worst", *, max_size: int = 65536
) -> int | None:
    """Smallest S (a multiple of 16) where float8 wins at M = K = N = S and keeps winning up to
    `max_size`; None if it never does."""
    sizes = np.arange(FP8_DIM_MULTIPLE, max_size + 1, FP8_DIM_MULTIPLE)
    return _breakeven(sizes, estimate(np.repeat(sizes[:, None], 3, axis=1), config)[column])


def _breakeven(sizes: np.ndarray, speedup: np.ndarray) -> int | None:
    losing = np.flatnonzero(speedup <= 1.0)
    if len(losing) == len(sizes):
        return None
    if len(losing) == 0:
        return int(sizes[0])
    if losing[-1] == len(sizes) - 1:
        return None
    return int(sizes[losing[-1] + 1])


def breakevens(config: EstimateConfig) -> dict[str, int | None]:
    """The square breakeven at each overhead level the configuration has; for the fitted
    levels also at the band's ends ('fitted high end', 'fitted low end')."""
    levels = {"ideal": "speedup_ideal", "worst, the seed's model": "speedup_worst"}
    if config.calibration is not None:
        levels = {
            "ideal": "speedup_ideal",
            "fitted": "speedup",
            "worst, the seed's model": "speedup_worst",
        }
        if not config.context.is_standalone:
            levels["fitted, with the context's kernels"] = "speedup_context"
        if config.class_rates is not None:
            for level, column in list(levels.items()):
                if column in ("speedup", "speedup_context"):
                    levels[f"{level} high end"] = f"{column}_high"
                    levels[f"{level} low end"] = f"{column}_low"
    sizes = np.arange(FP8_DIM_MULTIPLE, 65536 + 1, FP8_DIM_MULTIPLE)
    squares = estimate(np.repeat(sizes[:, None], 3, axis=1), config)  # every level's column
    return {level: _breakeven(sizes, squares[column]) for level, column in levels.items()}


def decisions(
    frame: Columns, *, policy: DecisionPolicy, margin: float = 0.0
) -> tuple[Labels, np.ndarray]:
    """Per row: 'convert', 'keep' or 'uncertain' and whether the band straddles the threshold
    (`decision.frame_decisions`): on the band where the estimate is calibrated, else on the
    estimate at its decision level (the seed's worst case). Labels, as the recipe and reason
    columns: an array of strings costs a Python string per row (a tenth of a 200,000-shape
    estimate once pandas takes it); files read the same."""
    criterion = "speedup" if "speedup" in frame else "speedup_worst"
    codes, straddling = frame_decisions(frame, criterion=criterion, policy=policy, margin=margin)
    return Labels(codes, tuple(d.value for d in DECISIONS)), straddling


def implausible(frame: Columns, config: EstimateConfig, found: dict[str, int | None]) -> list[Note]:
    """Warnings for results no GPU can produce: a speedup above `speedup_bound` (float8's
    gemms faster than the part's peaks), or a breakeven below the smallest shape the
    calibration saw."""
    bf16 = [c for c in ("bf16_s", "bf16_gemm_s") if c in frame]
    bf16_s = np.max([frame[c] for c in bf16], axis=0)
    bound = speedup_bound(
        config.gpu, config.recipe, config.implementation, frame["M"], frame["K"], frame["N"], bf16_s
    )
    warnings = []
    for column in [c for c in frame.columns if c.startswith("speedup")]:
        over = frame[column] / bound
        if np.nanmax(over, initial=0.0) > 1.0 + 1e-9:
            i = int(np.nanargmax(over))
            row = frame.row(i)
            warnings.append(
                note(
                    Topic.IMPLAUSIBLE,
                    column=column,
                    value=float(row[column]),
                    shape=(int(row["M"]), int(row["K"]), int(row["N"])),
                    bound=float(bound[i]),
                    gpu=config.gpu.name,
                )
            )
    calibration = config.calibration
    if calibration is not None:
        smallest = min(min(shape) for shape in calibration.fit_shapes)
        size = found.get("fitted")
        if size is not None and size < smallest:
            warnings.append(note(Topic.BREAKEVEN_EXTRAPOLATED, size=size, smallest=smallest))
    return warnings
