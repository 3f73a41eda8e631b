"""One block per precision from its sharded graphs (compiled, or the shipped fits), corrected
for the linears a conversion set keeps in bf16; the per-layer rows' corrections (a shared
input cast once, the band's movement)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.decision import float8_time_ends
from f8roof.engine.estimate import te_weight_cast_s
from f8roof.engine.recommend import Recommendation
from f8roof.engine.resolve import Resolved
from f8roof.engine.sharded import BlockComparison, CaptureTimes
from f8roof.engine.step.conversion import block_count
from f8roof.engine.step.fabric import fabric_of
from f8roof.engine.step.fsdp import fsdp_comm
from f8roof.engine.step.parts import (
    BlockTimes,
)
from f8roof.engine.step.tp import tp_note
from f8roof.notes import Note, Topic, note
from f8roof.timing.attention import FORWARD_SHARE
from f8roof.timing.comm import (
    collective_time_s,
    placement_for,
)
from f8roof.traffic.byte_table import ModelKey, model_bytes
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.recipes import Role
from f8roof.traffic.variant import Before, Context, Implementation, Level, context_fused_roles
from f8roof.training.block import CollectiveKind as GraphCollective
from f8roof.training.checkpointing import (
    is_block_fqn,
)
from f8roof.training.run_config import (
    RunConfig,
)


@dataclass(frozen=True)
class TimedBlock:
    """A sharded block and its graphs' times (bf16, float8)."""

    graphs: BlockComparison
    times: tuple[CaptureTimes, CaptureTimes]
    bf16_only: bool = False  # float8 is the bf16 capture again: no float8 graphs


def graph_blocks(
    rec: Recommendation,
    run: RunConfig,
    timed: TimedBlock,
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
    TP's exposed communication per precision (`async_tp`), which replaces the graphs' own;
    `streaming`: a memory-bound pass's seconds per byte and per launch."""
    graphs, times = timed.graphs, timed.times
    rows, layers = rec.rows, block_count(rec)
    block = np.array([is_block_fqn(f) for f in rows["fqn"]])
    share = run.recompute_share(layers)
    attention_s, attention_again = attention
    comm = [0.0, 0.0]
    comm_again = [0.0, 0.0]
    if rec.setup.tp > 1 and (fabric := fabric_of(rec, notes)) is not None:
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
            notes.append(tp_note(run, place, from_graphs=True))
        else:
            comm = list(pipelined)
    again = tuple(share * (t.fwd_s - t.output_gemm_s) + attention_again for t in times)
    if share:
        notes.append(note(Topic.FULL_AC_GRAPHS, share=share))
    t16, t8 = times
    compute16 = (
        t16.fwd_s + attention_s * FORWARD_SHARE,
        t16.bwd_s + attention_s * (1 - FORWARD_SHARE) + again[0],
    )
    bf16 = BlockTimes(
        linear_gemm_s=t16.gemm_s,
        other_compute_s=t16.kernel_s + attention_s,
        tp_comm_s=comm[0],
        recompute_s=t16.recompute_s + again[0],
    )
    said = [note(Topic.GRAPH_PARTS)]  # after FSDP's notes, as the step lists them
    if graphs.origin is not None:
        said.insert(0, note(Topic.BLOCKS_FROM, **graphs.origin.values()))
    fp8 = bf16
    compute8 = compute16
    if (block & convert).any():
        # float8's non-gemm time beyond bf16's is its overhead; a kept layer's difference
        # (usually negative: kept because float8 loses) comes off the overhead, then the gemms
        other = min(t16.kernel_s, t8.kernel_s)
        extra = t8.kernel_s - other + kept_s
        linears, casts = converted_shares(rows, convert, block)
        fp8 = BlockTimes(
            linear_gemm_s=max(t8.gemm_s + min(extra, 0.0), 0.0),
            overhead_s=max(extra, 0.0),
            other_compute_s=other + attention_s,
            tp_comm_s=comm[1] if pipelined else comm[0] + linears * (comm[1] - comm[0]),
            recompute_s=bf16.recompute_s + casts * (t8.recompute_s + again[1] - bf16.recompute_s),
        )
        all8 = (t8.fwd_s - t16.fwd_s, t8.bwd_s + again[1] - t16.bwd_s - again[0])
        compute8 = passes(compute16, all8, fp8.compute_s - bf16.compute_s)
        if (block & ~convert).any():
            said.append(note(Topic.KEPT_CORRECTED, linears=linears, casts=casts))
    else:
        said.append(note(Topic.NO_FLOAT8_BLOCK))
    # FSDP hides behind the compute this conversion set runs, not the all-float8 graph's
    fsdp = fsdp_comm(
        rec, rows, convert, block, layers, run, notes, (compute16, compute8), streaming
    )
    notes.extend(said)
    return replace(bf16, fsdp_comm_s=fsdp[0]), replace(fp8, fsdp_comm_s=fsdp[1])


def passes(
    bf16: tuple[float, float], all_float8: tuple[float, float], change: float
) -> tuple[float, float]:
    """The float8 block's (forward, backward) compute: bf16's, moved by `change` (what the
    conversion set changes in the block's compute), split between the passes as the
    all-float8 graph splits its own change (`all_float8`: its forward's and backward's);
    where those two pull apart, as bf16's passes split. Every block linear converted, it is
    the all-float8 graph's own."""
    forward, backward = all_float8
    total = forward + backward
    if forward * backward >= 0 and total != 0:
        share = forward / total
    else:
        share = bf16[0] / (bf16[0] + bf16[1])
    return bf16[0] + change * share, bf16[1] + change * (1 - share)


def converted_shares(rows: Columns, convert: np.ndarray, block: np.ndarray) -> tuple[float, float]:
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


def moved(graph16: BlockTimes, rows16: BlockTimes, rows8: BlockTimes) -> BlockTimes:
    """A graphs' block plus what changes from one per-layer block to another, part by part (a
    part shortened below nothing is nothing): the float8 block as the bf16 graphs moved by
    float8 in the rows, or the fused q/k/v layout's as the separate layout's graphs moved by
    fusing in the rows."""
    return BlockTimes(
        **{
            f: max(getattr(graph16, f) + getattr(rows8, f) - getattr(rows16, f), 0.0)
            for f in BlockTimes.__dataclass_fields__
        }
    )


def shared_input_s(
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
            config.recipe,
            Level.WORST,
            config.implementation,
            context_fused_roles(context, config.implementation),
        )
        model = model_bytes(key)
        assert model is not None, "a linear's worst model is a polynomial"
        at = (int(row["M"]), int(row["K"]), int(row["N"]))
        total = float(model.total.exact(at))
        mine = float(model.sum(lambda k: k.role is Role.INPUT).exact(at))
        overhead = max(float(fp8[i] - row["fp8_gemm_s"]), 0.0)
        saved[i] = overhead * mine / total if total > 0 else 0.0
    return saved


def weight_cast_once_s(rows: Columns, resolved: Resolved, convert: np.ndarray) -> np.ndarray:
    """Per row, seconds per linear of the float8 weight cast a step of several microbatches
    pays once: Transformer Engine's (`estimate.te_weight_cast_s`; it caches the cast weight
    with is_first_microbatch); zero for torchao's linears, which recast it every microbatch."""
    out = np.zeros(len(rows))
    te = convert & (rows["implementation"] == Implementation.TE.value)
    for config in resolved.configs:
        mine = np.flatnonzero(te & (rows["recipe"] == config.recipe.name))
        if not len(mine):
            continue
        assert config.calibration is not None, "TE's kernels are timed by a calibration"
        shapes = ShapeArrays(*(rows[d][mine] for d in ("M", "K", "N")))
        out[mine] = te_weight_cast_s(config.calibration, config.variant, shapes)
    return out


def band_moves(
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
