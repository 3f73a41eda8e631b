"""A Triton kernel's arithmetic in FP32-lane cycles: what the compiled kernel runs, by kind
of instruction (`hardware/instruction_costs`), on kernels written the way Inductor writes them."""

import ast

from f8roof.hardware import instruction_costs as costs
from f8roof.profiler.triton_code import _arithmetic

N = 1024


def cycles(body: str, pointers=None) -> float:
    """Per element: the kernel's count over its N elements, divided by N."""
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    source = f"def kernel(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK):\n    xnumel = {N}\n{lines}"
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    found = _arithmetic(fn, pointers or {"in_ptr0": "bfloat16", "in_ptr1": "float32"})
    assert found is not None
    return found / N


LOAD = "x0 = xindex\ntmp0 = tl.load(in_ptr0 + (x0)).to(tl.float32)\n"


def test_an_add_costs_one_lane_cycle_an_exp2_a_float8_conversion_and_a_select_more():
    assert cycles(LOAD + "tmp1 = tmp0 + tmp0") == costs.ADD
    assert cycles(LOAD + "tmp1 = libdevice.exp2(tmp0)") == costs.SFU
    assert cycles(LOAD + "tmp1 = tmp0.to(tl.float8e4nv)") == costs.TO_FLOAT8
    assert cycles(LOAD + "tmp1 = tl.where(tmp0 > tmp0, tmp0, tmp0)") == 2 * costs.ALU
    assert costs.ADD < costs.ALU < costs.SFU


def test_inductors_bf16_round_trips_cost_one_rounding_not_one_per_conversion():
    # an fp32 result rounded to bf16 and widened back, then the same twice more: the
    # compiler keeps the first rounding and widening, and folds the rest
    chain = LOAD + (
        "tmp1 = tmp0 * tmp0\n"
        "tmp2 = tmp1.to(tl.bfloat16)\ntmp3 = tmp2.to(tl.float32)\n"
        "tmp4 = tmp3.to(tl.bfloat16)\ntmp5 = tmp4.to(tl.float32)\n"
        "tmp6 = tmp5.to(tl.bfloat16)\ntmp7 = tmp6.to(tl.float32)\n"
        "tmp8 = tmp7.to(tl.float32)\n"
    )
    assert cycles(chain) == costs.ADD + costs.SFU + costs.WIDEN_BF16
    # a loaded bf16 value widened at its load and narrowed back is the stored value
    assert cycles(LOAD + "tmp1 = tmp0.to(tl.bfloat16)\ntmp2 = tmp1.to(tl.float32)") == 0


def test_an_expression_computed_again_costs_nothing_more():
    once = cycles(LOAD + "tmp1 = libdevice.exp(tmp0)")
    twice = cycles(LOAD + "tmp1 = libdevice.exp(tmp0)\ntmp2 = libdevice.exp(tmp0)")
    assert once == twice == costs.ADD + costs.SFU


def test_float64_arithmetic_runs_at_half_the_float32_rate():
    wide = LOAD + "tmp1 = tmp0.to(tl.float64)\ntmp2 = tmp1 * tmp1"
    assert cycles(wide) == costs.SFU + costs.ALU
    assert cycles(LOAD + "tmp1 = tmp0.to(tl.float64)\ntmp2 = tmp1 / tmp1") == (
        costs.SFU + costs.DIVIDE_FP64
    )


def test_constants_broadcasts_and_per_row_statistics_cost_nothing_per_element():
    body = LOAD + (
        "tmp1 = tl.full([1], 448.0, tl.float32)\n"
        "tmp2 = tl.broadcast_to(tmp0, [XBLOCK])\n"
        "tmp3 = tmp1 * tmp1\n"  # constants only
    )
    assert cycles(body) == 0


def test_a_two_axis_tile_computes_a_row_s_value_once_per_row():
    # a transposed rowwise cast as Inductor writes it: the row's scale (loaded along y alone)
    # is a [YBLOCK, 1] tensor, evaluated per row; the scaled value per element
    ys, xs = 512, 4096
    source = f"""def kernel(in_ptr0, in_ptr1, out_ptr0, ynumel, xnumel, YBLOCK, XBLOCK):
    ynumel = {ys}
    xnumel = {xs}
    x1 = xindex
    y0 = yindex
    tmp0 = tl.load(in_ptr0 + (y0 + 512*x1), ymask).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (y0), ymask).to(tl.float32)
    tmp2 = libdevice.exp2(tmp1)
    tmp3 = tmp0 * tmp2
"""
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    found = _arithmetic(fn, {"in_ptr0": "bfloat16", "in_ptr1": "float32"})
    assert found == costs.SFU * ys + costs.ADD * ys * xs


def test_a_bitcast_reinterprets_bits_and_runs_no_instruction():
    # Inductor concatenates a gathered float8 tensor's chunks as uint8: each load bitcast,
    # then selected by its chunk's mask; the selects are work, the bitcasts are not
    fp8 = {"in_ptr0": "float8_e4m3fn", "in_ptr1": "float32"}
    load = "x0 = xindex\ntmp0 = tl.load(in_ptr0 + (x0))\n"
    assert cycles(load + "tmp1 = tmp0.to(tl.uint8, bitcast=True)", fp8) == 0
    chunk = load + (
        "tmp9 = x0 < 512\n"  # the chunk's mask: index work, not counted
        "tmp1 = tmp0.to(tl.uint8, bitcast=True)\n"
        "tmp2 = tl.full(tmp1.shape, 0.0, tmp1.dtype)\n"
        "tmp3 = tl.where(tmp9, tmp1, tmp2)\n"
    )
    assert cycles(chunk, fp8) == costs.ALU
    # the bits' new dtype is the value's: converting it is work again
    widened = "tmp1 = tmp0.to(tl.uint8, bitcast=True)\ntmp2 = tmp1.to(tl.float32)"
    assert cycles(load + widened, fp8) == costs.SFU
