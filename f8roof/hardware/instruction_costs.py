"""What one element's arithmetic costs an SM, by kind of instruction.

A generated kernel's arithmetic (`profiler/triton_code.py`) is counted in FP32-lane cycles:
an SM of compute capability 8.0-9.0 (A100, H100, H200) retires 128 FP32 adds, multiplies or
FMAs per clock, but only 64 compares, selects, integer or FP64 operations, and 16
conversions between float types or special-function results (exp2, log2, reciprocal,
rsqrt). Source: NVIDIA's CUDA C++ Programming Guide, "Arithmetic Instructions", the table of
results per clock cycle per multiprocessor (columns 8.0 and 9.0: 32-bit floating-point add,
multiply, multiply-add 128 (64 on 8.6); 64-bit floating-point 64 on 8.0 and 9.0; 32-bit
reciprocal, reciprocal square root, base-2 logarithm and exponential 16; compare, minimum,
maximum 64; type conversions from and to 64-bit types 16; all other type conversions 16).
A cost is 128 over that rate: an add costs 1, a select 2, an exp2 or a conversion 8.

Functions the table does not list are costed by the instructions libdevice and Triton emit
for them: `exp(x)` is a multiply and an exp2, a float division a reciprocal and a multiply
(Triton's default `div.full.f32`), a sigmoid an exp, an add and a division. Widening bf16 to
float32 is a shift of its bits (a 64-per-clock integer instruction), not a conversion.
Narrowing float32 to float8 is the one conversion measured apart: two elements per packed
instruction at 32 per SM per clock (`TO_FLOAT8`), Triton's native float8 conversion since
triton-lang/triton#2448.
"""

from __future__ import annotations

FP32_LANES_PER_SM = 128  # the unit: one FP32 add per lane per clock

ADD = 1  # FP32 add, subtract, multiply, FMA, negate, absolute value
ALU = 2  # compare, select, min/max, bitwise and integer operations; FP64 add and multiply
SFU = 8  # exp2, log2, reciprocal, rsqrt; conversions between float types; rounding
# To float8: a packed conversion (`cvt.rn.satfinite.e4m3x2.f32`, the one Triton emits on sm_89
# and later) turns two float32 into float8 at 32 instructions per SM per clock, 64 elements,
# as measured on a GB300 (sm_103; sm_100 the same rate: a FlashAttention-4 fork's B300 notes,
# 2026-06); no public figure for sm_90, where the heatmap's cross-validation prefers it too
# (docs/time_model.md).
TO_FLOAT8 = 2
DIVIDE = SFU + ADD  # reciprocal, then multiply
DIVIDE_FP64 = SFU + 4 * ALU  # a reciprocal seed refined by FP64 FMAs
WIDEN_BF16 = ALU  # bf16 -> float32 shifts the 16 bits up

# Triton and libdevice functions -> cost per element
CALLS: dict[str, int] = {
    "exp": ADD + SFU,
    "exp2": SFU,
    "log": SFU + ADD,
    "log2": SFU,
    "rsqrt": SFU,
    "sqrt": SFU + ADD,
    "floor": SFU,
    "ceil": SFU,
    "trunc": SFU,
    "rint": SFU,
    "nearbyint": SFU,
    "tanh": SFU,
    "sin": SFU + ADD,
    "cos": SFU + ADD,
    "sigmoid": (ADD + SFU) + ADD + DIVIDE,
    "abs": ADD,
    "where": ALU,
    "maximum": ALU,
    "minimum": ALU,
    "isnan": ALU,
    "isinf": ALU,
    "signbit": ALU,
}
# No work per element: constants, shapes, loads (their bytes are the memory term)
FREE_CALLS = frozenset({"full", "broadcast_to", "reshape", "view", "expand_dims", "load"})
UNKNOWN_CALL = ALU  # a function this table does not name
