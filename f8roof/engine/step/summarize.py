"""The step of a recommendation, composed: its blocks (from graphs or per-layer rows), their
communication and recompute, what runs outside them, as `parts.step_summary` sums it; and
`step_decides`, the conversion set the step bears out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.recommend import Recommendation, decide_as, gemm_floor_s, hold
from f8roof.engine.resolve import Resolved
from f8roof.engine.sharded import BlockComparison, CaptureTimes, NoBlock, capture_times, no_block
from f8roof.engine.step.blocks import (
    TimedBlock,
    band_moves,
    graph_blocks,
    moved,
    shared_input_s,
    weight_cast_once_s,
)
from f8roof.engine.step.conversion import (
    as_run_filters,
    block_count,
    converts_as_run,
    kept_by_filters,
    kept_by_setup,
    row_values,
)
from f8roof.engine.step.ep import ep_comm
from f8roof.engine.step.fabric import on_fabric, streaming_rate
from f8roof.engine.step.fsdp import fsdp_comm
from f8roof.engine.step.outside import cp_comm, outside_parts, send_s
from f8roof.engine.step.parts import (
    Basis,
    BlockTimes,
    StepSummary,
    step_summary,
)
from f8roof.engine.step.recompute import block_attention, forward_gemms, selective
from f8roof.engine.step.tp import async_tp, tp_comm
from f8roof.errors import F8RoofError, ModelError
from f8roof.notes import Note, Topic, note
from f8roof.timing.attention import FORWARD_SHARE
from f8roof.training.block import BlockCapture
from f8roof.training.catalog import fused_fqn
from f8roof.training.checkpointing import (
    is_block_fqn,
    sac_policy,
)
from f8roof.training.run_config import (
    Recompute,
    RunConfig,
)

# a step and what it was timed from (the sharded block, or nothing)
StepAt = TypeVar("StepAt", bound=tuple[Any, ...])


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
    as_run_filters: tuple[str, ...] = ()  # the filter_fqns the run as torchtitan converts has


def timed_block(
    resolved: Resolved,
    *,
    block: BlockComparison | None = None,
    bf16_block: BlockCapture | None = None,
) -> TimedBlock | None:
    """The sharded block's graphs timed by the calibration, once for every conversion set
    stepped from them: bf16 and float8, or (`bf16_block`, no float8 graphs) bf16 twice."""
    if block is not None:
        return TimedBlock(block, (_timed(block.bf16, resolved), _timed(block.float8, resolved)))
    if bf16_block is not None:
        both = BlockComparison(bf16_block, bf16_block)
        return TimedBlock(both, (_timed(bf16_block, resolved),) * 2, bf16_only=True)
    return None


def summarize_step(
    rec: Recommendation,
    resolved: Resolved,
    *,
    timed: TimedBlock | None = None,
    no_block: Note | None = None,
    apart: Recommendation | None = None,
) -> StepAnswer:
    """The step with f8roof's decisions and as torchtitan runs it: every linear in float8 but
    the setup's filter_fqns (torchtitan's llama configs' ["output"] without a setup), which is
    what published runs measure. With `timed` (one rank's sharded block, compiled or from the
    shipped fits, timed: `timed_block`) the blocks are timed from that block's graphs, and
    the per-layer fits' answer is kept beside; `no_block` says why there is none. `apart`: a
    fused-q/k/v run's recommendation in the separate layout, which the graphs' linears are."""
    run = on_fabric(rec.setup, rec.gpu)
    notes = _step_notes(run, timed, no_block)
    graphs = timed is not None and not timed.bf16_only
    try:
        return StepAnswer(
            chosen=_summarize(rec, resolved, run, timed, list(notes), as_run=False, apart=apart),
            as_run=_summarize(rec, resolved, run, timed, list(notes), as_run=True, apart=apart),
            fits_only=(_summarize(rec, resolved, run, None, [], as_run=True) if graphs else None),
            converted_types=int(rec.rows["convert"].astype(bool).sum()),
            layer_types=len(rec.rows),
            kept_by_setup=tuple(bool(k) for k in kept_by_setup(rec)),
            as_run_filters=as_run_filters(run, rec.architecture.family),
        )
    except ModelError as e:
        raise F8RoofError(e.marked) from None


def choice_s(
    rec: Recommendation,
    resolved: Resolved,
    *,
    timed: TimedBlock | None,
    no_block: Note | None,
    apart: Recommendation | None = None,
) -> float:
    """The float8 step with f8roof's choice alone, seconds: what a search over conversion
    sets compares (`summarize_step` holds it as `chosen.fp8_s`)."""
    run = on_fabric(rec.setup, rec.gpu)
    try:
        notes = _step_notes(run, timed, no_block)
        return _summarize(rec, resolved, run, timed, notes, as_run=False, apart=apart).fp8_s
    except ModelError as e:
        raise F8RoofError(e.marked) from None


def _step_notes(run: RunConfig, timed: TimedBlock | None, no_block: Note | None) -> list[Note]:
    if no_block is not None and timed is not None and timed.bf16_only:
        # the float8 side only is per layer
        no_block = replace(no_block, values={**no_block.values, "on_bf16_graphs": True})
    return [*([no_block] if no_block is not None else []), *run.assumptions]


def step_decides(
    rec: Recommendation,
    resolved: Resolved,
    step_of: Callable[[Recommendation], StepAt],
    probe: Callable[[Recommendation], float],
) -> tuple[Recommendation, StepAt]:
    """The recommendation the step bears out, and its step (`step_of`: a recommendation's
    step and what it was timed from): a layer type that wins alone stays in bf16 where the
    step with f8roof's choice is shorter without it. What float8 adds beside a layer's gemms
    and casts (recompute, TP and FSDP collectives) is the step's to see, not the layer's.
    Rows alike (`alike`) are tried together, once each against the choice: one decision for
    one kind of linear, whichever name it has. `probe`: a recommendation's float8 step with
    f8roof's choice, seconds (what a trial compares)."""
    first = step_of(rec)
    step = first[0]
    chosen = rec.rows["convert"].astype(bool) & ~np.array(step.kept_by_setup, dtype=bool)
    groups: dict[tuple[object, ...], list[str]] = {}
    for i in np.flatnonzero(chosen):
        groups.setdefault(alike(rec.rows, int(i)), []).append(str(rec.rows["fqn"][i]))
    losing = [
        fqn
        for fqns in groups.values()
        if probe(hold(rec, resolved, fqns)) < step.chosen.fp8_s
        for fqn in fqns
    ]
    if not losing:
        return rec, first
    rec = hold(rec, resolved, losing)
    return rec, step_of(rec)


def step_improves(
    rec: Recommendation,
    resolved: Resolved,
    step_of: Callable[[Recommendation], StepAt],
    probe: Callable[[Recommendation], float],
    first: StepAt,
    *,
    may_convert: bool = True,
) -> tuple[Recommendation, StepAt]:
    """From a conversion set and its step (`first`), each group of alike rows float8 can run
    and the setup does not filter turned the other way (converted, or kept in bf16), kept
    where the step with f8roof's choice is shorter: one pass, in the rows' order. Without
    `may_convert` (a conservative policy converts only what wins at its band's low end) a
    kept group stays kept."""
    start = rec
    best_s = first[0].chosen.fp8_s
    rows = rec.rows
    open_ = rows["fp8_ok"].astype(bool) & ~np.array(first[0].kept_by_setup, dtype=bool)
    settled = [str(f) for f, k in zip(rows["fqn"], first[0].kept_by_setup) if k]
    groups: dict[tuple[object, ...], list[str]] = {}
    for i in np.flatnonzero(open_):
        groups.setdefault(alike(rows, int(i)), []).append(str(rows["fqn"][i]))
    for fqns in groups.values():
        converted = set(rec.converted_fqns)
        if not (may_convert or set(fqns) <= converted):
            continue
        flipped = converted - set(fqns) if set(fqns) <= converted else converted | set(fqns)
        other = decide_as(rec, resolved, sorted(flipped), settled)
        found = probe(other)
        if found < best_s:
            rec, best_s = other, found
    return (rec, first) if rec is start else (rec, step_of(rec))


def alike(rows: Columns, i: int) -> tuple[object, ...]:
    """What makes two rows the same linear to the answer: the local shape, the context its
    input comes from, the recipe, the TP style and whether it is in a block."""
    return (
        *(int(rows[c][i]) for c in ("M", "K", "N")),
        *(str(rows[c][i]) for c in ("context", "recipe", "tp")),
        is_block_fqn(str(rows["fqn"][i])),
        bool(rows["grouped"][i]),
    )


def _timed(capture: BlockCapture, resolved: Resolved) -> CaptureTimes:
    assert resolved.calibration is not None, "a block is timed by a calibration"
    return capture_times(
        capture, calibration=resolved.calibration, gemm_model=resolved.config.gemm_model
    )


@dataclass(frozen=True)
class _RowTimes:
    """A conversion set's per-row seconds per linear, as the step reads them: the linears
    without their full-AC recompute, the float8 gemms, what recompute runs, per precision."""

    convert: np.ndarray
    block: np.ndarray
    fp8: np.ndarray  # the decision column's float8 time, less a shared input's cast
    lin_bf16: np.ndarray
    lin_fp8: np.ndarray
    gemm_fp8: np.ndarray
    re_bf16: np.ndarray
    re_fp8: np.ndarray
    rec_fp8: np.ndarray


def _row_times(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    convert: np.ndarray,
    notes: list[Note],
    *,
    graphs: bool,
) -> _RowTimes:
    """`graphs`: the blocks come from a sharded block's graphs, which hold one cast of a
    shared input and their own recompute."""
    rows = rec.rows
    block = np.array([is_block_fqn(f) for f in rows["fqn"]])
    bf16_col, fp8_col = (
        ("bf16_s", "fp8_s") if rec.criterion == "speedup" else ("bf16_gemm_s", "fp8_s_worst")
    )
    bf16 = rows[bf16_col].astype(np.float64)
    fp8 = rows[fp8_col].astype(np.float64)
    rec_bf16 = row_values(rows, "recompute_bf16_s")
    rec_fp8 = row_values(rows, "recompute_fp8_s")
    # the linears without their full-AC recompute (recommend folds it into the times); in the
    # per-layer path a linear whose input an earlier one of its block casts pays no cast of it
    lin_bf16 = bf16 - rec_bf16
    shared = np.zeros(len(rows)) if graphs else shared_input_s(rows, resolved, convert, block, fp8)
    if shared.any():
        fused: dict[str, Any] = {"fused_qkv": True} if rec.setup.fuse_qkv else {}
        notes.append(note(Topic.SHARED_INPUT_CAST, **fused))
        # the saving splits as the row's float8 time does between its passes and its recompute
        rec_fp8 = rec_fp8 - shared * np.divide(rec_fp8, fp8, out=np.zeros(len(rows)), where=fp8 > 0)
        fp8 = fp8 - shared
    lin_fp8 = np.where(convert, fp8 - rec_fp8, lin_bf16)
    gemm_fp8 = np.where(convert, rows["fp8_gemm_s"].astype(np.float64) - rec_fp8, 0.0)
    gemm_fp8 = np.where(convert, np.minimum(gemm_fp8, lin_fp8), lin_bf16)
    re_bf16 = rec_bf16
    re_fp8 = np.where(convert, rec_fp8, rec_bf16)
    if rec.setup.recompute is Recompute.SELECTIVE:
        if not graphs:  # the graphs hold their own recompute
            re_bf16, re_fp8 = selective(rows, resolved, convert, block, run)
        notes.append(
            note(Topic.SELECTIVE_SAC, compiled=graphs, source=sac_policy(run.sac_policy).source)
        )
    return _RowTimes(convert, block, fp8, lin_bf16, lin_fp8, gemm_fp8, re_bf16, re_fp8, rec_fp8)


def _per_block(rec: Recommendation, t: _RowTimes, values: np.ndarray) -> float:
    counts = rec.rows["count"].astype(np.float64)
    return float((counts * values)[t.block].sum()) / block_count(rec)


def _pipelined(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    t: _RowTimes,
    notes: list[Note],
    streaming: tuple[float, float],
) -> tuple[float, float] | None:
    """torch's micro-pipelined TP pairs each collective with the gemm it feeds or drains"""
    if not run.async_tp:
        return None
    gemms = forward_gemms(rec.rows, resolved, t.convert, t.block)
    return async_tp(rec, rec.rows, t.convert, t.block, run, notes, gemms, streaming)


def _row_blocks(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    t: _RowTimes,
    notes: list[Note],
    attention: tuple[float, float],
    pipelined: tuple[float, float] | None,
    streaming: tuple[float, float],
) -> tuple[BlockTimes, BlockTimes]:
    """One block per precision summed from the per-layer rows; `pipelined`: async TP's
    exposed communication per precision (`_pipelined`), else TP's from the rows."""
    rows, layers = rec.rows, block_count(rec)
    attention_s, attention_again = attention
    forward = (_per_block(rec, t, t.lin_bf16) / 3, _per_block(rec, t, t.lin_fp8) / 3)
    again = (
        _per_block(rec, t, t.re_bf16) + attention_again,
        _per_block(rec, t, t.re_fp8) + attention_again,
    )
    comm_bf16, comm_fp8 = pipelined or tp_comm(rec, rows, t.convert, t.block, layers, run, notes)
    compute = [
        (f + attention_s * FORWARD_SHARE, 2 * f + attention_s * (1 - FORWARD_SHARE) + r)
        for f, r in zip(forward, again)
    ]
    fsdp = fsdp_comm(rec, rows, t.convert, t.block, layers, run, notes, compute, streaming)
    bf16 = BlockTimes(
        linear_gemm_s=_per_block(rec, t, t.lin_bf16),
        other_compute_s=attention_s,
        tp_comm_s=comm_bf16,
        fsdp_comm_s=fsdp[0],
        recompute_s=_per_block(rec, t, t.re_bf16) + attention_again,
    )
    overhead = max(_per_block(rec, t, t.lin_fp8) - _per_block(rec, t, t.gemm_fp8), 0.0)
    once = _per_block(rec, t, weight_cast_once_s(rows, resolved, t.convert))
    fp8 = BlockTimes(
        linear_gemm_s=_per_block(rec, t, t.gemm_fp8),
        overhead_s=overhead,
        other_compute_s=attention_s,
        tp_comm_s=comm_fp8,
        fsdp_comm_s=fsdp[1],
        recompute_s=_per_block(rec, t, t.re_fp8) + attention_again,
        weight_cast_once_s=min(once, overhead),
    )
    return bf16, fp8


def _graph_blocks(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    timed: TimedBlock,
    t: _RowTimes,
    notes: list[Note],
    attention: tuple[float, float],
    streaming: tuple[float, float],
) -> tuple[BlockTimes, BlockTimes]:
    """One block per precision from the sharded block's graphs: with float8 graphs, a block
    linear the rows keep in bf16 (it runs in float8 there) put back by its per-layer
    difference; with bf16 graphs alone, float8 moves them as the rows do."""
    pipelined = _pipelined(rec, resolved, run, t, notes, streaming)
    if not timed.bf16_only:
        kept = np.where(t.block & ~t.convert, t.lin_bf16 - (t.fp8 - t.rec_fp8), 0.0)
        return graph_blocks(
            rec,
            run,
            timed,
            _per_block(rec, t, kept),
            notes,
            t.convert,
            attention,
            pipelined,
            streaming,
        )
    bf16, fp8 = _row_blocks(rec, resolved, run, t, notes, attention, pipelined, streaming)
    none = np.zeros(len(rec.rows), dtype=bool)
    graph16, _ = graph_blocks(rec, run, timed, 0.0, [], none, attention, pipelined, streaming)
    notes.append(note(Topic.FLOAT8_BY_LAYERS))
    return graph16, moved(graph16, bf16, fp8)


def _apart_convert(
    apart: Recommendation, rec: Recommendation, convert: np.ndarray
) -> np.ndarray | None:
    """The separate layout's rows converted as the fused layout's `convert` converts theirs
    (q, k and v as their wqkv); None where a row has no counterpart (filters split the two
    layouts' rows differently)."""
    index = {str(f): i for i, f in enumerate(rec.rows["fqn"])}
    found = [index.get(fused_fqn(str(f))) for f in apart.rows["fqn"]]
    if any(i is None for i in found):
        return None
    return np.array([bool(convert[i]) for i in found if i is not None], dtype=bool)


def _fused_on_graphs(
    rec: Recommendation,
    apart: Recommendation,
    convert: np.ndarray,
    resolved: Resolved,
    run: RunConfig,
    timed: TimedBlock,
    t: _RowTimes,
    notes: list[Note],
    attention: tuple[float, float],
    streaming: tuple[float, float],
) -> tuple[BlockTimes, BlockTimes]:
    """The fused layout's block from the sharded block's graphs, which hold q, k and v apart:
    the graphs' block of the separate layout converted alike (`apart`, its rows `convert`),
    moved part by part by what fusing changes in the per-layer rows (the fused rows' block
    less the separate rows')."""
    graphs = not timed.bf16_only
    apart_graphs = _row_times(apart, resolved, run, convert, [], graphs=graphs)
    g16, g8 = _graph_blocks(apart, resolved, run, timed, apart_graphs, notes, attention, streaming)
    scratch: list[Note] = []
    by_rows = []
    for r, c in ((rec, t.convert), (apart, convert)):
        times = _row_times(r, resolved, run, c, scratch, graphs=False)
        pipelined = _pipelined(r, resolved, run, times, scratch, streaming)
        by_rows.append(
            _row_blocks(r, resolved, run, times, scratch, attention, pipelined, streaming)
        )
    (f16, f8), (a16, a8) = by_rows
    notes.append(note(Topic.FUSED_QKV_MOVED))
    return moved(g16, a16, f16), moved(g8, a8, f8)


def _summarize(
    rec: Recommendation,
    resolved: Resolved,
    run: RunConfig,
    block_graphs: TimedBlock | None,
    notes: list[Note],
    *,
    as_run: bool,
    apart: Recommendation | None = None,
) -> StepSummary:
    """`as_run`: every linear float8 can run in float8 but the filtered ones; otherwise
    f8roof's decisions (the setup's filters still apply). `apart`: a fused-q/k/v run's
    recommendation in the separate layout, whose rows pair with the graphs' linears."""
    rows = rec.rows
    setup = rec.setup
    block = np.array([is_block_fqn(f) for f in rows["fqn"]])
    head = rows["fqn"] == "lm_head"
    if as_run:
        convert, said = converts_as_run(rec, run)
        notes.append(said)
    else:
        convert = rows["convert"].astype(bool) & ~kept_by_filters(rec, run, as_run=False)[0]
    counts = rows["count"].astype(np.float64)
    layers = block_count(rec)
    apart_convert = None
    if block_graphs is not None and setup.fuse_qkv:
        apart_convert = None if apart is None else _apart_convert(apart, rec, convert)
        if apart_convert is None:
            notes.append(no_block(NoBlock.FUSED_QKV))
            block_graphs = None
    graphs = block_graphs is not None and not block_graphs.bf16_only
    t = _row_times(rec, resolved, run, convert, notes, graphs=graphs)
    attention = block_attention(rec, resolved, run, notes)
    streaming = streaming_rate(resolved)
    if block_graphs is None:
        pipelined = _pipelined(rec, resolved, run, t, notes, streaming)
        blocks = _row_blocks(rec, resolved, run, t, notes, attention, pipelined, streaming)
    elif apart is not None and apart_convert is not None:
        blocks = _fused_on_graphs(
            rec, apart, apart_convert, resolved, run, block_graphs, t, notes, attention, streaming
        )
    else:
        blocks = _graph_blocks(rec, resolved, run, block_graphs, t, notes, attention, streaming)
    bf16_block, fp8_block = blocks
    lin_bf16, lin_fp8, re_bf16, re_fp8 = t.lin_bf16, t.lin_fp8, t.re_bf16, t.re_fp8
    other = ~block & ~head
    if other.any():
        notes.append(note(Topic.OTHER_LINEARS, fqns=list(rows["fqn"][other])))
    side = ~block
    head_bf16 = float((counts * (lin_bf16 + re_bf16))[side].sum())
    head_fp8 = float((counts * np.where(convert, lin_fp8 + re_fp8, lin_bf16 + re_bf16))[side].sum())
    converted_side = bool((convert & side).any())
    ep_s = ep_comm(rec, run, notes)
    if ep_s:
        bf16_block = replace(bf16_block, ep_comm_s=ep_s)
        fp8_block = replace(fp8_block, ep_comm_s=ep_s)
    if run.cp > 1:
        cp_s = cp_comm(rec, run, notes, attention[0])
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
        outside=outside_parts(rec, resolved, run, convert, notes),
        gemm_floor_s=gemm_floor_s(rec, resolved),
        step_s=setup.step_s,
        notes=notes,
        fp8_band_s=band_moves(rows, convert, counts, rec.criterion),
        block_basis=Basis.PER_LAYER if block_graphs is None else Basis.GRAPHS,
        pipeline=pipeline,
        send_s=send_s(rec, run, pipeline, notes) if pipeline is not None else 0.0,
        context_parallel=run.cp > 1,
        accumulation=run.accumulation,
    )
