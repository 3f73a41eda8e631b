"""What a compiled block holds while it runs, read off the wrapper code Inductor generates for
its forward and backward: the check of training/memory.py's one-block backward term for
compiled blocks (`per_block`'s backward).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from f8roof.hardware.presets import GPU
from f8roof.profiler import codegen_only
from f8roof.profiler.capture import CaptureError, GraphKind
from f8roof.profiler.memory.saved import traced_block
from f8roof.training.block import BlockSpec
from f8roof.training.checkpointing import SacPolicy

# Inductor's wrapper allocates with these (torch/_inductor/codegen/wrapper.py's
# `make_buffer_allocation`: `empty_strided_<device>(size, stride, dtype)`)
_ALLOCATORS = frozenset(
    {"empty_strided_cuda", "empty_strided_cpu", "empty_strided", "torch.empty_strided"}
)
# return their first argument's storage: a view, or the input itself (`copy_if_misaligned`
# copies an input only when it is not 16-byte aligned: the caching allocator's blocks are)
_ALIASES = frozenset({"reinterpret_tensor", "copy_if_misaligned"})
_NO_TENSOR = frozenset({"get_raw_stream"})
# views of a workspace a split reduction finishes in the wrapper (`buf = workspace[a:b]
# .view(...).sum(dim=0).view([...])`); `sum` allocates its output
_VIEW_METHODS = frozenset({"view", "permute", "transpose", "t", "unsqueeze", "squeeze", "expand"})
_REDUCING_METHODS = frozenset({"sum"})
_VIEW_OPS = frozenset({"view", "_unsafe_view", "as_strided", "permute", "alias", "slice", "select"})


@dataclass(frozen=True)
class LiveBuffer:
    """One storage a graph's wrapper allocated: its first name, bytes, and the kernel or op
    that wrote it (the op that returned it, else the first call that took it)."""

    name: str
    bytes: int
    written_by: str


@dataclass(frozen=True)
class WrapperBuffers:
    """The buffers one graph's wrapper code (`call(args)`) allocates, followed in order: the
    peak of their live bytes, what is live then, and what the graph returns (kept past it:
    a forward's saved tensors and outputs, a backward's gradients). Graph inputs are not the
    graph's allocations and count nowhere."""

    peak_bytes: int
    at_peak: tuple[LiveBuffer, ...]
    returned_bytes: int

    @property
    def beyond_returned_bytes(self) -> int:
        """The most the graph holds beyond what it leaves allocated when it returns."""
        return self.peak_bytes - self.returned_bytes


@dataclass
class _Storage:
    name: str
    line: int
    bytes: int | None  # None: an op's output, sized by the wrapper's assert_size_stride
    itemsize: int
    allocated_at: int
    freed_at: int | None = None
    written_by: str = ""
    elements: dict[int, int] = field(default_factory=dict)  # a tuple's getitems -> storages


def wrapper_buffers(code: str, itemsizes: Mapping[str, int]) -> WrapperBuffers:
    """Read Inductor's output code (profiler/capture.py's `_Recorder.code`) and follow the
    buffers its wrapper's `call(args)` allocates and frees, statement by statement: an
    `empty_strided_*` allocates its storage's bytes (the extent its sizes and strides reach);
    `reinterpret_tensor`, `bufX = bufY` and `wait_tensor` name a storage again (Inductor's
    reuse: `bufX = bufY; del bufY  # reuse` allocates nothing); an op called without `out=`
    (`torch.ops.aten._scaled_mm`, a functional collective, SDPA's tuple of outputs read by
    getitem) allocates what the wrapper's `assert_size_stride` of it says, in the dtype
    `itemsizes` gives its buffer (Inductor's buffers by name: the wrapper prints no dtype for
    an op's outputs; `_Recorder.itemsizes`); a storage is freed
    when its last name is deleted. Any statement form this reader does not know raises
    CaptureError naming its line, so a torch whose wrapper allocates differently fails
    loudly rather than counting less."""
    tree = ast.parse(code)
    call = _call_function(tree)
    walk = _Walk(code.splitlines(), itemsizes)
    walk.statements(call.body)
    return walk.result()


def _call_function(tree: Any) -> Any:
    """The wrapper's `call`: `Runner.call` (torch 2.9 on), else a module-level `call`."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Runner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    calls = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "call"]
    if not calls:
        raise CaptureError("no wrapper `call` function in Inductor's output code")
    return calls[-1]


class _Walk:
    """The wrapper's statements in order (`statements`), each a position: storages carry the
    positions they are allocated and freed at; names map to the storages they keep alive."""

    def __init__(self, lines: list[str], itemsizes: Mapping[str, int]) -> None:
        self.lines = lines
        self.itemsizes = itemsizes
        self.position = 0
        self.storages: list[_Storage] = []
        self.names: dict[str, list[int]] = {}  # a name -> the storages it holds
        self.returned: set[int] = set()

    def fail(self, node: Any, why: str) -> CaptureError:
        text = self.lines[node.lineno - 1].strip() if node.lineno <= len(self.lines) else ""
        return CaptureError(f"wrapper line {node.lineno} ({text[:160]}): {why}")

    def statements(self, body: Sequence[Any]) -> None:
        for node in body:
            self.position += 1
            if isinstance(node, ast.With):
                self.statements(node.body)
            elif isinstance(node, ast.Assign):
                self.assign(node)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if not isinstance(target, ast.Name):
                        raise self.fail(node, "a del of something other than a name")
                    self.drop(target.id)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                self.called(node.value)
            elif isinstance(node, ast.Return):
                self.returned |= {s for n in _names_in(node.value) for s in self.names.get(n, [])}
            else:
                raise self.fail(node, "a statement this reader does not know")

    def assign(self, node: Any) -> None:
        target = node.targets[0]
        if len(node.targets) != 1:
            raise self.fail(node, "a chained assignment")
        if isinstance(target, ast.Tuple):
            if not (isinstance(node.value, ast.Name) and node.value.id == "args"):
                raise self.fail(node, "a tuple assignment other than the graph's inputs")
            for element in target.elts:
                if not isinstance(element, ast.Name):
                    raise self.fail(node, "a graph input unpacked into something not a name")
                self.names[element.id] = []  # graph inputs: not the graph's allocations
            return
        if not isinstance(target, ast.Name):
            raise self.fail(node, "an assignment to something other than a name")
        held = self.value(node, target.id, node.value)
        rebound = self.names.pop(target.id, [])
        self.names[target.id] = held
        self.release(rebound)

    def value(self, node: Any, name: str, value: Any) -> list[int]:
        """The storages an assigned value holds, allocating where it allocates."""
        if isinstance(value, ast.Name):
            return list(self.held(node, value.id))
        getitem = isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
        if getitem and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int):
            return [self.element(node, name, value.value.id, value.slice.value)]
        if not isinstance(value, ast.Call):
            raise self.fail(node, "an assigned value this reader does not know")
        callee = ast.unparse(value.func)
        if callee in _ALLOCATORS:
            return [self.allocate(node, name, value)]
        if callee in _ALIASES or callee.endswith("wait_tensor.default"):
            return list(self.held(node, _first_name(node, value, self)))
        if callee in _NO_TENSOR:
            return []
        if callee.startswith(("torch.ops.", "extern_kernels.")):
            if any(k.arg == "out" for k in value.keywords):
                raise self.fail(node, "an out= op whose result is assigned")
            if callee.split(".")[-2] in _VIEW_OPS:
                return list(self.held(node, _first_name(node, value, self)))
            return [self.new(node, name, None, 0, written_by=callee)]
        return self.method_chain(node, name, value)

    def method_chain(self, node: Any, name: str, value: Any) -> list[int]:
        """`workspace[a:b].view(...).sum(dim=0).view([...])`: views of a buffer, and a
        reduction whose output (sized by the last view's shape) is a new storage."""
        methods, shape, root = [], None, value
        while True:
            if isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute):
                methods.append(root.func.attr)
                if shape is None and root.func.attr == "view" and root.args:
                    shape = _literal(root.args[0] if len(root.args) == 1 else ast.Tuple(root.args))
                root = root.func.value
            elif isinstance(root, ast.Subscript):
                root = root.value
            else:
                break
        if not isinstance(root, ast.Name) or root.id not in self.names:
            raise self.fail(node, "an assigned call this reader does not know")
        unknown = set(methods) - _VIEW_METHODS - _REDUCING_METHODS
        if unknown:
            raise self.fail(node, f"buffer methods this reader does not know: {sorted(unknown)}")
        held = self.held(node, root.id)
        if not set(methods) & _REDUCING_METHODS:
            return list(held)
        if shape is None or not held:
            raise self.fail(node, "a reduction whose output's shape this reader cannot read")
        itemsize = self.itemsizes.get(name, self.storages[held[0]].itemsize)
        nbytes = math.prod(int(d) for d in shape) * itemsize
        return [self.new(node, name, nbytes, itemsize, written_by=f"{root.id}.sum")]

    def allocate(self, node: Any, name: str, value: Any) -> int:
        try:
            size, stride = _literal(value.args[0]), _literal(value.args[1])
        except ValueError:
            raise self.fail(node, "an allocation of symbolic sizes") from None
        dtype = getattr(torch, ast.unparse(value.args[2]).removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype):
            raise self.fail(node, "an allocation whose dtype this reader does not know")
        return self.new(node, name, _extent(size, stride) * dtype.itemsize, dtype.itemsize)

    def new(
        self, node: Any, name: str, nbytes: int | None, itemsize: int, written_by: str = ""
    ) -> int:
        self.storages.append(
            _Storage(name, node.lineno, nbytes, itemsize, self.position, written_by=written_by)
        )
        return len(self.storages) - 1

    def element(self, node: Any, name: str, of: str, index: int) -> int:
        """`bufY = bufX[i]`: the i-th output of the op that returned the tuple `bufX`,
        allocated when the op ran; the tuple's own entry holds no bytes."""
        held = self.held(node, of)
        if len(held) != 1 or self.storages[held[0]].bytes not in (None, 0):
            raise self.fail(node, "a getitem of something other than an op's outputs")
        tuple_ = self.storages[held[0]]
        tuple_.bytes = 0
        if index not in tuple_.elements:
            element = _Storage(
                name, node.lineno, None, 0, tuple_.allocated_at, written_by=tuple_.written_by
            )
            self.storages.append(element)
            tuple_.elements[index] = len(self.storages) - 1
        return tuple_.elements[index]

    def held(self, node: Any, name: str) -> list[int]:
        if name not in self.names:
            raise self.fail(node, f"{name} is no graph input or buffer this reader followed")
        return self.names[name]

    def drop(self, name: str) -> None:
        """A name deleted (or rebound): what no other name holds is freed here; a tuple's
        entry keeps its elements alive until it goes too."""
        self.release(self.names.pop(name, []))

    def release(self, sids: list[int]) -> None:
        """Free, at this statement, those of `sids` (and their elements) no name holds."""
        released = set(sids) | {e for s in sids for e in self.storages[s].elements.values()}
        holding = {s for ss in self.names.values() for s in ss}
        holding |= {e for s in holding for e in self.storages[s].elements.values()}
        for sid in released - holding:
            if self.storages[sid].freed_at is None:
                self.storages[sid].freed_at = self.position

    def called(self, value: Any) -> None:
        """A call whose result is dropped (a kernel launch, an op writing `out=`): it
        allocates nothing that outlives it; it writes the buffers it takes first."""
        if ast.unparse(value.func) == "assert_size_stride":
            self.size_asserted(value)
            return
        callee = ast.unparse(value.func).removesuffix(".run")
        for name in _names_in(value):
            for sid in self.names.get(name, []):
                if not self.storages[sid].written_by:
                    self.storages[sid].written_by = callee

    def size_asserted(self, value: Any) -> None:
        """`assert_size_stride(bufX, size, stride, ...)` after an op's output: its bytes."""
        first = value.args[0]
        if not isinstance(first, ast.Name):
            return
        for sid in self.names.get(first.id, []):
            storage = self.storages[sid]
            if storage.bytes is None:
                # a custom op's output is its MultiOutput's buffer (`buf23 = buf22`): the
                # layout, and so the dtype, is the asserted name's
                itemsize = self.itemsizes.get(storage.name, self.itemsizes.get(first.id))
                if itemsize is None:
                    raise self.fail(value, f"no dtype for {storage.name} among Inductor's buffers")
                storage.itemsize = itemsize
                size, stride = _literal(value.args[1]), _literal(value.args[2])
                storage.bytes = _extent(size, stride) * storage.itemsize

    def result(self) -> WrapperBuffers:
        for s in self.storages:
            if s.bytes is None:
                line = self.lines[s.line - 1].strip()
                raise CaptureError(
                    f"wrapper line {s.line} ({line[:160]}): an op's output the wrapper does "
                    "not size (no assert_size_stride)"
                )
        end = self.position + 1
        peak, at_peak = -1, []
        for position in range(1, end + 1):
            live = [
                s
                for s in self.storages
                if s.allocated_at <= position and (s.freed_at is None or position < s.freed_at)
            ]
            total = sum(s.bytes or 0 for s in live)
            if total > peak:
                peak, at_peak = total, live
        buffers = tuple(LiveBuffer(s.name, s.bytes or 0, s.written_by) for s in at_peak if s.bytes)
        returned = sum(self.storages[s].bytes or 0 for s in self.returned)
        return WrapperBuffers(max(peak, 0), buffers, returned)


def _literal(node: Any) -> tuple[int, ...]:
    """A size or stride the wrapper writes as a literal tuple or list of ints."""
    value = ast.literal_eval(node)
    if not all(isinstance(d, int) for d in value):
        raise ValueError(value)
    return tuple(value)


def _extent(size: Sequence[int], stride: Sequence[int]) -> int:
    """Elements a strided tensor's storage spans: 1 + sum((size - 1) * stride); 0 if empty."""
    if any(d == 0 for d in size):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(size, stride))


def _names_in(node: Any) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)] if node is not None else []


def _first_name(node: Any, value: Any, walk: _Walk) -> str:
    if not value.args or not isinstance(value.args[0], ast.Name):
        raise walk.fail(node, "an alias of something other than a name")
    return str(value.args[0].id)


@dataclass(frozen=True)
class BlockBuffers:
    """What one rank's compiled block allocates while its forward and its backward run, read
    off the CUDA wrapper code Inductor generates for them (`wrapper_buffers`)."""

    spec: BlockSpec
    recipe: str | None
    forward: WrapperBuffers
    backward: WrapperBuffers


def block_buffers(
    spec: BlockSpec, *, recipe: str | None, sac: SacPolicy | None = None, gpu: GPU | None = None
) -> BlockBuffers:
    """Compile one rank's block as `saved_activations` does and generate the CUDA code of its
    forward and backward graphs for `gpu` (default h100; codegen only, nothing runs: the dims
    may be a real model's), then follow each wrapper's buffers."""
    where = f"{spec.name or 'block'} {recipe or 'bf16'} buffers"
    with traced_block(spec, recipe, sac, where) as recorder:
        for graph in recorder.graphs:
            with recorder.compiling(graph):
                recorder.code[graph.kind] = codegen_only.generate_cuda_code(
                    graph.module, graph.example_inputs, graph.compile_kwargs, gpu=gpu
                )
    if set(recorder.code) != {GraphKind.FWD, GraphKind.BWD} or len(recorder.graphs) != 2:
        raise CaptureError(f"{where}: expected one forward and one backward graph")
    read = {
        kind: wrapper_buffers(recorder.code[kind], recorder.itemsizes.get(kind, {}))
        for kind in (GraphKind.FWD, GraphKind.BWD)
    }
    return BlockBuffers(spec, recipe, read[GraphKind.FWD], read[GraphKind.BWD])
