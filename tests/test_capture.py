"""CPU capture of a variant's forward+backward: C++ kernels, code and scheduler agree, and
each kernel says whose work it does (the linear's float8 work, its neighbours', or both)."""

import math

import pytest
import requires
import torch
from torch import nn

from f8roof.profiler import capture as capture_module
from f8roof.profiler.capture import (
    BufferAccess,
    Capture,
    CaptureDevice,
    CaptureError,
    GraphKind,
    KernelKind,
    KernelLaunch,
    KernelOp,
    Work,
    capture,
    capture_step,
)
from f8roof.profiler.float8_linear import Float8Linear
from f8roof.profiler.graphs import Step, build_module
from f8roof.traffic.recipes import Role
from f8roof.traffic.variant import Implementation, Variant

SHAPE = (40, 72, 104)  # M, K, N: CPU takes any shape; not multiples of 16 on purpose


def variant_param(key: str):
    """A variant key as a test parameter, skipped where this machine cannot capture it on CPU:
    torchao not installed, or a rowwise recipe where CPU `_scaled_mm` takes no row-wise
    scales (torch 2.11; 2.13 takes them, so every torchao recipe runs here)."""
    marks = [requires.torchao] if key.startswith("torchao") else []
    marks += [requires.cpu_rowwise] if "rowwise" in key else []
    return pytest.param(key, marks=marks)


STANDALONE = [
    "reference:tensorwise",
    "reference:tensorwise_delayed",
    "reference:rowwise",
    "torchao:tensorwise",
    "torchao:rowwise",
]


@pytest.fixture(scope="module", params=[variant_param(key) for key in STANDALONE])
def captured(request):
    return capture(Variant.from_key(request.param), SHAPE, device="cpu")


@pytest.mark.slow
def test_cpu_code_and_scheduler_agree_per_kernel(captured):
    assert captured.device is CaptureDevice.CPU and captured.shape == SHAPE
    assert Variant.from_key(captured.variant).implementation in Implementation
    assert {k.kind for k in captured.launches} == {KernelKind.CPP, KernelKind.EXTERN_GEMM}
    for launch in captured.launches:
        assert launch.bytes_inductor is None  # C++ kernels carry no kernel_num_gb
        assert launch.bytes_scheduler == launch.bytes_code, launch.name
    assert captured.disagreements() == ()
    assert captured.unmatched_scheduler_nodes == ()


@pytest.mark.slow
def test_cpu_overhead_reads_each_bf16_tensor(captured):
    M, K, N = SHAPE
    assert sum(k.is_gemm for k in captured.launches) == 3
    reads = {(k.graph, r.shape, r.dtype) for k in captured.overhead_launches for r in k.reads}
    assert (GraphKind.FWD, (M, K), "bfloat16") in reads  # input
    assert (GraphKind.FWD, (N, K), "bfloat16") in reads  # weight
    assert (GraphKind.BWD, (M, N), "bfloat16") in reads  # grad_output
    assert captured.overhead_bytes == sum(k.bytes_code for k in captured.overhead_launches)
    assert all(k.role for k in captured.overhead_launches)
    # A standalone linear has no neighbour: every kernel is the linear's.
    assert {k.work for k in captured.launches} == {Work.GEMM, Work.FLOAT8}


IN_CONTEXT = {
    "bf16@layernorm+sigmoid": {"LayerNorm", "Sigmoid"},
    "reference:rowwise@silu_mul+gelu": {"SiluMul", "GELU"},
    "torchao:tensorwise@layernorm+sigmoid": {"LayerNorm", "Sigmoid"},
    "torchao:rowwise_gw_hp@rmsnorm+silu": {"RMSNorm", "SiLU"},
}


@pytest.fixture(scope="module", params=[variant_param(key) for key in IN_CONTEXT])
def in_context(request):
    return capture(Variant.from_key(request.param), SHAPE, device="cpu")


@pytest.mark.slow
def test_context_kernels_are_counted_and_named(in_context):
    assert in_context.disagreements() == ()
    assert in_context.unmatched_scheduler_nodes == ()
    variant = Variant.from_key(in_context.variant)
    neighbours = {m for k in in_context.launches for m in k.context_modules}
    assert neighbours == IN_CONTEXT[in_context.variant]
    works = {k.work for k in in_context.overhead_launches}
    if variant.is_bf16:
        assert works == {Work.CONTEXT}  # the norm and activation, nothing of the linear's
    else:
        # C++ kernels fuse whole loop nests: some float8 work lands in a neighbour's kernel.
        fused = [k for k in in_context.launches if k.work is Work.FUSED]
        assert fused and all(k.float8_steps and k.context_modules for k in fused)


def test_roles_of_module_state():
    """The linear's weight and its role-named buffers have roles; a norm's weight has none."""
    variant = Variant.from_key("reference:tensorwise_delayed@rmsnorm+none")
    module = build_module(variant, 72, 104)
    roles = {id(t): role for t, role in capture_module._state_roles(module)}
    assert roles[id(module.linear.weight)] is Role.WEIGHT
    assert roles[id(module.linear.input_amax_history)] is Role.INPUT
    assert roles[id(module.linear.grad_output_scale)] is Role.GRAD_OUTPUT
    assert id(module.before.weight) not in roles
    assert len(roles) == 7  # weight, and amax history and scale per role


@requires.torchao
def test_torchao_module_is_a_linear_with_a_weight():
    from f8roof.profiler import torchao_float8

    with torchao_float8.inductor_patch_scope():
        module = build_module(Variant.from_key("torchao:rowwise@layernorm+sigmoid"), 64, 32)
    assert type(module.linear).__module__.startswith("torchao.float8")
    assert list(capture_module._state_roles(module)) == [(module.linear.weight, Role.WEIGHT)]


class _MyFloat8(nn.Module):
    """A user's own block: affine LayerNorm, then f8roof's Float8Linear deep in a Sequential."""

    def __init__(self, recipe_key: str, K: int, N: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(K, dtype=torch.bfloat16)
        recipe = Variant.from_key(recipe_key).recipe
        self.proj = nn.Sequential(Float8Linear(recipe, in_features=K, out_features=N))

    def forward(self, x):
        return self.proj(self.norm(x))


@pytest.mark.slow
def test_any_module_factory_is_captured():
    M, K, N = SHAPE

    def factory(*, device: str, initialize: bool) -> Step:
        with torch.device(device):
            module = _MyFloat8("reference:tensorwise", K, N)
            x = torch.randn(M, K, dtype=torch.bfloat16, requires_grad=True)
            return Step(module, (x,), torch.randn(M, N, dtype=torch.bfloat16))

    captured, measured = capture_step(factory, SHAPE, device="cpu", key="mine")
    assert captured.variant == "mine" and measured is None
    assert captured.disagreements() == ()
    roles = ",".join(k.role for k in captured.overhead_launches if k.role)
    assert {"input", "weight", "grad_output"} <= set(roles.split(","))
    assert {m for k in captured.launches for m in k.context_modules} == {"LayerNorm"}


class _GraphBreak(nn.Module):
    def forward(self, x):
        torch._dynamo.graph_break()
        return x


@pytest.mark.slow
def test_compile_failure_names_what_shape_and_cause():
    M, K, _ = SHAPE

    def factory(*, device: str, initialize: bool) -> Step:
        x = torch.randn(M, K, device=device, requires_grad=True)
        return Step(_GraphBreak(), (x,), torch.randn(M, K, device=device))

    with pytest.raises(
        CaptureError,
        match=r"compiling mine at M,K,N=40,72,104 on cpu failed: \w+: .*graph_break",
    ):
        capture_step(factory, SHAPE, device="cpu", key="mine")


def launch(name, kind, *, reads=(), writes=(), scheduler=None, inductor=None, role=None, ops=()):
    total = sum(b.nbytes for b in (*reads, *writes))
    return KernelLaunch(
        name,
        GraphKind.FWD,
        kind,
        tuple(reads),
        tuple(writes),
        total,
        total if scheduler is None else scheduler,
        inductor,
        role,
        tuple(ops),
    )


X = BufferAccess("primals_1", "bfloat16", (4, 8), 64)
X8 = BufferAccess("buf0", "float8_e4m3fn", (4, 8), 32)


def test_overhead_is_everything_but_gemms_and_disagreements_are_listed():
    cast = launch(
        "triton_poi_fused_0",
        KernelKind.POINTWISE,
        reads=[X],
        writes=[X8],
        inductor=96,
        role="input",
    )
    off = launch(
        "triton_red_fused_1",
        KernelKind.REDUCTION,
        reads=[X],
        scheduler=60,
        inductor=64,
        role="input",
    )
    gemm = launch("extern_kernels._scaled_mm", KernelKind.EXTERN_GEMM, reads=[X8, X8])
    result = Capture(
        "reference:tensorwise",
        (4, 8, 8),
        CaptureDevice.CODEGEN,
        {},
        (cast, off, gemm),
        ("bwd:op3",),
    )
    assert result.overhead_launches == (cast, off)
    assert result.overhead_bytes == 96 + 64
    assert result.disagreements() == (
        "fwd triton_red_fused_1: code 64, scheduler 60, inductor 64",
        "scheduler node bwd:op3 matches no launch",
    )


def test_launch_bytes_must_add_up():
    with pytest.raises(ValueError, match="sum"):
        KernelLaunch("k", GraphKind.FWD, KernelKind.CPP, (X,), (), 65, 65, None, None)


def node(name, *, reads=None, writes=None, fused_away=None, views=None):
    return capture_module._SchedulerNode(
        name, reads or {}, writes or {}, fused_away or {}, views or {}, tuple(reads or ())
    )


def test_scheduler_bytes_of_a_kernel_group():
    # op7/op8 write views of buf9 (a concat); op10 reads buf9 back in the same launch (rule 2).
    # op1 keeps a fused intermediate (buf1) that codegen did not remove (rule 5).
    group = [
        node("op7", reads={"buf6": 2}, writes={"buf7": 4}, views={"buf7": "buf9"}),
        node("op8", reads={"primals_7": 64}, writes={"buf8": 60}, views={"buf8": "buf9"}),
        node("op10", reads={"buf9": 64}, writes={"buf10": 4}),
        node("op1", reads={"primals_1": 64}, writes={"buf2": 16}, fused_away={"buf1": 16}),
    ]
    kept = 2 + 4 + 64 + 60 + 4 + 64 + 16  # buf9: read back, not a read
    bytes_of = capture_module._scheduler_bytes
    assert bytes_of(group, removed=set(), reuses={}) == kept + 16
    assert bytes_of(group, removed={"buf1"}, reuses={}) == kept
    # Rule 8: buf2 reuses the kept intermediate's memory in place: one storage, one write.
    assert bytes_of(group, removed=set(), reuses={"buf2": "buf1"}) == kept


LINEAR_AMAX = KernelOp("aten.amax", "bfloat16", "Float8Linear", linear=True)
LINEAR_MUL = KernelOp("aten.mul", "float32", "Float8Linear", linear=True)
LINEAR_VIEW = KernelOp("aten.permute", "bfloat16", "Float8Linear", linear=True)
NORM = KernelOp("aten.var_mean", None, "LayerNorm", linear=False)
UNKNOWN = KernelOp("aten.clone", "bfloat16", None, linear=False)
X8_T = BufferAccess("buf1", "float8_e4m3fn", (8, 4), 32)


@pytest.mark.parametrize(
    "kind, ops, writes, work, steps, neighbours",
    [
        (KernelKind.REDUCTION, [NORM, LINEAR_AMAX], [], Work.FUSED, ("amax",), ("LayerNorm",)),
        (
            KernelKind.POINTWISE,
            [NORM, LINEAR_MUL],
            [X8],
            Work.FUSED,
            ("cast to float8_e4m3fn",),
            ("LayerNorm",),
        ),
        (
            KernelKind.POINTWISE,
            [LINEAR_MUL],
            [X8, X8_T],
            Work.FLOAT8,
            ("cast to float8_e4m3fn x2",),
            (),
        ),
        (KernelKind.POINTWISE, [LINEAR_MUL, UNKNOWN], [], Work.FLOAT8, ("scale",), ()),
        # A view of the linear's output read by the activation computes nothing of the linear.
        (KernelKind.POINTWISE, [NORM, LINEAR_VIEW], [], Work.CONTEXT, (), ("LayerNorm",)),
        (KernelKind.EXTERN_GEMM, [LINEAR_MUL], [], Work.GEMM, (), ()),
    ],
)
def test_what_a_kernel_computes(kind, ops, writes, work, steps, neighbours):
    k = launch("k", kind, reads=[X], writes=writes, ops=ops)
    assert (k.work, k.float8_steps, k.context_modules) == (work, steps, neighbours)


def test_launches_keep_their_kernel_class_from_the_code():
    """The class the parser read off the code travels with each launch, and the overhead
    bytes add up per class (what the band and calibrations carry)."""
    from pathlib import Path

    from f8roof.profiler.triton_code import parse_output_code
    from f8roof.timing.kernel_classes import KernelClass

    code = (Path(__file__).parent / "data" / "codegen_h100_tensorwise_fwd.py.txt").read_text()
    launches = tuple(
        capture_module._launch(GraphKind.FWD, parsed, [], set(), {}, {})
        for parsed in parse_output_code(code).launches
    )
    result = Capture("tensorwise", (64, 96, 128), CaptureDevice.CODEGEN, {}, launches)
    assert [k.kernel_class for k in result.launches if k.kernel_class is not None] == [
        KernelClass.REDUCTION_INNER,
        KernelClass.REDUCTION_SPLIT,
        KernelClass.REDUCTION_SPLIT,
        KernelClass.POINTWISE,
        KernelClass.GEMM_FP8_TENSORWISE_FAST,
    ]
    by_class: dict[KernelClass, int] = {}
    for k in result.overhead_launches:
        by_class[k.kernel_class] = by_class.get(k.kernel_class, 0) + k.bytes_code
    assert KernelClass.GEMM_FP8_TENSORWISE_FAST not in by_class
    assert sum(by_class.values()) == result.overhead_bytes
    assert by_class[KernelClass.POINTWISE] == 2 * 128 * 96 + 2 + 128 * 96  # bf16 in, fp8 out


def test_block_scaled_buffers_scattered_or_reloaded_are_read_off_in_their_roles_dims():
    """torchao mxfp8_emulated_rceil after RMSNorm at M,K,N = 12288,16384,8192, backward code
    generated for b200 (codegen-only, torch 2.13, torchao 0.18): there Inductor fuses RMSNorm's
    backward with the input's column cast in one looped reduction (`..._8`), which walks each
    row twice and stores the cast's fp32 values transposed from the row, into a buffer in
    scale blocks (K, M/32, 32). Those scattered elements are M*K: read off as the bytes are,
    not off the raw (16384, 384, 32), which names no size and left the shape unfitted."""
    from fractions import Fraction
    from pathlib import Path

    from f8roof.profiler.triton_code import parse_output_code
    from f8roof.traffic.fit import Polynomial, ShapeSample, fit_traffic

    shape = (12288, 16384, 8192)
    name = "codegen_b200_torchao_mxfp8_emulated_rceil_rmsnorm_bwd_12288x16384x8192.py.txt"
    code = (Path(__file__).parent / "data" / name).read_text()
    launches = tuple(
        capture_module._launch(GraphKind.BWD, parsed, [], set(), {}, {})
        for parsed in parse_output_code(code).launches
    )
    result = Capture(
        "torchao:mxfp8_emulated_rceil@rmsnorm+none",
        shape,
        CaptureDevice.CODEGEN,
        {},
        launches,
        block_elements=32,
    )
    (norm,) = [k for k in result.overhead_launches if k.name.endswith("_where_8")]
    assert [math.prod(b.shape) for b in norm.writes if b.name in norm.scattered] == [12288 * 16384]
    sample = result.sample(norm)
    assert sample.scattered_polynomial == Polynomial.from_map({"M*K": 1})
    assert sample.reread_polynomial == Polynomial.from_map({"M*K": 4, "K": 2})
    assert sample.polynomial == Polynomial.from_map({"M*K": Fraction(161, 16), "M": 4, "K": 2})
    fit = fit_traffic([ShapeSample(shape, tuple(result.samples()))])
    assert fit.unfitted == () and len(fit.kernel_sets) == 1
