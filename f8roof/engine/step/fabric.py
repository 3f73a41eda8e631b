"""The GPU's fabric for a step: the NVLink domain as the node, a collective group's keywords
in torchtitan's mesh, and a memory-bound pass's streaming rate."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from f8roof.engine.recommend import Recommendation
from f8roof.engine.resolve import Resolved
from f8roof.notes import Note, Topic, note
from f8roof.timing.comm import (
    CommError,
    Interconnect,
    find_interconnect,
    group_fabric,
    placement_for,
)
from f8roof.training.run_config import (
    RunConfig,
)

BF16_BYTES = 2
FP32_BYTES = 4


def on_fabric(run: RunConfig, gpu: str) -> RunConfig:
    """The run with its GPU fabric's NVLink domain as its node (72 GPUs on an NVL72 rack):
    what collectives stay on NVLink."""
    try:
        domain = find_interconnect(gpu).gpus_per_node
    except CommError:
        return run
    return replace(run, gpus_per_node=domain)


def fabric_of(rec: Recommendation, notes: list[Note]) -> Interconnect | None:
    try:
        return find_interconnect(rec.gpu)
    except CommError:
        notes.append(note(Topic.NO_FABRIC, gpu=rec.gpu))
        return None


def comm_group(
    fabric: Interconnect, run: RunConfig, *, size: int, stride: int
) -> tuple[dict[str, Any], int]:
    """A collective group of `size` ranks `stride` apart in torchtitan's mesh: the keywords
    `collective_time_s` takes for it (where it lands, the fabric it crosses nodes on) and the
    NICs per node it uses."""
    place = placement_for(group_size=size, stride=stride, gpus_per_node=run.gpus_per_node)
    crossed, nics = group_fabric(
        fabric,
        group_size=size,
        stride=stride,
        gpus_per_node=run.gpus_per_node,
        nic_gbps=run.network_gbps,
    )
    return {"group_size": size, "placement": place, "fabric": crossed}, nics


def streaming_rate(resolved: Resolved) -> tuple[float, float]:
    """A memory-bound pass's seconds per byte and per launch: the calibration's pointwise
    streaming rate."""
    rate = resolved.calibration.kernel_time if resolved.calibration is not None else None
    if rate is not None:
        stream = rate.kind("pointwise", "pointwise")
        return 1 / stream.bandwidth_bytes_per_s, stream.floor_s
    # no calibration: the seed's overhead model, 92% of HBM and 2 us a pass
    return 1 / (resolved.config.gpu.memory_bandwidth_bytes_per_s * 0.92), 2e-6
