"""What checkpointing runs again, per block row: per-op SAC's every-second-mm rule, full AC
(not the block's output projection), each row's forward gemm, and attention's share."""

from __future__ import annotations

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.recommend import Recommendation, forward_share_fn
from f8roof.engine.resolve import Resolved
from f8roof.engine.step.conversion import block_count
from f8roof.notes import Note, Topic, note
from f8roof.timing.attention import FORWARD_SHARE, attention_s
from f8roof.timing.attention import SOURCE as ATTENTION_SOURCE
from f8roof.timing.gemm import GemmRole, fp8_gemm_dtype
from f8roof.traffic.variant import Level
from f8roof.training.catalog import TPStyle
from f8roof.training.checkpointing import (
    MM,
    Decision,
    sac_policy,
)
from f8roof.training.run_config import (
    Recompute,
    RunConfig,
    assumed_seq_len,
)
from f8roof.training.torchtitan_names import layer_type


def selective(
    rows: Columns, resolved: Resolved, convert: np.ndarray, block: np.ndarray, run: RunConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Per-op SAC: the block linears, in the catalog's forward order (q, k, v, o, gate, up,
    down: torchtitan's wq, wk, wv, wo, w1, w3, w2), through the every-second-mm rule."""
    again = sac_recomputed(rows, block, run)
    configs = {c.recipe.name: c for c in resolved.configs}
    bf16_fwd, fp8_fwd = forward_gemms(rows, resolved, convert, block)
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


def block_output(rows: Columns, block: np.ndarray) -> np.ndarray:
    """The block's output projection (w2, down_proj): the last dense block linear in the
    catalog's forward order. Nothing a backward needs reads its output, so full AC does not
    run it (or the reduce-scatter after it) again."""
    dense = np.flatnonzero(block & ~rows["grouped"].astype(bool))
    if not len(dense):
        return np.zeros(len(rows), dtype=bool)
    kinds = np.array([layer_type(str(f)) for f in rows["fqn"]])
    output: np.ndarray = block & (kinds == kinds[dense[-1]])
    return output


def sac_recomputed(rows: Columns, block: np.ndarray, run: RunConfig) -> np.ndarray:
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


def forward_gemms(
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


def block_attention(
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
        again = FORWARD_SHARE * block_s * rec.setup.recompute_share(block_count(rec))
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
