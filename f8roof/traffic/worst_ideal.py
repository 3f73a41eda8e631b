"""Bytes the float8 overhead moves, as sympy expressions in M, K, N.

Two levels, per role and per kernel:

- `worst`: the seed's model of the worst case torch.compile produces (torchao PR #668). Per
  role of numel n (bf16 = 2 bytes, float8 = 1 byte), with F = fused with the previous op (its
  bf16 read is free) and L = "torch.compile limitations":
    dynamic:  amax pass reads 2n (0 if F); cast pass reads 2n, writes both float8 copies
              (row-major and column-major) 2n; L adds an extra float8 read n
              (pytorch/pytorch#130015: the transposed copy is made from the float8 tensor).
    delayed:  one fused amax+cast pass, reads 2n (0 if F), writes 2n; with L amax and cast
              do not fuse (pytorch/pytorch#128063) and the cost is dynamic's with L.
    static:   (not in the seed) a cast pass like delayed's without the amax; L adds n.
  Scalar amax and scale traffic (a few bytes) is left out, as the seed did.
- `ideal`: the fewest bytes any implementation must move beyond the bf16 graph's, a lower
  bound of the generated code (tested at every shipped fit shape): each bf16 tensor read once,
  each float8 copy written once, plus the scale vectors for rowwise. For a role whose
  producer is in the graph (F), what the producer's own passes can do is free and the bf16
  output no float8 gemm reads need not be written; derivation in `ideal_traffic`.

Rowwise (our derivation; the seed had none). Each gemm scales its first operand per row and its
second per column of the product, so a role is cast along each dimension it is reduced over:
    input (M, K):       rows (K reduced, M scales) for output; cols (M reduced, K scales)
                        for grad_weight
    weight (N, K):      rows (N scales) for output; cols (K scales) for grad_input
    grad_output (M, N): rows (M scales) for grad_input; cols (N scales) for grad_weight
rowwise_gw_hp keeps grad_weight in bf16, so input and grad_output need only their row cast.
Each cast writes one float8 copy (n) and its fp32 scales (4 per row or column). Worst case per
cast: an amax pass reading 2n and writing the scales, then a cast pass reading 2n and the scales
and writing n; F frees the first amax read only (a column amax needs every row, which an
epilogue of the previous op does not have). With L, Inductor first writes a bf16 transposed copy
for the column cast (reads 2n, writes 2n), which the column amax and cast then read.

The models above are the reference implementation's (f8roof's autograd.Function per recipe, the
seed's algorithm). torchao's (torchao 0.18 `Float8Linear`, derived from its code) differs for
rowwise. `matmul_with_hp_or_float8_args` saves the bf16 input and weight and casts every gemm
operand with that operand's `CastConfig` (`Float8LinearConfig.from_recipe_name`); torch.compile
merges identical casts of a tensor (CSE), so each role is cast once per distinct scaling, and
Inductor picks each cast's output layout, so the `.t().contiguous()` that `preprocess_addmm`
asks of a second operand is written by the cast, as the seed's cast writes its column-major copy.
    tensorwise:     one scale per role in all three gemms: the seed's casts, both levels equal
                    the reference's.
    rowwise:        axiswise scales along each gemm's non-contracted dims: the reference's six
                    casts (grad_output in e4m3, not e5m2, and power-of-2 scales: no bytes).
                    The difference is `addmm_float8_unwrapped`: a gemm with rowwise scales and
                    `use_fast_accum=False` (grad_input and grad_weight) runs `_scaled_mm` with
                    unit scalar scales, then `output *= a_inverse_scale * b_inverse_scale`, a
                    rescale pass over the gemm's bf16 output reading it and both operands'
                    scale vectors and writing it back:
                        grad_input.rescale   reads 2MK + 4M + 4K, writes 2MK
                        grad_weight.rescale  reads 2NK + 4N + 4K, writes 2NK
    rowwise_gw_hp:  (torchao's rowwise_with_gw_hp) input and grad_output cast per row only
                    (grad_weight is a bf16 mm of the saved bf16 input and of grad_output); the
                    weight per row for output and with one tensorwise scale for grad_input
                    (`cast_config_weight_for_grad_input`), written in the transposed layout
                    grad_input needs; grad_input is rescaled as above (the weight's tensorwise
                    scale, repeated along K, is a scalar: left out), grad_weight is not.
worst: per role and scaling the seed's passes: an amax pass (reads 2n, writes the scales; F frees
the read for what an epilogue can reduce: a row or the whole tensor, not a column) and a cast
pass (reads 2n and the scales, writes n), with the seed's L (columns: the bf16 transposed copy
above; the tensorwise weight cast of rowwise_gw_hp: the transposed copy made from the float8
tensor by its own pass, reads n, writes n), plus the rescale passes, which F and L do not touch.
ideal: as the seed's: each bf16 tensor read once (one read serves every cast of a role once its
scales are known: Inductor's own kernel for torchao rowwise reads the input once and writes its
row- and column-scaled copies), each float8 copy written once with its scale vector, plus each
rescale reading and writing its gemm output once. So for rowwise both levels are the reference's
plus 4MK + 4KN + the rescales' scale reads.
Scale arithmetic (fp64 division, power-of-2 rounding, reciprocals, the outer product of inverse
scales, torchao's unit scales) works on scale vectors and is inlined into the pass that uses it;
it costs launches, counted as small kernels, not bytes.

MX and blockwise recipes (torchao only) have their own models, `traffic.block_scaled`, which
`worst_traffic` and `ideal_traffic` hand them to. Transformer Engine's linears (`traffic.te`):
its worst is TE's kernels as read off its source, its ideal the reference's bound.

Known gaps against Inductor's code (torch 2.13, h100 codegen). Tensorwise moves 6MK + 8KN + 6MN
+ 26 in both implementations, 2KN above the worst case: the min-cut partitioner saves the bf16
weight (alive anyway) and recasts it in backward (torchao's backward asks for that recast; the
reference saves float8 copies, the partitioner recomputes them), a pass no level models.
Inductor keeps bf16 amaxes (2 bytes a row or column) and recomputes scales inline, and splits
long reductions through a partial-amax workspace: scale-vector terms, O(M + K + N), differ.
"""

from __future__ import annotations

import sympy as sp

from f8roof.traffic.block_scaled import block_ideal_traffic, block_worst_traffic
from f8roof.traffic.gemm_roles import GemmRole
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
from f8roof.traffic.monomials import K, M, N
from f8roof.traffic.recipes import ROLES, Recipe, Role, ScalingType
from f8roof.traffic.te import scale_kernels, te_worst_traffic
from f8roof.traffic.variant import Implementation, te_recipe_name, torchao_recipe_name


def rowwise_casts(
    recipe: Recipe, role: Role, *, implementation: Implementation = Implementation.REFERENCE
) -> tuple[str, ...]:
    """Which rowwise casts ('rows', 'cols', 'tensorwise') a role needs, see the module
    docstring: torchao's rowwise_gw_hp casts the weight for grad_input with one scale."""
    if role is Role.WEIGHT:
        torchao = implementation is Implementation.TORCHAO
        return ("rows", "tensorwise" if torchao and recipe.grad_weight_in_bf16 else "cols")
    return ("rows",) if recipe.grad_weight_in_bf16 else ("rows", "cols")


def _scales(role: Role, cast: str) -> sp.Expr:
    """fp32 scale bytes of one cast; a tensorwise scale is a scalar, left out as the seed did."""
    if cast == "tensorwise":
        return sp.Integer(0)
    rows, cols = dims(role)
    return SCALE_BYTES * (rows if cast == "rows" else cols)


def _kernel(role: Role, what: str, read: sp.Expr, written: sp.Expr) -> KernelTraffic:
    return KernelTraffic(f"{role.value}.{what}", role, sp.expand(read), sp.expand(written))


def _check(recipe: Recipe, implementation: Implementation) -> None:
    if implementation is Implementation.TORCHAO:
        torchao_recipe_name(recipe)  # raises for the recipes torchao lacks (delayed, static)
    if implementation is Implementation.TE:
        te_recipe_name(recipe)  # TE's two tensorwise recipes only


def _rescales(recipe: Recipe, implementation: Implementation) -> tuple[KernelTraffic, ...]:
    """torchao's bf16 rescale after each backward gemm with rowwise scales (see the module
    docstring); none for the reference (its `_scaled_mm` takes the rowwise scales) or for
    tensorwise. A pass reads the output, the inverse scales of both operands (the first's per
    row, the second's per column of the product), and writes the output."""
    if implementation is not Implementation.TORCHAO or not recipe.is_rowwise:
        return ()
    weight_cast = rowwise_casts(recipe, Role.WEIGHT, implementation=implementation)[1]
    gemms = [(GemmRole.GRAD_INPUT, M * K, ((Role.GRAD_OUTPUT, "rows"), (Role.WEIGHT, weight_cast)))]
    if not recipe.grad_weight_in_bf16:
        gemms.append(
            (GemmRole.GRAD_WEIGHT, N * K, ((Role.GRAD_OUTPUT, "cols"), (Role.INPUT, "cols")))
        )
    kernels = []
    for gemm, out, operands in gemms:
        scales = sum((_scales(role, cast) for role, cast in operands), sp.Integer(0))
        read, written = sp.expand(BF16_BYTES * out + scales), sp.expand(BF16_BYTES * out)
        kernels.append(KernelTraffic(f"{gemm.value}.rescale", None, read, written))
    return tuple(kernels)


def _worst_tensorwise(scaling: ScalingType, role: Role, *, fused: bool, limited: bool):
    n = numel(role)
    first_read = 0 if fused else BF16_BYTES * n
    copies = 2 * FP8_BYTES * n
    extra = FP8_BYTES * n if limited else 0
    if scaling is ScalingType.DYNAMIC or (scaling is ScalingType.DELAYED and limited):
        return (
            _kernel(role, "amax", first_read, 0),
            _kernel(role, "cast", BF16_BYTES * n + extra, copies),
        )
    if scaling is ScalingType.DELAYED:
        return (_kernel(role, "amax_cast", first_read, copies),)
    return (_kernel(role, "cast", first_read + extra, copies),)


def _worst_rowwise(
    recipe: Recipe,
    role: Role,
    *,
    implementation: Implementation,
    fused: bool,
    limited: bool,
):
    n = numel(role)
    kernels = []
    for cast in rowwise_casts(recipe, role, implementation=implementation):
        scales = _scales(role, cast)
        # An epilogue of the previous op can reduce a row or (like the seed's tensorwise F) the
        # whole tensor, never a column.
        amax_read = 0 if (fused and cast != "cols") else BF16_BYTES * n
        if cast == "cols" and limited:
            kernels.append(_kernel(role, "transpose", BF16_BYTES * n, BF16_BYTES * n))
        kernels.append(_kernel(role, f"amax_{cast}", amax_read, scales))
        kernels.append(_kernel(role, f"cast_{cast}", BF16_BYTES * n + scales, FP8_BYTES * n))
        if cast == "tensorwise" and limited:
            # pytorch/pytorch#130015, the seed's L: the transposed copy is made from the float8
            # one (which the cast wrote row-major) by its own pass.
            kernels.append(_kernel(role, "transpose_tensorwise", FP8_BYTES * n, FP8_BYTES * n))
    return tuple(kernels)


def seed_small_kernels(recipe: Recipe) -> int:
    """The seed's launch-floor count: a scale kernel per dynamic role, two per delayed role
    (history update and scale). Rowwise computes its scales in the amax pass, MX and blockwise
    in their cast kernels: none."""
    if recipe.is_rowwise or recipe.is_block_scaled:
        return 0
    per = {ScalingType.DYNAMIC: 1, ScalingType.DELAYED: 2, ScalingType.STATIC: 0}
    return sum(per[recipe.scaling(r)] for r in ROLES)


def small_kernels(recipe: Recipe, implementation: Implementation) -> int:
    """The seed's count, extended to torchao's rowwise algorithm: a scale kernel per dynamic
    tensorwise scaling (rowwise_gw_hp's weight for grad_input) and one that fills the unit
    scales its unscaled backward gemms take (`new_ones(())`, shared after CSE)."""
    if implementation is Implementation.REFERENCE or not recipe.is_rowwise:
        return seed_small_kernels(recipe)
    casts = [c for r in ROLES for c in rowwise_casts(recipe, r, implementation=implementation)]
    return casts.count("tensorwise") + 1


def worst_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.REFERENCE,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """The worst case of `implementation`'s algorithm (the seed's for the reference);
    `fused` and `limited` are the roles with F and L set. MX and blockwise recipes: see
    `traffic.block_scaled`; Transformer Engine's: `traffic.te`."""
    _check(recipe, implementation)
    if implementation is Implementation.TE:
        return te_worst_traffic(recipe, fused=fused)
    if recipe.is_block_scaled:
        return block_worst_traffic(
            recipe, implementation=implementation, fused=fused, limited=limited
        )
    kernels: list[KernelTraffic] = []
    for role in ROLES:
        flags = {"fused": role in fused, "limited": role in limited}
        if recipe.is_rowwise:
            kernels += _worst_rowwise(recipe, role, implementation=implementation, **flags)
        else:
            kernels += _worst_tensorwise(recipe.scaling(role), role, **flags)
    kernels += _rescales(recipe, implementation)
    return TrafficModel(
        Level.WORST,
        recipe,
        tuple(kernels),
        small_kernels(recipe, implementation),
        implementation,
    )


def ideal_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.REFERENCE,
    fused: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """The fewest bytes any implementation's float8 graph must move beyond the bf16 graph's,
    a true lower bound of the generated code's overhead (tested against every shipped
    calibration). `fused` are the roles whose producer is in the graph (a context's F).

    A role whose producer is not in the graph (the weight; the input or grad_output of a
    standalone linear) is read once (2n), and each float8 copy written once (n, plus its
    scale vector). A role produced in the graph (an op before: input; an op after, whose
    backward produces grad_output):
    - its float8 copies and scales are written, as ever;
    - a cast whose scale is known while the producer's pass holds the data needs no read of
      its own: a delayed or static scale, or a rowwise row scale (the producer can run by
      rows). A cast that needs the whole tensor or a whole column first (a dynamic tensorwise
      amax, a rowwise column amax) needs a second pass over the data (2n), unless a pass the
      graph makes anyway comes later: the input's producer re-reads its own inputs in its
      backward (a norm's or activation's backward), which can make every input cast backward
      needs; only the forward gemm's copy must exist in forward. grad_output's producer runs
      last, so every such cast of grad_output pays the second pass;
    - when no gemm reads the role in bf16 (every recipe but rowwise_gw_hp, whose bf16
      grad_weight reads input and grad_output), the float8 graph need not write the bf16
      tensor the bf16 graph writes for its gemms (2n, once: the bf16 graph never writes it
      twice in any shipped context): a credit of 2n. The weight has no producer in the graph
      (a fused weight, the seed's F, only frees its read), so no credit.
    torchao's rescale of grad_input (2MK read and written) fuses into the backward of the op
    before the linear, which reads grad_input anyway: with the input's producer in the graph
    only the scale vectors are read.
    MX and blockwise recipes: see `traffic.block_scaled`. Transformer Engine's: the
    reference's bound, with TE's scale kernels.
    """
    _check(recipe, implementation)
    if recipe.is_block_scaled:
        return block_ideal_traffic(recipe, implementation=implementation, fused=fused)
    kernels = []
    for role in ROLES:
        n = numel(role)
        if recipe.is_rowwise:
            casts = rowwise_casts(recipe, role, implementation=implementation)
            written = sum((FP8_BYTES * n + _scales(role, c) for c in casts), sp.Integer(0))
        else:
            written = 2 * FP8_BYTES * n
        second_pass = role not in fused or _second_pass(recipe, role, implementation)
        kernels.append(_kernel(role, "cast", BF16_BYTES * n if second_pass else 0, written))
        if role in fused and role is not Role.WEIGHT and not recipe.grad_weight_in_bf16:
            # the bf16 graph's write of the producer's output, which no float8 gemm reads
            kernels.append(_kernel(role, "bf16_not_written", 0, -BF16_BYTES * n))
    for rescale in _rescales(recipe, implementation):
        if rescale.name.startswith(GemmRole.GRAD_INPUT.value) and Role.INPUT in fused:
            out = BF16_BYTES * M * K  # read and written by the op before's backward instead
            rescale = KernelTraffic(
                rescale.name, None, sp.expand(rescale.bytes_read - out), sp.Integer(0)
            )
        kernels.append(rescale)
    launches = (
        scale_kernels(recipe)
        if implementation is Implementation.TE
        else small_kernels(recipe, implementation)
    )
    return TrafficModel(Level.IDEAL, recipe, tuple(kernels), launches, implementation)


def _second_pass(recipe: Recipe, role: Role, implementation: Implementation) -> bool:
    """Whether a role produced in the graph needs a pass of its own over its bf16 data (see
    `ideal_traffic`): a cast whose scale needs the whole tensor or a column, which no later
    pass of the producer's can make (for the input, only its forward gemm's copy must wait)."""
    if recipe.is_rowwise:
        if role is Role.INPUT:
            return False  # the forward gemm's copy is the row cast
        casts = rowwise_casts(recipe, role, implementation=implementation)
        return any(cast != "rows" for cast in casts)
    return recipe.scaling(role) is ScalingType.DYNAMIC
