"""Communication time of the collectives a sharded block runs, as NCCL runs them.

Conventions (nccl-tests' PERFORMANCE.md, in which every figure of hardware/fabric.py is quoted):
- `bytes` is the collective's buffer size as nccl-tests' `size` column counts it: the gathered
  output of an all-gather, the full input of a reduce-scatter, the buffer of an all-reduce, one
  rank's send buffer of an all-to-all.
- algbw = bytes / time; busbw = algbw x factor, factor (n-1)/n for all-gather, reduce-scatter
  and all-to-all, 2(n-1)/n for all-reduce. busbw is what a ring achieves on its slowest link
  whatever n is, so each preset stores one busbw per fabric and the time follows:
      time = latency + bytes x factor(n) / busbw.
- NVLink SHARP (NVLS, NVSwitch multicast and in-switch reduction, NCCL >= 2.17) speeds up
  all-reduce only. Its peak is quoted as busbw at 8 GPUs; its algbw does not grow with n, so
  we hold algbw at the 8-GPU figure and take whichever of ring and NVLS is faster, as NCCL's
  tuner does. All-gather and reduce-scatter stay on ring: NVLS sends size one way and size/n
  the other, which is no faster than ring's (n-1)/n both ways (NCCL maintainers, NVIDIA/nccl
  #1506: NVLS all-gather 300 vs ring 350 GB/s at 1 GB; #1670: NCCL prefers ring for both).
  Known miss: at 3-4 GPUs the measured NVLS busbw equals ring's (NVIDIA/nccl#1455), where this
  model credits NVLS with up to 11% more all-reduce bandwidth.
- Placement: `intra` (NVLink / Infinity Fabric inside one node) or `inter` (the group spans
  nodes; each GPU has its own NIC, so a ring's slowest hop is one NIC: busbw = NIC busbw).
  A "node" is the NVLink domain: 8 GPUs on HGX/DGX boards, 72 on an NVL72 rack (GB200, GB300),
  whose NVLink switch trays connect the 18 compute trays, 2 or 4 on an NVL board's bridge
  (`Interconnect.gpus_per_node`).
- Latency: one fixed term per collective, the small-message floor of nccl-tests curves.

Float8 all-gathers (torchao, tensorwise only): the payload is 1 byte per element; the scale is
not gathered (each rank computes the same scale) but needs the global amax: one fp32
all-reduce per tensor (latency-bound), or for FSDP with
`precompute_float8_dynamic_scale_for_fsdp` one all-reduce of every weight's amax per step.

Overlap: FSDP2 prefetches the next layer's all-gather and runs the previous layer's
reduce-scatter on a separate stream, so they hide behind compute except the first all-gather
of the forward and the last reduce-scatter of the backward. TP's sequence-parallel
all-gathers and reduce-scatters feed or consume the very gemm beside them: exposed, unless
async TP (torch's micro-pipeline TP) splits them against that gemm, which then hides all but
the gemm's share on the local shard (`micro_pipelined_exposed_s`), wherever Inductor's pass
fuses the two (engine/step/tp.py's `async_tp` says where).

The figures (busbw, NVLS, NIC, latency, the NVLink domain, AMD's mesh of links), each with its
sources, are facts of each part's fabric (hardware/fabric.py), read from its preset's record
(hardware/presets.py): AMD's 8-GPU boards and the H200 NVL's 4-way bridge are a full mesh of
point-to-point links, no switch, so a group of n ranks inside the node drives n - 1 of them,
and a point-to-point send runs on one link.
"""

from __future__ import annotations

import math
from dataclasses import replace
from enum import Enum

import numpy as np

from f8roof.errors import ModelError
from f8roof.hardware.fabric import Fabric
from f8roof.hardware.presets import UnknownGPUError, every_part, find_gpu

FP32_BYTES = 4
SOURCE = "nccl-tests busbw and latency per preset (its fabric in hardware/fabric.py)"


class CommError(ModelError):
    pass


class CollectiveKind(str, Enum):
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_REDUCE = "all_reduce"
    ALL_TO_ALL = "all_to_all"

    @classmethod
    def from_name(cls, name: str | CollectiveKind) -> CollectiveKind:
        """Accepts our names and c10d's (`all_gather_into_tensor`, `reduce_scatter_tensor`,
        `all_to_all_single`), as graphs name them."""
        if isinstance(name, CollectiveKind):
            return name
        key = str(name).strip().lower().removeprefix("_c10d_functional.")
        key = key.split(".")[0]
        key = _C10D_NAMES.get(key, key)
        try:
            return cls(key)
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise CommError(f"unknown collective {name!r}; known: {known}") from None


_C10D_NAMES = {
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce",
    "alltoall": "all_to_all",
}


class Placement(str, Enum):
    INTRA = "intra"  # every rank of the group in one node (NVLink / Infinity Fabric)
    INTER = "inter"  # the group spans nodes: a ring's slowest hop is a NIC

    @classmethod
    def from_name(cls, name: str | Placement) -> Placement:
        if isinstance(name, Placement):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            raise CommError(f"unknown placement {name!r}; known: intra, inter") from None


def placement_for(*, group_size: int, stride: int, gpus_per_node: int) -> Placement:
    """Where a group of `group_size` ranks `stride` apart lands on nodes of `gpus_per_node`
    (torchtitan's mesh puts TP innermost: stride 1; FSDP's stride is the TP degree)."""
    return Placement.INTRA if group_size * stride <= gpus_per_node else Placement.INTER


# One GPU's fabric, as timing names it: the record's facts (hardware/fabric.py)
Interconnect = Fabric


def group_fabric(
    fabric: Interconnect,
    *,
    group_size: int,
    stride: int,
    gpus_per_node: int,
    nic_gbps: float | None = None,
) -> tuple[Interconnect, int]:
    """The fabric a group of ranks `stride` apart sees across nodes, and how many NICs per
    node it crosses on. Each GPU has its own NIC (DGX H100/H200/B200: eight 400 Gb/s rails);
    NCCL runs one channel per NIC, so a group holding r GPUs of each node crosses nodes on r
    NICs at once: busbw r x one NIC's, at most what NVLink gives inside the node. FSDP under
    TP 8 holds one GPU per node (one NIC); FSDP alone holds all eight. `nic_gbps`: another
    NIC line rate (the user's network), its busbw at the preset's ratio of busbw to line."""
    per_node = max(1, min(group_size, gpus_per_node // max(stride, 1)))
    nic = fabric.inter_busbw_bytes_per_s
    line = fabric.inter_line_bytes_per_s
    if nic_gbps is not None:
        nic, line = nic * nic_gbps * 1e9 / 8 / line, nic_gbps * 1e9 / 8
    busbw = min(fabric.intra_busbw_bytes_per_s, per_node * nic)
    return replace(fabric, inter_line_bytes_per_s=line, inter_busbw_bytes_per_s=busbw), per_node


def find_interconnect(gpu: str) -> Interconnect:
    """The fabric of a GPU (a preset name, alias, device name or NAME@WATTSw), from its record:
    CommError where the part has none (a PCIe card) or f8roof has no record of it."""
    try:
        found = find_gpu(gpu).fabric
    except UnknownGPUError:
        found = None
    if not isinstance(found, Fabric):
        with_fabric = ", ".join(g.name for g in every_part() if isinstance(g.fabric, Fabric))
        raise CommError(f"no interconnect preset for GPU {gpu!r}; known: {with_fabric}")
    return found


def _factor(kind: CollectiveKind, n):
    """busbw / algbw for `kind` on n ranks (nccl-tests PERFORMANCE.md)."""
    n = np.asarray(n, dtype=float)
    share = (n - 1) / n
    return 2 * share if kind is CollectiveKind.ALL_REDUCE else share


def bus_factor(kind: str | CollectiveKind, group_size):
    """busbw / algbw: (n-1)/n, or 2(n-1)/n for all-reduce."""
    n = _check_group(group_size)
    return _factor(CollectiveKind.from_name(kind), n)


def _check_group(group_size):
    n = np.asarray(group_size)
    if n.dtype.kind not in "iu" and not (
        n.dtype.kind == "f" and np.all(np.isfinite(n)) and np.all(n == np.round(n))
    ):
        raise CommError(f"group size must be a whole number of ranks (got {group_size!r})")
    if np.any(n < 1):
        raise CommError(f"group size must be >= 1 (got {group_size!r})")
    return n


def _check_bytes(nbytes):
    b = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(b)) or np.any(b < 0):
        raise CommError(f"collective bytes must be finite and >= 0 (got {nbytes!r})")
    return b


class Algorithm(str, Enum):
    NONE = "none"  # one rank: nothing moves
    RING = "ring"
    NVLS = "nvls"


def collective_algorithm(
    kind: str | CollectiveKind,
    *,
    group_size,
    placement: str | Placement,
    fabric: Interconnect,
):
    """Which algorithm the time model uses (NCCL's choice by bandwidth, see the docstring)."""
    kind = CollectiveKind.from_name(kind)
    n = _check_group(group_size)
    place = Placement.from_name(placement)
    ring = np.where(n > 1, Algorithm.RING.value, Algorithm.NONE.value)
    nvls = fabric.nvls_algbw_bytes_per_s
    if kind is not CollectiveKind.ALL_REDUCE or place is Placement.INTER or nvls is None:
        return ring
    ring_algbw = fabric.intra_busbw(n) / np.where(n > 1, _factor(kind, n), 1.0)
    return np.where((n > 1) & (nvls > ring_algbw), Algorithm.NVLS.value, ring)


def collective_time_s(
    kind: str | CollectiveKind,
    *,
    nbytes,
    group_size,
    placement: str | Placement,
    fabric: Interconnect,
):
    """Seconds one collective takes: latency + bytes x factor / busbw, or NVLS's algbw for
    an intra-node all-reduce where that is faster. Vectorised over `nbytes` and `group_size`
    (numpy broadcasting); a group of one rank takes 0."""
    kind = CollectiveKind.from_name(kind)
    n = _check_group(group_size)
    b = _check_bytes(nbytes)
    place = Placement.from_name(placement)
    if place is Placement.INTRA:
        busbw, latency = fabric.intra_busbw(n), fabric.intra_latency_s
    else:
        busbw = np.full(np.shape(n), fabric.inter_busbw_bytes_per_s)
        latency = fabric.inter_latency_s
    time = latency + b * _factor(kind, n) / busbw
    algo = collective_algorithm(kind, group_size=n, placement=place, fabric=fabric)
    nvls = fabric.nvls_algbw_bytes_per_s
    if nvls is not None:
        time = np.where(algo == Algorithm.NVLS.value, latency + b / nvls, time)
    return np.where(n > 1, time, 0.0)


def send_time_s(*, nbytes, placement: str | Placement, fabric: Interconnect):
    """One point-to-point send between pipeline stages: latency + bytes at one ring hop's
    rate (a ring's busbw is what each hop carries; on a mesh, one link's; across nodes, one
    NIC's)."""
    b = _check_bytes(nbytes)
    if Placement.from_name(placement) is Placement.INTRA:
        return fabric.intra_latency_s + b / fabric.link_busbw_bytes_per_s
    return fabric.inter_latency_s + b / fabric.inter_busbw_bytes_per_s


def float8_all_gather_time_s(
    *,
    numel,
    group_size,
    placement: str | Placement,
    fabric: Interconnect,
    tensors=1,
    scales_precomputed: bool = False,
):
    """A tensorwise float8 all-gather of `numel` gathered elements: 1 byte each, plus the
    amax all-reduce (one fp32 per tensor) that makes every rank's scale agree, unless FSDP's
    precomputed scales paid it once per step."""
    n = _check_group(group_size)
    payload = collective_time_s(
        CollectiveKind.ALL_GATHER,
        nbytes=_check_bytes(numel) * 1,
        group_size=n,
        placement=placement,
        fabric=fabric,
    )
    if scales_precomputed:
        return payload
    amax = collective_time_s(
        CollectiveKind.ALL_REDUCE,
        nbytes=FP32_BYTES,
        group_size=n,
        placement=placement,
        fabric=fabric,
    )
    return payload + np.asarray(tensors) * amax


def micro_pipelined_exposed_s(comm_time_s, gemm_time_s, *, group_size: int):
    """What a TP collective adds under torch's micro-pipelined TP (torchtitan's async TP):
    the all-gather (or reduce-scatter) moves its shards one by one beside the gemm on the
    shard before (after) it, so the gemm on the local shard runs with no transfer beside it
    and (n - 1) / n of the gemm hides the transfer: max(0, comm - gemm x (n - 1) / n)."""
    comm = np.asarray(comm_time_s, dtype=float)
    gemm = np.asarray(gemm_time_s, dtype=float)
    if np.any(comm < 0) or np.any(gemm < 0) or group_size < 2:
        raise CommError("comm and gemm times must be >= 0 and the group at least 2 ranks")
    return np.maximum(comm - gemm * (group_size - 1) / group_size, 0.0)


def fsdp_exposed_time_s(
    *,
    all_gather_s: float,
    reduce_scatter_s: float,
    forward_compute_s: float,
    backward_compute_s: float,
    layers: int,
    reshard_after_forward: bool = True,
    all_reduce_s: float = 0.0,
) -> float:
    """FSDP2's exposed time over `layers` identical blocks in one step, torchtitan's way.

    Forward: the first block's all-gather has nothing to hide behind (exposed); each later one
    is prefetched behind the previous block's forward. Backward: the last block needs no
    gather; each other block's all-gather (none when the forward kept its weights:
    `reshard_after_forward` False) and the gradient reduction of the block after it share one
    block's backward compute, recompute included; block 0's reduction ends the step
    (exposed). The gradient reduction is the reduce-scatter and, under HSDP, the all-reduce
    of the shard across replicas that FSDP2 runs after it on the same stream
    (`all_reduce_s`). What outlasts the compute beside it shows."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise CommError(f"layers must be an integer >= 1 (got {layers!r})")
    for name, value in (
        ("all_gather_s", all_gather_s),
        ("reduce_scatter_s", reduce_scatter_s),
        ("forward_compute_s", forward_compute_s),
        ("backward_compute_s", backward_compute_s),
        ("all_reduce_s", all_reduce_s),
    ):
        if not (math.isfinite(value) and value >= 0):
            raise CommError(f"{name} must be finite and >= 0 (got {value})")
    reduce = reduce_scatter_s + all_reduce_s
    gather_again = all_gather_s if reshard_after_forward else 0.0
    forward = (layers - 1) * max(all_gather_s - forward_compute_s, 0.0)
    backward = (layers - 1) * max(gather_again + reduce - backward_compute_s, 0.0)
    return all_gather_s + reduce + forward + backward
