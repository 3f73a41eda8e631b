"""`--impl te`: Transformer Engine's float8 linears, their kernels' bytes read off TE's source
(`traffic/te.py`), timed by the shipped calibration's kernel-time model."""

import json

import numpy as np
import pytest
from conftest import invoke_cli

from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.engine.resolve import Request, resolve
from f8roof.traffic import monomials
from f8roof.traffic.kernel_traffic import Level
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.te import te_kernels, te_worst_traffic
from f8roof.traffic.variant import Context, ContextError, Implementation, Variant
from f8roof.traffic.worst_ideal import ideal_traffic, worst_traffic

# a k/v projection of llama3-8b at 8192 tokens: M tokens, K hidden, N = 8 kv heads x 128
SHAPE = {"M": 8192, "K": 4096, "N": 1024}
M, K, N = SHAPE["M"], SHAPE["K"], SHAPE["N"]


def at(expr, shape=SHAPE) -> int:
    return int(expr.subs({getattr(monomials, d): v for d, v in shape.items()}))


def kernel_bytes(recipe: str, *, norm: bool) -> dict[str, int]:
    """Each TE kernel's read + written bytes at SHAPE, summed over the roles it casts."""
    out: dict[str, int] = {}
    for name, traffic in te_kernels(Recipe.from_name(recipe), norm_before=norm):
        moved = at(traffic.bytes_total)
        out[f"{traffic.role.value}.{name}"] = out.get(f"{traffic.role.value}.{name}", 0) + moved
    return out


def test_delayed_scaling_after_a_norm_moves_what_te_source_says():
    """DelayedScaling in a LayerNormLinear: the norm writes float8 (MK) in place of bf16 (2MK),
    `nvte_transpose` reads and writes the float8 copy (MK each); the weight and grad_output
    each one cast_transpose reading bf16 (2n) and writing both float8 copies (2n)."""
    assert kernel_bytes("tensorwise_delayed", norm=True) == {
        "input.rmsnorm_fwd": -M * K,
        "input.transpose": 2 * M * K,
        "weight.cast_transpose": 4 * N * K,
        "grad_output.cast_transpose": 4 * M * N,
    }


def test_current_scaling_pays_an_amax_pass_except_after_a_norm():
    """Float8CurrentScaling: `nvte_compute_amax` (reads 2n) before each cast_transpose; after a
    norm the norm kernel reduces the amax itself (FUSED_NORM_AMAX_FP8), so the input's cast
    reads the bf16 norm output the bf16 graph writes too."""
    standalone = kernel_bytes("tensorwise", norm=False)
    assert standalone == {
        "input.compute_amax": 2 * M * K,
        "input.cast_transpose": 4 * M * K,
        "weight.compute_amax": 2 * N * K,
        "weight.cast_transpose": 4 * N * K,
        "grad_output.compute_amax": 2 * M * N,
        "grad_output.cast_transpose": 4 * M * N,
    }
    after_norm = kernel_bytes("tensorwise", norm=True)
    assert after_norm == {k: v for k, v in standalone.items() if k != "input.compute_amax"}


def test_launches_count_every_kernel_te_adds_and_current_scalings_scale_kernels():
    delayed = te_worst_traffic(
        Recipe.from_name("tensorwise_delayed"), fused=frozenset({Role.INPUT})
    )
    current = te_worst_traffic(Recipe.from_name("tensorwise"))
    assert delayed.small_kernels == 3  # transpose and two cast_transposes; the norm runs anyway
    assert current.small_kernels == 6 + 3  # 3 amaxes, 3 casts, 3 compute_scale_from_amax


@pytest.mark.parametrize("recipe", ["tensorwise", "tensorwise_delayed"])
@pytest.mark.parametrize("fused", [frozenset(), frozenset({Role.INPUT})], ids=["linear", "norm"])
def test_te_bytes_never_beat_the_ideal_bound(recipe, fused):
    r = Recipe.from_name(recipe)
    worst = worst_traffic(r, implementation=Implementation.TE, fused=fused)
    ideal = ideal_traffic(r, implementation=Implementation.TE, fused=fused)
    for shape in ({"M": 16, "K": 16, "N": 16}, SHAPE, {"M": 65536, "K": 8192, "N": 128}):
        assert at(worst.total, shape) >= at(ideal.total, shape)


@pytest.mark.parametrize(
    "recipe", ["rowwise", "mxfp8_rceil_wgrad_with_hp", "nvfp4", "tensorwise_static_weight"]
)
def test_te_refuses_the_recipes_it_does_not_run(recipe):
    with pytest.raises(ContextError, match="Transformer Engine's recipes"):
        Variant(Recipe.from_name(recipe), Implementation.TE)


def _fitted(recipe: str, implementation: str) -> EstimateConfig:
    request = Request(gpu="h100", recipes=recipe, implementation=implementation, before="rmsnorm")
    return resolve(request).config


SHAPES = np.array([[8192, 4096, 1024], [8192, 4096, 4096], [8192, 4096, 14336]])


def test_te_delayed_overhead_after_a_norm_is_below_torchaos_tensorwise():
    """DelayedScaling's input cast is the norm's own output (float8, plus its transpose) and
    every other cast one pass writing both copies: fewer bytes and less time than torchao's
    compiled tensorwise after the same RMSNorm, on the same calibration and the same gemms."""
    torchao = estimate(SHAPES, _fitted("tensorwise", "torchao"))
    te = estimate(SHAPES, _fitted("tensorwise_delayed", "te"))
    assert np.all(te["fp8_gemm_s"] == torchao["fp8_gemm_s"])  # cuBLASLt tensorwise, one family
    assert np.all(te["overhead_bytes_fitted"] < torchao["overhead_bytes_fitted"])
    assert np.all(te["overhead_s_fitted"] < torchao["overhead_s_fitted"])
    assert np.all(te["speedup"] > torchao["speedup"])


def test_te_current_scaling_writes_the_bf16_norm_output_torchao_spares():
    """Float8CurrentScaling after a norm (FUSED_NORM_AMAX_FP8) writes the bf16 norm output and
    casts it: the 2MK write Inductor's torchao graph need not make (no gemm reads it in bf16)
    stays, so at q/k/v's shapes TE moves more bytes than torchao (at gate/up's, N = 14336,
    torchao's backward recast of the weight, 2NK, outweighs it)."""
    qkv = SHAPES[:2]
    torchao = estimate(qkv, _fitted("tensorwise", "torchao"))
    te = estimate(qkv, _fitted("tensorwise", "te"))
    assert np.all(te["overhead_bytes_fitted"] > torchao["overhead_bytes_fitted"])
    M, K, N = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    # above the bound by that write, and by the amax passes over the weight and grad_output
    # (their amax needs the whole tensor before any cast)
    gap = te["overhead_bytes_fitted"] - te["overhead_bytes_ideal"]
    assert np.array_equal(gap, 2 * M * K + 2 * N * K + 2 * M * N)


def test_delayed_scaling_moves_fewer_bytes_than_current_scaling():
    shapes = np.array([[8192, 4096, 1024]])
    delayed = estimate(shapes, _fitted("tensorwise_delayed", "te"))
    current = estimate(shapes, _fitted("tensorwise", "te"))
    # current scaling's weight and grad_output amax passes, and the input's bf16 read
    expected = (2 * N * K + 2 * M * N) + (4 * M * K - M * K)
    gap = current["overhead_bytes_fitted"] - delayed["overhead_bytes_fitted"]
    assert gap[0] == expected
    assert current[f"overhead_bytes_{Level.WORST.value}"][0] == current["overhead_bytes_fitted"][0]


def test_cli_answers_shapes_and_a_model_with_te():
    shapes = invoke_cli(
        "estimate", "--impl", "te", "--recipe", "tensorwise_delayed", "--before", "rmsnorm",
        "--shape", "8192,4096,1024",
    )  # fmt: skip
    assert shapes.exit_code == 0, shapes.output
    assert "te tensorwise_delayed" in shapes.output
    model = invoke_cli(
        "estimate", "--impl", "te", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "8",
        "--recompute", "selective",
    )  # fmt: skip
    assert model.exit_code == 0, model.output
    words = " ".join(model.output.split())  # the note wraps at 120 columns
    assert "torchtitan's, not Megatron's" in words
    assert "each weight cast once per step" in words
    assert "Float8CurrentScaling" in model.output
    assert "float8 all-gather" not in model.output  # torchao's, not a TE candidate
    assert "f8roof calibrate" not in model.output  # f8roof cannot measure TE's linears
    every = invoke_cli(
        "estimate", "--impl", "te", "--model", "llama3-8b", "--tokens", "8192", "--show-all",
    )  # fmt: skip
    assert every.exit_code == 0, every.output
    # its bytes are TE's kernels read off TE's source, not code f8roof generated
    assert "(bytes of Transformer Engine's kernels, read off its source)" in every.output
    assert "TE's kernels read off its source): bf16" in every.output
    assert "exact bytes of the generated code" not in every.output


@pytest.mark.parametrize(
    "args, says",
    [
        (("estimate", "--impl", "te", "--recipe", "rowwise"), "Transformer Engine's recipes"),
        (
            ("estimate", "--impl", "te", "--model", "llama3-8b", "--tokens", "8192", "--fsdp",
             "8", "--float8-all-gather"),
            "torchao's FSDP2 all-gather",
        ),
        (
            ("calibrate", "--device", "cpu", "--recipes", "tensorwise", "--impl", "te", "--out",
             "x.json"),
            "read off its source",
        ),
        # Hopper's transposed copies are not what TE writes on Blackwell, nor is AMD's port TE's
        (("estimate", "--impl", "te", "--gpu", "b200", "--recipe", "tensorwise"), "sm_100"),
        (("estimate", "--impl", "te", "--gpu", "mi300x", "--recipe", "tensorwise"), "gfx942"),
        (("estimate", "--impl", "te", "--gpu", "mi355x", "--recipe", "mxfp8"), "gfx950"),
        # MXFP8 gemms are Blackwell's, the blockwise gemm family Hopper's
        (("estimate", "--impl", "te", "--gpu", "h100", "--recipe", "mxfp8"), "no MXFP8 gemms"),
        (("estimate", "--impl", "te", "--gpu", "gb200", "--recipe", "blockwise"), "blockwise"),
    ],
)  # fmt: skip
def test_cli_refuses_what_te_does_not_have_in_one_line(args, says):
    result = invoke_cli(*args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_recipe_all_with_te_means_its_two_recipes():
    resolved = resolve(Request(gpu="h100", recipes="all", implementation="te"), many_recipes=True)
    assert [c.recipe.name for c in resolved.configs] == ["tensorwise", "tensorwise_delayed"]
    assert all(c.implementation is Implementation.TE for c in resolved.configs)
    assert all(c.context == Context() for c in resolved.configs)


def test_te_block_scaled_casts_read_once_and_write_both_orientations():
    """MXFP8BlockScaling: one `quantize_mxfp8` per role asked for both usages reads the bf16
    tensor once (2n) and writes both float8 orientations (2n) and both E8M0 scale tensors, a
    byte per 32 elements each (2n/32), already in cuBLAS's swizzled layout (no swizzle pass).
    Float8BlockScaling: the same with fp32 scales, one per 1x128 block of input and
    grad_output, one per 128x128 block of the weight. After a norm TE runs the norm unfused
    for both (it writes bf16 as the bf16 graph does), so the bytes are a te.Linear's."""
    mk, nk, mn = M * K, N * K, M * N
    mxfp8 = {
        "input.quantize_mxfp8": 4 * mk + 2 * mk // 32,
        "weight.quantize_mxfp8": 4 * nk + 2 * nk // 32,
        "grad_output.quantize_mxfp8": 4 * mn + 2 * mn // 32,
    }
    blockwise = {
        "input.quantize_transpose_vector_blockwise": 4 * mk + 2 * 4 * mk // 128,
        "weight.quantize_transpose_square_blockwise": 4 * nk + 2 * 4 * nk // (128 * 128),
        "grad_output.quantize_transpose_vector_blockwise": 4 * mn + 2 * 4 * mn // 128,
    }
    for norm in (False, True):
        assert kernel_bytes("mxfp8_rceil", norm=norm) == mxfp8
        assert kernel_bytes("blockwise", norm=norm) == blockwise
    for recipe in ("mxfp8_rceil", "blockwise"):
        model = te_worst_traffic(Recipe.from_name(recipe), fused=frozenset({Role.INPUT}))
        assert model.small_kernels == 3  # a cast per role; the block scales are computed in it


@pytest.mark.parametrize(
    "recipe, gpu, swizzles",
    [("mxfp8", "b200", True), ("blockwise", "h100", False)],
)
def test_te_block_scaled_saves_torchaos_second_read_on_the_same_gemms(recipe, gpu, swizzles):
    """torchao casts each role twice (a row cast and a column cast, each reading the bf16
    tensor: 2n more per role) and, for MX, rearranges every scale tensor into cuBLAS's layout
    (one read and one write of n/32 for each of two casts: n/8 per role); TE's one kernel per
    role writes both orientations and swizzled scales. The gemms are one family (cuBLAS's
    block-scaled gemms, which TE calls too)."""

    def config(implementation: str) -> EstimateConfig:
        request = Request(gpu=gpu, recipes=recipe, implementation=implementation, before="rmsnorm")
        return resolve(request).config

    torchao = estimate(SHAPES, config("torchao"))
    te = estimate(SHAPES, config("te"))
    assert np.all(te["fp8_gemm_s"] == torchao["fp8_gemm_s"])
    m, k, n = SHAPES[:, 0], SHAPES[:, 1], SHAPES[:, 2]
    per_role = 2 + (1 / 8 if swizzles else 0)
    gap = torchao["overhead_bytes_fitted"] - te["overhead_bytes_fitted"]
    assert np.array_equal(gap, per_role * (m * k + n * k + m * n))
    assert np.all(te["overhead_s_fitted"] < torchao["overhead_s_fitted"])


def test_cli_answers_te_mxfp8_on_blackwell_and_all_means_the_parts_recipes():
    shapes = invoke_cli(
        "estimate", "--impl", "te", "--recipe", "mxfp8", "--gpu", "b200", "--before", "rmsnorm",
        "--shape", "8192,4096,4096",
    )  # fmt: skip
    assert shapes.exit_code == 0, shapes.output
    assert "te mxfp8_rceil" in shapes.output
    assert "f8roof calibrate" not in shapes.output  # f8roof cannot measure TE's linears
    model = invoke_cli(
        "estimate", "--impl", "te", "--recipe", "mxfp8", "--gpu", "gb200", "--model", "llama3-8b",
        "--tokens", "8192", "--fsdp", "8", "--recompute", "selective",
    )  # fmt: skip
    assert model.exit_code == 0, model.output
    assert "MXFP8BlockScaling" in model.output
    blackwell = resolve(Request(gpu="b200", recipes="all", implementation="te"), many_recipes=True)
    assert [c.recipe.name for c in blackwell.configs] == ["mxfp8_rceil"]


def _step(tmp_path, implementation: str, accumulation: int) -> tuple[float, list[dict]]:
    out = tmp_path / f"{implementation}{accumulation}.json"
    result = invoke_cli(
        "estimate", "--impl", implementation, "--recipe", "mxfp8", "--gpu", "b200", "--model",
        "llama3-8b", "--tokens", "8192", "--fsdp", "8", "--recompute", "selective",
        "--accumulation", str(accumulation), "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    answer = json.loads(out.read_text())
    return answer["summary"]["linear_fp8_s"], answer["layers"]


def test_te_casts_each_weight_once_per_step_torchao_every_microbatch(tmp_path):
    """TE caches a weight's cast across a step's microbatches (`is_first_microbatch`): with
    4 passes a step pays 4 passes' linears less 3 weight casts, each TE's one kernel for the
    weight (reads 2NK, writes 2NK and 2NK/32 of scales) at the calibration's kernel time,
    for every converted block linear; torchao recasts the weight in every pass."""
    one, layers = _step(tmp_path, "te", 1)
    four, _ = _step(tmp_path, "te", 4)
    kernel_time = resolve(Request(gpu="b200", recipes="mxfp8", implementation="te")).config
    assert kernel_time.calibration is not None
    time_s = kernel_time.calibration.kernel_time.time_s
    casts = 0.0
    for row in layers:
        if ".layers.*." in row["fqn"] and row["convert"]:
            moved = 4 * row["N"] * row["K"] + 2 * row["N"] * row["K"] / 32
            casts += row["count"] * float(time_s("persistent_reduction", np.array([moved]))[0])
    assert casts > 0
    assert four == pytest.approx(4 * one - 3 * casts, rel=1e-9)
    torchao_one, _ = _step(tmp_path, "torchao", 1)
    torchao_four, _ = _step(tmp_path, "torchao", 4)
    assert torchao_four == pytest.approx(4 * torchao_one, rel=1e-12)
