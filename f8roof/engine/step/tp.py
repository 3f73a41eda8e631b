"""Tensor parallelism's exposed time per block from the per-layer rows: sequence-parallel
all-gathers and reduce-scatters (float8 under torchao's tensorwise TP plan), vanilla or
micro-pipelined against the gemms they feed (async TP)."""

from __future__ import annotations

from typing import Any

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.recommend import Recommendation
from f8roof.engine.step.conversion import block_count
from f8roof.engine.step.fabric import BF16_BYTES, fabric_of
from f8roof.engine.step.recompute import block_output, sac_recomputed
from f8roof.notes import Note, Topic, note
from f8roof.timing.comm import SOURCE as COMM_SOURCE
from f8roof.timing.comm import (
    CollectiveKind,
    Placement,
    collective_time_s,
    float8_all_gather_time_s,
    micro_pipelined_exposed_s,
    placement_for,
)
from f8roof.training.run_config import (
    Recompute,
    RunConfig,
    assumed_seq_len,
)


def tp_collectives(
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
    fabric = fabric_of(rec, notes) if tp > 1 else None
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


def tp_comm(
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
    found = tp_collectives(rec, rows, convert, block, run, notes)
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
    rs_again = full_again * ~block_output(rows, block)[row_par]
    bf16_t = per_block * (2 * ag + 2 * rs + again * ag + rs_again * rs)
    # tensorwise's float8 TP plan gathers the gradient in float8 too (Float8RowwiseParallel
    # casts it before the reduce-scatter's backward)
    fp8_t = per_block * (2 * fp8_ag + 2 * rs + again * fp8_ag + rs_again * rs)
    notes.append(tp_note(run, place, from_graphs=False))
    return float(np.sum(bf16_t)), float(np.sum(fp8_t))


def async_tp(
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
    found = tp_collectives(rec, rows, convert, block, run, notes)
    if found is None:
        return None
    ag, rs, fp8_ag, place = found
    setup, tp = rec.setup, rec.setup.tp
    layers = block_count(rec)
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
        sac_recomputed(rows, dense, run)
        if setup.recompute is Recompute.SELECTIVE
        else np.ones(len(convert), dtype=bool)
    )
    if (convert & dense & (rows["recipe"].astype(str) == "tensorwise")).any():
        notes.append(note(Topic.ASYNC_TP_GATHERS, why="tensorwise"))
    if rec.tokens <= (run.local_seq_len or assumed_seq_len(rec.tokens)):
        notes.append(note(Topic.ASYNC_TP_GATHERS, why="one_sequence"))
    per_byte, launch = streaming
    output = block_output(rows, dense)
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
    notes.append(tp_note(run, place, from_graphs=False))
    return out[0], out[1]


def tp_note(run: RunConfig, place: Placement, *, from_graphs: bool) -> Note:
    return note(
        Topic.TP_COMM,
        tp=run.tp,
        placement=place.value,
        async_tp=run.async_tp,
        from_graphs=from_graphs,
        source=COMM_SOURCE,
    )
