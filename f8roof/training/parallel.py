"""A model at training scale: the local (M, K, N) each GPU runs, and what the step does with it.

`RunConfig` is how the model is trained: tensor parallel degree (`tp`), expert parallel
degree (`ep`), FSDP, activation checkpointing (`recompute`) and, when known, the measured bf16
step time. `local_layers` turns an `Architecture` and the tokens each GPU processes per step
into one `LocalLayer` per layer type: the shape its gemms run at on one GPU.

Conventions (torchtitan's, the framework torchao's float8 training is developed against):
- tokens: the tokens of one data-parallel rank per step (local batch x sequence length). Every
  rank of a TP group runs all of them through its shard (sequence parallelism all-gathers the
  sequence before a column-parallel linear), so M is the tokens for every dense linear.
- TP: column-parallel linears run N / tp, row-parallel ones K / tp, replicated ones the full
  shape (`architectures.TPStyle`). A degree that does not divide a sharded dim is an error.
- routed experts (MoE): each GPU holds experts / ep of a layer's experts and runs them as one
  grouped gemm per projection. With ep = 1 the experts are tensor-parallel like a dense MLP
  (torchtitan's TensorParallel on GroupedExperts) and each GPU routes tokens x top_k rows. With
  ep > 1 they are whole (torchtitan refuses expert-tensor-parallelism for float8 grouped gemms)
  and, with tp > 1 too, TP is borrowed for EP: each GPU routes tokens / tp of the tokens
  (torchtitan's ReordererSequenceParallel). After the all-to-all, a GPU's experts see the rows
  its EP group routed to them; with balanced routing that is, per expert,
      tokens per expert = (tokens / tp if ep > 1 else tokens) x top_k / (experts / ep)
  (with ep = 1, tokens x top_k / experts). Float8 grouped gemms need every group's row count a
  multiple of 16 (torchao 0.18, torchao/prototype/moe_training/fp8_grouped_mm.py:
  `pad_token_groups(A, offs, alignment_size=16)`, "Group sizes must be divisible by 16"), and
  an empty expert is padded to one alignment unit (moe_training/ep/kernels.py
  `generate_permute_indices`: `clamp_min(tokens, alignment)`), so M = max(16, ceil16(tokens per
  expert)). Balanced routing is the simplification: real routers are imbalanced, the sum of the
  rows is what it is, but the per-expert shapes spread around the mean.
- FSDP shards weights between uses; each layer's gemms run the all-gathered full weight, so it
  changes no gemm shape; its collectives are the step summary's (f8roof.engine.step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from f8roof.errors import term
from f8roof.training.catalog import (
    Architecture,
    NamedLinear,
    TPStyle,
    check_tokens,
)
from f8roof.training.checkpointing import is_block_fqn
from f8roof.training.run_config import ONE_GPU, ParallelismError, RunConfig

# torchao 0.18 torchao/prototype/moe_training/fp8_grouped_mm.py pads token groups with
# `alignment_size=16`; `Float8TrainingOpConfig.pad_token_groups_for_grouped_mm` ("pad the
# token group sizes to multiples of 16"). MXFP8 uses 32; not modelled here.
GROUPED_M_ALIGNMENT = 16


@dataclass(frozen=True)
class LocalLayer:
    """One layer type as one GPU runs it: its gemms' (M, K, N) and how it got there."""

    linear: NamedLinear
    M: int
    K: int
    N: int
    experts_per_device: int = 0  # routed experts this GPU runs per layer (0: a dense linear)
    tokens_per_expert: float = math.nan  # before padding (M above it: padded); nan for dense

    @property
    def grouped(self) -> bool:
        return self.experts_per_device > 0

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.M, self.K, self.N)

    @property
    def in_block(self) -> bool:
        """Inside the repeated transformer blocks (its name has a layer index). Activation
        checkpointing wraps the blocks only: torchtitan's `apply_ac` wraps each of
        `model.layers`, never the final norm and the output projection (lm_head)."""
        return is_block_fqn(self.linear.fqn)


def padded_group_rows(rows: float, alignment: int = GROUPED_M_ALIGNMENT) -> int:
    """Rows of one group of a float8 grouped gemm: the expert's tokens rounded up to the
    alignment, and at least one alignment unit (an empty expert is padded too)."""
    whole = max(1, math.ceil(rows))
    return max(alignment, -(-whole // alignment) * alignment)


def tokens_per_expert(
    tokens: int, *, experts: int, top_k: int, tp: int = 1, ep: int = 1
) -> tuple[float, int]:
    """(mean tokens each local expert receives, experts per device) under balanced routing."""
    if experts % ep:
        raise ParallelismError(
            f"{term('ep')} {ep} does not divide the {experts} routed experts of a layer"
        )
    routed_by_device = tokens / tp if ep > 1 else tokens
    per_device = experts // ep
    return routed_by_device * top_k / per_device, per_device


def _shard(linear: NamedLinear, tp: int, dim: str) -> int:
    size = getattr(linear, dim)
    style = linear.tp.value
    if size % tp:
        raise ParallelismError(
            f"{term('tp')} {tp} does not divide {dim} = {size} of {linear.fqn} ({style}-parallel)"
        )
    if linear.heads and linear.heads % tp:
        # TP gives each rank whole heads (torchtitan: n_heads // tp, n_kv_heads // tp per rank)
        raise ParallelismError(
            f"{term('tp')} {tp} does not divide the {linear.heads} heads of {linear.fqn} "
            f"({dim} = {size}, {style}-parallel)"
        )
    return size // tp


def local_layers(
    architecture: Architecture, tokens: int, setup: RunConfig = ONE_GPU
) -> list[LocalLayer]:
    """One `LocalLayer` per layer type: the (M, K, N) each GPU's gemms run (see the module
    docstring for the conventions). Raises ParallelismError for a degree that does not fit."""
    tokens = check_tokens(tokens)
    tp, ep = setup.tp, setup.ep
    if ep > 1 and not architecture.is_moe:
        raise ParallelismError(f"{term('ep')} {ep}: {architecture.name} has no routed experts")

    out = []
    for linear in architecture.linears:
        K, N = linear.K, linear.N
        # routed experts under EP are whole: torchtitan does not combine float8 grouped gemms
        # with expert tensor parallelism
        sharded = tp > 1 and not (linear.grouped and ep > 1)
        if sharded and linear.tp is TPStyle.COLUMN:
            N = _shard(linear, tp, "N")
        elif sharded and linear.tp is TPStyle.ROW:
            K = _shard(linear, tp, "K")
        if not linear.grouped:
            out.append(LocalLayer(linear, tokens, K, N))
            continue
        routed = linear.routed
        assert routed is not None
        rows, per_device = tokens_per_expert(
            tokens, experts=routed.experts, top_k=routed.top_k, tp=tp, ep=ep
        )
        out.append(LocalLayer(linear, padded_group_rows(rows), K, N, per_device, rows))
    if tp > 1 and tokens % tp:
        # sequence parallelism (torchtitan's TP plan) shards the sequence dim over the TP ranks
        raise ParallelismError(
            f"{term('tokens')} {tokens}: sequence parallelism splits them over TP ranks, and "
            f"{term('tp')} {tp} does not divide them"
        )
    return out


def fsdp_shards(grouped: Any, run: RunConfig) -> Any:
    """The ranks FSDP shards a weight over (per row where `grouped` is an array): torchtitan's
    dp_shard_cp mesh (data-parallel x context-parallel ranks); routed experts under EP, which
    already splits them over `ep` of those ranks (EP borrows its ranks from dp_shard), over
    the rest (torchtitan's dp_shard_mod_ep). Either way a GPU holds the same share of every
    weight: EP moves the experts' split, it does not shrink it. The one rule for the step's
    parameters per GPU and the memory model's."""
    ranks = run.fsdp_ranks * run.cp
    experts = max(ranks // run.ep, 1)
    return np.where(np.asarray(grouped, dtype=bool), experts, ranks)
