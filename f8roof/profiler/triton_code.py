"""Parse Inductor's output code: the kernels one compiled graph launches and the bytes each moves.

One wrapper module (what `GraphLowering.save_output_code` receives) holds the kernel sources
(`async_compile.triton(...)` on CUDA, `async_compile.cpp_pybinding(...)` on CPU) and a `call()`
that allocates buffers and launches kernels in order. Everything here is a pure function of that
text, so it is tested on checked-in samples and works for code generated on another machine.

Counting convention, shared with Inductor's own estimates (`kernel_num_gb` and the scheduler's
`get_read_write_buffer_accesses`): every buffer a kernel touches counts once, with the size of the
view passed to it; `in_ptr` is read, `out_ptr` written, `in_out_ptr` (and any argument listed in
`mutated_arg_names`) read and written. Reads of a kernel's own output are left out (see
`ParsedLaunch`). How this count is reconciled with the other two: `f8roof.profiler.capture`.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from f8roof.hardware import instruction_costs
from f8roof.timing.kernel_classes import KernelClass, gemm_class

GB = 1e9  # Inductor's kernel_num_gb is bytes / 1e9
WORKSPACE_PARAM = "ws_ptr"  # a mix-order reduction kernel's partial results


class KernelKind(str, Enum):
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    PERSISTENT_REDUCTION = "persistent_reduction"
    TEMPLATE = "template"
    CPP = "cpp"
    EXTERN_GEMM = "extern_gemm"
    EXTERN = "extern"  # a non-gemm op Inductor leaves to ATen (a fallback kernel)


class CodeParseError(ValueError):
    """Output code this parser does not understand (Inductor's format moved)."""


# Triton decorator (`@triton_heuristics.<name>`) -> kind. Cooperative reductions are reductions.
_TRITON_KINDS = {
    "pointwise": KernelKind.POINTWISE,
    "reduction": KernelKind.REDUCTION,
    "cooperative_reduction": KernelKind.REDUCTION,
    "persistent_reduction": KernelKind.PERSISTENT_REDUCTION,
    "template": KernelKind.TEMPLATE,
}

# Extern calls that are matrix multiplies; anything else Inductor hands to ATen is kind EXTERN.
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_int_mm", "_scaled_mm", "_scaled_mm_v2"})

# Every spelling of a dtype in output code (torch, Triton signature, C++) -> (torch name, bytes).
_DTYPES: dict[str, tuple[str, int]] = {}
for _torch_name, _size, _aliases in (
    ("bfloat16", 2, ("bf16", "at::BFloat16", "bfloat16")),
    ("float16", 2, ("fp16", "at::Half", "half")),
    ("float32", 4, ("fp32", "float")),
    ("float64", 8, ("fp64", "double")),
    ("float8_e4m3fn", 1, ("fp8e4nv", "at::Float8_e4m3fn")),
    ("float8_e5m2", 1, ("fp8e5", "at::Float8_e5m2")),
    ("float8_e4m3fnuz", 1, ("fp8e4b8", "at::Float8_e4m3fnuz")),
    ("float8_e5m2fnuz", 1, ("fp8e5b16", "at::Float8_e5m2fnuz")),
    ("int64", 8, ("i64", "int64_t")),
    ("int32", 4, ("i32", "int32_t", "int")),
    ("int16", 2, ("i16", "int16_t")),
    ("int8", 1, ("i8", "int8_t")),
    ("uint8", 1, ("u8", "uint8_t")),
    ("bool", 1, ("i1",)),
):
    for _alias in (_torch_name, *_aliases):
        _DTYPES[_alias] = (_torch_name, _size)


def dtype_name(text: str) -> str:
    """Canonical torch dtype name for any spelling: 'torch.float8_e4m3fn', 'fp8e4nv', 'float'."""
    key = text.strip().removeprefix("torch.").removeprefix("c10::")
    if key not in _DTYPES:
        raise CodeParseError(f"unknown dtype {text!r} in output code")
    return _DTYPES[key][0]


def dtype_bytes(text: str) -> int:
    return _DTYPES[dtype_name(text)][1]


@dataclass(frozen=True)
class BufferAccess:
    """One buffer as one kernel sees it: the view's shape and dtype, and its size in bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    def __post_init__(self) -> None:
        if self.nbytes != math.prod(self.shape) * dtype_bytes(self.dtype):
            raise ValueError(f"{self.name}: {self.nbytes} bytes is not {self.shape} x {self.dtype}")


@dataclass(frozen=True)
class Param:
    """A kernel parameter: name, element dtype (None for scalars) and how the kernel uses it."""

    name: str
    dtype: str | None
    read: bool
    written: bool


@dataclass(frozen=True)
class KernelSource:
    """A kernel defined in the module: its parameters and, for Triton, Inductor's byte count."""

    name: str
    kind: KernelKind
    params: tuple[Param, ...]
    num_gb: float | None = None  # inductor_meta['kernel_num_gb']
    numel: int | None = None  # Triton: elements iterated, the product of x/y/r0_numel ...
    indices: Mapping[str, int] = field(default_factory=dict)  # pointer -> distinct indices
    reduction_hint: str | None = None  # Triton reductions: "inner", "outer", "outer_tiny", ...
    atomic: bool = False  # the body calls tl.atomic_*
    # pointer -> the unit-stride terms of its tl.load/tl.store indices (see `_unit_terms`)
    unit_terms: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # pointer -> how many more loops over the reduction load it again (see `_reloads`)
    reloads: Mapping[str, int] = field(default_factory=dict)
    arithmetic: int | None = None  # operations over its iteration space (`_arithmetic`)


@dataclass(frozen=True)
class ParsedLaunch:
    """One kernel launch of `call()`, in call order.

    `reads` leaves out buffers whose storage nothing had written before this launch: the
    kernel reads back what it wrote itself (a C++ kernel runs several loop nests in one
    function; a concat writes through views of its output), which costs no read traffic.
    """

    name: str
    kind: KernelKind
    reads: tuple[BufferAccess, ...]
    writes: tuple[BufferAccess, ...]
    num_gb: float | None = None
    # Bytes of whole views beyond what the kernel iterates over (a slice read through a
    # pointer to a bigger buffer): kernel_num_gb leaves them out, the counts above do not.
    bytes_not_iterated: int = 0
    # Bytes of the reads left out above (storage nothing had written): kernel_num_gb counts
    # them, as it counts every in_ptr and in_out_ptr (an in_out_ptr to a fresh allocation is
    # how Inductor stores into the reused memory of an intermediate fused away).
    bytes_unwritten_reads: int = 0
    # Bytes of a mix-order reduction's workspace: the partial results its kernel writes there
    # (`ws_ptr`, which kernel_num_gb leaves out), or reads back to finish them in the wrapper
    # (`_final_reduce`).
    bytes_workspace: int = 0
    # Bytes read from a collective's result (an all-gathered tensor, an all-reduced amax):
    # kernel_num_gb counts them as nothing (Inductor sizes them through the collective's
    # wait, whose layout holds no size), the counts above count them.
    bytes_from_collectives: int = 0
    # What the kernel does to memory (see `classify`); None only while parsing.
    kernel_class: KernelClass | None = None
    # A full-size buffer is stored (or loaded) along another dimension than the others: a
    # transposed copy, as for `_scaled_mm`'s column-major second operand.
    changes_layout: bool = False
    numel: int | None = None  # Triton: elements iterated
    # Buffers a reduction walks along its strided index (`_scattered`): a transposed float8
    # copy stored from a row reduction moves one byte per 32-byte sector.
    scattered: frozenset[str] = frozenset()
    # Buffer -> how many later loops over the reduction load it again (KernelSource.reloads).
    reloads: tuple[tuple[str, int], ...] = ()
    arithmetic: int = 0  # operations evaluated (KernelSource.arithmetic)

    @property
    def bytes_total(self) -> int:
        return sum(b.nbytes for b in self.reads) + sum(b.nbytes for b in self.writes)


@dataclass(frozen=True)
class ParsedCollective:
    """One functional collective of `call()` (`torch.ops._c10d_functional.<op>.default`), kept
    apart from the launches: its bytes cross the network, not (only) memory.

    `op` drops a trailing `_` or `_out` (in-place and out= forms): all_gather_into_tensor,
    reduce_scatter_tensor, all_reduce, all_to_all_single. `group_size` is None where the call
    does not say it (all_reduce names only its group). `after` counts the launches before it.
    """

    op: str
    input: BufferAccess
    output: BufferAccess
    group: str  # the process group's name, as Inductor passes it
    group_size: int | None
    after: int


@dataclass(frozen=True)
class OutputCode:
    """What one wrapper module does: graph inputs (in order) and launches (in order)."""

    graph_inputs: tuple[str, ...]
    kernels: tuple[KernelSource, ...]
    launches: tuple[ParsedLaunch, ...]
    collectives: tuple[ParsedCollective, ...] = ()
    storage: Mapping[str, str] = field(default_factory=dict)  # buffer -> storage it lives in


def parse_output_code(source: str) -> OutputCode:
    """Parse one Inductor wrapper module (Triton or C++ kernels) into its launches."""
    module = ast.parse(source)
    kernels = {k.name: k for k in _kernel_sources(module)}
    call = _find_call(module)
    walker = _CallWalker(kernels, _graph_input_layouts(module))
    walker.walk(call.body)
    return OutputCode(
        graph_inputs=walker.graph_inputs,
        kernels=tuple(kernels.values()),
        launches=_classified(walker.launches, kernels),
        collectives=tuple(walker.collectives),
        storage=dict(walker.storage),
    )


# ---- kernel definitions ---------------------------------------------------------------------


def _kernel_sources(module: ast.Module) -> list[KernelSource]:
    out = []
    for stmt in module.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        func = stmt.value.func
        if not (isinstance(func, ast.Attribute) and ast.unparse(func.value) == "async_compile"):
            continue
        name = _name_of(stmt.targets[0])
        strings = [
            a.value
            for a in stmt.value.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if func.attr == "triton":
            out.append(parse_triton_kernel(name, strings[-1]))
        elif func.attr in ("cpp_pybinding", "cpp"):
            out.append(parse_cpp_kernel(name, strings[-1]))
    return out


def parse_triton_kernel(name: str, source: str) -> KernelSource:
    """A Triton kernel's parameters (from `triton_meta['signature']`) and `kernel_num_gb`."""
    tree = ast.parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        raise CodeParseError(f"no @triton.jit def {name} in its kernel source")
    # @triton_heuristics.pointwise(size_hints=..., triton_meta=..., inductor_meta=...)
    deco = next(
        (
            d
            for d in fn.decorator_list
            if isinstance(d, ast.Call) and ast.unparse(d.func).startswith("triton_heuristics.")
        ),
        None,
    )
    heuristic = ast.unparse(deco.func).split(".")[-1] if deco else None
    if deco is None or heuristic not in _TRITON_KINDS:
        raise CodeParseError(f"{name}: unknown Triton heuristics decorator {heuristic!r}")
    kind = _TRITON_KINDS[heuristic]
    meta = {k.arg: k.value for k in deco.keywords}
    signature = ast.literal_eval(_dict_entry(meta["triton_meta"], "signature"))
    inductor_meta = meta["inductor_meta"]
    mutated = set(ast.literal_eval(_dict_entry(inductor_meta, "mutated_arg_names") or ast.List([])))
    params = []
    for arg in fn.args.args:
        sig = signature.get(arg.arg, "")
        is_pointer = sig.startswith("*")
        params.append(
            Param(
                name=arg.arg,
                dtype=dtype_name(sig[1:]) if is_pointer else None,
                read=is_pointer and arg.arg.startswith(("in_ptr", "in_out_ptr")),
                written=is_pointer
                and (
                    arg.arg.startswith(("out_ptr", "in_out_ptr"))
                    or arg.arg in mutated
                    or arg.arg == WORKSPACE_PARAM
                ),
            )
        )
    gb_node = _dict_entry(inductor_meta, "kernel_num_gb")
    num_gb = None if gb_node is None else float(ast.literal_eval(gb_node))
    hint = meta.get("reduction_hint")  # ReductionHint.INNER
    atomic_node = _dict_entry(inductor_meta, "atomic_add_found")
    atomic = any(
        isinstance(n, ast.Call) and ast.unparse(n.func).startswith("tl.atomic_")
        for n in ast.walk(fn)
    ) or (atomic_node is not None and ast.literal_eval(atomic_node) is True)
    return KernelSource(
        name,
        kind,
        tuple(params),
        num_gb,
        _iterated_numel(fn),
        _distinct_indices(fn),
        None if hint is None else ast.unparse(hint).rsplit(".", 1)[-1].lower(),
        atomic,
        _unit_terms(fn),
        _reloads(fn),
        _arithmetic(fn, {p.name: p.dtype for p in params if p.dtype is not None}),
    )


_NUMEL = re.compile(r"^([xyz]|r\d_)numel$")


_REDUCING_CALL = re.compile(r"(max2|min2|sum|prod|welford|reduce|argmax|argmin|any|all)\b")
_INDEX_VAR = re.compile(r"^([xyz]|r\d*_?)\d+$")
# Triton's spellings of dtypes that the signature spells otherwise
_TRITON_DTYPES = {
    "float8e4nv": "float8_e4m3fn",
    "float8e5": "float8_e5m2",
    "float8e4b8": "float8_e4m3fnuz",
    "float8e5b16": "float8_e5m2fnuz",
    "int1": "bool",
}
# Promotion order of the dtypes arithmetic runs in (wider last)
_RANK = {"bool": 0, "int8": 1, "uint8": 1, "int16": 2, "int32": 3, "int64": 4}
_FLOAT_RANK = {"bfloat16": 6, "float16": 6, "float32": 7, "float64": 8}


def _rank(dtype: str | None) -> int:
    if dtype is None:
        return -1
    return _FLOAT_RANK.get(dtype, _RANK.get(dtype, 5))  # float8 between ints and floats


def _triton_dtype(node: ast.expr) -> str | None:
    text = ast.unparse(node)
    if not text.startswith("tl."):
        return None
    name = text.removeprefix("tl.")
    name = _TRITON_DTYPES.get(name, name)
    return _DTYPES[name][0] if name in _DTYPES else None


def _assignments(body: list[ast.stmt]) -> Iterable[ast.Assign]:
    """The body's `tmpN = ...` statements in program order, loops' bodies where they run."""
    for stmt in body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id.startswith("tmp"):
            yield stmt
        for inner in ("body", "orelse"):
            if isinstance(stmt, (ast.For, ast.While, ast.If)):
                yield from _assignments(getattr(stmt, inner))


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else ast.unparse(func)


class _Values:
    """The values a kernel's statements compute: each name's dtype, the names that are copies
    of another (no instruction: a conversion to the dtype it has, narrowing back what was just
    widened, an expression computed before), and the axes each varies along (none: a
    constant or a row's statistic, which costs nothing per element)."""

    def __init__(self, pointers: Mapping[str, str]) -> None:
        self.pointers = pointers
        self.dtype: dict[str, str | None] = {}
        self.copy_of: dict[str, str] = {}
        self.widened_from: dict[str, str] = {}
        self.known: dict[str, str] = {}  # an expression, names resolved -> the name holding it
        self.axes: dict[str, frozenset[str]] = {}

    def resolve(self, name: str) -> str:
        while name in self.copy_of:
            name = self.copy_of[name]
        return name

    def names(self, node: ast.expr) -> set[str]:
        return {self.resolve(n.id) for n in ast.walk(node) if isinstance(n, ast.Name)}

    def promoted(self, node: ast.expr) -> str | None:
        dtypes = [self.dtype.get(n) for n in self.names(node)]
        return max(dtypes, key=_rank, default=None)

    def key(self, node: ast.expr) -> str:
        return re.sub(r"\b(tmp\d+)\b", lambda m: self.resolve(m.group(1)), ast.unparse(node))

    def varying(self, node: ast.expr) -> frozenset[str]:
        """The axes an expression of computed values varies along."""
        return frozenset().union(*(self.axes.get(n, frozenset()) for n in self.names(node)))

    def load(self, name: str, value: ast.Call, along: tuple[str, ...]) -> None:
        names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
        axes = frozenset(n[0] for n in names if _INDEX_VAR.match(n) and n.startswith(along))
        if axes:
            self.axes[name] = axes
        stored = next((self.pointers[n] for n in names if n in self.pointers), None)
        self.dtype[name] = stored
        if isinstance(value.func, ast.Attribute) and value.func.attr == "to":  # load(...).to(T)
            raw = f"{name}_stored"
            self.dtype[raw], self.dtype[name] = stored, _triton_dtype(value.args[0])
            self.widened_from[name] = raw
            self.known[f"{raw}.to({self.dtype[name]})"] = name

    def convert(self, name: str, source: str, to: str | None, *, bitcast: bool = False) -> int:
        """`name = source.to(to)`: its cost per point of the axes it varies along, 0 where the
        compiled kernel runs no instruction. A bitcast (`bitcast=True`, how Inductor moves
        float8 as uint8) reinterprets the register's bits: a value of the new dtype, no
        instruction."""
        if bitcast:
            self.dtype[name] = to
            if source in self.axes:
                self.axes[name] = self.axes[source]
            return 0
        key = f"{source}.to({to})"
        if key in self.known:
            self.copy_of[name] = self.known[key]
            return 0
        have = self.dtype.get(source)
        origin = self.widened_from.get(source)
        if to is not None and have == to:
            self.copy_of[name] = source
            return 0
        narrowing_back = origin is not None and self.dtype.get(origin) == to
        if narrowing_back and to is not None and _rank(have) >= _rank(to):
            self.copy_of[name] = origin
            return 0
        self.known[key] = name
        self.dtype[name] = to
        if _rank(to) > _rank(have):
            self.widened_from[name] = source
        if source not in self.axes:
            return 0
        self.axes[name] = self.axes[source]
        if have == "bfloat16" and to == "float32":
            return instruction_costs.WIDEN_BF16
        if to is not None and to.startswith("float8"):
            return instruction_costs.TO_FLOAT8
        return instruction_costs.SFU

    def cost(self, node: ast.expr, fp64: bool) -> int:
        """FP32-lane cycles of one element of an expression (`hardware/instruction_costs`)."""
        costs = instruction_costs
        total = 0
        for n in ast.walk(node):
            if isinstance(n, ast.BinOp):
                if isinstance(n.op, ast.Div):
                    total += costs.DIVIDE_FP64 if fp64 else costs.DIVIDE
                elif isinstance(n.op, (ast.Add, ast.Sub, ast.Mult)):
                    total += costs.ALU if fp64 else costs.ADD
                elif isinstance(n.op, ast.Pow):
                    total += 2 * costs.SFU + costs.ADD
                else:
                    total += costs.ALU
            elif isinstance(n, ast.UnaryOp):
                total += costs.ADD if isinstance(n.op, (ast.USub, ast.UAdd)) else costs.ALU
            elif isinstance(n, ast.Compare):
                total += costs.ALU * len(n.ops)
            elif isinstance(n, (ast.BoolOp, ast.IfExp)):
                total += costs.ALU
            elif isinstance(n, ast.Call):
                name = _call_name(n)
                if name == "to":
                    total += costs.SFU
                elif name not in costs.FREE_CALLS:
                    total += costs.CALLS.get(name, costs.UNKNOWN_CALL)
        return total


def _arithmetic(fn: ast.FunctionDef, pointers: Mapping[str, str]) -> int | None:
    """The arithmetic a Triton kernel evaluates over its iteration space, in FP32-lane cycles
    (`hardware/instruction_costs`): each `tmpN = ...` computed from an element of a tensor
    (not a load, not a constant, not a row's statistic) costs its operators on every element
    it varies over. A reduction's loop recomputes a value from the reduced axis for every
    row (each program holds one or a few rows): every element. A pointwise kernel tiled in
    two axes (y, x) computes a value loaded along one axis only (a row's scale in a
    transposed cast) on that axis's tensor, once per row, not per element; Triton's copies of
    it across the threads that share a row are left out, like its index and mask work.
    What the compiler runs no instruction for costs nothing: a conversion to the dtype a value
    has, narrowing back a value just widened (Inductor's bf16 -> float32 -> bf16 round trips),
    a bitcast (float8 moved as uint8: a gathered float8 tensor's chunks concatenated), an
    expression computed before. A fused float8 cast evaluates a norm, an amax, a
    power-of-2 scale, the clamp and the cast per element, pass after pass: it can be bound by
    arithmetic rather than memory (`timing/kernel_time.KernelTimeModel.arithmetic_per_s`).
    `pointers`: each pointer parameter's dtype, from the kernel's signature."""
    sizes = {
        stmt.targets[0].id: stmt.value.value
        for stmt in fn.body
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.targets[0], ast.Name)
        and _NUMEL.match(stmt.targets[0].id)
        and isinstance(stmt.value, ast.Constant)
    }
    if not sizes:
        return None
    reducing = any(k.startswith("r") for k in sizes)
    along = ("r",) if reducing else ("x", "y", "z")

    def span(axes: frozenset[str]) -> int:
        """The points a value varying along `axes` is computed at."""
        if not axes:
            return 0
        if reducing:
            return math.prod(sizes.values())
        return math.prod(sizes.get(f"{axis}numel", 1) for axis in axes)

    values = _Values(pointers)
    count = 0
    for stmt in _assignments(fn.body):
        name, value = stmt.targets[0].id, stmt.value  # type: ignore[union-attr]
        if isinstance(value, ast.Call) and ast.unparse(value.func).startswith("tl.load"):
            values.load(name, value, along)
            continue
        if isinstance(value, ast.Call) and _REDUCING_CALL.search(ast.unparse(value.func)):
            continue  # a row's statistic
        if isinstance(value, ast.Name):
            values.copy_of[name] = values.resolve(value.id)
            continue
        if isinstance(value, ast.Call) and _call_name(value) in ("broadcast_to", "full"):
            first = value.args[0] if value.args else None
            if _call_name(value) == "broadcast_to" and isinstance(first, ast.Name):
                values.copy_of[name] = values.resolve(first.id)
            else:
                values.dtype[name] = _triton_dtype(value.args[-1]) if value.args else None
            continue
        func = value.func if isinstance(value, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "to"
            and isinstance(func.value, ast.Name)
        ):
            assert isinstance(value, ast.Call)
            to = _triton_dtype(value.args[0]) if value.args else None
            bitcast = any(
                k.arg == "bitcast" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in value.keywords
            )
            cost = values.convert(name, values.resolve(func.value.id), to, bitcast=bitcast)
            count += cost * span(values.axes.get(name, frozenset()))
            continue
        key = values.key(value)
        if key in values.known:
            values.copy_of[name] = values.known[key]
            continue
        values.known[key] = name
        dtype = values.promoted(value)
        values.dtype[name] = "bool" if isinstance(value, ast.Compare) else dtype
        axes = values.varying(value)
        if axes:
            values.axes[name] = axes
            count += values.cost(value, fp64=dtype == "float64") * span(axes)
    return count


def _iterated_numel(fn: ast.FunctionDef) -> int | None:
    """Product of the static `xnumel = 15`, `r0_numel = 6144`, ... at the top of the body."""
    sizes = [
        stmt.value.value
        for stmt in fn.body
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.targets[0], ast.Name)
        and _NUMEL.match(stmt.targets[0].id)
        and isinstance(stmt.value, ast.Constant)
    ]
    return math.prod(sizes) if sizes else None


def _distinct_indices(fn: ast.FunctionDef) -> dict[str, int]:
    """Per pointer, the distinct index expressions of its `tl.load`/`tl.store` calls."""
    seen: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("tl.load", "tl.store")
            and node.args
            and isinstance(node.args[0], ast.BinOp)
            and isinstance(node.args[0].left, ast.Name)
        ):
            seen.setdefault(node.args[0].left.id, set()).add(ast.unparse(node.args[0].right))
    return {name: len(found) for name, found in seen.items()}


def _unit_terms(fn: ast.FunctionDef) -> dict[str, frozenset[str]]:
    """Per pointer, the unit-stride term of each `tl.load`/`tl.store` index: the summand not
    multiplied by a stride. `r0_1 + 128*x0` walks r0_1 contiguously, `x0 + 128*r0_1` walks x0,
    `64*(r0_0 % 96) + (r0_0 // 96)` walks `r0_0 // 96`: two accesses of one iteration space
    with different unit terms move data between layouts. Scalars (`(0)`) have none."""
    seen: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if not (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("tl.load", "tl.store")
            and node.args
            and isinstance(node.args[0], ast.BinOp)
            and isinstance(node.args[0].left, ast.Name)
        ):
            continue
        index = node.args[0].right
        if isinstance(index, ast.Call) and ast.unparse(index.func) == "tl.broadcast_to":
            index = index.args[0]  # tl.broadcast_to(r0_0, [XBLOCK, R0_BLOCK])
        unit = [
            ast.unparse(t)
            for t in _summands(index)
            if not (isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult))
            and not isinstance(t, ast.Constant)
            and any(isinstance(n, ast.Name) for n in ast.walk(t))
        ]
        if unit:
            seen.setdefault(node.args[0].left.id, set()).update(unit)
    return {name: frozenset(found) for name, found in seen.items()}


def _reloads(fn: ast.FunctionDef) -> dict[str, int]:
    """Per pointer, how many of the kernel's loops over its reduction load it beyond the first:
    a looped reduction that needs the row's statistic before it can use the row (a norm's
    mean, a row amax before the cast) walks the row again, once per statistic."""
    loops = [s for s in fn.body if isinstance(s, ast.For)]
    seen: dict[str, int] = {}
    for loop in loops:
        loaded = {
            node.args[0].left.id
            for node in ast.walk(loop)
            if isinstance(node, ast.Call)
            and ast.unparse(node.func) == "tl.load"
            and node.args
            and isinstance(node.args[0], ast.BinOp)
            and isinstance(node.args[0].left, ast.Name)
        }
        for name in loaded:
            seen[name] = seen.get(name, 0) + 1
    return {name: count - 1 for name, count in seen.items() if count > 1}


def _summands(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _summands(node.left) + _summands(node.right)
    return [node]


_CPP_SIGNATURE = re.compile(r'extern\s+"C"[^(]*\bkernel\s*\(([^)]*)\)', re.DOTALL)
_CPP_PARAM = re.compile(r"^(const\s+)?([\w:]+)\s*(\*?)\s*(\w+)$")


def parse_cpp_kernel(name: str, source: str) -> KernelSource:
    """A C++ kernel's parameters from its `extern "C" void kernel(const bfloat16* in_ptr0, ...)`."""
    match = _CPP_SIGNATURE.search(source)
    if match is None:
        raise CodeParseError(f'{name}: no extern "C" kernel signature')
    params = []
    for text in filter(None, (p.strip() for p in match.group(1).split(","))):
        m = _CPP_PARAM.match(" ".join(text.split()))
        if m is None:
            raise CodeParseError(f"{name}: cannot read C++ parameter {text!r}")
        _, ctype, star, pname = m.groups()
        params.append(
            Param(
                name=pname,
                dtype=dtype_name(ctype) if star else None,
                read=bool(star) and pname.startswith(("in_ptr", "in_out_ptr")),
                written=bool(star) and pname.startswith(("out_ptr", "in_out_ptr")),
            )
        )
    return KernelSource(name, KernelKind.CPP, tuple(params))


def _dict_entry(node: ast.expr, key: str) -> ast.expr | None:
    """The value node of `key` in a dict display (the metas hold calls literal_eval refuses)."""
    if not isinstance(node, ast.Dict):
        raise CodeParseError("kernel metadata is not a dict literal")
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


# ---- the call() function --------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    dtype: str
    shape: tuple[int, ...]


def _find_call(module: ast.Module) -> ast.FunctionDef:
    """`Runner.call(self, args)` (torch >= 2.9) or a module-level `call(args)`."""
    candidates = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    for cls in (n for n in module.body if isinstance(n, ast.ClassDef)):
        candidates += [n for n in cls.body if isinstance(n, ast.FunctionDef)]
    for fn in candidates:
        if fn.name == "call" and fn.args.args and fn.args.args[-1].arg == "args":
            return fn
    raise CodeParseError("no call(args) function in the output code")


def _graph_input_layouts(module: ast.Module) -> dict[str, _Layout]:
    """Graph inputs' shapes and dtypes from the benchmark harness `get_args()`."""
    fn = next(
        (n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "get_args"), None
    )
    layouts: dict[str, _Layout] = {}
    for stmt in fn.body if fn else ():
        if isinstance(stmt, ast.Assign) and _call_name(stmt.value) == "rand_strided":
            call = stmt.value
            dtype = next(k.value for k in call.keywords if k.arg == "dtype")  # type: ignore[attr-defined]
            layouts[_name_of(stmt.targets[0])] = _Layout(
                dtype_name(ast.unparse(dtype)), _int_tuple(call.args[0])
            )  # type: ignore[attr-defined]
    return layouts


class _CallWalker:
    """Walks `call()` statements in order, tracking buffers and collecting launches.

    Every buffer name maps to the storage it lives in (reinterpreted views, reused memory and
    in-place updates share it) so that a read can be told apart from a kernel reading back
    what it wrote itself (see `ParsedLaunch`).
    """

    def __init__(self, kernels: dict[str, KernelSource], inputs: dict[str, _Layout]) -> None:
        self.kernels = kernels
        self.layouts = dict(inputs)
        self.storage = {name: name for name in inputs}
        self.holds_data: set[str] = set(inputs)  # storages written by graph inputs or launches
        self.graph_inputs: tuple[str, ...] = ()
        self.launches: list[ParsedLaunch] = []
        self.collectives: list[ParsedCollective] = []
        # Outputs of a fallback that returns new buffers (`buf9 = aten.X.default(...)`),
        # awaiting the `assert_size_stride` that gives their shape: launch index, dtype.
        self.pending: dict[str, tuple[int, str]] = {}
        self.collected: set[str] = set()  # storages a collective wrote last

    def walk(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.With, ast.If)):
                self.walk(stmt.body)
            elif isinstance(stmt, ast.Assign):
                self._assign(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call(stmt.value)

    def _assign(self, stmt: ast.Assign) -> None:
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, (ast.Tuple, ast.List)):
            if _name_of(value) == "args":
                self.graph_inputs = tuple(_name_of(e) for e in target.elts)
            return
        name = _name_of(target)
        if isinstance(value, ast.Name) and value.id in self.layouts:  # buf4 = buf3  # reuse
            self._bind(name, self.layouts[value.id], base=value.id)
        elif isinstance(value, ast.Call):
            fname = _call_name(value)
            if fname.startswith("empty_strided"):
                self._bind(
                    name,
                    _Layout(dtype_name(ast.unparse(value.args[2])), _int_tuple(value.args[0])),
                    base=None,
                )
            elif fname == "reinterpret_tensor":
                self._bind(name, self._view(value), base=_name_of(value.args[0]))
            elif fname == "copy_if_misaligned":
                base = _name_of(value.args[0])
                self._bind(name, self.layouts[base], base=base)
            elif _collective_op(value) is not None:
                self._collective(value, result=name)
            elif (final := _final_reduce(value)) is not None:
                self._finish_reduction(name, *final)
            elif self._is_extern(value):
                self._extern(value, result=name)
        elif (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in self.pending
        ):  # buf10 = buf9[0]: one output of a fallback returning several
            launch, dtype = self.pending[value.value.id]
            index = ast.literal_eval(value.slice)
            self.pending[name] = (launch, _output_dtype(self.launches[launch].name, index, dtype))

    def _collective(self, call: ast.Call, *, result: str | None) -> None:
        """`bufN = ..._c10d_functional.all_gather_into_tensor.default(buf, 2, 'group')`, its
        in-place (`all_reduce_(buf, 'max', 'group')`) or out= forms."""
        op = _collective_op(call) or ""
        base = op.removesuffix("_out").removesuffix("_")
        source = self._access(call.args[0], None)
        consts = [a.value for a in call.args[1:] if isinstance(a, ast.Constant)]
        group = next((c for c in reversed(consts) if isinstance(c, str)), "")
        sizes = [c for c in consts if isinstance(c, int) and not isinstance(c, bool)]
        group_size = sizes[0] if sizes and base != "all_reduce" else None
        out = [k.value for k in call.keywords if k.arg == "out"]
        if out:
            output = self._access(out[0], None)
        elif result is not None:
            shape = _collective_shape(base, source.shape, group_size)
            layout = _Layout(source.dtype, shape)
            self._bind(result, layout, base=None)
            output = self._access(ast.Name(result), None)
        else:  # in place
            output = source
        self.holds_data.add(self.storage[output.name])
        self.collected.add(self.storage[output.name])
        self.collectives.append(
            ParsedCollective(base, source, output, group, group_size, len(self.launches))
        )

    def _finish_reduction(
        self, name: str, workspace: str, rows: int, cols: int, op: str, shape: tuple[int, ...]
    ) -> None:
        """`name = ws[...].view(rows, cols).op(dim=0).view(shape)`: the wrapper reduces a
        mix-order reduction's partial results with an ATen kernel of its own."""
        dtype = self.layouts[workspace].dtype
        self._bind(name, _Layout(dtype, shape), base=None)
        size = dtype_bytes(dtype)
        read = BufferAccess(workspace, dtype, (rows, cols), rows * cols * size)
        written = BufferAccess(name, dtype, shape, math.prod(shape) * size)
        self._record(f"aten.{op}", KernelKind.EXTERN, [read], [written], None, 0, read.nbytes)

    def _bind(self, name: str, layout: _Layout, *, base: str | None) -> None:
        self.layouts[name] = layout
        self.storage[name] = name if base is None else self.storage[base]

    def _call(self, call: ast.Call) -> None:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "run"
            and ast.unparse(func.value) in self.kernels
        ):
            self._launch(self.kernels[ast.unparse(func.value)], call.args)
        elif isinstance(func, ast.Name) and func.id in self.kernels:
            self._launch(self.kernels[func.id], call.args)
        elif _call_name(call) == "assert_size_stride" and _name_of(call.args[0]) in self.pending:
            self._resolve_pending(_name_of(call.args[0]), _int_tuple(call.args[1]))
        elif _collective_op(call) == "wait_tensor":
            return  # waits for a collective's result: no traffic of its own
        elif _collective_op(call) is not None:
            self._collective(call, result=None)
        elif self._is_extern(call):
            self._extern(call)

    @staticmethod
    def _is_extern(call: ast.Call) -> bool:
        return ast.unparse(call.func).startswith(("extern_kernels.", "torch.ops.", "aten."))

    def _launch(self, kernel: KernelSource, args: list[ast.expr]) -> None:
        if len(args) > len(kernel.params):
            raise CodeParseError(f"{kernel.name}: launched with more arguments than it declares")
        reads: list[BufferAccess] = []
        writes: list[BufferAccess] = []
        workspace = 0
        for param, arg in zip(kernel.params, args):
            if param.dtype is not None:
                access = self._access(arg, param.dtype)
                if param.read:
                    reads.append(access)
                if param.written:
                    writes.append(access)
                if param.name == WORKSPACE_PARAM:
                    workspace += access.nbytes
        self._record(
            kernel.name,
            kernel.kind,
            reads,
            writes,
            kernel.num_gb,
            _not_iterated(kernel, zip(kernel.params, args), self._access),
            workspace,
            changes_layout=_changes_layout(kernel, zip(kernel.params, args), self._access),
            numel=kernel.numel,
            arithmetic=kernel.arithmetic or 0,
            scattered=_scattered(kernel, zip(kernel.params, args), self._access),
            reloads=tuple(
                (self._access(arg, param.dtype).name, kernel.reloads[param.name])
                for param, arg in zip(kernel.params, args)
                if param.dtype is not None and param.name in kernel.reloads
            ),
        )

    def _resolve_pending(self, name: str, shape: tuple[int, ...]) -> None:
        """A fallback's output, now that its shape is known: a write of its launch."""
        index, dtype = self.pending.pop(name)
        self._bind(name, _Layout(dtype, shape), base=None)
        access = self._access(ast.Name(name), None)
        launch = self.launches[index]
        self.launches[index] = replace(launch, writes=(*launch.writes, access))
        self.holds_data.add(self.storage[name])

    def _extern(self, call: ast.Call, *, result: str | None = None) -> None:
        callee = ast.unparse(call.func)
        # extern_kernels._scaled_mm / torch.ops.aten._scaled_mm.default / aten.mm.default
        parts = callee.split(".")
        op = parts[1] if parts[0] == "extern_kernels" else parts[-2]
        out = [k.value for k in call.keywords if k.arg == "out"]
        inputs = [
            a
            for a in (*call.args, *(k.value for k in call.keywords if k.arg != "out"))
            if self._is_buffer(a)
        ]
        kind = KernelKind.EXTERN_GEMM if op in GEMM_OPS else KernelKind.EXTERN
        reads = [self._access(a, None) for a in inputs]
        self._record(
            callee,
            kind,
            reads,
            [self._access(a, None) for a in out],
            None,
            0,
            kernel_class=self._gemm_class(op, call) if kind is KernelKind.EXTERN_GEMM else None,
        )
        if result is not None:
            # Its outputs' shapes come with the assert_size_stride checks that follow; their
            # dtype is the first input's (see _output_dtype).
            self.pending[result] = (len(self.launches) - 1, reads[0].dtype if reads else "float32")

    def _gemm_class(self, op: str, call: ast.Call) -> KernelClass:
        """A gemm's mode: `_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype,
        use_fast_accum)` is float8; rowwise when a scale is a vector (a (M, 1) or (1, N) view),
        tensorwise when both are scalars (torchao's rowwise backward passes unit scalars and
        rescales after); use_fast_accum defaults to False as in ATen."""
        if op not in ("_scaled_mm", "_scaled_mm_v2"):
            return gemm_class(float8=False)
        keywords = {k.arg: k.value for k in call.keywords}
        fast = keywords.get("use_fast_accum", call.args[7] if len(call.args) > 7 else None)
        fast_accum = fast is not None and ast.literal_eval(fast) is True
        scales = [keywords.get(n) for n in ("scale_a", "scale_b")]
        scales = [
            s if s is not None else (call.args[i] if len(call.args) > i else None)
            for s, i in zip(scales, (2, 3))
        ]
        rowwise = any(
            s is not None and self._is_buffer(s) and math.prod(self._access(s, None).shape) > 1
            for s in scales
        )
        return gemm_class(float8=True, rowwise=rowwise, fast_accum=fast_accum)

    def _record(
        self,
        name: str,
        kind: KernelKind,
        reads: list[BufferAccess],
        writes: list[BufferAccess],
        num_gb: float | None,
        not_iterated: int,
        workspace: int = 0,
        *,
        kernel_class: KernelClass | None = None,
        changes_layout: bool = False,
        numel: int | None = None,
        scattered: frozenset[str] = frozenset(),
        reloads: tuple[tuple[str, int], ...] = (),
        arithmetic: int = 0,
    ) -> None:
        # A read of storage nothing has written yet is the kernel reading back its own output:
        # no memory traffic beyond the write (see ParsedLaunch).
        external = [a for a in reads if self.storage[a.name] in self.holds_data]
        unwritten = [a for a in _unique(reads) if a not in external]
        collected = [a for a in _unique(external) if self.storage[a.name] in self.collected]
        self.holds_data.update(self.storage[a.name] for a in writes)
        self.collected.difference_update(self.storage[a.name] for a in writes)
        self.launches.append(
            ParsedLaunch(
                name,
                kind,
                _unique(external),
                _unique(writes),
                num_gb,
                not_iterated,
                sum(a.nbytes for a in unwritten),
                workspace,
                sum(a.nbytes for a in collected),
                kernel_class,
                changes_layout,
                numel,
                scattered,
                reloads,
                arithmetic,
            )
        )

    def _is_buffer(self, node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in self.layouts) or (
            isinstance(node, ast.Call) and _call_name(node) == "reinterpret_tensor"
        )

    def _view(self, call: ast.Call) -> _Layout:
        base = self.layouts[_name_of(call.args[0])]
        return _Layout(base.dtype, _int_tuple(call.args[1]))

    def _access(self, arg: ast.expr, dtype: str | None) -> BufferAccess:
        if isinstance(arg, ast.Call) and _call_name(arg) == "reinterpret_tensor":
            name, layout = _name_of(arg.args[0]), self._view(arg)
        elif isinstance(arg, ast.Name) and arg.id in self.layouts:
            name, layout = arg.id, self.layouts[arg.id]
        else:
            raise CodeParseError(f"cannot tell which buffer {ast.unparse(arg)!r} is")
        dtype = layout.dtype if dtype is None else dtype
        return BufferAccess(name, dtype, layout.shape, math.prod(layout.shape) * dtype_bytes(dtype))


def _not_iterated(
    kernel: KernelSource,
    bound: Iterable[tuple[Param, ast.expr]],
    access: Callable[[ast.expr, str | None], BufferAccess],
) -> int:
    """Bytes of the views a Triton kernel receives beyond its iteration space.

    Inductor's `estimate_kernel_num_bytes` counts a buffer bigger than the kernel's iteration
    space as (distinct indices x iterated elements): the amax history's `[:-1]` slice reads 15
    of 16 floats. Counted once per direction, as kernel_num_gb counts in/out buffers twice.
    """
    if kernel.numel is None:
        return 0
    extra = 0
    for param, arg in bound:
        if param.dtype is None:
            continue
        view = access(arg, param.dtype)
        numel = view.nbytes // dtype_bytes(param.dtype)
        iterated = min(numel, kernel.indices.get(param.name, 1) * kernel.numel)
        extra += (numel - iterated) * dtype_bytes(param.dtype) * (param.read + param.written)
    return extra


def _changes_layout(
    kernel: KernelSource,
    bound: Iterable[tuple[Param, ast.expr]],
    access: Callable[[ast.expr, str | None], BufferAccess],
) -> bool:
    """Whether the buffers spanning the whole iteration space are walked along different
    unit-stride terms (one read row-major, another written column-major)."""
    if kernel.numel is None:
        return False
    units: set[str] = set()
    for param, arg in bound:
        if param.dtype is None or param.name not in kernel.unit_terms:
            continue
        view = access(arg, param.dtype)
        if view.nbytes // dtype_bytes(param.dtype) == kernel.numel:
            units |= kernel.unit_terms[param.name]
    return len(units) > 1


_REDUCING_KINDS = frozenset({KernelKind.REDUCTION, KernelKind.PERSISTENT_REDUCTION})


def _scattered(
    kernel: KernelSource,
    bound: Iterable[tuple[Param, ast.expr]],
    access: Callable[[ast.expr, str | None], BufferAccess],
) -> frozenset[str]:
    """Full-size buffers a reduction walks along its strided index: the ones whose loads or
    stores have no unit-stride term in the index its threads run along.

    A row reduction (hint inner or default) lays its threads along the row (`r0_*`) and runs
    one or a few rows per program; a store indexed `x0 + M*r0_1` (the transposed float8 copy
    `_scaled_mm` wants, written from the row being cast) then puts each thread's element in
    another row of the output, one element per 32-byte sector, and nothing in the program can
    gather them. An outer reduction lays its threads along `x`. Pointwise kernels are tiled in
    2D by Inductor when they transpose (class pointwise_transpose), so they are not here."""
    if kernel.kind not in _REDUCING_KINDS or kernel.numel is None:
        return frozenset()
    along = "x" if kernel.reduction_hint in ("outer", "outer_tiny") else "r"
    found = set()
    for param, arg in bound:
        terms = kernel.unit_terms.get(param.name)
        if param.dtype is None or not terms:
            continue
        view = access(arg, param.dtype)
        if view.nbytes // dtype_bytes(param.dtype) != kernel.numel:
            continue
        if not any(t.startswith(along) for t in terms):
            found.add(view.name)
    return frozenset(found)


def classify(launch: ParsedLaunch, source: KernelSource | None, *, split: bool) -> KernelClass:
    """A launch's class from its kernel's code (see timing/kernel_classes.py), in this order:
    atomics; split reductions (a workspace of partial results, or a reduction finishing
    another's partials: `split`); a reduction by Inductor's reduction hint (outer: along
    strided columns, as a column amax over M), else persistent or inner; a pointwise kernel
    that changes layout; pointwise. A reduction that also writes a transposed copy keeps its
    reduction class (`changes_layout` still says so). Extern gemms were classed by mode."""
    if launch.kernel_class is not None:
        return launch.kernel_class
    if launch.kind is KernelKind.CPP:
        return KernelClass.CPU
    if source is not None and source.atomic:
        return KernelClass.ATOMIC
    if split or launch.bytes_workspace:
        return KernelClass.REDUCTION_SPLIT
    if launch.kind is KernelKind.EXTERN:
        return KernelClass.EXTERN
    if launch.kind is KernelKind.TEMPLATE:
        # A Triton gemm template (max-autotune); its scales are not read here.
        float8 = source is not None and any(
            (p.dtype or "").startswith("float8") for p in source.params
        )
        return gemm_class(float8=float8)
    if launch.kind in _REDUCING_KINDS:
        hint = source.reduction_hint if source is not None else None
        if hint in ("outer", "outer_tiny"):
            return KernelClass.REDUCTION_OUTER
        if launch.kind is KernelKind.PERSISTENT_REDUCTION:
            return KernelClass.REDUCTION_PERSISTENT
        return KernelClass.REDUCTION_INNER
    if launch.changes_layout:
        return KernelClass.POINTWISE_TRANSPOSE
    return KernelClass.POINTWISE


def _classified(
    launches: list[ParsedLaunch], kernels: Mapping[str, KernelSource]
) -> tuple[ParsedLaunch, ...]:
    """Every launch with its class. A split reduction shows as a pair: a reduction writing a
    small buffer of partial results that a later reduction takes as its whole iteration
    space (tensorwise amax over a big tensor: (splits,) partial maxima, then their max)."""
    split: set[int] = set()
    written_by: dict[str, int] = {}
    for index, launch in enumerate(launches):
        if launch.kind in _REDUCING_KINDS and launch.numel is not None:
            for read in launch.reads:
                writer = written_by.get(read.name)
                if writer is not None and math.prod(read.shape) == launch.numel:
                    split |= {writer, index}
        if launch.kind in _REDUCING_KINDS:
            for write in launch.writes:
                if launch.numel is not None and math.prod(write.shape) < launch.numel:
                    written_by[write.name] = index
    return tuple(
        replace(
            launch,
            kernel_class=classify(launch, kernels.get(launch.name), split=index in split),
        )
        for index, launch in enumerate(launches)
    )


def _final_reduce(call: ast.Call) -> tuple[str, int, int, str, tuple[int, ...]] | None:
    """`ws[a:b].view(R, C).op(dim=0).view([...])` (Inductor's mix-order reduction finishing
    its partial results in the wrapper) as (ws, R, C, op, result shape); None otherwise."""
    shape = None
    func = call.func
    if _call_name(call) == "view" and isinstance(func, ast.Attribute):
        if not isinstance(func.value, ast.Call):
            return None
        shape = tuple(ast.literal_eval(call.args[0]))  # the trailing view: the result's shape
        call = func.value
        func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _FINAL_REDUCTIONS:
        return None
    view = func.value
    if not (isinstance(view, ast.Call) and _call_name(view) == "view"):
        return None
    sliced = view.func.value  # type: ignore[attr-defined]
    if not (isinstance(sliced, ast.Subscript) and isinstance(sliced.value, ast.Name)):
        return None
    rows, cols = (ast.literal_eval(a) for a in view.args)
    return sliced.value.id, rows, cols, func.attr, shape or (cols,)


def _output_dtype(op: str, index: int, dtype: str) -> str:
    """Dtype of output `index` of a fallback whose outputs follow its first input's dtype,
    except SDPA's logsumexp (output 1 of the forward ops), kept in float32."""
    if "_scaled_dot_product" in op and "backward" not in op and index == 1:
        return "float32"
    return dtype


def _collective_op(call: ast.Call) -> str | None:
    """`all_gather_into_tensor` for `torch.ops._c10d_functional.all_gather_into_tensor.default`."""
    parts = ast.unparse(call.func).split(".")
    if "_c10d_functional" not in parts or parts.index("_c10d_functional") + 1 >= len(parts):
        return None
    return parts[parts.index("_c10d_functional") + 1]


def _collective_shape(op: str, shape: tuple[int, ...], group_size: int | None) -> tuple[int, ...]:
    """A collective's result shape: all-gather stacks dim 0, reduce-scatter splits it."""
    if (
        not shape
        or group_size is None
        or op not in ("all_gather_into_tensor", "reduce_scatter_tensor")
    ):
        return shape
    if op == "all_gather_into_tensor":
        return (shape[0] * group_size, *shape[1:])
    if shape[0] % group_size:
        raise CodeParseError(f"reduce_scatter of dim 0 {shape[0]} over {group_size} ranks")
    return (shape[0] // group_size, *shape[1:])


_FINAL_REDUCTIONS = frozenset({"sum", "amax", "amin", "prod"})


def _unique(accesses: list[BufferAccess]) -> tuple[BufferAccess, ...]:
    """Each buffer once per kernel, even when passed twice."""
    first: dict[str, BufferAccess] = {}
    for access in accesses:
        first.setdefault(access.name, access)
    return tuple(first.values())


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    raise CodeParseError(f"expected a name, got {ast.unparse(node)!r}")


def _call_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return ast.unparse(node.func).rsplit(".", 1)[-1]
    return ""


def _int_tuple(node: ast.expr) -> tuple[int, ...]:
    value = ast.literal_eval(node)
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
        raise CodeParseError(f"expected a static shape, got {ast.unparse(node)!r}")
    return value
