"""Communication time: nccl-tests' busbw relations, NVLS, latency, overlap, bad input."""

import numpy as np
import pytest

from f8roof.hardware.fabric import Fabric
from f8roof.hardware.presets import PRESETS
from f8roof.timing.comm import (
    Algorithm,
    CommError,
    Placement,
    bus_factor,
    collective_algorithm,
    collective_time_s,
    find_interconnect,
    float8_all_gather_time_s,
    fsdp_exposed_time_s,
    micro_pipelined_exposed_s,
    placement_for,
    send_time_s,
)

H100 = find_interconnect("h100")
GIB = 2**30


def test_every_sxm_preset_of_hardware_has_a_fabric():
    for name in ("h100", "h200", "b200", "b300", "mi300x", "mi355x", "mi350x", "h100-meta"):
        assert name in PRESETS
        assert find_interconnect(name).intra_busbw_bytes_per_s > 0


def test_a_pcie_card_and_an_unknown_gpu_have_no_fabric_in_one_line():
    for name in ("h100-pcie", "custom"):
        with pytest.raises(CommError, match=f"no interconnect preset for GPU '{name}'") as info:
            find_interconnect(name)
        assert "\n" not in str(info.value) and "b300" in str(info.value)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_time_is_busbw_relation(n):
    # nccl-tests: busbw = algbw x (n-1)/n for all-gather; large messages: latency negligible
    t = collective_time_s(
        "all_gather", nbytes=8 * GIB, group_size=n, placement="intra", fabric=H100
    )
    algbw = 8 * GIB / (t - H100.intra_latency_s)
    assert algbw * (n - 1) / n == pytest.approx(H100.intra_busbw_bytes_per_s, rel=1e-9)


@pytest.mark.parametrize("n, links", [(2, 1), (4, 3), (8, 7)])
def test_a_mesh_group_drives_one_link_per_peer(n, links):
    """MI300X's board is a full mesh of 7 links of 48 usable GB/s: a TP group of n drives
    n - 1 of them, so TP 2 all-gathers at one link's 48 GB/s, TP 8 at 336."""
    mi300x = find_interconnect("mi300x")
    t = collective_time_s(
        "all_gather", nbytes=8 * GIB, group_size=n, placement="intra", fabric=mi300x
    )
    busbw = 8 * GIB * (n - 1) / n / (t - mi300x.intra_latency_s)
    assert busbw == pytest.approx(links * 48e9, rel=1e-9)
    send = send_time_s(nbytes=GIB, placement="intra", fabric=mi300x)
    assert send - mi300x.intra_latency_s == pytest.approx(GIB / 48e9)
    # behind a switch every group sees the whole fabric
    assert H100.intra_busbw(n) == H100.intra_busbw_bytes_per_s


def test_factors():
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce_scatter_tensor", 4) == pytest.approx(3 / 4)
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_to_all_single", 2) == pytest.approx(1 / 2)


def test_all_reduce_ring_costs_reduce_scatter_plus_all_gather_on_inter_node():
    kw = {"nbytes": GIB, "group_size": 16, "placement": "inter", "fabric": H100}
    ar = collective_time_s("all_reduce", **kw)
    rs = collective_time_s("reduce_scatter", **kw)
    ag = collective_time_s("all_gather", **kw)
    lat = H100.inter_latency_s
    assert ar - lat == pytest.approx((rs - lat) + (ag - lat))


def test_nvls_only_for_intra_node_all_reduce_where_faster():
    n = np.array([2, 4, 8])
    algo = collective_algorithm("all_reduce", group_size=n, placement="intra", fabric=H100)
    # ring algbw on 2 GPUs (370 GB/s) beats NVLS's 274; from 4 GPUs NVLS wins
    assert list(algo) == ["ring", "nvls", "nvls"]
    for kind in ("all_gather", "reduce_scatter"):
        assert set(collective_algorithm(kind, group_size=n, placement="intra", fabric=H100)) == {
            "ring"
        }
    inter = collective_algorithm("all_reduce", group_size=n, placement="inter", fabric=H100)
    assert set(inter) == {"ring"}
    mi = collective_algorithm(
        "all_reduce", group_size=8, placement="intra", fabric=find_interconnect("mi300x")
    )
    assert mi == Algorithm.RING.value


def test_nvls_all_reduce_reaches_the_published_busbw_at_8():
    t = collective_time_s(
        "all_reduce", nbytes=8 * GIB, group_size=8, placement="intra", fabric=H100
    )
    busbw = 8 * GIB / (t - H100.intra_latency_s) * 2 * 7 / 8
    assert busbw == pytest.approx(480e9, rel=1e-9)  # nccl-tests#212
    ring = 8 * GIB * 2 * 7 / 8 / H100.intra_busbw_bytes_per_s
    assert t - H100.intra_latency_s < ring


def test_small_messages_are_latency_bound():
    t = collective_time_s("all_gather", nbytes=1024, group_size=8, placement="intra", fabric=H100)
    assert t == pytest.approx(H100.intra_latency_s, rel=1e-3)
    t_inter = collective_time_s(
        "all_gather", nbytes=1024, group_size=8, placement="inter", fabric=H100
    )
    assert t_inter == pytest.approx(H100.inter_latency_s, rel=1e-3)
    assert t_inter > t


def test_one_rank_moves_nothing_and_vectorises():
    t = collective_time_s(
        "reduce_scatter",
        nbytes=np.array([GIB, GIB, 0]),
        group_size=np.array([1, 2, 2]),
        placement="intra",
        fabric=H100,
    )
    assert t.shape == (3,)
    assert t[0] == 0.0
    assert t[2] == pytest.approx(H100.intra_latency_s)
    assert t[1] > t[2]


def test_inter_node_is_slower_than_nvlink():
    kw = {"nbytes": GIB, "group_size": 8, "fabric": H100}
    assert collective_time_s("all_gather", placement="inter", **kw) > 5 * collective_time_s(
        "all_gather", placement="intra", **kw
    )


def test_placement_for_a_mesh():
    assert placement_for(group_size=2, stride=1, gpus_per_node=8) is Placement.INTRA
    assert placement_for(group_size=8, stride=8, gpus_per_node=8) is Placement.INTER
    assert placement_for(group_size=4, stride=2, gpus_per_node=8) is Placement.INTRA


def test_float8_all_gather_halves_payload_and_pays_amax_all_reduce():
    numel = 4096 * 14336
    bf16 = collective_time_s(
        "all_gather", nbytes=2 * numel, group_size=8, placement="intra", fabric=H100
    )
    fp8 = float8_all_gather_time_s(numel=numel, group_size=8, placement="intra", fabric=H100)
    fp8_pre = float8_all_gather_time_s(
        numel=numel, group_size=8, placement="intra", fabric=H100, scales_precomputed=True
    )
    amax = collective_time_s("all_reduce", nbytes=4, group_size=8, placement="intra", fabric=H100)
    assert fp8 - fp8_pre == pytest.approx(amax)
    assert fp8_pre - H100.intra_latency_s == pytest.approx((bf16 - H100.intra_latency_s) / 2)
    assert fp8 < bf16
    # a tiny tensor: the amax all-reduce makes float8 slower than bf16
    small = float8_all_gather_time_s(numel=1024, group_size=8, placement="intra", fabric=H100)
    assert small > collective_time_s(
        "all_gather", nbytes=2048, group_size=8, placement="intra", fabric=H100
    )


def test_micro_pipelined_tp_hides_a_collective_behind_n_minus_1_of_n_of_its_gemm():
    # TP 8: 7/8 of a 4 ms gemm hides 3.5 ms of a 5 ms all-gather; a long gemm hides it all
    assert micro_pipelined_exposed_s(5.0, 4.0, group_size=8) == pytest.approx(1.5)
    assert micro_pipelined_exposed_s(5.0, 40.0, group_size=8) == 0.0
    # TP 2: the local half of the gemm runs with nothing beside it
    assert micro_pipelined_exposed_s(3.0, 4.0, group_size=2) == pytest.approx(1.0)
    got = micro_pipelined_exposed_s(np.array([1.0, 5.0]), 2.0, group_size=2)
    assert list(got) == [0.0, 4.0]
    with pytest.raises(CommError, match="at least 2 ranks"):
        micro_pipelined_exposed_s(1.0, 1.0, group_size=1)


def test_fsdp_exposes_first_gather_and_last_reduce_scatter_only_when_compute_covers():
    got = fsdp_exposed_time_s(
        all_gather_s=1.0,
        reduce_scatter_s=2.0,
        forward_compute_s=5.0,
        backward_compute_s=10.0,
        layers=32,
    )
    assert got == pytest.approx(3.0)
    slow = fsdp_exposed_time_s(
        all_gather_s=4.0,
        reduce_scatter_s=4.0,
        forward_compute_s=1.0,
        backward_compute_s=2.0,
        layers=3,
    )
    # 4 + 4 exposed, then 2 forward gathers 3 over, 2 backward windows 6 over
    assert slow == pytest.approx(8 + 2 * 3 + 2 * 6)
    with pytest.raises(CommError, match="layers must be an integer >= 1"):
        fsdp_exposed_time_s(
            all_gather_s=1, reduce_scatter_s=1, forward_compute_s=1, backward_compute_s=1, layers=0
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: collective_time_s(
                "broadcast", nbytes=1, group_size=2, placement="intra", fabric=H100
            ),
            "unknown collective 'broadcast'",
        ),
        (
            lambda: collective_time_s(
                "all_gather", nbytes=-1, group_size=2, placement="intra", fabric=H100
            ),
            "bytes must be finite and >= 0",
        ),
        (
            lambda: collective_time_s(
                "all_gather", nbytes=1, group_size=0, placement="intra", fabric=H100
            ),
            "group size must be >= 1",
        ),
        (
            lambda: collective_time_s(
                "all_gather", nbytes=1, group_size=2.5, placement="intra", fabric=H100
            ),
            "whole number of ranks",
        ),
        (
            lambda: collective_time_s(
                "all_gather", nbytes=1, group_size=2, placement="rack", fabric=H100
            ),
            "unknown placement 'rack'",
        ),
    ],
)
def test_bad_inputs_are_one_line(call, message):
    with pytest.raises(CommError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_comm_reads_each_preset_fabric_off_its_record():
    """No table of its own: a name, an alias, a device name and a power limit all find the
    record's fabric."""
    for name in PRESETS:
        if isinstance(PRESETS[name].fabric, Fabric):
            assert find_interconnect(name) is PRESETS[name].fabric
    assert find_interconnect("h100-sxm") is find_interconnect("NVIDIA H100 80GB HBM3")
    assert find_interconnect("h100@500w") is PRESETS["h100"].fabric
