"""Transformer Engine's float8 linears as NeMo/Megatron run them: their kernels' bytes, read off
TE's source, as sympy expressions in M, K, N.

TE (NVIDIA/TransformerEngine@d0067d0d, 2026-08) runs four float8 recipes, f8roof's names mapped
(`variant.TE_RECIPES`): on Hopper `DelayedScaling` (tensorwise_delayed: each scale from the
amax history of earlier steps), `Float8CurrentScaling` (tensorwise: the scale from this
tensor's amax) and `Float8BlockScaling` (blockwise: 1x128 input and grad_output blocks, 128x128
weight blocks, common/recipe/__init__.py:392-437); on Blackwell `MXFP8BlockScaling` (mxfp8_rceil:
an E8M0 scale per 32 elements, recipe/__init__.py:337). Every gemm is a cuBLASLt float8 gemm,
timed by the family of torch's `_scaled_mm` for the same scales (torchao's): one scale per
tensor, VEC128_32F/BLK128x128_32F blocks, VEC32_UE8M0 blocks (common/gemm/cublaslt_gemm.cu:
521-522, 595-599). On Hopper each float8 operand is needed row-major and transposed (TN-only
float8 gemms), so a cast writes both copies at once.

Tensorwise, per linear, one forward and backward (one microbatch), beyond the bf16 linear's
traffic:

    pass                      DelayedScaling                 Float8CurrentScaling
    input, Linear             cast_transpose 2MK / 2MK       compute_amax 2MK / 0,
                                                             cast_transpose 2MK / 2MK
    input, LayerNormLinear    rmsnorm_fwd writes float8:     rmsnorm_fwd writes bf16 and the
                              0 / -MK; transpose MK / MK     amax: 0; cast_transpose 2MK / 2MK
    weight                    cast_transpose 2NK / 2NK       compute_amax 2NK / 0,
                                                             cast_transpose 2NK / 2NK
    grad_output               cast_transpose 2MN / 2MN       compute_amax 2MN / 0,
                                                             cast_transpose 2MN / 2MN
    launches beside these     none per linear (one fused     compute_scale_from_amax per
                              amax-history update a step)    role: 3

(bytes read / written). Where each comes from:
- input: linear.py:419-432 casts with rowwise and columnwise usage when the backward needs the
  input (no TP all-gather); LayerNormLinear gives its norm the input quantizer
  (layernorm_linear.py:222-263). `rmsnorm_fwd` (pytorch/csrc/extensions/normalization.cpp)
  picks FULLY_FUSED for a `Float8Quantizer` (the norm kernel writes float8 and records the
  amax) and FUSED_NORM_AMAX_FP8 for current scaling (the norm writes bf16 and its amax, then
  `quantize_with_amax` casts without an amax pass); for the fused norm's transposed copy
  common/normalization/rmsnorm/rmsnorm_api.cpp:100-107 calls `nvte_transpose` on the float8
  output. The norm kernel runs in bf16 too: only its output bytes change (no launch).
- the casts: `Float8Quantizer::quantize` (pytorch/csrc/quantizer.cpp:632) is one
  `nvte_quantize_v2`, TE's cast_transpose kernel (common/transpose/cast_transpose.cu: reads the
  bf16 tile once, writes the float8 tile and its transpose, amax by atomics);
  `Float8CurrentScalingQuantizer::quantize_impl` (quantizer.cpp:980) runs
  `nvte_compute_amax`, `nvte_compute_scale_from_amax` (a scalar kernel), then the cast.
- weight: linear.py:475-488 `quantize_weight`, rowwise and columnwise; with `is_first_microbatch`
  the cast is cached for the step's later microbatches (base.py:792-870: a cached workspace is
  reused, and `update_workspace` is false after the first microbatch, linear.py:479), so a step
  of several microbatches casts each weight once (`engine.step`).
- grad_output: `grad_output_preprocess` (module/base.py:1688) casts it with both usages (fused
  with the bias gradient where there is a bias: Llama's linears have none).
- DelayedScaling's amax histories and scales are updated once per step for every tensor by
  one fused kernel (pytorch/quantization.py:656-694,
  `fused_amax_and_scale_update_after_reduction`): no launch per linear.
The bf16 norm output a LayerNormLinear still writes with current scaling is what the bf16
graph writes too; with delayed scaling the norm writes float8 (MK) instead of bf16 (2MK).

Block-scaled, per role of numel n (input MK, weight NK, grad_output MN), s its scales' bytes:

    recipe               kernel (one per role)                   read / written
    MXFP8BlockScaling    quantize_mxfp8 (rowwise and columnwise)  2n / 2n + 2s, s = n/32
    Float8BlockScaling   quantize_transpose_vector_blockwise      2n / 2n + 2s, s = 4n/128
                         (input, grad_output); ..._square_        (weight: s = 4n/16384)
                         blockwise (weight)

- MXFP8: every role's quantizer is asked for both usages (input linear.py:428-434, weight
  linear.py:467-475, grad_output linear.py:905) and `MXFP8Quantizer::quantize`
  (quantizer.cpp:1835) is one `nvte_quantize_v2`, dispatched (common/cast/dispatch/
  quantize.cuh:85-92) to `mxfp8::quantize` (common/cast/mxfp8/quantize_mxfp8.cuh:601-927), which
  with both usages launches one BIDIMENSIONAL kernel: the bf16 tile loaded once by TMA, both
  float8 orientations and both E8M0 scale tensors written. Each scale tensor is written in
  cuBLAS's swizzled layout by that kernel (`optimize_for_gemm`: input and grad_output
  linear.py:2095-2103, the weight base.py:1277-1294), so the gemm swizzles nothing
  (csrc/extensions/swizzle.cpp:64); at dims that are multiples of 128 no scale padding is
  zeroed (quantize_mxfp8.cuh:687). The columnwise copy is not a transpose: Blackwell's
  block-scaled gemms take either layout.
- Float8BlockScaling: `Float8BlockQuantizer::quantize` (quantizer.cpp:1425) is one
  `nvte_quantize_v2`, dispatched (quantize.cuh:174-203) to
  `quantize_transpose_vector_blockwise` (1x128: the float8 copy, its transpose and both fp32
  scale tensors, GEMM_READY) or `quantize_transpose_square_blockwise` (128x128: the weight and
  its transpose, one fp32 scale per block for each). On Hopper the gemm takes those scales as
  they are (swizzle.cpp:50-60: no swizzle for block scaling); on Blackwell TE converts them to
  MXFP8 before every gemm (csrc/extensions/gemm.cpp:314-319), which f8roof does not model (the
  blockwise gemm family is Hopper's: refused elsewhere).
- LayerNormLinear: `rmsnorm_fwd` runs UNFUSED for both (normalization.cpp:342-367: FULLY_FUSED
  is a `Float8Quantizer`'s, or MXFP8 through cuDNN when NVTE_NORM_FWD_USE_CUDNN is set): the
  norm writes bf16, as in the bf16 graph, and the quantizer's kernel reads it back
  (normalization.cpp:434). The input's cast is a `Linear`'s.
- no scale kernels: the block scales are computed in the cast kernels.

`ideal` for TE is the reference's ideal of the same recipe and fused roles (the block-scaled
recipes': `traffic.block_scaled`; a lower bound for any implementation); `worst` is the kernels
above, which the fitted level times kernel by kernel at the calibration's kernel-time model
(`engine.estimate.read_off_kernels`): a TE kernel is timed as the Inductor kernel kind it
resembles (`KERNEL_KINDS`; the block-scaled casts as torchao's read-off casts are), at the
part's memory-bound rate and launch floor (the shipped public fits have no per-kind rates:
every kind at their pooled rate), current scaling's scale kernels at a launch floor each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from f8roof.traffic.block_scaled import scale_bytes
from f8roof.traffic.kernel_traffic import (
    BF16_BYTES,
    FP8_BYTES,
    KernelTraffic,
    Level,
    TrafficModel,
    numel,
)
from f8roof.traffic.recipes import ROLES, Granularity, Recipe, Role, ScalingType
from f8roof.traffic.variant import Implementation, te_recipe_name

if TYPE_CHECKING:
    import sympy as sp

TE_COMMIT = "d0067d0da6cb01811b8072a7d304f0e00344ce2b"
TE_SOURCE = (
    f"NVIDIA/TransformerEngine@{TE_COMMIT[:8]} transformer_engine/pytorch/module/linear.py, "
    "layernorm_linear.py, csrc/quantizer.cpp, csrc/extensions/normalization.cpp, "
    "common/cast/mxfp8/quantize_mxfp8.cuh"
)
# The kernel the bf16 graph runs too: its bytes change under float8, no launch is added.
IN_BF16_GRAPH = frozenset({"rmsnorm_fwd"})
# Which Inductor kernel kind times each TE kernel: a cast or transpose is one pass over its tile
# (pointwise); the amax is a reduction; the norm a persistent reduction over each row.
KERNEL_KINDS = {
    "cast_transpose": "pointwise",
    "transpose": "pointwise",
    "compute_amax": "reduction",
    "rmsnorm_fwd": "persistent_reduction",
    "compute_scale_from_amax": "pointwise",
    # the block-scaled casts reduce each block and cast it in one pass over the tile, as
    # torchao's read-off block casts (`block_scaled.kernel_kind`)
    "quantize_mxfp8": "persistent_reduction",
    "quantize_transpose_vector_blockwise": "persistent_reduction",
    "quantize_transpose_square_blockwise": "persistent_reduction",
}
SCALE_KERNEL = "compute_scale_from_amax"  # current scaling's scalar kernel, one per role


def _kernel(role: Role, what: str, read: sp.Expr, written: sp.Expr) -> KernelTraffic:
    import sympy as sp

    return KernelTraffic(f"{role.value}.{what}", role, sp.expand(read), sp.expand(written))


def te_kernels(recipe: Recipe, *, norm_before: bool) -> tuple[tuple[str, KernelTraffic], ...]:
    """TE's kernels per linear with their bytes beyond the bf16 linear's (module docstring),
    each beside the TE kernel it is; `norm_before`: a LayerNormLinear (the input cast fused
    with the norm where TE fuses it: tensorwise only)."""
    te_recipe_name(recipe)
    if recipe.is_block_scaled:
        return _block_kernels(recipe)
    delayed = recipe.scaling(Role.INPUT) is ScalingType.DELAYED
    out: list[tuple[str, KernelTraffic]] = []
    for role in ROLES:
        n = numel(role)
        if role is Role.INPUT and norm_before:
            if delayed:
                out.append(("rmsnorm_fwd", _kernel(role, "norm_fp8_output", 0, -FP8_BYTES * n)))
                out.append(("transpose", _kernel(role, "transpose", FP8_BYTES * n, FP8_BYTES * n)))
            else:
                out.append(
                    (
                        "cast_transpose",
                        _kernel(role, "cast_transpose", BF16_BYTES * n, 2 * FP8_BYTES * n),
                    )
                )
            continue
        if not delayed:
            out.append(("compute_amax", _kernel(role, "amax", BF16_BYTES * n, 0)))
        out.append(
            ("cast_transpose", _kernel(role, "cast_transpose", BF16_BYTES * n, 2 * FP8_BYTES * n))
        )
    return tuple(out)


def block_cast_kernel(recipe: Recipe, role: Role) -> str:
    """The TE kernel that casts a role under a block-scaled recipe (module docstring)."""
    if recipe.granularity is Granularity.MX:
        return "quantize_mxfp8"
    if role is Role.WEIGHT:
        return "quantize_transpose_square_blockwise"
    return "quantize_transpose_vector_blockwise"


def _block_kernels(recipe: Recipe) -> tuple[tuple[str, KernelTraffic], ...]:
    """One kernel per role reading it once and writing both float8 orientations and both
    scale tensors; after a norm the same (the norm writes bf16 in both graphs)."""
    out = []
    for role in ROLES:
        n = numel(role)
        written = 2 * (FP8_BYTES * n + scale_bytes(recipe, role))
        kernel = block_cast_kernel(recipe, role)
        out.append((kernel, _kernel(role, "quantize", BF16_BYTES * n, written)))
    return tuple(out)


def scale_kernels(recipe: Recipe) -> int:
    """Scalar launches per linear: current scaling's `compute_scale_from_amax` per role;
    delayed scaling's per-step update is shared by every linear; block scales are computed in
    the casts."""
    if recipe.is_block_scaled or recipe.scaling(Role.INPUT) is ScalingType.DELAYED:
        return 0
    return len(ROLES)


def te_worst_traffic(recipe: Recipe, *, fused: frozenset[Role] = frozenset()) -> TrafficModel:
    """TE's kernels as a traffic model: a launch floor per kernel it adds (the norm adds none)
    and per scale kernel. `fused` with the input: a LayerNormLinear."""
    kernels = te_kernels(recipe, norm_before=Role.INPUT in fused)
    launches = sum(1 for name, _ in kernels if name not in IN_BF16_GRAPH)
    return TrafficModel(
        Level.WORST,
        recipe,
        tuple(traffic for _, traffic in kernels),
        launches + scale_kernels(recipe),
        Implementation.TE,
    )
