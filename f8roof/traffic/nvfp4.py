"""Bytes torchao 0.18's NVFP4 linear moves beyond bf16, as sympy expressions in M, K, N.

NVFP4 (`nvfp4` recipe, torchao 0.18 `prototype.moe_training.nvfp4_training`): 4-bit e2m1
elements, two per byte (0.5 B/element); one e4m3 scale (1 byte) per 16 elements along each
gemm's reduction dim (1/16 B/element), in cuBLAS's swizzled tile layout, written so by the cast
kernels themselves; one fp32 scale per tensor (from its amax). Every role is cast along both of
its dims, in one kernel that loads each tile once and writes both copies:
    input (M, K):       rows (output gemm) and, after a random Hadamard transform (RHT) over 16
                        elements along M, columns (grad_weight gemm)
    weight (N, K):      16x16 2D blocks, rows (output gemm) and columns (grad_input gemm), no RHT
    grad_output (M, N): rows (grad_input gemm) and RHT'd columns (grad_weight gemm), both with
                        stochastic rounding
so a role of numel n is written as 2 x (n/2 + n/16) = 9n/8 bytes. The forward casts input and
weight both ways (torchao saves only the fp4 codes and scales for the backward), the backward
casts grad_output.

What `nvfp4_mm_triton` (nvfp4_training/nvfp4_linear.py) runs per linear, read off torchao
0.18's code (file:line in nvfp4_training/), in its call order (`KERNELS`):
- input, forward: `triton_rht_amax` (nvfp4_linear.py:103): two `torch.zeros(())` fills for the
  amaxes (hadamard_amax_triton.py:219-220) and `_hadamard_amax_kernel`, one TMA load per tile
  (:115), an atomic max of the RHT'd and the plain tensor (:151, :159): reads 2n. Then
  `triton_rht_quantize_row_col` (nvfp4_linear.py:107): one load per tile
  (hadamard_quantize_row_col_triton.py:149), the RHT'd column copy and its scales (:177,
  :182-188) and the row copy and its scales (:209, :213-227), shapes (N, M/2) and
  (N/128, M/64, 32, 16) e4m3 (:379-388): reads 2n, writes 9n/8.
- weight, forward: its amax `x.float().abs().max()` (nvfp4_linear.py:45), which Inductor
  generates (a reduction, fused with the per-tensor scale): reads 2n. `triton_weight_quantize_2d`
  (:46) allocates both fp4 copies with `torch.zeros` (quantize_2d_triton.py:252, :257): two
  fills writing n/2 each; its kernel loads each tile once (:168) and writes both copies and
  their scales (:176, :185, :197, :206; the 16x16 block scales stored expanded to cuBLAS's
  1x16 layout, n/16 per copy): reads 2n, writes 9n/8.
- the input's per-tensor scale (nvfp4_linear.py:124), an Inductor kernel on a scalar.
- grad_output, backward: the two `torch.randint` offsets of stochastic rounding
  (nvfp4_linear.py:173-174; Inductor moves them into the forward graph, which changes nothing
  here), `triton_rht_amax` as the input's (:179: two fills, reads 2n), the seed's xor (:187,
  Inductor) and `triton_rht_quantize_row_col` with stochastic rounding (:182: reads 2n, writes
  9n/8); then the four per-tensor scales of the backward gemms (:199-200, :217-218), Inductor
  kernels on scalars, counted with grad_output (they feed its gemms).
Per role: input 41n/8, weight 49n/8, grad_output 41n/8; 20 launches. The kernels Inductor
generates here (the weight's amax and the scalar kernels) are the ones
scripts/nvfp4_codegen_probe.py shows it generating for b200; the rest are torchao's
hand-written Triton kernels behind opaque custom ops, which nothing fuses into (F frees
nothing) and which transpose inside their tiles (L adds nothing). A scalar kernel's bytes (4 to
8) are counted as 0: its launch floor is its cost. The RHT is a 16x16 `tl.dot` per 16
elements (32 FLOP each, on tensor cores): not counted (the casts are memory-bound: at B200's
dense bf16 rate it takes under a tenth of the time the cast's bytes take).

`ideal`: each role's bf16 tensor read once and both fp4 copies and their scales written once
(9n/8), one launch per role: 25n/8 per role. The per-tensor scale must be known before any
element is cast, so a producer fused with the cast (F) still leaves one read of the data
after its amax: F frees nothing here either.

How the bytes are known: read off (`block_scaled.READ_OFF_REASONS`); what stops their codegen
on a CPU, and the probe that gets past it: scripts/nvfp4_codegen_probe.py, docs/mx.md.
tests/test_nvfp4.py fails when torchao changes these kernels or their call order.
"""

from __future__ import annotations

from fractions import Fraction

from f8roof.traffic.kernel_traffic import KernelTraffic, Level, TrafficModel, numel
from f8roof.traffic.recipes import ROLES, Recipe, Role
from f8roof.traffic.variant import ContextError, Implementation, require_torchao

FP4_BYTES = Fraction(1, 2)  # e2m1, two elements per byte
SCALE_BYTES = Fraction(1, 16)  # one e4m3 byte per 16 elements, in either layout
COPIES = 2 * (FP4_BYTES + SCALE_BYTES)  # both layouts and their scales: 9/8 of a numel

# torchao's kernels and the ones Inductor generates around them, in nvfp4_mm_triton's call
# order: (kernel, role, pass, kind, bytes read, bytes written), bytes as multiples of the role's
# numel (module docstring). `kind`: the Inductor kernel kind whose time model times it (a cast
# reduces its 16-element blocks in one pass over its tile, as Inductor's persistent reductions
# do; an amax reduces the whole tensor; fills and scalar kernels are pointwise). The Inductor
# kernels are named as the probe finds them, without their numeric suffix.
FILL = "torch.zeros"
KERNELS: tuple[tuple[str, Role, str, str, Fraction, Fraction], ...] = (
    (FILL, Role.INPUT, "amax_fill", "pointwise", Fraction(0), Fraction(0)),
    (FILL, Role.INPUT, "amax_fill", "pointwise", Fraction(0), Fraction(0)),
    ("_hadamard_amax_kernel", Role.INPUT, "amax", "reduction", Fraction(2), Fraction(0)),
    (
        "_hadamard_quantize_row_col_kernel",
        Role.INPUT,
        "cast",
        "persistent_reduction",
        Fraction(2),
        COPIES,
    ),
    (
        "triton_red_fused_abs_convert_element_type_div_max",
        Role.WEIGHT,
        "amax",
        "reduction",
        Fraction(2),
        Fraction(0),
    ),
    (FILL, Role.WEIGHT, "fill", "pointwise", Fraction(0), FP4_BYTES),
    (FILL, Role.WEIGHT, "fill", "pointwise", Fraction(0), FP4_BYTES),
    ("triton_quantize_2d_weight", Role.WEIGHT, "cast", "persistent_reduction", Fraction(2), COPIES),
    ("triton_poi_fused_div", Role.INPUT, "scale", "pointwise", Fraction(0), Fraction(0)),
    ("aten.randint", Role.GRAD_OUTPUT, "offset", "pointwise", Fraction(0), Fraction(0)),
    ("aten.randint", Role.GRAD_OUTPUT, "offset", "pointwise", Fraction(0), Fraction(0)),
    (FILL, Role.GRAD_OUTPUT, "amax_fill", "pointwise", Fraction(0), Fraction(0)),
    (FILL, Role.GRAD_OUTPUT, "amax_fill", "pointwise", Fraction(0), Fraction(0)),
    ("_hadamard_amax_kernel", Role.GRAD_OUTPUT, "amax", "reduction", Fraction(2), Fraction(0)),
    (
        "triton_poi_fused_bitwise_xor",
        Role.GRAD_OUTPUT,
        "seed",
        "pointwise",
        Fraction(0),
        Fraction(0),
    ),
    (
        "_hadamard_quantize_row_col_kernel",
        Role.GRAD_OUTPUT,
        "cast",
        "persistent_reduction",
        Fraction(2),
        COPIES,
    ),
    *(
        ("triton_poi_fused_div", Role.GRAD_OUTPUT, "scale", "pointwise", Fraction(0), Fraction(0))
        for _ in range(4)
    ),
)
# the passes of input and weight that run in the forward (`training.recompute.is_forward`):
# every one of theirs (torchao casts both layouts in the forward and saves them)
FORWARD_PASSES = frozenset(
    what for _, role, what, _, _, _ in KERNELS if role is not Role.GRAD_OUTPUT
)
KERNEL_KINDS = {kernel: kind for kernel, _, _, kind, _, _ in KERNELS}

READ_OFF_REASON = (
    "its casts and the random Hadamard transform are torchao's hand-written Triton kernels "
    "behind opaque custom ops, registered only where triton is usable at import; "
    "scripts/nvfp4_codegen_probe.py gets Inductor past that and shows it generating only the "
    "glue around them"
)


def _check(recipe: Recipe, implementation: Implementation) -> None:
    if not recipe.is_nvfp4:
        raise ContextError(f"{recipe.name} is not nvfp4: see traffic.worst_ideal")
    require_torchao(recipe.name, implementation)


def _traffic(role: Role, what: str, read: Fraction, written: Fraction) -> KernelTraffic:
    import sympy as sp

    n = numel(role)
    return KernelTraffic(
        f"{role.value}.{what}",
        role,
        sp.expand(sp.Rational(read.numerator, read.denominator) * n),
        sp.expand(sp.Rational(written.numerator, written.denominator) * n),
    )


def torchao_kernels(recipe: Recipe) -> tuple[tuple[str, KernelTraffic], ...]:
    """Each kernel of the worst model beside its name in torchao's (or Inductor's) code."""
    _check(recipe, Implementation.TORCHAO)
    return tuple(
        (kernel, _traffic(role, what, read, written))
        for kernel, role, what, _, read, written in KERNELS
    )


def nvfp4_worst_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.TORCHAO,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """torchao 0.18's kernels as its code runs them (module docstring); F and L change
    nothing in them. A launch floor per launch."""
    _check(recipe, implementation)
    kernels = tuple(traffic for _, traffic in torchao_kernels(recipe))
    return TrafficModel(Level.WORST, recipe, kernels, len(kernels), implementation)


def nvfp4_ideal_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.TORCHAO,
    fused: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """One bf16 read per role, both fp4 copies and their scales written once; one launch per
    role (module docstring: the per-tensor scale leaves F nothing to free)."""
    _check(recipe, implementation)
    kernels = tuple(_traffic(role, "cast", Fraction(2), COPIES) for role in ROLES)
    return TrafficModel(Level.IDEAL, recipe, kernels, len(ROLES), implementation)
