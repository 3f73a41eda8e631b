"""The output-code parser on checked-in code Inductor generated for M,K,N = 64,96,128.

codegen_h100_*: CUDA/Triton code from codegen-only (torch 2.13, h100 preset; layernorm_sigmoid:
the reference tensorwise linear between LayerNorm and Sigmoid; bf16_rmsnorm_bwd: the bf16
linear after RMSNorm at M,K,N = 4096,2048,5120, where Inductor picks a mix-order reduction);
cpu_*: C++ code from a CPU compile. Every kernel_num_gb in them must match the parsed bytes.
"""

import math
from pathlib import Path

import pytest

from f8roof.profiler.triton_code import (
    GB,
    BufferAccess,
    CodeParseError,
    KernelKind,
    dtype_name,
    parse_cpp_kernel,
    parse_output_code,
    parse_triton_kernel,
)
from f8roof.timing.kernel_classes import KernelClass

DATA = Path(__file__).parent / "data"
M, K, N = 64, 96, 128


def parse(name: str):
    return parse_output_code((DATA / name).read_text())


def overhead(code):
    return [launch for launch in code.launches if launch.kind is not KernelKind.EXTERN_GEMM]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("codegen_h100_*.py.txt")))
def test_triton_bytes_match_kernel_num_gb(name):
    code = parse(name)
    triton = [launch for launch in code.launches if launch.num_gb is not None]
    aten = [launch for launch in overhead(code) if launch.kind is KernelKind.EXTERN]
    assert triton and len(triton) + len(aten) == len(overhead(code))
    for launch in triton:
        inductor = round(launch.num_gb * GB) + launch.bytes_not_iterated + launch.bytes_workspace
        assert inductor - launch.bytes_unwritten_reads == launch.bytes_total


def test_mix_order_reduction_workspace_and_its_final_reduction():
    """RMSNorm's backward: one kernel reduces rows (grad_input) and columns (the norm weight's
    gradient) at once, writing partial column sums to a workspace; the wrapper sums them with
    an ATen op, a launch of its own that reads the workspace back."""
    code = parse("codegen_h100_bf16_rmsnorm_bwd.py.txt")
    splits, K = 256, 2048
    mixed = next(launch for launch in code.launches if launch.bytes_workspace)
    assert ("workspace_0", "float32", (splits * K,)) in [
        (w.name, w.dtype, w.shape) for w in mixed.writes
    ]
    assert mixed.bytes_workspace == 4 * splits * K
    final = code.launches[code.launches.index(mixed) + 1]
    assert (final.name, final.kind) == ("aten.sum", KernelKind.EXTERN)
    assert final.reads == (BufferAccess("workspace_0", "float32", (splits, K), 4 * splits * K),)
    assert final.writes == (BufferAccess("buf3", "float32", (1, K), 4 * K),)
    assert final.bytes_workspace == 4 * splits * K


def test_in_place_store_into_a_fresh_allocation_reads_nothing():
    """LayerNorm's stats kernel stores rstd through an in_out_ptr into memory Inductor reused
    from the variance it fused away: nothing had written it, so it is no read (though
    kernel_num_gb counts one)."""
    code = parse("codegen_h100_tensorwise_layernorm_sigmoid_fwd.py.txt")
    stats = code.launches[0]
    assert "var_mean" in stats.name and stats.bytes_unwritten_reads == 4 * M
    assert [r.name for r in stats.reads] == ["arg0_1"]  # the input, not the in_out buffer
    assert sum(launch.bytes_unwritten_reads for launch in code.launches) == 4 * M


def test_tensorwise_forward_launches():
    code = parse("codegen_h100_tensorwise_fwd.py.txt")
    assert code.graph_inputs == ("arg0_1", "arg1_1")  # input (M,K), weight (N,K)
    kinds = [launch.kind for launch in code.launches]
    assert kinds == [
        KernelKind.REDUCTION,
        KernelKind.REDUCTION,
        KernelKind.PERSISTENT_REDUCTION,
        KernelKind.POINTWISE,
        KernelKind.EXTERN_GEMM,
    ]
    # One pass over input: amax, then row-major and column-major float8 copies.
    first = code.launches[0]
    assert first.reads == (BufferAccess("arg0_1", "bfloat16", (M, K), 2 * M * K),)
    assert [(w.dtype, w.shape) for w in first.writes] == [
        ("float8_e4m3fn", (M, K)),
        ("float32", ()),
        ("float8_e4m3fn", (K, M)),
    ]
    gemm = code.launches[-1]
    assert gemm.name == "extern_kernels._scaled_mm"
    assert gemm.bytes_total == M * K + N * K + 2 * 4 + 2 * M * N


def test_backward_casts_grad_output_to_e5m2():
    code = parse("codegen_h100_tensorwise_bwd.py.txt")
    grad_cast = code.launches[0]
    assert grad_cast.reads[0].shape == (M, N)
    assert {w.dtype for w in grad_cast.writes} == {"float8_e5m2", "float32"}
    assert [launch.kind for launch in code.launches].count(KernelKind.EXTERN_GEMM) == 2


def test_rowwise_scales_are_per_row_and_per_column():
    code = parse("codegen_h100_rowwise_bwd.py.txt")
    scales = {w.shape for launch in overhead(code) for w in launch.writes if w.dtype == "float32"}
    assert scales == {(M, 1), (1, K), (N, 1)}


def test_delayed_history_slice_and_mutation():
    code = parse("codegen_h100_tensorwise_delayed_fwd.py.txt")
    slices = [launch for launch in code.launches if launch.bytes_not_iterated]
    # history[:-1]: the kernel iterates 15 of the 16 floats it gets a pointer to.
    assert len(slices) == 2 and all(launch.bytes_not_iterated == 4 for launch in slices)
    updates = [launch for launch in code.launches if "copy_" in launch.name]
    # The amax history and the scale are graph inputs updated in place.
    assert all({w.name for w in launch.writes} <= set(code.graph_inputs) for launch in updates)


def test_cpu_kernel_group_and_reuse():
    code = parse("cpu_tensorwise_fwd.py.txt")
    assert [launch.kind for launch in code.launches] == [
        KernelKind.CPP,
        KernelKind.EXTERN_GEMM,
        KernelKind.CPP,
    ]
    first = code.launches[0]
    # One C++ function: amax, scale and cast of input and weight; bf16 read once each.
    assert [r.name for r in first.reads] == ["primals_1", "primals_2"]
    assert first.bytes_total == 2 * (M * K + N * K) + (M * K + N * K) + 2 * (2 + 4)
    # buf7 reuses the memory of the input's row-major float8 copy: shape from reinterpret.
    assert code.launches[2].writes == (BufferAccess("buf7", "float8_e4m3fn", (K, M), K * M),)


def test_cpu_concat_views_read_back_are_not_reads():
    code = parse("cpu_tensorwise_delayed_fwd.py.txt")
    update = code.launches[2]
    # buf9 is the new history: written through its views buf7/buf8, then read in the same
    # function. Only data from before the launch counts as read.
    assert "buf9" not in {r.name for r in update.reads}
    assert {"buf7", "buf8", "primals_7"} <= {w.name for w in update.writes}


WRAPPER = '''
kernel_a = async_compile.cpp_pybinding(['const float*', 'float*'], r"""
extern "C" void kernel(const float* in_ptr0, float* out_ptr0)
{}
""")
kernel_b = async_compile.cpp_pybinding(['float*', 'const float*'], r"""
extern "C" void kernel(float* in_out_ptr0, const float* in_ptr0)
{}
""")

class Runner:
    def call(self, args):
        arg0_1, = args
        buf0 = empty_strided_cpu((4, 8), (8, 1), torch.float32)
        kernel_a(arg0_1, buf0)
        buf1 = buf0; del buf0  # reuse
        kernel_b(buf1, arg0_1)
        buf2 = empty_strided_cpu((8, 8), (8, 1), torch.float32)
        kernel_a(buf2, buf2)
        buf3 = empty_strided_cpu((4, 8), (8, 1), torch.float32)
        extern_kernels.mm(buf1, reinterpret_tensor(arg0_1, (8, 8), (1, 8), 0), out=buf3)
        return (buf3,)

def get_args():
    arg0_1 = rand_strided((4, 8), (8, 1), device='cpu', dtype=torch.float32)
    return [arg0_1]
'''


def test_in_place_and_self_reads_on_a_small_wrapper():
    code = parse_output_code(WRAPPER)
    a, b, c, mm = code.launches
    assert (a.bytes_total, [r.name for r in a.reads]) == (2 * 128, ["arg0_1"])
    # in_out_ptr of a reused buffer holding data: read and written.
    assert [r.name for r in b.reads] == ["buf1", "arg0_1"] and b.bytes_total == 3 * 128
    # A read of a buffer nothing wrote yet is the kernel's own output (and counted once).
    assert c.reads == () and c.bytes_total == 8 * 8 * 4
    assert mm.kind is KernelKind.EXTERN_GEMM
    assert [(r.name, r.shape) for r in mm.reads] == [("buf1", (4, 8)), ("arg0_1", (8, 8))]


def test_cpp_signature():
    kernel = parse_cpp_kernel(
        "k",
        'extern "C" void kernel(const at::BFloat16* in_ptr0,\n'
        " at::Float8_e5m2* out_ptr0, const int64_t ks0)",
    )
    assert [(p.name, p.dtype, p.read, p.written) for p in kernel.params] == [
        ("in_ptr0", "bfloat16", True, False),
        ("out_ptr0", "float8_e5m2", False, True),
        ("ks0", None, False, False),
    ]


@pytest.mark.parametrize(
    "spelling, name",
    [
        ("fp8e4nv", "float8_e4m3fn"),
        ("fp8e5", "float8_e5m2"),
        ("bf16", "bfloat16"),
        ("torch.float8_e4m3fn", "float8_e4m3fn"),
        ("at::BFloat16", "bfloat16"),
        ("float", "float32"),
    ],
)
def test_dtype_spellings(spelling, name):
    assert dtype_name(spelling) == name


def test_unknown_code_is_an_error():
    with pytest.raises(CodeParseError, match="unknown dtype"):
        dtype_name("fp4")
    with pytest.raises(CodeParseError, match="no call"):
        parse_output_code("x = 1\n")
    with pytest.raises(ValueError, match="bytes"):
        BufferAccess("buf0", "bfloat16", (2, 3), 7)


# ---- kernel classes (read off the samples' code by hand, then asserted) ----------------------


def classes(name: str) -> list[tuple[str, KernelClass, bool]]:
    return [(lnc.name, lnc.kernel_class, lnc.changes_layout) for lnc in parse(name).launches]


def test_every_sample_launch_has_a_class():
    for path in sorted(DATA.glob("codegen_h100_*.py.txt")):
        assert all(launch.kernel_class is not None for launch in parse(path.name).launches)


def test_rowwise_backward_classes():
    """Reference rowwise backward: grad_output's row cast holds each 128-wide row in one
    program (persistent, ReductionHint.INNER, loads and stores `r0_1 + 128*x0`); the weight's
    column cast loads `x0 + 96*r0_1` (columns over N) and stores `r0_1 + 128*x0` (transposed);
    grad_output's column cast likewise (persistent, OUTER). Both gemms pass (M,1)/(1,K) scale
    vectors with use_fast_accum=False: CUTLASS rowwise, slow accumulation."""
    (
        (row, row_cls, row_t),
        (wcol, wcol_cls, wcol_t),
        (_g1, g1_cls, _),
        (gcol, gcol_cls, gcol_t),
        (
            _g2,
            g2_cls,
            _,
        ),
    ) = classes("codegen_h100_rowwise_bwd.py.txt")
    assert row.startswith("triton_per_") and row_cls is KernelClass.REDUCTION_PERSISTENT
    assert not row_t
    assert wcol.startswith("triton_red_") and wcol_cls is KernelClass.REDUCTION_OUTER and wcol_t
    assert gcol.startswith("triton_per_") and gcol_cls is KernelClass.REDUCTION_OUTER and gcol_t
    assert g1_cls is g2_cls is KernelClass.GEMM_FP8_ROWWISE_SLOW


def test_tensorwise_forward_classes():
    """Tensorwise forward: the input's amax and both casts in one reduction over the whole
    tensor (xnumel 1), its second copy stored at `64*(r0_0 % 96) + (r0_0 // 96)` (transposed);
    the weight's amax split in two (`triton_red_fused_abs_amax_1` writes 2 partial maxima,
    `triton_per_..._2` reduces them); the weight's cast a plain elementwise pass (its
    column-major buffer is the weight's own layout: load and store both `x0`); the gemm with
    scalar scales and use_fast_accum=True."""
    found = classes("codegen_h100_tensorwise_fwd.py.txt")
    assert [(c, t) for _, c, t in found] == [
        (KernelClass.REDUCTION_INNER, True),
        (KernelClass.REDUCTION_SPLIT, False),
        (KernelClass.REDUCTION_SPLIT, False),
        (KernelClass.POINTWISE, False),
        (KernelClass.GEMM_FP8_TENSORWISE_FAST, False),
    ]
    assert found[1][0] == "triton_red_fused_abs_amax_1"


def test_tensorwise_backward_classes():
    """Backward: the weight's transposed cast is a 2D-tiled pointwise kernel (loads
    `x1 + 96*y0`, stores `y0 + 128*x1`); both gemms take scalar scales without fast
    accumulation: cuBLAS tensorwise, slow accumulation."""
    found = classes("codegen_h100_tensorwise_bwd.py.txt")
    assert found[1][1] is KernelClass.POINTWISE_TRANSPOSE and found[1][2]
    assert [c for _, c, _ in found[2:]] == [KernelClass.GEMM_FP8_TENSORWISE_SLOW] * 2


def test_layernorm_sigmoid_and_delayed_classes():
    ln = classes("codegen_h100_tensorwise_layernorm_sigmoid_fwd.py.txt")
    assert ln[0][1] is KernelClass.REDUCTION_PERSISTENT  # LayerNorm's var_mean, rows of 96
    assert ln[-1] == ("triton_poi_fused_sigmoid_5", KernelClass.POINTWISE, False)
    delayed = {name: c for name, c, _ in classes("codegen_h100_tensorwise_delayed_fwd.py.txt")}
    # the weight's amax split over 2 programs, finished by the history update's reduction
    assert (
        delayed[
            "triton_red_fused__scaled_mm_abs_amax_clamp_max_clamp_min_convert_element_type_mul_permute_2"
        ]
        is KernelClass.REDUCTION_SPLIT
    )
    assert delayed["triton_per_fused_abs_amax_cat_convert_element_type_slice_view_6"] is (
        KernelClass.REDUCTION_SPLIT
    )
    assert delayed[
        "triton_poi_fused_clamp_max_clamp_min_clone_convert_element_type_mul_permute_3"
    ] is (KernelClass.POINTWISE_TRANSPOSE)


def test_mix_order_reduction_and_its_final_sum_are_split():
    found = classes("codegen_h100_bf16_rmsnorm_bwd.py.txt")
    assert [c for _, c, _ in found] == [
        KernelClass.GEMM_BF16,
        KernelClass.REDUCTION_SPLIT,
        KernelClass.REDUCTION_SPLIT,
        KernelClass.POINTWISE,
        KernelClass.GEMM_BF16,
    ]


def test_atomic_kernel_is_atomic():
    source = """
@triton_heuristics.pointwise(size_hints={'x': 64}, filename=__file__, triton_meta={'signature': {'in_ptr0': '*i64', 'in_ptr1': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}}, inductor_meta={'mutated_arg_names': ['out_ptr0'], 'atomic_add_found': True})
@triton.jit
def triton_poi_fused_index_put_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 64
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.load(in_ptr1 + (x0), xmask)
    tl.atomic_add(out_ptr0 + (tmp0), tmp1, xmask, sem='relaxed')
"""
    kernel = parse_triton_kernel("triton_poi_fused_index_put_0", source)
    assert kernel.atomic


# torchao rowwise between LayerNorm and Sigmoid at M, K, N = 8192, 4096, 1024 (codegen for
# h100, torch 2.13, torchao 0.18), and the bf16 graph's backward: the kernels the public time
# model's scattered, reloaded and arithmetic terms are read off.
ROWWISE_LN = "codegen_h100_torchao_rowwise_layernorm_sigmoid_{}_8192x4096x1024.py.txt"
BIG_M, BIG_K, BIG_N = 8192, 4096, 1024


def launch_named(code, suffix: str):
    return next(launch for launch in code.launches if launch.name.endswith(suffix))


def test_transposed_float8_store_from_a_row_reduction_is_scattered():
    code = parse(ROWWISE_LN.format("bwd"))
    norm = launch_named(code, "_9")  # LayerNorm backward fused with the input's dim-0 cast
    scattered = [w for w in norm.writes if w.name in norm.scattered]
    assert [(w.dtype, math.prod(w.shape)) for w in scattered] == [("float8_e4m3fn", BIG_M * BIG_K)]
    assert not [r for r in norm.reads if r.name in norm.scattered]  # it reads its rows whole
    cast = launch_named(code, "_2")  # grad_output's casts after Sigmoid's backward
    assert {math.prod(w.shape) for w in cast.writes if w.name in cast.scattered} == {BIG_M * BIG_N}


def test_outer_reductions_and_tiled_transposes_are_not_scattered():
    code = parse(ROWWISE_LN.format("bwd"))
    for suffix in ("_0", "_3", "_5", "_7"):  # column amaxes (outer hint), the 2D-tiled cast
        assert not launch_named(code, suffix).scattered


def test_a_norm_fused_with_a_rowwise_cast_walks_its_row_four_times():
    code = parse(ROWWISE_LN.format("fwd"))
    norm = launch_named(code, "_0")  # statistics, amax, and the cast each walk the row again
    (again,) = [times for name, times in norm.reloads]
    assert again == 3
    weight = launch_named(code, "_1")  # amax, then the cast
    assert [times for _, times in weight.reloads] == [1]
    assert not launch_named(code, "sigmoid_2").reloads


def test_fused_rowwise_cast_does_three_times_the_arithmetic_per_byte_of_the_norm_alone():
    fp8 = launch_named(parse(ROWWISE_LN.format("bwd")), "_9")
    bf16 = launch_named(
        parse("codegen_h100_bf16_layernorm_sigmoid_bwd_8192x4096x1024.py.txt"), "_sum_1"
    )
    per_byte = [launch.arithmetic / launch.bytes_total for launch in (fp8, bf16)]
    assert per_byte[0] > 2.5 * per_byte[1] > 0
    # every Triton launch counts its arithmetic over its whole iteration space
    assert all(launch.arithmetic >= 0 for launch in overhead(parse(ROWWISE_LN.format("bwd"))))
