"""The fabrics GPUs talk over, as facts: each board's intra-node links (NVLink through NVSwitch,
an NVLink bridge, AMD's Infinity Fabric mesh), the network NIC each GPU has, and the figures
NCCL reaches on them, each with its sources. How a collective runs on them (ring, NVLS, the
placement of a group, FSDP's schedule) is `timing/comm.py`'s.

Conventions (nccl-tests' PERFORMANCE.md): bandwidths are bytes/s per GPU, one direction; a busbw
is what a ring reaches on its slowest link whatever the group's size, so one figure per fabric
serves every group; NVLS's all-reduce figure is quoted as busbw at 8 GPUs. A "node" is the
NVLink domain: 8 GPUs on HGX/DGX boards, 72 on an NVL72 rack, 2 or 4 on NVL bridges.

Latency (every fabric, assumed beyond H100's): 35 us inside a node, from nccl-tests on 8 H100
SXM in one node (togethercomputer/together-nccl-tests `benchmarks/H100/results/20260305_220043/
{all_reduce,all_gather,reduce_scatter}_ring.out`, NCCL 2.26.2, one process driving the 8 GPUs:
every collective takes 34.5-37 us from 8 B to 256 KB, and latency + bytes x factor / busbw with
35 us stays within 15% of the 1-8 MB points: all-reduce 46 and 79 us measured at 1 and 8 MB, 40
and 73 modelled). Launches from one process per GPU, or CUDA graphs, run faster (2 GPUs, NVLS,
graphs: 6 us, NVIDIA/nccl#1259): no public multi-process table of 8 H100s was found, so 35 us
may overstate them. Across nodes, 63 us at 16 B on two AWS p5 nodes (EFA, NCCL 2.20-2.22,
KeitaW/p5-nccl-test-2024-07-19): the only published H100 small-message multi-node figure on an
RDMA fabric found; no InfiniBand one was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from f8roof.errors import ModelError

GB = 1e9
# busbw / algbw of an all-reduce on 8 ranks, 2 x 7/8: how NVLS's figure is quoted
_ALL_REDUCE_AT_8 = 2 * 7 / 8


class FabricError(ModelError):
    pass


@dataclass(frozen=True)
class Fabric:
    """One GPU's fabrics: the busbw a ring reaches inside a node and across nodes, NVLS,
    latency, each figure's sources. Bandwidths in bytes/s per GPU, one direction."""

    name: str  # the board: "HGX H100"
    intra_line_bytes_per_s: float  # datasheet, one direction
    intra_busbw_bytes_per_s: float  # what NCCL's ring reaches (nccl-tests busbw); a mesh: at 8 GPUs
    nvls_allreduce_busbw_bytes_per_s: float | None  # at 8 GPUs; None: no NVSwitch multicast
    inter_line_bytes_per_s: float  # one NIC, one direction
    inter_busbw_bytes_per_s: float
    intra_latency_s: float
    inter_latency_s: float
    gpus_per_node: int = 8
    measured: bool = True  # False: the busbw figures are assumptions, not published tests
    # a full mesh of this many point-to-point links per GPU (AMD's boards, an NVLink bridge of 4),
    # None behind a switch: a group drives as many links as it has peers
    mesh_links: int | None = None
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in (
            "intra_line_bytes_per_s",
            "intra_busbw_bytes_per_s",
            "inter_line_bytes_per_s",
            "inter_busbw_bytes_per_s",
            "intra_latency_s",
            "inter_latency_s",
        ):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise FabricError(f"fabric {self.name!r}: {field} must be positive, got {value}")
        nvls = self.nvls_allreduce_busbw_bytes_per_s
        if nvls is not None and not (0 < nvls < math.inf):
            raise FabricError(f"fabric {self.name!r}: NVLS busbw must be positive, got {nvls}")
        if self.gpus_per_node < 1:
            raise FabricError(f"fabric {self.name!r}: gpus_per_node must be >= 1")

    def intra_busbw(self, group_size) -> np.ndarray:
        """The ring busbw of a group of `group_size` ranks inside one node: the whole fabric's
        behind a switch; on a mesh, the share of its links the group's peers sit on."""
        busbw = np.full(np.shape(group_size), self.intra_busbw_bytes_per_s, dtype=float)
        if self.mesh_links is None:
            return busbw
        peers = np.clip(np.asarray(group_size) - 1, 1, self.mesh_links)
        return busbw * peers / self.mesh_links

    @property
    def link_busbw_bytes_per_s(self) -> float:
        """What one point-to-point transfer inside a node reaches: a ring hop behind a switch,
        one link on a mesh."""
        return self.intra_busbw_bytes_per_s / (self.mesh_links or 1)

    @property
    def nvls_algbw_bytes_per_s(self) -> float | None:
        """NVLS all-reduce algbw, held at its 8-GPU value (NVIDIA/nccl#1455: 258-273 GB/s at
        5-8 H100s)."""
        nvls = self.nvls_allreduce_busbw_bytes_per_s
        return None if nvls is None else nvls / _ALL_REDUCE_AT_8


@dataclass(frozen=True)
class NoFabric:
    """A part sold without a GPU-to-GPU fabric: its GPUs meet over PCIe and the network, which
    f8roof does not time (a step on it says its communication is not modelled)."""

    sources: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.sources:
            raise FabricError("a part without a fabric cites why")


LATENCY = (
    "latency 35 us intra / 63 us inter: nccl-tests on 8 H100 SXM and two AWS p5 nodes "
    "(hardware/fabric.py's docstring)"
)
LATENCY_ASSUMED = LATENCY + ", assumed for this part"
NDR_NIC = (
    "400 Gb/s ConnectX-7 per GPU, busbw 47 GB/s (NVIDIA/nccl-tests#290, AddyLaddy: 'NDR @ "
    "400Gbps you should see 46-48GB/s per NIC')"
)
NVLINK4_RING = (
    "ring busbw 370 GB/s (NVIDIA/nccl-tests#212, sjeaugey: 'effective NVLink bandwidth of "
    "370GB/s'; NVIDIA/nccl#1455: 365-370 at 2-8 GPUs)"
)
# NVLink 4's ring reaches 370 of 450 GB/s on HGX H100: a bridge's busbw is assumed at that share
NVLINK4_SHARE = 370 / 450
NVLINK5_RING = "ring busbw 720 GB/s (NCCL's own B200 link model, maxBw 721.8, NVIDIA/nccl#1807)"
XGMI_SHARE = (
    "48 of a link's 64 GB/s usable after CRC and protocol overhead (AMD ROCm blog 'Understanding "
    "RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X', 2025-03; ROCm/rccl#1210: 'the "
    "max theoretical per-direction bandwidth for gfx94 devices is 48GB/s')"
)
AMD_MESH = (
    "a full mesh of 7 links, no switch (ROCm/rccl#1270, RCCL's README: with fewer than 8 GPUs "
    "'one can only achieve a fraction of the potential bandwidth'): a group of n drives n - 1"
)
NIC_ASSUMED = "NIC 400 Gb/s per GPU, busbw 47 GB/s: assumed (H100's ConnectX-7)"
CX8_NIC = (
    "800 Gb/s ConnectX-8 per GPU, busbw 94 GB/s: 47 of 50 GB/s, ConnectX-7's ratio, at twice "
    "the line rate (an assumption)"
)

HGX_H100 = Fabric(
    "HGX H100",
    intra_line_bytes_per_s=450 * GB,
    intra_busbw_bytes_per_s=370 * GB,
    nvls_allreduce_busbw_bytes_per_s=480 * GB,
    inter_line_bytes_per_s=50 * GB,
    inter_busbw_bytes_per_s=47 * GB,
    intra_latency_s=35e-6,
    inter_latency_s=63e-6,
    sources=(
        "NVLink 4 through NVSwitch, 900 GB/s both ways per GPU (H100 datasheet, SXM column)",
        NVLINK4_RING,
        "NVLS all-reduce busbw 480 GB/s at 8 GPUs (nccl-tests#212; nccl-tests#290: 476)",
        NDR_NIC + " (DGX H100)",
        LATENCY,
    ),
)
HGX_H200 = replace(
    HGX_H100,
    name="HGX H200",
    nvls_allreduce_busbw_bytes_per_s=475 * GB,
    sources=(
        "NVLink 4 through NVSwitch, 900 GB/s both ways per GPU (H200 datasheet, SXM column)",
        NVLINK4_RING + ": the same fabric as HGX H100",
        "NVLS all-reduce busbw 475 GB/s at 8 GPUs (NVIDIA/nccl-tests#272, 8x H200)",
        NDR_NIC + " (DGX H200)",
        LATENCY,
    ),
)
HGX_B200 = Fabric(
    "HGX B200",
    intra_line_bytes_per_s=900 * GB,
    intra_busbw_bytes_per_s=720 * GB,
    nvls_allreduce_busbw_bytes_per_s=830 * GB,
    inter_line_bytes_per_s=50 * GB,
    inter_busbw_bytes_per_s=47 * GB,
    intra_latency_s=35e-6,
    inter_latency_s=63e-6,
    sources=(
        "NVLink 5 through NVSwitch, 1.8 TB/s both ways per GPU (DGX B200 datasheet)",
        NVLINK5_RING,
        "NVLS all-reduce busbw 830 GB/s at 8 GPUs (NVIDIA/nccl#1807, 8x B200)",
        NDR_NIC + " (DGX B200)",
        LATENCY_ASSUMED,
    ),
)
HGX_B300 = replace(
    HGX_B200,
    name="HGX B300",
    inter_line_bytes_per_s=100 * GB,
    inter_busbw_bytes_per_s=94 * GB,
    measured=False,
    sources=(
        (
            "NVLink 5 through NVSwitch, 1.8 TB/s GPU-to-GPU per GPU, 14.4 TB/s per 8 GPUs, as "
            "HGX B200; networking 1.6 TB/s per 8 GPUs against HGX B200's 0.8 (NVIDIA HGX "
            "platform page, nvidia.com/en-us/data-center/hgx, HGX B300 column; DGX B300 "
            "datasheet, resources.nvidia.com/en-us-dgx-systems/dgx-b300-datasheet: "
            "fifth-generation NVLink, 8 ConnectX-8 VPI ports up to 800 Gb/s)"
        ),
        NVLINK5_RING + ": B200's, the same NVLink 5 switch (no public B300 nccl-tests)",
        "NVLS all-reduce busbw 830 GB/s at 8 GPUs: HGX B200's (NVIDIA/nccl#1807), assumed",
        CX8_NIC,
        LATENCY_ASSUMED,
    ),
)
_NVL72 = (
    "NVLS all-reduce algbw 424-429 GB/s measured over all 72 GPUs (coreweave/nccl-tests#43, "
    "all_reduce 4-8 GB, busbw 835-847), held at 8 GPUs as busbw 746 GB/s"
)
GB200_NVL72 = Fabric(
    "GB200 NVL72",
    intra_line_bytes_per_s=900 * GB,
    intra_busbw_bytes_per_s=720 * GB,
    # NVLS algbw measured over the 72 GPUs, stored as the busbw it is at 8 (the field's
    # convention; nvls_algbw_bytes_per_s divides it back)
    nvls_allreduce_busbw_bytes_per_s=426 * GB * 2 * 7 / 8,
    inter_line_bytes_per_s=50 * GB,
    inter_busbw_bytes_per_s=47 * GB,
    intra_latency_s=35e-6,
    inter_latency_s=63e-6,
    gpus_per_node=72,
    sources=(
        (
            "NVLink 5, one NVLink domain of 72 GPUs (GB200 NVL72 spec, nvidia.com/en-us/data-center/"
            "gb200-nvl72)"
        ),
        NVLINK5_RING + ": B200's, the same NVLink 5",
        _NVL72,
        NDR_NIC + " (GB200 NVL72 spec)",
        LATENCY_ASSUMED,
    ),
)
GB300_NVL72 = replace(
    GB200_NVL72,
    name="GB300 NVL72",
    inter_line_bytes_per_s=100 * GB,
    inter_busbw_bytes_per_s=94 * GB,
    measured=False,
    sources=(
        (
            "NVLink 5, 72-GPU domain, ConnectX-8 800 Gb/s per GPU (GB300 NVL72 spec, nvidia.com/en-us"
            "/data-center/gb300-nvl72)"
        ),
        NVLINK5_RING + ": B200's, the same NVLink 5",
        _NVL72 + ": GB200 NVL72's, the same NVLink switch trays, assumed",
        CX8_NIC,
        LATENCY_ASSUMED,
    ),
)
# NVL boards: PCIe cards joined by NVLink bridges, no switch. Beyond the bridged GPUs a group
# meets over PCIe Gen5 (64 GB/s each way) and the network: timed as a 400 Gb/s NIC's hop.
H100_NVL = Fabric(
    "H100 NVL bridge pair",
    intra_line_bytes_per_s=300 * GB,
    intra_busbw_bytes_per_s=300 * GB * NVLINK4_SHARE,
    nvls_allreduce_busbw_bytes_per_s=None,
    inter_line_bytes_per_s=50 * GB,
    inter_busbw_bytes_per_s=47 * GB,
    intra_latency_s=35e-6,
    inter_latency_s=63e-6,
    gpus_per_node=2,
    measured=False,
    sources=(
        (
            "NVLink bridge joining 2 GPUs, 600 GB/s both ways per GPU; PCIe Gen5 128 GB/s (H100 "
            "datasheet, NVL column)"
        ),
        (
            "ring busbw 247 GB/s: NVLink 4's 370 of 450 GB/s on HGX H100 (nccl-tests#212) at the "
            "bridge's 300, assumed (no public H100 NVL nccl-tests)"
        ),
        "beyond the pair: " + NIC_ASSUMED + " (PCIe Gen5 carries 64 GB/s each way)",
        LATENCY_ASSUMED,
    ),
)
H200_NVL = Fabric(
    "H200 NVL 4-way bridge",
    intra_line_bytes_per_s=450 * GB,
    intra_busbw_bytes_per_s=450 * GB * NVLINK4_SHARE,
    nvls_allreduce_busbw_bytes_per_s=None,
    inter_line_bytes_per_s=50 * GB,
    inter_busbw_bytes_per_s=47 * GB,
    intra_latency_s=35e-6,
    inter_latency_s=63e-6,
    gpus_per_node=4,
    measured=False,
    mesh_links=3,
    sources=(
        (
            "2- or 4-way NVLink bridge, 900 GB/s both ways per GPU; PCIe Gen5 128 GB/s (H200 "
            "datasheet, NVL column): the 4-way bridge assumed, each GPU's 18 links split over its 3 "
            "peers, a mesh"
        ),
        (
            "ring busbw 370 GB/s over the 3 peers: NVLink 4's 370 of 450 GB/s on HGX H100 "
            "(nccl-tests#212), assumed (no public H200 NVL nccl-tests)"
        ),
        "beyond the 4 bridged GPUs: " + NIC_ASSUMED + " (PCIe Gen5 carries 64 GB/s each way)",
        LATENCY_ASSUMED,
    ),
)
H100_PCIE = NoFabric(
    (
        (
            "H100 PCIe: a PCIe Gen5 card, 128 GB/s both ways (H100 datasheet, PCIe column); an NVLink "
            "bridge may join two adjacent cards (nvidia.com/en-us/data-center/h100: 'two NVIDIA H100 "
            "PCIe cards ... 600 GB/s bidirectional'), an option this preset does not assume: the "
            "bridged pair is h100-nvl"
        ),
    )
)
_AMD_BOARD = {
    "nvls_allreduce_busbw_bytes_per_s": None,
    "inter_line_bytes_per_s": 50 * GB,
    "inter_busbw_bytes_per_s": 47 * GB,
    "intra_latency_s": 35e-6,
    "inter_latency_s": 63e-6,
    "measured": False,
    "mesh_links": 7,
}
MI300X_BOARD = Fabric(
    "MI300X platform",
    intra_line_bytes_per_s=7 * 64 * GB,
    intra_busbw_bytes_per_s=7 * 48 * GB,
    sources=(
        "7 Infinity Fabric links x 64 GB/s, 896 GB/s both ways (AMD MI300X datasheet)",
        "ring busbw 336 GB/s at 8 GPUs: 7 links x " + XGMI_SHARE + "; a ceiling, no public "
        "rccl-tests busbw found",
        AMD_MESH,
        NIC_ASSUMED,
        LATENCY_ASSUMED,
    ),
    **_AMD_BOARD,  # type: ignore[arg-type]
)
MI355X_BOARD = Fabric(
    "MI355X platform",
    intra_line_bytes_per_s=7 * 76.8 * GB,
    intra_busbw_bytes_per_s=7 * 76.8 * GB * 48 / 64,
    sources=(
        (
            "7 Infinity Fabric links x 153.6 GB/s both ways (AMD MI355X specifications); MI350X is "
            "the same board"
        ),
        "ring busbw 403 GB/s at 8 GPUs: 7 x 76.8 GB/s x 0.75, MI300X's usable share of a link ("
        + XGMI_SHARE
        + "), assumed",
        AMD_MESH,
        NIC_ASSUMED,
        LATENCY_ASSUMED,
    ),
    **_AMD_BOARD,  # type: ignore[arg-type]
)
