"""Trace parsing on real CUDA traces that torch.profiler wrote on A100s (tests/data/README.md).

What f8roof's own GPU runs will write looks the same: `kernel`, `gpu_memcpy` and `gpu_memset`
device events joined to `cuda_runtime` / `cuda_driver` launches by `correlation`, step
annotations on the CPU thread, `gpu_user_annotation` ranges on the device timeline.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from f8roof.profiler.trace import (
    EventKind,
    KernelEvent,
    is_gemm_kernel,
    parse_chrome_trace,
    step_totals,
)

DATA = Path(__file__).parent / "data"
TRITON = DATA / "triton_example_triton_example.json.gz"  # one torch.compile'd kernel
SIMPLE_ADD = DATA / "critical_path_simple_add.json.gz"  # annotations, but no steps
NCCL = DATA / "nccl_parser_config_nccl_data.json.gz"  # DDP, gpu_user_annotation ranges
TRAINING = DATA / "negative_queue_length_values_check_rank0.json.gz"  # a GPU 160 ms behind
TRACES = (TRITON, SIMPLE_ADD, NCCL, TRAINING)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def _raw(path: Path) -> list[dict[str, Any]]:
    return [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]]


@pytest.fixture(scope="module")
def parsed() -> dict[Path, list[KernelEvent]]:
    return {path: parse_chrome_trace(path) for path in TRACES}


@pytest.fixture(scope="module")
def raw() -> dict[Path, list[dict[str, Any]]]:
    return {path: _raw(path) for path in TRACES}


def _device(raw_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in raw_events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES]


def _launch_s(raw_events: list[dict[str, Any]]) -> dict[int, float]:
    """correlation -> when the CPU launched it, in seconds."""
    return {
        e["args"]["correlation"]: e["ts"] * 1e-6
        for e in raw_events
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATEGORIES
    }


def _step_ranges(raw_events: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """ProfilerStep#i -> (start, end) in seconds, from the CPU-side annotations."""
    return {
        int(e["name"].split("#")[1]): (e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6)
        for e in raw_events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    }


@pytest.mark.parametrize(
    ("path", "kernels", "memory"),
    [(TRITON, 1, 0), (SIMPLE_ADD, 79, 19), (NCCL, 2700, 1074), (TRAINING, 6080, 1667)],
    ids=lambda v: v.name.split(".")[0] if isinstance(v, Path) else str(v),
)
def test_every_device_event_is_a_kernel_event(path, kernels, memory, parsed, raw) -> None:
    events = parsed[path]
    device = _device(raw[path])
    kinds = Counter(e.kind for e in events)
    assert kinds[EventKind.DEVICE_KERNEL] == kernels == sum(e["cat"] == "kernel" for e in device)
    assert kinds[EventKind.DEVICE_MEMORY] == memory == len(device) - kernels
    assert len(events) == len(device)  # no CPU op, launch or annotation counted as a kernel
    assert sum(e.duration_s for e in events) == pytest.approx(
        sum(e["dur"] for e in device) * 1e-6, rel=1e-9
    )


@pytest.mark.parametrize("path", [TRITON, SIMPLE_ADD, NCCL], ids=lambda p: p.name.split(".")[0])
def test_every_device_event_is_joined_to_its_launch(path, parsed, raw) -> None:
    assert all(e.launch_s is not None for e in parsed[path])
    launches = _launch_s(raw[path])
    assert all(e["args"]["correlation"] in launches for e in _device(raw[path]))


def test_kernels_launched_before_the_trace_belong_to_no_step(parsed, raw) -> None:
    """The training trace opens with the GPU 160 ms behind: 872 device events of the step
    before ProfilerStep#550 run during it, their launches before the profiler started (their
    correlation ids precede every recorded launch's). Assigned by their own start, they made
    step 550 2,247 events long against 1,375 for every other step."""
    events = parsed[TRAINING]
    unjoined = [e for e in events if e.launch_s is None]
    assert len(unjoined) == 872 and {e.step for e in unjoined} == {None}
    launches = _launch_s(raw[TRAINING])
    first = min(launches)
    before = [e for e in _device(raw[TRAINING]) if e["args"]["correlation"] < first]
    assert len(before) == 872
    assert all(e["args"]["correlation"] not in launches for e in before)
    first_step = _step_ranges(raw[TRAINING])[550]
    assert all(first_step[0] <= e["ts"] * 1e-6 <= first_step[1] for e in before)
    assert Counter(e.step for e in events if e.step is not None) == {
        step: 1375 for step in range(550, 555)
    }


def test_triton_kernel_with_its_duration_and_step(parsed, raw) -> None:
    (event,) = parsed[TRITON]
    assert event.name == "triton_poi_fused_add_cos_sin_0"
    assert event.kind is EventKind.DEVICE_KERNEL
    assert event.duration_s == pytest.approx(1.76e-6, rel=1e-9)
    launch = next(e for e in raw[TRITON] if e.get("cat") == "cuda_driver")
    assert launch["name"] == "cuLaunchKernel" and launch["args"]["correlation"] == 35
    assert event.launch_s == pytest.approx(launch["ts"] * 1e-6, abs=1e-9)
    assert event.step == 1  # ProfilerStep#1 holds the launch


def _step_of(ranges: dict[int, tuple[float, float]], t_s: float) -> int | None:
    return next((step for step, (a, b) in ranges.items() if a <= t_s <= b), None)


def test_steps_follow_the_launch_not_the_device_clock(parsed, raw) -> None:
    """In the training trace the GPU runs 160 ms behind the CPU: of each step's 1,375 events,
    880 start on the GPU after the step's CPU range closed, those of the last step after
    every annotation. Each still belongs to the step that launched it."""
    ranges = _step_ranges(raw[TRAINING])
    assert sorted(ranges) == [550, 551, 552, 553, 554]
    for event in parsed[TRAINING]:
        if event.launch_s is not None:
            assert event.step == _step_of(ranges, event.launch_s)
    launch_s = _launch_s(raw[TRAINING])
    late: Counter[int] = Counter()
    for e in _device(raw[TRAINING]):
        launched = launch_s.get(e["args"]["correlation"])
        if launched is not None:
            step = _step_of(ranges, launched)
            late[step] += e["ts"] * 1e-6 > ranges[step][1]
    assert late == {step: 880 for step in range(550, 555)}


def test_gpu_user_annotations_never_assign_steps(parsed, raw) -> None:
    """The DDP trace has 30 gpu_user_annotation ranges (forward, backward, optimizer, NCCL
    collectives on the device timeline) beside its three ProfilerStep annotations; every event
    belongs to the step whose CPU range holds its launch."""
    assert sum(e.get("cat") == "gpu_user_annotation" for e in raw[NCCL]) == 30
    ranges = _step_ranges(raw[NCCL])
    events = parsed[NCCL]
    assert Counter(e.step for e in events) == {4: 1258, 5: 1258, 6: 1258}
    assert all(e.step == _step_of(ranges, e.launch_s) for e in events)


def test_gpu_user_annotation_of_a_step_is_ignored(parsed, raw) -> None:
    """Newer kineto repeats ProfilerStep#i on the device timeline. Add such ranges to the
    training trace, spanning each step's device events: the device lags by most of a step,
    so step i's device range holds many of step i+1's launches. Nothing changes."""
    ranges = _step_ranges(raw[TRAINING])
    launch_s = _launch_s(raw[TRAINING])
    spans: dict[int, list[float]] = {}
    correlations = {e["args"]["correlation"] for e in _device(raw[TRAINING])}
    for e in _device(raw[TRAINING]):
        launched = launch_s.get(e["args"]["correlation"])
        if launched is not None:
            span = spans.setdefault(_step_of(ranges, launched), [e["ts"], e["ts"] + e["dur"]])
            span[:] = [min(span[0], e["ts"]), max(span[1], e["ts"] + e["dur"])]
    device_ranges = [
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": f"ProfilerStep#{step}",
            "pid": 0,
            "tid": 7,
            "ts": start,
            "dur": end - start,
            "args": {},
        }
        for step, (start, end) in spans.items()
    ]
    assert len(device_ranges) == 5
    kernel_launches = {launch_s[c] for c in correlations if c in launch_s}
    next_launches = [t for t in kernel_launches if _step_of(ranges, t) == 551]
    inside = [t for t in next_launches if spans[550][0] <= t * 1e6 <= spans[550][1]]
    assert len(inside) > 200  # 297 of 1,320
    trace = {"traceEvents": raw[TRAINING] + device_ranges}
    assert parse_chrome_trace(json.dumps(trace)) == parsed[TRAINING]


def test_gemm_kernels_of_the_training_step(parsed) -> None:
    """18 gemm kernels per step: CUTLASS and cuBLAS tensor-core gemms, cuBLAS's SIMT sgemm,
    split-K reduction and gemv; FBGEMM's embedding and permute kernels are not gemms."""
    events = parsed[TRAINING]
    gemms = [e for e in events if is_gemm_kernel(e.name)]
    assert len(gemms) == 103
    assert Counter(e.step for e in gemms) == {**{s: 18 for s in range(550, 555)}, None: 13}
    gemm_prefixes = (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_",  # tensor-core gemms
        "ampere_sgemm_128x64_nn",  # cuBLAS SIMT fp32 gemm
        "void splitKreduce_kernel<",  # cuBLAS split-K reduction
        "void gemv2T_kernel_val<",  # cuBLAS gemv: a mm with a dimension of 1
    )
    assert {name.startswith(gemm_prefixes) for name in {e.name for e in gemms}} == {True}
    fbgemm = {e.name for e in events if "fbgemm_gpu::" in e.name}
    assert len(fbgemm) >= 6 and not any(is_gemm_kernel(name) for name in fbgemm)
    per_step = [sum(e.duration_s for e in gemms if e.step == s) for s in range(550, 555)]
    assert step_totals(events).gemm_s == pytest.approx(statistics.median(per_step))


def test_triton_kernels_of_the_training_step(parsed) -> None:
    triton = [e for e in parsed[TRAINING] if e.name.startswith("triton_")]
    assert len(triton) == 81 and all(e.kind is EventKind.DEVICE_KERNEL for e in triton)
    assert not any(is_gemm_kernel(e.name) for e in triton)


def test_annotations_that_are_not_steps(parsed, raw) -> None:
    """The simple_add trace has 8 user annotations but no ProfilerStep: no event has a step,
    and kernel_durations sums the whole trace (20 gemm events: sgemm, implicit-gemm
    convolutions, cuBLASLt's epilogue)."""
    assert sum(e.get("cat") == "user_annotation" for e in raw[SIMPLE_ADD]) == 8
    events = parsed[SIMPLE_ADD]
    assert {e.step for e in events} == {None}
    gemms = [e for e in events if is_gemm_kernel(e.name)]
    assert len(gemms) == 20
    assert step_totals(events).gemm_s == pytest.approx(sum(e.duration_s for e in gemms))


def test_gzip_bytes_path_and_text_parse_alike(parsed) -> None:
    compressed = TRITON.read_bytes()
    text = gzip.decompress(compressed).decode()
    expected = parsed[TRITON]
    assert parse_chrome_trace(compressed) == expected
    assert parse_chrome_trace(text) == expected
    assert parse_chrome_trace(text.encode()) == expected
    assert parse_chrome_trace(TRITON) == expected
