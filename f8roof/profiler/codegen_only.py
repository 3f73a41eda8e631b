"""Inductor's CUDA/Triton code for a graph, generated on a machine without a GPU.

Nothing executes: the AOTAutograd forward and backward graphs are captured on CPU with an inner
compiler that only allocates outputs (so shapes like 8192^3 cost no arithmetic), re-traced with
`make_fx` on FakeTensors whose device is `cuda`, and handed to `compile_fx_inner`. Inductor asks
the CUDA runtime and Triton a few questions on the way; `cuda_stand_ins` answers them from a GPU
preset. The output code is taken from `GraphLowering.save_output_code`; loading the compiled
module afterwards fails (there is no CUDA runtime to import), which is expected and ignored.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from unittest import mock

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import proxy
from torch.fx.experimental.proxy_tensor import make_fx

from f8roof.errors import F8RoofError
from f8roof.hardware.presets import GPU, Vendor, find_gpu

CUDA = torch.device("cuda", 0)
TRITON_HASH = "F8ROOF-CODEGEN-ONLY"  # stands in for the hash of a Triton CUDA backend

# sm80/sm90-class values Inductor reads that the GPU presets do not carry (CUDA occupancy
# tables): registers per SM, threads per SM and per block, warp size; AMD's CDNA parts run
# 64-lane wavefronts (what torch.cuda reports as warp_size on ROCm).
_REGS_PER_SM = 65536
_THREADS_PER_SM = 2048
_THREADS_PER_BLOCK = 1024
_WARP_SIZE = {Vendor.NVIDIA: 32, Vendor.AMD: 64}

# What AOTAutograd copies from a forward op onto the backward ops it produced.
_BACKWARD_META_FIELDS = ("fwd_nn_module_stack", "fwd_source_fn_stack")


class InductorInternalsMoved(F8RoofError):
    """An Inductor internal that codegen-only patches is gone or renamed in this torch."""


def _moved(what: str) -> InductorInternalsMoved:
    return InductorInternalsMoved(
        f"codegen-only CUDA needs {what}, which torch {torch.__version__} does not have "
        "(Inductor internals moved); use device='cuda' on a GPU or a torch between 2.11 and 2.13"
    )


def device_properties(gpu: GPU) -> types.SimpleNamespace:
    """What `torch.cuda.get_device_properties` would report on `gpu`."""
    major, minor = gpu.compute_capability
    return types.SimpleNamespace(
        name=f"{gpu.name} (f8roof codegen-only)",
        major=major,
        minor=minor,
        multi_processor_count=gpu.sm_count,
        total_memory=gpu.memory_bytes,
        regs_per_multiprocessor=_REGS_PER_SM,
        max_threads_per_multi_processor=_THREADS_PER_SM,
        max_threads_per_block=_THREADS_PER_BLOCK,
        warp_size=_WARP_SIZE[gpu.vendor],
        gcnArchName="",
    )


@contextlib.contextmanager
def cuda_stand_ins(gpu: GPU) -> Iterator[None]:
    """Every stand-in Inductor's CUDA codegen needs without a GPU; all restored on exit."""
    from torch._dynamo import device_interface
    from torch._inductor import compile_fx, scheduler
    from torch._inductor.runtime.hints import DeviceProperties

    props = device_properties(gpu)
    original_create = _lookup(DeviceProperties, "create")

    def create(cls: type, device: torch.device) -> Any:
        if device.type != "cuda":
            return original_create(device)
        return cls(
            type="cuda",
            index=device.index or 0,
            multi_processor_count=gpu.sm_count,
            cc=props.major * 10 + props.minor,
            major=props.major,
            regs_per_multiprocessor=_REGS_PER_SM,
            max_threads_per_multi_processor=_THREADS_PER_SM,
            max_threads_per_block=_THREADS_PER_BLOCK,
            warp_size=_WARP_SIZE[gpu.vendor],
        )

    patches: list[tuple[object, str, object]] = [
        (torch.utils._triton, "has_triton", lambda: True),
        (torch.utils._triton, "triton_hash_with_backend", lambda: TRITON_HASH),
        (scheduler, "has_triton", lambda: True),
        (DeviceProperties, "create", classmethod(create)),
        # Only warns and skips on GPUs without native bf16 (pre-sm80); presets are sm80+.
        (compile_fx, "_check_triton_bf16_support", lambda graph: None),
        (torch.cuda, "get_device_properties", lambda device=None: props),
        (torch.cuda, "get_device_capability", lambda device=None: (props.major, props.minor)),
        (torch.cuda, "current_device", lambda: 0),
        (torch.cuda, "device_count", lambda: 1),
    ]
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            _lookup(target, name)
            stack.enter_context(mock.patch.object(target, name, value))
        # Inductor's worker-side caches of CUDA device properties must not outlive the stand-ins.
        for cache in ("caching_worker_device_properties", "caching_worker_current_devices"):
            stack.enter_context(mock.patch.dict(_lookup(device_interface, cache)))
        yield


def _lookup(target: object, name: str) -> Any:
    if not hasattr(target, name):
        raise _moved(f"{getattr(target, '__name__', target)}.{name}")
    return getattr(target, name)


def no_compute_inner(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Callable[[list[Any]], list[Any]]:
    """An inner compiler whose graph only allocates its outputs: the step runs, nothing computes.

    Lets AOTAutograd run forward and backward on CPU at any shape, so that both graphs get
    captured without doing the arithmetic (uninitialized outputs are never looked at).
    """
    placeholders = gm.graph.find_nodes(op="placeholder")
    returned = gm.graph.find_nodes(op="output")[0].args[0]
    outputs = [n.meta.get("val") if isinstance(n, torch.fx.Node) else n for n in returned]
    # A non-tensor graph input returned as is (a process group a checkpointed region saves
    # for backward): the real object from the call, not its fake stand-in.
    passed = {
        i: placeholders.index(n)
        for i, n in enumerate(returned)
        if isinstance(n, torch.fx.Node)
        and n.op == "placeholder"
        and not isinstance(outputs[i], torch.Tensor)
    }

    def run(args: list[Any]) -> list[Any]:
        given = {i: args[j] for i, j in passed.items()}
        args.clear()
        return [
            given[i]
            if i in given
            # int(): sizes may be symbols with a hint (checkpointed regions under a fake
            # process group), static once compiled
            else torch.empty_strided(
                [int(d) for d in v.shape], [int(d) for d in v.stride()], dtype=v.dtype
            )
            if isinstance(v, torch.Tensor)
            else v
            for i, v in enumerate(outputs)
        ]

    run._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd's calling convention
    return run


def to_fake_cuda(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """Re-trace a CPU graph (changed in place: devices) on fake CUDA tensors.

    Traced inside the inputs' FakeTensorMode: a tensor the graph creates from nothing (torchao's
    `new_ones(())` for a unit scale) must be fake too, or it becomes a real CUDA op here.
    Node metadata is carried over, so kernels keep descriptive names and the module each op came
    from (`fwd_nn_module_stack` of backward ops included, which make_fx alone drops); names can
    still differ from a GPU compile's, since make_fx records the decomposed ops
    (convert_element_type for _to_copy).
    """
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            raise F8RoofError(
                f"graph holds a constant tensor ({node.target}); "
                "codegen-only cannot move it to CUDA"
            )
        # Factory ops (zeros, full, ...) name their device; everything else follows its inputs.
        node.kwargs = {
            k: CUDA if isinstance(v, torch.device) else v for k, v in node.kwargs.items()
        }
    gm.recompile()
    mode = FakeTensorMode()
    with mode:
        # Non-tensor inputs (a process group as an opaque object, under a fake process
        # group) pass through as they are.
        fake = [
            torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=CUDA)
            if isinstance(t, torch.Tensor)
            else t
            for t in example_inputs
        ]
    copied = [*_lookup(proxy, "_COPY_META_FIELDS"), *_BACKWARD_META_FIELDS]
    with (
        fx_traceback.preserve_node_meta(),
        mock.patch.object(proxy, "_COPY_META_FIELDS", copied),
        mode,
    ):
        cuda_gm = make_fx(torch.fx.Interpreter(gm).run)(*fake)
    # compile_fx sets the output strides contract on the graph it hands to inner_compile.
    old_out, new_out = (g.graph.find_nodes(op="output")[0] for g in (gm, cuda_gm))
    if "user_visible_output_idxs" in old_out.meta:
        new_out.meta["user_visible_output_idxs"] = old_out.meta["user_visible_output_idxs"]
    return cuda_gm, fake


def generate_cuda_code(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    compile_kwargs: dict[str, Any],
    *,
    gpu: GPU | None = None,
) -> str:
    """Inductor's CUDA output code (wrapper + Triton kernels) for one AOTAutograd graph.

    Compile with the caller's `torch._inductor.config` (e.g. `benchmark_kernel`); run inside
    `cuda_stand_ins` here.
    """
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.graph import GraphLowering

    _lookup(GraphLowering, "save_output_code")
    cuda_gm, fake = to_fake_cuda(gm, example_inputs)
    sources: list[str] = []
    # The expected failure below leaves Inductor's fresh cache directory behind with a warning:
    # give it a directory of ours, removed on exit, and silence that one logger meanwhile.
    # One compile thread: worker processes would still be writing kernels into that directory
    # while it is removed ("Directory not empty"); the code generated is the same.
    utils_log = logging.getLogger("torch._inductor.utils")
    level = utils_log.level
    with (
        tempfile.TemporaryDirectory(prefix="f8roof-codegen-") as scratch,
        mock.patch.dict(os.environ, {"TORCHINDUCTOR_CACHE_DIR": scratch}),
        torch._inductor.config.patch(compile_threads=1),
        cuda_stand_ins(gpu or find_gpu("h100")),
        mock.patch.object(GraphLowering, "save_output_code", sources.append),
    ):
        utils_log.setLevel(logging.ERROR)
        try:
            compile_fx_inner(cuda_gm, fake, **compile_kwargs)
        except (ImportError, RuntimeError) as error:
            # Loading the finished module imports the CUDA runtime and fails here; that is
            # expected once the source exists. Without a source, or failing otherwise, this
            # is a real failure.
            if not sources or not is_loading_without_cuda(error):
                raise
        finally:
            utils_log.setLevel(level)
    return sources[-1]


# CUDA refusing to start in a CUDA build of torch on a machine without a GPU (torch.cuda's
# lazy initialisation and the driver's own words)
_NO_CUDA = re.compile(
    r"no NVIDIA driver|No CUDA GPUs are available|CUDA driver initialization failed|"
    r"no CUDA-capable device|Torch not compiled with CUDA",
    re.IGNORECASE,
)


def is_loading_without_cuda(error: BaseException) -> bool:
    """Whether `error` is the expected failure of loading Inductor's generated CUDA module
    without a GPU: the module imports what a CPU build of torch lacks (`torch._C._cuda_*`: an
    ImportError), or CUDA refuses to start (a CUDA build without a GPU); raised as it is or
    wrapped by Inductor (InductorError keeps it as `inner_exception`, raised `from None`)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ImportError) or _NO_CUDA.search(str(current)):
            return True
        current = getattr(current, "inner_exception", None) or current.__cause__
    return False
