"""MXFP8 and blockwise float8 training (torchao 0.18 prototypes): recipes, their traffic models,
what is generated and what is read off torchao's kernels, and the inputs refused."""

import inspect
import itertools
import re

import pytest
import requires
import sympy as sp

from f8roof.errors import ModelError
from f8roof.hardware.presets import find_gpu
from f8roof.timing.gemm import GemmRole, fp8_gemm_dtype
from f8roof.traffic.block_scaled import (
    BLOCKWISE_CAST_KERNELS,
    MX_CAST_KERNELS,
    BytesSource,
    bytes_source,
    cast_order,
    torchao_kernels,
)
from f8roof.traffic.monomials import SYMBOLS, K, M, N
from f8roof.traffic.recipes import (
    BLOCK_SCALED_NAMES,
    ROLES,
    Granularity,
    Recipe,
    RecipeError,
    Role,
)
from f8roof.traffic.variant import (
    ContextError,
    Implementation,
    UnsupportedOnGPU,
    Variant,
    check_gpu_support,
    fp8_reason_codes,
    fp8_shape_reason,
    gpu_support_reason,
)
from f8roof.traffic.worst_ideal import ideal_traffic, worst_traffic
from f8roof.training.recompute import forward_share, is_forward

TORCHAO = Implementation.TORCHAO
FLAG_SETS = [frozenset(c) for k in range(4) for c in itertools.combinations(ROLES, k)]


def at(expr, m, k, n):
    return sp.Integer(sp.expand(expr).subs({M: m, K: k, N: n}))


def models(name, **flags):
    recipe = Recipe.from_name(name)
    fused = flags.get("fused", frozenset())
    worst = worst_traffic(recipe, implementation=TORCHAO, **flags)
    return worst, ideal_traffic(recipe, implementation=TORCHAO, fused=fused)


# ---- recipes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BLOCK_SCALED_NAMES)
def test_names_round_trip(name):
    recipe = Recipe.from_name(name)
    assert recipe.name == name and recipe.is_block_scaled
    assert Variant.from_key(f"torchao:{name}").recipe == recipe


def test_recipe_fields():
    rceil, hp, emulated, blockwise = (Recipe.from_name(n) for n in BLOCK_SCALED_NAMES)
    assert {rceil.granularity, hp.granularity, emulated.granularity} == {Granularity.MX}
    assert hp.grad_weight_in_bf16 and not rceil.grad_weight_in_bf16
    assert emulated.emulated and not rceil.emulated
    assert blockwise.granularity is Granularity.BLOCKWISE
    # the earlier recipes are untouched
    assert not Recipe.from_name("rowwise").is_block_scaled


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Recipe.from_name("mxfp8_rceil", {"weight": "delayed"}), "dynamic only"),
        (lambda: Recipe(Granularity.BLOCKWISE, grad_weight_in_bf16=True), "bf16 grad_weight"),
        (lambda: Recipe(Granularity.ROWWISE, emulated=True), "emulated"),
        (lambda: Recipe.from_name("mxfp9"), "unknown recipe"),
    ],
)
def test_bad_recipes_are_one_line_errors(build, message):
    with pytest.raises(RecipeError, match=message) as error:
        build()
    assert "\n" not in str(error.value)


def test_reference_has_no_block_scaled_recipes():
    with pytest.raises(ContextError, match="use implementation torchao"):
        Variant(Recipe.from_name("mxfp8_rceil"), Implementation.REFERENCE)
    with pytest.raises(ContextError, match="use implementation torchao"):
        worst_traffic(Recipe.from_name("blockwise"))


# ---- alignment and GPUs -----------------------------------------------------------------------


def test_alignment_is_the_scale_block():
    # torchao's MX casts assert multiples of 32 (to_mx, mxfp8_quantize_cuda); blockwise 128
    mx, blockwise = Recipe.from_name("mxfp8_rceil"), Recipe.from_name("blockwise")
    assert fp8_shape_reason(mx, 4096, 4096, 4096) is None
    assert fp8_shape_reason(mx, 4096, 4112, 4096) == (
        "K=4112 not a multiple of 32 (mxfp8_rceil's scale blocks need it)"
    )
    assert fp8_shape_reason(blockwise, 4096, 4160, 4096).startswith("K=4160 not a multiple of 128")
    # a bf16 grad_weight gemm: M is nobody's block dim
    assert fp8_shape_reason(Recipe.from_name("mxfp8_rceil_wgrad_with_hp"), 100, 64, 64) is None
    codes, table = fp8_reason_codes(blockwise, [128, 64], [256, 256], [384, 64])
    assert [table[c] for c in codes] == ["", "M and N not multiples of 128"]


def test_mx_needs_mx_gemms():
    mx = Recipe.from_name("mxfp8_rceil")
    assert gpu_support_reason(mx, find_gpu("b200")) is None
    for name in ("h100", "h200", "mi300x"):
        with pytest.raises(UnsupportedOnGPU, match=rf"{name} \(\w+\) has no MXFP8 gemms") as error:
            check_gpu_support(mx, find_gpu(name))
        assert "\n" not in str(error.value) and isinstance(error.value, ModelError)
    # emulated MX runs its gemms in bf16 anywhere; tensorwise everywhere
    assert gpu_support_reason(Recipe.from_name("mxfp8_emulated_rceil"), find_gpu("h100")) is None
    assert gpu_support_reason(Recipe.from_name("tensorwise"), find_gpu("mi300x")) is None


def test_blockwise_needs_sm90():
    # torch's _check_deepseek_support: 1x128/128x128 scales on compute capability 9.x only
    blockwise = Recipe.from_name("blockwise")
    assert gpu_support_reason(blockwise, find_gpu("h100")) is None
    for name in ("b200", "mi300x"):
        with pytest.raises(
            UnsupportedOnGPU, match=rf"{name} \(\w+\) has no 1x128/128x128 blockwise"
        ):
            check_gpu_support(blockwise, find_gpu(name))


def test_gemm_kernels():
    assert fp8_gemm_dtype(Recipe.from_name("mxfp8_rceil"), GemmRole.GRAD_WEIGHT) == "fp8"
    hp = Recipe.from_name("mxfp8_rceil_wgrad_with_hp")
    assert fp8_gemm_dtype(hp, GemmRole.GRAD_WEIGHT) == "bf16"
    assert fp8_gemm_dtype(Recipe.from_name("mxfp8_emulated_rceil"), GemmRole.OUTPUT) == "bf16"
    assert fp8_gemm_dtype(Recipe.from_name("blockwise"), GemmRole.OUTPUT) == "fp8_rowwise"


# ---- traffic models ---------------------------------------------------------------------------


def test_mxfp8_rceil_at_8192_cubed():
    n = 8192 * 8192  # every role has 67,108,864 elements
    worst, ideal = models("mxfp8_rceil")
    # worst, per role: two casts reading bf16 (2 x 2n) and writing float8 (2 x n) and e8m0
    # scales (2 x n/32), and each scale tensor rearranged once (2 x (n/32 + n/32)):
    # 6n + 6n/32 = 415,236,096 per role
    assert at(worst.total, 8192, 8192, 8192) == 3 * 415_236_096 == 3 * (6 * n + 6 * n // 32)
    # ideal, per role: one bf16 read, both float8 copies and their scales: 4n + n/16
    assert at(ideal.total, 8192, 8192, 8192) == 3 * 272_629_760 == 3 * (4 * n + n // 16)


def test_mxfp8_rceil_rectangular():
    # M,K,N = 4096, 8192, 1024: MK 33,554,432, KN 8,388,608, MN 4,194,304 (sum 46,137,344);
    # every role moves 99/16 of its numel at worst: 285,474,816
    worst, ideal = models("mxfp8_rceil")
    assert at(worst.total, 4096, 8192, 1024) == 285_474_816
    assert at(ideal.total, 4096, 8192, 1024) == 65 * 46_137_344 // 16 == 187_432_960
    # block scales grow with the tensor (1 byte per 32 elements): no O(M + K + N) vector terms
    # as rowwise has
    assert {sum(m) for m in sp.Poly(worst.total, *SYMBOLS).monoms()} == {2}


def test_wgrad_with_hp_drops_two_casts():
    n = 8192 * 8192
    worst, ideal = models("mxfp8_rceil_wgrad_with_hp")
    names = [k.name for k in worst.kernels]
    assert "input.cast_cols" not in names and "grad_output.cast_cols" not in names
    assert "weight.cast_cols" in names
    # input, grad_output: 3n + 3n/32 each; weight 6n + 6n/32: 830,472,192
    assert at(worst.total, 8192, 8192, 8192) == 2 * (3 * n + 3 * n // 32) + (6 * n + 6 * n // 32)
    assert at(worst.total, 8192, 8192, 8192) == 830_472_192
    # ideal: input, grad_output 3n + n/32 each (one copy); weight 4n + n/16: 679,477,248
    assert at(ideal.total, 8192, 8192, 8192) == 679_477_248


def test_blockwise_at_8192_cubed():
    n = 8192 * 8192
    worst, ideal = models("blockwise")
    # six Triton casts, each reading 2n and writing n: 18n = 1,207,959,552; fp32 scales: input
    # and grad_output 4n/128 per cast (two casts each: n/16 = 4,194,304 each), weight 4n/16384
    # per cast (two: n/2048 = 32,768): 1,216,380,928
    assert at(worst.total, 8192, 8192, 8192) == 1_207_959_552 + 2 * 4_194_304 + 32_768
    assert at(ideal.total, 8192, 8192, 8192) == 12 * n + 2 * 4_194_304 + 32_768


def test_rceil_rounding_changes_no_bytes():
    # the e8m0 rounding is arithmetic on a block's amax: mxfp8_rceil's bytes are those of one
    # e8m0 scale per 32 elements, nothing else; the emulated recipe differs only in its casts
    worst, _ = models("mxfp8_rceil")
    scale_bytes = sum(k.bytes_written for k in worst.kernels if k.name.split(".")[1] == "cast_rows")
    assert sp.expand(scale_bytes - (M * K + K * N + M * N) * sp.Rational(33, 32)) == 0


def test_flags_bracket():
    for name, fused, limited in itertools.product(BLOCK_SCALED_NAMES, FLAG_SETS, FLAG_SETS):
        worst, ideal = models(name, fused=fused, limited=limited)
        gap = sp.Poly(sp.expand(worst.total - ideal.total), *SYMBOLS)
        assert all(c >= 0 for c in gap.coeffs()), (name, fused, limited)
        # no scale kernels, but a launch floor per launch: each worst kernel, each unfused
        # role's ideal cast (a 16^3 MX linear's casts once took no time)
        assert worst.small_kernels == len(worst.kernels) >= ideal.small_kernels
        assert ideal.small_kernels == len([r for r in ROLES if r not in fused])
    # F frees nothing of torchao's opaque MX casts; L splits the scale rearrangement in two
    plain, _ = models("mxfp8_rceil")
    fused, _ = models("mxfp8_rceil", fused=frozenset(ROLES))
    assert fused.total == plain.total
    limited, _ = models("mxfp8_rceil", limited=frozenset({Role.WEIGHT}))
    assert sp.expand(limited.total - plain.total) == 2 * 2 * K * N / 32


def test_forward_passes_are_the_row_casts():
    for name in BLOCK_SCALED_NAMES:
        worst, _ = models(name)
        forward = {k.name for k in worst.kernels if is_forward(k)}
        assert forward and all(n.startswith(("input.", "weight.")) for n in forward)
        assert all(n.endswith("_rows") for n in forward)
    # mxfp8_rceil, square shapes: two of the six casts
    share = sp.lambdify(SYMBOLS, forward_share(models("mxfp8_rceil")[0]))
    assert share(8192, 8192, 8192) == pytest.approx(1 / 3)


def test_bytes_sources():
    sources = {n: bytes_source(Recipe.from_name(n))[0] for n in BLOCK_SCALED_NAMES}
    assert sources == {
        "mxfp8_rceil": BytesSource.READ_OFF,
        "mxfp8_rceil_wgrad_with_hp": BytesSource.READ_OFF,
        "mxfp8_emulated_rceil": BytesSource.GENERATED,
        "blockwise": BytesSource.READ_OFF,
    }
    assert bytes_source(Recipe.from_name("rowwise"))[0] is BytesSource.GENERATED
    kernels = torchao_kernels(Recipe.from_name("mxfp8_rceil"))
    assert [k for k, _ in kernels].count("to_blocked") == 6
    assert sp.expand(sum(t.bytes_total for _, t in kernels) - models("mxfp8_rceil")[0].total) == 0


# ---- the kernels read off torchao's code ------------------------------------------------------


def _kernel_body(source: str, name: str, end: str) -> str:
    start = source.index(f"def {name}(")
    return source[start : source.index(end, start)]


def test_mx_model_follows_torchaos_code():
    """MX_CAST_KERNELS was read off torchao 0.18's `mx_mm` and the kernels it picks; this fails
    when torchao changes them, so the model is read again."""
    linear = pytest.importorskip("torchao.prototype.moe_training.mxfp8_linear")
    calls = re.findall(
        r"(MXTensor\.to_mx|_to_mxfp8_dim1_kernel_wrapper)\(\s*([\w.()]+)",
        inspect.getsource(linear.mx_mm),
    )
    # the AUTO path (kernel choices fixed by `_to_mxfp8_then_scaled_mm`) and the torch-native
    # path that EMULATED takes for dim1 (its transposed copies, `.t().contiguous()`)
    assert calls == [
        ("MXTensor.to_mx", "input_hp_r"),
        ("MXTensor.to_mx", "weight_hp"),
        ("MXTensor.to_mx", "grad_output_hp_r"),
        ("MXTensor.to_mx", "weight_hp_t_c"),
        ("_to_mxfp8_dim1_kernel_wrapper", "weight_hp"),
        ("_to_mxfp8_dim1_kernel_wrapper", "grad_output_hp_r"),
        ("MXTensor.to_mx", "grad_output_hp_r.t().contiguous()"),
        ("_to_mxfp8_dim1_kernel_wrapper", "input_hp_r"),
        ("MXTensor.to_mx", "input_hp_r.t().contiguous()"),
    ]
    auto = [c for c in calls if c[1] != "weight_hp_t_c" and ".t()" not in c[1]]
    roles = {
        "input_hp_r": Role.INPUT,
        "weight_hp": Role.WEIGHT,
        "grad_output_hp_r": Role.GRAD_OUTPUT,
    }
    assert [(roles[a], "rows" if f == "MXTensor.to_mx" else "cols") for f, a in auto] == [
        (role, cast) for _, role, cast in MX_CAST_KERNELS
    ]
    choice = inspect.getsource(linear._to_mxfp8_then_scaled_mm)
    assert "MXFP8Dim0CastKernelChoice.TRITON" in choice
    assert "MXFP8Dim1CastKernelChoice.CUDA" in choice
    assert "block_size = 32" in choice

    from torchao.prototype.mx_formats import kernels, mx_tensor, utils

    assert "triton_to_mxfp8_dim0(" in inspect.getsource(mx_tensor.MXTensor.to_mx)
    wrapper = inspect.getsource(utils._to_mxfp8_dim1_kernel_wrapper)
    assert re.search(r"mxfp8_quantize_cuda\(\s*a,\s*rowwise=False,\s*colwise=True", wrapper)
    # the Triton dim0 kernel loads its tile once and stores float8 and scales
    source = inspect.getsource(kernels)
    dim0 = _kernel_body(source, "to_mxfp8_dim0_kernel", "@triton_op")
    assert (dim0.count("tl.load("), dim0.count("tl.store(")) == (1, 2)
    # the CUDA kernel's outputs (its fake): column-major float8 and one e8m0 per 32 rows
    fake = _kernel_body(source, "_fake_mxfp8_quantize", "@register_sharding")
    assert "num_row_blocks = rows // 32" in fake and "float8_e8m0fnu" in fake
    # each gemm rearranges both operands' scales with torch ops Inductor compiles
    dispatch = inspect.getsource(mx_tensor._addmm_mx_dispatch)
    assert dispatch.count("maybe_dtensor_to_blocked(") == 2
    to_blocked = inspect.getsource(utils.to_blocked)
    assert "torch.zeros(" in to_blocked and "padded[:rows, :cols] = input_matrix" in to_blocked


def test_blockwise_model_follows_torchaos_code():
    linear = pytest.importorskip("torchao.prototype.blockwise_fp8_training.linear")
    from torchao.prototype.blockwise_fp8_training import kernels

    calls = re.findall(r"(triton_fp8_blockwise_\w+)\(", inspect.getsource(linear.fp8_blockwise_mm))
    assert calls == [name for name, _, _ in BLOCKWISE_CAST_KERNELS]
    source = inspect.getsource(kernels)
    for name in set(calls):
        body = _kernel_body(source, f"{name}_kernel", "\n@")
        assert (body.count("tl.load("), body.count("tl.store(")) == (1, 2), name
    assert "assert block_size == 128" in inspect.getsource(linear.fp8_blockwise_mm.forward)


def test_cast_order_is_torchaos():
    assert cast_order(Recipe.from_name("blockwise"))[1] == (Role.WEIGHT, "rows")
    assert cast_order(Recipe.from_name("mxfp8_rceil_wgrad_with_hp")) == (
        (Role.INPUT, "rows"),
        (Role.WEIGHT, "rows"),
        (Role.GRAD_OUTPUT, "rows"),
        (Role.WEIGHT, "cols"),
    )


# ---- what Inductor generates ------------------------------------------------------------------


@pytest.mark.slow
@requires.torch_213_torchao_018  # torchao 0.18's MX training asserts a torch newer than 2.11
def test_emulated_mx_generated_bytes_equal_the_worst_model():
    pytest.importorskip("torchao.prototype.moe_training")
    from f8roof.profiler.capture import capture

    shape = (256, 768, 512)  # M, K, N distinct: every buffer dim says which it is
    variant = Variant(Recipe.from_name("mxfp8_emulated_rceil"), TORCHAO)
    captured = capture(variant, shape, device="codegen", gpu=find_gpu("b200"))
    assert not captured.disagreements()
    # six casts, each a reduction (reads 2n, writes fp32 4n and bf16 scales n/16) and a
    # pointwise dequantize (reads those, writes 2n): 12n + n/8 per cast, 24n + n/4 per role;
    # MK 196,608, KN 393,216, MN 131,072: 97/4 x 720,896 = 17,481,728
    assert captured.overhead_bytes == 17_481_728
    assert captured.overhead_bytes == at(models("mxfp8_emulated_rceil")[0].total, *shape)
    # the block-shaped buffers ((M, K/32, 32), a scale per block) are read as the linear's
    # tensors, so the exact fits see every byte: no workspace, each kernel 97/16 of a numel
    samples = captured.samples()
    assert all(s.workspace == 0 and s.polynomial is not None for s in samples)
    assert {str(s.polynomial) for s in samples} == {"97*K*M/16", "97*K*N/16", "97*M*N/16"}
    gemms = [launch for launch in captured.launches if launch.is_gemm]
    assert len(gemms) == 3 and all(g.name == "extern_kernels.mm" for g in gemms)  # bf16 mm


@pytest.mark.slow
@requires.torch_213_torchao_018  # where each stops is version-specific
@pytest.mark.parametrize("name, why", [("mxfp8_rceil", "fake tensor"), ("blockwise", "scatter")])
def test_hand_written_kernels_do_not_generate_here(name, why):
    pytest.importorskip("torchao.prototype.moe_training")
    from f8roof.profiler.capture import CaptureError, capture

    variant = Variant(Recipe.from_name(name), TORCHAO)
    with pytest.raises(CaptureError, match=why):
        capture(variant, (256, 256, 512), device="codegen", gpu=find_gpu("b200"))
    assert bytes_source(variant.recipe)[0] is BytesSource.READ_OFF


# ---- routed experts on torchao's MXFP8 grouped path -------------------------------------------


def test_mx_grouped_traffic():
    from f8roof.traffic.grouped import grouped_traffic
    from f8roof.traffic.variant import Level

    n = 8192 * 8192
    worst = grouped_traffic(Level.WORST, Recipe.from_name("mxfp8_rceil"))
    # per role: two casts (2 x (2n read + n + n/32 written)); rearranged scales: the weight's
    # forward ones and both grad_weight operands' (n/32 read and written): 6n + 4n/32 each
    assert at(worst.total, 8192, 8192, 8192) == 3 * (6 * n + 4 * n // 32) == 1_233_125_376
    ideal = grouped_traffic(Level.IDEAL, Recipe.from_name("mxfp8_rceil"))
    assert at(ideal.total, 8192, 8192, 8192) == 3 * (4 * n + n // 16)
    hp = grouped_traffic(Level.WORST, Recipe.from_name("mxfp8_rceil_wgrad_with_hp"))
    # no column casts of input and grad_output (nor their rearrangements): 3n + n/32 each; the
    # weight's two casts and its forward rearrangement: 6n + 4n/32; 817,889,280 in all
    assert at(hp.total, 8192, 8192, 8192) == 2 * (3 * n + n // 32) + 6 * n + 4 * n // 32
    with pytest.raises(ModelError, match="rowwise or MXFP8"):
        grouped_traffic(Level.WORST, Recipe.from_name("tensorwise"))


def test_mx_grouped_model_follows_torchaos_code():
    grouped = pytest.importorskip("torchao.prototype.moe_training.mxfp8_grouped_mm")
    from f8roof.traffic.grouped import MX_GROUPED_KERNELS

    pattern = (
        r"\b(mxfp8_quantize_2d_1x32_cutedsl|triton_to_mxfp8_dim0|triton_mx_block_rearrange_\w+"
        r"|mxfp8_quantize_cuda_3d|_to_mxfp8_dim1_kernel_wrapper)\("
    )
    calls = [
        name
        for f in (grouped._compute_fwd_sm100, grouped._compute_dgrad_sm100)
        for name in re.findall(pattern, inspect.getsource(f))
    ]
    wgrad = inspect.getsource(grouped._compute_wgrad_sm100)
    calls += re.findall(pattern, wgrad)
    # the CUDA colwise cast is `_to_mxfp8_dim1_kernel_wrapper(..., MXFP8Dim1CastKernelChoice.CUDA)`
    assert wgrad.count("cast_kernel_choice=MXFP8Dim1CastKernelChoice.CUDA") == 2
    expected = []
    for kernel, _, _, rearrange in MX_GROUPED_KERNELS:
        expected.append("_to_mxfp8_dim1_kernel_wrapper" if kernel == "mxfp8_quantize" else kernel)
        if rearrange and kernel != "mxfp8_quantize":
            expected.append(rearrange)
    expected += ["triton_mx_block_rearrange_2d_K_groups"] * 2  # after both colwise casts
    assert calls == expected
    # the recipes leave token groups unpadded (no padding pass to model)
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe

    for name in ("mxfp8_rceil", "mxfp8_rceil_wgrad_with_hp"):
        config = MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe(name))
        assert not config.pad_token_groups_for_grouped_mm


def test_moe_experts_train_on_the_mxfp8_grouped_path():
    from f8roof.engine.estimate import EstimateConfig
    from f8roof.engine.recommend import grouped_config

    mx = Recipe.from_name("mxfp8_rceil")
    config = grouped_config(EstimateConfig(mx, find_gpu("b200")))
    assert config.grouped and config.recipe == mx and config.implementation is TORCHAO
    rowwise = grouped_config(EstimateConfig(Recipe.from_name("tensorwise"), find_gpu("b200")))
    assert rowwise.recipe == Recipe.from_name("rowwise")


# ---- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("estimate", "--gpu", "h100", "--recipe", "mxfp8_rceil"),
            "h100 (sm_90) has no MXFP8 gemms",
        ),
        (
            ("estimate", "--gpu", "mi300x", "--recipe", "mxfp8_rceil"),
            "mi300x (gfx942) has no MXFP8 gemms",
        ),
        (
            ("estimate", "--gpu", "b200", "--recipe", "blockwise"),
            "b200 (sm_100) has no 1x128/128x128",
        ),
        (
            (
                "estimate",
                "--gpu",
                "h100",
                "--recipe",
                "tensorwise,mxfp8_rceil",
                "--model",
                "gpt2",
                "--tokens",
                "4096",
            ),
            "h100 (sm_90) has no MXFP8 gemms",
        ),
    ],
)
def test_unsupported_recipes_are_one_line_exit_2(cli, args, message):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


def test_compare_lists_the_read_off_kernels(cli):
    pytest.importorskip("torchao.prototype.moe_training")
    args = ("compare", "--gpu", "b200", "--recipe", "mxfp8_rceil", "--shape", "8192,8192,8192")
    result = cli(*args, "--device", "codegen")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "READ OFF torchao's code for b200, not compiled" in out
    assert out.count("triton_to_mxfp8_dim0") == 3 and out.count("mxfp8_quantize ") == 3
    assert "worst       1,245,708,288 B" in out and "ideal         817,889,280 B" in out
    assert "read-off    1,245,708,288 B" in out
    import json

    report = cli(*args, "--device", "codegen", "--json").stdout
    data = json.loads(report[report.index("{") :])
    assert data["bytes_source"] == "read-off" and len(data["shapes"][0]["kernels"]) == 12
    refused = cli("compare", "--gpu", "h100", "--recipe", "mxfp8_rceil", "--device", "codegen")
    assert refused.exit_code == 2 and "h100 (sm_90) has no MXFP8 gemms" in refused.output


def test_calibrate_refuses_what_cannot_be_generated(cli, tmp_path):
    pytest.importorskip("torchao.prototype.moe_training")
    out = str(tmp_path / "c.json")
    result = cli(
        "calibrate",
        "--device",
        "codegen",
        "--gpu",
        "b200",
        "--recipes",
        "mxfp8_rceil",
        "--out",
        out,
    )
    assert result.exit_code == 2 and "read off torchao's code" in result.output
    result = cli(
        "calibrate",
        "--device",
        "codegen",
        "--gpu",
        "h100",
        "--recipes",
        "mxfp8_emulated_rceil,blockwise",
        "--out",
        out,
    )
    assert result.exit_code == 2 and "torchao:blockwise cannot be compiled" in result.output


# ---- the shipped b200 file --------------------------------------------------------------------


def test_b200_estimate_answers_from_the_shipped_file(cli):
    result = cli(
        "estimate", "--gpu", "b200", "--recipe", "mxfp8_rceil,tensorwise,rowwise",
        "--model", "llama3-8b", "--tokens", "8192", "--show-all",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "calibration: shipped b200.json" in result.output
    assert "traffic from generated code: torch" in result.output
    assert "x mxfp8_rceil" in result.output and "x tensorwise" in result.output


def test_read_off_kernels_timed_by_the_shipped_kernel_time_model():
    from f8roof.engine.estimate import estimate
    from f8roof.engine.resolve import Request, resolve

    config = resolve(Request(gpu="b200", recipes="mxfp8_rceil")).config
    assert config.calibration is not None and config.implementation is TORCHAO
    row = estimate([(8192, 8192, 8192)], config).row(0)
    # the read-off kernels are the worst model's passes: 99/16 of each role's numel
    assert row["overhead_bytes_fitted"] == pytest.approx(1_245_708_288)
    kernel_time = config.calibration.kernel_time
    expected = 6 * kernel_time.time_s("persistent_reduction", 2 * 8192**2 + 33 * 8192**2 // 32)
    expected += 6 * kernel_time.time_s("pointwise", 2 * 8192**2 // 32)
    assert row["overhead_s_fitted"] == pytest.approx(float(expected))
    # emulated MX is in the file, fitted from its generated code: 97/4 of each numel
    emulated = resolve(Request(gpu="b200", recipes="mxfp8_emulated_rceil")).config
    assert emulated.calibration.has("torchao:mxfp8_emulated_rceil@rmsnorm+none")
    fitted = estimate([(8192, 8192, 8192)], emulated)["overhead_bytes_fitted"][0]
    assert fitted == pytest.approx(97 * 3 * 8192**2 / 4)


def test_module_filter_for_mxfp8_is_quantize_filter_fn():
    """torchao converts MX with `quantize_(model, MXFP8TrainingOpConfig..., filter_fn=...)`:
    the same (module, fqn) call, here on b200's shipped file."""
    from torch import nn

    import f8roof

    model = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 100))
    keep = f8roof.module_filter(model, 16384, gpu="b200", recipe="mxfp8_rceil", policy="expected")
    assert keep.recommendation.recipes == ("mxfp8_rceil",) and keep.recommendation.gpu == "b200"
    converted = {
        fqn for fqn, m in model.named_modules() if isinstance(m, nn.Linear) and keep(m, fqn)
    }
    assert converted == {"0"}  # N = 100: not a multiple of MX's 32-element blocks
    with pytest.raises(Exception, match=r"h100 \(sm_90\) has no MXFP8 gemms"):
        f8roof.module_filter(model, 16384, gpu="h100", recipe="mxfp8_rceil")
