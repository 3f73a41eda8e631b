"""Peak memory per GPU of one training step, bf16 against float8, from the same `RunConfig` and
catalog as the step's time; and what float8's savings buy (a cheaper recompute mode, a larger
local batch). Pure: bytes from shapes, no torch, no device.

The run is torchtitan's (parallelize_llama.py and train.py @fcdbe91c1, 2025-03-25, the day
pytorch/pytorch#149990 was filed) under FSDP2 and torchao:

- states, sharded over TP x FSDP ranks (FSDP2 `fully_shard` with
  `MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`): fp32 parameters (the
  master copy), fp32 gradients (the reduce-scatter runs in `mixed_precision_reduce = float32`
  and the sharded grad keeps the parameter's dtype), AdamW's exp_avg and exp_avg_sq in fp32
  (torchtitan's fused AdamW: no temporaries). `optimizers.zero_grad()` opens every step
  (set_to_none), so the gradients exist only from the backward on, or, under gradient
  accumulation (`RunConfig.accumulation`), from the first pass's backward through every later
  pass (a pass's activations are as without it). Without FSDP the model
  trains in fp32 under autocast, the same 16 bytes per parameter on one rank.
- weights in flight: FSDP2 all-gathers a block's bf16 weights before its forward and again
  before its backward, and prefetches the next block's, so two blocks are unsharded at once;
  torchtitan keeps the last block and the root (embedding, final norm, output) unsharded
  between forward and backward. With torchao's float8 all-gather (tensorwise) the converted
  weights travel and stay unsharded in float8: one byte instead of two. Without FSDP, autocast's
  bf16 weight copies are saved for the backward (tensorwise: the float8 casts instead).
- activations saved for the backward, per block, by the recompute mode (`Recompute`). The
  blocks compiled (`RunConfig.blocks_compiled`, torchtitan's `compile`), AOTAutograd's
  partition of each block's graph decides, read off the graphs of profiler/block.py's block
  (profiler/memory/saved.py's `saved_activations`, scripts/saved_activations.py, torch 2.13):
  - none, compiled: the min-cut partitioner keeps both norms' inputs and their rsqrt, the
    outputs eager keeps but SiLU's (recomputed from the gate's), SDPA's output once (the
    output projection reads it, no copy) and logsumexp; of the linears' inputs, in bf16 the
    norms' outputs and the activation's output, in float8 without TP none (the backward
    recasts from the norm's input and the gate's and up's outputs), under TP the all-gathered
    inputs in float8 (and, tensorwise, the row-parallel ones'). Under TP, float8 also keeps
    float8 copies of the converted weights (`_keeps_float8_weight`): a block's worth of bytes
    that does not grow with tokens;
  - selective, compiled: as eager below, but the MLP's down projection's output and its
    reduce-scatter's, which no gradient reads, are not kept; rowwise keeps the fp32 row
    scales of the kept gemms' inputs (4 bytes a row each);
  - none, eager: what autograd saves in torchtitan's llama block: both norms' inputs, each
    linear's input once (q/k/v and gate/up share theirs), the outputs rope/SDPA and SiLU-mul
    keep (every linear's output but the row-parallel ones), SDPA's output and logsumexp,
    SiLU's output.
    torchao's `matmul_with_hp_or_float8_args.forward` (pytorch/ao@40a686779, 2025-03-25,
    torchao/float8/float8_linear.py) saves `(input_hp, weight_hp_t)` as given: tensorwise
    casts the weight before the call and, under TP, torchao's Float8ColwiseParallel /
    Float8RowwiseParallel cast the input before the all-gather, so tensorwise saves both in
    float8; rowwise (axiswise) saves the bf16 input and weight.
  - selective, eager: torchtitan's per-op SAC (training/checkpointing.py's policy): the
    block's input, the outputs of every second matmul, SDPA's outputs and the
    reduce-scatters'; the rest is recomputed. float8 linears show SAC aten.mm, so the same tensors are kept in both.
  - full: each checkpointed block keeps its input only (sequence-sharded under TP).
  - MoE blocks, compiled without TP and EP (profiler/moe.py's MoE, read off qwen3-30b-a3b's
    graphs): the attention and the shared experts as a dense block's, the router's fp32
    tensors, the dispatch's indices and routed rows, and the routed experts' outputs as
    `_routed_saved_compiled` names them; per-op SAC adds the chosen experts (its `topk`).
    Under EP the same tensors over the rows the rank's experts receive; under TP eager's
    count stands. The backward keeps eager's count (`_block_backward`).
- context parallelism (`RunConfig.cp`): a rank holds its chunk of every sequence (the tokens
  given are its own), FSDP shards over the data-parallel and CP ranks together (torchtitan's
  dp_shard_cp mesh), and without recompute SDPA keeps the keys and values all-gathered over
  the CP ranks (per-op SAC saves no all-gather: the backward gathers them again).
- TP/SP buffers: sequence parallelism all-gathers the norm's output (tokens x hidden) before
  the column-parallel linears, which save it (counted with the saved inputs, float8 under
  tensorwise TP) and reduce-scatters the row-parallel outputs (the next norm's input). Async
  TP's workspace comes from torch's symmetric-memory allocator, outside the caching allocator
  torchtitan's peak reads: not counted (an assumption; #149990's arms differ by under 1 GiB).
- one block in the backward: what recompute rematerializes (the block's `none` set less what
  the mode kept), the largest linear's grad_output and grad_input at once (with float8, its
  grad_output casts and the input's recast for grad_weight), and the block's unsharded weight
  gradients (bf16, and the fp32 copy FSDP2 reduce-scatters). Compiled, what Inductor's
  wrapper code holds at its peak instead (`_compiled_backward`, read off the generated code:
  profiler/memory/buffers.py's `block_buffers`, scripts/block_buffers.py): the larger of the
  MLP's moment (the rematerialized tensors beside the SwiGLU's gradients, rowwise's in fp32
  and cast along both axes) and the block's end (every weight gradient beside six hidden-wide
  activation gradients), and FSDP2's fp32 copy. The forward's own temporaries (less than the smallest
  compiled backward's, read the same way) are held at no moment the peak is taken at, and are
  not counted.
- logits and loss: torchtitan's loss upcasts the logits (`pred.flatten(0, 1).float()`,
  components/loss.py). Eager (torchtitan before 2025-04-02, or compile off), `del pred` frees
  the bf16 logits before `loss.backward()` and, without TP, CUDA's fused kernels leave
  log_softmax's output, nll's gradient and log_softmax's gradient alive at the backward's
  start: 12 bytes per logit. Compiled with the model (`RunConfig.loss_compiled`), the graph
  saves its bf16 input and a per-row statistic, and its fused backward writes the bf16
  gradient: 4 bytes per logit. Under TP
  torchtitan enables loss parallel (logits sharded over the vocabulary), whose ops are
  decompositions (torch/distributed/tensor/parallel/loss.py): the fused nll + log_softmax
  backward holds the saved log-probabilities, `zeros_like` of them (nll's gradient), their
  `exp` and the sum of the two at once before the product replaces the `exp`: 16 bytes per
  local logit, above the forward's 14 (the bf16 logits, their fp32 copy, `shifted` and its
  `exp`). With loss parallel disabled (`RunConfig.loss_parallel`) the logits are all-gathered
  and every TP rank holds the whole vocabulary's, counted as without TP. torchtitan's
  ChunkedCELoss (components/loss.py since 786e26f8e, 2026-04-27, pytorch/torchtitan#2937; the
  qwen3 configs' loss; `RunConfig.loss_chunks`) runs lm_head and the loss on one slice of the
  sequence at a time, each slice's backward before the next: the loss's tensors are one
  slice's, beside every slice's contiguous copy of the hidden states, the fp32 buffer their
  gradient gathers in and lm_head's unsharded gradient, accumulating across the slices.

- pipeline parallelism (`RunConfig.pipeline`, `tokens` then a microbatch's): a rank holds its
  stage's blocks, the first one the embedding and the last one the output projection and the
  loss, torchtitan's stages balanced with the embedding and the output weighing a block each
  (`pipeline_parallel_first/last_stage_less_layers`), so those two ranks hold ceil((L + 2) / p)
  - 1 blocks. A rank holds several microbatches' saved activations at once, per schedule
  (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", section 2.2; torch's `torch.distributed.pipelining` schedules): GPipe every
  microbatch's (all forwards first); 1F1B the first rank p, the last one 1 (rank r: p - r);
  the looped schedules (Interleaved1F1B, v stages per rank) the first rank p + (p - 1) / v and
  the last 1 + (p - 1) / v of its whole stage's; never more than the step's microbatches.
  FSDP2 keeps the stage's weights gathered through the step (torchtitan's "default"
  reshard_after_forward under PP) and, as torch's `PipelineStage` syncs gradients on the last
  microbatch only, each block's unsharded bf16 gradients accumulate from the first
  microbatch's backward on. The larger of the first and the last rank's peaks is the run's.

The step's schedule: the peak is the largest of three moments: the loss (every block's saved
activations, no gradients yet), the first block of the backward (every block's saved
activations and one block rematerialized) and the last one (every gradient, one block's
activations). Gradients grow and saved activations shrink linearly in between, so the extremes
hold the allocated peak. torchtitan logs the caching allocator's reserved peak
(`reserved_bytes.all.peak`, in GiB), and that is `MemoryPeak.peak_bytes`: the step's
allocations and frees by stream (`_step_events`: FSDP2's all-gather input and output on its
copy-in stream, the reduce-scatter's output, the sharded gradient, on its own stream, the rest
on the compute stream) run through `allocator.simulate` with torchtitan's
`expandable_segments:True` (run_train.sh), and what each stream has reserved beyond what it
holds at the sequence's allocated peak is a term of its own (`RESERVE_TERMS`); torchtitan's
`TORCH_NCCL_AVOID_RECORD_STREAMS=1` (distributed/utils.py) returns TP's collective buffers to
the cache in stream order. The CUDA context and NCCL's buffers lie outside the allocator:
`RUNTIME_BYTES` is kept free when asking whether a run fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from f8roof.errors import ModelError, term
from f8roof.inputs.shapes import MAX_DIM
from f8roof.traffic.variant import Before
from f8roof.training.allocator import Alloc, AllocatorPeaks, Free, Stream, simulate
from f8roof.training.catalog import FUSED_QKV, Architecture, TPStyle, fuse_qkv
from f8roof.training.checkpointing import (
    MM,
    Decision,
    Recompute,
    SacPolicy,
    is_block_fqn,
    sac_policy,
)
from f8roof.training.parallel import LocalLayer, fsdp_shards, local_layers
from f8roof.training.run_config import MAX_DEGREE, RunConfig

GIB = 2**30
BF16, FP32, FLOAT8 = 2, 4, 1  # bytes per element
INT32, INT64 = 4, 8  # an MoE's offsets and indices
# a dense SwiGLU every token of an MoE layer passes through (the catalog's names:
# mlp.shared_experts, mlp.shared_expert, feed_forward.shared_expert, moe.shared_experts)
SHARED_EXPERT = "shared_expert"
# Outside the caching allocator: the CUDA context (about 0.5 GiB on Hopper with lazy loading,
# CUDA C++ Programming Guide, "Lazy Loading") and NCCL's buffers (NCCL_BUFFSIZE 4 MiB per channel
# and peer, up to 32 channels, two peers on a ring, two communicators: FSDP and TP; NCCL
# environment variables docs). An assumption, not a measurement.
RUNTIME_BYTES = GIB
# at the loss backward's start, fp32 (module docstring): log_softmax's output, nll's and
# log_softmax's gradients (CUDA's fused kernels); under loss parallel the saved log-probs,
# nll's gradient, their exp and the sum of the two
LOSS_BYTES_PER_LOGIT = 3 * FP32
LOSS_PARALLEL_BYTES_PER_LOGIT = 4 * FP32
# compiled (torchtitan since 2025-04-02, `RunConfig.loss_compiled`), without TP: the bf16
# logits the compiled graph saves (its input) and the bf16 gradient its fused backward writes;
# the fp32 upcast and log-probabilities stay inside the fused kernels (one fp32 per row saved)
COMPILED_LOSS_BYTES_PER_LOGIT = 2 * BF16
# compiled under loss parallel: Inductor's graph of DTensor's decomposition saves one fp32
# tensor of the local logits' shape (and a per-row mask), its backward writes the bf16
# gradient (read on CPU, torch 2.13: the tensors a compiled loss_parallel cross-entropy hands
# autograd's saved-tensor hooks)
COMPILED_LOSS_PARALLEL_BYTES_PER_LOGIT = FP32 + BF16
GROUPED_MM = "aten._grouped_mm.default"
TOPK = "aten.topk.default"
KV_PROJECTIONS = (
    "k_proj",
    "v_proj",
    ".wk",
    ".wv",
)  # the linears whose outputs CP gathers  # routed experts' gemm: in no SAC save list
CHEAPEST_FIRST = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
MAX_LOCAL_BATCH = 2**16  # the largest local batch the search tries


class MemoryModelError(ModelError):
    pass


class Term(str, Enum):
    """One part of the peak, per GPU."""

    PARAMETERS = "parameters"  # fp32 master, sharded
    GRADIENTS = "gradients"  # fp32 sharded, and the root's unsharded bf16 ones at the end
    OPTIMIZER = "optimizer states"  # AdamW's two fp32 states, sharded
    WEIGHTS_IN_FLIGHT = "weights in flight"  # all-gathered blocks and the root
    SAVED_ACTIVATIONS = "saved activations"  # every block's, for the backward
    BLOCK_BACKWARD = "block in backward"  # rematerialized, gradients in flight
    LOGITS_LOSS = "logits and loss"  # fp32 loss tensors at the loss, lm_head's input
    # reserved by the caching allocator beyond what is allocated at the allocated peak
    ALL_GATHER_POOL = "all-gather pool"  # FSDP2's copy-in stream: gathered weights' buffers
    GRADIENT_POOL = "reduce-scatter pool"  # the reduce-scatter stream: the sharded gradients
    COMPUTE_CACHE = "compute stream's cache"  # free blocks the compute stream keeps


# the terms the caching allocator reserves and nothing holds at the allocated peak, by stream
RESERVE_TERMS = {
    Stream.ALL_GATHER: Term.ALL_GATHER_POOL,
    Stream.REDUCE_SCATTER: Term.GRADIENT_POOL,
    Stream.COMPUTE: Term.COMPUTE_CACHE,
}


class Phase(str, Enum):
    """The three moments of the step that can hold the peak (module docstring)."""

    LOSS = "loss"
    BACKWARD_FIRST = "first block of the backward"
    BACKWARD_LAST = "last block of the backward"


@dataclass(frozen=True)
class MemoryTerm:
    term: Term
    bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.bytes, bool) or not isinstance(self.bytes, int) or self.bytes < 0:
            raise MemoryModelError(f"{self.term.value}: bytes must be an int >= 0 ({self.bytes!r})")


@dataclass(frozen=True)
class MemoryPeak:
    """One precision's peak: the moment the allocated peak falls at and its terms; the
    allocated terms add up to the allocated peak, all of them to the reserved peak (what
    torchtitan logs, `peak_bytes`)."""

    phase: Phase
    terms: tuple[MemoryTerm, ...]

    @property
    def peak_bytes(self) -> int:
        """The caching allocator's reserved peak."""
        return sum(t.bytes for t in self.terms)

    @property
    def allocated_bytes(self) -> int:
        return sum(t.bytes for t in self.terms if t.term not in RESERVE_TERMS.values())

    def bytes_of(self, term: Term) -> int:
        return sum(t.bytes for t in self.terms if t.term is term)


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory per GPU in bf16 and float8 for one run, and the GPU's memory it must fit."""

    bf16: MemoryPeak
    fp8: MemoryPeak
    gpu_memory_bytes: int
    runtime_bytes: int = RUNTIME_BYTES

    def __post_init__(self) -> None:
        if self.gpu_memory_bytes <= self.runtime_bytes:
            raise MemoryModelError(f"GPU memory {self.gpu_memory_bytes} B leaves nothing to run")

    @property
    def usable_bytes(self) -> int:
        """What the caching allocator may reserve: the GPU's memory less the runtime's."""
        return self.gpu_memory_bytes - self.runtime_bytes

    @property
    def bf16_fits(self) -> bool:
        return self.bf16.peak_bytes <= self.usable_bytes

    @property
    def fp8_fits(self) -> bool:
        return self.fp8.peak_bytes <= self.usable_bytes

    @property
    def bf16_shortfall_bytes(self) -> int:
        return max(0, self.bf16.peak_bytes - self.usable_bytes)


@dataclass(frozen=True)
class Headroom:
    """What fits, per precision: the cheapest recompute mode at the run's local batch (None:
    none fits), and the largest local batch under the run's own mode (0: not even one)."""

    seq_len: int  # tokens of one sample: the unit of the local batch
    local_batch: int  # the run's own
    bf16_recompute: Recompute | None
    fp8_recompute: Recompute | None
    bf16_local_batch: int
    fp8_local_batch: int

    @property
    def cheaper_recompute(self) -> bool:
        """float8 fits with a cheaper recompute mode than bf16 needs."""
        if self.fp8_recompute is None:
            return False
        if self.bf16_recompute is None:
            return True
        rank = CHEAPEST_FIRST.index
        return rank(self.fp8_recompute) < rank(self.bf16_recompute)


@dataclass(frozen=True)
class _Model:
    """The run's sizes, per GPU, in elements (one mean block)."""

    layers: int  # the blocks this rank holds (a pipeline stage's, else every one)
    hidden: int
    vocab: int
    tokens: int  # per data-parallel rank
    tp: int
    fsdp_ranks: int  # the ranks FSDP shards over: data-parallel x context-parallel
    sharded: bool  # FSDP on
    local_params: float  # every parameter's elements on this GPU, FSDP-sharded
    block_weights: float  # one mean block's linear weights on this GPU (TP-sharded)
    block_weights_fp8: float  # of which converted and gathered in float8
    root_weights: float  # embedding + final norm + lm_head on this GPU (TP-sharded)
    linears: tuple[LocalLayer, ...]  # the block's linears, forward order
    converted: frozenset[str]
    tensorwise: bool
    compiled: bool = False  # the blocks compiled: what AOTAutograd's partition saves
    float8_gather: bool = False  # FSDP2 all-gathers the converted weights in float8
    rowwise: bool = False  # torchao's rowwise recipes (one fp32 scale per row)
    cp: int = 1  # context-parallel ranks each sequence is split over
    ep: int = 1  # expert-parallel ranks the routed experts are split over
    in_flight: float = 1.0  # microbatches whose saved activations the rank holds at once
    head: bool = True  # the rank runs the output projection and the loss
    unsharded_grads: bool = False  # PP: the blocks' bf16 gradients accumulate (no sync)
    model_layers: int = 0  # the model's blocks (0: `layers`): a layer type's share of one


@dataclass(frozen=True)
class _Stage:
    """One pipeline rank's share of the model (module docstring): its blocks, whether it holds
    the embedding or the output projection and the loss, and how many microbatches' saved
    activations it holds at once."""

    blocks: int
    embedding: bool
    head: bool
    in_flight: float


def _stages(run: RunConfig, layers: int) -> tuple[_Stage, ...]:
    """The first and the last rank of the run's pipeline (module docstring); without one, the
    whole model on one stage."""
    pipe = run.pipeline
    if pipe is None:
        return (_Stage(layers, True, True, 1.0),)
    pipe = pipe.for_layers(layers)
    p, v, m = pipe.degree, pipe.stages_per_rank, pipe.microbatches
    blocks = min(layers, max(1, math.ceil((layers + 2) / p) - 1))
    if pipe.schedule == "GPipe":
        first = last = float(m)
    elif v > 1:  # looped: the warmup runs chunks of every stage the rank holds
        first, last = p + (p - 1) / v, 1 + (p - 1) / v
    else:
        first, last = float(p), 1.0
    return (
        _Stage(blocks, True, False, min(first, float(m))),
        _Stage(blocks, False, True, min(last, float(m))),
    )


def _rows(layer: LocalLayer) -> int:
    """Rows a linear's gemms run on this GPU: tokens, or every local expert's padded rows."""
    return layer.M * max(1, layer.experts_per_device)


def _weight(layer: LocalLayer) -> int:
    return layer.K * layer.N * max(1, layer.experts_per_device)


def _parent(fqn: str) -> str:
    return fqn.rpartition(".")[0]


def _model(
    architecture: Architecture,
    *,
    tokens: int,
    run: RunConfig,
    converted: frozenset[str],
    recipe: str,
    stage: _Stage | None = None,
) -> _Model:
    """The run's sizes on one rank: the whole model, or one pipeline `stage`'s share."""
    head = next((lin for lin in architecture.linears if not is_block_fqn(lin.fqn)), None)
    if head is None:
        raise MemoryModelError(f"{architecture.name}: no output projection gives the vocabulary")
    hidden, vocab = head.K, head.N
    local = local_layers(architecture, tokens, run)
    block = tuple(layer for layer in local if is_block_fqn(layer.linear.fqn))
    if not block:
        raise MemoryModelError(f"{architecture.name}: no transformer block linears")
    layers = max(layer.linear.count for layer in block)
    stage = stage or _Stage(layers, True, True, 1.0)
    share = stage.blocks / layers  # of every block's weights: the stage's blocks
    tp, float8_gather = run.tp, run.float8_all_gather and recipe == "tensorwise"
    linear_weights = sum(_weight(layer) * layer.linear.count for layer in block)
    fp8_weights = sum(
        _weight(layer) * layer.linear.count
        for layer in block
        if float8_gather and layer.linear.fqn in converted
    )
    # the embedding (vocab-sharded: torchtitan's RowwiseParallel) on the first stage, the final
    # norm and lm_head (ColwiseParallel) on the last; two RMSNorms a block, replicated
    root = (vocab * hidden / tp if stage.embedding else 0.0) + (
        vocab * hidden / tp + hidden if stage.head else 0.0
    )
    sharded = run.fsdp_on or run.cp > 1
    return _Model(
        layers=stage.blocks,
        hidden=hidden,
        vocab=vocab,
        tokens=tokens,
        tp=tp,
        fsdp_ranks=run.fsdp_ranks * run.cp,  # torchtitan's dp_shard_cp mesh
        sharded=sharded,
        local_params=share
        * sum(
            _weight(layer) * layer.linear.count / float(fsdp_shards(layer.grouped, run))
            for layer in block
        )
        + (2 * stage.blocks * hidden + root) / (run.fsdp_ranks * run.cp),
        block_weights=linear_weights / layers + 2 * hidden,
        block_weights_fp8=fp8_weights / layers,
        root_weights=root,
        linears=block,
        converted=converted,
        tensorwise=recipe == "tensorwise",
        float8_gather=float8_gather and sharded,
        rowwise=recipe.startswith("rowwise"),
        compiled=run.blocks_compiled and _partition_read(block, run),
        cp=run.cp,
        ep=run.ep,
        in_flight=stage.in_flight,
        head=stage.head,
        model_layers=layers,
        unsharded_grads=(sharded and run.pipeline is not None and run.pipeline.microbatches > 1),
    )


def _partition_read(block: Sequence[LocalLayer], run: RunConfig) -> bool:
    """Whether a compiled block's partition was read for this run (else eager's count stands):
    dense blocks always; MoE blocks (profiler/moe.py) without TP (the experts' TP plan is not
    compiled), and under per-op SAC only with a policy that recomputes the router's gate
    (torchtitan 0.3.0's; the 2025 list counts it as a matmul). Under EP the read tensors
    stand over the rows the rank's experts receive (`_routed_saved_compiled`): EP's
    all-to-alls save nothing, so eager's count there would jump by what compile keeps."""
    if not any(layer.grouped for layer in block):
        return True
    if run.tp > 1:
        return False
    return (
        run.recompute is not Recompute.SELECTIVE or sac_policy(run.sac_policy).recompute_router_gate
    )


def _float8_input(m: _Model, layer: LocalLayer, fp8: bool) -> bool:
    """Whether a linear's saved input is float8: tensorwise under TP casts it before the
    all-gather (torchao's Float8ColwiseParallel / Float8RowwiseParallel)."""
    return (
        fp8
        and m.tensorwise
        and m.tp > 1
        and layer.linear.fqn in m.converted
        and layer.linear.tp is not TPStyle.REPLICATED
    )


def _share(layer: LocalLayer, m: _Model) -> float:
    """A layer type's share of one mean block: count / the model's blocks."""
    return layer.linear.count / (m.model_layers or m.layers)


def _saved_none(m: _Model, fp8: bool) -> float:
    """Bytes autograd saves for one mean block without recompute (module docstring)."""
    if m.compiled:
        return _saved_none_compiled(m, fp8)
    seq_sharded = m.tokens / m.tp
    total = 2 * seq_sharded * m.hidden * BF16  # both norms' inputs (the first: the block input)
    inputs: dict[tuple[str, Before, int, int], float] = {}
    for layer in m.linears:
        rows, share = _rows(layer), _share(layer, m)
        width = FLOAT8 if _float8_input(m, layer, fp8) else BF16
        key = (_parent(layer.linear.fqn), layer.linear.context.before, layer.K, rows)
        inputs[key] = max(inputs.get(key, 0.0), rows * layer.K * width * share)
        if layer.linear.tp is not TPStyle.ROW:  # rope/SDPA or the activation keeps the output
            total += rows * layer.N * BF16 * share
        elif layer.linear.heads:  # the attention output projection: SDPA's output and lse
            heads = layer.linear.heads // m.tp
            total += (rows * layer.K * BF16 + rows * heads * FP32) * share
        if layer.linear.context.before is Before.SILU_MUL:  # silu(gate), kept by the mul
            total += rows * layer.K * BF16 * share
        if m.cp > 1:
            # SDPA keeps the keys and values all-gathered over the CP ranks
            total += (m.cp - 1) * rows * _key_value_width(layer, m) * BF16 * share
    return total + sum(inputs.values())


def _key_value_width(layer: LocalLayer, m: _Model) -> int:
    """The keys' and values' width a linear's output holds on this GPU: a k or v projection's
    N, the fused wqkv's N less the queries' (the attention output projection's K); 0 for the
    others."""
    fqn = str(layer.linear.fqn)
    if fqn.endswith(KV_PROJECTIONS):
        return layer.N
    if fqn.endswith(FUSED_QKV):
        out = next(x for x in m.linears if x.linear.tp is TPStyle.ROW and x.linear.heads)
        return layer.N - out.K
    return 0


def _saved_none_compiled(m: _Model, fp8: bool) -> float:
    """What a compiled block's forward hands its backward without recompute, as AOTAutograd's
    min-cut partition chooses (read off the graphs, torch 2.13: profiler/memory/saved.py's
    `saved_activations`, scripts/saved_activations.py): both norms' inputs (the block's input
    and the attention's output, reduce-scattered under TP) with their fp32 rsqrt, rope/SDPA's
    and the activation's inputs (every linear's output but the row-parallel ones), SDPA's
    output and logsumexp, and the linears' inputs the backward cannot rebuild cheaply
    (`_compiled_input_width`); under TP, float8 weight copies (`_keeps_float8_weight`).
    Unlike eager, the output projection's input is SDPA's output (one tensor, not a copy
    beside it), and SiLU's output is recomputed from the gate's."""
    seq_sharded = m.tokens / m.tp
    total = 2 * seq_sharded * (m.hidden * BF16 + FP32) + _routed_saved_compiled(m, fp8)
    inputs: dict[tuple[str, Before, int, int], float] = {}
    for layer in m.linears:
        if layer.grouped:  # the routed experts: `_routed_saved_compiled`
            continue
        rows, share = _rows(layer), _share(layer, m)
        key = (_parent(layer.linear.fqn), layer.linear.context.before, layer.K, rows)
        width = _compiled_input_width(m, layer, fp8)
        inputs[key] = max(inputs.get(key, 0.0), rows * layer.K * width * share)
        if _keeps_float8_weight(m, layer, fp8):
            total += _weight(layer) * FLOAT8 * share
        if layer.linear.tp is not TPStyle.ROW:
            total += rows * layer.N * BF16 * share
        elif layer.linear.heads:
            heads = layer.linear.heads // m.tp
            total += (rows * layer.K * BF16 + rows * heads * FP32) * share
        if m.cp > 1:  # SDPA keeps the keys and values all-gathered over the CP ranks
            total += (m.cp - 1) * rows * _key_value_width(layer, m) * BF16 * share
    return total + sum(inputs.values())


def _routed_saved_compiled(m: _Model, fp8: bool) -> float:
    """What a compiled MoE block's forward hands its backward for its router and routed
    experts without recompute, as AOTAutograd's min-cut partition of profiler/moe.py's MoE
    (torchtitan's, local dispatch) chooses (torch 2.13, read off the graphs of qwen3-30b-a3b's
    block and a tiny one: scripts/saved_activations.py --model, docs/memory.md). Over T
    tokens, N = T x top_k routed rows, hidden D, E experts:
    - the router: the gate's fp32 input (the norm's output cast up: autocast's copy, T x D x
      4) and output (T x E x 4), softmax's row max and sum, the chosen experts (int64) and
      their scores (fp32), and the gate weight's fp32 copy (E x D x 4, from weights alone);
    - the dispatch: the slots' expert order and the token each slot copies (int64, N each),
      the routed rows (N x D, bf16) the gate and up projections' weight gradients read, the
      groups' offsets;
    - the routed experts: the gate's and up's outputs and their SiLU product, the down
      projection's input (N wide each); the down projection's output, which the scores'
      gradient reads (N x D);
    - the combine: the zeros the routed outputs are scattered into, where no shared expert's
      output stands in for them (the partition keeps the constant rather than refill it);
    - under EP (torchtitan's AllToAllTokenDispatcher, token_dispatcher.py at 6a1b334e8, not
      compiled here): the same tensors over the rows the rank's experts receive (N in
      expectation: `tokens_per_expert` x the rank's experts), and the index `_permute`
      reorders them by (a gather's backward reads its index); the all-to-alls save nothing.
    SiLU's output and the scores' fp32 copy of the routed outputs are recomputed. The shared
    experts are dense linears, counted as the block's MLP is; tensorwise keeps their input's
    float8 cast. torchao's rowwise float8 grouped gemms (`_Float8GroupedMM`, torchao 0.18)
    save their bf16 input and weight as `_grouped_mm` does, and the partition keeps the same
    tensors: converting the experts moves none of this (read off the graphs too)."""
    routed = [x for x in m.linears if x.grouped]
    if not routed:
        return 0.0
    first = routed[0]
    assert first.linear.routed is not None
    experts, top_k = first.linear.routed.experts, first.linear.routed.top_k
    share = _share(first, m)
    tokens, hidden = m.tokens, m.hidden
    slots = first.tokens_per_expert * first.experts_per_device  # N: unpadded (bf16 grouped gemms)
    router = tokens * (hidden * FP32 + experts * FP32 + 2 * FP32 + top_k * (INT64 + FP32))
    router += experts * hidden * FP32  # the gate weight's fp32 copy
    dispatch = slots * ((2 + (m.ep > 1)) * INT64 + hidden * BF16) + experts * INT32
    widths = sum(x.N for x in routed if x.linear.tp is TPStyle.COLUMN)
    down = sum(x.K for x in routed if x.linear.tp is TPStyle.ROW)
    experts_saved = slots * (widths + down + hidden) * BF16
    shared = [x for x in m.linears if not x.grouped and SHARED_EXPERT in x.linear.fqn]
    shared_share = max((_share(x, m) for x in shared), default=0.0)
    zeros = tokens * hidden * BF16 * max(0.0, share - shared_share)
    if fp8 and m.tensorwise and any(_converted(m, x, fp8) for x in shared):
        zeros += tokens * hidden * FLOAT8 * shared_share  # the shared experts' float8 input
    return (router + dispatch + experts_saved) * share + zeros


def _compiled_input_width(m: _Model, layer: LocalLayer, fp8: bool) -> int:
    """Bytes per element of a linear's input a compiled block saves (0: not saved), as the
    partition of torchtitan's llama block chose on torch 2.13 (scripts/saved_activations.py):
    - bf16: the norms' outputs (all-gathered under TP) and the activation's output, once per
      shared input; never the output projection's, which is SDPA's saved output;
    - float8 without TP: none: the backward recasts what it needs from the norm's input and
      rsqrt, and from the gate's and up's outputs, rather than keep a copy;
    - float8 under TP: the all-gathered inputs of the column-parallel linears in float8 (the
      backward gathers nothing again), and, tensorwise, the row-parallel linears' float8
      inputs too."""
    if not _converted(m, layer, fp8):
        # the output projection's input is SDPA's output, kept as SDPA's
        return 0 if layer.linear.tp is TPStyle.ROW and layer.linear.heads else BF16
    if m.tp == 1 or layer.linear.tp is TPStyle.REPLICATED:
        return 0
    if layer.linear.tp is TPStyle.ROW:
        return FLOAT8 if m.tensorwise else 0
    return FLOAT8


def _keeps_float8_weight(m: _Model, layer: LocalLayer, fp8: bool) -> bool:
    """Whether a compiled block without recompute keeps a float8 copy of the linear's weight
    for the backward (the partition's choice, read off the graphs: scripts/saved_activations.py
    and every shipped block fit, tests/test_block_saved.py):
    - bf16 weights (no float8 all-gather): under TP only (without it the backward recasts the
      weight), tensorwise every converted linear's, rowwise the output projection's and the
      MLP's but not q/k/v's;
    - FSDP2's float8 all-gather: a transposed copy of each MLP weight, and under TP of the
      output projection's; the backward reads the other weights as gathered (FSDP's memory,
      `Term.WEIGHTS_IN_FLIGHT`, gathered again for the backward)."""
    if not _converted(m, layer, fp8) or layer.linear.tp is TPStyle.REPLICATED:
        return False
    attention_input = layer.linear.tp is TPStyle.COLUMN and bool(layer.linear.heads)
    if m.float8_gather:
        return not attention_input and (m.tp > 1 or not layer.linear.heads)
    if m.tp == 1:
        return False
    return m.tensorwise or (m.rowwise and not attention_input)


def _converted(m: _Model, layer: LocalLayer, fp8: bool) -> bool:
    return fp8 and layer.linear.fqn in m.converted


def _saved_selective(m: _Model, run: RunConfig, fp8: bool) -> float:
    """Bytes per-op SAC keeps for one mean block: the block's input, the outputs of the
    matmuls the policy saves (every second; routed experts' grouped gemms never), SDPA's
    output and logsumexp, and each reduce-scatter's output: eager, the same in both
    precisions. Compiled, the partition drops what no gradient reads (the MLP's closing
    output) and, rowwise, keeps the row scales of the kept gemms' inputs."""
    policy = sac_policy(run.sac_policy)
    seq_sharded = m.tokens / m.tp
    ops = [GROUPED_MM if layer.grouped else MM for layer in m.linears]
    total = seq_sharded * m.hidden * BF16
    scaled: dict[tuple[str, Before, int, int], float] = {}
    for layer, decision in zip(m.linears, policy.decide_sequence(ops)):
        rows, share = _rows(layer), _share(layer, m)
        # Compiled, the MLP's down projection's output (and its reduce-scatter's) feeds the
        # residual add alone: no gradient reads it, so the partition keeps none of what the
        # policy marks (read off the graphs, torch 2.13, scripts/saved_activations.py). Eager
        # SAC holds every marked output until the recompute reads it.
        closes = m.compiled and layer.linear.tp is TPStyle.ROW and not layer.linear.heads
        if decision is Decision.SAVE and not closes:
            total += rows * layer.N * BF16 * share
            if m.compiled and m.rowwise and _converted(m, layer, fp8):
                # the partition keeps the fp32 row scale of a kept gemm's input (one per
                # input the linears share: the norms' outputs)
                key = (_parent(layer.linear.fqn), layer.linear.context.before, layer.K, rows)
                scaled[key] = rows * FP32 * share
        if layer.linear.tp is TPStyle.ROW and layer.linear.heads:
            total += (rows * layer.K * BF16 + rows * (layer.linear.heads // m.tp) * FP32) * share
        if layer.linear.tp is TPStyle.ROW and m.tp > 1 and not layer.grouped and not closes:
            total += seq_sharded * m.hidden * BF16 * share  # reduce_scatter_tensor's output
    if m.compiled:
        total += _routed_selective_compiled(m, policy)
    return total + sum(scaled.values())


def _routed_selective_compiled(m: _Model, policy: SacPolicy) -> float:
    """What per-op SAC keeps of a compiled MoE block's router and experts (read off the graphs
    as `_routed_saved_compiled`): the chosen experts, where the policy saves `topk` (torchtitan
    0.3.0: "save to keep MoE expert assignments stable"; its scores, which no gradient reads,
    are dropped). The grouped gemms, the dispatch and the combine are recomputed, and the
    gate's matmul too (the policy's `recompute_router_gate`)."""
    routed = next((x for x in m.linears if x.grouped), None)
    if routed is None or TOPK not in policy.save_ops:
        return 0.0
    assert routed.linear.routed is not None
    return m.tokens * routed.linear.routed.top_k * INT64 * _share(routed, m)


def _saved(m: _Model, run: RunConfig, fp8: bool) -> tuple[float, float]:
    """(every block's saved bytes, one mean block's saved bytes) under the run's mode."""
    none = _saved_none(m, fp8)
    if run.recompute is Recompute.NONE:
        return none * m.layers, none
    if run.recompute is Recompute.SELECTIVE:
        one = _saved_selective(m, run, fp8)
        return one * m.layers, one
    checkpointed = m.layers // run.recompute_every
    one = m.tokens / m.tp * m.hidden * BF16
    return one * checkpointed + none * (m.layers - checkpointed), one


@dataclass(frozen=True)
class PerBlock:
    """One mean block's terms, (bf16, float8), under the run's recompute mode, each of which a
    script sets beside a compiled block's code: `saved`, what `Term.SAVED_ACTIVATIONS` holds
    once per block (scripts/saved_activations.py); `backward`, `Term.BLOCK_BACKWARD` less
    FSDP2's fp32 reduce-scatter copy of the weight gradients, allocated outside the block's
    compiled graph: the graph's share (scripts/block_buffers.py, beside the peak of the
    compiled backward's buffers)."""

    saved: tuple[float, float]
    backward: tuple[float, float]


def per_block(
    architecture: Architecture,
    *,
    tokens: int,
    run: RunConfig,
    recipe: str,
    converted: Sequence[str],
) -> PerBlock:
    m = _model(architecture, tokens=tokens, run=run, converted=frozenset(converted), recipe=recipe)
    outside = m.block_weights * FP32 if m.sharded else 0.0
    return PerBlock(
        saved=(_saved(m, run, False)[1], _saved(m, run, True)[1]),
        backward=(
            _block_backward(m, run, False) - outside,
            _block_backward(m, run, True) - outside,
        ),
    )


def _block_backward(m: _Model, run: RunConfig, fp8: bool) -> float:
    """One block in the backward: rematerialized tensors, the largest linear's activation
    gradients (and float8 casts), and the block's unsharded weight gradients; compiled, the
    larger of the two moments Inductor's code holds most at (`_compiled_backward`). A
    compiled MoE block's backward is eager's count: its code is read (scripts/block_buffers.py
    --model qwen3-30b-a3b) but its peak moves between moments as tokens grow (docs/memory.md)."""
    if m.compiled and any(layer.grouped for layer in m.linears):
        return _block_backward(replace(m, compiled=False), run, fp8)
    none = _saved_none(m, fp8)
    kept = _saved(m, run, fp8)[1] if run.recompute is not Recompute.NONE else none
    fsdp_copy = m.block_weights * FP32 if m.sharded else 0.0
    down = next((x for x in m.linears if x.linear.context.before is Before.SILU_MUL), None)
    if m.compiled and down is not None:
        return _compiled_backward(m, down, fp8, max(0.0, none - kept)) + fsdp_copy
    largest = max(m.linears, key=lambda layer: _rows(layer) * (layer.K + layer.N))
    rows = _rows(largest)
    grads = rows * (largest.K + largest.N) * BF16  # grad_output and grad_input at once
    if fp8 and largest.linear.fqn in m.converted:
        # grad_output cast to e5m2 (rowwise: once per scaling axis), the input recast for
        # grad_weight where it was saved in bf16
        grads += rows * largest.N * FLOAT8 * (1 if m.tensorwise else 2)
        if not _float8_input(m, largest, fp8):
            grads += rows * largest.K * FLOAT8
    return max(0.0, none - kept) + grads + m.block_weights * BF16 + fsdp_copy


def _compiled_backward(m: _Model, down: LocalLayer, fp8: bool, rematerialized: float) -> float:
    """What a compiled block's backward graph holds at its peak, read off the CUDA wrapper
    code Inductor generates for it (torch 2.13, llama3-8b's block at TP 1 and 2, every
    recompute mode that compiles: profiler/memory/buffers.py's `block_buffers`,
    scripts/block_buffers.py, docs/memory.md), the larger of two moments:

    - the MLP's: what recompute rematerialized, with the SwiGLU's gradients at once, over the
      gathered tokens and the local hidden width F (the down projection's input): one fused
      kernel writes the gate's and the up projection's gradients from the down projection's
      grad_input, all three alive until the gate's and up's backward gemms have read them
      (bf16: 3 F-wide bf16 tensors); tensorwise adds each of the two gradients cast to e5m2
      once; rowwise materializes the two in fp32 (its casts scale them along both axes, so
      the column-wise amax needs them whole before the row-wise cast) and casts each twice:
      2 + 2 * 4 + 4 * 1 bytes per element. No weight gradient is written yet then;
    - the block's end, the attention's input projections: every weight gradient of the block
      written (graph outputs, bf16) beside six hidden-wide activation gradients: Inductor
      fuses both norms' weight-gradient sums into one kernel at the graph's end, which keeps
      what it reads alive through the attention's backward (without TP, the MLP's two input
      gradients, the residual's gradient, SDPA's grad_output, dq and a q/k/v grad_input;
      under TP four over the gathered tokens, the block's output gradient and the MLP's and
      the attention's grad_inputs before their reduce-scatters among them, and two
      sequence-sharded).

    Not a fitted factor: each term names tensors the wrapper allocates. The largest linear's
    grad_output and grad_input of the eager count is the MLP moment's without its fused
    SwiGLU; it under-counts rowwise by the fp32 copies and misses the end moment."""
    rows, width, share = _rows(down), down.K, _share(down, m)
    # the gate's and up's gradients are those projections' grad_outputs: their casts
    ups = [x for x in m.linears if _parent(x.linear.fqn) == _parent(down.linear.fqn)]
    per_element = 3 * BF16
    # the MX and blockwise recipes' backward code is not read: tensorwise's count stands there
    if any(_converted(m, x, fp8) for x in ups if x is not down):
        per_element = BF16 + 2 * FP32 + 4 * FLOAT8 if m.rowwise else 3 * BF16 + 2 * FLOAT8
    mlp = rematerialized + rows * width * per_element * share
    gathered, sharded = m.tokens, m.tokens / m.tp
    end = m.block_weights * BF16 + (4 * gathered + 2 * sharded) * m.hidden * BF16
    return max(mlp, end)


def _weights_in_flight(m: _Model, fp8: bool, *, blocks: int) -> float:
    """Unsharded weights of `blocks` blocks: all-gathered under FSDP (with the root, kept
    unsharded between forward and backward); without it, autocast's bf16 copies saved for the
    backward (float8: tensorwise's casts; rowwise saves the fp32 parameter itself)."""
    per_block = m.block_weights * BF16
    if fp8 and m.sharded:
        per_block -= m.block_weights_fp8 * (BF16 - FLOAT8)
    elif fp8:
        converted = sum(
            _weight(layer) * _share(layer, m)
            for layer in m.linears
            if layer.linear.fqn in m.converted
        )
        per_block -= converted * (BF16 - (FLOAT8 if m.tensorwise else 0))
    return per_block * blocks + (m.root_weights * BF16 if m.sharded else 0.0)


def _states(m: _Model) -> tuple[float, float, float]:
    """(fp32 parameters, fp32 gradients, AdamW states) on this GPU."""
    local = m.local_params
    return local * FP32, local * FP32, local * 2 * FP32


def _loss_bytes_per_logit(m: _Model, run: RunConfig) -> int:
    """The loss's bytes per local logit at the loss backward's start (module docstring). Under
    TP the loss is DTensor's loss-parallel decomposition; what compiling it keeps of its fp32
    tensors is not read here, so eager's count stands there."""
    if m.tp > 1 and run.loss_parallel:
        if run.loss_compiled:
            return COMPILED_LOSS_PARALLEL_BYTES_PER_LOGIT
        return LOSS_PARALLEL_BYTES_PER_LOGIT
    return COMPILED_LOSS_BYTES_PER_LOGIT if run.loss_compiled else LOSS_BYTES_PER_LOGIT


@dataclass(frozen=True)
class _Sizes:
    """What one step allocates, in bytes per GPU, for the phases' sums and the allocator's
    sequence alike (module docstring)."""

    params: float  # fp32, sharded
    grads: float  # fp32, sharded (the reduce-scatters' outputs)
    optimizer: float
    root_params: float  # of `params`: the embedding, final norm and output projection's
    saved: tuple[float, ...]  # each block's saved activations, forward order
    saved_one: float  # one block's, as the last block of the backward holds them
    backward: float  # one block in the backward (`_block_backward`)
    weight_grads: float  # of `backward`: the block's unsharded bf16 weight gradients
    reduce_input: float  # of `backward`: FSDP2's fp32 reduce-scatter input (0 without FSDP)
    block_weights: float  # one block unsharded (all-gathered; without FSDP autocast's copies)
    root_weights: float  # the root unsharded (0 without FSDP)
    logits: float  # logits this GPU's loss holds at once (elements: one slice's when chunked)
    per_logit: int  # the loss's bytes per logit at its peak
    head_input: float
    head_grad: float  # lm_head's unsharded bf16 weight gradient
    root_grads: float  # the root's unsharded bf16 weight gradients, lm_head's included
    gathered: tuple[int, int, int]  # blocks unsharded at the three phases
    fsdp_ranks: int
    sharded: bool
    resharded: bool  # FSDP2 frees each block's gathered weights after its forward
    accumulating: bool  # gradient accumulation: the gradients persist across passes
    chunked: bool  # torchtitan's ChunkedCELoss: the loss backpropagates slice by slice
    # pipeline parallelism: the stage's unsharded bf16 gradients, accumulating over microbatches
    held_grads: float = 0.0


def _sizes(m: _Model, run: RunConfig, fp8: bool) -> _Sizes:
    params, grads, optimizer = _states(m)
    saved_all, saved_one = _saved(m, run, fp8)
    if run.recompute is Recompute.FULL and run.recompute_every > 1:
        none = _saved_none(m, fp8)
        saved = tuple(
            saved_one if (i + 1) % run.recompute_every == 0 else none for i in range(m.layers)
        )
    else:
        saved = (saved_all / m.layers,) * m.layers
    saved = tuple(one * m.in_flight for one in saved)  # a pipeline's microbatches in flight
    weight_grads = m.block_weights * BF16
    root = _weights_in_flight(m, fp8, blocks=0)
    head = 1.0 if m.head else 0.0  # a pipeline's earlier stages run no loss
    return _Sizes(
        params=params,
        grads=grads,
        optimizer=optimizer,
        root_params=(m.root_weights * FP32 / m.fsdp_ranks) if m.sharded else 0.0,
        saved=saved,
        saved_one=saved_one,
        backward=_block_backward(m, run, fp8),
        weight_grads=weight_grads,
        reduce_input=m.block_weights * FP32 if m.sharded else 0.0,
        block_weights=_weights_in_flight(m, fp8, blocks=1) - root,
        root_weights=root,
        logits=head * m.tokens * m.vocab / (m.tp if run.loss_parallel else 1) / run.loss_chunks,
        per_logit=_loss_bytes_per_logit(m, run),
        head_input=head * _head_input(m, run),
        head_grad=head * m.vocab / m.tp * m.hidden * BF16 if m.sharded else 0.0,
        root_grads=m.root_weights * BF16 if m.sharded else 0.0,
        # blocks unsharded: under FSDP the last block (kept after its forward) or two (one
        # prefetched); without it every block's autocast copies until its backward frees them
        gathered=(
            ((1, 2, 2) if run.reshards_after_forward else (m.layers, m.layers, 1))
            if m.sharded
            else (m.layers, m.layers, 1)
        ),
        fsdp_ranks=m.fsdp_ranks,
        sharded=m.sharded,
        resharded=m.sharded and run.reshards_after_forward,
        accumulating=run.accumulation > 1,
        chunked=run.loss_chunks > 1,
        held_grads=weight_grads * m.layers if m.unsharded_grads else 0.0,
    )


def _head_input(m: _Model, run: RunConfig) -> float:
    """What the output projection's input holds through the loss: the final norm's saved input
    (sequence-sharded under TP) and its output, gathered for lm_head. torchtitan's ChunkedCELoss
    (components/loss.py @6a1b334e8, 2026-05-18) adds each slice's contiguous copy (`h_chunks`,
    all alive through the loop: the whole sequence again) and `GradAccumulator`'s fp32 buffer
    of the hidden states' gradient, filled slice by slice."""
    held = m.tokens * m.hidden * BF16 + m.tokens / m.tp * m.hidden * BF16
    if run.loss_chunks > 1:
        held += m.tokens * m.hidden * (BF16 + FP32)
    return held


def _allocated(z: _Sizes) -> MemoryPeak:
    """The allocated peak: the largest of the three moments (module docstring)."""
    blocks = sum(z.saved)
    # under gradient accumulation every pass after the first runs with the gradients so far
    held = (z.grads if z.accumulating else 0.0) + z.held_grads
    phases = {
        Phase.LOSS: {
            # chunked, lm_head's unsharded gradient accumulates from the first slice's backward
            Term.GRADIENTS: held + (z.head_grad if z.chunked else 0.0),
            Term.WEIGHTS_IN_FLIGHT: z.block_weights * z.gathered[0] + z.root_weights,
            Term.SAVED_ACTIVATIONS: blocks,
            Term.LOGITS_LOSS: z.logits * z.per_logit + z.head_input,
        },
        Phase.BACKWARD_FIRST: {
            Term.GRADIENTS: held + z.head_grad,
            Term.WEIGHTS_IN_FLIGHT: z.block_weights * z.gathered[1] + z.root_weights,
            Term.SAVED_ACTIVATIONS: blocks,
            Term.BLOCK_BACKWARD: z.backward,
        },
        Phase.BACKWARD_LAST: {
            Term.GRADIENTS: z.grads + z.root_grads + z.held_grads,
            Term.WEIGHTS_IN_FLIGHT: z.block_weights * z.gathered[2] + z.root_weights,
            Term.SAVED_ACTIVATIONS: z.saved_one,
            Term.BLOCK_BACKWARD: z.backward,
        },
    }
    states = {Term.PARAMETERS: z.params, Term.OPTIMIZER: z.optimizer}
    best: MemoryPeak | None = None
    for phase, parts in phases.items():
        merged = {**states, **parts}
        terms = tuple(MemoryTerm(t, round(merged.get(t, 0.0))) for t in Term)
        candidate = MemoryPeak(phase, terms)
        if best is None or candidate.allocated_bytes > best.allocated_bytes:
            best = candidate
    assert best is not None
    return best


def _loss_events(z: _Sizes) -> list[tuple[str, float | None]]:
    """The loss's tensors in order, (name, bytes) to allocate and (name, None) to free, from
    the logits to the bf16 gradient lm_head's backward reads (module docstring). Each
    sequence holds `per_logit` bytes per logit at its peak."""
    n = z.logits
    fp32, bf16 = n * FP32, n * BF16
    if z.per_logit == LOSS_PARALLEL_BYTES_PER_LOGIT:  # loss parallel's decompositions
        seq: list[tuple[str, float | None]] = [
            ("logits", bf16), ("upcast", fp32), ("shifted", fp32), ("exp", fp32),
            ("exp", None), ("upcast", None), ("log-probs", fp32), ("shifted", None),
            ("logits", None),
            ("nll grad", fp32), ("exp of log-probs", fp32), ("sum", fp32),
            ("exp of log-probs", None), ("nll grad", None), ("log-probs", None),
            ("logits grad", bf16), ("sum", None),
        ]  # fmt: skip
    elif z.per_logit == LOSS_BYTES_PER_LOGIT:  # eager: CUDA's fused kernels
        seq = [
            ("logits", bf16), ("upcast", fp32), ("log-probs", fp32), ("upcast", None),
            ("logits", None),
            ("nll grad", fp32), ("log_softmax grad", fp32), ("nll grad", None),
            ("log-probs", None), ("logits grad", bf16), ("log_softmax grad", None),
        ]  # fmt: skip
    elif z.per_logit == COMPILED_LOSS_PARALLEL_BYTES_PER_LOGIT:  # compiled, loss parallel
        seq = [
            ("logits", bf16), ("saved", fp32), ("logits", None), ("logits grad", bf16),
            ("saved", None),
        ]  # fmt: skip
    else:  # compiled: the bf16 logits saved, the fused backward's bf16 gradient
        seq = [("logits", bf16), ("logits grad", bf16), ("logits", None)]
    return seq


def _step_events(z: _Sizes, layers: int, step: int) -> list[Alloc | Free]:
    """One training step's allocations and frees by stream, as FSDP2 and torchtitan's train
    step order them (module docstring): the root's and each block's all-gather (copy-in
    stream) and copy-out, the saved activations, the loss, each block's backward with the
    next one prefetched, its gradients' reduce-scatter (the output, the sharded gradient, on
    the reduce-scatter stream), the optimizer's states at the first step's end."""
    ev: list[Alloc | Free] = []
    ag, rs = Stream.ALL_GATHER, Stream.REDUCE_SCATTER
    tag = f"{step}:"

    def alloc(key: str, size: float, stream: Stream = Stream.COMPUTE) -> None:
        ev.append(Alloc(tag + key, round(size), stream))

    def free(key: str) -> None:
        ev.append(Free(tag + key))

    def gather(name: str, size: float) -> None:
        """FSDP2's unshard: the previous all-gather's output freed, this one's input (the
        sharded bf16 casts) and output on the copy-in stream, the copy-out on compute."""
        alloc(f"{name} all-gather output", size, ag)
        alloc(f"{name} all-gather input", size / z.fsdp_ranks, ag)
        free(f"{name} all-gather input")
        alloc(f"{name} unsharded", size)

    block_grads = (z.grads - z.root_params) / layers
    grads_stream = rs if z.sharded else Stream.COMPUTE  # without FSDP autograd's own .grad
    if z.held_grads:  # the earlier microbatches' unsharded gradients (a pipeline's last one)
        alloc("accumulated grads", z.held_grads)
    if z.sharded:
        gather("root", z.root_weights)
    held = "root all-gather output"
    for i in range(layers):
        if z.sharded:
            free(held)
            gather(f"block {i}", z.block_weights)
            held = f"block {i} all-gather output"
        else:  # autocast's bf16 copies, saved for the block's backward
            alloc(f"block {i} unsharded", z.block_weights)
        alloc(f"block {i} saved", z.saved[i])
        if z.resharded and i < layers - 1:
            free(f"block {i} unsharded")  # reshard after forward
    if z.sharded:
        free(held)  # the root's post-forward frees the last all-gather's output
    alloc("lm_head input", z.head_input)
    if z.chunked:  # the slices before the last left lm_head's gradient, accumulating
        alloc("lm_head grad", z.head_grad)
    for name, size in _loss_events(z):  # the last slice's (every slice's alike)
        if size is None:
            free(name)
        else:
            alloc(name, size)
    if not z.chunked:
        alloc("lm_head grad", z.head_grad)
    free("logits grad")
    free("lm_head input")
    reducing = ""
    transient = z.backward - z.weight_grads - z.reduce_input
    for i in reversed(range(layers)):
        if z.resharded and i > 0:  # the next block's all-gather, prefetched
            gather(f"block {i - 1}", z.block_weights)
            free(f"block {i - 1} all-gather output")
        alloc(f"block {i} backward", transient)
        alloc(f"block {i} weight grads", z.weight_grads)
        if z.sharded:
            if reducing:
                free(reducing)  # the previous reduce-scatter's input, held to its end
            alloc(f"block {i} reduce input", z.reduce_input)
            reducing = f"block {i} reduce input"
        alloc(f"block {i} grads", block_grads, grads_stream)
        free(f"block {i} weight grads")
        free(f"block {i} backward")
        free(f"block {i} saved")
        free(f"block {i} unsharded")
    if z.sharded:
        alloc("root grads", max(0.0, z.root_grads - z.head_grad))
        free(reducing)
        alloc("root reduce input", z.root_grads * FP32 / BF16)
        free("root grads")
        free("lm_head grad")
    alloc("root sharded grads", z.root_params, grads_stream)
    if z.sharded:
        free("root reduce input")
        free("root unsharded")  # the root reshards after the backward
    else:
        free("lm_head grad")
    if z.held_grads:
        free("accumulated grads")
    return ev


def _gradient_keys(layers: int, step: int) -> list[str]:
    return [f"{step}:block {i} grads" for i in range(layers)] + [f"{step}:root sharded grads"]


def _events(z: _Sizes, layers: int) -> list[Alloc | Free]:
    """Two steps: the parameters first, the optimizer's states at the first step's end
    (AdamW's lazy init), `zero_grad` freeing the first step's gradients as the second opens
    (kept under gradient accumulation, which runs the second pass with them)."""
    ev: list[Alloc | Free] = [Alloc("parameters", round(z.params))]
    ev += _step_events(z, layers, 1)
    ev.append(Alloc("optimizer states", round(z.optimizer)))
    if not z.accumulating:
        ev += [Free(key) for key in _gradient_keys(layers, 1)]
    ev += _step_events(z, layers, 2)
    return ev


def _peak(m: _Model, run: RunConfig, fp8: bool, *, expandable: bool) -> MemoryPeak:
    """The allocated peak's terms and, beside them, what each stream's pools have reserved
    beyond what it holds at that peak (`allocator.simulate` over two steps)."""
    z = _sizes(m, run, fp8)
    allocated = _allocated(z)
    reserved = _reserved(z, m.layers, expandable=expandable)
    extra = tuple(
        MemoryTerm(term, max(0, reserved.reserve_beyond(stream)))
        for stream, term in RESERVE_TERMS.items()
    )
    kept = tuple(t for t in allocated.terms if t.term not in RESERVE_TERMS.values())
    return MemoryPeak(allocated.phase, kept + extra)


@lru_cache(maxsize=256)
def _reserved(z: _Sizes, layers: int, *, expandable: bool) -> AllocatorPeaks:
    """The allocator over two steps of these sizes: simulated once per sizes (bf16 and float8
    alike where float8 allocates the same, and every estimate a search repeats)."""
    return simulate(_events(z, layers), expandable=expandable)


def memory_estimate(
    architecture: Architecture,
    *,
    tokens: int,
    run: RunConfig,
    recipe: str,
    converted: Sequence[str],
    gpu_memory_bytes: int,
    expandable_segments: bool = True,
) -> MemoryEstimate:
    """Peak memory per GPU of one step in bf16 and float8 (`converted`: the fqns float8
    converts, as torchtitan does; `recipe`: torchao's, tensorwise saving float8 copies); the
    architecture as the run builds it (`fuse_qkv`: torchtitan's fused q/k/v row)."""
    if run.fuse_qkv:
        architecture = fuse_qkv(architecture)
    if run.fsdp_on and run.fsdp_degree is None:
        raise MemoryModelError(
            f"the FSDP degree is unknown: give it ({term('fsdp')} N) to size memory"
        )
    layers = max((lin.count for lin in architecture.linears if is_block_fqn(lin.fqn)), default=0)
    models = [
        _model(architecture, tokens=tokens, run=run, converted=frozenset(converted),
               recipe=recipe, stage=stage)
        for stage in _stages(run, layers)
    ]  # fmt: skip

    def largest(fp8: bool) -> MemoryPeak:
        peaks = (_peak(m, run, fp8=fp8, expandable=expandable_segments) for m in models)
        return max(peaks, key=lambda peak: peak.peak_bytes)

    return MemoryEstimate(bf16=largest(False), fp8=largest(True), gpu_memory_bytes=gpu_memory_bytes)


def headroom(
    estimate_at: Callable[[RunConfig, int], MemoryEstimate], run: RunConfig, *, tokens: int
) -> Headroom:
    """What fits in the GPU's memory, per precision: the cheapest recompute mode at the run's
    tokens, and the largest local batch (samples of `seq_len` tokens; the run's tokens as one
    sample where no sequence length divides them) under the run's mode. `estimate_at(run,
    tokens)` is `memory_estimate` with the rest fixed; peaks grow with tokens. Under a pipeline
    `tokens` is a microbatch's, which keeps its size (torchtitan's
    pipeline_parallel_microbatch_size): the local batch is more microbatches."""
    given = run.local_seq_len  # under CP a rank holds a chunk of every sequence
    seq_len = given if given and tokens % given == 0 and given % run.tp == 0 else tokens
    modes = {
        mode: estimate_at(replace(run, recompute=mode, recompute_every=1), tokens)
        for mode in CHEAPEST_FIRST
    }
    bf16 = next((mode for mode, e in modes.items() if e.bf16_fits), None)
    fp8 = next((mode for mode, e in modes.items() if e.fp8_fits), None)

    found: dict[int, MemoryEstimate] = {}
    pipe = run.pipeline
    per_micro = max(1, tokens // seq_len)  # samples a microbatch holds under a pipeline

    def at(batch: int) -> MemoryEstimate:
        """The run at `batch` samples, each estimated once for both precisions' searches."""
        if batch not in found:
            if pipe is None:
                found[batch] = estimate_at(run, batch * seq_len)
            else:
                micro = replace(pipe, microbatches=max(1, batch // per_micro))
                found[batch] = estimate_at(replace(run, pipeline=micro), tokens)
        return found[batch]

    local_batch = tokens // seq_len * (pipe.microbatches if pipe else 1)

    def largest(fits: Callable[[MemoryEstimate], bool]) -> int:
        # from the run's own batch, doubling while it fits, then halving the gap: low fits
        # (or is 0), high does not; tokens stay within a shape dimension
        step = per_micro if pipe else 1
        cap = (MAX_LOCAL_BATCH if pipe else min(MAX_LOCAL_BATCH, MAX_DIM // seq_len)) + step
        low, high = 0, min(max(step, local_batch), cap)
        while high < cap and fits(at(high)):
            low, high = high, min(2 * high, cap)
        while high - low > step:
            middle = (low + high) // 2 // step * step
            if fits(at(middle)):
                low = middle
            else:
                high = middle
        return low

    return Headroom(
        seq_len=seq_len,
        local_batch=local_batch,
        bf16_recompute=bf16,
        fp8_recompute=fp8,
        bf16_local_batch=largest(lambda e: e.bf16_fits),
        fp8_local_batch=largest(lambda e: e.fp8_fits),
    )


def fitting_fsdp(
    estimate_at: Callable[[RunConfig, int], MemoryEstimate], run: RunConfig, *, tokens: int
) -> tuple[int, Recompute] | None:
    """Where no recompute mode fits bf16 at the run's layout: the smallest FSDP degree (a
    power of two above the run's) at which it fits, at the run's recompute mode or else full
    recompute, and that mode; None where none does within MAX_DEGREE GPUs. FSDP shards the
    states over more ranks; the tokens per rank stay the run's."""
    others = run.tp * run.dp_replicate * run.cp
    degree = max(2, 2 * run.fsdp_ranks)
    while degree * others <= MAX_DEGREE:
        for mode in dict.fromkeys((run.recompute, Recompute.FULL)):
            wider = replace(run, fsdp=degree, recompute=mode, recompute_every=1)
            if estimate_at(wider, tokens).bf16_fits:
                return degree, mode
        degree *= 2
    return None
