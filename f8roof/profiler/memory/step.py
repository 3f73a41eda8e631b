"""One training step's peak memory per GPU as torch itself counts it: the checks of
training/memory.py's whole-step peak, two ways.

Counted (`tracked_peak`): torch's `FSDPMemTracker` (torch/distributed/_tools/fsdp2_mem_tracker.py) follows every tensor
a step allocates, by category (sharded and unsharded parameters, gradients, activations,
temporaries, optimizer states), through FSDP2's hooks. Here it runs under `FakeTensorMode` on
a fake process group, so a 70B model at its real sizes costs no memory: a whole torchtitan llama
(embedding, every block of profiler/block.py, final norm, output) parallelized as torchtitan
does it (TP with sequence and loss parallel, the block's checkpointing, FSDP2 per block and at
the root, the last block kept unsharded), trained eagerly for two steps (forward,
loss-parallel cross entropy on the fp32 logits, backward, fused AdamW, zero_grad); the second
step's peak is read, its optimizer states in place. What the tracker cannot see: torch.compile
(which skips itself under a dispatch mode such as the tracker: the block's compiled buffers and
saved tensors are not these; `beside_the_model` sets it beside memory.py's eager count), the
caching allocator's reserve over allocated bytes, the rotary embedding (left out of
profiler/block.py's block), and temporaries inside torchao's float8 matmul (the tracker sees the
tensors torch dispatch returns).

Measured (`measured_peak`, a GPU session): the same rank trained for real on one device, its
blocks compiled, and the caching allocator's allocated and reserved peaks read: what the
tracker cannot see, included.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from f8roof.profiler import torchao_float8
from f8roof.profiler.block import (
    MESH_DIMS,
    BlockModule,
    Checkpointed,
    _tp_plan,
    fake_world,
    sac_context,
    torchtitan_inductor_settings,
)
from f8roof.profiler.capture import CaptureError
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import torchao_recipe_name
from f8roof.training.block import BlockSpec, Recompute
from f8roof.training.catalog import Architecture
from f8roof.training.checkpointing import sac_policy
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
