"""What the step runs beside its blocks: embedding, final norm, loss, optimizer, gradient
clipping and their all-reduces; context parallelism's key/value exchange; a pipeline's
sends between stages."""

from __future__ import annotations

from typing import Any

import numpy as np

from f8roof.engine.recommend import Recommendation
from f8roof.engine.resolve import Resolved
from f8roof.engine.step.conversion import block_count, hidden_size, params_per_gpu
from f8roof.engine.step.fabric import BF16_BYTES, FP32_BYTES, comm_group, fabric_of, streaming_rate
from f8roof.engine.step.parts import (
    OutsideBlocks,
    outside_blocks,
)
from f8roof.notes import Note, Topic, note
from f8roof.timing.attention import FORWARD_SHARE
from f8roof.timing.comm import (
    CollectiveKind,
    collective_time_s,
    micro_pipelined_exposed_s,
    placement_for,
    send_time_s,
)
from f8roof.training.catalog import FUSED_QKV
from f8roof.training.run_config import (
    Pipeline,
    Recompute,
    RunConfig,
)


def outside_parts(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    convert: np.ndarray,
    notes: list[Note],
) -> OutsideBlocks:
    """What the step runs outside its blocks (`parts.outside_blocks`), at the
    calibration's pointwise streaming rate."""
    rows = rec.rows
    head = rows.take(rows["fqn"] == "lm_head")
    dim = hidden_size(rows)
    vocab = int(head["full_N"][0]) if len(head) else 0
    params, fp8_params = params_per_gpu(rec, run, convert)
    per_byte, launch = streaming_rate(resolved)
    world = run.tp * run.fsdp_ranks * run.cp * run.dp_replicate * run.pp
    fabric = fabric_of(rec, []) if world > 1 else None
    norm_s = scales_s = 0.0
    if fabric is not None:
        place = placement_for(group_size=world, stride=1, gpus_per_node=run.gpus_per_node)
        kw: dict[str, Any] = {"group_size": world, "placement": place, "fabric": fabric}
        norm_s = float(collective_time_s("all_reduce", nbytes=FP32_BYTES, **kw))
        tensors = int(rows["count"][convert].sum())
        scales_s = float(collective_time_s("all_reduce", nbytes=FP32_BYTES * tensors, **kw))
    precompute = bool(run.precompute_scales and run.float8_all_gather and convert.any())
    sharded = run.loss_parallel and run.tp > 1
    gathered = run.tp > 1 and not run.loss_parallel
    gather_s = 0.0
    if gathered and (tp_fabric := fabric_of(rec, notes)) is not None:
        # the output projection's logits all-gathered over the TP ranks before the loss
        tp_place = placement_for(group_size=run.tp, stride=1, gpus_per_node=run.gpus_per_node)
        gather_s = float(
            collective_time_s(
                CollectiveKind.ALL_GATHER,
                nbytes=rec.tokens * vocab * BF16_BYTES,
                group_size=run.tp,
                placement=tp_place,
                fabric=tp_fabric,
            )
        )
    # under a pipeline the step holds the rank's share of them (`parts.pipelined`)
    loss = "compiled loss" if run.loss_compiled and not sharded else "eager fp32 loss"
    notes.append(
        note(
            Topic.OUTSIDE_BLOCKS,
            params_per_gpu=params / run.pp,
            precompute=precompute,
            loss=loss,
            gathered=gathered,
        )
    )
    return outside_blocks(
        tokens=rec.tokens,
        dim=dim,
        vocab=vocab,
        tp=run.tp,
        params_per_gpu=params,
        fp8_params_per_gpu=fp8_params,
        stream_s_per_byte=per_byte,
        launch_s=launch,
        grad_norm_all_reduce_s=norm_s,
        scales_all_reduce_s=scales_s if precompute else None,
        loss_compiled=run.loss_compiled,
        loss_parallel=run.loss_parallel,
        gather_logits_s=gather_s,
    )


def cp_comm(rec: Recommendation, run: RunConfig, notes: list[Note], attention: float) -> float:
    """Context parallelism's exposed time per block, the same in both precisions: torch's
    context_parallel SDPA all-gathers every sequence's keys and values over the CP ranks
    before each rank's attention (torchtitan's default rotate method, "allgather") and
    reduce-scatters their gradients in the backward; what a checkpoint reruns gathers again
    (full AC's forward; per-op SAC saves no all-gather, so the backward gathers again). With
    "alltoall" the shards pass round the ring beside the attention of the shard before
    (`micro_pipelined_exposed_s` with the attention as the work). `attention`: the block's
    attention forward + backward on this GPU (timing/attention.py)."""
    rows = rec.rows
    keys = np.array([str(f).endswith(("k_proj", ".wk")) for f in rows["fqn"]])
    fused = np.array([str(f).endswith(FUSED_QKV) for f in rows["fqn"]])
    heads = rows.take(keys) if keys.any() else rows.take(rows["tp"] == "row")
    width = float(heads["N"][0] if keys.any() else heads["K"][0])  # this GPU's heads
    if fused.any() and not keys.any():  # wqkv's outputs less the queries' (wo's K): k and v
        width = (float(rows["N"][fused][0]) - width) / 2
    # keys and values of every chunk of the sequences, gathered
    nbytes = rec.tokens * run.cp * width * 2 * BF16_BYTES
    fabric = fabric_of(rec, notes)
    if fabric is None or not len(heads):
        return 0.0
    kw, _ = comm_group(fabric, run, size=run.cp, stride=run.tp)
    gather = float(collective_time_s("all_gather", nbytes=nbytes, **kw))
    scatter = float(collective_time_s("reduce_scatter", nbytes=nbytes, **kw))
    again = {
        Recompute.NONE: 0.0,
        Recompute.SELECTIVE: 1.0,
        Recompute.FULL: run.recompute_share(block_count(rec)),
    }[run.recompute]
    if run.cp_rotate == "alltoall":
        forward = FORWARD_SHARE * attention
        gather = float(micro_pipelined_exposed_s(gather, forward, group_size=run.cp))
        scatter = float(micro_pipelined_exposed_s(scatter, attention - forward, group_size=run.cp))
    exposed = gather * (1 + again) + scatter
    notes.append(
        note(
            Topic.CONTEXT_PARALLEL,
            degree=run.cp,
            rotate=run.cp_rotate,
            seq_len=run.seq_len,
            gather_ms=gather * 1e3,
            placement=kw["placement"].value,
        )
    )
    return exposed


def send_s(rec: Recommendation, run: RunConfig, pipeline: Pipeline, notes: list[Note]) -> float:
    """One send between pipeline stages: a microbatch's activations at a stage boundary (the
    residual stream, sequence-sharded over TP), between ranks TP x FSDP x replicas apart
    (torchtitan's mesh puts PP outermost)."""
    nbytes = rec.tokens * hidden_size(rec.rows) * BF16_BYTES / run.tp
    fabric = fabric_of(rec, notes)
    stride = run.tp * run.cp * run.fsdp_ranks * run.dp_replicate
    place = placement_for(
        group_size=pipeline.degree, stride=stride, gpus_per_node=run.gpus_per_node
    )
    seconds = 0.0
    if fabric is not None:
        kw, _ = comm_group(fabric, run, size=pipeline.degree, stride=stride)
        seconds = float(send_time_s(nbytes=nbytes, placement=place, fabric=kw["fabric"]))
    notes.append(
        note(
            Topic.PIPELINE,
            degree=pipeline.degree,
            schedule=pipeline.schedule,
            microbatches=pipeline.microbatches,
            stages_per_rank=pipeline.stages_per_rank,
            tokens=rec.tokens,
            bubble=pipeline.bubble_share,
            sends=pipeline.fill_drain_sends,
            send_ms=seconds * 1e3,
            placement=place.value,
            per="step" if run.accumulation == 1 else "pass",
        )
    )
    return seconds
