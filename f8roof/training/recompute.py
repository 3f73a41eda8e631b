"""Which part of a float8 linear's overhead runs in the forward: what full activation
checkpointing runs twice.

The worst-case traffic model (`traffic.worst_traffic`) lists its kernels per role; this module
splits them into forward and backward:
- tensorwise: the input's and the weight's amax and cast run in the forward (the cast writes
  both float8 copies; the backward reuses them), grad_output's in the backward;
- rowwise: the row casts of input and weight (scales per row of the output gemm's operands)
  run in the forward; their column casts (for grad_weight and grad_input), torchao's
  tensorwise weight cast for grad_input (rowwise_gw_hp), the transposed copies L adds for
  them, torchao's rescales of the backward gemms' outputs, and everything of grad_output run
  in the backward.
- nvfp4: every pass of input and weight (`traffic.nvfp4.FORWARD_PASSES`: torchao casts both
  layouts of both in the forward and saves them), grad_output's in the backward.
The grouped-gemm model of routed experts (`traffic.grouped`) names its passes the same way: its
row casts of input and weight run in the forward.
`forward_share` is the forward kernels' bytes over all the model's bytes, a sympy expression in
M, K, N; estimates apply it to the overhead time at every level (worst, ideal, fitted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from f8roof.traffic.nvfp4 import FORWARD_PASSES as NVFP4_FORWARD_PASSES
from f8roof.traffic.recipes import Role

if TYPE_CHECKING:
    import sympy as sp

    from f8roof.traffic.kernel_traffic import TrafficModel


class Pass(Protocol):
    """A model's pass as the sympy model (`KernelTraffic`) and the byte table name it."""

    @property
    def name(self) -> str: ...

    @property
    def role(self) -> Role | None: ...


# the forward passes of a tensorwise role (`traffic._worst_tensorwise`)
TENSORWISE_PASSES = frozenset({"amax", "cast", "amax_cast"})


def is_forward(kernel: Pass) -> bool:
    """Whether a worst-model kernel runs in the forward (see the module docstring)."""
    if kernel.role not in (Role.INPUT, Role.WEIGHT):  # grad_output, or a gemm output's rescale
        return False
    what = kernel.name.partition(".")[2]
    # rowwise: only the row casts feed the output gemm; column and tensorwise casts (and L's
    # transposed copies) feed the backward gemms
    return what in TENSORWISE_PASSES or what in NVFP4_FORWARD_PASSES or what.endswith("_rows")


def forward_bytes(model: TrafficModel) -> sp.Expr:
    import sympy as sp

    return sp.expand(sum((k.bytes_total for k in model.kernels if is_forward(k)), sp.Integer(0)))


def forward_share(model: TrafficModel) -> sp.Expr:
    """Forward kernels' bytes / all overhead bytes of a (worst-case) model, in M, K, N."""
    import sympy as sp

    return sp.simplify(forward_bytes(model) / model.total)
