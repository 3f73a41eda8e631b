"""Compile a linear's forward+backward with Inductor and account for every byte of every kernel.

Each kernel launch is counted three independent ways, which must agree:
- code: the generated output code, parsed by `triton_code` (the buffers each launch receives);
- scheduler: Inductor's fused scheduler nodes seen through `_post_fusion_custom_pass`
  (`get_read_write_buffer_accesses`), matched to launches by the buffers they write;
- inductor: `kernel_num_gb` from each Triton kernel's `inductor_meta` (Triton only).

The counting rules that reconcile the three (referred to below as 'rule N') are in
`docs/counting.md`.

Gemms (`extern_kernels._scaled_mm`, `mm`) are launches of kind extern_gemm with their operand
bytes; every other launch is attributed to the roles whose tensors it serves and says what it
computes: the fx ops it was lowered from and the module each came from, which tells the linear's
float8 work (amax, scale, cast, layout copies) from its neighbours' (a norm, an activation) and
shows where Inductor fused one into the other (`Work`).

What is compiled is any `graphs.StepFactory` (`capture_step`); `capture` builds a `Variant`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import operator
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any, TypeVar
from unittest import mock

import torch
from torch import nn

from f8roof.errors import F8RoofError
from f8roof.hardware.presets import GPU, Float8Family, find_gpu
from f8roof.profiler import codegen_only, torchao_float8
from f8roof.profiler.graphs import Step, StepFactory, step_factory
from f8roof.profiler.triton_code import (
    GB,
    GEMM_OPS,
    BufferAccess,
    CodeParseError,
    KernelKind,
    OutputCode,
    ParsedLaunch,
    parse_output_code,
)
from f8roof.timing.kernel_classes import KernelClass
from f8roof.traffic.fit import FitError, KernelSample, buffer_polynomial
from f8roof.traffic.recipes import BLOCK_ELEMENTS, ROLES, Role
from f8roof.traffic.variant import Variant, fp8_shape_reason

__all__ = [
    "BufferAccess",
    "Capture",
    "CaptureDevice",
    "CaptureError",
    "GraphKind",
    "KernelClass",
    "KernelKind",
    "KernelLaunch",
    "KernelOp",
    "Work",
    "capture",
    "capture_step",
]

T = TypeVar("T")
GEMM_TARGETS = frozenset(f"aten.{op}" for op in GEMM_OPS)


class GraphKind(str, Enum):
    FWD = "fwd"
    BWD = "bwd"


class CaptureDevice(str, Enum):
    CPU = "cpu"  # C++ kernels, compiled and run here
    CUDA = "cuda"  # Triton kernels, compiled and run on the GPU
    CODEGEN = "codegen"  # Triton kernels generated without a GPU; nothing runs


class CaptureError(F8RoofError):
    """Compiling or accounting a capture failed."""


class Work(str, Enum):
    """What a launch computes, by the modules its ops came from."""

    GEMM = "gemm"
    FLOAT8 = "float8"  # the linear's own non-gemm work only: amax, scale, cast, layout copies
    CONTEXT = "context"  # the neighbours' work only (norm, activation): no float8 work
    FUSED = "fused"  # both: the linear's work fused into a neighbour's kernel


_AMAX_OPS = frozenset({"aten.amax", "aten.max"})
# Ops that compute nothing, and gemms: Inductor lists them among a kernel's origins when it
# inlines a view or realizes a gemm operand's layout there, so they say nothing of whose work
# the kernel does (the sigmoid after the linear reads the gemm output through its views).
_NOT_WORK = frozenset(
    {
        "aten.view",
        "aten.reshape",
        "aten._unsafe_view",
        "aten.permute",
        "aten.t",
        "aten.transpose",
        "aten.expand",
        "aten.squeeze",
        "aten.unsqueeze",
        "aten.slice",
        "aten.select",
        "aten.as_strided",
        "aten.alias",
        "aten.detach",
    }
)
_REDUCING = frozenset({KernelKind.REDUCTION, KernelKind.PERSISTENT_REDUCTION, KernelKind.CPP})


@dataclass(frozen=True)
class KernelOp:
    """One fx op a kernel was lowered from: aten op, output dtype, and its module."""

    op: str  # "aten.amax", "prims.convert_element_type" (overload dropped)
    dtype: str | None  # output dtype ("float8_e4m3fn"); None for a non-tensor output
    module: str | None  # class name of the innermost module it came from; None when unknown
    linear: bool  # inside an nn.Linear-derived module: the linear's own work
    # A forward op (AOTAutograd's partitioner tag); in a backward graph, a recomputed one
    # (activation checkpointing).
    forward: bool = False

    @property
    def is_work(self) -> bool:
        """Whether the op computes something of its module's (see _NOT_WORK)."""
        return self.module is not None and self.op not in _NOT_WORK | GEMM_TARGETS


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch of a compiled graph and the bytes it moves, counted three ways."""

    name: str
    graph: GraphKind
    kind: KernelKind
    reads: tuple[BufferAccess, ...]
    writes: tuple[BufferAccess, ...]
    bytes_code: int
    bytes_scheduler: int | None  # None: no scheduler node produced it (a disagreement)
    bytes_inductor: int | None  # None: not a Triton kernel
    role: str | None  # roles served, comma-separated in ROLES order ("input,weight")
    ops: tuple[KernelOp, ...] = ()  # distinct, in scheduler order
    # What the kernel does to memory, read off its code (triton_code.classify); None only for
    # launches built by hand.
    kernel_class: KernelClass | None = None
    # Buffers it walks along its strided index (triton_code._scattered), by name.
    scattered: frozenset[str] = frozenset()
    reloads: tuple[tuple[str, int], ...] = ()  # buffer -> later loops loading it again
    arithmetic: int = 0  # operations it evaluates (triton_code._arithmetic)

    def __post_init__(self) -> None:
        if self.bytes_code != self.bytes_read + self.bytes_written:
            raise ValueError(
                f"{self.name}: bytes_code {self.bytes_code} is not the sum of its reads and writes"
            )

    @property
    def bytes_read(self) -> int:
        return sum(b.nbytes for b in self.reads)

    @property
    def bytes_written(self) -> int:
        return sum(b.nbytes for b in self.writes)

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def bytes_reread(self) -> int:
        """What its later loops over the reduction load again (a row walked once per statistic)."""
        again = dict(self.reloads)
        return sum(b.nbytes * again[b.name] for b in _unique_reads(self.reads) if b.name in again)

    @property
    def scattered_elements(self) -> int:
        """Elements it loads or stores along a strided index: one memory sector each."""
        return sum(
            math.prod(b.shape) for b in (*self.reads, *self.writes) if b.name in self.scattered
        )

    @property
    def is_gemm(self) -> bool:
        return self.kind is KernelKind.EXTERN_GEMM

    @property
    def work(self) -> Work:
        """Gemm; the linear's float8 work, its neighbours', or both fused in this kernel.
        Ops of no known module (AOTAutograd's bookkeeping) decide nothing: a kernel of only
        those is the linear's, as every non-gemm kernel of a standalone linear is."""
        if self.is_gemm:
            return Work.GEMM
        work = [o for o in self.ops if o.is_work]
        if any(not o.linear for o in work):
            return Work.FUSED if any(o.linear for o in work) else Work.CONTEXT
        return Work.FLOAT8

    @property
    def context_modules(self) -> tuple[str, ...]:
        """The neighbours (module class names) whose work this kernel computes."""
        return tuple(dict.fromkeys(o.module for o in self.ops if o.is_work and not o.linear))

    @property
    def float8_steps(self) -> tuple[str, ...]:
        """The linear's float8 work here: 'amax' (a reduction kernel computing the linear's
        amax), 'cast to <dtype>' per float8 buffer written (x2: a second layout), else 'scale'
        (scale math, or torchao's rescale of a gemm's bf16 output)."""
        if self.work not in (Work.FLOAT8, Work.FUSED):
            return ()
        linear = [o for o in self.ops if o.is_work and o.linear]
        steps = (
            ["amax"] if self.kind in _REDUCING and any(o.op in _AMAX_OPS for o in linear) else []
        )
        casts = Counter(w.dtype for w in self.writes if w.dtype.startswith("float8"))
        steps += [f"cast to {d}" + (f" x{n}" if n > 1 else "") for d, n in sorted(casts.items())]
        return tuple(steps) or ("scale",)

    @property
    def recomputed(self) -> bool:
        """A backward launch computing forward ops again (activation checkpointing): for a
        gemm its gemm op, otherwise any op of work."""
        if self.graph is not GraphKind.BWD:
            return False
        ops = [o for o in self.ops if (o.op in GEMM_TARGETS if self.is_gemm else o.is_work)]
        return any(o.forward for o in ops)

    @property
    def bytes_agree(self) -> bool:
        scheduler_ok = self.bytes_scheduler == self.bytes_code
        inductor_ok = self.bytes_inductor is None or self.bytes_inductor == self.bytes_code
        return scheduler_ok and inductor_ok


@dataclass(frozen=True)
class Capture:
    """Everything one compiled forward+backward launches, in call order (fwd then bwd)."""

    variant: str  # Variant.key, or the label a custom step factory was captured under
    shape: tuple[int, int, int]
    device: CaptureDevice
    code: Mapping[GraphKind, str]
    launches: tuple[KernelLaunch, ...]
    unmatched_scheduler_nodes: tuple[str, ...] = ()  # "fwd:op12": bytes no launch accounts for
    # MX / blockwise: elements per scale block; buffers reshaped into blocks ((M, K/32, 32),
    # (M*K/32, 32), a scale per block (M, K/32)) are a linear's tensors, not workspace
    block_elements: int | None = None

    @property
    def overhead_launches(self) -> tuple[KernelLaunch, ...]:
        """Every launch that is not a gemm: for a standalone linear, the float8 overhead (amax,
        scale, cast, transpose); with a context, its kernels too (the float8 overhead is then
        the difference with the bf16 graph of the same context)."""
        return tuple(k for k in self.launches if not k.is_gemm)

    @property
    def overhead_bytes(self) -> int:
        return sum(k.bytes_code for k in self.overhead_launches)

    def workspace_bytes(self, launch: KernelLaunch) -> int:
        """Bytes of split-reduction workspace a launch touches: intermediate buffers (`bufN`)
        with a dim that is none of M, K, N or 1 (the split count, e.g. (1024,) or
        (1, 2048, 32)), whose size Inductor's heuristics pick (see traffic/fit.py). A split count
        equal to M, K or N by chance is counted as data; the exact fit then reports it."""
        return sum(b.nbytes for b in (*launch.reads, *launch.writes) if self._is_workspace(b))

    def _is_workspace(self, buffer: BufferAccess) -> bool:
        return (
            buffer.name.startswith(("buf", "workspace"))  # workspace_0: rule 9
            and bool(buffer.shape)
            and not set(buffer.shape) <= {1, *self.shape}
            and self._blocked(buffer) is None
        )

    def _blocked(self, buffer: BufferAccess) -> tuple[tuple[int, int], int] | None:
        """A block-scaled capture's buffer holding one role's tensor in blocks, or one value
        per block: (the role's two dims, elements per stored value: 1 or the block), when
        exactly one role's numel matches. None otherwise (and for every other capture)."""
        if self.block_elements is None or not buffer.shape:
            return None
        M, K, N = self.shape
        numel = math.prod(buffer.shape)
        found = [
            (dims, per)
            for dims in ((M, K), (N, K), (M, N))
            for per in (1, self.block_elements)
            if numel * per == dims[0] * dims[1]
        ]
        return found[0] if len(found) == 1 else None

    def _symbolic(self, buffer: BufferAccess) -> tuple[Fraction, tuple[int, ...]]:
        """A buffer as the fits read it: (elements per element of the dims, the dims in M, K,
        N), so its bytes are itemsize x the first x the dims' product. A block-scaled
        capture's tensor in blocks ((K, M/32, 32)) or its scales ((K, M/32)) is its role's two
        dims, at 1 or 1/32 per element; module state such as an amax history (16,) counts its
        fixed length per element of its other dims; any other buffer is its own shape."""
        blocked = None if set(buffer.shape) <= {1, *self.shape} else self._blocked(buffer)
        if blocked is not None:
            dims, per = blocked
            return Fraction(1, per), dims
        if not buffer.name.startswith("buf"):
            fixed = [d for d in buffer.shape if d not in self.shape]
            return Fraction(math.prod(fixed)), tuple(d for d in buffer.shape if d in self.shape)
        return Fraction(1), buffer.shape

    def sample(self, launch: KernelLaunch) -> KernelSample:
        """The launch as the fits see it: bytes, workspace, and the polynomials of its other
        bytes, its scattered elements and its reloaded bytes read off its buffers' shapes
        (None where a dim is ambiguous), each buffer read the same way (`_symbolic`)."""
        workspace = self.workspace_bytes(launch)
        again = dict(launch.reloads)
        buffers, scattered = [], []
        for b in (*launch.reads, *launch.writes):
            if self._is_workspace(b):
                continue
            per, dims = self._symbolic(b)
            buffers.append((b.nbytes // math.prod(b.shape) * per, dims))
            if b.name in launch.scattered:
                scattered.append((per, dims))  # elements, each its own sector
        reread = []
        for b in _unique_reads(launch.reads):
            if b.name in again:
                per, dims = self._symbolic(b)
                reread.append((b.nbytes // math.prod(b.shape) * again[b.name] * per, dims))
        try:
            polynomial = buffer_polynomial(self.shape, buffers)
            scattered_polynomial = buffer_polynomial(self.shape, scattered)
            reread_polynomial = buffer_polynomial(self.shape, reread)
        except FitError:
            polynomial = scattered_polynomial = reread_polynomial = None
        return KernelSample(
            launch.name,
            launch.graph.value,
            launch.kind.value,
            launch.role,
            launch.bytes_total,
            workspace,
            polynomial,
            None if launch.kernel_class is None else launch.kernel_class.value,
            launch.scattered_elements,
            scattered_polynomial,
            launch.bytes_reread,
            reread_polynomial,
            launch.arithmetic,
        )

    def samples(self) -> list[KernelSample]:
        """Every overhead launch as a fit sample, in launch order."""
        return [self.sample(k) for k in self.overhead_launches]

    def disagreements(self) -> tuple[str, ...]:
        """One line per launch whose byte counts differ, and per scheduler node left over."""
        lines = [
            f"{k.graph.value} {k.name}: code {k.bytes_code}, scheduler {k.bytes_scheduler}, "
            f"inductor {k.bytes_inductor}"
            for k in self.launches
            if not k.bytes_agree
        ]
        lines += [f"scheduler node {n} matches no launch" for n in self.unmatched_scheduler_nodes]
        return tuple(lines)


def capture(
    variant: Variant, shape: tuple[int, int, int], *, device: str, gpu: GPU | None = None
) -> Capture:
    """Compile the variant's forward+backward at (M, K, N) and account for every kernel launch.

    device: "cpu" or "cuda" compile and run there; "codegen" generates the CUDA code for `gpu`
    (default h100) on this machine without running it.
    """
    return capture_and_measure(variant, shape, device=device, gpu=gpu, measure=None)[0]


def capture_and_measure(
    variant: Variant,
    shape: tuple[int, int, int],
    *,
    device: str,
    measure: Callable[[Callable[[], None]], T] | None,
    gpu: GPU | None = None,
) -> tuple[Capture, T | None]:
    """`capture`, then `measure(step)` on the very step it compiled (cpu or cuda), so the
    kernels timed are the kernels counted, at the cost of one compile."""
    if variant.recipe is not None and CaptureDevice(device) is not CaptureDevice.CPU:
        reason = fp8_shape_reason(variant.recipe, *shape)
        if reason is not None:
            where = f"{variant.key} at M,K,N={','.join(map(str, shape))} on {device}"
            raise CaptureError(f"cannot capture {where}: {reason}")
    # the float8 encodings of the part codegen targets (MI300X: fnuz; a CUDA device: its own)
    fnuz = (
        CaptureDevice(device) is CaptureDevice.CODEGEN
        and (gpu or find_gpu("h100")).fp8_dtype_family is Float8Family.FNUZ
    )
    captured, measured = capture_step(
        step_factory(variant, shape, fnuz=fnuz),
        shape,
        device=device,
        key=variant.key,
        gpu=gpu,
        measure=measure,
    )
    if variant.recipe is not None and variant.recipe.is_block_scaled:
        block = BLOCK_ELEMENTS[variant.recipe.granularity]
        captured = dataclasses.replace(captured, block_elements=block)
    return captured, measured


@contextlib.contextmanager
def compiling(where: str) -> Iterator[None]:
    """Compile from scratch (a dynamo cache hit, same shapes and a new module, or the recompile
    limit would skip Inductor and leave nothing to capture), and turn a failure into one
    CaptureError line naming what was compiled (compile errors run to pages)."""
    torch._dynamo.reset()
    try:
        yield
    except F8RoofError:
        raise
    except Exception as e:
        first = next(iter(str(e).strip().splitlines()), type(e).__name__)
        raise CaptureError(f"compiling {where} failed: {type(e).__name__}: {first}") from e
    finally:
        torch._dynamo.reset()


def capture_step(
    factory: StepFactory,
    shape: tuple[int, int, int],
    *,
    device: str,
    key: str,
    gpu: GPU | None = None,
    measure: Callable[[Callable[[], None]], T] | None = None,
) -> tuple[Capture, T | None]:
    """Capture any step `factory` builds (a user's own float8 module, say), as `capture` does a
    variant's; `key` labels it. `shape` is (M, K, N) of its linear: the fits read bytes off
    buffer shapes in those dims.

    Roles: every step input is `input`, grad_output is `grad_output`; a parameter ending in
    `weight` of an nn.Linear-derived module (torchao's and f8roof's Float8Linear included) is
    `weight`, as are buffers of such a module named `weight_...` (likewise `input_...`,
    `grad_output_...`: f8roof's delayed scaling state). Other parameters (a norm's weight)
    serve no role.
    """
    target = CaptureDevice(device)
    where = f"{key} at M,K,N={','.join(map(str, shape))} on {target.value}"
    if measure is not None and target is CaptureDevice.CODEGEN:
        raise CaptureError("codegen-only code cannot be measured: nothing runs")
    recorder = _Recorder()
    measured = None
    with compiling(where), recording(recorder):
        if target is CaptureDevice.CODEGEN:
            _run_codegen(factory, recorder, gpu=gpu or find_gpu("h100"))
        else:
            step = _run_compiled(factory, recorder, device=target.value)
            if measure is not None:
                measured = measure(step)
    try:
        return recorder.build(key=key, shape=shape, device=target), measured
    except CodeParseError as e:
        raise CaptureError(f"reading the code of {where}: {e}") from e


@contextlib.contextmanager
def recording(recorder: _Recorder) -> Iterator[None]:
    """Inductor set up to hand `recorder` every graph, lowering and scheduler node; quiet."""
    # C++ kernels show in profiler traces only when compiled with kernel profiling on.
    # benchmark_kernel makes every compiled module print its path: keep the terminal clean.
    noise = io.StringIO()
    with (
        contextlib.redirect_stdout(noise),
        contextlib.redirect_stderr(noise),
        warnings.catch_warnings(),
        torchao_float8.inductor_patch_scope(),
        recorder.recording_lowering(),
        torch._inductor.config.patch(
            force_disable_caches=True,
            benchmark_kernel=True,
            _post_fusion_custom_pass=recorder.post_fusion,
            **{"cpp.enable_kernel_profile": True},
        ),
    ):
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        yield


# ---- running the step -----------------------------------------------------------------------


def _compile(step: Step, recorder: _Recorder, inner: Callable[..., Any]) -> Callable[[], None]:
    """The compiled step, recording its graphs; gradients are reset to None before each call,
    as `zero_grad(set_to_none=True)` does, so backward writes them (no accumulation kernel)."""
    compiled = torch.compile(
        step.module, fullgraph=True, dynamic=False, backend=recorder.backend(step, inner)
    )

    def run() -> None:
        for tensor in (*step.inputs, *step.module.parameters()):
            tensor.grad = None
        compiled(*step.inputs).backward(step.grad_output)

    return run


def _run_compiled(factory: StepFactory, recorder: _Recorder, *, device: str) -> Callable[[], None]:
    """Compile and run the step once, recording its code; return the compiled step."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.utils import run_and_get_code

    run = _compile(factory(device=device, initialize=True), recorder, compile_fx_inner)
    _, sources = run_and_get_code(run)
    if len(sources) != len(recorder.graphs):
        raise CaptureError(f"got {len(sources)} output codes for {len(recorder.graphs)} graphs")
    for graph, source in zip(recorder.graphs, sources):
        recorder.code[graph.kind] = source
    return run


def _run_codegen(factory: StepFactory, recorder: _Recorder, *, gpu: GPU) -> None:
    # Capture both AOTAutograd graphs on CPU without computing, then generate CUDA code.
    step = factory(device="cpu", initialize=False)
    _compile(step, recorder, codegen_only.no_compute_inner)()
    for graph in recorder.graphs:
        with recorder.compiling(graph):
            recorder.code[graph.kind] = codegen_only.generate_cuda_code(
                graph.module, graph.example_inputs, graph.compile_kwargs, gpu=gpu
            )


# ---- recording graphs and scheduler nodes ---------------------------------------------------


Roles = frozenset[Role]


@dataclass
class _Graph:
    kind: GraphKind
    module: torch.fx.GraphModule
    example_inputs: Sequence[Any]
    compile_kwargs: dict[str, Any]
    input_roles: tuple[Roles, ...]  # per placeholder, in order


@dataclass(frozen=True)
class _SchedulerNode:
    """What one scheduler node reads and writes (after rules 3 and 4) and whose data it is."""

    name: str
    reads: Mapping[str, int]
    writes: Mapping[str, int]
    fused_away: Mapping[str, int]  # outputs the scheduler expects never stored (rule 5)
    views: Mapping[str, str]  # output view -> buffer it lives in
    sources: tuple[str, ...]  # every buffer whose data it reads (for roles)
    ops: tuple[KernelOp, ...] = ()  # the fx ops it computes (see _computed_origins)
    parts: tuple[_SchedulerNode, ...] = ()  # a fused node's own nodes (rule 9 splits them)


@dataclass
class _Recorder:
    """Collects, per graph: the fx graph, its inputs' roles, output code and scheduler nodes."""

    graphs: list[_Graph] = field(default_factory=list)
    code: dict[GraphKind, str] = field(default_factory=dict)
    nodes: dict[GraphKind, list[_SchedulerNode]] = field(default_factory=dict)
    removed: dict[GraphKind, set[str]] = field(default_factory=dict)
    schedulers: dict[GraphKind, Any] = field(default_factory=dict)  # their removed_ops: rule 9
    reuses: dict[GraphKind, dict[str, str]] = field(default_factory=dict)
    # bytes per element of every buffer Inductor lowered, by name: the wrapper code prints no
    # dtype for an op's outputs (profiler/memory/buffers.py's `wrapper_buffers`)
    itemsizes: dict[GraphKind, dict[str, int]] = field(default_factory=dict)
    input_roles: dict[GraphKind, dict[str, Roles]] = field(default_factory=dict)
    current: _Graph | None = None
    forward_roles: dict[str, Roles] = field(default_factory=dict)  # fwd node name -> roles
    # Every fx node's lowered IR value (realized in place later): Inductor's own map
    # (GraphLowering.env) drops values after their last use, before the scheduler runs.
    lowered: dict[torch.fx.Node, Any] = field(default_factory=dict)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Recorder:
        # Inductor deep-copies its config (which holds `post_fusion`) into every graph's repro
        # string; the recording (fake tensors, graphs) must be shared, not copied.
        return self

    def backend(self, step: Step, inner: Callable[..., Any]) -> Callable[..., Any]:
        """A dynamo backend: Inductor's compile_fx with `inner` recording each graph first."""
        from torch._inductor.compile_fx import compile_fx

        by_tensor = {id(t): Role.INPUT for t in step.inputs}
        by_tensor |= {id(t): role for t, role in _state_roles(step.module)}

        dynamo_roles: list[Roles] = []  # per dynamo graph input, filled by dynamo_backend

        def record(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
            kind = GraphKind.BWD if kwargs.get("is_backward") else GraphKind.FWD
            roles = self._input_roles(kind, gm, dynamo_roles)
            if kind is GraphKind.FWD:
                self.forward_roles = {n.name: r for n, r in _propagate(gm.graph, roles).items()}
            graph = _Graph(kind, gm, example_inputs, kwargs, roles)
            self.graphs.append(graph)
            with self.compiling(graph):
                return inner(gm, example_inputs, **kwargs)

        def dynamo_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
            dynamo_roles[:] = [
                frozenset({by_tensor[id(t)]}) if id(t) in by_tensor else frozenset()
                for t in example_inputs
            ]
            return compile_fx(gm, example_inputs, inner_compile=record)

        return dynamo_backend

    def _input_roles(
        self, kind: GraphKind, gm: torch.fx.GraphModule, dynamo_roles: Sequence[Roles]
    ) -> tuple[Roles, ...]:
        placeholders = gm.graph.find_nodes(op="placeholder")
        if kind is GraphKind.FWD:
            # AOTAutograd's forward takes dynamo's graph inputs in dynamo's order.
            return tuple(
                dynamo_roles[i] if i < len(dynamo_roles) else frozenset()
                for i in range(len(placeholders))
            )
        # Backward placeholders are named after the forward nodes they save, or tangents_i.
        return tuple(
            frozenset({Role.GRAD_OUTPUT})
            if p.name.startswith("tangents")
            else self.forward_roles.get(p.name, frozenset())
            for p in placeholders
        )

    @contextlib.contextmanager
    def recording_lowering(self) -> Iterator[None]:
        """Record every fx node's lowered value (`lowered`) while Inductor lowers graphs."""
        from torch._inductor.graph import GraphLowering

        run_node = GraphLowering.run_node

        def recording(graph: GraphLowering, node: torch.fx.Node) -> object:
            self.lowered[node] = value = run_node(graph, node)
            return value

        with mock.patch.object(GraphLowering, "run_node", recording):
            yield

    @contextlib.contextmanager
    def compiling(self, graph: _Graph) -> Iterator[None]:
        self.current = graph
        try:
            yield
        finally:
            self.current = None

    def post_fusion(self, snodes: list[Any]) -> list[Any]:
        """`_post_fusion_custom_pass`: summarize every fused node, change nothing."""
        from torch._inductor.virtualized import V

        graph = self.current
        if graph is None:
            raise CaptureError("Inductor scheduled a graph this capture did not record")
        placeholders = V.graph.graph.find_nodes(op="placeholder")
        self.input_roles[graph.kind] = dict(zip((p.name for p in placeholders), graph.input_roles))
        summaries = (_summarize(s, self.lowered) for s in snodes)
        self.nodes[graph.kind] = [s for s in summaries if s is not None]
        # Codegen fills these after the pass (rules 5, 8, 9): keep the live ones, read them later.
        self.removed[graph.kind] = V.graph.removed_buffers
        self.reuses[graph.kind] = V.graph.wrapper_code.reuses
        self.itemsizes[graph.kind] = _itemsizes(V.graph.buffers)
        # The scheduler creates `removed_ops` after this pass: keep the scheduler.
        self.schedulers[graph.kind] = snodes[0].scheduler if snodes else None
        return snodes

    def build(self, *, key: str, shape: tuple[int, int, int], device: CaptureDevice) -> Capture:
        launches: list[KernelLaunch] = []
        unmatched: list[str] = []
        for graph in self.graphs:
            parsed = parse_output_code(self.code[graph.kind])
            scheduler = self.schedulers.get(graph.kind)
            nodes = _split_rewritten(
                self.nodes.get(graph.kind, []), getattr(scheduler, "removed_ops", set())
            )
            roles = _data_roles(nodes, self.input_roles.get(graph.kind, {}))
            groups, left = _match(parsed, nodes)
            # A collective's node is no launch (see triton_code.ParsedCollective).
            moved = {c.output.name for c in parsed.collectives}
            left = [n for n in left if not (set(n.writes) | set(n.fused_away)) <= moved]
            removed = self.removed.get(graph.kind, set())
            reuses = self.reuses.get(graph.kind, {})
            launches += [
                _launch(graph.kind, p, group, removed, reuses, roles)
                for p, group in zip(parsed.launches, groups)
            ]
            unmatched += [f"{graph.kind.value}:{n.name}" for n in left]
        return Capture(key, shape, device, dict(self.code), tuple(launches), tuple(unmatched))


def _split_rewritten(
    nodes: Sequence[_SchedulerNode], removed_ops: set[str]
) -> list[_SchedulerNode]:
    """Fused nodes holding an op codegen replaced (rule 9), taken apart into their nodes."""
    return [
        part
        for node in nodes
        for part in (node.parts if any(p.name in removed_ops for p in node.parts) else (node,))
    ]


def _state_roles(module: nn.Module) -> Iterator[tuple[torch.Tensor, Role]]:
    """Parameters and buffers of nn.Linear-derived modules with a role (see `capture_step`)."""
    for linear in (m for m in module.modules() if isinstance(m, nn.Linear)):
        state = (
            *linear.named_parameters(recurse=False),
            *linear.named_buffers(recurse=False),
        )
        for name, tensor in state:
            if name.endswith("weight"):
                yield tensor, Role.WEIGHT
            # f8roof's Float8Linear names its scaling state after the role: input_amax_history
            role = next((r for r in ROLES if name.startswith(r.value + "_")), None)
            if role is not None:
                yield tensor, role


def _propagate(graph: torch.fx.Graph, input_roles: Sequence[Roles]) -> dict[torch.fx.Node, Roles]:
    """Roles of every node: the union of its inputs' roles, placeholders given."""
    roles: dict[torch.fx.Node, Roles] = dict(zip(graph.find_nodes(op="placeholder"), input_roles))
    for node in graph.nodes:
        if node not in roles:
            roles[node] = frozenset().union(*(roles[i] for i in node.all_input_nodes))
    return roles


def _itemsizes(buffers: Sequence[Any]) -> dict[str, int]:
    """Bytes per element of each lowered buffer with a layout of its own (not an op returning
    several outputs, whose getitems are buffers of their own, nor one returning nothing)."""
    from torch._inductor import ir

    specs = {buffer.get_name(): buffer.get_output_spec() for buffer in buffers}
    return {
        name: spec.dtype.itemsize for name, spec in specs.items() if isinstance(spec, ir.Layout)
    }


def _summarize(snode: Any, lowered: Mapping[torch.fx.Node, Any]) -> _SchedulerNode | None:
    """A scheduler node's accesses after rules 3 and 4 (runs inside Inductor: V.graph is set)."""
    from torch._inductor import dependencies, ir, scheduler

    if isinstance(snode, scheduler.NopKernelSchedulerNode):
        return None
    if isinstance(snode.node, _collective_ir()):
        return None  # a collective or its wait: network traffic, kept apart (ParsedCollective)
    accessed = snode.get_read_write_buffer_accesses(include_reads=True, include_writes=True)
    outputs = snode.get_outputs()
    mutated = {b.get_name(): b.get_mutations()[0] for b in outputs if b.get_mutations()}
    write_deps = {d.name for d in snode.read_writes.writes}
    reads = {
        d.name: max(accessed[d.name], _buffer_bytes(d.name))  # rule 4
        for d in snode.read_writes.reads
        if d.name in accessed
        and d.name not in write_deps
        and not isinstance(d, dependencies.WeakDep)  # rule 3
        and not (isinstance(d, dependencies.StarDep) and d.name in mutated.values())
    }
    writes = {mutated.get(name, name): accessed[name] for name in write_deps if name in accessed}
    if not isinstance(snode, scheduler.SchedulerNode):  # rule 10
        writes = {name: max(nbytes, _buffer_bytes(name)) for name, nbytes in writes.items()}
    fused_away = {
        b.get_name(): _buffer_bytes(b.get_name())
        for b in outputs
        if b.get_name() not in accessed and b.get_name() not in mutated
    }
    views = {
        b.get_name(): b.node.layout.view.get_name()
        for b in outputs
        if isinstance(b.node.layout, ir.NonOwningLayout)
    }
    sources = tuple(
        d.name for d in snode.read_writes.reads if not isinstance(d, dependencies.WeakDep)
    )
    computed = (o for n in snode.get_nodes() for o in _computed_origins(n, lowered))
    ops = tuple(dict.fromkeys(op for op in map(_kernel_op, computed) if op is not None))
    parts = ()
    if isinstance(snode, scheduler.FusedSchedulerNode):
        parts = tuple(p for p in (_summarize(n, lowered) for n in snode.snodes) if p is not None)
    return _SchedulerNode(snode.get_name(), reads, writes, fused_away, views, sources, ops, parts)


def _collective_ir() -> tuple[type, ...]:
    from torch._inductor import ir

    return tuple(
        getattr(ir, name) for name in ("_CollectiveKernel", "_WaitKernel") if hasattr(ir, name)
    )


def _computed_origins(snode: Any, lowered: Mapping[torch.fx.Node, Any]) -> list[torch.fx.Node]:
    """The fx nodes one (unfused) scheduler node computes: its origins that its reads can feed.

    Origins alone overstate: IR made while lowering a gemm (a layout copy, a realized operand)
    is credited with the origins of every operand, so the weight's cast would list the
    LayerNorm that feeds the input. A node is computed here when each of its inputs is either
    read from memory by this node (its lowered value lives in a buffer the node reads) or
    computed here; a reduction also when the node reads its partial results (the second
    stage of a split reduction, whose workspace holds no fx node's value).
    """
    from torch._inductor.virtualized import V

    if snode.node is None:
        return []
    origins = set(snode.node.get_origins())
    reads = {d.name for d in snode.read_writes.reads}
    partial = {o for name in reads if name in V.graph.name_to_buffer for o in _origins_of(name)}
    fed: dict[torch.fx.Node, bool] = {}

    def computed(node: torch.fx.Node) -> bool:
        if _is_reduction(node) and node in partial:
            return True
        return all(map(is_fed, node.all_input_nodes))

    def is_fed(node: torch.fx.Node) -> bool:
        if node not in fed:
            inline = node in origins or node.target is operator.getitem
            fed[node] = _buffer_name(lowered.get(node)) in reads or (inline and computed(node))
        return fed[node]

    return [o for o in snode.node.get_origins() if computed(o)]


def _origins_of(name: str) -> set[torch.fx.Node]:
    from torch._inductor.virtualized import V

    buffer = V.graph.name_to_buffer[name]
    # A MutationOutput (a collective's wait mutates its input) has no origins of its own.
    return set(buffer.get_origins()) if hasattr(buffer, "get_origins") else set()


def _is_reduction(node: torch.fx.Node) -> bool:
    return (
        isinstance(node.target, torch._ops.OpOverload) and torch.Tag.reduction in node.target.tags
    )


def _buffer_name(value: Any) -> str | None:
    """The buffer an fx node's lowered value lives in; None while it is computed inline."""
    from torch._inductor import ir

    if not isinstance(value, ir.IRNode):
        return None
    try:
        return value.get_name()
    except (NotImplementedError, AttributeError):
        return None


def _kernel_op(node: torch.fx.Node) -> KernelOp | None:
    """An fx node as a KernelOp: its module from `nn_module_stack` (forward ops) or
    `fwd_nn_module_stack` (backward ops: the forward op they differentiate)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    classes = [cls for _, cls in stack.values() if isinstance(cls, type)]
    value = node.meta.get("val")
    dtype = str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None
    return KernelOp(
        op=str(node.target.overloadpacket),
        dtype=dtype,
        module=classes[-1].__name__ if classes else None,
        linear=any(issubclass(cls, nn.Linear) for cls in classes),
        forward=node.meta.get("partitioner_tag") == "is_forward",
    )


def _buffer_bytes(name: str) -> int:
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    buf = V.graph.get_buffer(name)
    if type(buf.layout).__name__ in ("NoneLayout", "MultiOutputLayout"):
        # A collective's wait names the collective's output; a fallback returning several
        # tensors (SDPA) holds them in MultiOutput buffers: no storage of their own.
        return 0
    return int(buf.get_numel()) * get_dtype_size(buf.get_dtype())  # static shapes: an Integer


def _match(
    parsed: OutputCode, nodes: Sequence[_SchedulerNode]
) -> tuple[list[list[_SchedulerNode]], list[_SchedulerNode]]:
    """Scheduler nodes per launch, by the buffers they write.

    Not by position: Inductor may reorder nodes after the pass (a C++ kernel group took a node
    scheduled after the gemm that follows it). A buffer written by two launches (a graph input
    mutated twice) goes to the first at or after the previous node's launch.
    """
    groups: list[list[_SchedulerNode]] = [[] for _ in parsed.launches]
    left: list[_SchedulerNode] = []
    previous = 0
    for node in nodes:
        names = set(node.writes) | set(node.fused_away)
        hits = [
            i for i, launch in enumerate(parsed.launches) if names & {w.name for w in launch.writes}
        ]
        if not hits:
            left.append(node)
            continue
        previous = next((i for i in hits if i >= previous), hits[0])
        groups[previous].append(node)
    return groups, left


def _scheduler_bytes(
    group: Sequence[_SchedulerNode], removed: set[str], reuses: Mapping[str, str]
) -> int:
    """Bytes of one launch from its scheduler nodes, applying rules 2, 5, 8 and 9 (a buffer
    codegen removed is neither written nor read)."""

    def storage(name: str) -> str:
        while name in reuses:
            name = reuses[name]
        return name

    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    produced: set[str] = set()
    for node in group:
        for name, nbytes in node.reads.items():
            if name not in produced and name not in removed:
                reads[name] = max(reads.get(name, 0), nbytes)
        stored = {n: b for n, b in (*node.writes.items(), *node.fused_away.items())}
        for name, nbytes in ((n, b) for n, b in stored.items() if n not in removed):
            writes[storage(name)] = max(writes.get(storage(name), 0), nbytes)
            produced |= {name, node.views.get(name, name)}
    return sum(reads.values()) + sum(writes.values())


def _data_roles(
    nodes: Sequence[_SchedulerNode], input_roles: Mapping[str, Roles]
) -> dict[str, Roles]:
    """Roles of each node's data, by name: the union of the roles of the buffers it reads.

    Data flow, not fx origins: a layout copy made for a gemm has the gemm among its origins,
    which would credit it to the gemm's other operand as well.
    """
    known = dict(input_roles)
    roles_of_node: dict[str, Roles] = {}
    for node in nodes:  # in a topological order
        roles = frozenset().union(*(known.get(name, frozenset()) for name in node.sources))
        roles_of_node[node.name] = roles
        for name in (*node.writes, *node.fused_away):
            for written in {name, node.views.get(name, name)}:
                known[written] = known.get(written, frozenset()) | roles
    return roles_of_node


def _unique_reads(reads):
    return {b.name: b for b in reads}.values()


def _launch(
    kind: GraphKind,
    parsed: ParsedLaunch,
    group: Sequence[_SchedulerNode],
    removed: set[str],
    reuses: Mapping[str, str],
    node_roles: Mapping[str, Roles],
) -> KernelLaunch:
    roles = frozenset().union(*(node_roles[n.name] for n in group))
    ops = tuple(dict.fromkeys(op for n in group for op in n.ops))
    bytes_inductor = None
    if parsed.num_gb is not None:  # rules 6 to 9
        bytes_inductor = (
            round(parsed.num_gb * GB)
            + parsed.bytes_not_iterated
            + parsed.bytes_workspace
            - parsed.bytes_unwritten_reads
            + parsed.bytes_from_collectives
        )
    return KernelLaunch(
        name=parsed.name,
        graph=kind,
        kind=parsed.kind,
        reads=parsed.reads,
        writes=parsed.writes,
        bytes_code=parsed.bytes_total,
        bytes_scheduler=(
            _scheduler_bytes(group, removed, reuses) + parsed.bytes_workspace if group else None
        ),
        bytes_inductor=bytes_inductor,
        role=",".join(r.value for r in ROLES if r in roles) or None,
        ops=ops,
        kernel_class=parsed.kernel_class,
        scattered=parsed.scattered,
        reloads=parsed.reloads,
        arithmetic=parsed.arithmetic,
    )
