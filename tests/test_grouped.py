"""torchao's float8 grouped-gemm path (routed MoE experts): the traffic model read off its code."""

import inspect
import re

import numpy as np
import pytest
import sympy as sp

from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.timing.datasheet import datasheet_timing
from f8roof.timing.gemm import GemmRole, RooflineGemm, TableGemm
from f8roof.traffic.grouped import GROUPED_RECIPE, TORCHAO_KERNELS, grouped_traffic
from f8roof.traffic.monomials import SYMBOLS, K, M, N
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.variant import Before, Context, Implementation, Level
from f8roof.traffic.worst_ideal import worst_traffic
from f8roof.training.recompute import forward_share, is_forward

SCALES = 32 * K + 24 * M + 24 * N  # scale vectors: written, read by a cast, inverted


def test_totals_per_level():
    # worst: every absmax and cast loop reads the bf16 tensor from HBM
    worst = grouped_traffic(Level.WORST).total
    assert sp.expand(worst - (10 * M * K + 10 * K * N + 10 * M * N + SCALES)) == 0
    # ideal: each kernel's second loop hits L2; the weight's backward cast is two kernels, and
    # the input is cast by one forward and one backward kernel
    ideal = grouped_traffic(Level.IDEAL).total
    assert sp.expand(ideal - (6 * M * K + 8 * K * N + 6 * M * N + SCALES)) == 0
    gap = sp.Poly(sp.expand(worst - ideal), *SYMBOLS)
    assert all(c >= 0 for c in gap.coeffs())


def test_against_float8_linear():
    # the same six rowwise casts as the reference's worst case; beyond them the six scale
    # vectors' reciprocals (8 bytes an element), the fill and the separate cast kernel reading
    # the weight's column scales; but the reference's six cast passes read their scales (4 an
    # element), which torchao's one-kernel casts keep in registers.
    # No rescale passes: torchao's Float8Linear has them, _scaled_grouped_mm not.
    linear = worst_traffic(GROUPED_RECIPE)
    grouped = grouped_traffic(Level.WORST)
    reciprocals = 8 * (2 * M + 2 * N + 2 * K)
    assert sp.expand(grouped.total - linear.total) == sp.expand(
        reciprocals + 4 * K + 4 * K - 4 * (2 * M + 2 * N + 2 * K)
    )
    assert not any(k.name.endswith("rescale") for k in grouped.kernels)
    assert grouped.implementation is Implementation.TORCHAO and grouped.small_kernels == 0


def test_forward_passes_are_the_row_casts_of_input_and_weight():
    model = grouped_traffic(Level.WORST)
    forward = {k.name for k in model.kernels if is_forward(k)}
    assert forward == {
        f"{role}.{what}_rows"
        for role in ("input", "weight")
        for what in ("amax", "cast", "reciprocal")
    }
    share = sp.lambdify(SYMBOLS, forward_share(model))
    # square shapes: two of the six casts, the weight's backward cast being no heavier per byte
    assert 0.3 < share(8192, 8192, 8192) < 1 / 3


def test_the_model_follows_torchaos_code():
    """The kernel list was read off torchao 0.18's `_Float8GroupedMM`; this fails when torchao
    calls other kernels, or in another order, so the model is read again."""
    grouped_mm = pytest.importorskip("torchao.prototype.moe_training.fp8_grouped_mm")
    source = inspect.getsource(grouped_mm._Float8GroupedMM)
    calls = re.findall(r"\b(triton_fp8_\w+)\(", source)
    assert calls == [name for name, _ in TORCHAO_KERNELS]
    # three grouped gemms, all with rowwise scales and fast accumulation: no rescale pass
    assert source.count("torch._scaled_grouped_mm(") == 3
    assert source.count("use_fast_accum=True") == 3


def test_a_grouped_config_is_rowwise_standalone_and_uncalibrated():
    gpu = find_gpu("h100")
    config = EstimateConfig(GROUPED_RECIPE, gpu, Implementation.REFERENCE, grouped=True)
    row = estimate([(2048, 7168, 2048)], config).row(0)
    assert row["overhead_bytes_worst"] == int(
        grouped_traffic(Level.WORST).total.subs({M: 2048, K: 7168, N: 2048})
    )
    for bad in (
        {"recipe": Recipe.from_name("tensorwise")},
        {"context": Context(Before.RMSNORM)},
        {"fused": frozenset({Role.INPUT})},
    ):
        arguments = {"recipe": GROUPED_RECIPE, "gpu": gpu, "grouped": True, **bad}
        with pytest.raises(ValueError, match="grouped"):
            EstimateConfig(**arguments)


# --- the grouped gemm: one launch, the tiles of every expert sharing the waves ----------------


def test_a_grouped_gemm_shares_its_waves():
    tiled = datasheet_timing(find_gpu("h100")).gemm
    output = GemmRole.OUTPUT
    one, _ = tiled.time_s("fp8_rowwise", output, 16, 7168, 2048)
    many, _ = tiled.time_s("fp8_rowwise", output, 16, 7168, 2048, 128)
    # 128 experts of 16 rows: one launch, their tiles in shared waves, below 128 launches
    # (reading 128 experts' weights bounds it: 1.9 GB of float8; one expert alone splits its
    # K over the idle SMs, so 128 launches come near that bound too)
    assert one < many < 128 * one
    # compute-bound and tile-aligned: 8 groups of 1024 rows run as one gemm of 8192 rows
    grouped, _ = tiled.time_s("bf16", output, 1024, 4096, 4096, 8)
    single, _ = tiled.time_s("bf16", output, 8192, 4096, 4096)
    assert grouped == pytest.approx(single)
    # groups=1 is the single gemm, for every role and an array of group counts
    for role in GemmRole:
        base, _ = tiled.time_s("bf16", role, [512, 4096], 2048, 1024)
        same, _ = tiled.time_s("bf16", role, [512, 4096], 2048, 1024, np.ones(2))
        assert list(same) == list(base)


def test_roofline_and_table_groups():
    roofline = RooflineGemm(find_gpu("h100"))
    big, _ = roofline.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096)
    assert roofline.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096, 4)[0] == pytest.approx(
        4 * big
    )
    # tiny experts: one launch floor for the group, not one each
    floor = roofline.launch_floor_s
    assert roofline.time_s("bf16", GemmRole.OUTPUT, 16, 64, 64, 64)[0] == pytest.approx(floor)
    # a table of measured single gemms: that many gemms, launches included
    table = TableGemm.from_records(
        [("bf16", "output", m, 1024, 1024, 1e-9 * m) for m in (256, 1024, 4096)], label="t"
    )
    single, _ = table.time_s("bf16", GemmRole.OUTPUT, 1024, 1024, 1024)
    grouped, _ = table.time_s("bf16", GemmRole.OUTPUT, 1024, 1024, 1024, 8)
    assert grouped == pytest.approx(8 * single)


def test_estimate_of_a_grouped_gemm():
    gpu = find_gpu("h100")
    config = EstimateConfig(GROUPED_RECIPE, gpu, Implementation.REFERENCE, grouped=True)
    shapes = [(256, 4096, 1024), (256, 4096, 1024)]
    frame = estimate(shapes, config, groups=[1, 16])
    one, many = frame.row(0), frame.row(1)
    assert many["overhead_bytes_worst"] == 16 * one["overhead_bytes_worst"]
    assert many["overhead_bytes_ideal"] == 16 * one["overhead_bytes_ideal"]
    # the seed's roofline (60% of peak, no launch floor reached here) scales with the work
    assert many["bf16_gemm_s"] == pytest.approx(16 * one["bf16_gemm_s"])
    with pytest.raises(ValueError, match="grouped config"):
        estimate(shapes, EstimateConfig(GROUPED_RECIPE, gpu), groups=[1, 16])
