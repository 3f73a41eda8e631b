"""The worst-case and ideal models beside what torch.compile actually generates.

Per shape: overhead bytes at the three levels and each actual kernel, with what it computes
(the linear's float8 work, its neighbours', or both fused); then the exact fit of the actual
bytes in M, K, N (one fit per kernel set) beside the model expressions, and their
differences. Actual above the seed's "worst" case means the seed's model is wrong there.

With a context (a norm before the linear, an activation after it) the float8 graph holds the
neighbours' kernels too, so the bf16 graph of the same context is compiled beside it at every
shape: actual overhead = the float8 graph's non-gemm bytes minus the bf16 graph's. Where
Inductor fused a cast or an amax into a neighbour's kernel, that difference is smaller than
the standalone linear's overhead, and the report names those kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from f8roof.calibration.file import Calibration
from f8roof.columns import Columns
from f8roof.engine.estimate import EstimateConfig, fitted_overhead
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.hardware.presets import GPU
from f8roof.notes import Note, Topic, note
from f8roof.timing.band import ClassRates, memory_time_band
from f8roof.timing.kernel_classes import GpuFamily
from f8roof.timing.overhead import nearest_kernel_set
from f8roof.traffic.fit import (
    CPU_FIT_SHAPES,
    FIT_SHAPES,
    KernelSet,
    Polynomial,
    Shape,
    ShapeSample,
    TrafficFit,
    fit_traffic,
    from_sympy,
    kernel_keys,
    kind_family,
)
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.recipes import Role
from f8roof.traffic.variant import Implementation, Variant
from f8roof.traffic.worst_ideal import ideal_traffic, worst_traffic

if TYPE_CHECKING:
    from f8roof.profiler.capture import Capture, KernelLaunch

_Item = TypeVar("_Item")


class Progress(Protocol):
    """A progress bar: takes the items of a long loop and yields them."""

    def __call__(self, items: Sequence[_Item], /) -> Iterable[_Item]: ...


# a kernel as `capture_differences` matches it: graph, kind, role ("-": none), bytes
KernelKey = tuple[str, str, str, int]


@dataclass(frozen=True)
class ShapeComparison:
    shape: Shape
    bytes_worst: int
    bytes_ideal: int
    capture: Capture  # of the float8 graph
    baseline: Capture | None  # of the bf16 graph of the same context; None: standalone

    @property
    def bytes_actual(self) -> int:
        """The float8 graph's non-gemm bytes, less the bf16 graph's (its context kernels)."""
        base = 0 if self.baseline is None else self.baseline.overhead_bytes
        return self.capture.overhead_bytes - base

    def fused_into_neighbours(self) -> list[KernelLaunch]:
        """Launches of the float8 graph computing float8 work inside a neighbour's kernel."""
        return [k for k in self.capture.launches if k.work.value == "fused"]


@dataclass(frozen=True)
class Comparison:
    variant: Variant
    device: str
    gpu: str | None
    versions: Mapping[str, str]  # "none": not installed
    worst: Polynomial
    ideal: Polynomial
    shapes: tuple[ShapeComparison, ...]
    fit: TrafficFit | None  # None when not asked for
    baseline_fit: TrafficFit | None  # the bf16 graph's, with a context and a fit
    # what each kernel class runs at on the target GPU (timing/kernel_classes.py); None: no
    # target GPU of a known family (kernels then show their class only)
    rates: ClassRates | None = None

    def kernel_time_s(self, launch: KernelLaunch) -> tuple[float, float, float] | None:
        """(low, expected, high) seconds of one non-gemm launch at its class's range; None for
        a gemm (its time is the gemm model's), a class without a rate, or no target GPU."""
        kernel_class = getattr(launch, "kernel_class", None)
        if self.rates is None or kernel_class is None or not kernel_class.is_memory:
            return None
        band = memory_time_band(kernel_class, launch.bytes_total, self.rates)
        return float(band.low), float(band.expected), float(band.high)

    def baseline_total(self, kernel_set: KernelSet) -> Polynomial | None:
        """The bf16 graph's exact bytes over the kernel set's shapes: its kernel set holding them all.
        None without a context (nothing to subtract) or where no bf16 kernel set holds them."""
        if self.baseline_fit is None:
            return None
        return next(
            (
                b.total
                for b in self.baseline_fit.kernel_sets
                if set(kernel_set.shapes) <= set(b.shapes)
            ),
            None,
        )


def samples_of(captures: Iterable[Capture]) -> list[ShapeSample]:
    return [ShapeSample(c.shape, tuple(c.samples())) for c in captures]


def compare(
    variant: Variant,
    shapes: list[Shape],
    *,
    device: str,
    gpu: GPU | None,
    fit: bool,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
    progress: Progress | None = None,
) -> Comparison:
    from f8roof.profiler.capture import capture
    from f8roof.profiler.device import require_cpu_rowwise
    from f8roof.profiler.graphs import versions

    if variant.recipe is None:
        raise ValueError("compare needs a float8 variant; bf16 is its baseline")
    require_cpu_rowwise([variant.recipe], device=device)
    recipe, implementation = variant.recipe, variant.implementation
    assert recipe is not None and implementation is not None, "a float8 variant"
    worst = from_sympy(
        worst_traffic(recipe, implementation=implementation, fused=fused, limited=limited).total
    )
    ideal = from_sympy(ideal_traffic(recipe, implementation=implementation, fused=fused).total)
    fit_shapes = (CPU_FIT_SHAPES if device == "cpu" else FIT_SHAPES) if fit else ()
    work = list(dict.fromkeys([*shapes, *fit_shapes]))
    graphs = [variant] if variant.context.is_standalone else [variant, variant.baseline]
    captured = {}
    for shape, graph in progress(_pairs(work, graphs)) if progress else _pairs(work, graphs):
        captured[graph, shape] = capture(graph, shape, device=device, gpu=gpu)
    baseline = variant.baseline if len(graphs) == 2 else None
    rows = tuple(
        ShapeComparison(
            s,
            int(worst.exact(s)),
            int(ideal.exact(s)),
            captured[variant, s],
            None if baseline is None else captured[baseline, s],
        )
        for s in shapes
    )

    def fitted(graph: Variant | None) -> TrafficFit | None:
        if not fit or graph is None:
            return None
        return fit_traffic(samples_of([captured[graph, s] for s in fit_shapes]))

    return Comparison(
        variant,
        device,
        gpu.name if gpu and device == "codegen" else None,
        versions(),
        worst,
        ideal,
        rows,
        fitted(variant),
        fitted(baseline),
        class_rates_for(gpu),
    )


def class_rates_for(gpu: GPU | None) -> ClassRates | None:
    """The public class ranges for a GPU preset's family, at its datasheet bandwidth."""
    if gpu is None:
        return None
    try:
        family = GpuFamily.of(name=gpu.name, compute_capability=gpu.compute_capability)
    except ModelError:
        return None
    return ClassRates.from_table(
        family=family, bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s
    )


@dataclass(frozen=True)
class ReadOffKernel:
    """One kernel torchao runs, its bytes at one shape read off its code."""

    kernel: str  # torchao's kernel (`triton_to_mxfp8_dim0`), or `to_blocked` (Inductor's)
    name: str  # the model's pass (`input.cast_rows`)
    kind: str  # the Inductor kernel kind its time is modelled by
    bytes_read: int
    bytes_written: int


@dataclass(frozen=True)
class ReadOffShape:
    shape: Shape
    bytes_worst: int
    bytes_ideal: int
    kernels: tuple[ReadOffKernel, ...]

    @property
    def bytes_actual(self) -> int:
        return sum(k.bytes_read + k.bytes_written for k in self.kernels)


@dataclass(frozen=True)
class ReadOffComparison:
    """compare for a variant whose casts are hand-written kernels this machine cannot generate
    (`traffic.block_scaled.READ_OFF_REASONS`): their traffic read off torchao's code."""

    variant: Variant
    gpu: str | None
    versions: Mapping[str, str]
    reason: str
    worst: Polynomial
    ideal: Polynomial
    shapes: tuple[ReadOffShape, ...]


def read_off_compare(
    variant: Variant,
    shapes: list[Shape],
    *,
    gpu: GPU | None,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
) -> ReadOffComparison:
    """The read-off kernels at each shape beside the worst and ideal models; nothing compiles."""
    from f8roof.profiler.graphs import versions
    from f8roof.traffic.block_scaled import bytes_source, kernel_kind, torchao_kernels

    recipe, implementation = variant.recipe, variant.implementation
    assert recipe is not None and implementation is not None, "a float8 variant"
    worst = from_sympy(
        worst_traffic(recipe, implementation=implementation, fused=fused, limited=limited).total
    )
    ideal = from_sympy(ideal_traffic(recipe, implementation=implementation, fused=fused).total)
    kernels = [
        (
            kernel,
            traffic.name,
            kernel_kind(kernel),
            from_sympy(traffic.bytes_read),
            from_sympy(traffic.bytes_written),
        )
        for kernel, traffic in torchao_kernels(recipe)
    ]
    rows = tuple(
        ReadOffShape(
            s,
            int(worst.exact(s)),
            int(ideal.exact(s)),
            tuple(
                ReadOffKernel(kernel, name, kind, int(read.exact(s)), int(written.exact(s)))
                for kernel, name, kind, read, written in kernels
            ),
        )
        for s in shapes
    )
    return ReadOffComparison(
        variant,
        gpu.name if gpu else None,
        versions(),
        bytes_source(recipe)[1],
        worst,
        ideal,
        rows,
    )


def _pairs(shapes: list[Shape], graphs: list[Variant]) -> list[tuple[Shape, Variant]]:
    return [(s, g) for s in shapes for g in graphs]


@dataclass(frozen=True)
class CalibrationCheck:
    """A calibration's fitted overhead bytes beside what this compile generated, per shape: does
    the code here still match the code the calibration's fits describe?"""

    source: str
    shapes: tuple[Shape, ...]
    fitted: tuple[int, ...]
    generated: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "shapes": [
                {"M": M, "K": K, "N": N, "fitted": f, "generated": g}
                for (M, K, N), f, g in zip(self.shapes, self.fitted, self.generated)
            ],
        }


def against_calibration(c: Comparison, calibration: Calibration, name: str) -> CalibrationCheck:
    shapes = tuple(s.shape for s in c.shapes)
    M, K, N = (np.array(dim, dtype=np.float64) for dim in zip(*shapes))
    nbytes, _, _ = fitted_overhead(calibration, c.variant, ShapeArrays(M, K, N))
    return CalibrationCheck(
        f"{name} ({calibration.source})",
        shapes,
        tuple(round(float(b)) for b in nbytes),
        tuple(s.bytes_actual for s in c.shapes),
    )


def capture_differences(expected: Capture, actual: Capture) -> list[tuple[str, KernelKey]]:
    """How two captures of one variant and shape differ (e.g. codegen-only vs compiled on the
    GPU): kernels present in one and not the other, matched as an order-free set by graph,
    kind, role and bytes; names are ignored (codegen names follow decomposed ops). Each
    difference is (the device only it ran on, (graph, kind, role, bytes))."""

    def kernel_set(c: Capture) -> list[KernelKey]:
        return sorted((s.graph, s.kind, s.role or "-", s.nbytes) for s in c.samples())

    left, right = kernel_set(expected), kernel_set(actual)
    only = []
    for item in left:
        if item in right:
            right.remove(item)
        else:
            only.append((expected.device.value, item))
    return only + [(actual.device.value, item) for item in right]


def codegen_columns(
    frame: Columns, config: EstimateConfig, *, progress: Progress | None = None
) -> dict[str, np.ndarray]:
    """Overhead from the exact kernels Inductor generates for each shape (codegen-only, no GPU
    needed), timed with the calibration's kernel-time model. Seconds per shape, not microseconds:
    for the shapes that matter, not sweeps."""
    from f8roof.profiler.capture import capture

    calibration = config.calibration
    if calibration is None:
        raise F8RoofError(
            f"{term('overhead')} codegen times kernels by a calibration: give "
            f"{term('calibration')} (or a GPU with a shipped one)"
        )
    variants = [config.variant]
    if not config.context.is_standalone:
        variants.append(config.variant.baseline)  # the context's own kernels, subtracted
    shapes = list(zip(frame["M"], frame["K"], frame["N"]))
    M, K, N = (np.array(c, dtype=np.float64) for c in zip(*shapes))
    nbytes, time_s = np.zeros(len(shapes)), np.zeros(len(shapes))
    for sign, variant in zip((1, -1), variants):
        fit = calibration.variant(variant.key)
        owners = nearest_kernel_set(fit.traffic.kernel_sets, ShapeArrays(M, K, N))
        for i, shape in enumerate(progress(shapes) if progress else shapes):
            m, k, n = (int(x) for x in shape)
            samples = capture(variant, (m, k, n), device="codegen", gpu=config.gpu).samples()
            kernel_set = fit.traffic.kernel_sets[owners[i]]
            # The nearest calibration shape's per-kernel factors apply where it has this set.
            same_set = ShapeSample(shape, tuple(samples)).signature == tuple(
                (
                    k.graph,
                    kind_family(k.kind),
                    k.role,
                    str(k.nbytes),
                    str(k.scattered_elements),
                    str(k.reread),
                )
                for k in kernel_set.kernels
            )
            for key, sample in zip(kernel_keys(samples), samples):
                kernel_id = f"{fit.variant}/{owners[i]}/{key}" if same_set else None
                nbytes[i] += sign * sample.nbytes
                time_s[i] += sign * float(
                    calibration.kernel_time.time_s(
                        sample.kind,
                        sample.nbytes,
                        kernel_id=kernel_id,
                        kernel_class=sample.kernel_class,
                        scattered_elements=sample.scattered_elements,
                        reread_bytes=sample.reread,
                        arithmetic=sample.arithmetic,
                    )
                )
    fp8_s = frame["fp8_s"] - frame["overhead_s_fitted"] + time_s
    return {
        "overhead_bytes_codegen": nbytes,
        "overhead_s_codegen": time_s,
        "fp8_s_codegen": fp8_s,
        "speedup_codegen": frame["bf16_s"] / fp8_s,
    }


def version_warning(calibration: Calibration) -> list[Note]:
    """Its fits describe the code of the versions that generated it; say where this differs."""
    from f8roof.profiler.graphs import version_mismatch

    env = calibration.environment
    mismatch = version_mismatch({"torch": env.torch, "triton": env.triton, "torchao": env.torchao})
    return [note(Topic.VERSIONS_DIFFER, mismatch=mismatch)] if mismatch else []


@dataclass(frozen=True)
class CompareRequest:
    """`f8roof compare`'s options, in the CLI's words."""

    recipe: str = "tensorwise"
    scaling: str | None = None
    implementation: str | None = None
    before: str | None = None
    after: str | None = None
    shape_texts: tuple[str, ...] = ()
    device: str | None = None  # codegen | cuda | cpu; None: cuda on a GPU, else codegen
    gpu: str = "h100"  # the codegen target
    fused: str | None = None  # the seed's F; None: what the context implies
    compile_limitations: bool = False
    fit: bool = True
    calibration: str | None = None  # a file, or "shipped"


@dataclass(frozen=True, eq=False)
class CompareResult:
    comparison: Comparison | ReadOffComparison
    check: CalibrationCheck | None


def run_compare(
    request: CompareRequest,
    *,
    progress: Progress | None = None,
    warn: Callable[[Note], None] = lambda note: None,
) -> CompareResult:
    """Resolve the request (recipe, implementation, context, F flags, calibration, device),
    then compile and compare. Everything refusable is refused before the first compile; `warn`
    hears each note as soon as it is known."""
    from f8roof.engine.resolve import load_calibration, one_recipe, parse_roles, recipe_names
    from f8roof.hardware.presets import resolve_gpu
    from f8roof.hardware.support import check_recipes
    from f8roof.inputs.shapes import parse_shape
    from f8roof.profiler.device import require_device
    from f8roof.profiler.graphs import resolve_implementation
    from f8roof.traffic.block_scaled import is_read_off
    from f8roof.traffic.variant import Context, context_fused_roles

    target = resolve_gpu(request.gpu)
    # a recipe the target cannot run: one line, first
    check_recipes(target, ",".join(recipe_names(request.recipe)))
    recipe = one_recipe(request.recipe, request.scaling)
    # MX and blockwise exist in torchao only: it is the default for them wherever torch runs
    default = "torchao" if recipe.is_block_scaled else None
    impl = resolve_implementation(request.implementation or default)
    variant = Variant.of(recipe, impl, Context.from_names(request.before, request.after))
    if request.implementation is None:
        warn(note(Topic.DEFAULT_IMPLEMENTATION, implementation=impl.value))
    calibration, name = load_calibration(request.calibration, target)
    if calibration is not None:
        calibration.variant(variant.key)  # refused now, in one line, if it lacks the variant
        calibration.variant(variant.baseline.key)
        for found in version_warning(calibration):
            warn(found)
    shapes = [parse_shape(t) for t in request.shape_texts] or [(4096, 4096, 4096)]
    device = request.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "codegen"
    elif device == "cuda":
        require_device("cuda")
    fused = parse_roles(request.fused) if request.fused else context_fused_roles(variant.context)
    limited = frozenset(Role) if request.compile_limitations else frozenset()
    if (
        device == "codegen"
        and impl is Implementation.REFERENCE
        and target.fp8_dtype_family.value == "fnuz"
    ):
        raise F8RoofError(
            f"the reference casts to float8_e4m3fn/e5m2, {target.name} runs fnuz: "
            f"use {term('implementation')} torchao"
        )
    if is_read_off(recipe) and device != "cuda":
        if calibration is not None:
            raise F8RoofError(
                f"{recipe.name}'s kernels are read off torchao's code, with no fits to check: "
                f"drop {term('calibration')}"
            )
        warn(note(Topic.READ_OFF, recipe=recipe.name))
        comparison = read_off_compare(variant, shapes, gpu=target, fused=fused, limited=limited)
        return CompareResult(comparison, None)
    result = compare(
        variant,
        shapes,
        device=device,
        gpu=target,
        fit=request.fit,
        fused=fused,
        limited=limited,
        progress=progress,
    )
    check = against_calibration(result, calibration, name) if calibration else None
    return CompareResult(result, check)
