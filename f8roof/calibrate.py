"""Run the calibration measurements on a device, checkpoint each one, fit, write the file.

What is measured, per variant (bf16 and each recipe) and fit shape: the compiled forward+
backward's kernels (bytes from the generated code, durations from the profiler) and the step
on both clocks; then, per gemm dtype and role, a grid of gemm times. Every finished measurement
is appended to `<out>.partial.jsonl`, so `--resume` after a crash re-measures nothing.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import f8roof
from f8roof.calibration import (
    BF16,
    Calibration,
    Ceilings,
    Environment,
    GemmMeasurement,
    KernelMeasurement,
    StepMeasurement,
)
from f8roof.checkpoint import Checkpoint
from f8roof.errors import F8RoofError
from f8roof.fitting import Measurements, fit_calibration
from f8roof.models.fit import FIT_SHAPES, Shape, kernel_keys
from f8roof.models.gemm import GEMM_ROLES, fp8_gemm_dtype
from f8roof.models.recipes import Recipe

DEFAULT_RECIPES = ("tensorwise", "tensorwise_delayed", "rowwise", "rowwise_gw_hp")
GPU_GEMM_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
# CPU: tiny shapes in general position, M, K, N distinct and never 16 (an amax history's
# length), so CI runs the whole pipeline for real in minutes. All have M < N: Inductor's C++
# backend fuses the backward differently when M > N, and one kernel set over all nine lets
# the independent solve (7 shapes + 2 to check) run.
CPU_SHAPES: tuple[Shape, ...] = (
    (32, 48, 64),
    (48, 32, 80),
    (32, 64, 96),
    (48, 80, 112),
    (64, 48, 128),
    (80, 112, 96),
    (32, 112, 144),
    (64, 96, 160),
    (96, 64, 128),
)
CPU_GEMM_SIZES = (32, 64, 128, 256)  # covers every gemm dim of CPU_SHAPES and validation's
COPY_BYTES = {"cuda": 2**30, "cpu": 2**26}


@dataclass(frozen=True)
class CalibrateOptions:
    device: str
    recipes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    gemm_sizes: tuple[int, ...]
    warmup: int = 3
    iters: int = 10
    budget_s: float | None = None
    artifacts: Path | None = field(default=None, compare=False)  # traces and generated code

    @classmethod
    def defaults(
        cls,
        device: str,
        *,
        quick: bool = False,
        recipes: tuple[str, ...] | None = None,
        budget_s: float | None = None,
        artifacts: Path | None = None,
    ) -> CalibrateOptions:
        """Full set on a GPU; `quick` takes every other fit shape (6: bytes are read off the
        buffers at each, but the independent linear solve needs 9 of one kernel set) and fewer
        iterations; the gemm grid stays whole, as interpolating over 4x steps costs accuracy."""
        names = recipes or (("tensorwise",) if device == "cpu" else DEFAULT_RECIPES)
        for name in names:
            Recipe.from_name(name)  # refuse unknown names before any work
        if device == "cpu":
            return cls(device, names, CPU_SHAPES, CPU_GEMM_SIZES, 1, 3, budget_s, artifacts)
        if quick:
            return cls(device, names, FIT_SHAPES[::2], GPU_GEMM_SIZES, 2, 5, budget_s, artifacts)
        return cls(device, names, FIT_SHAPES, GPU_GEMM_SIZES, 3, 10, budget_s, artifacts)

    def header(self) -> dict[str, Any]:
        """What identifies the run for --resume."""
        return {
            "device": self.device,
            "recipes": list(self.recipes),
            "shapes": [list(s) for s in self.shapes],
            "gemm_sizes": list(self.gemm_sizes),
            "warmup": self.warmup,
            "iters": self.iters,
        }

    @property
    def variants(self) -> tuple[str, ...]:
        return (BF16, *self.recipes)

    @property
    def gemm_dtypes(self) -> tuple[str, ...]:
        dtypes = {"bf16"}
        for name in self.recipes:
            recipe = Recipe.from_name(name)
            dtypes |= {fp8_gemm_dtype(recipe, role) for role in GEMM_ROLES}
        return tuple(sorted(dtypes))


def require_device(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise F8RoofError("no CUDA GPU here: calibrate --device cuda needs one (try --device cpu)")
    if device not in ("cuda", "cpu"):
        raise F8RoofError(f"unknown device {device!r}: use cuda or cpu")


def environment(device: str) -> Environment:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        name, units = props.name, props.multi_processor_count
    else:
        name, units = platform.processor() or platform.machine() or "cpu", torch.get_num_threads()
    return Environment(
        device=device,
        device_name=name,
        sm_count=units,
        torch=torch.__version__,
        triton=triton_version,
        cuda=torch.version.cuda or "none",
        date=datetime.date.today().isoformat(),
        f8roof=f8roof.__version__,
    )


def _shape_name(shape: Shape) -> str:
    return "x".join(map(str, shape))


def launch_durations(events, names: list[str]) -> list[float | None]:
    """Median duration of each named launch, matched in launch order within each step (the
    forward and backward graphs may both have a kernel called `triton_poi_fused_0`)."""
    by_step: dict[int | None, list] = {}
    for event in events:
        by_step.setdefault(event.step, []).append(event)
    samples: list[list[float]] = [[] for _ in names]
    for step_events in by_step.values():
        position = 0
        for index, name in enumerate(names):
            for j in range(position, len(step_events)):
                if step_events[j].name == name:
                    samples[index].append(step_events[j].duration_s)
                    position = j + 1
                    break
    return [statistics.median(s) if s else None for s in samples]


def measure_variant(
    variant: str, shape: Shape, options: CalibrateOptions, *, keep_trace: bool
) -> dict[str, Any]:
    """Capture the kernels of one compiled step and time them: one checkpoint record."""
    from f8roof.models.variant import Implementation, Variant
    from f8roof.profiler.capture import capture_and_measure
    from f8roof.profiler.timing import measure_step

    recipe = None if variant == BF16 else Recipe.from_name(variant)
    trace_path = None
    if options.artifacts is not None and keep_trace:
        trace_path = options.artifacts / "traces" / f"{variant}_{_shape_name(shape)}.json"
        trace_path.parent.mkdir(parents=True, exist_ok=True)

    def measure(step: Callable[[], object]):
        return measure_step(
            step,
            device=options.device,
            warmup=options.warmup,
            iters=options.iters,
            trace_path=str(trace_path) if trace_path else None,
        )

    captured, times = capture_and_measure(
        Variant.of(recipe, Implementation.REFERENCE), shape, device=options.device, measure=measure
    )
    if options.artifacts is not None:
        for graph, source in captured.code.items():
            path = options.artifacts / "code" / f"{variant}_{_shape_name(shape)}_{graph.value}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
    overhead = list(captured.overhead_launches)
    durations = launch_durations(times.events, [k.name for k in overhead])
    missing = [k.name for k, d in zip(overhead, durations) if d is None]
    if missing:
        raise F8RoofError(
            f"{variant} at {shape}: the profiler shows no event of {', '.join(missing)}"
        )
    samples = captured.samples()
    unreadable = [s.name for s in samples if s.polynomial is None]
    if unreadable:
        raise F8RoofError(
            f"{variant} at {shape}: bytes of {unreadable[0]} cannot be read off its "
            "buffers; calibration shapes need M, K, N distinct"
        )
    return {
        "kernels": [
            KernelMeasurement(
                variant,
                *shape,
                key,
                k.name,
                k.graph.value,
                k.kind.value,
                k.role,
                k.bytes_read,
                k.bytes_written,
                sample.workspace,
                duration,
                sample.polynomial,
            ).to_json()
            for k, sample, key, duration in zip(overhead, samples, kernel_keys(samples), durations)
        ],
        "step": asdict(
            StepMeasurement(
                variant, *shape, times.device_s, times.gemm_s, times.wall_s, times.launches
            )
        ),
        "disagreements": list(captured.disagreements()),
    }


def gemm_points(sizes: tuple[int, ...]) -> list[Shape]:
    return [(m, k, n) for m in sizes for k in sizes for n in sizes]


def measure_gemm_grid(dtype: str, role: str, options: CalibrateOptions) -> list[dict[str, Any]]:
    """Device time of each gemm of the grid. On CUDA one profiler session covers the grid,
    each repetition its own annotated step after an L2 flush; on CPU the wall clock is the
    device clock."""
    import torch

    from f8roof.profiler.timing import gemm_fn, time_fn
    from f8roof.profiler.trace import (
        L2_FLUSH_BYTES,
        STEP_ANNOTATION,
        is_gemm_kernel,
        parse_chrome_trace,
    )

    linear_dims = {
        "output": lambda m, k, n: (m, k, n),
        "grad_input": lambda m, k, n: (m, n, k),
        "grad_weight": lambda m, k, n: (k, n, m),
    }[role]
    points = gemm_points(options.gemm_sizes)
    records = []
    if options.device == "cpu":
        for m, k, n in points:
            fn = gemm_fn(dtype, role, *linear_dims(m, k, n), device="cpu")
            timing = time_fn(fn, warmup=1, iters=options.iters, device="cpu")
            records.append(asdict(GemmMeasurement(dtype, role, m, k, n, timing.median_s)))
        return records
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
    ) as prof:
        for index, (m, k, n) in enumerate(points):
            fn = gemm_fn(dtype, role, *linear_dims(m, k, n), device="cuda")
            fn()
            for rep in range(options.iters):
                flush.fill_(1)
                with torch.profiler.record_function(
                    f"{STEP_ANNOTATION}{index * options.iters + rep}"
                ):
                    fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemms.json"
        prof.export_chrome_trace(str(path))
        events = parse_chrome_trace(path.read_text())
    per_step: dict[int, float] = {}
    for event in events:
        if event.step is not None and is_gemm_kernel(event.name):
            per_step[event.step] = per_step.get(event.step, 0.0) + event.duration_s
    for index, (m, k, n) in enumerate(points):
        times = [
            per_step[s]
            for s in range(index * options.iters, (index + 1) * options.iters)
            if s in per_step
        ]
        if not times:
            raise F8RoofError(f"no gemm kernel seen for {dtype} {role} {m}x{k}x{n}")
        records.append(asdict(GemmMeasurement(dtype, role, m, k, n, statistics.median(times))))
    return records


def measure_copy(options: CalibrateOptions) -> dict[str, float]:
    """Device copy bandwidth, counting read + write."""
    import torch

    from f8roof.profiler.timing import time_fn

    nbytes = COPY_BYTES[options.device]
    src = torch.randn(nbytes // 4, device=options.device)
    dst = torch.empty_like(src)
    timing = time_fn(lambda: dst.copy_(src), warmup=2, iters=options.iters, device=options.device)
    return {"copy_bandwidth_bytes_per_s": 2 * nbytes / timing.median_s}


@dataclass
class Task:
    key: str
    label: str
    run: Callable[[], dict[str, Any]]


def tasks(options: CalibrateOptions) -> list[Task]:
    out = [Task("copy", "device copy bandwidth", lambda: measure_copy(options))]
    for variant in options.variants:
        for index, shape in enumerate(options.shapes):
            keep = index in (0, len(options.shapes) // 2)  # traces are large: two per variant
            out.append(
                Task(
                    f"step/{variant}/{_shape_name(shape)}",
                    f"{variant} {_shape_name(shape)}",
                    lambda v=variant, s=shape, keep=keep: measure_variant(
                        v, s, options, keep_trace=keep
                    ),
                )
            )
    for dtype in options.gemm_dtypes:
        for role in GEMM_ROLES:
            out.append(
                Task(
                    f"gemms/{dtype}/{role.value}",
                    f"gemms {dtype} {role.value}",
                    lambda d=dtype, r=role.value: {"gemms": measure_gemm_grid(d, r, options)},
                )
            )
    return out


def measurements_from(
    records: list[dict[str, Any]], env: Environment, options: CalibrateOptions
) -> Measurements:
    by_key = {r["key"]: r for r in records}
    gemms = [
        GemmMeasurement(**g) for r in records if r["key"].startswith("gemms/") for g in r["gemms"]
    ]
    shapes = set(options.shapes)
    kernels = [
        KernelMeasurement.from_json(k, source="checkpoint", shapes=shapes)
        for r in records
        if r["key"].startswith("step/")
        for k in r["kernels"]
    ]
    steps = [StepMeasurement(**r["step"]) for r in records if r["key"].startswith("step/")]
    best = {}
    for g in gemms:
        flops = 2 * g.m * g.k * g.n / g.time_s
        best[g.dtype] = max(best.get(g.dtype, 0.0), flops)
    ceilings = Ceilings(
        bf16_flops=best["bf16"],
        fp8_flops=max(v for d, v in best.items() if d.startswith("fp8"))
        if len(best) > 1
        else best["bf16"],
        copy_bandwidth_bytes_per_s=by_key["copy"]["copy_bandwidth_bytes_per_s"],
        launch_floor_s=min(k.time_s for k in kernels),
    )
    return Measurements(
        env, ceilings, tuple(options.shapes), tuple(gemms), tuple(kernels), tuple(steps)
    )


def calibrate(
    options: CalibrateOptions,
    out: Path,
    *,
    resume: bool,
    progress: Callable[[list[Task]], Any] | None = None,
) -> tuple[Calibration, list[str]]:
    """Measure (or resume), fit, save atomically; return the calibration and capture warnings."""
    require_device(options.device)
    env = environment(options.device)
    checkpoint = Checkpoint(
        out.with_name(out.name + ".partial.jsonl"),
        {**options.header(), "device_name": env.device_name},
        resume=resume,
    )
    todo = [t for t in tasks(options) if checkpoint.done(t.key) is None]
    start = time.monotonic()
    iterator = progress(todo) if progress else todo
    for task in iterator:
        if options.budget_s is not None and time.monotonic() - start > options.budget_s:
            left = len(todo) - sum(1 for t in todo if checkpoint.done(t.key))
            raise F8RoofError(
                f"budget of {options.budget_s:.0f} s spent with {left} measurements left; "
                f"checkpoint kept at {checkpoint.path}: run again with --resume"
            )
        checkpoint.add(task.key, task.run())
    measurements = measurements_from(checkpoint.records, env, options)
    calibration = fit_calibration(measurements)
    calibration.save(out)
    warnings = [
        f"{r['key']}: {line}" for r in checkpoint.records for line in r.get("disagreements", [])
    ]
    checkpoint.remove()
    return calibration, warnings
