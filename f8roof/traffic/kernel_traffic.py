"""What every traffic model is made of: passes over memory, per role, in sympy M, K, N.

Shared by `traffic` (Float8Linear's recipes) and `block_traffic` (MX and blockwise), which
builds on these and which `traffic` hands the block-scaled recipes to.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from f8roof.traffic import monomials
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.variant import Implementation, Level

if TYPE_CHECKING:
    import sympy as sp

BF16_BYTES = 2
FP8_BYTES = 1
SCALE_BYTES = 4  # fp32

# (rows, cols) of each role's tensor in torch layout, named as `traffic.monomials` names them
DIM_NAMES: dict[Role, tuple[str, str]] = {
    Role.INPUT: ("M", "K"),
    Role.WEIGHT: ("N", "K"),
    Role.GRAD_OUTPUT: ("M", "N"),
}


def dims(role: Role) -> tuple[sp.Symbol, sp.Symbol]:
    """The role's (rows, cols) as sympy symbols."""
    rows, cols = DIM_NAMES[role]
    return getattr(monomials, rows), getattr(monomials, cols)


@dataclass(frozen=True)
class KernelTraffic:
    """One pass over memory the model expects, e.g. `weight.amax` or `input.cast_cols`.

    `role` is the role whose tensor the pass moves; None for a pass over a gemm's bf16 output
    (torchao's `grad_input.rescale`), named after the gemm."""

    name: str
    role: Role | None
    bytes_read: sp.Expr
    bytes_written: sp.Expr

    @property
    def bytes_total(self) -> sp.Expr:
        import sympy as sp

        return sp.expand(self.bytes_read + self.bytes_written)


@dataclass(frozen=True)
class TrafficModel:
    level: Level
    recipe: Recipe
    kernels: tuple[KernelTraffic, ...]
    # the seed's count of scale kernels, each costing a launch floor (block-scaled recipes,
    # which have none: their launches, traffic/block_scaled.py)
    small_kernels: int
    implementation: Implementation = Implementation.REFERENCE

    @cached_property
    def total(self) -> sp.Expr:
        import sympy as sp

        return sp.expand(sum((k.bytes_total for k in self.kernels), sp.Integer(0)))

    def role_total(self, role: Role | None) -> sp.Expr:
        """Bytes of one role's passes; None: of the passes over gemm outputs (rescales)."""
        import sympy as sp

        return sp.expand(
            sum((k.bytes_total for k in self.kernels if k.role is role), sp.Integer(0))
        )


def numel(role: Role) -> sp.Expr:
    rows, cols = dims(role)
    return rows * cols
