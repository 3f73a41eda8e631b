"""Expert parallelism's exposed time per block: torchtitan's token dispatch and combine.

Each MoE layer sends every token's `top_k` copies to the ranks holding their experts and
gathers the results back: an all-to-all before the routed experts and one after, in the
forward, and their mirrors in the backward (torchtitan's ExpertParallel, `all_to_all_single`
over the EP group; pytorch/torchtitan models/moe and distributed/expert_parallel.py). EP
borrows its ranks from data_parallel_shard (and CP), which torchtitan's mesh places outside
TP: the group's ranks are TP apart. Each rank sends its sequence-parallel share of the tokens
(tokens / TP) x top_k x hidden in bf16, on the compute stream's critical path (torchtitan
overlaps none of them by default). Full AC reruns the forward's two; per-op SAC saves
all_to_all_single's outputs (torchtitan's `_save_list`), so it reruns none. The bytes are bf16
under every recipe, as torchtitan sends them: its float8 and MXFP8 grouped-experts converters
swap in TorchAOTokenDispatcher, which pads each expert's tokens with torchao's
permute_and_pad and dispatches and combines with the bf16 all-to-all it inherits
(pytorch/torchtitan@b64292ba1, 2026-05-15, and still @b5bcd76c6, 2026-08-21:
torchtitan/models/common/token_dispatcher.py, components/quantization/float8.py and mx.py).
torchao's MXFP8 dispatch (torchao/prototype/moe_training/ep: a2a_dispatch_mxfp8_fwd_hp_bwd,
the forward's dispatch in MXFP8, half bf16's bytes and a 1/32 of scales) is not called there.
"""

from __future__ import annotations

from f8roof.engine.recommend import Recommendation
from f8roof.engine.step.conversion import block_count, hidden_size
from f8roof.engine.step.fabric import BF16_BYTES, comm_group, fabric_of
from f8roof.notes import Note, Topic, note
from f8roof.timing.comm import CollectiveKind, collective_time_s
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import RunConfig


def ep_comm(rec: Recommendation, run: RunConfig, notes: list[Note]) -> float:
    """Seconds of EP all-to-alls per block (the same in both precisions); 0 without EP."""
    routed = [linear for linear in rec.architecture.linears if linear.routed is not None]
    if run.ep < 2 or not routed:
        return 0.0
    fabric = fabric_of(rec, notes)
    if fabric is None:
        return 0.0
    top_k = routed[0].routed.top_k if routed[0].routed is not None else 1
    moe_layers = max(linear.count for linear in routed)
    tokens = rec.tokens / run.tp  # each rank's sequence-parallel share
    nbytes = tokens * top_k * hidden_size(rec.rows) * BF16_BYTES
    kw, _ = comm_group(fabric, run, size=run.ep, stride=run.tp)
    one = float(collective_time_s(CollectiveKind.ALL_TO_ALL, nbytes=nbytes, **kw))
    again = run.recompute_share(block_count(rec)) if run.recompute is Recompute.FULL else 0.0
    per_layer = one * (4 + 2 * again)  # dispatch and combine, forward and backward
    notes.append(
        note(
            Topic.EP_ALL_TO_ALL,
            ep=run.ep,
            top_k=top_k,
            mb=nbytes / 1e6,
            ms=one * 1e3,
            per_layer=4 + 2 * again,
            placement=kw["placement"].value,
        )
    )
    return per_layer * moe_layers / block_count(rec)
