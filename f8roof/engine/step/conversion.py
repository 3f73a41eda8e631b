"""Which linears a step converts, and what the run holds per GPU: the setup's filters
(torchtitan's substring rule, torchao's auto filter), the block count, the hidden size, and
the weights and parameters one GPU holds (TP then FSDP over the CP ranks too)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from f8roof.columns import Columns
from f8roof.engine.recommend import Recommendation
from f8roof.errors import F8RoofError
from f8roof.notes import Note, Topic, note
from f8roof.training.checkpointing import (
    is_block_fqn,
)
from f8roof.training.parallel import fsdp_shards
from f8roof.training.run_config import (
    AUTO_FILTER,
    RunConfig,
)
from f8roof.training.torchtitan_names import filtered, layer_type, torchtitan_model

# torchtitan's llama job configs keep the output projection (lm_head) in bf16
DEFAULT_FILTER = ("output",)

# torchao's automatic module filter (torchtitan's filter_fqns = ["auto_filter_small_kn"]), as
# torchao 0.18.0 has it in torchao/float8/float8_linear_utils.py (`_auto_filter_for_tensorwise`,
# `_auto_filter_for_rowwise`), for an nn.Linear with weight (N, K): not converted when K or N
# is not a multiple of 16; tensorwise: when K <= 4096 and N <= 1024; rowwise: when N <= 2048,
# or K <= 1024, or N <= 4096 and K <= 2048 (H100 benchmarks of torchao's float8 README; no M)
TORCHAO_VERSION = "0.18.0"
TORCHAO_SOURCE = (
    f"torchao/float8/float8_linear_utils.py _auto_filter_for_recipe (torchao {TORCHAO_VERSION})"
)
# f8roof recipe -> the torchao recipe whose auto filter applies
AUTO_FILTER_RECIPES = {"tensorwise": "tensorwise", "rowwise": "rowwise"}


class NoAutoFilter(F8RoofError):
    """torchao has no auto filter for this recipe."""


def no_rule_reason(recipe: str) -> str:
    if recipe.startswith("mxfp8") or recipe == "blockwise":
        # torchao 0.18: quantize_(model, MXFP8TrainingOpConfig, filter_fn=...) and
        # Float8BlockwiseLinearConfig take the user's filter; no _auto_filter_for_* for them
        return f"torchao has no auto filter for {recipe} (quantize_ takes your filter_fn)"
    if recipe == "rowwise_gw_hp":
        return "torchao's _auto_filter_for_recipe raises NotImplementedError for rowwise_with_gw_hp"
    return f"torchao has no recipe {recipe!r} (it removed delayed and static scaling)"


def torchao_auto_filter(recipe: str, K: npt.ArrayLike, N: npt.ArrayLike) -> np.ndarray:
    """Whether torchao's auto filter converts a linear with weight (N, K), per element of the
    arrays K, N (fqn filtering aside). Raises NoAutoFilter for a recipe it has no rule for."""
    if recipe not in AUTO_FILTER_RECIPES:
        raise NoAutoFilter(no_rule_reason(recipe))
    K, N = np.asarray(K), np.asarray(N)
    aligned = (K % 16 == 0) & (N % 16 == 0)
    if recipe == "tensorwise":
        small = (K <= 4096) & (N <= 1024)
    else:
        small = (N <= 2048) | (K <= 1024) | ((N <= 4096) & (K <= 2048))
    converts: np.ndarray = aligned & ~small  # numpy's stubs type an array's == as Any
    return converts


def as_run_filters(run: RunConfig, family: str = "") -> tuple[str, ...]:
    """The filter_fqns torchtitan runs with: the setup's, else its llama configs' ["output"],
    the output projection as the model's torchtitan names it (qwen3's 2026 `lm_head`)."""
    if run.filter_fqns is not None:
        return tuple(run.filter_fqns)
    model = torchtitan_model(family)
    return (model.head,) if model is not None else DEFAULT_FILTER


def kept_by_filters(
    rec: Recommendation, run: RunConfig, *, as_run: bool
) -> tuple[np.ndarray, dict[str, Any]]:
    """Per row: kept in bf16 by the setup's filters (torchtitan's llama configs' ["output"]
    for the step as run without a setup), torchao's auto filter among them; and the values
    of the note saying which."""
    rows = rec.rows
    given = run.filter_fqns
    filters = as_run_filters(run, rec.architecture.family) if as_run else tuple(given or ())
    kept = np.array(
        [filtered(f, filters, count=c) for f, c in zip(rows["fqn"], rows["count"])], dtype=bool
    )
    said = {
        "filters": [f for f in filters if f != AUTO_FILTER],
        "torchtitan_default": given is None,
        "auto_recipe": "",
    }
    if AUTO_FILTER in filters:
        recipe = rec.recipes[0]
        # torchtitan converts before it parallelizes: the filter sees the whole weight
        converts = torchao_auto_filter(
            recipe, rows["full_K"].astype(np.int64), rows["full_N"].astype(np.int64)
        )
        kept |= ~converts & ~rows["grouped"].astype(bool)
        said["auto_recipe"] = recipe
    return kept, said


def converts_as_run(rec: Recommendation, run: RunConfig) -> tuple[np.ndarray, Note]:
    """Per row: converted as torchtitan converts the run (every linear float8 can run but the
    filter_fqns: torchtitan's float8 module filter skips a linear whose dims its gemms cannot
    take; routed experts, 3D parameters and no nn.Linear, only where `moe_fqns_prototype`
    names them), and the note saying so: the one rule behind "as torchtitan converts", for
    the step and the memory alike."""
    rows = rec.rows
    filters, said = kept_by_filters(rec, run, as_run=True)
    fp8 = rows["fp8_s" if rec.criterion == "speedup" else "fp8_s_worst"]
    runs = rows["fp8_ok"].astype(bool)
    convert: np.ndarray = np.isfinite(fp8.astype(np.float64)) & runs & ~filters
    grouped = rows["grouped"].astype(bool)
    experts = "none"
    if grouped.any():
        moe = np.array([any(m in str(f) for m in run.moe_fqns) for f in rows["fqn"]], dtype=bool)
        convert &= ~grouped | moe
        experts = "converted" if (grouped & moe).any() else "kept"
    return convert, note(Topic.AS_CONVERTED, experts=experts, moe=list(run.moe_fqns), **said)


def converts_chosen(rec: Recommendation) -> np.ndarray:
    """Per row: converted by f8roof's decisions, less what the setup's own filters keep (what
    the choice's torchtitan config prints), the counterpart of `converts_as_run`."""
    chosen: np.ndarray = rec.rows["convert"].astype(bool) & ~kept_by_setup(rec)
    return chosen


def kept_by_setup(rec: Recommendation) -> np.ndarray:
    """Per row: kept in bf16 by the setup's own filters, whatever f8roof decides for it."""
    kept: np.ndarray = kept_by_filters(rec, rec.setup, as_run=False)[0]
    return kept


def block_count(rec: Recommendation) -> int:
    """The model's blocks: the most repeats of a layer type, its rows filters split summed."""
    blocks: dict[str, int] = {}
    for fqn, count in zip(rec.rows["fqn"], rec.rows["count"]):
        if is_block_fqn(fqn):
            blocks[layer_type(fqn)] = blocks.get(layer_type(fqn), 0) + int(count)
    return max(blocks.values(), default=1)


def hidden_size(rows: Columns) -> int:
    """The model's hidden size: lm_head's input width (the widest K without one)."""
    head = rows.take(rows["fqn"] == "lm_head")
    return int(head["full_K"][0]) if len(head) else int(rows["full_K"].max())


def weights_per_gpu(rows: Columns, run: RunConfig) -> np.ndarray:
    """Per row, the weight elements one GPU holds before FSDP shards them: every linear of
    the type (experts on this device included), split over TP unless replicated or routed
    experts under EP (whole: torchtitan runs no expert TP with float8 grouped gemms)."""
    counts = rows["count"].astype(np.float64)
    whole = (rows["tp"] == "replicated") | (rows["grouped"].astype(bool) & (run.ep > 1))
    shard = np.where(whole, 1, run.tp)
    experts = np.maximum(1, rows["experts_per_device"].astype(np.float64))
    K = rows["full_K"].astype(np.float64)
    N = rows["full_N"].astype(np.float64)
    weights: np.ndarray = counts * K * N * experts / shard
    return weights


def params_per_gpu(rec: Recommendation, run: RunConfig, convert: np.ndarray) -> tuple[float, float]:
    """This GPU's parameter shard (every linear weight and the embedding, as large as
    lm_head; TP then FSDP split them, `parallel.fsdp_shards`), and the float8-converted part
    of it."""
    rows = rec.rows
    params = weights_per_gpu(rows, run) / fsdp_shards(rows["grouped"], run)
    head = rows.take(rows["fqn"] == "lm_head")
    embedding = float((head["full_K"] * head["full_N"]).sum()) / run.tp
    ranks = run.fsdp_ranks * run.cp  # FSDP shards over the CP ranks too
    return float(params.sum()) + embedding / ranks, float(params[convert].sum())


def row_values(rows: Columns, name: str) -> np.ndarray:
    if name in rows:
        values = rows[name].astype(np.float64)
        return np.where(np.isnan(values), 0.0, values)
    return np.zeros(len(rows))
