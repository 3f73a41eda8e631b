"""Compile a linear's forward+backward with Inductor and account for every byte of every kernel.

Each kernel launch is counted three independent ways, which must agree:
- code: the generated output code, parsed by `triton_code` (the buffers each launch receives);
- scheduler: Inductor's fused scheduler nodes seen through `_post_fusion_custom_pass`
  (`get_read_write_buffer_accesses`), matched to launches by the buffers they write;
- inductor: `kernel_num_gb` from each Triton kernel's `inductor_meta` (Triton only).

Counting rules: the one place where the three methods are reconciled.
1. Unit: every buffer a kernel touches counts once, at the size of the view it receives;
   in_ptr read, out_ptr written, in_out_ptr read and written (all three methods' convention).
2. A kernel reading back a buffer it wrote itself moves no read bytes for it. Code: a read of
   storage that neither is a graph input nor was written by an earlier launch (C++ kernels run
   several loop nests in one function; a concat writes through views of its output).
   Scheduler: a read of a buffer, or of the buffer a view lives in, written by an earlier node
   of the same launch (as a FusedSchedulerNode already does inside itself).
3. Scheduler dependencies that move no data are dropped: WeakDep (ordering only) and the
   StarDep a mutation node holds on the buffer it mutates (that is its write). A mutation's
   output is named after the buffer it mutates, as the kernel receives that buffer.
4. Scheduler: a buffer read in part (the amax history's `[:-1]` slice) counts whole, as the
   kernel receives a pointer to the whole view and the code method sees only that pointer.
5. Scheduler: a fused intermediate the scheduler expects to stay in registers but the codegen
   kept in memory (C++ outer-loop fusion writes per-row amax to a buffer and reads it back)
   counts as written: what codegen removed is `V.graph.removed_buffers`, known after codegen.
6. inductor: `kernel_num_gb` is bytes / 1e9 printed with repr (torch 2.11-2.13 do not round
   it; only the benchmark harness prints it to 3 decimals), so round(kernel_num_gb * 1e9)
   recovers the integer: the rounding is the double's, under 0.5 byte below 1e15 bytes, and
   the comparison is exact.
7. inductor: for a view bigger than the kernel's iteration space (the amax history's `[:-1]`
   slice), kernel_num_gb counts only the iterated elements; the bytes beyond, computed from
   the kernel body (`xnumel`, `r0_numel`, distinct `tl.load` indices), are added back.

Gemms (`extern_kernels._scaled_mm`, `mm`) are launches of kind extern_gemm with their operand
bytes; every other launch is float8 overhead, attributed to the roles whose tensors it serves.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import torch
from torch import nn

from f8roof.errors import F8RoofError
from f8roof.models.fit import FitError, KernelSample, buffer_polynomial
from f8roof.models.hardware import GPU, find_gpu
from f8roof.models.recipes import ROLES, Recipe, Role
from f8roof.models.variant import fp8_shape_reason
from f8roof.profiler import codegen_only
from f8roof.profiler.float8_linear import make_linear
from f8roof.profiler.triton_code import (
    GB,
    BufferAccess,
    KernelKind,
    OutputCode,
    ParsedLaunch,
    parse_output_code,
)

__all__ = [
    "BufferAccess",
    "Capture",
    "CaptureDevice",
    "CaptureError",
    "GraphKind",
    "KernelKind",
    "KernelLaunch",
    "capture",
]

BF16_BASELINE = "bf16"  # Capture.recipe when no recipe is given
T = TypeVar("T")


class GraphKind(str, Enum):
    FWD = "fwd"
    BWD = "bwd"


class CaptureDevice(str, Enum):
    CPU = "cpu"  # C++ kernels, compiled and run here
    CUDA = "cuda"  # Triton kernels, compiled and run on the GPU
    CODEGEN = "codegen"  # Triton kernels generated without a GPU; nothing runs


class CaptureError(F8RoofError):
    """Compiling or accounting a capture failed."""


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
    def is_gemm(self) -> bool:
        return self.kind is KernelKind.EXTERN_GEMM

    @property
    def bytes_agree(self) -> bool:
        scheduler_ok = self.bytes_scheduler == self.bytes_code
        inductor_ok = self.bytes_inductor is None or self.bytes_inductor == self.bytes_code
        return scheduler_ok and inductor_ok


@dataclass(frozen=True)
class Capture:
    """Everything one compiled forward+backward launches, in call order (fwd then bwd)."""

    recipe: str
    shape: tuple[int, int, int]
    device: CaptureDevice
    code: Mapping[GraphKind, str]
    launches: tuple[KernelLaunch, ...]
    unmatched_scheduler_nodes: tuple[str, ...] = ()  # "fwd:op12": bytes no launch accounts for

    @property
    def overhead_launches(self) -> tuple[KernelLaunch, ...]:
        """Every launch that is not a gemm: the float8 overhead (amax, scale, cast, transpose)."""
        return tuple(k for k in self.launches if not k.is_gemm)

    @property
    def overhead_bytes(self) -> int:
        return sum(k.bytes_code for k in self.overhead_launches)

    def workspace_bytes(self, launch: KernelLaunch) -> int:
        """Bytes of split-reduction workspace a launch touches: intermediate buffers (`bufN`)
        with a dim that is none of M, K, N or 1 (the split count, e.g. (1024,) or
        (1, 2048, 32)), whose size Inductor's heuristics pick (see models/fit.py). A split count
        equal to M, K or N by chance is counted as data; the exact fit then reports it."""
        return sum(b.nbytes for b in (*launch.reads, *launch.writes) if self._is_workspace(b))

    def _is_workspace(self, buffer: BufferAccess) -> bool:
        return (
            buffer.name.startswith("buf")
            and bool(buffer.shape)
            and not set(buffer.shape) <= {1, *self.shape}
        )

    def sample(self, launch: KernelLaunch) -> KernelSample:
        """The launch as the fits see it: bytes, workspace, and the polynomial of its other
        bytes read off its buffers' shapes (None where a dim is ambiguous)."""
        workspace = self.workspace_bytes(launch)
        sizes = set(self.shape)
        buffers = []
        for b in (*launch.reads, *launch.writes):
            if self._is_workspace(b):
                continue
            itemsize = b.nbytes // math.prod(b.shape)
            if not b.name.startswith("buf"):
                # Module state such as an amax history (16,): a fixed length, not a size.
                fixed = [d for d in b.shape if d not in sizes]
                itemsize *= math.prod(fixed)
                buffers.append((itemsize, tuple(d for d in b.shape if d in sizes)))
            else:
                buffers.append((itemsize, b.shape))
        try:
            polynomial = buffer_polynomial(self.shape, buffers)
        except FitError:
            polynomial = None
        return KernelSample(
            launch.name,
            launch.graph.value,
            launch.kind.value,
            launch.role,
            launch.bytes_total,
            workspace,
            polynomial,
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
    recipe: Recipe | None, shape: tuple[int, int, int], *, device: str, gpu: GPU | None = None
) -> Capture:
    """Compile `y = linear(x); y.backward(grad_output)` and account for every kernel launch.

    device: "cpu" or "cuda" compile and run there; "codegen" generates the CUDA code for `gpu`
    (default h100) on this machine without running it.
    """
    return capture_and_measure(recipe, shape, device=device, gpu=gpu, measure=None)[0]


def capture_and_measure(
    recipe: Recipe | None,
    shape: tuple[int, int, int],
    *,
    device: str,
    measure: Callable[[Callable[[], None]], T] | None,
    gpu: GPU | None = None,
) -> tuple[Capture, T | None]:
    """`capture`, then `measure(step)` on the very step it compiled (cpu or cuda), so the
    kernels timed are the kernels counted, at the cost of one compile."""
    target = CaptureDevice(device)
    M, K, N = shape
    label = recipe.name if recipe is not None else BF16_BASELINE
    where = f"{label} at M,K,N={M},{K},{N} on {target.value}"
    if recipe is not None and target is not CaptureDevice.CPU:
        reason = fp8_shape_reason(recipe, M, K, N)
        if reason is not None:
            raise CaptureError(f"cannot capture {where}: {reason}")
    if measure is not None and target is CaptureDevice.CODEGEN:
        raise CaptureError("codegen-only code cannot be measured: nothing runs")
    recorder = _Recorder()
    measured = None
    # Each capture compiles from scratch: a dynamo cache hit (same shapes, new module) or the
    # recompile limit would skip Inductor and leave nothing to capture.
    torch._dynamo.reset()
    try:
        # C++ kernels show in profiler traces only when compiled with kernel profiling on.
        # benchmark_kernel makes every compiled module print its path: keep the terminal clean.
        noise = io.StringIO()
        with (
            contextlib.redirect_stdout(noise),
            contextlib.redirect_stderr(noise),
            warnings.catch_warnings(),
            torch._inductor.config.patch(
                force_disable_caches=True,
                benchmark_kernel=True,
                _post_fusion_custom_pass=recorder.post_fusion,
                **{"cpp.enable_kernel_profile": True},
            ),
        ):
            warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
            if target is CaptureDevice.CODEGEN:
                _run_codegen(recipe, shape, recorder, gpu=gpu or find_gpu("h100"))
            else:
                step = _run_compiled(recipe, shape, recorder, device=target.value)
                if measure is not None:
                    measured = measure(step)
    except F8RoofError:
        raise
    except Exception as e:
        first = next(iter(str(e).strip().splitlines()), type(e).__name__)
        raise CaptureError(f"compiling {where} failed: {type(e).__name__}: {first}") from e
    finally:
        torch._dynamo.reset()
    return recorder.build(label=label, shape=shape, device=target), measured


# ---- running the step -----------------------------------------------------------------------


def _step_inputs(
    recipe: Recipe | None, shape: tuple[int, int, int], *, device: str, random: bool
) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The linear, input and grad_output; uninitialized (no init cost) unless `random`."""
    M, K, N = shape
    if random:
        module = make_linear(recipe, in_features=K, out_features=N, device=device)
    else:
        module = make_linear(recipe, in_features=K, out_features=N, device="meta")
        module = module.to_empty(device=device)
    make = torch.randn if random else torch.empty
    x = make(M, K, device=device, dtype=torch.bfloat16).requires_grad_(True)
    grad_output = make(M, N, device=device, dtype=torch.bfloat16)
    return module, x, grad_output


def _run_compiled(
    recipe: Recipe | None, shape: tuple[int, int, int], recorder: _Recorder, *, device: str
) -> Callable[[], None]:
    """Compile and run the step once, recording its code; return the compiled step."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.utils import run_and_get_code

    module, x, grad_output = _step_inputs(recipe, shape, device=device, random=True)
    compiled = torch.compile(
        module, fullgraph=True, dynamic=False, backend=recorder.backend(module, x, compile_fx_inner)
    )

    def step() -> None:
        x.grad = None
        for parameter in module.parameters():
            parameter.grad = None
        compiled(x).backward(grad_output)

    _, sources = run_and_get_code(step)
    if len(sources) != len(recorder.graphs):
        raise CaptureError(f"got {len(sources)} output codes for {len(recorder.graphs)} graphs")
    for graph, source in zip(recorder.graphs, sources):
        recorder.code[graph.kind] = source
    return step


def _run_codegen(
    recipe: Recipe | None, shape: tuple[int, int, int], recorder: _Recorder, *, gpu: GPU
) -> None:
    # Capture both AOTAutograd graphs on CPU without computing, then generate CUDA code.
    module, x, grad_output = _step_inputs(recipe, shape, device="cpu", random=False)
    compiled = torch.compile(
        module,
        fullgraph=True,
        dynamic=False,
        backend=recorder.backend(module, x, codegen_only.no_compute_inner),
    )
    compiled(x).backward(grad_output)
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


@dataclass
class _Recorder:
    """Collects, per graph: the fx graph, its inputs' roles, output code and scheduler nodes."""

    graphs: list[_Graph] = field(default_factory=list)
    code: dict[GraphKind, str] = field(default_factory=dict)
    nodes: dict[GraphKind, list[_SchedulerNode]] = field(default_factory=dict)
    removed: dict[GraphKind, set[str]] = field(default_factory=dict)
    input_roles: dict[GraphKind, dict[str, Roles]] = field(default_factory=dict)
    current: _Graph | None = None
    forward_roles: dict[str, Roles] = field(default_factory=dict)  # fwd node name -> roles

    def __deepcopy__(self, memo: dict[int, Any]) -> _Recorder:
        # Inductor deep-copies its config (which holds `post_fusion`) into every graph's repro
        # string; the recording (fake tensors, graphs) must be shared, not copied.
        return self

    def backend(
        self, module: nn.Module, x: torch.Tensor, inner: Callable[..., Any]
    ) -> Callable[..., Any]:
        """A dynamo backend: Inductor's compile_fx with `inner` recording each graph first."""
        from torch._inductor.compile_fx import compile_fx

        by_tensor = {id(x): Role.INPUT}
        for name, tensor in (*module.named_parameters(), *module.named_buffers()):
            # Float8Linear's scaling state is named after its role: input_amax_history, ...
            role = (
                Role.WEIGHT
                if name == "weight"
                else next((r for r in ROLES if name.startswith(r.value + "_")), None)
            )
            if role is not None:
                by_tensor[id(tensor)] = role

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
        self.nodes[graph.kind] = [s for s in map(_summarize, snodes) if s is not None]
        # Codegen adds to this set after the pass (rule 5): keep the live set, read it later.
        self.removed[graph.kind] = V.graph.removed_buffers
        return snodes

    def build(self, *, label: str, shape: tuple[int, int, int], device: CaptureDevice) -> Capture:
        launches: list[KernelLaunch] = []
        unmatched: list[str] = []
        for graph in self.graphs:
            parsed = parse_output_code(self.code[graph.kind])
            nodes = self.nodes.get(graph.kind, [])
            roles = _data_roles(nodes, self.input_roles.get(graph.kind, {}))
            groups, left = _match(parsed, nodes)
            removed = self.removed.get(graph.kind, set())
            launches += [
                _launch(graph.kind, p, group, removed, roles)
                for p, group in zip(parsed.launches, groups)
            ]
            unmatched += [f"{graph.kind.value}:{n.name}" for n in left]
        return Capture(label, shape, device, dict(self.code), tuple(launches), tuple(unmatched))


def _propagate(graph: torch.fx.Graph, input_roles: Sequence[Roles]) -> dict[torch.fx.Node, Roles]:
    """Roles of every node: the union of its inputs' roles, placeholders given."""
    roles: dict[torch.fx.Node, Roles] = dict(zip(graph.find_nodes(op="placeholder"), input_roles))
    for node in graph.nodes:
        if node not in roles:
            roles[node] = frozenset().union(*(roles[i] for i in node.all_input_nodes))
    return roles


def _summarize(snode: Any) -> _SchedulerNode | None:
    """A scheduler node's accesses after rules 3 and 4 (runs inside Inductor: V.graph is set)."""
    from torch._inductor import dependencies, ir, scheduler

    if isinstance(snode, scheduler.NopKernelSchedulerNode):
        return None
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
    return _SchedulerNode(snode.get_name(), reads, writes, fused_away, views, sources)


def _buffer_bytes(name: str) -> int:
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    buf = V.graph.get_buffer(name)
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


def _scheduler_bytes(group: Sequence[_SchedulerNode], removed: set[str]) -> int:
    """Bytes of one launch from its scheduler nodes, applying rules 2 and 5."""
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    produced: set[str] = set()
    for node in group:
        for name, nbytes in node.reads.items():
            if name not in produced:
                reads[name] = max(reads.get(name, 0), nbytes)
        kept = {n: b for n, b in node.fused_away.items() if n not in removed}
        for name, nbytes in (*node.writes.items(), *kept.items()):
            writes[name] = max(writes.get(name, 0), nbytes)
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


def _launch(
    kind: GraphKind,
    parsed: ParsedLaunch,
    group: Sequence[_SchedulerNode],
    removed: set[str],
    node_roles: Mapping[str, Roles],
) -> KernelLaunch:
    roles = frozenset().union(*(node_roles[n.name] for n in group))
    bytes_inductor = None
    if parsed.num_gb is not None:  # rules 6 and 7
        bytes_inductor = round(parsed.num_gb * GB) + parsed.bytes_not_iterated
    return KernelLaunch(
        name=parsed.name,
        graph=kind,
        kind=parsed.kind,
        reads=parsed.reads,
        writes=parsed.writes,
        bytes_code=parsed.bytes_total,
        bytes_scheduler=_scheduler_bytes(group, removed) if group else None,
        bytes_inductor=bytes_inductor,
        role=",".join(r.value for r in ROLES if r in roles) or None,
    )
