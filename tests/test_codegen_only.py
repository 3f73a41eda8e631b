"""CUDA/Triton codegen on this GPU-less machine: stand-ins, and bytes counted three ways."""

import re

import pytest
import requires
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from f8roof.hardware.presets import find_gpu
from f8roof.profiler import codegen_only
from f8roof.profiler.capture import CaptureDevice, CaptureError, GraphKind, KernelKind, capture
from f8roof.traffic.variant import Variant

SHAPE = (32, 80, 112)  # M, K, N: multiples of 16, as CUDA float8 gemms need, and distinct
TRITON_KINDS = {KernelKind.POINTWISE, KernelKind.REDUCTION, KernelKind.PERSISTENT_REDUCTION}


def patched_state():
    """Everything cuda_stand_ins touches, as objects to compare by identity or value."""
    from torch._dynamo import device_interface
    from torch._inductor import compile_fx, scheduler
    from torch._inductor.runtime.hints import DeviceProperties

    functions = (
        torch.utils._triton.has_triton,
        torch.utils._triton.triton_hash_with_backend,
        scheduler.has_triton,
        DeviceProperties.__dict__["create"],
        compile_fx._check_triton_bf16_support,
        torch.cuda.get_device_properties,
        torch.cuda.get_device_capability,
        torch.cuda.current_device,
        torch.cuda.device_count,
    )
    caches = (
        dict(device_interface.caching_worker_device_properties),
        dict(device_interface.caching_worker_current_devices),
    )
    return functions, caches


def test_stand_ins_answer_from_the_preset_and_restore_everything():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.runtime.hints import DeviceProperties

    before = patched_state()
    gpu = find_gpu("h200")
    with codegen_only.cuda_stand_ins(gpu):
        assert torch.utils._triton.has_triton()
        assert torch.cuda.get_device_capability() == gpu.compute_capability
        props = torch.cuda.get_device_properties(0)
        assert (props.multi_processor_count, props.total_memory) == (gpu.sm_count, gpu.memory_bytes)
        assert DeviceProperties.create(torch.device("cuda", 0)).multi_processor_count == 132
        # Fills Inductor's worker-side property cache, which must not survive the context.
        assert get_interface_for_device("cuda").Worker.get_device_properties(0) is props
    after = patched_state()
    assert all(a is b for a, b in zip(before[0], after[0]))
    assert before[1] == after[1]
    assert not torch.cuda.is_available()


def test_moved_internals_name_the_torch_version_and_restore(monkeypatch):
    from torch._inductor import compile_fx

    before = patched_state()
    monkeypatch.delattr(compile_fx, "_check_triton_bf16_support")
    moved = pytest.raises(codegen_only.InductorInternalsMoved, match=re.escape(torch.__version__))
    with moved, codegen_only.cuda_stand_ins(find_gpu("h100")):
        pass
    # The stand-ins entered before the missing one are undone.
    assert torch.utils._triton.has_triton is before[0][0]


def test_factory_ops_are_traced_in_the_inputs_fake_mode():
    """A tensor made from nothing (torchao's `new_ones(())` unit scale) must be fake CUDA too:
    traced outside the inputs' FakeTensorMode it would be a real CUDA op, and fail here."""

    def scaled(x):
        return x * torch.ones((), dtype=x.dtype)

    gm = make_fx(scaled)(torch.randn(4, 8))
    cuda_gm, fake = codegen_only.to_fake_cuda(gm, [torch.randn(4, 8)])
    values = [
        n.meta["val"] for n in cuda_gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)
    ]
    assert values and all(v.device.type == "cuda" for v in (*values, *fake))


def _compile_that(monkeypatch, *, writes: bool, raises: BaseException):
    """generate_cuda_code with an Inductor that saves its output code (or not) and then
    raises `raises`, as loading the module does without a GPU."""
    from torch._inductor import compile_fx
    from torch._inductor.graph import GraphLowering

    def inner(gm, example_inputs, **kwargs):
        if writes:
            GraphLowering.save_output_code("# the generated code")
        raise raises

    monkeypatch.setattr(compile_fx, "compile_fx_inner", inner)
    gm = make_fx(lambda x: x * 2)(torch.randn(4, 8))
    return lambda: codegen_only.generate_cuda_code(gm, [torch.randn(4, 8)], {})


def _wrapped(inner: Exception) -> RuntimeError:
    """As Inductor wraps what failed inside it: `raise InductorError(e) from None`."""
    from torch._inductor.exc import InductorError

    return InductorError(inner, None)


@pytest.mark.parametrize(
    "error",
    [
        ImportError("cannot import name '_cuda_getCurrentRawStream' from 'torch._C'"),
        RuntimeError("Found no NVIDIA driver on your system."),
    ],
    ids=["cpu build", "no driver"],
)
def test_loading_the_module_without_a_gpu_is_expected_once_the_code_exists(monkeypatch, error):
    for raised in (error, _wrapped(error)):
        generate = _compile_that(monkeypatch, writes=True, raises=raised)
        assert generate() == "# the generated code"


def test_other_compile_failures_are_not_swallowed(monkeypatch):
    # a failure that is not the module's loading, after the code was written
    generate = _compile_that(monkeypatch, writes=True, raises=_wrapped(ValueError("bad graph")))
    with pytest.raises(RuntimeError, match="bad graph"):
        generate()
    # the expected failure, but before any code exists
    missing = ImportError("cannot import name '_cuda_getCurrentRawStream' from 'torch._C'")
    generate = _compile_that(monkeypatch, writes=False, raises=missing)
    with pytest.raises(ImportError):
        generate()
    # not an ImportError or RuntimeError at all
    generate = _compile_that(monkeypatch, writes=True, raises=KeyError("buf0"))
    with pytest.raises(KeyError):
        generate()


def test_shapes_float8_gemms_cannot_take_are_refused_before_compiling():
    with pytest.raises(CaptureError, match="K=100 not a multiple of 16"):
        capture(Variant.from_key("reference:tensorwise"), (64, 100, 128), device="codegen")


@pytest.mark.slow
def test_bf16_baseline_has_only_gemms():
    result = capture(Variant.from_key("bf16"), (64, 100, 128), device="codegen")
    assert result.variant == "bf16" and result.overhead_launches == ()
    assert [k.name for k in result.launches] == ["extern_kernels.mm"] * 3
    assert result.disagreements() == ()


@pytest.fixture(
    scope="module",
    params=[
        "reference:tensorwise",
        "reference:tensorwise_delayed",
        "reference:rowwise",
        # every torchao recipe generates CUDA code here (make_fx inside the fake mode)
        pytest.param("torchao:tensorwise", marks=requires.torchao),
        pytest.param("torchao:rowwise", marks=requires.torchao),
        pytest.param("torchao:rowwise_gw_hp", marks=requires.torchao),
    ],
)
def captured(request):
    return capture(Variant.from_key(request.param), SHAPE, device="codegen")


@pytest.mark.slow
def test_codegen_triton_bytes_agree_three_ways(captured):
    assert captured.device is CaptureDevice.CODEGEN
    assert set(captured.code) == {GraphKind.FWD, GraphKind.BWD}
    overhead = captured.overhead_launches
    assert overhead and {k.kind for k in overhead} <= TRITON_KINDS
    for launch in overhead:
        assert launch.bytes_inductor is not None
        assert launch.bytes_code == launch.bytes_scheduler == launch.bytes_inductor, launch.name
    assert captured.disagreements() == ()
    gemms = [k for k in captured.launches if k.is_gemm]
    float8_gemms = 2 if captured.variant.endswith("rowwise_gw_hp") else 3
    assert [k.name for k in gemms].count("extern_kernels._scaled_mm") == float8_gemms
    assert all(k.bytes_scheduler == k.bytes_code for k in gemms)


@pytest.mark.slow
def test_codegen_attributes_every_overhead_kernel_to_roles(captured):
    # A kernel reading nothing (torchao's unit scale for a rowwise backward gemm) serves none.
    roles = {k.role for k in captured.overhead_launches if k.reads}
    assert None not in roles
    assert {"input", "weight", "grad_output"} <= set(",".join(roles).split(","))
    backward_roles = {k.role for k in captured.overhead_launches if k.graph is GraphKind.BWD}
    assert "grad_output" in backward_roles


@pytest.mark.slow
def test_mix_order_reduction_is_counted_three_ways():
    """At this shape Inductor reduces RMSNorm's backward rows and columns in one kernel and
    finishes the columns with an ATen sum in the wrapper (capture rule 9)."""
    result = capture(Variant.from_key("bf16@rmsnorm+none"), (4096, 2048, 5120), device="codegen")
    assert result.disagreements() == () and result.unmatched_scheduler_nodes == ()
    final = next(k for k in result.launches if k.kind is KernelKind.EXTERN)
    assert final.name == "aten.sum" and final.context_modules == ("RMSNorm",)
    mixed = result.launches[result.launches.index(final) - 1]
    # The workspace is split-reduction workspace to the fits: sized by codegen, not by M, K, N.
    assert result.workspace_bytes(mixed) == result.workspace_bytes(final) > 0


@pytest.mark.slow
def test_codegen_reads_the_gpu_preset():
    result = capture(
        Variant.from_key("reference:rowwise"), SHAPE, device="codegen", gpu=find_gpu("b200")
    )
    assert "multi_processor_count=148, cc=100" in result.code[GraphKind.FWD]


def _kernels(captured) -> list[tuple]:
    """Each launch's name, bytes and Triton source: what a capture generated, run-independent."""
    return [(k.graph, k.name, k.bytes_code, k.bytes_inductor) for k in captured.launches] + [
        line for code in captured.code.values() for line in code.splitlines() if "tl." in line
    ]


@pytest.mark.slow
@requires.torchao
def test_torchao_inductor_patch_does_not_leak_into_later_captures():
    """convert_to_float8_training patches Inductor's Triton min/max codegen process-wide; a
    reference capture after a torchao one must generate what it generates before it."""
    from torch._inductor.codegen.triton import TritonOverrides

    reference, torchao = (
        Variant.from_key("reference:tensorwise"),
        Variant.from_key("torchao:tensorwise"),
    )
    before = capture(reference, SHAPE, device="codegen")
    patched = capture(torchao, SHAPE, device="codegen")
    after = capture(reference, SHAPE, device="codegen")
    assert _kernels(after) == _kernels(before)
    # The patch was live for torchao's own graphs (its tl.where min/max) and is gone now.
    torchao_code = "\n".join(patched.code.values())
    assert "tl.where((" in torchao_code and "triton_helpers.minimum" not in torchao_code
    assert "triton_helpers.minimum" in "\n".join(before.code.values())
    assert "tl.where" not in TritonOverrides.minimum("a", "b")
