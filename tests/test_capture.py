"""CPU capture of the float8 linear's forward+backward: C++ kernels, code and scheduler agree."""

import pytest
import torch
from torch import nn

from f8roof.models.recipes import Recipe
from f8roof.profiler import capture as capture_module
from f8roof.profiler.capture import (
    BufferAccess,
    Capture,
    CaptureDevice,
    CaptureError,
    GraphKind,
    KernelKind,
    KernelLaunch,
    capture,
)

SHAPE = (40, 72, 104)  # M, K, N: CPU takes any shape; not multiples of 16 on purpose


@pytest.fixture(
    scope="module",
    params=[
        "tensorwise",
        "tensorwise_delayed",
        pytest.param("rowwise", marks=pytest.mark.cpu_rowwise),  # capture runs the step
    ],
)
def captured(request):
    return capture(Recipe.from_name(request.param), SHAPE, device="cpu")


@pytest.mark.slow
def test_cpu_code_and_scheduler_agree_per_kernel(captured):
    assert captured.device is CaptureDevice.CPU and captured.shape == SHAPE
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


class _GraphBreak(nn.Module):
    def forward(self, x):
        torch._dynamo.graph_break()
        return x


@pytest.mark.slow
def test_compile_failure_names_recipe_shape_and_cause(monkeypatch):
    monkeypatch.setattr(capture_module, "make_linear", lambda *a, **k: _GraphBreak())
    with pytest.raises(
        CaptureError,
        match=r"compiling tensorwise at M,K,N=40,72,104 on cpu "
        r"failed: \w+: .*graph_break",
    ):
        capture(Recipe.from_name("tensorwise"), SHAPE, device="cpu")


def launch(name, kind, *, reads=(), writes=(), scheduler=None, inductor=None, role=None):
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
        "tensorwise", (4, 8, 8), CaptureDevice.CODEGEN, {}, (cast, off, gemm), ("bwd:op3",)
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
        node("op1", reads={"primals_1": 64}, writes={"buf2": 32}, fused_away={"buf1": 16}),
    ]
    kept = 2 + 4 + 64 + 60 + 4 + 64 + 32  # buf9: read back, not a read
    assert capture_module._scheduler_bytes(group, removed=set()) == kept + 16
    assert capture_module._scheduler_bytes(group, removed={"buf1"}) == kept
