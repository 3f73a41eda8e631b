"""FSDP2's exposed time per block: weights all-gathered (bf16, or float8 with float8
all-gather), gradients reduce-scattered in the reduce dtype and all-reduced across HSDP
replicas, on FSDP2's schedule behind the compute the block runs, and the copy-out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.recommend import Recommendation
from f8roof.engine.step.conversion import weights_per_gpu
from f8roof.engine.step.fabric import BF16_BYTES, FP32_BYTES, comm_group, fabric_of
from f8roof.notes import Note, Topic, note
from f8roof.timing.comm import SOURCE as COMM_SOURCE
from f8roof.timing.comm import (
    collective_time_s,
    float8_all_gather_time_s,
    fsdp_exposed_time_s,
)
from f8roof.training.run_config import (
    RunConfig,
)


def fsdp_comm(
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
    if setup.fsdp_on and not run.fsdp_degree:
        notes.append(note(Topic.FSDP_UNKNOWN))
        return 0.0, 0.0
    # torchtitan shards over the data-parallel and the context-parallel ranks at once
    fsdp = (run.fsdp_degree or 1) * run.cp
    if fsdp < 2:
        return 0.0, 0.0
    fabric = fabric_of(rec, notes)
    if fabric is None:
        return 0.0, 0.0
    counts = rows["count"].astype(np.float64)
    kw, nics = comm_group(fabric, run, size=fsdp, stride=tp)
    place = kw["placement"]
    params = weights_per_gpu(rows, run)
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
        replicas, _ = comm_group(fabric, run, size=run.dp_replicate, stride=tp * fsdp)
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
