"""NVFP4 training (torchao 0.18 `nvfp4_training`): its bytes per role read off torchao's
kernels, its FP4 gemms per Blackwell preset, the 128 rule on its dims, the parts refusing it,
and model answers with it alone and among every recipe."""

import json
import re
from fractions import Fraction
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
import requires
import sympy as sp

import f8roof
from f8roof.engine.estimate import estimate
from f8roof.engine.plan import torchtitan_config
from f8roof.engine.recommend import recommend_model
from f8roof.engine.resolve import Request, resolve
from f8roof.errors import F8RoofError
from f8roof.hardware.presets import find_gpu
from f8roof.renderers.answers import torchtitan_lines
from f8roof.timing.datasheet import datasheet_timing
from f8roof.timing.gemm import GEMM_ROLES, GemmRole, fp8_gemm_dtype
from f8roof.traffic.block_scaled import BytesSource, bytes_source, kernel_kind, torchao_kernels
from f8roof.traffic.monomials import SYMBOLS, K, M, N
from f8roof.traffic.nvfp4 import KERNELS
from f8roof.traffic.recipes import ROLES, Recipe, Role
from f8roof.traffic.variant import (
    Implementation,
    UnsupportedOnGPU,
    check_gpu_support,
    fp8_reason_codes,
    fp8_shape_reason,
)
from f8roof.traffic.worst_ideal import ideal_traffic, worst_traffic
from f8roof.training.catalog import BUILTIN_CONFIGS
from f8roof.training.recompute import forward_share, is_forward
from f8roof.training.run_config import ONE_GPU

NVFP4 = Recipe.from_name("nvfp4")
TORCHAO = Implementation.TORCHAO
ROLE_NUMEL = {Role.INPUT: M * K, Role.WEIGHT: K * N, Role.GRAD_OUTPUT: M * N}


def at(expr, m, k, n):
    return sp.Integer(sp.expand(expr).subs({M: m, K: k, N: n}))


def models(**flags):
    fused = flags.get("fused", frozenset())
    return (
        worst_traffic(NVFP4, implementation=TORCHAO, **flags),
        ideal_traffic(NVFP4, implementation=TORCHAO, fused=fused),
    )


# ---- bytes per role -------------------------------------------------------------------------


def test_bytes_per_role_at_a_rectangular_shape():
    # M, K, N = 4096, 8192, 1024: input MK 33,554,432, weight KN 8,388,608, grad_output MN
    # 4,194,304 elements
    worst, ideal = models()
    mk, kn, mn = 4096 * 8192, 8192 * 1024, 4096 * 1024
    # input: the Hadamard amax reads it (2 B/element), the row+column cast reads it again and
    # writes two fp4 copies (0.5 B/element each) and their e4m3 scales (1/16 B each):
    # 2mk + 2mk + mk + mk/8 = 171,966,464
    assert at(worst.role_total(Role.INPUT), 4096, 8192, 1024) == 171_966_464
    assert 2 * mk + 2 * mk + mk + mk // 8 == 171_966_464
    # weight: Inductor's amax (2kn), two torch.zeros fills of the fp4 copies (kn/2 each), the
    # 2D cast (2kn read, kn + kn/8 written): 51,380,224
    assert at(worst.role_total(Role.WEIGHT), 4096, 8192, 1024) == 51_380_224
    assert 2 * kn + kn + 2 * kn + kn + kn // 8 == 51_380_224
    # grad_output as the input: 21,495,808
    assert at(worst.role_total(Role.GRAD_OUTPUT), 4096, 8192, 1024) == 21_495_808
    assert at(worst.total, 4096, 8192, 1024) == 171_966_464 + 51_380_224 + 21_495_808
    # ideal: each role read once and written as both copies: 25/8 of its numel
    for role, n in zip(ROLES, (mk, kn, mn)):
        assert at(ideal.role_total(role), 4096, 8192, 1024) == 2 * n + n + n // 8


def test_bytes_per_element_of_each_role():
    worst, ideal = models()
    per_element = {
        role: sp.nsimplify(sp.expand(worst.role_total(role) / ROLE_NUMEL[role])) for role in ROLES
    }
    assert per_element == {
        Role.INPUT: sp.Rational(41, 8),  # read 4, write 9/8
        Role.WEIGHT: sp.Rational(49, 8),  # read 4, write 9/8 + 1 (the zero fills)
        Role.GRAD_OUTPUT: sp.Rational(41, 8),
    }
    for role in ROLES:
        written = sum(k.bytes_written for k in worst.kernels if k.role is role)
        read = sum(k.bytes_read for k in worst.kernels if k.role is role)
        assert sp.expand(read - 4 * ROLE_NUMEL[role]) == 0
        fills = ROLE_NUMEL[role] if role is Role.WEIGHT else 0
        assert sp.expand(written - Fraction(9, 8) * ROLE_NUMEL[role] - fills) == 0
        assert sp.expand(ideal.role_total(role) - sp.Rational(25, 8) * ROLE_NUMEL[role]) == 0
    # every launch pays a floor: 20 kernels (scalar ones included), an ideal cast per role
    assert worst.small_kernels == len(worst.kernels) == 20 and ideal.small_kernels == 3


def test_flags_change_nothing_and_worst_brackets_ideal():
    plain, ideal = models()
    for fused in (frozenset(), frozenset(ROLES)):
        for limited in (frozenset(), frozenset(ROLES)):
            worst, best = models(fused=fused, limited=limited)
            assert worst.total == plain.total and best.total == ideal.total
    gap = sp.Poly(sp.expand(plain.total - ideal.total), *SYMBOLS)
    assert all(c >= 0 for c in gap.coeffs())


def test_the_forward_casts_input_and_weight_both_ways():
    worst, _ = models()
    forward = {k.name for k in worst.kernels if is_forward(k)}
    assert forward == {k.name for k in worst.kernels if k.role is not Role.GRAD_OUTPUT}
    share = sp.lambdify(SYMBOLS, forward_share(worst))
    assert share(8192, 8192, 8192) == pytest.approx(90 / 131)  # (41 + 49) / (41 + 49 + 41)


def test_read_off_kernels_and_their_kinds():
    assert bytes_source(NVFP4)[0] is BytesSource.READ_OFF
    kernels = torchao_kernels(NVFP4)
    assert sp.expand(sum(t.bytes_total for _, t in kernels) - models()[0].total) == 0
    kinds = [kernel_kind(k) for k, _ in kernels]
    assert kinds.count("persistent_reduction") == 3 and kinds.count("reduction") == 3
    assert kinds.count("pointwise") == 14


# ---- what the model was read off --------------------------------------------------------------


def _source(name: str) -> str:
    spec = find_spec("torchao")
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent / "prototype" / "moe_training" / "nvfp4_training"
    return (folder / name).read_text()


def _body(source: str, start: str, end: str) -> str:
    i = source.index(start)
    return source[i : source.index(end, i + len(start))]


@requires.torchao
@requires.torch_213_torchao_018
def test_the_model_follows_torchaos_code():
    """KERNELS was read off torchao 0.18's nvfp4_training: this fails when torchao changes its
    call order or what its kernels load and store, so the model is read again."""
    linear = _source("nvfp4_linear.py")
    calls = re.findall(
        r"\b(triton_rht_amax|triton_rht_quantize_row_col|_triton_weight_quantize_2d"
        r"|per_tensor_amax_to_scale|torch\.randint)\(",
        _body(linear, "class nvfp4_mm_triton", "def nvfp4_linear("),
    )
    assert calls == [
        "triton_rht_amax",  # input
        "triton_rht_quantize_row_col",
        "_triton_weight_quantize_2d",
        "per_tensor_amax_to_scale",  # the input's scale
        "torch.randint",  # backward: stochastic rounding's offsets
        "torch.randint",
        "triton_rht_amax",  # grad_output
        "triton_rht_quantize_row_col",
        *["per_tensor_amax_to_scale"] * 4,  # the backward gemms' per-tensor scales
    ]
    order = [(kernel, role) for kernel, role, *_ in KERNELS if kernel != "torch.zeros"]
    assert order[:4] == [
        ("_hadamard_amax_kernel", Role.INPUT),
        ("_hadamard_quantize_row_col_kernel", Role.INPUT),
        ("triton_red_fused_abs_convert_element_type_div_max", Role.WEIGHT),
        ("triton_quantize_2d_weight", Role.WEIGHT),
    ]
    assert "x.float().abs().max()" in linear and "stochastic_rounding=True" in linear
    assert "M % 128 != 0 or K % 128 != 0 or N % 128 != 0" in linear
    # the Hadamard amax: one load per tile, two atomics into two zero-filled scalars
    amax = _source("hadamard_amax_triton.py")
    kernel = _body(amax, "def _hadamard_amax_kernel(", "@torch.library.custom_op")
    assert kernel.count("a_desc.load(") == 1 and kernel.count("tl.atomic_max(") == 2
    assert amax.count("torch.zeros((), dtype=torch.float32") == 2
    # the row+column cast: one load per tile, four stores (codes and scales, both layouts)
    cast = _source("hadamard_quantize_row_col_triton.py")
    kernel = _body(cast, "def _hadamard_quantize_row_col_kernel(", "@torch.library.custom_op")
    assert kernel.count("a_desc.load(") == 1
    assert kernel.count("c_desc.store(") == 2 and kernel.count("sf_desc.store(") == 2
    assert "(N, M // 2), dtype=torch.uint8" in cast and "(M, N // 2), dtype=torch.uint8" in cast
    assert cast.count("(M // 128, N // 64, 32, 16), dtype=torch.float8_e4m3fn") == 2
    # the weight's 2D cast: zero-filled fp4 copies, one load per tile, four stores
    weight = _source("quantize_2d_triton.py")
    kernel = _body(weight, "def triton_quantize_2d_weight(", "@torch.library.custom_op")
    assert kernel.count("a_desc.load(") == 1 and kernel.count("_desc.store(") == 4
    wrapper = _body(weight, "def triton_weight_quantize_2d(", "@triton_weight_quantize_2d")
    assert wrapper.count("torch.zeros(") == 2 and wrapper.count("torch.empty(") == 2


# ---- alignment, gemms, parts ------------------------------------------------------------------


def test_dims_must_be_multiples_of_128():
    # torchao's nvfp4_mm_triton raises unless M, K and N are multiples of 128: a 32-multiple
    # that MX takes is not enough
    assert fp8_shape_reason(NVFP4, 8192, 4096, 4096) is None
    assert fp8_shape_reason(Recipe.from_name("mxfp8_rceil"), 8224, 4096, 4096) is None
    assert fp8_shape_reason(NVFP4, 8224, 4096, 4096).startswith("M=8224 not a multiple of 128")
    codes, table = fp8_reason_codes(NVFP4, [8192, 8224], [4096, 4096], [4096, 14368])
    assert [table[c] for c in codes] == ["", "M and N not multiples of 128"]


def test_gemms_are_fp4_at_each_blackwell_presets_own_family():
    assert {fp8_gemm_dtype(NVFP4, role) for role in GEMM_ROLES} == {"nvfp4"}
    for name in ("b200", "b200-750w", "gb200", "b300", "gb300"):
        families = dict(datasheet_timing(find_gpu(name)).all_gemms.efficiencies)
        # at 750 of 1000 W every family runs 0.75 of its stock throughput (docs/mx.md)
        floor = 0.5 * (0.75 if name == "b200-750w" else 1.0)
        assert floor < families["nvfp4"].peak_fraction < families["fp8"].peak_fraction, name
    for name in ("h100", "mi355x"):
        assert "nvfp4" not in dict(datasheet_timing(find_gpu(name)).all_gemms.efficiencies)
    # b200 at 8192^3: pytorch/ao#2427's torch._scaled_mm NVFP4 gemm ran 5.37 PFLOP/s
    gemm = datasheet_timing(find_gpu("b200")).all_gemms
    cube = np.array([8192.0])
    flops = {
        d: 2 * 8192.0**3 / gemm.time_s(d, GemmRole.OUTPUT, cube, cube, cube)[0][0]
        for d in ("nvfp4", "fp8")
    }
    assert flops["nvfp4"] == pytest.approx(5.37e15, rel=0.02)
    assert 1.5 < flops["nvfp4"] / flops["fp8"] < 2


def test_the_shipped_b200_file_times_nvfp4_gemms_at_the_presets_family():
    config = resolve(Request(gpu="b200", recipes="nvfp4")).config
    assert config.calibration is not None and config.implementation is TORCHAO
    shipped = config.gemm_model
    datasheet = datasheet_timing(find_gpu("b200")).all_gemms
    cube = np.array([8192.0])
    for role in GEMM_ROLES:
        assert shipped.time_s("nvfp4", role, cube, cube, cube)[0] == pytest.approx(
            datasheet.time_s("nvfp4", role, cube, cube, cube)[0]
        )


@pytest.mark.parametrize(
    "gpu, message",
    [
        ("h100", "h100 (sm_90) has no NVFP4 gemms"),
        ("h200", "h200 (sm_90) has no NVFP4 gemms"),
        ("mi355x", "mi355x (gfx950) has no NVFP4 gemms"),
    ],
)
def test_parts_without_fp4_gemms_refuse_it_in_one_line(cli, gpu, message):
    with pytest.raises(UnsupportedOnGPU, match=re.escape(message)):
        check_gpu_support(NVFP4, find_gpu(gpu))
    for args in (
        ("--shape", "8192,8192,8192"),
        ("--model", "llama3-8b", "--tokens", "8192", "--recipe", "tensorwise,nvfp4"),
    ):
        recipe = () if "--recipe" in args else ("--recipe", "nvfp4")
        result = cli("estimate", "--gpu", gpu, *recipe, *args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output
    with pytest.raises(F8RoofError, match=re.escape(message)):
        f8roof.answer_model("llama3-8b", 8192, gpu=gpu, recipe="nvfp4")


# ---- answers on b200 --------------------------------------------------------------------------


def test_a_shape_on_b200_times_the_read_off_kernels():
    config = resolve(Request(gpu="b200", recipes="nvfp4")).config
    row = estimate([(8192, 8192, 8192)], config).row(0)
    n = 8192**2
    assert row["overhead_bytes_fitted"] == pytest.approx(131 * n // 8)  # 1,098,907,648
    assert row["overhead_bytes_worst"] == pytest.approx(131 * n // 8)
    assert row["overhead_bytes_ideal"] == pytest.approx(75 * n // 8)
    kernel_time = config.calibration.kernel_time
    expected = sum(
        kernel_time.time_s(kind, float((read + written) * n))
        for _, _, _, kind, read, written in KERNELS
    )
    assert row["overhead_s_fitted"] == pytest.approx(float(expected))
    assert bool(row["fp8_ok"]) and row["speedup"] > 1


def test_llama3_8b_on_b200_with_nvfp4():
    answer = f8roof.answer_model("llama3-8b", 8192, gpu="b200", recipe="nvfp4")
    layers = answer.recommendation.layers
    assert answer.recommendation.recipes == ("nvfp4",)
    assert set(layers["recipe"]) == {"nvfp4"} and layers["fp8_ok"].all()
    assert (layers["speedup_level"] == "fitted").all()  # the shipped file's kernel-time model
    # the fitted overhead is the read-off kernels' bytes at each local shape
    first = layers.iloc[0]
    expected = (41 * first.M * first.K + 49 * first.K * first.N + 41 * first.M * first.N) / 8
    assert first["overhead_bytes_fitted"] == pytest.approx(expected)
    mlp = layers[layers["fqn"].str.contains("mlp")]
    assert mlp["convert"].all() and (mlp["speedup"] > 1).all()
    assert answer.summary.speedup > 1


def test_every_recipe_on_b200_has_nvfp4_among_its_candidates():
    answer = f8roof.answer_model("llama3-8b", 8192, gpu="b200", recipe="all")
    rec = answer.recommendation
    assert "nvfp4" in rec.recipes and "mxfp8_rceil" in rec.recipes
    assert "speedup_nvfp4" in rec.layers.columns
    assert "nvfp4" in {plan.recipe for plan in answer.recipe_plans}
    # at 8192 tokens NVFP4's gemms win wherever they run: the plan the answer leads with
    assert answer.recipe_plans[0].recipe == "nvfp4" and set(rec.layers["recipe"]) == {"nvfp4"}
    assert all(answer.recipe_plans[0].speedup >= plan.speedup for plan in answer.recipe_plans)


def test_the_mix_takes_nvfp4_only_where_its_dims_allow(tmp_path):
    # an intermediate size of 14368 is a multiple of 32 (MX runs it), not of 128 (NVFP4 does
    # not): the MLP rows take another recipe, the attention rows and lm_head NVFP4
    config = dict(BUILTIN_CONFIGS["llama3-8b"][1]) | {"intermediate_size": 14368}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    answer = f8roof.answer_model(str(path), 8192, gpu="b200", recipe="all")
    # each layer its best recipe mixes NVFP4 (attention, lm_head) with another (the MLPs):
    # shown beside the choice, never the choice, as torchtitan converts with one recipe
    mix = next(plan for plan in answer.recipe_plans if plan.recipe is None)
    assert "nvfp4" in mix.recipes and len(mix.recipes) == 2 and not mix.one_converter
    assert any("mlp" in fqn for fqn in mix.converted)
    choice = answer.recipe_plans[0]
    assert choice.recipe is not None and choice.one_converter
    layers = answer.recommendation.layers
    assert set(layers[layers["convert"].astype(bool)]["recipe"]) == {choice.recipe}
    # NVFP4 alone keeps them in bf16, naming the dim
    alone = f8roof.answer_model(str(path), 8192, gpu="b200", recipe="nvfp4")
    rows = alone.recommendation.layers.set_index("fqn")
    down = rows.loc["model.layers.*.mlp.down_proj"]
    assert not down["fp8_ok"] and not down["convert"]
    assert str(down["fp8_reason"]) == "K not a multiple of 128"
    # tokens a multiple of 32 and not of 128: no row runs NVFP4
    odd = f8roof.answer_model("llama3-8b", 8224, gpu="b200", recipe="all")
    assert "nvfp4" not in set(odd.recommendation.layers["recipe"])


def test_torchtitans_nvfp4_converter_config():
    resolved = resolve(Request(gpu="b200", recipes="nvfp4"))
    rec = recommend_model("llama3-8b", tokens=8192, resolved=resolved, setup=ONE_GPU)
    config = torchtitan_config(rec)
    assert config.section == "NVFP4LinearConverter" and config.converts
    assert config.fqns == ("layers", "lm_head")  # every linear converts
    assert torchtitan_lines(config)[-1] == (
        'NVFP4LinearConverter.Config(fqns=["layers", "lm_head"], model_compile_enabled=True)'
    )
    # torchtitan's bf16 tail: the blocks it converts, as its nvfp4_bf16_tail_fqns lists them
    from dataclasses import replace

    tail = replace(ONE_GPU, filter_fqns=("nvfp4_bf16_tail",))
    rec = recommend_model("llama3-8b", tokens=8192, resolved=resolved, setup=tail)
    assert torchtitan_config(rec).fqns == tuple(f"layers.{i}." for i in range(27))
    # at 1024 tokens only the MLP and lm_head win: q, k, v are one fused linear there
    rec = recommend_model("llama3-8b", tokens=1024, resolved=resolved, setup=ONE_GPU)
    assert torchtitan_config(rec).fqns == (
        "feed_forward.w1",
        "feed_forward.w3",
        "feed_forward.w2",
        "lm_head",
    )


def test_a_measured_gemm_table_has_no_fp4_gemms_to_time():
    from dataclasses import replace

    from f8roof.calibration.file import CalibrationKind

    shipped = resolve(Request(gpu="b200", recipes="nvfp4")).calibration
    measured = replace(shipped, kind=CalibrationKind.MEASURED, datasheet_gemm=None)
    with pytest.raises(F8RoofError, match="times no nvfp4 gemms"):
        resolve(Request(gpu="b200", recipes="nvfp4", calibration=measured))
    every = resolve(Request(gpu="b200", recipes="all", calibration=measured))
    assert "nvfp4" not in [c.recipe.name for c in every.configs]
    # a gemm efficiency times them on the FP4 peak
    given = resolve(Request(gpu="b200", recipes="nvfp4", calibration=measured, gemm_efficiency=0.6))
    assert given.config.recipe.is_nvfp4
