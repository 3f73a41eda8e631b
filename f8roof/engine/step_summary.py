"""A model's recommendation at training scale -> the step summary (training/step.py).

Which linears run in float8: as torchtitan converts them (every nn.Linear but `filter_fqns`,
torchao's auto filter with "auto_filter_small_kn"; the llama configs' ["output"] without a
setup; routed experts, 3D parameters no nn.Linear, only with `moe_fqns_prototype`), the figure
published runs measure; f8roof's own decisions' step is noted beside it.

One transformer block's time parts per precision, then the step. Two sources for the block:
- the sharded block's graphs (`f8roof.engine.sharded`: the shipped fits at these tokens, or
  `--overhead codegen`'s compile): every kernel, gemm, recomputed op and TP collective one rank
  runs, timed by the calibration; block linears kept in bf16 put back by their per-layer
  difference;
- otherwise (no fit: full AC, async TP, MoE, other architectures; said why) the per-layer rows
  `recommend` produced, with communication and recompute modelled around them:
  - communication (timing/comm.py, the GPU's fabric): sequence-parallel TP, per block one
    all-gather of the norm's output before each column-parallel group and one reduce-scatter
    after each row-parallel linear, tokens x hidden bf16, mirrored in the backward; tensorwise
    gathers the forward inputs in float8 (torchao's float8 TP plan);
  - recompute (training/checkpointing.py): full reruns every block linear's forward; selective
    follows torchtitan's per-op SAC: every second matmul reruns its forward gemm in both
    precisions (a float8 linear shows SAC aten.mm), the float8 casts rerun for every float8
    linear, and the forward's all-gathers run again.
TP communication is exposed unless async TP, which pairs each collective with the gemm it
feeds or drains (torch's micro-pipelined TP: all but the local shard's share hides it). FSDP, in both: each block's weight shards gathered
(bf16, or float8 with float8 all-gather) before forward and backward, gradients
reduce-scattered in fp32 (torchtitan's mixed_precision_reduce), hidden behind the block's
compute. Routed experts' all-to-all, pipeline and context parallelism are not modelled (said so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.decision import float8_time_ends
from f8roof.engine.recommend import Recommendation, forward_share_fn, gemm_floor_s, hold
from f8roof.engine.resolve import Resolved
from f8roof.engine.sharded import BlockComparison, CaptureTimes, capture_times
from f8roof.errors import F8RoofError, ModelError
from f8roof.notes import Note, Topic, note
from f8roof.timing.attention import FORWARD_SHARE, attention_s
from f8roof.timing.attention import SOURCE as ATTENTION_SOURCE
from f8roof.timing.comm import SOURCE as COMM_SOURCE
from f8roof.timing.comm import (
    CollectiveKind,
    CommError,
    Interconnect,
    Placement,
    collective_time_s,
    find_interconnect,
    float8_all_gather_time_s,
    fsdp_exposed_time_s,
    group_fabric,
    micro_pipelined_exposed_s,
    placement_for,
    send_time_s,
)
from f8roof.timing.gemm import GemmRole, fp8_gemm_dtype
from f8roof.traffic.byte_table import ModelKey, model_bytes
from f8roof.traffic.recipes import Role
from f8roof.traffic.variant import Before, Context, Level, context_fused_roles
from f8roof.training.block import BlockCapture
from f8roof.training.block import CollectiveKind as GraphCollective
from f8roof.training.catalog import TPStyle
from f8roof.training.checkpointing import (
    MM,
    Decision,
    is_block_fqn,
    sac_policy,
)
from f8roof.training.run_config import (
    AUTO_FILTER,
    Pipeline,
    Recompute,
    RunConfig,
    assumed_seq_len,
)
from f8roof.training.step import (
    Basis,
    BlockTimes,
    OutsideBlocks,
    StepSummary,
    outside_blocks,
    step_summary,
)
from f8roof.training.torchtitan_names import filtered, layer_type

BF16_BYTES = 2
FP32_BYTES = 4
# a step and what it was timed from (the sharded block, or nothing)
StepAt = TypeVar("StepAt", bound=tuple[Any, ...])
# torchtitan's llama job configs keep the output projection (lm_head) in bf16
DEFAULT_FILTER = ("output",)


def _kept_by_filters(
    rec: Recommendation, run: RunConfig, *, as_run: bool
) -> tuple[np.ndarray, dict[str, Any]]:
    """Per row: kept in bf16 by the setup's filters (torchtitan's llama configs' ["output"]
    for the step as run without a setup), torchao's auto filter among them; and the values
    of the note saying which."""
    rows = rec.rows
    given = run.filter_fqns
    filters = given if given is not None else (DEFAULT_FILTER if as_run else ())
    kept = np.array(
        [filtered(f, filters, count=c) for f, c in zip(rows["fqn"], rows["count"])], dtype=bool
    )
    said = {
        "filters": [f for f in filters if f != AUTO_FILTER],
        "torchtitan_default": given is None,
        "auto_recipe": "",
    }
    if AUTO_FILTER in filters:
        from f8roof.engine.filter_compare import torchao_auto_filter

        recipe = rec.recipes[0]
        # torchtitan converts before it parallelizes: the filter sees the whole weight
        converts = torchao_auto_filter(
            recipe, rows["full_K"].astype(np.int64), rows["full_N"].astype(np.int64)
        )
        kept |= ~converts & ~rows["grouped"].astype(bool)
        said["auto_recipe"] = recipe
    return kept, said


def kept_by_setup(rec: Recommendation) -> np.ndarray:
    """Per row: kept in bf16 by the setup's own filters, whatever f8roof decides for it."""
    kept: np.ndarray = _kept_by_filters(rec, rec.setup, as_run=False)[0]
    return kept


@dataclass(frozen=True)
class StepAnswer:
    """The step two ways: with f8roof's decisions (`chosen`, the headline) and as torchtitan
    converts it (`as_run`: every linear but the filter_fqns, what published runs measure);
    `fits_only`: as_run from the per-layer rows where the blocks came from graphs."""

    chosen: StepSummary
    as_run: StepSummary
    fits_only: StepSummary | None = None
    converted_types: int = 0  # layer types f8roof converts
    layer_types: int = 0
    kept_by_setup: tuple[bool, ...] = ()  # per row: the setup's own filters keep it in bf16


def summarize_step(
    rec: Recommendation,
    resolved: Resolved,
    *,
    block: BlockComparison | None = None,
    no_block: Note | None = None,
    bf16_block: BlockCapture | None = None,
) -> StepAnswer:
    """The step with f8roof's decisions and as torchtitan runs it: every linear in float8 but
    the setup's filter_fqns (torchtitan's llama configs' ["output"] without a setup), which is
    what published runs measure. With `block` (one rank's sharded block, compiled or from the
    shipped fits) the blocks are timed from that block's graphs, and the per-layer fits'
    answer is kept beside; `no_block` says why there is none. `bf16_block`: without `block`,
    the bf16 graphs of the same setup, so that its bf16 step is the one every recipe has."""
    run = on_fabric(rec.setup, rec.gpu)
    try:
        timed = None
        if block is not None:  # timed once, read by both summaries that use the graphs
            timed = _TimedBlock(
                block, (_timed(block.bf16, resolved), _timed(block.float8, resolved))
            )
        elif bf16_block is not None:
            both = BlockComparison(bf16_block, bf16_block)
            timed = _TimedBlock(both, (_timed(bf16_block, resolved),) * 2, bf16_only=True)
            if no_block is not None:  # the float8 side only is per layer
                no_block = replace(no_block, values={**no_block.values, "on_bf16_graphs": True})
        notes = [*([no_block] if no_block is not None else []), *run.assumptions]
        return StepAnswer(
            chosen=_summarize(rec, resolved, run, timed, list(notes), as_run=False),
            as_run=_summarize(rec, resolved, run, timed, list(notes), as_run=True),
            fits_only=(
                None if block is None else _summarize(rec, resolved, run, None, [], as_run=True)
            ),
            converted_types=int(rec.rows["convert"].astype(bool).sum()),
            layer_types=len(rec.rows),
            kept_by_setup=tuple(bool(k) for k in kept_by_setup(rec)),
        )
    except ModelError as e:
        raise F8RoofError(e.marked) from None


def step_decides(
    rec: Recommendation, resolved: Resolved, step_of: Callable[[Recommendation], StepAt]
) -> tuple[Recommendation, StepAt]:
    """The recommendation the step bears out, and its step (`step_of`: a recommendation's
    step and what it was timed from): a layer type that wins alone stays in bf16 where the
    step with f8roof's choice is shorter without it. What float8 adds beside a layer's gemms
    and casts (recompute, TP and FSDP collectives) is the step's to see, not the layer's.
    Each converted type is tried once against the choice."""
    first = step_of(rec)
    step = first[0]
    chosen = rec.rows["convert"].astype(bool) & ~np.array(step.kept_by_setup, dtype=bool)
    losing = [
        fqn
        for fqn in rec.rows["fqn"][chosen]
        if step_of(hold(rec, resolved, [fqn]))[0].chosen.fp8_s < step.chosen.fp8_s
    ]
    if not losing:
        return rec, first
    rec = hold(rec, resolved, losing)
    return rec, step_of(rec)


def _timed(capture: BlockCapture, resolved: Resolved) -> CaptureTimes:
    assert resolved.calibration is not None, "a block is timed by a calibration"
    return capture_times(
        capture, calibration=resolved.calibration, gemm_model=resolved.config.gemm_model
    )


def _summarize(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    block_graphs: _TimedBlock | None,
    notes: list[Note],
    *,
    as_run: bool,
) -> StepSummary:
    """`as_run`: every linear float8 can run in float8 but the filtered ones; otherwise
    f8roof's decisions (the setup's filters still apply)."""
    rows = rec.rows
    setup = rec.setup
    block = np.array([is_block_fqn(f) for f in rows["fqn"]])
    head = rows["fqn"] == "lm_head"
    bf16_col, fp8_col = (
        ("bf16_s", "fp8_s")
        if rec.criterion == "speedup"
        else (
            "bf16_gemm_s",
            "fp8_s_worst",
        )
    )
    filtered, said = _kept_by_filters(rec, run, as_run=as_run)
    grouped = rows["grouped"].astype(bool)
    if as_run:
        convert = np.isfinite(rows[fp8_col].astype(np.float64)) & ~filtered
        experts = "none"
        if grouped.any():
            moe = [f for f in rows["fqn"][grouped] if any(m in f for m in run.moe_fqns)]
            convert &= ~grouped | np.array([f in moe for f in rows["fqn"]], dtype=bool)
            experts = "converted" if moe else "kept"
        notes.append(note(Topic.AS_CONVERTED, experts=experts, moe=list(run.moe_fqns), **said))
    else:
        convert = rows["convert"].astype(bool) & ~filtered
    counts = rows["count"].astype(np.float64)
    layers = _layers(rec)

    bf16 = rows[bf16_col].astype(np.float64)
    fp8 = rows[fp8_col].astype(np.float64)
    rec_bf16 = _column(rows, "recompute_bf16_s")
    rec_fp8 = _column(rows, "recompute_fp8_s")
    # the linears without their full-AC recompute (recommend folds it into the times); in the
    # per-layer path a linear whose input an earlier one of its block casts pays no cast of it
    lin_bf16 = bf16 - rec_bf16
    graphs = block_graphs is not None and not block_graphs.bf16_only
    shared = np.zeros(len(rows)) if graphs else _shared_input_s(rows, resolved, convert, block, fp8)
    if shared.any():
        notes.append(note(Topic.SHARED_INPUT_CAST))
        # the saving splits as the row's float8 time does between its passes and its recompute
        rec_fp8 = rec_fp8 - shared * np.divide(rec_fp8, fp8, out=np.zeros(len(rows)), where=fp8 > 0)
        fp8 = fp8 - shared
    lin_fp8 = np.where(convert, fp8 - rec_fp8, lin_bf16)
    gemm_fp8 = np.where(convert, rows["fp8_gemm_s"].astype(np.float64) - rec_fp8, 0.0)
    gemm_fp8 = np.where(convert, np.minimum(gemm_fp8, lin_fp8), lin_bf16)
    re_bf16 = rec_bf16
    re_fp8 = np.where(convert, rec_fp8, rec_bf16)
    if setup.ep > 1 and grouped.any():
        notes.append(note(Topic.EP_ALL_TO_ALL, ep=setup.ep))
    if setup.recompute is Recompute.SELECTIVE:
        if not graphs:  # the graphs hold their own recompute
            re_bf16, re_fp8 = _selective(rows, resolved, convert, block, run)
        notes.append(
            note(Topic.SELECTIVE_SAC, compiled=graphs, source=sac_policy(run.sac_policy).source)
        )

    def per_block(values: np.ndarray) -> float:
        return float((counts * values)[block].sum()) / layers

    attention, attention_again = _attention(rec, resolved, run, notes)
    streaming = _streaming(resolved)
    # torch's micro-pipelined TP pairs each collective with the gemm it feeds or drains
    pipelined = (
        _async_tp(
            rec,
            rows,
            convert,
            block,
            run,
            notes,
            _forward_gemms(rows, resolved, convert, block),
            streaming,
        )
        if run.async_tp
        else None
    )

    if graphs and block_graphs is not None:
        # a block linear the recommendation keeps in bf16 runs in float8 in the graphs: its
        # per-layer difference puts it back
        kept = np.where(block & ~convert, lin_bf16 - (fp8 - rec_fp8), 0.0)
        bf16_block, fp8_block = _graph_blocks(
            rec,
            run,
            block_graphs,
            per_block(kept),
            notes,
            convert,
            (attention, attention_again),
            pipelined,
            streaming,
        )
    else:
        forward = (per_block(lin_bf16) / 3, per_block(lin_fp8) / 3)
        again = (per_block(re_bf16) + attention_again, per_block(re_fp8) + attention_again)
        comm_bf16, comm_fp8 = pipelined or _tp_comm(rec, rows, convert, block, layers, run, notes)
        compute = [
            (f + attention * FORWARD_SHARE, 2 * f + attention * (1 - FORWARD_SHARE) + r)
            for f, r in zip(forward, again)
        ]
        fsdp = _fsdp_comm(rec, rows, convert, block, layers, run, notes, compute, streaming)
        bf16_block = BlockTimes(
            linear_gemm_s=per_block(lin_bf16),
            other_compute_s=attention,
            tp_comm_s=comm_bf16,
            fsdp_comm_s=fsdp[0],
            recompute_s=per_block(re_bf16) + attention_again,
        )
        fp8_block = BlockTimes(
            linear_gemm_s=per_block(gemm_fp8),
            overhead_s=max(per_block(lin_fp8) - per_block(gemm_fp8), 0.0),
            other_compute_s=attention,
            tp_comm_s=comm_fp8,
            fsdp_comm_s=fsdp[1],
            recompute_s=per_block(re_fp8) + attention_again,
        )
        if block_graphs is not None:  # bf16 graphs alone: float8 moves them as the rows do
            none = np.zeros(len(rows), dtype=bool)
            graph16, _ = _graph_blocks(
                rec,
                run,
                block_graphs,
                0.0,
                [],
                none,
                (attention, attention_again),
                pipelined,
                streaming,
            )
            bf16_block, fp8_block = graph16, _moved(graph16, bf16_block, fp8_block)
            notes.append(note(Topic.FLOAT8_BY_LAYERS))
    other = ~block & ~head
    if other.any():
        notes.append(note(Topic.OTHER_LINEARS, fqns=list(rows["fqn"][other])))
    side = ~block
    head_bf16 = float((counts * (lin_bf16 + re_bf16))[side].sum())
    head_fp8 = float((counts * np.where(convert, lin_fp8 + re_fp8, lin_bf16 + re_bf16))[side].sum())
    converted_side = bool((convert & side).any())
    if run.cp > 1:
        cp_s = _cp_comm(rec, run, notes, attention)
        bf16_block = replace(bf16_block, cp_comm_s=cp_s)
        fp8_block = replace(fp8_block, cp_comm_s=cp_s)
    pipeline = run.pipeline.for_layers(layers) if run.pipeline is not None else None
    if run.accumulation > 1:
        notes.append(note(Topic.ACCUMULATION, passes=run.accumulation, tokens=rec.tokens))
    return step_summary(
        bf16=bf16_block,
        fp8=fp8_block,
        layers=layers,
        lm_head_bf16_s=head_bf16,
        lm_head_fp8_s=head_fp8 if converted_side else None,
        outside=_outside(rec, resolved, run, convert, notes),
        gemm_floor_s=gemm_floor_s(rec, resolved),
        step_s=setup.step_s,
        notes=notes,
        fp8_band_s=_band_moves(rows, convert, counts, rec.criterion),
        block_basis=Basis.PER_LAYER if block_graphs is None else Basis.GRAPHS,
        pipeline=pipeline,
        send_s=_send_s(rec, run, pipeline, notes) if pipeline is not None else 0.0,
        context_parallel=run.cp > 1,
        accumulation=run.accumulation,
    )


def _moved(graph16: BlockTimes, rows16: BlockTimes, rows8: BlockTimes) -> BlockTimes:
    """The float8 block as the bf16 graphs plus what float8 changes in the per-layer rows,
    part by part (a part float8 shortens below nothing is nothing)."""
    return BlockTimes(
        **{
            f: max(getattr(graph16, f) + getattr(rows8, f) - getattr(rows16, f), 0.0)
            for f in BlockTimes.__dataclass_fields__
        }
    )


def _weights(rows: Columns, tp: int) -> np.ndarray:
    """Per row, the weight elements one GPU holds before FSDP shards them: every linear of
    the type (experts on this device included), split over TP unless replicated."""
    counts = rows["count"].astype(np.float64)
    shard = np.where(rows["tp"] == "replicated", 1, tp)
    experts = np.maximum(1, rows["experts_per_device"].astype(np.float64))
    K = rows["full_K"].astype(np.float64)
    N = rows["full_N"].astype(np.float64)
    weights: np.ndarray = counts * K * N * experts / shard
    return weights


def _params_per_gpu(
    rec: Recommendation, run: RunConfig, convert: np.ndarray
) -> tuple[float, float]:
    """This GPU's parameter shard (every linear weight and the embedding, as large as
    lm_head; TP then FSDP split them), and the float8-converted part of it."""
    rows = rec.rows
    params = _weights(rows, run.tp)
    head = rows.take(rows["fqn"] == "lm_head")
    embedding = float((head["full_K"] * head["full_N"]).sum()) / run.tp
    ranks = run.fsdp_ranks * run.cp  # FSDP shards over the CP ranks too
    return (float(params.sum()) + embedding) / ranks, float(params[convert].sum()) / ranks


def _outside(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    convert: np.ndarray,
    notes: list[Note],
) -> OutsideBlocks:
    """What the step runs outside its blocks (training/step.py `outside_blocks`), at the
    calibration's pointwise streaming rate."""
    rows = rec.rows
    head = rows.take(rows["fqn"] == "lm_head")
    dim = _hidden(rows)
    vocab = int(head["full_N"][0]) if len(head) else 0
    params, fp8_params = _params_per_gpu(rec, run, convert)
    per_byte, launch = _streaming(resolved)
    world = run.tp * run.fsdp_ranks * run.cp * run.dp_replicate * run.pp
    fabric = _fabric(rec, []) if world > 1 else None
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
    if gathered and (tp_fabric := _fabric(rec, notes)) is not None:
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
    # under a pipeline the step holds the rank's share of them (`training.step.pipelined`)
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


def _hidden(rows: Columns) -> int:
    """The model's hidden size: lm_head's input width (the widest K without one)."""
    head = rows.take(rows["fqn"] == "lm_head")
    return int(head["full_K"][0]) if len(head) else int(rows["full_K"].max())


def _group(
    fabric: Interconnect, run: RunConfig, *, size: int, stride: int
) -> tuple[dict[str, Any], int]:
    """A collective group of `size` ranks `stride` apart in torchtitan's mesh: the keywords
    `collective_time_s` takes for it (where it lands, the fabric it crosses nodes on) and the
    NICs per node it uses."""
    place = placement_for(group_size=size, stride=stride, gpus_per_node=run.gpus_per_node)
    crossed, nics = group_fabric(
        fabric,
        group_size=size,
        stride=stride,
        gpus_per_node=run.gpus_per_node,
        nic_gbps=run.network_gbps,
    )
    return {"group_size": size, "placement": place, "fabric": crossed}, nics


def _cp_comm(rec: Recommendation, run: RunConfig, notes: list[Note], attention: float) -> float:
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
    heads = rows.take(keys) if keys.any() else rows.take(rows["tp"] == "row")
    width = float(heads["N"][0] if keys.any() else heads["K"][0])  # this GPU's heads
    # keys and values of every chunk of the sequences, gathered
    nbytes = rec.tokens * run.cp * width * 2 * BF16_BYTES
    fabric = _fabric(rec, notes)
    if fabric is None or not len(heads):
        return 0.0
    kw, _ = _group(fabric, run, size=run.cp, stride=run.tp)
    gather = float(collective_time_s("all_gather", nbytes=nbytes, **kw))
    scatter = float(collective_time_s("reduce_scatter", nbytes=nbytes, **kw))
    again = {
        Recompute.NONE: 0.0,
        Recompute.SELECTIVE: 1.0,
        Recompute.FULL: run.recompute_share(_layers(rec)),
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


def _send_s(rec: Recommendation, run: RunConfig, pipeline: Pipeline, notes: list[Note]) -> float:
    """One send between pipeline stages: a microbatch's activations at a stage boundary (the
    residual stream, sequence-sharded over TP), between ranks TP x FSDP x replicas apart
    (torchtitan's mesh puts PP outermost)."""
    nbytes = rec.tokens * _hidden(rec.rows) * BF16_BYTES / run.tp
    fabric = _fabric(rec, notes)
    stride = run.tp * run.cp * run.fsdp_ranks * run.dp_replicate
    place = placement_for(
        group_size=pipeline.degree, stride=stride, gpus_per_node=run.gpus_per_node
    )
    seconds = 0.0
    if fabric is not None:
        kw, _ = _group(fabric, run, size=pipeline.degree, stride=stride)
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


def _streaming(resolved: Resolved) -> tuple[float, float]:
    """A memory-bound pass's seconds per byte and per launch: the calibration's pointwise
    streaming rate."""
    rate = resolved.calibration.kernel_time if resolved.calibration is not None else None
    if rate is not None:
        stream = rate.kind("pointwise", "pointwise")
        return 1 / stream.bandwidth_bytes_per_s, stream.floor_s
    # no calibration: the seed's overhead model, 92% of HBM and 2 us a pass
    return 1 / (resolved.config.gpu.memory_bandwidth_bytes_per_s * 0.92), 2e-6


def _shared_input_s(
    rows: Columns, resolved: Resolved, convert: np.ndarray, block: np.ndarray, fp8: np.ndarray
) -> np.ndarray:
    """Per row, seconds per linear: the float8 overhead a block linear does not pay because
    the linear before it in its group casts the same input. q, k and v read the attention
    norm's output, gate and up the MLP norm's: torchao casts each Float8Linear's input, and
    the compiled block merges the identical casts into one (Inductor's common-subexpression
    elimination; the sharded block's graphs hold one). A row's overhead (forward, backward
    and the recompute folded into it) is split by role as the seed's worst-case passes split
    its bytes (`traffic.worst_ideal`): the input's share comes off every linear of the group
    but the first converted one. `fp8`: each row's float8 time (the decision criterion's)."""
    saved = np.zeros(len(rows))
    configs = {c.recipe.name: c for c in resolved.configs}
    paid: set[tuple[str, int, str]] = set()
    column = (rows["tp"] == "column") & ~rows["grouped"].astype(bool)
    for i in np.flatnonzero(block & convert & column):
        row = rows.row(i)
        context = Context.from_name(str(row["context"]))
        if context.before is Before.NONE:
            continue
        group = (str(row["fqn"]).rsplit(".", 1)[0], int(row["K"]), str(row["recipe"]))
        if group not in paid:
            paid.add(group)
            continue
        config = configs.get(str(row["recipe"]), resolved.config)
        key = ModelKey(
            config.recipe, Level.WORST, config.implementation, context_fused_roles(context)
        )
        model = model_bytes(key)
        assert model is not None, "a linear's worst model is a polynomial"
        at = (int(row["M"]), int(row["K"]), int(row["N"]))
        total = float(model.total.exact(at))
        mine = float(model.sum(lambda k: k.role is Role.INPUT).exact(at))
        overhead = max(float(fp8[i] - row["fp8_gemm_s"]), 0.0)
        saved[i] = overhead * mine / total if total > 0 else 0.0
    return saved


def _band_moves(
    rows: Columns, convert: np.ndarray, counts: np.ndarray, criterion: str
) -> tuple[float, float]:
    """How much the converted linears' float8 time per step moves at their bands' fast and
    slow ends (`decision.float8_time_ends`): the step's band. Zero where the rows carry none."""
    ends = float8_time_ends(rows, criterion)
    if ends is None:
        return 0.0, 0.0
    expected = rows["fp8_s"].astype(np.float64)
    weight = np.where(convert, counts, 0.0)
    fast, slow = (float(np.nansum(weight * (end - expected))) for end in ends)
    return min(fast, 0.0), max(slow, 0.0)


def _attention(
    rec: Recommendation, resolved: Resolved, run: RunConfig, notes: list[Note]
) -> tuple[float, float]:
    """One block's attention (forward + backward) on one GPU, and what full checkpointing
    reruns of it, from the output projection's heads (`timing/attention.py`); (0, 0) for an
    architecture without one. The same in both precisions: it only lengthens the step."""
    found = [
        linear
        for linear in rec.architecture.linears
        if linear.heads and linear.tp is TPStyle.ROW and not linear.grouped
    ]
    if not found:
        notes.append(note(Topic.NO_ATTENTION))
        return 0.0, 0.0
    out = found[0]
    heads = out.heads // max(rec.setup.tp, 1)
    seq_len = run.seq_len or assumed_seq_len(rec.tokens)
    gemm = resolved.config.gemm_model
    size = 8192.0
    seconds, _ = gemm.time_s("bf16", GemmRole.OUTPUT, size, size, size)
    throughput = 2 * size**3 / float(seconds)
    block_s = attention_s(
        tokens=rec.tokens,
        seq_len=seq_len,
        heads=heads,
        head_dim=out.K // out.heads,
        gemm_flops_per_s=throughput,
    )
    # full checkpointing reruns the forward of the blocks it wraps (layer SAC: every n-th)
    again = 0.0
    if rec.setup.recompute is Recompute.FULL:
        again = FORWARD_SHARE * block_s * rec.setup.recompute_share(_layers(rec))
    notes.append(
        note(
            Topic.ATTENTION,
            ms=block_s * 1e3,
            seq_len=seq_len,
            heads=heads,
            head_dim=out.K // out.heads,
            recomputed=bool(again),
            source=ATTENTION_SOURCE,
        )
    )
    return block_s, again


def _column(rows: Columns, name: str) -> np.ndarray:
    if name in rows:
        values = rows[name].astype(np.float64)
        return np.where(np.isnan(values), 0.0, values)
    return np.zeros(len(rows))


def _selective(
    rows: Columns, resolved: Resolved, convert: np.ndarray, block: np.ndarray, run: RunConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Per-op SAC: the block linears, in the catalog's forward order (q, k, v, o, gate, up,
    down: torchtitan's wq, wk, wv, wo, w1, w3, w2), through the every-second-mm rule."""
    again = _sac_recomputed(rows, block, run)
    configs = {c.recipe.name: c for c in resolved.configs}
    bf16_fwd, fp8_fwd = _forward_gemms(rows, resolved, convert, block)
    re_bf16 = np.where(again, bf16_fwd, 0.0)
    re_fp8 = re_bf16.copy()
    for i in np.flatnonzero(block & convert):
        row = rows.row(i)
        config = configs.get(str(row["recipe"]), resolved.config)
        M, K, N = (np.float64(row[c]) for c in ("M", "K", "N"))
        share = float(np.asarray(forward_share_fn(config.model_key(Level.WORST))(M, K, N)))
        overhead = float(row["fp8_s"] - row["fp8_gemm_s"]) if "fp8_s" in rows else 0.0
        re_fp8[i] = (fp8_fwd[i] if again[i] else 0.0) + share * max(overhead, 0.0)
    return re_bf16, re_fp8


def _block_output(rows: Columns, block: np.ndarray) -> np.ndarray:
    """The block's output projection (w2, down_proj): the last dense block linear in the
    catalog's forward order. Nothing a backward needs reads its output, so full AC does not
    run it (or the reduce-scatter after it) again."""
    dense = np.flatnonzero(block & ~rows["grouped"].astype(bool))
    if not len(dense):
        return np.zeros(len(rows), dtype=bool)
    kinds = np.array([layer_type(str(f)) for f in rows["fqn"]])
    output: np.ndarray = block & (kinds == kinds[dense[-1]])
    return output


def _sac_recomputed(rows: Columns, block: np.ndarray, run: RunConfig) -> np.ndarray:
    """Which block rows per-op SAC runs again in the backward: the block linears in the
    catalog's forward order through the policy's every-second-mm rule. Under TP a
    row-parallel gemm feeds only its reduce-scatter, whose output the policy saves: nothing
    needs it again (the compiled backward holds no wo, scripts/async_tp_graphs.py)."""
    order = np.flatnonzero(block)
    decisions = sac_policy(run.sac_policy).decide_sequence([MM] * len(order))
    again = np.zeros(len(rows), dtype=bool)
    for i, d in zip(order, decisions):
        again[i] = d is Decision.RECOMPUTE
    if run.tp > 1:
        again &= rows["tp"] != "row"
    return again


def _forward_gemms(
    rows: Columns, resolved: Resolved, convert: np.ndarray, block: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each block row's forward (output) gemm, seconds, bf16 and as the step runs it (its
    recipe's float8 gemm where converted, else bf16 again); 0 outside the blocks."""
    configs = {c.recipe.name: c for c in resolved.configs}
    bf16 = np.zeros(len(rows))
    fp8 = np.zeros(len(rows))
    for i in np.flatnonzero(block):
        row = rows.row(i)
        config = configs.get(str(row["recipe"]), resolved.config)
        M, K, N = (np.float64(row[c]) for c in ("M", "K", "N"))
        bf16[i] = float(config.gemm_model.time_s("bf16", GemmRole.OUTPUT, M, K, N)[0])
        fp8[i] = bf16[i]
        if convert[i]:
            dtype = fp8_gemm_dtype(config.recipe, GemmRole.OUTPUT, config.implementation)
            fp8[i] = float(config.gemm_model.time_s(dtype, GemmRole.OUTPUT, M, K, N)[0])
    return bf16, fp8


def on_fabric(run: RunConfig, gpu: str) -> RunConfig:
    """The run with its GPU fabric's NVLink domain as its node (72 GPUs on an NVL72 rack):
    what collectives stay on NVLink."""
    try:
        domain = find_interconnect(gpu).gpus_per_node
    except CommError:
        return run
    return replace(run, gpus_per_node=domain)


def _fabric(rec: Recommendation, notes: list[Note]) -> Interconnect | None:
    try:
        return find_interconnect(rec.gpu)
    except CommError:
        notes.append(note(Topic.NO_FABRIC, gpu=rec.gpu))
        return None


def _tp_collectives(
    rec: Recommendation,
    rows: Columns,
    convert: np.ndarray,
    block: np.ndarray,
    run: RunConfig,
    notes: list[Note],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Placement] | None:
    """One sequence-parallel all-gather and one reduce-scatter of tokens x hidden bf16 (the
    float8 side's all-gathers, the forward's input and the backward's gradient, in float8
    where every converted block linear is tensorwise: torchao's float8 TP plan), seconds
    each, and the placement; None without TP or a fabric."""
    tp = rec.setup.tp
    fabric = _fabric(rec, notes) if tp > 1 else None
    if fabric is None:
        return None
    dense_block = block & ~rows["grouped"].astype(bool)
    place = placement_for(group_size=tp, stride=1, gpus_per_node=run.gpus_per_node)
    row_par = dense_block & (rows["tp"] == "row")
    hidden = rows["full_N"][row_par].astype(np.float64)
    nbytes = rec.tokens * hidden * BF16_BYTES
    kw: dict[str, Any] = {"group_size": tp, "placement": place, "fabric": fabric}
    ag = collective_time_s(CollectiveKind.ALL_GATHER, nbytes=nbytes, **kw)
    rs = collective_time_s(CollectiveKind.REDUCE_SCATTER, nbytes=nbytes, **kw)
    tensorwise = all(str(r) == "tensorwise" for r in rows["recipe"][convert & dense_block])
    fp8_ag = ag
    if tensorwise and (convert & dense_block).any():
        fp8_ag = float8_all_gather_time_s(numel=rec.tokens * hidden, **kw)
        notes.append(note(Topic.TP_FLOAT8_GATHER))
    return ag, rs, fp8_ag, place


def _tp_comm(
    rec: Recommendation,
    rows: Columns,
    convert: np.ndarray,
    block: np.ndarray,
    layers: int,
    run: RunConfig,
    notes: list[Note],
) -> tuple[float, float]:
    """Exposed sequence-parallel communication of one block from the per-layer rows, per
    precision, without async TP (see the module docstring): per sub-block the forward's
    all-gather and reduce-scatter, mirrored in the backward, and what recompute gathers
    again."""
    found = _tp_collectives(rec, rows, convert, block, run, notes)
    if found is None:
        return 0.0, 0.0
    ag, rs, fp8_ag, place = found
    setup = rec.setup
    row_par = block & ~rows["grouped"].astype(bool) & (rows["tp"] == "row")
    per_block = rows["count"].astype(np.float64)[row_par] / layers
    # forward AG + RS, backward RS + AG; SAC or full AC gathers the forward's input again (full
    # AC of every n-th block only: that share of the blocks), full AC reduce-scatters again
    # all but the block's output
    full_again = setup.recompute_share(layers)
    again = 1.0 if setup.recompute is Recompute.SELECTIVE else full_again
    rs_again = full_again * ~_block_output(rows, block)[row_par]
    bf16_t = per_block * (2 * ag + 2 * rs + again * ag + rs_again * rs)
    # tensorwise's float8 TP plan gathers the gradient in float8 too (Float8RowwiseParallel
    # casts it before the reduce-scatter's backward)
    fp8_t = per_block * (2 * fp8_ag + 2 * rs + again * fp8_ag + rs_again * rs)
    notes.append(_tp_note(run, place, from_graphs=False))
    return float(np.sum(bf16_t)), float(np.sum(fp8_t))


def _async_tp(
    rec: Recommendation,
    rows: Columns,
    convert: np.ndarray,
    block: np.ndarray,
    run: RunConfig,
    notes: list[Note],
    forward_gemms: tuple[np.ndarray, np.ndarray],
    streaming: tuple[float, float],
) -> tuple[float, float] | None:
    """Exposed TP communication of one block under async TP, per precision (None without TP):
    torch's micro-pipelined TP runs a collective beside the gemms it feeds or drains
    (`micro_pipelined_exposed_s`), where Inductor's pass finds them
    (torch/_inductor/fx_passes/micro_pipeline_tp.py). Per sub-block (attention, MLP):
    - the forward's all-gather pairs with the column-parallel gemms that consume the gathered
      tensor themselves (`_find_consumer_matmuls`): bf16 ones, and float8 ones under
      torchao's tensorwise TP plan, which casts before the gather. Other recipes cast after
      it, so their gather runs unfused (pytorch/pytorch#149990, rowwise). The backward's
      gather of the same input again pairs with the column gemms it reruns: all under full
      AC, under per-op SAC only those the every-second-mm rule recomputes (wk, w3 of a llama
      block; tests/test_async_tp_graph.py reads these pairs off the compiled graph);
    - the forward's reduce-scatter (and full AC's) pairs with the row-parallel gemm producing
      it (`_find_producer_matmul`, float8 rowwise included since pytorch/pytorch#149247);
    - the backward's gradient gather pairs with the row-parallel input-gradient gemm (the
      forward's FLOPs) on the same terms as the forward's gather: in float8 under the
      tensorwise plan, whose Float8RowwiseParallel casts the gradient before it;
    - the backward's input-gradient reduce-scatter pairs with the one column-parallel gemm
      producing it; where several share the input (q/k/v, w1/w3) their gradients are summed
      first and no gemm produces it alone: unfused, as in vanilla TP.
    A fused reduce-scatter sends each rank's partial output to its owner and then sums the
    TP partials it received on the compute stream (`torch.sum` over the stacked partials in
    torch/distributed/_symmetric_memory's `_fused_matmul_reduce_scatter_impl`): a pass that
    reads the whole output and writes its shard, exposed after the last gemm, in either
    precision (the output is bf16). `forward_gemms`: each row's forward gemm seconds per
    precision; `streaming`: a memory-bound pass's seconds per byte and per launch."""
    found = _tp_collectives(rec, rows, convert, block, run, notes)
    if found is None:
        return None
    ag, rs, fp8_ag, place = found
    setup, tp = rec.setup, rec.setup.tp
    layers = _layers(rec)
    dense = block & ~rows["grouped"].astype(bool)
    style = rows["tp"]
    module = np.array([str(f).rsplit(".", 1)[0] for f in rows["fqn"]])
    share = rows["count"].astype(np.float64) / layers
    full_again = setup.recompute_share(layers)
    again = 1.0 if setup.recompute is Recompute.SELECTIVE else full_again
    consumes_gather = (
        np.ones(len(convert), dtype=bool),
        ~convert | (rows["recipe"].astype(str) == "tensorwise"),
    )
    # the backward gathers the forward's input again for the gemms it reruns: every column
    # gemm under full AC, under per-op SAC only those the every-second-mm rule recomputes
    rerun = (
        _sac_recomputed(rows, dense, run)
        if setup.recompute is Recompute.SELECTIVE
        else np.ones(len(convert), dtype=bool)
    )
    if (convert & dense & (rows["recipe"].astype(str) == "tensorwise")).any():
        notes.append(note(Topic.ASYNC_TP_GATHERS, why="tensorwise"))
    if rec.tokens <= (run.local_seq_len or assumed_seq_len(rec.tokens)):
        notes.append(note(Topic.ASYNC_TP_GATHERS, why="one_sequence"))
    per_byte, launch = streaming
    output = _block_output(rows, dense)
    out = []
    for gemm, gather, direct in zip(forward_gemms, (ag, fp8_ag), consumes_gather):
        exposed = 0.0
        # the collectives' arrays run over the row-parallel rows in this order
        for j, i in enumerate(np.flatnonzero(dense & (style == "row"))):
            column = dense & (style == "column") & (module == module[i])
            rs_again = 0.0 if output[i] else full_again  # full AC: not the block's output
            summed = rec.tokens * float(rows["full_N"][i]) * BF16_BYTES
            fused_scatters = 1.0 + rs_again + (1.0 if column.sum() == 1 else 0.0)
            exposed += fused_scatters * (launch + summed * (1 + 1 / tp) * per_byte)
            g_row = float(share[i] * gemm[i])
            pairs = (
                (gather[j], float(np.sum((share * gemm)[column & direct])), 1.0),
                (gather[j], float(np.sum((share * gemm)[column & direct & rerun])), again),
                (rs[j], g_row, 1.0 + rs_again),
                (gather[j], g_row if direct[i] else 0.0, 1.0),
                (rs[j], float(share[column] @ gemm[column]) if column.sum() == 1 else 0.0, 1.0),
            )
            exposed += sum(
                n * float(micro_pipelined_exposed_s(c, g, group_size=tp)) for c, g, n in pairs
            )
        out.append(exposed)
    notes.append(_tp_note(run, place, from_graphs=False))
    return out[0], out[1]


def _tp_note(run: RunConfig, place: Placement, *, from_graphs: bool) -> Note:
    return note(
        Topic.TP_COMM,
        tp=run.tp,
        placement=place.value,
        async_tp=run.async_tp,
        from_graphs=from_graphs,
        source=COMM_SOURCE,
    )


def _fsdp_comm(
    rec: Recommendation,
    rows: Columns,
    convert: np.ndarray,
    block: np.ndarray,
    layers: int,
    run: RunConfig,
    notes: list[Note],
    compute: Sequence[tuple[float, float]],
    streaming: tuple[float, float],
) -> tuple[float, float]:
    """FSDP's exposed time per block, per precision: weights all-gathered (bf16, or float8
    with float8 all-gather), gradients reduce-scattered in the reduce dtype (torchtitan's
    mixed_precision_reduce) and, under HSDP, all-reduced across replicas, hidden behind
    `compute` ((forward, backward with its recompute) seconds per precision) on FSDP2's
    schedule (`timing.comm.fsdp_exposed_time_s`); and the copy of each gathered group into
    the unsharded parameters, a memory pass on the compute stream (`streaming`: seconds per
    byte and per launch)."""
    setup = rec.setup
    tp = setup.tp
    if setup.fsdp and not run.fsdp_degree:
        notes.append(note(Topic.FSDP_UNKNOWN))
        return 0.0, 0.0
    # torchtitan shards over the data-parallel and the context-parallel ranks at once
    fsdp = (run.fsdp_degree or 1) * run.cp
    if fsdp < 2:
        return 0.0, 0.0
    fabric = _fabric(rec, notes)
    if fabric is None:
        return 0.0, 0.0
    counts = rows["count"].astype(np.float64)
    kw, nics = _group(fabric, run, size=fsdp, stride=tp)
    place = kw["placement"]
    params = _weights(rows, tp)
    block_params = float(params[block].sum()) / layers
    # torchao gathers float8 weights for tensorwise only; rowwise weights travel in bf16
    gathered = block & convert & (rows["recipe"].astype(str) == "tensorwise")
    fp8_params = float(params[gathered].sum()) / layers
    ag_bf16 = float(collective_time_s("all_gather", nbytes=block_params * BF16_BYTES, **kw))
    if run.float8_all_gather and fp8_params:
        ag_fp8 = float(
            collective_time_s(
                "all_gather",
                nbytes=(block_params - fp8_params) * BF16_BYTES,
                **kw,
            )
            + float8_all_gather_time_s(
                numel=fp8_params,
                tensors=int(np.sum(gathered * counts) / layers),
                scales_precomputed=run.precompute_scales,
                **kw,
            )
        )
    else:
        ag_fp8 = ag_bf16
    grad_bytes = FP32_BYTES if run.reduce_dtype == "float32" else BF16_BYTES
    rs = float(collective_time_s("reduce_scatter", nbytes=block_params * grad_bytes, **kw))
    ar = 0.0
    if run.dp_replicate > 1:  # HSDP: each shard's gradient all-reduced across the replicas
        replicas, _ = _group(fabric, run, size=run.dp_replicate, stride=tp * fsdp)
        ar = float(
            collective_time_s("all_reduce", nbytes=block_params / fsdp * grad_bytes, **replicas)
        )
    reshard = run.reshards_after_forward
    # a pipeline rank holds its stages' share of the blocks, gathered once per step: the
    # schedule runs over those, beside one microbatch's compute, and counts once per rank
    rank_layers = max(layers // run.pp, 1)
    exposed = []
    for all_gather, (forward_s, backward_s) in zip((ag_bf16, ag_fp8), compute):
        total = fsdp_exposed_time_s(
            all_gather_s=all_gather,
            reduce_scatter_s=rs,
            forward_compute_s=forward_s,
            backward_compute_s=backward_s,
            layers=rank_layers,
            reshard_after_forward=reshard,
            all_reduce_s=ar,
        )
        exposed.append(total / rank_layers)
    # FSDP2 copies each all-gather's output into the unsharded parameters on the compute
    # stream (FSDPParamGroup.wait_for_unshard: foreach_all_gather_copy_out), once per unshard:
    # the forward's and, resharded after it, the backward's; float8 weights gather as float8
    per_byte, launch = streaming
    unshards = 2.0 if reshard else 1.0
    gathered = [block_params * BF16_BYTES, block_params * BF16_BYTES]
    if run.float8_all_gather and fp8_params:
        gathered[1] = (block_params - fp8_params) * BF16_BYTES + fp8_params
    exposed = [e + unshards * (launch + 2 * g * per_byte) for e, g in zip(exposed, gathered)]
    notes.append(
        note(
            Topic.FSDP_COMM,
            degree=fsdp,
            float8=run.float8_all_gather,
            placement=place.value,
            source=COMM_SOURCE,
        )
    )
    notes.append(
        note(
            Topic.FSDP_SCHEDULE,
            reduce_dtype=run.reduce_dtype,
            reshard=run.reshard_after_forward,
            replicate=run.dp_replicate,
            nics_per_node=nics,
            nic_gbps=kw["fabric"].inter_line_bytes_per_s * 8 / 1e9,
        )
    )
    return exposed[0], exposed[1]


@dataclass(frozen=True)
class _TimedBlock:
    """A sharded block and its graphs' times (bf16, float8)."""

    graphs: BlockComparison
    times: tuple[CaptureTimes, CaptureTimes]
    bf16_only: bool = False  # float8 is the bf16 capture again: no float8 graphs


def _graph_blocks(
    rec: Recommendation,
    run: RunConfig,
    timed: _TimedBlock,
    kept_s: float,
    notes: list[Note],
    convert: np.ndarray,
    attention: tuple[float, float],
    pipelined: tuple[float, float] | None,
    streaming: tuple[float, float],
) -> tuple[BlockTimes, BlockTimes]:
    """One block per precision from its graphs (compiled, or the shipped fits at these
    tokens): gemms, kernels, recompute and TP collectives as the graphs hold them, FSDP from
    the rows' weights hidden behind the graphs' own forward and backward. Full AC (the graphs
    are the block without checkpointing, `sharded.graph_recompute`) reruns the forward graph,
    its TP collectives and attention's forward in the backward of that share of the blocks,
    but for the block's output projection and its reduce-scatter: nothing the backward needs
    depends on the block's output (Inductor's partitioner recomputes only what the backward
    reads; eager non-reentrant checkpointing stops once it has it).
    `kept_s`: what the block linears the recommendation keeps in bf16 change against the
    all-float8 graph; `attention`: (per block, its full-AC rerun) seconds; `pipelined`: async
    TP's exposed communication per precision (`_async_tp`), which replaces the graphs' own;
    `streaming`: a memory-bound pass's seconds per byte and per launch."""
    graphs, times = timed.graphs, timed.times
    rows, layers = rec.rows, _layers(rec)
    block = np.array([is_block_fqn(f) for f in rows["fqn"]])
    share = run.recompute_share(layers)
    attention_s, attention_again = attention
    comm = [0.0, 0.0]
    comm_again = [0.0, 0.0]
    if rec.setup.tp > 1 and (fabric := _fabric(rec, notes)) is not None:
        tp = rec.setup.tp
        place = placement_for(group_size=tp, stride=1, gpus_per_node=run.gpus_per_node)
        for i, capture in enumerate((graphs.bf16, graphs.float8)):
            output = 0.0  # the forward's last reduce-scatter: the block's output, not rerun
            for c in capture.collectives:
                if not (c.compiled and c.mesh == "tp"):
                    continue
                seconds = float(
                    collective_time_s(
                        c.kind.value,
                        nbytes=c.bytes,
                        group_size=c.group_size,
                        placement=place,
                        fabric=fabric,
                    )
                )
                comm[i] += seconds
                if c.graph == "fwd":
                    comm_again[i] += share * seconds
                    if c.kind is GraphCollective.REDUCE_SCATTER:
                        output = seconds
            comm_again[i] -= share * output
        comm = [a + b for a, b in zip(comm, comm_again)]
        if pipelined is None:
            notes.append(_tp_note(run, place, from_graphs=True))
        else:
            comm = list(pipelined)
    again = tuple(share * (t.fwd_s - t.output_gemm_s) + attention_again for t in times)
    if share:
        notes.append(note(Topic.FULL_AC_GRAPHS, share=share))
    compute = tuple(
        (t.fwd_s + attention_s * FORWARD_SHARE, t.bwd_s + attention_s * (1 - FORWARD_SHARE) + a)
        for t, a in zip(times, again)
    )
    fsdp = _fsdp_comm(rec, rows, convert, block, layers, run, notes, compute, streaming)
    t16, t8 = times
    bf16 = BlockTimes(
        linear_gemm_s=t16.gemm_s,
        other_compute_s=t16.kernel_s + attention_s,
        tp_comm_s=comm[0],
        fsdp_comm_s=fsdp[0],
        recompute_s=t16.recompute_s + again[0],
    )
    if graphs.origin is not None:
        notes.append(note(Topic.BLOCKS_FROM, **graphs.origin.values()))
    notes.append(note(Topic.GRAPH_PARTS))
    if not (block & convert).any():
        notes.append(note(Topic.NO_FLOAT8_BLOCK))
        return bf16, bf16
    # float8's non-gemm time beyond bf16's is its overhead; a kept layer's difference
    # (usually negative: kept because float8 loses) comes off the overhead, then the gemms
    other = min(t16.kernel_s, t8.kernel_s)
    extra = t8.kernel_s - other + kept_s
    linears, casts = _converted_shares(rows, convert, block)
    fp8 = BlockTimes(
        linear_gemm_s=max(t8.gemm_s + min(extra, 0.0), 0.0),
        overhead_s=max(extra, 0.0),
        other_compute_s=other + attention_s,
        tp_comm_s=comm[1] if pipelined else comm[0] + linears * (comm[1] - comm[0]),
        fsdp_comm_s=fsdp[1],
        recompute_s=bf16.recompute_s + casts * (t8.recompute_s + again[1] - bf16.recompute_s),
    )
    if (block & ~convert).any():
        notes.append(note(Topic.KEPT_CORRECTED, linears=linears, casts=casts))
    return bf16, fp8


def _converted_shares(rows: Columns, convert: np.ndarray, block: np.ndarray) -> tuple[float, float]:
    """The all-float8 graph's part the converted block linears own: of its extra TP
    collectives by linears (each float8 linear adds its own latency-bound scale all-reduces,
    whatever its size), of its extra recompute by per-layer float8 overhead (what SAC reruns
    is the casts, which scale with the bytes cast). 1 when every block linear converts."""
    counts = rows["count"].astype(np.float64)
    overhead = counts * np.maximum(
        rows["fp8_s"].astype(np.float64) - rows["fp8_gemm_s"].astype(np.float64), 0.0
    )
    overhead = np.nan_to_num(overhead)
    linears = float(counts[block & convert].sum() / counts[block].sum())
    total = float(overhead[block].sum())
    casts = float(overhead[block & convert].sum()) / total if total > 0 else linears
    return linears, casts


def _layers(rec: Recommendation) -> int:
    """The model's blocks: the most repeats of a layer type, its rows filters split summed."""
    blocks: dict[str, int] = {}
    for fqn, count in zip(rec.rows["fqn"], rec.rows["count"]):
        if is_block_fqn(fqn):
            blocks[layer_type(fqn)] = blocks.get(layer_type(fqn), 0) + int(count)
    return max(blocks.values(), default=1)
