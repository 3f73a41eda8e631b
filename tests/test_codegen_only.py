"""CUDA/Triton codegen on this GPU-less machine: stand-ins, and bytes counted three ways."""

import re

import pytest
import torch

from f8roof.models.hardware import find_gpu
from f8roof.models.recipes import Recipe
from f8roof.profiler import codegen_only
from f8roof.profiler.capture import CaptureDevice, CaptureError, GraphKind, KernelKind, capture

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


def test_shapes_float8_gemms_cannot_take_are_refused_before_compiling():
    with pytest.raises(CaptureError, match="K=100 not a multiple of 16"):
        capture(Recipe.from_name("tensorwise"), (64, 100, 128), device="codegen")


@pytest.mark.slow
def test_bf16_baseline_has_only_gemms():
    result = capture(None, (64, 100, 128), device="codegen")
    assert result.recipe == "bf16" and result.overhead_launches == ()
    assert [k.name for k in result.launches] == ["extern_kernels.mm"] * 3
    assert result.disagreements() == ()


@pytest.fixture(scope="module", params=["tensorwise", "tensorwise_delayed", "rowwise"])
def captured(request):
    return capture(Recipe.from_name(request.param), SHAPE, device="codegen")


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
    assert [k.name for k in gemms] == ["extern_kernels._scaled_mm"] * 3
    assert all(k.bytes_scheduler == k.bytes_code for k in gemms)


@pytest.mark.slow
def test_codegen_attributes_every_overhead_kernel_to_roles(captured):
    roles = {k.role for k in captured.overhead_launches}
    assert None not in roles
    assert {"input", "weight", "grad_output"} <= set(",".join(roles).split(","))
    backward_roles = {k.role for k in captured.overhead_launches if k.graph is GraphKind.BWD}
    assert "grad_output" in backward_roles


@pytest.mark.slow
def test_codegen_reads_the_gpu_preset():
    result = capture(Recipe.from_name("rowwise"), SHAPE, device="codegen", gpu=find_gpu("b200"))
    assert "multi_processor_count=148, cc=100" in result.code[GraphKind.FWD]
