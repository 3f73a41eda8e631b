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
- `ideal`: the fewest bytes any implementation must move: each bf16 tensor read once, each
  float8 copy written once, plus the scale vectors for rowwise. A dynamic scale needs the whole
  tensor's amax before any element is cast, so the cast reads 2n even when fused (F only makes
  the amax free); a delayed or static scale is known up front, so a fused cast reads nothing.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

import sympy as sp

from f8roof.models.recipes import ROLES, Recipe, Role, ScalingType
from f8roof.models.variant import After, Before, Context

M, K, N = sp.symbols("M K N", positive=True, integer=True)
SYMBOLS = (M, K, N)

BF16_BYTES = 2
FP8_BYTES = 1
SCALE_BYTES = 4  # fp32

# (rows, cols) of each role's tensor in torch layout.
DIMS: dict[Role, tuple[sp.Symbol, sp.Symbol]] = {
    Role.INPUT: (M, K),
    Role.WEIGHT: (N, K),
    Role.GRAD_OUTPUT: (M, N),
}


class Level(str, Enum):
    WORST = "worst"
    IDEAL = "ideal"


@dataclass(frozen=True)
class KernelTraffic:
    """One pass over memory the model expects, e.g. `weight.amax` or `input.cast_cols`."""

    name: str
    role: Role
    bytes_read: sp.Expr
    bytes_written: sp.Expr

    @property
    def bytes_total(self) -> sp.Expr:
        return sp.expand(self.bytes_read + self.bytes_written)


@dataclass(frozen=True)
class TrafficModel:
    level: Level
    recipe: Recipe
    kernels: tuple[KernelTraffic, ...]
    small_kernels: int  # the seed's count of scale kernels, each costing a launch floor

    @cached_property
    def total(self) -> sp.Expr:
        return sp.expand(sum((k.bytes_total for k in self.kernels), sp.Integer(0)))

    def role_total(self, role: Role) -> sp.Expr:
        return sp.expand(
            sum((k.bytes_total for k in self.kernels if k.role is role), sp.Integer(0))
        )


def numel(role: Role) -> sp.Expr:
    rows, cols = DIMS[role]
    return rows * cols


def rowwise_casts(recipe: Recipe, role: Role) -> tuple[str, ...]:
    """Which rowwise casts ('rows', 'cols') a role needs, see the module docstring."""
    if role is Role.WEIGHT or not recipe.grad_weight_in_bf16:
        return ("rows", "cols")
    return ("rows",)


def _scales(role: Role, cast: str) -> sp.Expr:
    rows, cols = DIMS[role]
    return SCALE_BYTES * (rows if cast == "rows" else cols)


def _kernel(role: Role, what: str, read: sp.Expr, written: sp.Expr) -> KernelTraffic:
    return KernelTraffic(f"{role.value}.{what}", role, sp.expand(read), sp.expand(written))


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


def _worst_rowwise(recipe: Recipe, role: Role, *, fused: bool, limited: bool):
    n = numel(role)
    kernels = []
    for cast in rowwise_casts(recipe, role):
        scales = _scales(role, cast)
        amax_read = 0 if (fused and cast == "rows") else BF16_BYTES * n
        if cast == "cols" and limited:
            kernels.append(_kernel(role, "transpose", BF16_BYTES * n, BF16_BYTES * n))
        kernels.append(_kernel(role, f"amax_{cast}", amax_read, scales))
        kernels.append(_kernel(role, f"cast_{cast}", BF16_BYTES * n + scales, FP8_BYTES * n))
    return tuple(kernels)


def seed_small_kernels(recipe: Recipe) -> int:
    """The seed's launch-floor count: a scale kernel per dynamic role, two per delayed role
    (history update and scale). Rowwise computes its scales in the amax pass: none."""
    if recipe.is_rowwise:
        return 0
    per = {ScalingType.DYNAMIC: 1, ScalingType.DELAYED: 2, ScalingType.STATIC: 0}
    return sum(per[recipe.scaling(r)] for r in ROLES)


def worst_traffic(
    recipe: Recipe,
    *,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """The seed's worst case; `fused` and `limited` are the roles with F and L set."""
    kernels: list[KernelTraffic] = []
    for role in ROLES:
        flags = {"fused": role in fused, "limited": role in limited}
        if recipe.is_rowwise:
            kernels += _worst_rowwise(recipe, role, **flags)
        else:
            kernels += _worst_tensorwise(recipe.scaling(role), role, **flags)
    return TrafficModel(Level.WORST, recipe, tuple(kernels), seed_small_kernels(recipe))


def ideal_traffic(recipe: Recipe, *, fused: frozenset[Role] = frozenset()) -> TrafficModel:
    """The minimum: one bf16 read (free when fused and the scale is known up front), one
    write per float8 copy, the rowwise scales."""
    kernels = []
    for role in ROLES:
        n = numel(role)
        scale_known = recipe.scaling(role) is not ScalingType.DYNAMIC and not recipe.is_rowwise
        read = 0 if (role in fused and scale_known) else BF16_BYTES * n
        if recipe.is_rowwise:
            casts = rowwise_casts(recipe, role)
            written = sum((FP8_BYTES * n + _scales(role, c) for c in casts), sp.Integer(0))
        else:
            written = 2 * FP8_BYTES * n
        kernels.append(_kernel(role, "cast", read, written))
    return TrafficModel(Level.IDEAL, recipe, tuple(kernels), seed_small_kernels(recipe))


def context_fused_roles(context: Context) -> frozenset[Role]:
    """The seed's F flags a context implies: input is produced by the op before the linear,
    grad_output by the backward of the op after it; each could take the amax or cast as an
    epilogue. The seed's guess, not a measurement: the compiled context graph is that."""
    roles = set()
    if context.before is not Before.NONE:
        roles.add(Role.INPUT)
    if context.after is not After.NONE:
        roles.add(Role.GRAD_OUTPUT)
    return frozenset(roles)
