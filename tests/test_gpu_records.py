"""Every part f8roof accepts (each preset and each power limit) is one record, walked field by
field: a fabric where the product has one (NVLink, NVSwitch, Infinity Fabric; a PCIe card
explicitly none, citing why), a source for every fact, an efficiency with its source for every
gemm family the part runs (hardware/support.py), the shipped file it reads and the public
time model that times it; and every collective on a part with a fabric takes time."""

import dataclasses

import numpy as np
import pytest

from f8roof.calibration import public_file
from f8roof.calibration.shipped import shipped_calibration
from f8roof.hardware.efficiency import (
    BLACKWELL_ROWWISE_RATIO,
    POWER_CAP_BF16,
    POWER_CAP_FLOAT8,
)
from f8roof.hardware.fabric import Fabric, NoFabric
from f8roof.hardware.presets import PRESETS, PublicModel, every_part, find_gpu
from f8roof.hardware.support import ScaledGemm, gemm_for_recipe, unsupported_reason
from f8roof.timing.comm import CollectiveKind, collective_time_s, find_interconnect
from f8roof.traffic.recipes import ALL_RECIPE_NAMES

PARTS = {gpu.name: gpu for gpu in every_part()}
WITH_FABRIC = [name for name, gpu in PARTS.items() if isinstance(gpu.fabric, Fabric)]
# The family each scaled gemm runs as. MXFP4: no recipe f8roof times runs it (checked below).
FAMILY = {
    ScaledGemm.TENSORWISE: "fp8",
    ScaledGemm.ROWWISE: "fp8_rowwise",
    ScaledGemm.BLOCKWISE: "fp8_blockwise",
    ScaledGemm.MXFP8: "mxfp8",
    ScaledGemm.NVFP4: "nvfp4",
}
GIB = 2**30


def is_pcie_card(name: str) -> bool:
    return any("pcie" in p.lower() for p in PARTS[name].device_prefixes) or "pcie" in name


def test_every_power_limit_and_named_limit_is_walked():
    assert {"h100@500w", "h200@500w", "b200-750w"} <= set(PARTS)
    assert set(PRESETS) <= set(PARTS)


@pytest.mark.parametrize("name", PARTS)
def test_a_part_has_a_fabric_unless_it_is_a_pcie_card_and_says_why_either_way(name):
    gpu = PARTS[name]
    if is_pcie_card(name):
        assert isinstance(gpu.fabric, NoFabric), name
        assert any("PCIe" in s for s in gpu.fabric.sources)
        return
    assert isinstance(gpu.fabric, Fabric), f"{name} has no fabric"
    fabric = gpu.fabric
    assert len(fabric.sources) >= 3 and all(s.strip() for s in fabric.sources)
    assert 0 < fabric.intra_busbw_bytes_per_s <= fabric.intra_line_bytes_per_s
    assert 0 < fabric.inter_busbw_bytes_per_s <= fabric.inter_line_bytes_per_s
    # the network is never faster than the node's own links
    assert fabric.inter_busbw_bytes_per_s < fabric.intra_busbw_bytes_per_s
    assert fabric.gpus_per_node in (2, 4, 8, 72)
    # only an NVSwitch multicasts: a mesh of links has no NVLS
    assert fabric.mesh_links is None or fabric.nvls_allreduce_busbw_bytes_per_s is None


@pytest.mark.parametrize("name", PARTS)
def test_every_fact_of_a_part_cites_a_source(name):
    gpu = PARTS[name]
    assert gpu.sources and all(s.strip() for s in gpu.sources)
    # clocks and power: every part has both, each from its datasheet or a cited rule
    assert gpu.power_w is not None and 300 <= gpu.power_w <= 1400
    assert gpu.sm_clock_hz is not None and 1.5e9 <= gpu.sm_clock_hz <= 2.5e9
    assert gpu.efficiency is not None and gpu.efficiency.memory_source.strip()
    for family in gpu.efficiency.families:
        assert family.source.strip(), (name, family.family)
        if family.hopper_carried:  # says whose it is
            assert "H100" in family.source, (name, family.family, family.source)


@pytest.mark.parametrize("name", PARTS)
def test_every_gemm_family_a_part_runs_has_an_efficiency_and_no_other(name):
    gpu = PARTS[name]
    assert gpu.efficiency is not None
    runs = {FAMILY[g] for g in FAMILY if unsupported_reason(gpu, g) is None}
    listed = {f.family for f in gpu.efficiency.families}
    assert listed == {"bf16"} | runs, name


def test_no_recipe_runs_mxfp4_gemms_so_no_part_needs_that_family():
    needed = {gemm_for_recipe(recipe) for recipe in ALL_RECIPE_NAMES}
    assert ScaledGemm.MXFP4 not in needed
    assert needed <= set(FAMILY)


def test_parts_with_no_gemm_sweep_of_their_own_carry_hoppers_and_say_so():
    for name in ("h100-pcie", "h100-nvl", "h200-nvl"):
        efficiency = PARTS[name].efficiency
        assert efficiency is not None and efficiency.borrowed
        assert all(f.hopper_carried for f in efficiency.families)
    # a Blackwell part carries no Hopper fraction: its rowwise is torch's sm100 CUTLASS
    # kernel as measured on B200 (pytorch/helion#2756), its bf16 and fp8 its own
    for name in ("b200", "gb200", "b300", "gb300", "b200-750w"):
        efficiency = PARTS[name].efficiency
        assert efficiency is not None and not efficiency.borrowed
        assert not any(f.hopper_carried for f in efficiency.families), name


# The peak each family's fraction is of (an assumed family takes another's fraction there).
PEAK = {"bf16": "bf16_flops", "fp8": "fp8_flops", "fp8_rowwise": "fp8_flops", "mxfp8": "mx_flops"}


@pytest.mark.parametrize("name", PARTS)
def test_a_family_no_public_sweep_times_takes_anothers_numbers_and_says_so(name):
    """A family marked `assumed_as` has no public sweep of its own on the part: it runs at the
    named family's fraction, or, for MXFP8 on gfx950, at bf16's throughput (an upper bound),
    and its source says there is no public sweep."""
    gpu = PARTS[name]
    assert gpu.efficiency is not None
    for family in gpu.efficiency.families:
        if not family.assumed_as:
            continue
        like = gpu.efficiency.family(family.assumed_as)
        assert like is not None, (name, family.family)
        assert "no public" in family.source, (name, family.family, family.source)
        mine, theirs = (getattr(gpu, PEAK[f.family]) for f in (family, like))
        ratio = family.gemm.peak_fraction / like.gemm.peak_fraction
        # (MI350X's peaks are MI355X's scaled by the clock, rounded: 1e-5 apart)
        assert ratio == pytest.approx(1.0 if family.family != "mxfp8" else theirs / mine, rel=1e-4)


def test_amd_families_are_sourced_where_public_material_exists_and_assumed_elsewhere():
    """MI300X's fp8 is a published hipBLASLt point (ROCm/hipBLASLt#1721); no public sweep times
    torch's hipBLASLt rowwise gemm on gfx942 or gfx950, MI355X's dense fp8 or its MXFP8."""
    assumed = {
        name: {f.family: f.assumed_as for f in PARTS[name].efficiency.families if f.assumed_as}
        for name in ("mi300x", "mi355x", "mi350x")
    }
    assert assumed["mi300x"] == {"fp8_rowwise": "fp8"}
    assert assumed["mi355x"] == assumed["mi350x"]
    assert assumed["mi355x"] == {"fp8": "bf16", "fp8_rowwise": "fp8", "mxfp8": "bf16"}
    fp8 = PARTS["mi300x"].efficiency.family("fp8")
    assert "hipBLASLt#1721" in fp8.source and "1005 MHz" in fp8.source
    # NVIDIA parts: every family is measured, or Hopper's carried over and said so
    for name, gpu in PARTS.items():
        if gpu.gfx_arch is None:
            assert not any(f.assumed_as for f in gpu.efficiency.families), name


@pytest.mark.parametrize("name", ["b200", "gb200", "b300", "gb300"])
def test_blackwell_rowwise_is_torchs_cutlass_kernel_well_below_cublas_tensorwise(name):
    """torch._scaled_mm rowwise on sm100/sm103 runs PyTorch's CUTLASS kernel, ~1860 TFLOP/s at
    4096^3 on a B200 where cuBLAS's tensorwise runs 2765 (OpenXLA's sm_100 table): each part's
    rowwise fraction is B200's ratio to its own tensorwise, and cites where it comes from."""
    efficiency = PARTS[name].efficiency
    assert efficiency is not None
    rowwise, tensorwise = efficiency.family("fp8_rowwise"), efficiency.family("fp8")
    assert rowwise is not None and tensorwise is not None
    assert rowwise.gemm.peak_fraction == pytest.approx(
        tensorwise.gemm.peak_fraction * BLACKWELL_ROWWISE_RATIO
    )
    assert 0.5 < BLACKWELL_ROWWISE_RATIO < 0.75  # 1860 / 2765 = 0.67 at 4096^3, as sources
    assert "helion#2756" in rowwise.source


@pytest.mark.parametrize("name", PARTS)
def test_a_part_reads_a_shipped_file_that_exists_and_a_public_model_that_has_it(name):
    gpu = PARTS[name]
    path = shipped_calibration(gpu)
    if gpu.shipped is not None:
        assert path is not None and path.name == gpu.shipped.file
        assert PRESETS[gpu.shipped.code_from].shipped is not None
    elif gpu.code_of is not None:
        assert path is not None and path == shipped_calibration(PRESETS[gpu.code_of])
    else:
        assert path is None  # datasheet timing only (h100-pcie)
    fitted = public_file.load(public_file.SHIPPED)
    assert (fitted.part(name) is not None) == (gpu.public_model is not PublicModel.NONE)
    if gpu.public_model is PublicModel.HOPPER_FIT:
        assert gpu.compute_capability[0] == 9
    if gpu.public_model is PublicModel.BLACKWELL_TRANSFER:
        assert gpu.compute_capability[0] == 10
    if gpu.public_model is not PublicModel.NONE:
        assert path is not None  # the public model times a traffic calibration's bytes


LIMITED_FIELDS = {
    "name",
    "power_w",
    "device_prefixes",
    "code_of",
    "shipped",
    "limited_from",
    "sources",
    "notes",
    "efficiency",
}


@pytest.mark.parametrize("name", [n for n, g in PARTS.items() if g.limited_from])
def test_a_power_limited_part_is_its_presets_record_with_its_gemms_capped(name):
    gpu = PARTS[name]
    base = PRESETS[gpu.limited_from]  # type: ignore[index]
    for field in dataclasses.fields(gpu):
        if field.name not in LIMITED_FIELDS:
            assert getattr(gpu, field.name) == getattr(base, field.name), field.name
    assert gpu.fabric is base.fabric and gpu.code_of == base.name and gpu.shipped is None
    assert set(base.sources) <= set(gpu.sources)
    assert gpu.efficiency is not None and base.efficiency is not None
    hopper = base.compute_capability[0] == 9
    for mine, theirs in zip(gpu.efficiency.families, base.efficiency.families, strict=True):
        # Hopper at 500 W: FBGEMM#2546's measured ratios; elsewhere watts / rated, every family
        if hopper:
            cap = POWER_CAP_BF16 if mine.family == "bf16" else POWER_CAP_FLOAT8
        else:
            assert base.power_w is not None and gpu.power_w is not None
            cap = gpu.power_w / base.power_w
        assert mine.gemm.peak_fraction == pytest.approx(theirs.gemm.peak_fraction * cap)
        assert mine.hopper_carried == theirs.hopper_carried
        assert "capped: " in mine.source
    # a cap lowers the SM clock, not the memory clock: copies stream as the preset's
    assert gpu.efficiency.memory_efficiency == base.efficiency.memory_efficiency
    assert find_gpu(f"{base.name}@{gpu.power_w}w") == gpu


@pytest.mark.parametrize("name", WITH_FABRIC)
def test_every_collective_on_a_part_with_a_fabric_takes_time(name):
    """TP-like groups inside the node (2 .. the domain) and FSDP-like groups across nodes, every
    collective kind, at a megabyte and a gigabyte."""
    fabric = find_interconnect(name)
    assert fabric is PARTS[name].fabric
    domain = fabric.gpus_per_node
    groups = [(n, "intra") for n in (2, 4, 8) if n <= domain] + [(2 * domain, "inter")]
    for n, placement in groups:
        for kind in CollectiveKind:
            small, large = (
                collective_time_s(kind, nbytes=b, group_size=n, placement=placement, fabric=fabric)
                for b in (2**20, GIB)
            )
            assert np.all(np.isfinite([small, large]))
            assert 0 < small < large, (name, kind, n, placement)


@pytest.mark.parametrize("name", ["b300", "b200-750w", "h100@500w", "h100-nvl", "h200-nvl"])
@pytest.mark.parametrize("layout", ["tp", "fsdp"])
def test_a_step_on_a_part_with_a_fabric_pays_for_its_collectives(name, layout):
    """The parts that had none before (b300, the power limits, the NVL boards): TP 8 and FSDP
    8 cost time, and no note says communication is not modelled."""
    from f8roof.engine.answer import Question, answer
    from f8roof.engine.resolve import Request
    from f8roof.engine.step.parts import Part
    from f8roof.notes import Topic
    from f8roof.training.run_config import RunConfig

    run = RunConfig.from_options(**{layout: 8})
    got = answer(Question(model="llama3-8b", tokens=8192), Request(gpu=name), setup=run)
    assert got.summary is not None
    part = Part.TP_COMM if layout == "tp" else Part.FSDP_COMM
    assert got.summary.part(part).bf16_s > 0
    assert all(n.topic is not Topic.NO_FABRIC for n in got.summary.notes)
