"""Bytes the block-scaled recipes' overhead moves (MX, blockwise), as sympy expressions in M, K, N.

Both scale each gemm operand in blocks along that gemm's reduction dim, so a role is cast once
per layout its gemms read it in (derived from torchao 0.18's code, read below):
    input (M, K):       blocks along K (row-major, output gemm), along M (grad_weight gemm)
    weight (N, K):      blocks along K (output gemm), along N (grad_input gemm)
    grad_output (M, N): blocks along N (grad_input gemm), along M (grad_weight gemm)
Casts along a role's second dim are named `_rows` (the role's row-major copy), along its first
dim `_cols` (the transposed, column-major copy): the row casts of input and weight are the
forward's (`training.recompute`). A bf16 grad_weight gemm (mxfp8_rceil_wgrad_with_hp) drops the
column casts of input and grad_output. Per cast of a role of numel n, with s its scale bytes:
    MX:         one e8m0 scale (1 byte) per 32 elements: s = n/32 for either layout
    blockwise:  one fp32 scale per 1x128 block of input and grad_output (s = 4n/128 = n/32,
                either layout) and per 128x128 block of the weight (s = 4n/16384 = n/4096)
The scale rounding (rceil, floor) is arithmetic on the block's amax: no bytes.

What torchao 0.18 runs per cast (what `worst` models):
- mxfp8_rceil, mxfp8_rceil_wgrad_with_hp (`moe_training/mxfp8_linear.py`, `mx_mm`): row casts
  by the Triton kernel `to_mxfp8_dim0_kernel` (`triton_to_mxfp8_dim0`, mx_formats/kernels.py),
  column casts by the CUDA kernel `mxfp8_quantize` (colwise only; `mxfp8_quantize_cuda`,
  torchao/csrc/cuda/mx_kernels/mxfp8_quantize.cuh). Each loads a tile once (Triton: one
  `tl.load`; CUDA: a TMA copy into shared memory), reduces the 32-element blocks and casts
  from registers or shared memory: reads 2n, writes n + s. Then every gemm operand's scales
  are rearranged into cuBLAS's blocked layout (`to_blocked`, mx_formats/utils.py: a padded
  copy, `torch.zeros` + slice assignment under torch.compile, then a permute/reshape copy),
  torch ops that Inductor compiles: one pass reading s and writing s when it fuses them, two
  (the padded copy, the rearranged copy) with L. The cast kernels are custom ops opaque to
  Inductor: nothing fuses into them, so F frees nothing here.
- mxfp8_emulated_rceil (`KernelPreference.EMULATED`): torch-native `to_mx` (mx_tensor.py),
  compiled by Inductor, and gemms on dequantized bf16 copies. Inductor splits each cast into a
  reduction kernel (block amax, the scale kept as bf16: 2 bytes a block, and the fp32 scaled
  values) and a pointwise kernel finishing the float8 rounding and dequantizing to bf16 (the
  float8 tensor itself never reaches memory): reads 2n, writes 4n + n/16; reads 4n + n/16,
  writes 2n. The column casts transpose first (`t().contiguous()`), fused into the reduction;
  with L a pass of its own (reads 2n, writes 2n). F frees the reduction's first read (a row
  block is in a producer's epilogue; a column block is not).
- blockwise (`blockwise_fp8_training/linear.py`, `fp8_blockwise_mm`): six Triton kernels,
  `triton_fp8_blockwise_act_quant_lhs` (input, grad_output along their rows),
  `..._act_quant_rhs` (input along M), `..._act_quant_transposed_lhs` (grad_output along M),
  `..._weight_quant_transposed_rhs` (forward), `..._weight_quant_rhs` (backward); each one
  `tl.load` and two `tl.store`s (float8 and reciprocal scales): reads 2n, writes n + s. The
  gemms take those scales as they are (`F.scaled_mm`; the weight's are padded only when
  K/128 is not a multiple of 4: a copy of n/4096-sized scales, left out).

`ideal`: each bf16 tensor read once (block scales are local to a tile, so one kernel can write
both layouts: torchao's own `mxfp8_quantize` has a rowwise+colwise mode; a producer fused with
it (F) makes that read free), each float8 copy and its scales written once, already in the
layout the gemm reads (torchao's CuTe DSL cast writes cuBLAS's blocked scale layout itself,
`blocked_scale_output`). Emulated: each bf16 tensor read once and each dequantized bf16 copy
written once (its gemms read nothing else).
No scalar scale kernels: every recipe here computes its scales inside its cast kernels.

How the bytes are obtained (`bytes_source`): mxfp8_emulated_rceil compiles with f8roof's
codegen-only capture and is `generated` (its worst model equals what Inductor generates for
b200); mxfp8_rceil, mxfp8_rceil_wgrad_with_hp and blockwise are `read-off` (READ_OFF_REASONS),
their traffic the worst model above; tests/test_mx.py fails when torchao changes those kernels.
NVFP4 (`moe_training.nvfp4_training`) is `read-off` too, its kernels and their bytes in
`traffic/nvfp4.py`: the functions here hand it over.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from f8roof.traffic import nvfp4
from f8roof.traffic.kernel_traffic import (
    BF16_BYTES,
    FP8_BYTES,
    KernelTraffic,
    Level,
    TrafficModel,
    numel,
)
from f8roof.traffic.recipes import BLOCK_SCALE_BYTES, ROLES, Granularity, Recipe, Role
from f8roof.traffic.variant import ContextError, Implementation, require_torchao

if TYPE_CHECKING:
    import sympy as sp

# The cast kernels torchao 0.18 calls, in its call order, each with the (role, cast) it makes.
# MX (mxfp8_rceil; `mx_mm` with the kernel choices `_to_mxfp8_then_scaled_mm` fixes: Triton
# along dim0, CUDA along dim1); mxfp8_rceil_wgrad_with_hp skips the last two.
MX_CAST_KERNELS: tuple[tuple[str, Role, str], ...] = (
    ("triton_to_mxfp8_dim0", Role.INPUT, "rows"),
    ("triton_to_mxfp8_dim0", Role.WEIGHT, "rows"),
    ("triton_to_mxfp8_dim0", Role.GRAD_OUTPUT, "rows"),
    ("mxfp8_quantize", Role.WEIGHT, "cols"),
    ("mxfp8_quantize", Role.GRAD_OUTPUT, "cols"),
    ("mxfp8_quantize", Role.INPUT, "cols"),
)
# blockwise (`fp8_blockwise_mm`)
BLOCKWISE_CAST_KERNELS: tuple[tuple[str, Role, str], ...] = (
    ("triton_fp8_blockwise_act_quant_lhs", Role.INPUT, "rows"),
    ("triton_fp8_blockwise_weight_quant_transposed_rhs", Role.WEIGHT, "rows"),
    ("triton_fp8_blockwise_act_quant_lhs", Role.GRAD_OUTPUT, "rows"),
    ("triton_fp8_blockwise_weight_quant_rhs", Role.WEIGHT, "cols"),
    ("triton_fp8_blockwise_act_quant_transposed_lhs", Role.GRAD_OUTPUT, "cols"),
    ("triton_fp8_blockwise_act_quant_rhs", Role.INPUT, "cols"),
)

# blockwise: elements per scale of each role (1x128 activations and gradients, 128x128 weight)
BLOCKWISE_ELEMENTS = {Role.INPUT: 128, Role.WEIGHT: 128 * 128, Role.GRAD_OUTPUT: 128}
EMULATED_SCALE_BYTES = 2  # Inductor keeps the emulated block scale in bf16


class BytesSource(str, Enum):
    """How a variant's overhead bytes are known."""

    GENERATED = "generated"  # Inductor's code for the target GPU, captured (profiler/capture)
    READ_OFF = "read-off"  # hand-written kernels' traffic, read off their code (this module)


# Why the torchao kernels of these recipes cannot be generated here (torch 2.13 CPU build,
# torchao 0.18), checked by compiling each with f8roof's codegen-only capture.
READ_OFF_REASONS = {
    "mxfp8_rceil": (
        "torchao defines its MXFP8 cast kernels (Triton dim0, CUDA dim1: custom ops Inductor "
        "calls as they are) only on an sm100 CUDA device, at import; elsewhere they are stubs "
        "raising 'needs triton'"
    ),
    "blockwise": (
        "its casts are hand-written Triton kernels (torch.library.triton_op); codegen without a "
        "GPU stops in Inductor's reinplace pass ('PyTorch is not linked with support for cuda "
        "devices', a CPU-only torch build)"
    ),
}
READ_OFF_REASONS["mxfp8_rceil_wgrad_with_hp"] = READ_OFF_REASONS["mxfp8_rceil"]
READ_OFF_REASONS["nvfp4"] = nvfp4.READ_OFF_REASON


def bytes_source(recipe: Recipe | None) -> tuple[BytesSource, str]:
    """(how the recipe's bytes are obtained, why) for `compare`, tables and calibrations:
    read off torchao's kernels where they cannot be generated (READ_OFF_REASONS)."""
    name = "bf16" if recipe is None else recipe.name
    if name in READ_OFF_REASONS:
        return BytesSource.READ_OFF, READ_OFF_REASONS[name]
    return BytesSource.GENERATED, "Inductor generates every cast of this recipe"


def is_read_off(recipe: Recipe | None) -> bool:
    return bytes_source(recipe)[0] is BytesSource.READ_OFF


def kernel_kind(kernel: str) -> str:
    """The Inductor kernel kind whose time model a read-off kernel is timed by: a cast
    reduces each block and casts it in one pass over its tile, as Inductor's persistent
    reductions do; `to_blocked` is a copy (pointwise); NVFP4's kernels as `nvfp4.KERNELS`
    says."""
    if kernel in nvfp4.KERNEL_KINDS:
        return nvfp4.KERNEL_KINDS[kernel]
    return "pointwise" if kernel == "to_blocked" else "persistent_reduction"


def torchao_kernels(recipe: Recipe) -> tuple[tuple[str, KernelTraffic], ...]:
    """The worst model's passes beside the torchao kernel each is (`to_blocked` for the scale
    rearrangements Inductor compiles): what `compare` lists for a read-off variant."""
    if recipe.is_nvfp4:
        return nvfp4.torchao_kernels(recipe)
    table = MX_CAST_KERNELS if recipe.granularity is Granularity.MX else BLOCKWISE_CAST_KERNELS
    names = {(role, cast): kernel for kernel, role, cast in table}
    out = []
    for traffic in block_worst_traffic(recipe).kernels:
        what = traffic.name.partition(".")[2]
        cast = what.rpartition("_")[2]
        assert traffic.role is not None, "every block-scaled pass casts a role"
        kernel = names[(traffic.role, cast)]
        out.append(("to_blocked" if what.startswith("swizzle") else kernel, traffic))
    return tuple(out)


def block_casts(recipe: Recipe, role: Role) -> tuple[str, ...]:
    """The layouts a role is cast in: 'rows' (blocks along its second dim), 'cols' (along its
    first, written transposed); input and grad_output only 'rows' when grad_weight is bf16."""
    if recipe.grad_weight_in_bf16 and role is not Role.WEIGHT:
        return ("rows",)
    return ("rows", "cols")


def cast_order(recipe: Recipe) -> tuple[tuple[Role, str], ...]:
    """(role, cast) of every cast, in torchao's call order (the emulated path calls the same
    casts as mxfp8_rceil, torch-native)."""
    kernels = MX_CAST_KERNELS if recipe.granularity is Granularity.MX else BLOCKWISE_CAST_KERNELS
    return tuple((role, cast) for _, role, cast in kernels if cast in block_casts(recipe, role))


def scale_bytes(recipe: Recipe, role: Role) -> sp.Expr:
    """Bytes of one cast's scales: one scale per block of the recipe's size."""
    if recipe.granularity is Granularity.MX:
        elements = 32
    else:
        elements = BLOCKWISE_ELEMENTS[role]
    return BLOCK_SCALE_BYTES[recipe.granularity] * numel(role) / elements


def _kernel(role: Role, what: str, read, written) -> KernelTraffic:
    import sympy as sp

    return KernelTraffic(f"{role.value}.{what}", role, sp.expand(read), sp.expand(written))


def _check(recipe: Recipe, implementation: Implementation) -> None:
    if not recipe.is_block_scaled:
        raise ContextError(f"{recipe.name} is not block-scaled: see traffic.worst_ideal")
    require_torchao(recipe.name, implementation)


def _worst_emulated(role: Role, cast: str, *, fused: bool, limited: bool):
    n = numel(role)
    scales = EMULATED_SCALE_BYTES * n / 32
    kernels = []
    if cast == "cols" and limited:
        kernels.append(_kernel(role, "transpose_cols", BF16_BYTES * n, BF16_BYTES * n))
    first_read = 0 if (fused and cast == "rows") else BF16_BYTES * n
    fp32_scaled = 4 * n
    kernels.append(_kernel(role, f"quantize_{cast}", first_read, fp32_scaled + scales))
    kernels.append(_kernel(role, f"dequantize_{cast}", fp32_scaled + scales, BF16_BYTES * n))
    return kernels


def _worst_cast(recipe: Recipe, role: Role, cast: str, *, limited: bool):
    n, scales = numel(role), scale_bytes(recipe, role)
    kernels = [_kernel(role, f"cast_{cast}", BF16_BYTES * n, FP8_BYTES * n + scales)]
    if recipe.granularity is Granularity.MX:  # to_blocked: one fused copy, two with L
        for _ in range(2 if limited else 1):
            kernels.append(_kernel(role, f"swizzle_{cast}", scales, scales))
    return kernels


def block_worst_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.TORCHAO,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """torchao's algorithm as its code runs it (module docstring); `fused`, `limited`: F, L."""
    if recipe.is_nvfp4:
        return nvfp4.nvfp4_worst_traffic(
            recipe, implementation=implementation, fused=fused, limited=limited
        )
    _check(recipe, implementation)
    kernels: list[KernelTraffic] = []
    for role, cast in cast_order(recipe):
        if recipe.emulated:
            kernels += _worst_emulated(role, cast, fused=role in fused, limited=role in limited)
        else:
            kernels += _worst_cast(recipe, role, cast, limited=role in limited)
    # no scale kernels (each cast computes its block scales), but every kernel is a launch: a
    # launch floor each, or a 16 x 16 x 16 linear's casts would take no time at all
    return TrafficModel(Level.WORST, recipe, tuple(kernels), len(kernels), implementation)


def block_ideal_traffic(
    recipe: Recipe,
    *,
    implementation: Implementation = Implementation.TORCHAO,
    fused: frozenset[Role] = frozenset(),
) -> TrafficModel:
    """One bf16 read per role (free when fused), one write per copy and its scales."""
    if recipe.is_nvfp4:
        return nvfp4.nvfp4_ideal_traffic(recipe, implementation=implementation, fused=fused)
    _check(recipe, implementation)
    kernels = []
    for role in ROLES:
        n, casts = numel(role), block_casts(recipe, role)
        read = 0 if role in fused else BF16_BYTES * n
        if recipe.emulated:
            written = len(casts) * BF16_BYTES * n
        else:
            written = len(casts) * (FP8_BYTES * n + scale_bytes(recipe, role))
        kernels.append(_kernel(role, "cast", read, written))
    # a launch (and its floor) per role whose cast does not fuse into its producer's kernel
    launches = sum(1 for role in ROLES if role not in fused)
    return TrafficModel(Level.IDEAL, recipe, tuple(kernels), launches, implementation)
