"""The calibration's measurements on a device: each one returns a checkpoint record.

- `variant_kernels`: one compiled forward+backward of a variant at a shape, captured (bytes of
  every kernel) and profiled (every kernel's device time, the step on both clocks): the
  kernels timed are the kernels counted, at the cost of one compile;
- `gemm_grid`: device times of one gemm dtype and role over a grid of sizes, each run after an
  L2 flush, on random data;
- `copy_bandwidth`: what a device copy reaches, read + write.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from f8roof.calibration.records import GemmMeasurement, KernelMeasurement, StepMeasurement
from f8roof.errors import F8RoofError
from f8roof.profiler.trace import KernelEvent, is_gemm_kernel, profile_steps
from f8roof.traffic.fit import Shape, kernel_keys, shape_text
from f8roof.traffic.gemm_roles import GemmRole, linear_shape
from f8roof.traffic.variant import Variant

COPY_BYTES = {"cuda": 2**30, "cpu": 2**26}


def same_kernel(launch: str, event: str) -> bool:
    """Whether a trace event is the launch so named in the generated code. Triton and C++
    kernels keep their names; an ATen op the wrapper calls (`aten.sum`, finishing a mix-order
    reduction) is `aten::sum` in a CPU trace and an `at::native` kernel in a CUDA one."""
    if launch == event:
        return True
    if launch.startswith("aten."):
        return event == f"aten::{launch[5:]}" or "at::native::" in event
    return False


def launch_durations(events: Sequence[KernelEvent], names: list[str]) -> list[float | None]:
    """Median duration of each named launch, matched in launch order within each step (the
    forward and backward graphs may both have a kernel called `triton_poi_fused_0`)."""
    by_step: dict[int | None, list[KernelEvent]] = {}
    for event in events:
        by_step.setdefault(event.step, []).append(event)
    samples: list[list[float]] = [[] for _ in names]
    for step_events in by_step.values():
        position = 0
        for index, name in enumerate(names):
            for j in range(position, len(step_events)):
                if same_kernel(name, step_events[j].name):
                    samples[index].append(step_events[j].duration_s)
                    position = j + 1
                    break
    return [statistics.median(s) if s else None for s in samples]


def variant_kernels(
    variant: Variant,
    shape: Shape,
    *,
    device: str,
    warmup: int,
    iters: int,
    trace_path: Path | None = None,
    code_dir: Path | None = None,
) -> dict[str, Any]:
    """Capture and time one compiled step: its kernels (bytes, polynomial, device time) and the
    step on both clocks. Raises when a launch has no profiler event or no readable bytes."""
    from f8roof.profiler.capture import capture_and_measure
    from f8roof.profiler.timing import measure_step

    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)

    def measure(step: Callable[[], object]):
        return measure_step(
            step,
            device=device,
            warmup=warmup,
            iters=iters,
            trace_path=str(trace_path) if trace_path else None,
        )

    captured, times = capture_and_measure(variant, shape, device=device, measure=measure)
    if code_dir is not None:
        code_dir.mkdir(parents=True, exist_ok=True)
        for graph, source in captured.code.items():
            (code_dir / f"{variant.slug}_{shape_text(shape)}_{graph.value}.py").write_text(source)
    launches = list(captured.overhead_launches)
    durations = launch_durations(times.events, [k.name for k in launches])
    missing = [k.name for k, d in zip(launches, durations) if d is None]
    where = f"{variant.key} at {shape_text(shape)}"
    if missing:
        raise F8RoofError(f"{where}: the profiler shows no event of {', '.join(missing)}")
    samples = captured.samples()
    unreadable = [s.name for s in samples if s.polynomial is None]
    if unreadable:
        raise F8RoofError(
            f"{where}: bytes of {unreadable[0]} cannot be read off its buffers; calibration "
            "shapes need M, K, N distinct"
        )
    kernels = [
        KernelMeasurement(
            variant.key,
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
            sample.kernel_class,
        ).to_json()
        for k, sample, key, duration in zip(launches, samples, kernel_keys(samples), durations)
    ]
    step = StepMeasurement(
        variant.key, *shape, times.device_s, times.gemm_s, times.wall_s, times.launches
    )
    return {
        "kernels": kernels,
        "step": asdict(step),
        "disagreements": list(captured.disagreements()),
    }


def gemm_grid(
    dtype: str, role: GemmRole, points: Sequence[Shape], *, device: str, iters: int
) -> list[dict[str, Any]]:
    """Device time of one gemm per grid point (m, k, n in gemm dims), median over `iters` runs.
    On CUDA one profiler session covers the grid, each run after an L2 flush."""
    from f8roof.profiler.timing import gemm_fn, time_fn

    if device == "cpu":  # no device clock: the host clock around a synchronous call is it
        return [
            asdict(
                GemmMeasurement(
                    dtype,
                    role.value,
                    m,
                    k,
                    n,
                    time_fn(
                        gemm_fn(dtype, role.value, *linear_shape(role, m, k, n), device=device),
                        warmup=1,
                        iters=iters,
                        device=device,
                    ).median_s,
                )
            )
            for m, k, n in points
        ]

    def fns() -> Iterator[Callable[[], object]]:
        for m, k, n in points:
            yield gemm_fn(dtype, role.value, *linear_shape(role, m, k, n), device=device)

    events = profile_steps(fns(), iters=iters, device=device, warmup_each=1)
    per_step: dict[int, float] = {}
    for event in events:
        if event.step is not None and is_gemm_kernel(event.name):
            per_step[event.step] = per_step.get(event.step, 0.0) + event.duration_s
    records = []
    for index, (m, k, n) in enumerate(points):
        steps = range(index * iters, (index + 1) * iters)
        times = [per_step[s] for s in steps if s in per_step]
        if not times:
            raise F8RoofError(f"no gemm kernel seen for {dtype} {role.value} {m}x{k}x{n}")
        records.append(
            asdict(GemmMeasurement(dtype, role.value, m, k, n, statistics.median(times)))
        )
    return records


def copy_bandwidth(*, device: str, iters: int) -> dict[str, float]:
    """Device copy bandwidth, counting read + write."""
    import torch

    from f8roof.profiler.timing import time_fn

    nbytes = COPY_BYTES[device]
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    timing = time_fn(lambda: dst.copy_(src), warmup=2, iters=iters, device=device)
    return {"copy_bandwidth_bytes_per_s": 2 * nbytes / timing.median_s}
