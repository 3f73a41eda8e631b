"""Memory as torch itself counts it: the check of training/memory.py, two ways.

What a compiled block saves for the backward (`saved_activations`): profiler/block.py's block,
compiled as torchtitan compiles it, traced without computing, and the tensors its partitioned
forward hands its backward read off the graphs (`saved_tensors`); memory.py's saved term
models what they hold.

The peak of one training step (`tracked_peak`): torch's `FSDPMemTracker` (torch/distributed/_tools/fsdp2_mem_tracker.py) follows every tensor
a step allocates, by category (sharded and unsharded parameters, gradients, activations,
temporaries, optimizer states), through FSDP2's hooks. Here it runs under `FakeTensorMode` on
a fake process group, so a 70B model at its real sizes costs no memory: a whole torchtitan llama
(embedding, every block of profiler/block.py, final norm, output) parallelized as torchtitan
does it (TP with sequence and loss parallel, the block's checkpointing, FSDP2 per block and at
the root, the last block kept unsharded), trained eagerly for two steps (forward,
loss-parallel cross entropy on the fp32 logits, backward, fused AdamW, zero_grad); the second
step's peak is read, its optimizer states in place.

What the tracker cannot see: torch.compile (which skips itself under a dispatch mode such as
the tracker: the block's compiled buffers and saved tensors are not these; `beside_the_model`
sets it beside memory.py's eager count), the caching allocator's reserve over
allocated bytes, the rotary embedding (left out of profiler/block.py's block), and temporaries
inside torchao's float8 matmul (the tracker sees the tensors torch dispatch returns).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import math
import operator
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from f8roof.hardware.presets import GPU
from f8roof.profiler import codegen_only, torchao_float8
from f8roof.profiler.block import (
    MESH_DIMS,
    BlockModule,
    Checkpointed,
    _tp_plan,
    built_block,
    fake_world,
    sac_context,
    torchtitan_inductor_settings,
)
from f8roof.profiler.capture import CaptureError, GraphKind, _Recorder
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import torchao_recipe_name
from f8roof.training.block import BlockSpec, Recompute
from f8roof.training.catalog import Architecture
from f8roof.training.checkpointing import SacPolicy, sac_policy
from f8roof.training.memory import MemoryPeak, memory_estimate

STEPS = 2  # the first creates AdamW's states; the second's peak is the one a run repeats


@dataclass(frozen=True)
class TrackedPeak:
    """One step's peak per GPU as torch's tracker counts it."""

    total_bytes: int
    by_category: dict[str, int]  # the tracker's categories at the peak


class _Model(nn.Module):
    """torchtitan's llama around profiler/block.py's block: embedding, blocks, norm, output."""

    def __init__(self, spec: BlockSpec, *, layers: int, vocab: int) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, spec.dim)
        self.layers = nn.ModuleDict({str(i): BlockModule(spec) for i in range(layers)})
        self.norm = nn.RMSNorm(spec.dim)
        self.output = nn.Linear(spec.dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h)
        return self.output(self.norm(h))


def _parallelize(
    model: _Model, spec: BlockSpec, mesh: Any, recipe: Recipe | None, *, compiled: bool = False
) -> None:
    """torchtitan's apply_tp, apply_ac, apply_compile (`compiled`: each block, fullgraph) and
    apply_fsdp, in that order."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    par = spec.parallel
    if par.tp > 1:
        root_plan = {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "output": ColwiseParallel(
                input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False
            ),
        }
        parallelize_module(model, mesh["tp"], root_plan)
        float8_tp = recipe is not None and recipe.name == "tensorwise"
        for block in model.layers.values():
            parallelize_module(block, mesh["tp"], _tp_plan(float8_tp=float8_tp, mlp=spec.mlp))
    for name, block in list(model.layers.items()):
        if par.recompute is Recompute.FULL:
            model.layers[name] = Checkpointed(block)
        elif par.recompute is Recompute.SELECTIVE:
            model.layers[name] = Checkpointed(block, context_fn=sac_context(sac_policy()))
        if compiled:
            model.layers[name] = cast(nn.Module, torch.compile(model.layers[name], fullgraph=True))
    if par.fsdp_ranks > 1:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        last = len(model.layers) - 1
        for name, block in model.layers.items():
            fully_shard(
                block,
                mesh=mesh["dp_shard"],
                mp_policy=policy,
                reshard_after_forward=int(name) < last,
            )
        fully_shard(model, mesh=mesh["dp_shard"], mp_policy=policy)


def tracked_peak(
    spec: BlockSpec, *, layers: int, vocab: int, recipe: str | None = None
) -> TrackedPeak:
    """The peak of one step of `layers` blocks of `spec` (its tokens per data-parallel rank,
    its parallel setup) and a `vocab`-wide embedding and output, in bf16 (`recipe` None) or
    with every block linear converted by torchao's `recipe` (torchtitan's filter: not the
    output)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh

    par = spec.parallel
    float8 = Recipe.from_name(recipe) if recipe is not None else None
    with fake_world(par.tp * par.fsdp_ranks), _sharding_outside_the_tracker():
        mesh = init_device_mesh("cpu", (par.fsdp_ranks, par.tp), mesh_dim_names=("dp_shard", "tp"))
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = _Model(spec, layers=layers, vocab=vocab)
            _convert(model, float8)
            _parallelize(model, spec, mesh, float8)
            step = _train_step(model, spec, vocab, "cpu")
            with _collected_between_steps():
                for _ in range(STEPS - 1):
                    step()
                gc.collect()
                tracker = FSDPMemTracker(model, step.optimizer)
                tracker.track_inputs((step.tokens, step.labels))
                with tracker:
                    step()
            peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    by_category = {str(getattr(k, "value", k)): int(v) for k, v in peak.items()}
    return TrackedPeak(by_category.pop("Total"), by_category)


@dataclass(frozen=True)
class MeasuredPeak:
    """One rank's step run for real, as the caching allocator saw it (`torch.cuda.max_memory_*`
    after the first step): allocated and reserved (torchtitan's `memory:` line) bytes; None on
    CPU, which has no caching allocator. `expandable`: the allocator's expandable_segments."""

    device: str
    allocated_bytes: int | None
    reserved_bytes: int | None
    expandable: bool
    step_seconds: float


def measured_peak(
    spec: BlockSpec,
    *,
    layers: int,
    vocab: int,
    recipe: str | None = None,
    device: str = "cuda",
    snapshot: str | None = None,
) -> MeasuredPeak:
    """One rank of `spec`'s run, trained for real on one device: the whole model at its real
    size on a fake process group (collectives move nothing; every buffer they fill is
    allocated), built as torchtitan builds it (on meta, parallelized, blocks compiled, then
    materialized), two steps, the second's peaks read. What the tracker cannot see is in it:
    the compiled blocks' buffers and the caching allocator's reserve. `snapshot`: a path for
    the second step's allocator history (`torch.cuda.memory._dump_snapshot`, CUDA only), what
    lies at the peak and which line allocated it."""
    import time

    from torch.distributed.device_mesh import init_device_mesh

    par = spec.parallel
    float8 = Recipe.from_name(recipe) if recipe is not None else None
    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise CaptureError("a measured peak needs a CUDA device; none is visible")
    with (
        fake_world(par.tp * par.fsdp_ranks),
        torch._inductor.config.patch(torchtitan_inductor_settings(recipe, par)),
        torchao_float8.inductor_patch_scope(),
    ):
        mesh = init_device_mesh(device, (par.fsdp_ranks, par.tp), mesh_dim_names=MESH_DIMS)
        with torch.device("meta"):
            model = _Model(spec, layers=layers, vocab=vocab)
        _convert(model, float8)
        _parallelize(model, spec, mesh, float8, compiled=True)
        model.to_empty(device=device)
        with torch.no_grad():
            for p in model.parameters():
                local = p.to_local() if hasattr(p, "to_local") else p
                local.normal_(0.0, 0.02) if local.dim() > 1 else local.fill_(1.0)
        step = _train_step(model, spec, vocab, device)
        with _collected_between_steps():
            for _ in range(STEPS - 1):
                step()
            gc.collect()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                if snapshot:
                    torch.cuda.memory._record_memory_history(
                        context="alloc", stacks="python", max_entries=100_000
                    )
            started = time.monotonic()
            step()
            if cuda:
                torch.cuda.synchronize()
            seconds = time.monotonic() - started
    if not cuda:
        return MeasuredPeak(device, None, None, False, seconds)
    if snapshot:
        torch.cuda.memory._dump_snapshot(snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    return MeasuredPeak(
        device,
        torch.cuda.max_memory_allocated(),
        torch.cuda.max_memory_reserved(),
        expandable_segments(),
        seconds,
    )


def expandable_segments() -> bool:
    """Whether this process's caching allocator maps expandable segments (set before CUDA
    starts, as torchtitan's run_train.sh does)."""
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + os.environ.get("PYTORCH_ALLOC_CONF", "")
    return "expandable_segments:True" in conf


def _convert(model: _Model, recipe: Recipe | None) -> None:
    """torchao's float8 on every block linear, the output kept (torchtitan's filter)."""
    if recipe is not None:
        ao = torchao_float8.import_float8()
        config = ao.Float8LinearConfig.from_recipe_name(torchao_recipe_name(recipe))
        ao.convert_to_float8_training(
            model, config=config, module_filter_fn=lambda _, fqn: fqn != "output"
        )


@dataclass
class _TrainStep:
    """torchtitan's train step (train.py @fcdbe91c1): forward, the loss on the fp32 logits
    (loss parallel under TP), `del pred` before the backward, fused AdamW, zero_grad."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    tokens: torch.Tensor
    labels: torch.Tensor
    loss_parallel: bool

    def __call__(self) -> None:
        from torch.distributed.tensor.parallel import loss_parallel

        with loss_parallel() if self.loss_parallel else contextlib.nullcontext():
            pred = self.model(self.tokens)
            loss = F.cross_entropy(pred.flatten(0, 1).float(), self.labels.flatten(0, 1))
            del pred  # torchtitan frees the bf16 logits before the backward
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def _train_step(model: nn.Module, spec: BlockSpec, vocab: int, device: str) -> _TrainStep:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    shape = (spec.batch, spec.seq_len)
    tokens = torch.randint(0, vocab, shape, device=device)
    labels = torch.randint(0, vocab, shape, device=device)
    return _TrainStep(model, optimizer, tokens, labels, spec.parallel.tp > 1)


@contextlib.contextmanager
def _collected_between_steps() -> Iterator[None]:
    """Python's cyclic garbage collector off, as torchtitan runs it (tools/utils.py's
    GarbageCollection: `gc.disable()`, a collection every `gc_freq` steps between them): the
    cycles torchao's float8 autograd leaves live to the step's end, not to whenever the
    process's allocation history would have triggered a collection inside it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def beside_the_model(
    arch: Architecture, spec: BlockSpec, *, recipe: str | None, gpu_memory_bytes: int
) -> tuple[MemoryPeak, TrackedPeak]:
    """training/memory.py's peak for `arch` run as `spec` says, and torch's count of the same
    step: every block linear converted by `recipe` (None: bf16), lm_head kept, as torchtitan
    converts; the blocks and the vocabulary read off `arch`'s linears."""
    head = next(linear for linear in arch.linears if linear.fqn == "lm_head")
    blocks = [linear.fqn for linear in arch.linears if linear is not head]
    layers = max(linear.count for linear in arch.linears if linear is not head)
    estimate = memory_estimate(
        arch,
        tokens=spec.tokens,
        # the tracker runs the step eagerly: the blocks' and the loss's eager saved tensors
        run=replace(spec.parallel, loss_compiled=False, blocks_compiled=False),
        recipe=recipe or "tensorwise",
        converted=blocks,
        gpu_memory_bytes=gpu_memory_bytes,
    )
    modelled = estimate.bf16 if recipe is None else estimate.fp8
    return modelled, tracked_peak(spec, layers=layers, vocab=head.N, recipe=recipe)


class _sharding_outside_the_tracker:
    """Two places where DTensor computes under the tracker's fake mode what is not memory:
    the device mesh's rank layout (which fails on fake tensors), and sharding propagation,
    which runs each op on global-shape fake tensors the tracker would count. Each gets a fake
    mode of its own while the tracker runs (torch 2.13's internals; restored on exit)."""

    def __enter__(self) -> None:
        import torch.distributed.tensor._sharding_prop as sharding_prop
        from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
        from torch.distributed.device_mesh import DeviceMesh

        self._concatenate = DeviceMesh.__dict__["_concatenate"]
        self._detect = sharding_prop.detect_fake_mode
        concatenate = self._concatenate.__func__

        def outside(*args: Any, **kwargs: Any) -> Any:
            with unset_fake_temporarily():
                return concatenate(*args, **kwargs)

        DeviceMesh._concatenate = staticmethod(outside)  # type: ignore[method-assign]
        own = FakeTensorMode(allow_non_fake_inputs=True)
        sharding_prop.detect_fake_mode = lambda *_, **__: own

    def __exit__(self, *_: object) -> None:
        import torch.distributed.tensor._sharding_prop as sharding_prop
        from torch.distributed.device_mesh import DeviceMesh

        DeviceMesh._concatenate = self._concatenate  # type: ignore[method-assign]
        sharding_prop.detect_fake_mode = self._detect


# ---- what a compiled block saves for the backward ------------------------------------------


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a compiled block's forward hands its backward (AOTAutograd's partition).

    `op`: the op that computed its data (through views and getitem: a saved `permute` of q is
    its projection's `aten.mm`); `input` for the block's input and its weights. `bytes`: the
    storage it keeps alive, 0 where an earlier saved tensor is a view of the same storage or
    where it is no tensor. `activation`: computed from the block's input (what grows with
    tokens); else a weight or what is computed from weights alone (a cast, an amax)."""

    name: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    activation: bool


@dataclass(frozen=True)
class SavedActivations:
    """What one rank's compiled block saves for the backward: `spec`'s dims, TP and
    checkpointing, `recipe` (None: bf16)."""

    spec: BlockSpec
    recipe: str | None
    tensors: tuple[SavedTensor, ...]

    @property
    def activation_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors if t.activation)

    @property
    def from_weights_bytes(self) -> int:
        """What the forward computed from weights alone and saved (float8 copies, scales);
        the weights themselves, graph inputs, are FSDP's (or the model's) memory."""
        return sum(t.bytes for t in self.tensors if not t.activation and t.op != "input")

    @property
    def bytes_per_token(self) -> float:
        """Saved activation bytes per token of the data-parallel rank (`BlockSpec.tokens`)."""
        return self.activation_bytes / self.spec.tokens


def saved_activations(
    spec: BlockSpec, *, recipe: str | None, sac: SacPolicy | None = None
) -> SavedActivations:
    """Compile one rank's block as `capture_block` does (torchtitan's TP plan, checkpointing
    and `torch.compile`; FSDP2 around it) and read what its partitioned forward saves.

    Nothing computes: the graphs are traced on CPU with an inner compiler that only allocates
    outputs, so the dims may be a real model's. The partition read is the one Inductor's
    codegen (`device="codegen"`) generates CUDA code from. Under selective checkpointing the
    policy marks what is saved; elsewhere AOTAutograd's min-cut partitioner chooses, and may
    recompute cheap pointwise ops (a norm's output from its input) in the backward."""
    recorder = _Recorder()
    where = f"{spec.name or 'block'} {recipe or 'bf16'} saved tensors"
    with built_block(
        spec,
        recipe,
        recorder,
        where,
        inner=codegen_only.no_compute_inner,
        initialize=False,
        sac=sac,
    ) as built:
        built.module(built.x).backward(built.grad)
    graphs = {graph.kind: graph for graph in recorder.graphs}
    if set(graphs) != {GraphKind.FWD, GraphKind.BWD} or len(recorder.graphs) != 2:
        raise CaptureError(f"{where}: expected one forward and one backward graph")
    forward = graphs[GraphKind.FWD].module.graph
    # the block's input by its shape (FSDP2's root hook hands the graph a copy of `built.x`;
    # weights and norms are 1-D and 2-D)
    shape = (spec.batch, spec.local_seq_len, spec.dim)
    inputs = [
        tuple(p.meta["val"].shape) == shape
        if isinstance(p.meta.get("val"), torch.Tensor)
        else False
        for p in forward.find_nodes(op="placeholder")
    ]
    if sum(inputs) != 1:
        raise CaptureError(f"{where}: {sum(inputs)} graph inputs of the block input's shape")
    tensors = saved_tensors(forward, graphs[GraphKind.BWD].module.graph, inputs)
    return SavedActivations(spec, recipe, tensors)


def saved_tensors(
    forward: torch.fx.Graph, backward: torch.fx.Graph, from_input: Sequence[bool]
) -> tuple[SavedTensor, ...]:
    """The forward's outputs the backward takes as inputs: AOTAutograd returns the user's
    outputs first and the saved values last, and the backward's placeholders are the saved
    values (named after their forward nodes) then the outputs' gradients (`tangents_*`).
    `from_input`: per forward placeholder, whether it is the block's input."""
    wanted = [p.name for p in backward.find_nodes(op="placeholder")]
    wanted = [name for name in wanted if not name.startswith("tangents")]
    returned = list(forward.find_nodes(op="output")[0].args[0])
    saved = returned[len(returned) - len(wanted) :]
    names = [getattr(node, "name", None) for node in saved]
    # the RNG state AOTAutograd keeps for a checkpointed region is renamed on the way
    if any(w != n and not w.startswith("rng_state") for w, n in zip(wanted, names)):
        raise CaptureError(f"the backward's saved inputs {wanted} are not the forward's {names}")
    placeholders = forward.find_nodes(op="placeholder")
    activation = {p for p, flag in zip(placeholders, from_input) if flag}
    for node in forward.nodes:
        if node.op != "placeholder" and any(i in activation for i in node.all_input_nodes):
            activation.add(node)
    seen: set[torch.fx.Node] = set()
    out = []
    for node in saved:
        base = _storage_of(node)
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            # a size (none under dynamic=False) or an object a checkpointed region passes
            # through (a process group): no memory of the block's
            kind = type(value).__name__
            out.append(SavedTensor(node.name, "no tensor", (), kind, 0, False))
            continue
        op = _computed_by(base)
        # the RNG state a checkpointed region replays (a CPU generator's here, CUDA's philox
        # seed and offset on a GPU): no activation
        rng = "rng_state" in op
        whole = base.meta["val"]
        nbytes = 0 if base in seen or rng else whole.untyped_storage().nbytes()
        seen.add(base)
        out.append(
            SavedTensor(
                name=node.name,
                op=op,
                shape=tuple(int(d) for d in value.shape),
                dtype=str(value.dtype).removeprefix("torch."),
                bytes=int(nbytes),
                activation=node in activation and not rng,
            )
        )
    return tuple(out)


def _storage_of(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose output's storage `node` views: through view ops and a getitem of a
    view op's list (split); a getitem of a multi-output op is a tensor of its own."""
    while node.op == "call_function":
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node):
            return node
        split = node.target is operator.getitem and getattr(source.target, "is_view", False)
        if not (split or getattr(node.target, "is_view", False)):
            return node
        node = source
    return node


def _computed_by(node: torch.fx.Node) -> str:
    """The op that wrote a storage: a getitem's multi-output op (SDPA's output and logsumexp),
    `input` for a graph input."""
    if node.op == "placeholder":
        return "input"
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return str(node.target)


# ---- what a compiled block holds while it runs ---------------------------------------------

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
                if storage.name not in self.itemsizes:
                    raise self.fail(value, f"no dtype for {storage.name} among Inductor's buffers")
                storage.itemsize = self.itemsizes[storage.name]
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
    recorder = _Recorder()
    where = f"{spec.name or 'block'} {recipe or 'bf16'} buffers"
    with built_block(
        spec,
        recipe,
        recorder,
        where,
        inner=codegen_only.no_compute_inner,
        initialize=False,
        sac=sac,
    ) as built:
        built.module(built.x).backward(built.grad)
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
