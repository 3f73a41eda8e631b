"""What a compiled block saves for the backward, read off its partitioned graphs: the check of
training/memory.py's saved-activation term for compiled blocks (`RunConfig.blocks_compiled`).

profiler/block.py's block, compiled as torchtitan compiles it, traced without computing, and
the tensors its partitioned forward hands its backward read off the graphs (`saved_tensors`).
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from f8roof.profiler import codegen_only
from f8roof.profiler.block import (
    built_block,
)
from f8roof.profiler.capture import CaptureError, GraphKind, _Recorder
from f8roof.training.block import BlockSpec
from f8roof.training.checkpointing import SacPolicy


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a compiled block's forward hands its backward (AOTAutograd's partition).

    `op`: the op that computed its data (through views and getitem: a saved `permute` of q is
    its projection's `aten.mm`); `input` for the block's input and its weights. `bytes`: the
    storage it keeps alive, 0 where an earlier saved tensor is a view of the same storage or
    where it is no tensor. `activation`: not a weight nor computed from weights alone (a cast,
    an amax): computed from the block's input, or a constant (what grows with tokens)."""

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


@contextlib.contextmanager
def traced_block(
    spec: BlockSpec, recipe: str | None, sac: SacPolicy | None, where: str
) -> Iterator[_Recorder]:
    """One rank's block built as `capture_block` builds it, its forward and backward traced on
    CPU by an inner compiler that only allocates outputs (nothing computes, so the dims may be
    a real model's); the recorder holds both graphs, inside the build (Inductor's codegen of
    them needs its settings). `where` names the block in compile errors."""
    recorder = _Recorder()
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
        yield recorder


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
    where = f"{spec.name or 'block'} {recipe or 'bf16'} saved tensors"
    with traced_block(spec, recipe, sac, where) as recorder:
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
    # what is computed from weights alone (every input a weight's); the rest is an activation,
    # a constant fill included (an MoE's combine keeps the zeros of the tokens' shape it
    # scatters into)
    weights = {p for p, flag in zip(placeholders, from_input) if not flag}
    for node in forward.nodes:
        inputs = node.all_input_nodes
        if node.op != "placeholder" and inputs and all(i in weights for i in inputs):
            weights.add(node)
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
                activation=node not in weights and not rng,
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
