"""Bytes torchao's float8 MoE training path moves, per expert, as sympy expressions in M, K, N.

Routed experts train through `torchao.prototype.moe_training` (torchao 0.18,
`fp8_grouped_mm._Float8GroupedMM`): three `torch._scaled_grouped_mm` calls with rowwise scales
and fast accumulation (no rescale pass, unlike Float8Linear's backward), fed by hand-written
Triton kernels behind `torch.library.custom_op`s. torch.compile calls those as they are (Inductor
sees an opaque op), so their traffic is fixed by their code, read off it here, not by what
Inductor generates. Per expert, M is the rows routed to it, K x N its weight (`B_t` is (E, K, N)):

    forward
      input   triton_fp8_rowwise_2d_scale_and_cast: one program per row, an absmax loop over
              the row, then a cast loop reading it again; writes MK float8 and 4M of scales
      weight  triton_fp8_colwise_3d_scale_and_cast: per (expert, block of N), an absmax loop
              over K, then a cast loop reading it again; writes KN float8 (column-major) and
              4N of scales
    backward
      grad_output  triton_fp8_rowwise_2d_scale_and_cast, as the input's: MN, 4M
      weight       triton_fp8_rowwise_3d_transpose_rhs: `torch.full` fills 4K of scales with
                   inf, a scales kernel reads KN (2 bytes each) and `atomic_min`s its block's
                   scales into them, then a separate cast kernel reads KN again with the
                   scales and writes the transposed float8 copy (KN)
      grad_output, input  triton_fp8_per_group_colwise_scales_dual: per (block of columns,
                   group), an absmax loop over the group's rows of both tensors, then a cast
                   loop reading them again; writes MN and MK float8 and 4N + 4K of scales
    every scale vector is inverted once (`scales.reciprocal()` before each grouped gemm): a
    pass reading and writing it (8 bytes an element).

worst: every loop reads from HBM (a second loop finds nothing in L2). ideal: each kernel's
second loop is served by L2 (what the kernels are written for: "two passes, benefiting from L2
cache reuse"), so a kernel reads its bf16 input once; the weight's backward cast still reads it
twice, its two loops being two kernels. The input is read by two kernels (forward rows,
backward columns) at both levels, the price of casting in the backward instead of saving a
second float8 copy. Per expert:
    worst  10MK + 10KN + 10MN + scale vectors
    ideal   6MK +  8KN +  6MN + scale vectors
Launches: one kernel per cast above plus the fill and the reciprocals, each for all of a
layer's experts at once; like the seed's rowwise, no launch floor is counted for them.

MXFP8 recipes (mxfp8_rceil, mxfp8_rceil_wgrad_with_hp) route experts through
`mxfp8_grouped_mm._MXFP8GroupedMM` instead (torchao 0.18, the sm100 path; no token-group
padding, as the recipes set `pad_token_groups_for_grouped_mm=False`), whose casts are also
hand-written kernels, each one pass over a tile (e8m0 scales, 1 byte per 32 elements, s = n/32):
    forward
      input        mxfp8_quantize_2d_1x32_cutedsl: reads 2MK, writes MK + s in the blocked
                   layout the gemm reads
      weight       triton_to_mxfp8_dim0 over the (E, N, K) view: reads 2KN, writes KN + s; then
                   triton_mx_block_rearrange_per_group_3d: reads s, writes s
    backward
      grad_output  mxfp8_quantize_2d_1x32_cutedsl: reads 2MN, writes MN + s (blocked)
      weight       mxfp8_quantize_cuda_3d (32x1 blocks, blocked scales): reads 2KN, writes KN + s
      grad_output, input  (grad_weight gemm; none with wgrad_with_hp, a bf16 grouped mm)
                   mxfp8_quantize (CUDA, colwise) each: reads 2n, writes n + s; then
                   triton_mx_block_rearrange_2d_K_groups each: reads s, writes s
worst (every kernel reads its input from HBM) per expert: 6MK + 6KN + 6MN + 4(MK + KN + MN)/32;
ideal as `block_traffic`'s: each bf16 tensor read once, both float8 copies and their scales
written once, already blocked: 4n + n/16 per role.

Pass names follow `traffic`'s (`{role}.amax_rows`, `{role}.cast_cols`, ...): the row casts of
input and weight are the forward's (`training.recompute`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from f8roof.errors import ModelError
from f8roof.traffic.kernel_traffic import (
    BF16_BYTES,
    FP8_BYTES,
    SCALE_BYTES,
    KernelTraffic,
    Level,
    TrafficModel,
    dims,
    numel,
)
from f8roof.traffic.recipes import Granularity, Recipe, Role
from f8roof.traffic.variant import Implementation

if TYPE_CHECKING:
    import sympy as sp

# torchao's float8 grouped gemm (`_to_fp8_rowwise_then_scaled_grouped_mm`) scales rowwise only
GROUPED_RECIPE = Recipe.from_name("rowwise")

# torchao's cast kernels in the order `_Float8GroupedMM` calls them, each with the (role, cast)
# pairs it produces; "rows" scales the role's first dim (`traffic.kernel_traffic.DIM_NAMES`), "cols" its second
TORCHAO_KERNELS: tuple[tuple[str, tuple[tuple[Role, str], ...]], ...] = (
    ("triton_fp8_rowwise_2d_scale_and_cast", ((Role.INPUT, "rows"),)),
    ("triton_fp8_colwise_3d_scale_and_cast", ((Role.WEIGHT, "rows"),)),
    ("triton_fp8_rowwise_2d_scale_and_cast", ((Role.GRAD_OUTPUT, "rows"),)),
    ("triton_fp8_rowwise_3d_transpose_rhs", ((Role.WEIGHT, "cols"),)),
    (
        "triton_fp8_per_group_colwise_scales_dual",
        ((Role.GRAD_OUTPUT, "cols"), (Role.INPUT, "cols")),
    ),
)


def _scale_bytes(role: Role, cast: str) -> sp.Expr:
    rows, cols = dims(role)
    return SCALE_BYTES * (rows if cast == "rows" else cols)


def _pass(role: Role, what: str, read, written) -> KernelTraffic:
    import sympy as sp

    return KernelTraffic(f"{role.value}.{what}", role, sp.expand(read), sp.expand(written))


def _cast(role: Role, cast: str, level: Level) -> tuple[KernelTraffic, ...]:
    n, scales = numel(role), _scale_bytes(role, cast)
    reciprocal = _pass(role, f"reciprocal_{cast}", scales, scales)
    if role is Role.WEIGHT and cast == "cols":  # transpose_rhs: fill, scales kernel, cast kernel
        return (
            _pass(role, "fill_cols", 0, scales),
            _pass(role, "amax_cols", BF16_BYTES * n, scales),
            _pass(role, "cast_cols", BF16_BYTES * n + scales, FP8_BYTES * n),
            reciprocal,
        )
    if level is Level.WORST:
        return (
            _pass(role, f"amax_{cast}", BF16_BYTES * n, scales),
            _pass(role, f"cast_{cast}", BF16_BYTES * n, FP8_BYTES * n),
            reciprocal,
        )
    return (_pass(role, f"cast_{cast}", BF16_BYTES * n, FP8_BYTES * n + scales), reciprocal)


# torchao's MXFP8 grouped-gemm kernels in `_MXFP8GroupedMM`'s call order: (kernel, role,
# cast, whether the cast writes the blocked scale layout itself, or a rearrangement follows)
MX_GROUPED_KERNELS: tuple[tuple[str, Role, str, str | None], ...] = (
    ("mxfp8_quantize_2d_1x32_cutedsl", Role.INPUT, "rows", None),
    ("triton_to_mxfp8_dim0", Role.WEIGHT, "rows", "triton_mx_block_rearrange_per_group_3d"),
    ("mxfp8_quantize_2d_1x32_cutedsl", Role.GRAD_OUTPUT, "rows", None),
    ("mxfp8_quantize_cuda_3d", Role.WEIGHT, "cols", None),
    ("mxfp8_quantize", Role.GRAD_OUTPUT, "cols", "triton_mx_block_rearrange_2d_K_groups"),
    ("mxfp8_quantize", Role.INPUT, "cols", "triton_mx_block_rearrange_2d_K_groups"),
)


def is_grouped_recipe(recipe: Recipe) -> bool:
    """A recipe torchao trains routed experts with: float8 rowwise, or MXFP8 (not emulated)."""
    return recipe == GROUPED_RECIPE or (
        recipe.granularity is Granularity.MX and not recipe.emulated
    )


def _mx_grouped(recipe: Recipe, level: Level) -> tuple[KernelTraffic, ...]:
    import sympy as sp

    casts = [
        (role, cast, rearrange)
        for _, role, cast, rearrange in MX_GROUPED_KERNELS
        # wgrad_with_hp: grad_weight is a bf16 grouped mm, no column casts of its operands
        if not (recipe.grad_weight_in_bf16 and cast == "cols" and role is not Role.WEIGHT)
    ]
    if level is Level.IDEAL:  # one bf16 read per role, its copies and blocked scales
        return tuple(
            _pass(
                role,
                "cast",
                BF16_BYTES * numel(role),
                sum(1 for r, _, _ in casts if r is role)
                * (FP8_BYTES + sp.Rational(1, 32))
                * numel(role),
            )
            for role in (Role.INPUT, Role.WEIGHT, Role.GRAD_OUTPUT)
        )
    kernels = []
    for role, cast, rearrange in casts:
        n = numel(role)
        scales = n / 32
        kernels.append(_pass(role, f"cast_{cast}", BF16_BYTES * n, FP8_BYTES * n + scales))
        if rearrange is not None:
            kernels.append(_pass(role, f"swizzle_{cast}", scales, scales))
    return tuple(kernels)


def grouped_traffic(level: Level, recipe: Recipe = GROUPED_RECIPE) -> TrafficModel:
    """One expert's share of torchao's grouped-gemm overhead for `recipe` (float8 rowwise, or
    MXFP8: see the module docstring)."""
    if not is_grouped_recipe(recipe):
        raise ModelError(f"torchao trains routed experts in rowwise or MXFP8, not {recipe.name}")
    if recipe.granularity is Granularity.MX:
        return TrafficModel(level, recipe, _mx_grouped(recipe, level), 0, Implementation.TORCHAO)
    kernels = tuple(
        k for _, casts in TORCHAO_KERNELS for role, cast in casts for k in _cast(role, cast, level)
    )
    return TrafficModel(level, GROUPED_RECIPE, kernels, 0, Implementation.TORCHAO)
