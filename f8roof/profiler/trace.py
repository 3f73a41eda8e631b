"""torch.profiler trace -> per-kernel device durations of a compiled training step.

`profile_step` is the only part that runs anything: warm up, profile a few annotated
iterations, export the chrome trace. The rest are pure functions over the trace text, tested
on checked-in traces.

What counts as a kernel depends on where the step ran:
- CUDA: device events (`cat` kernel, gpu_memcpy, gpu_memset). Each is assigned to the step
  whose annotation contains its launch (matched through the `correlation` id), not its own
  start: the CPU runs ahead, so a kernel may start after its step's annotation has closed.
  A device event whose launch is not in the trace (launched before the profiler started, still
  queued on the GPU when it did) belongs to no step: its own start would put it in the first
  step, which did not launch it.
- CPU (no device events in the trace): the ops the compiled graph's wrapper calls directly,
  i.e. the children of the `## Call CompiledFxGraph ... ##` ranges: Inductor C++ kernels (seen
  only when compiled with `cpp.enable_kernel_profile`) and extern ops such as
  `aten::_scaled_mm` and `aten::mm`.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

STEP_ANNOTATION = "f8roof_step#"  # record_function name of profiled iteration i: f"{...}{i}"
L2_FLUSH_BYTES = 256 * 2**20

_STEP_RE = re.compile(r"^(?:f8roof_step|ProfilerStep)#(\d+)$")
_COMPILED_GRAPH_CALL = "## Call CompiledFxGraph"
_DEVICE_CATEGORIES = {
    "kernel": "device_kernel",
    "gpu_memcpy": "device_memory",
    "gpu_memset": "device_memory",
}
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
# `cpp.enable_kernel_profile` names the event of C++ kernel `cpp_fused_x` `graph_<n>_cpp_fused_x`.
_CPP_KERNEL_PREFIX_RE = re.compile(r"^graph_\d+_(?=cpp_)")
# Vendor gemm kernels have no name in Inductor's code (extern `_scaled_mm` / `mm` calls):
# cuBLAS(Lt) `sm90_xmma_gemm_*`, `nvjet_*`, `cublasLt::splitKreduce_kernel` (and any kernel
# taking cuBLAS parameters: gemv, the Lt epilogue); CUTLASS `void cutlass::Kernel2<...>` and
# the rowwise `_scaled_mm` `cutlass::device_kernel<...>`; on CPU the aten ops themselves.
# Not `fbgemm_gpu::...`: FBGEMM's embedding, permute and bucketize kernels are no gemms (seen
# in a real training trace, tests/data/README.md).
_GEMM_RE = re.compile(
    r"(?<!fb)gemm|nvjet|cutlass|xmma|cublas|^aten::(?:_scaled_mm|mm|addmm|bmm|baddbmm|matmul)$",
    re.IGNORECASE,
)


class EventKind(str, Enum):
    DEVICE_KERNEL = "device_kernel"  # a GPU kernel
    DEVICE_MEMORY = "device_memory"  # a GPU memcpy or memset
    CPU_KERNEL = "cpu_kernel"  # an op the compiled graph called directly on CPU


@dataclass(frozen=True)
class KernelEvent:
    name: str
    duration_s: float
    kind: EventKind
    step: int | None  # index of the profiled iteration; None when the trace has no annotations
    # When the CPU launched it (trace clock, seconds): a device event's launch, a CPU kernel's
    # own start; None for a device event whose launch is not in the trace.
    launch_s: float | None = None


def is_gemm_kernel(name: str) -> bool:
    return _GEMM_RE.search(name) is not None


def _ns(microseconds: float) -> int:
    # Chrome traces give µs with ns decimals; integers make nesting comparisons exact.
    return round(microseconds * 1000)


def _span(event: dict[str, Any]) -> tuple[int, int]:
    start = _ns(event["ts"])
    return start, start + _ns(event.get("dur", 0))


@dataclass(frozen=True)
class _Steps:
    """The annotated steps' CPU time ranges, sorted by start, for lookups in O(log n): a
    calibration's gemm grid has thousands of steps and as many kernels."""

    starts: list[int]
    ranges: list[tuple[int, int, int]]  # (start_ns, end_ns, step), sorted

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> _Steps:
        ranges = []
        for event in events:
            match = _STEP_RE.match(event.get("name", ""))
            # gpu_user_annotation repeats the range on the GPU timeline, which lags the CPU's.
            if match and event.get("cat") != "gpu_user_annotation":
                ranges.append((*_span(event), int(match.group(1))))
        ranges.sort()
        return cls([start for start, _, _ in ranges], ranges)

    def at(self, t_ns: int) -> int | None:
        """The step whose range contains `t_ns` (the earlier one where two ranges touch)."""
        # Steps follow each other, so only the last two ranges starting at or before t_ns
        # can contain it.
        index = bisect.bisect_right(self.starts, t_ns)
        for start, end, step in self.ranges[max(index - 2, 0) : index]:
            if start <= t_ns <= end:
                return step
        return None


def _device_events(events: list[dict[str, Any]], steps: _Steps) -> list[tuple[int, KernelEvent]]:
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in _LAUNCH_CATEGORIES and "correlation" in e.get("args", {})
    }
    out = []
    for event in events:
        kind = _DEVICE_CATEGORIES.get(event.get("cat", ""))
        if kind is None:
            continue
        launch = launches.get(event.get("args", {}).get("correlation"))
        launch_ns = None if launch is None else _span(launch)[0]
        start, end = _span(event)
        out.append(
            (
                start,
                KernelEvent(
                    name=event["name"],
                    duration_s=(end - start) * 1e-9,
                    kind=EventKind(kind),
                    step=None if launch_ns is None else steps.at(launch_ns),
                    launch_s=None if launch_ns is None else launch_ns * 1e-9,
                ),
            )
        )
    return out


def _cpu_events(events: list[dict[str, Any]], steps: _Steps) -> list[tuple[int, KernelEvent]]:
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event.get("cat") == "cpu_op":
            by_thread[event["pid"], event["tid"]].append(event)
    out = []
    for thread_events in by_thread.values():
        # Outer ranges first at equal start, so a stack recovers the call tree.
        thread_events.sort(key=lambda e: (_span(e)[0], -_span(e)[1]))
        stack: list[dict[str, Any]] = []
        for event in thread_events:
            start, end = _span(event)
            while stack and _span(stack[-1])[1] < end:
                stack.pop()
            if stack and stack[-1]["name"].startswith(_COMPILED_GRAPH_CALL):
                name = _CPP_KERNEL_PREFIX_RE.sub("", event["name"])
                out.append(
                    (
                        start,
                        KernelEvent(
                            name=name,
                            duration_s=(end - start) * 1e-9,
                            kind=EventKind.CPU_KERNEL,
                            step=steps.at(start),
                            launch_s=start * 1e-9,
                        ),
                    )
                )
            stack.append(event)
    return out


def _trace_json(trace: str | bytes | os.PathLike[str]) -> Any:
    if isinstance(trace, os.PathLike):
        trace = Path(trace).read_bytes()
    if isinstance(trace, bytes) and trace[:2] == b"\x1f\x8b":  # gzip magic
        trace = gzip.decompress(trace)
    return json.loads(trace)


def parse_chrome_trace(trace: str | bytes | os.PathLike[str]) -> list[KernelEvent]:
    """The kernels of a `torch.profiler` chrome trace, in start order (see module docstring).

    `trace`: the JSON text (str), its bytes, gzip-compressed or not, or a path to either
    (a `Path`; a str is always the text itself)."""
    parsed = _trace_json(trace)
    raw = parsed["traceEvents"] if isinstance(parsed, dict) else parsed
    events = [e for e in raw if e.get("ph") == "X"]
    steps = _Steps.of(events)
    found = _device_events(events, steps) or _cpu_events(events, steps)
    return [event for _, event in sorted(found, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class StepTotals:
    """One profiled step, the median over the annotated iterations."""

    device_s: float  # every device kernel of a step, summed
    gemm_s: float  # the gemm kernels among them
    launches: int  # kernels per step


def step_totals(events: Iterable[KernelEvent]) -> StepTotals:
    """Per-step sums of a trace's kernels, median over steps. Events outside the annotated
    steps (the L2 flush between them) are left out when the trace has annotations."""
    events = list(events)
    annotated = any(e.step is not None for e in events)
    steps: dict[int | None, list[KernelEvent]] = {}
    for event in events:
        if annotated and event.step is None:
            continue
        steps.setdefault(event.step, []).append(event)
    if not steps:
        raise ValueError("the profiler recorded no kernel of the step")
    per_step = list(steps.values())
    return StepTotals(
        device_s=statistics.median(sum(e.duration_s for e in s) for s in per_step),
        gemm_s=statistics.median(
            sum(e.duration_s for e in s if is_gemm_kernel(e.name)) for s in per_step
        ),
        launches=round(statistics.median(len(s) for s in per_step)),
    )


def profile_step(
    step_fn: Callable[[], object],
    *,
    warmup: int,
    iters: int,
    device: str,
    trace_path: str | None = None,
) -> list[KernelEvent]:
    """Run `step_fn` `warmup` times, then profile `iters` annotated runs and parse the trace.

    Compilation must happen in the warm-up: C++ kernels appear in CPU traces only when
    compiled under `cpp.enable_kernel_profile`, which is set here for the whole call. On CPU,
    code Dynamo compiled before this call (guards do not include Inductor settings, so an
    equal module compiled earlier counts) shows only its extern ops; `torch._dynamo.reset()`
    first when that matters. CUDA traces always show every kernel.
    """
    import torch  # the parsing above needs no torch

    with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}):
        for _ in range(warmup):
            step_fn()
        return profile_steps([step_fn], iters=iters, device=device, trace_path=trace_path)


def profile_steps(
    step_fns: Iterable[Callable[[], object]],
    *,
    iters: int,
    device: str,
    trace_path: str | None = None,
    warmup_each: int = 0,
) -> list[KernelEvent]:
    """Profile `iters` annotated runs of each function in turn (steps numbered on across
    them: function i's runs are steps i*iters .. i*iters+iters-1) and parse the trace.
    `step_fns` may be a generator, so each function's tensors exist only while it runs;
    `warmup_each` untimed calls precede each function's runs, outside any annotation.

    On CUDA each run starts after a 256 MB write that evicts L2 (50-60 MB on H100/H200),
    outside the annotation: its kernel belongs to no step and is left out of durations. No
    synchronization between runs: the CPU runs ahead as in training.
    """
    import torch

    is_cuda = torch.device(device).type == "cuda"
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if is_cuda else None
    activities = [torch.profiler.ProfilerActivity.CPU]
    if is_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    step = 0
    with torch.profiler.profile(activities=activities) as prof:
        for step_fn in step_fns:
            for _ in range(warmup_each):
                step_fn()
            for _ in range(iters):
                if flush is not None:
                    flush.fill_(1)
                with torch.profiler.record_function(f"{STEP_ANNOTATION}{step}"):
                    step_fn()
                step += 1
        if is_cuda:
            torch.cuda.synchronize(device)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(trace_path or Path(tmp) / "trace.json")
        prof.export_chrome_trace(str(path))
        return parse_chrome_trace(path)  # a ".gz" trace_path is exported gzip-compressed
