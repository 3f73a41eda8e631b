"""Which linears of a model should train in float8, and what the step gains.

Layers x recipes -> one row per layer type: the estimate of the best recipe at the local shape
each GPU runs (`f8roof.training.parallel`: tensor parallel shards, routed experts' share of the tokens),
the decision (convert or keep bf16) and its margin, and totals weighted by each layer type's
count.

The decision column: `speedup` when a calibration is present (the shipped ones by default: the
exact bytes of the code torch.compile generates, timed by the public fit or the datasheet; or a
measured one), else `speedup_worst` (the seed's worst-case bytes at datasheet rooflines, which is no bound: for
tensorwise torch.compile moves more). A layer float8 gemms cannot run (a dim not a multiple of
16) is never converted, whichever recipe would otherwise look best.

Routed experts are one row per projection: a grouped gemm over the GPU's experts at M = tokens
per expert (padded), one launch whose tiles of every expert share the waves over the SMs
(roofline and tiled gemm models; a measured gemm table, which holds single gemms, times it as
that many gemms, launches included). torchao trains them with its float8 MoE path
(torchao.prototype.moe_training: rowwise scales in all three gemms of `_scaled_grouped_mm`,
casts by hand-written Triton kernels that torch.compile calls as opaque custom ops), so their
overhead comes from the model of those kernels (`traffic.grouped`, worst and ideal) whatever the
calibration, and their recipe is rowwise, or for the MXFP8 recipes torchao's MXFP8 grouped
path (`_MXFP8GroupedMM`, read off its kernels too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from f8roof.calibration.file import Calibration
from f8roof.columns import Columns
from f8roof.engine.decision import (
    DEFAULT_POLICY,
    DecisionPolicy,
    Settle,
    float8_time_ends,
    frame_decisions,
    frame_policy_end,
    settle_run,
)
from f8roof.engine.estimate import EstimateConfig, ShapeFunction, calibration_covers, estimate
from f8roof.engine.resolve import Resolved
from f8roof.notes import Note, Topic, note
from f8roof.timing.gemm import GEMM_ROLES, GemmRole, RooflineGemm, TableGemm, fp8_gemm_dtype
from f8roof.traffic.byte_table import ModelKey, model_bytes, sympy_model
from f8roof.traffic.grouped import GROUPED_RECIPE, is_grouped_recipe
from f8roof.traffic.te import TE_COMMIT, TE_SOURCE
from f8roof.traffic.variant import (
    TE_RECIPES,
    TORCHAO_RECIPES,
    Context,
    Implementation,
    Level,
    context_fused_roles,
)
from f8roof.training.catalog import (
    Architecture,
    check_tokens,
    fuse_qkv,
    layer_type,
    resolve_model,
)
from f8roof.training.parallel import LocalLayer, local_layers
from f8roof.training.recompute import forward_share, is_forward
from f8roof.training.run_config import ONE_GPU, RunConfig
from f8roof.training.torchtitan_names import expand_filters, split_by_filters, unmatched_notes

if TYPE_CHECKING:
    import pandas as pd

# decision column -> (bf16 time, float8 time) it is the ratio of; both device time
TIME_COLUMNS = {
    "speedup": ("bf16_s", "fp8_s"),
    "speedup_worst": ("bf16_gemm_s", "fp8_s_worst"),
    "speedup_ideal": ("bf16_gemm_s", "fp8_s_ideal"),
}


@dataclass(frozen=True)
class Totals:
    """Linear time of one training step (forward + backward of every linear), device time."""

    bf16_s: float
    recommended_s: float
    converted_linears: int
    linears: int
    # the converted layers at their band's ends (None without a band): the step's band
    recommended_s_low: float | None = None
    recommended_s_high: float | None = None

    @property
    def speedup(self) -> float:
        return self.bf16_s / self.recommended_s

    @property
    def speedup_band(self) -> tuple[float, float] | None:
        """The linear part's speedup at the converted layers' slow and fast ends."""
        if self.recommended_s_low is None or self.recommended_s_high is None:
            return None
        return self.bf16_s / self.recommended_s_high, self.bf16_s / self.recommended_s_low

    @property
    def saved_s(self) -> float:
        return self.bf16_s - self.recommended_s


@dataclass(frozen=True)
class StepShare:
    """What the linears' saving means for a measured bf16 step (both device time)."""

    step_s: float  # measured bf16 step
    linear_bf16_s: float  # the linears' predicted bf16 time in it
    saved_s: float  # what converting the recommended linears saves

    @property
    def linear_fraction(self) -> float:
        return self.linear_bf16_s / self.step_s

    @property
    def consistent(self) -> bool:
        """False when the prediction says the linears alone take longer than the step."""
        return self.linear_bf16_s <= self.step_s

    @property
    def speedup(self) -> float:
        """End-to-end: the step with everything but the linears unchanged."""
        return self.step_s / (self.step_s - self.saved_s)


@dataclass(frozen=True, eq=False)
class Recommendation:
    architecture: Architecture
    tokens: int
    criterion: str  # the column decisions are made on: "speedup" or "speedup_worst"
    recipes: tuple[str, ...]  # compared, in order
    skipped_recipes: tuple[str, ...]  # asked for but not in the calibration
    rows: Columns  # one row per layer type
    totals: Totals  # best recipe per layer
    recipe_totals: Mapping[str, Totals] = field(default_factory=dict)  # one recipe for all
    gpu: str = ""
    calibration: Calibration | None = None
    setup: RunConfig = ONE_GPU
    policy: DecisionPolicy = DEFAULT_POLICY  # which end of the band a conversion must win at
    margin: float = 0.0
    # the rows at their local shapes and each recipe's estimates of them, in `recipes` order
    # (`recommend_alone` reuses them)
    local: tuple[LocalLayer, ...] = field(default=(), repr=False)
    frames: tuple[Columns, ...] = field(default=(), repr=False)
    # layer types that win alone but that the step keeps in bf16 (`step_decides`, or a faster
    # conversion set the plan found): what float8 adds beside them costs the step more
    held_by_step: tuple[str, ...] = ()
    # layer types that lose alone but that the step converts (engine/plan.py): a conversion
    # set converting them was the fastest step the plan evaluated
    converted_by_step: tuple[str, ...] = ()

    @cached_property
    def layers(self) -> pd.DataFrame:
        """The rows as a DataFrame, for scripts (built on first use: pandas is no part of an
        answer on the terminal)."""
        return self.rows.to_frame()

    @property
    def settle(self) -> Settle | None:
        """The one GPU run that settles every layer whose band straddles the decision
        (None when none does)."""
        rows = self.rows.take(self.rows["straddles"].astype(bool))
        if not len(rows) or self.te_stack is not None:  # f8roof cannot calibrate TE's linears
            return None
        return settle_run(
            recipes=tuple(rows["recipe"]),
            shapes=[(int(r["M"]), int(r["K"]), int(r["N"])) for r in rows.rows()],
            contexts=tuple(rows["context"]),
            implementation=str(rows["implementation"][0]),
            calibrated=self.calibration is not None and self.calibration.is_measured,
        )

    @property
    def best_recipe(self) -> str:
        """The recipe whose use for every converted layer makes the linears fastest."""
        return max(self.recipe_totals, key=lambda name: self.recipe_totals[name].speedup)

    @property
    def converted_fqns(self) -> tuple[str, ...]:
        return tuple(self.rows["fqn"][self.rows["convert"].astype(bool)])

    @property
    def has_grouped(self) -> bool:
        return bool(self.rows["grouped"].any())

    @property
    def step_share(self) -> StepShare | None:
        """The end-to-end view, when the setup has a measured bf16 step time."""
        if self.setup.step_s is None:
            return None
        return StepShare(self.setup.step_s, self.totals.bf16_s, self.totals.saved_s)

    @property
    def reference_recipes(self) -> tuple[str, ...]:
        """Recipes chosen for converted layers that only f8roof's reference implementation
        has (delayed and static scaling): torchao cannot convert a model with them."""
        rows = self.rows["convert"].astype(bool) & (
            self.rows["implementation"] == Implementation.REFERENCE.value
        )
        chosen = self.rows["recipe"][rows]
        return tuple(r for r in dict.fromkeys(chosen) if r not in TORCHAO_RECIPES)

    @property
    def te_stack(self) -> Note | None:
        """What a Transformer Engine answer models (`traffic.te`); None for the others."""
        rows = self.rows["implementation"] == Implementation.TE.value
        if not rows.any():
            return None
        recipes = tuple(TE_RECIPES[str(r)] for r in dict.fromkeys(self.rows["recipe"][rows]))
        return note(Topic.TE_STACK, source=TE_SOURCE, commit=TE_COMMIT, recipes=recipes)


def recommend(
    architecture: Architecture,
    *,
    tokens: int,
    resolved: Resolved,
    setup: RunConfig = ONE_GPU,
    policy: DecisionPolicy = DEFAULT_POLICY,
    margin: float = 0.0,
) -> Recommendation:
    """Estimate every layer type under every recipe at its local shape; per layer keep the
    best recipe float8 can run and convert it if float8 wins on the decision column.

    With a calibration each speedup has a band (`speedup_low`, `speedup_high`): `policy` picks
    the value a conversion must win at by `margin` (expected, the default: the estimate;
    conservative: the low end; optimistic: the high end; see engine/decision.py), and
    `straddles` marks the rows whose band crosses the threshold. Without one the seed's worst
    case decides. Among several recipes each layer takes the one its decision converts that
    is fastest at the policy's value (else the best estimate, kept in bf16), so at that value
    the plan is never slower than any single recipe's. A run with `fuse_qkv` answers torchtitan's
    fused q/k/v row in place of the three."""
    tokens = check_tokens(tokens)
    if setup.fuse_qkv:
        architecture = fuse_qkv(architecture)
    local = local_layers(architecture, tokens, setup)
    blocks = max((layer.linear.count for layer in local if layer.in_block), default=0)
    share = setup.recompute_share(blocks)  # of the blocks full recompute reruns
    if setup.filter_fqns:
        recipes = [c.recipe.name for c in resolved.configs]
        filters = expand_filters(setup.filter_fqns, blocks=blocks, recipes=recipes)
        missed = unmatched_notes(filters, [(x.linear.fqn, x.linear.count) for x in local])
        setup = replace(setup, filter_fqns=filters, assumptions=(*setup.assumptions, *missed))
        local = split_rows(local, filters, blocks=blocks)
    frames = tuple(_layer_frame(local, c, share) for c in resolved.configs)
    return _plan(architecture, tokens, resolved, setup, policy, margin, local, frames)


def gemm_floor_s(rec: Recommendation, resolved: Resolved) -> float:
    """The step's bf16 linear gemms (three per linear, per GPU) at the GPU's datasheet peak:
    no measured step can be shorter."""
    rows = rec.rows
    flops = 6 * rows["count"] * rows["M"] * rows["K"] * rows["N"]
    return float(flops.sum()) / resolved.config.gpu.bf16_flops


def recommend_alone(rec: Recommendation, resolved: Resolved, recipe: str) -> Recommendation:
    """The recommendation had only `recipe` been asked, from the estimates `rec` already made
    of it (one of `resolved`'s recipes)."""
    i = rec.recipes.index(recipe)
    one = replace(resolved, configs=(resolved.configs[i],))
    return _plan(
        rec.architecture,
        rec.tokens,
        one,
        rec.setup,
        rec.policy,
        rec.margin,
        rec.local,
        (rec.frames[i],),
    )


def hold(rec: Recommendation, resolved: Resolved, fqns: Sequence[str]) -> Recommendation:
    """The recommendation with the layer types `fqns` kept in bf16 whatever they win alone
    (`resolved`: the one `rec` was planned with)."""
    return _replan(rec, resolved, held=tuple(dict.fromkeys([*rec.held_by_step, *fqns])))


def decide_as(
    rec: Recommendation,
    resolved: Resolved,
    converted: Sequence[str],
    settled: Sequence[str] = (),
) -> Recommendation:
    """The recommendation converting exactly the rows `converted` (fqns: a conversion set
    whose step the plan found fastest): those that win alone but are not in it held by the
    step, those in it that lose alone converted by the step (`resolved`: the one `rec` was
    planned with). A row float8 cannot run is never converted; the rows `settled` (the
    setup's own filters keep them) keep their own decision."""
    rows = rec.rows
    held_now, forced_now = (rows[c].astype(bool) for c in ("held_by_step", "converted_by_step"))
    # what each row's own estimate decides: its decision before the step held or forced it
    wins = (rows["convert"].astype(bool) & ~forced_now) | held_now
    runs = rows["fp8_ok"].astype(bool)
    fqns = [str(f) for f in rows["fqn"]]
    wanted, fixed = set(converted), set(settled)
    held = tuple(f for f, w in zip(fqns, wins) if w and f not in wanted and f not in fixed)
    forced = tuple(
        f for f, w, ok in zip(fqns, wins, runs) if not w and ok and f in wanted and f not in fixed
    )
    return _replan(rec, resolved, held=held, forced=forced)


def _replan(
    rec: Recommendation,
    resolved: Resolved,
    *,
    held: tuple[str, ...] = (),
    forced: tuple[str, ...] = (),
) -> Recommendation:
    """`rec` decided again from its own estimates, the layer types `held` kept in bf16 and
    the `forced` ones converted (`resolved`: the one `rec` was planned with)."""
    return _plan(
        rec.architecture,
        rec.tokens,
        resolved,
        rec.setup,
        rec.policy,
        rec.margin,
        rec.local,
        rec.frames,
        held=held,
        forced=forced,
    )


def _plan(
    architecture: Architecture,
    tokens: int,
    resolved: Resolved,
    setup: RunConfig,
    policy: DecisionPolicy,
    margin: float,
    local: Sequence[LocalLayer],
    frames: tuple[Columns, ...],
    *,
    held: tuple[str, ...] = (),
    forced: tuple[str, ...] = (),
) -> Recommendation:
    """The recommendation from each recipe's per-layer estimates (`frames`, one per config,
    of the rows `local`); the layer types `held` stay in bf16, the `forced` ones convert."""
    configs = resolved.configs
    calibration = resolved.calibration
    criterion = "speedup" if calibration is not None else "speedup_worst"
    bf16_col, fp8_col = TIME_COLUMNS[criterion]
    recipes = tuple(c.recipe.name for c in configs)
    # layers x recipes: the speedup each recipe's decision rests on (the policy's end of its
    # band); a recipe float8 cannot run at a layer's shape never wins there, and one the
    # decision converts beats every one it keeps
    ends = np.stack([frame_policy_end(f, criterion, policy) for f in frames], axis=1)
    scores = np.stack(
        [
            np.where(f["fp8_ok"].astype(bool), f[criterion].astype(np.float64), -np.inf)
            for f in frames
        ],
        axis=1,
    )
    converts = np.stack([_codes(f, criterion, policy, margin) == 1 for f in frames], axis=1)
    best = np.where(
        converts.any(axis=1),
        np.where(converts, ends, -np.inf).argmax(axis=1),
        scores.argmax(axis=1),
    )
    rows = np.arange(len(local))
    chosen = Columns.concat([frames[b].take([i]) for i, b in zip(rows, best)])
    counts = np.array([layer.linear.count for layer in local])
    layers = _layer_columns(local).join(chosen)
    if len(recipes) > 1:
        for name, frame in zip(recipes, frames):
            layers[f"{criterion}_{name}"] = frame[criterion]
    value = layers[criterion].astype(np.float64)
    codes, straddling = frame_decisions(layers, criterion=criterion, policy=policy, margin=margin)
    layers["held_by_step"] = np.isin(layers["fqn"].astype(str), list(held))
    layers["converted_by_step"] = np.isin(layers["fqn"].astype(str), list(forced))
    codes = np.where(layers["held_by_step"], 0, np.where(layers["converted_by_step"], 1, codes))
    convert = codes == 1
    layers["convert"] = convert
    layers["decision"] = np.array(["keep bf16", "convert", "uncertain"])[codes]
    layers["straddles"] = straddling
    # float8 faster by this fraction (negative: slower); none where float8 cannot run at all
    layers["margin"] = np.where(layers["fp8_ok"].astype(bool), value - 1.0, np.nan)
    bf16_s = layers[bf16_col].astype(np.float64)
    fp8_s = layers[fp8_col].astype(np.float64)
    layers["bf16_step_s"] = counts * bf16_s
    layers["recommended_step_s"] = counts * np.where(convert, fp8_s, bf16_s)
    layers["saved_step_s"] = layers["bf16_step_s"] - layers["recommended_step_s"]
    modules = counts * np.maximum(1, layers["experts_per_device"])
    totals = _totals(
        counts, bf16_s, fp8_s, convert, modules, band=float8_time_ends(layers, criterion)
    )
    recipe_totals = {}
    for name, frame in zip(recipes, frames):
        ok = _codes(frame, criterion, policy, margin) == 1
        recipe_totals[name] = _totals(
            counts,
            frame[bf16_col].astype(np.float64),
            frame[fp8_col].astype(np.float64),
            ok,
            modules,
        )
    return Recommendation(
        architecture=architecture,
        tokens=tokens,
        criterion=criterion,
        recipes=recipes,
        skipped_recipes=resolved.skipped,
        rows=layers,
        totals=totals,
        recipe_totals=recipe_totals,
        gpu=resolved.gpu.name,
        calibration=calibration,
        setup=setup,
        policy=policy,
        margin=margin,
        local=tuple(local),
        frames=frames,
        held_by_step=held,
        converted_by_step=forced,
    )


def _codes(frame: Columns, criterion: str, policy: DecisionPolicy, margin: float) -> np.ndarray:
    return frame_decisions(frame, criterion=criterion, policy=policy, margin=margin)[0]


def split_rows(
    local: Sequence[LocalLayer], filters: Sequence[str], *, blocks: int
) -> list[LocalLayer]:
    """Each layer type in every block as rows that `filters` keep or convert whole (layers
    0-26 vs 27-31 under `layers.27.`, ...). A type in fewer than `blocks` blocks (an MoE
    model's dense layers) stays one row: which blocks it sits in is not known here."""
    out: list[LocalLayer] = []
    for layer in local:
        if layer.linear.count != blocks:
            out.append(layer)
            continue
        for fqn, count in split_by_filters(layer.linear.fqn, blocks, filters):
            out.append(replace(layer, linear=replace(layer.linear, fqn=fqn, count=count)))
    return out


def _layer_columns(local: Sequence[LocalLayer]) -> Columns:
    """What each row is before any estimate: name, count, TP style, expert routing, the full
    (unsharded) weight dims. M, K, N (local) come with the estimate."""
    return Columns(
        {
            "fqn": np.array([layer.linear.fqn for layer in local], dtype=object),
            "count": np.array([layer.linear.count for layer in local]),
            "tp": np.array([layer.linear.tp.value for layer in local], dtype=object),
            "grouped": np.array([layer.grouped for layer in local], dtype=bool),
            "experts_per_device": np.array([layer.experts_per_device for layer in local]),
            "tokens_per_expert": np.array([layer.tokens_per_expert for layer in local]),
            "full_K": np.array([layer.linear.K for layer in local]),
            "full_N": np.array([layer.linear.N for layer in local]),
        }
    )


def _layer_frame(local: Sequence[LocalLayer], config: EstimateConfig, recompute: float) -> Columns:
    """The estimate of every row under one config. Dense rows as `estimate` gives them; routed
    experts' rows replaced by a grouped gemm: experts-per-device gemms at M = tokens per
    expert, rowwise, overhead of torchao's grouped path (see the module docstring).
    `recompute`: the share of the blocks full recompute reruns (0: none)."""
    frame = _by_context(local, config, recompute)
    for column in _LABELS:
        frame[column] = frame[column].astype(str)
    grouped = np.array([layer.grouped for layer in local], dtype=bool)
    if config.calibration is not None:
        # which overhead level `speedup`, `fp8_s` and `bf16_s` hold, per row
        frame["speedup_level"] = np.where(grouped, "worst", "fitted")
    if not grouped.any():
        return frame
    index = [int(i) for i in np.flatnonzero(grouped)]
    per_device = np.array([local[i].experts_per_device for i in index], dtype=np.float64)
    gconfig = grouped_config(config)
    part = _timed([local[i].shape for i in index], gconfig, recompute, groups=per_device)
    for column in part.columns:
        frame.set_rows(index, column, part[column])
    # torchao's MoE training path, whatever implementation the dense linears use
    frame.set_rows(index, "implementation", Implementation.TORCHAO.value)
    if config.calibration is not None:
        # no fitted model of torchao's grouped path: its rows decide on its worst case, a true
        # bound for hand-written kernels (every loop reading from HBM); `speedup_level` says so
        worst = frame["speedup_worst"][index]
        frame.set_rows(index, "bf16_s", frame["bf16_gemm_s"][index])
        frame.set_rows(index, "fp8_s", frame["fp8_s_worst"][index])
        frame.set_rows(index, "speedup", worst)
        for column in ("speedup_low", "speedup_high"):
            if column in frame:
                frame.set_rows(index, column, worst)
        if "context_s" in frame:
            frame.set_rows(index, "context_s", 0.0)
            frame.set_rows(index, "speedup_context", worst)
            for column in ("speedup_context_low", "speedup_context_high"):
                if column in frame:
                    frame.set_rows(index, column, worst)
        for column in ("overhead_s_fitted", *_FITTED_BYTES, *_WALL_COLUMNS):
            if column in frame:
                frame.set_rows(index, column, np.nan)
    return frame


_LABELS = ("recipe", "implementation", "context")


def _by_context(local: Sequence[LocalLayer], config: EstimateConfig, recompute: float) -> Columns:
    """Each row estimated in its own context (the op producing its input), with the seed's F
    flags that context implies; a context the calibration lacks falls back to the standalone
    linear (`context_asked` keeps the one the architecture has)."""
    # full recompute reruns the blocks' linears only (LocalLayer.in_block), and of those not
    # the block's output projection: the last dense one, whose output no backward reads
    kinds = [layer_type(layer.linear.fqn) for layer in local]
    blocks = [i for i, layer in enumerate(local) if layer.in_block]
    output = kinds[blocks[-1]] if blocks and not local[blocks[-1]].grouped else None
    reruns = [layer.in_block and kind != output for layer, kind in zip(local, kinds)]
    keys = [(layer.linear.context, again) for layer, again in zip(local, reruns)]
    parts, order = [], []
    for context, in_block in dict.fromkeys(keys):
        rows = [i for i, key in enumerate(keys) if key == (context, in_block)]
        used = context
        if config.calibration is not None and not calibration_covers(
            config.calibration, replace(config, context=context).variant
        ):
            used = Context()
        part = _timed(
            [local[i].shape for i in rows],
            replace(config, context=used, fused=context_fused_roles(used, config.implementation)),
            recompute if in_block else 0.0,
        )
        part["context_asked"] = np.full(len(rows), context.name, dtype=object)
        parts.append(part)
        order += rows
    frame = Columns.concat(parts).take(np.argsort(order))
    for column in ("recompute_bf16_s", "recompute_fp8_s"):
        if column in frame:  # rows outside the blocks (lm_head) are never recomputed
            frame[column] = np.where(np.isnan(frame[column]), 0.0, frame[column])
    return frame


_WALL_COLUMNS = ("bf16_wall_s", "fp8_wall_s", "speedup_wall")
_FITTED_BYTES = (
    "overhead_bytes_fitted",
    "overhead_bytes_fitted_low",
    "overhead_bytes_fitted_high",
)


def grouped_config(config: EstimateConfig) -> EstimateConfig:
    """The config routed experts are estimated with: torchao's grouped-gemm traffic
    (`traffic.grouped`), no calibration's fitted overhead (it models Float8Linear, not the
    grouped path), but the calibration's gemm model (when it has rowwise and bf16 gemms) and
    its bandwidth and launch floor. No context and no F/L: the experts' input comes from the
    token permutation, and torchao's hand-written casts fuse nothing. The gemms are timed as
    the reference's because `_scaled_grouped_mm` takes row/column scales with fast accumulation
    in all three gemms, unlike Float8Linear's unit-scale backward gemms."""
    # MXFP8 recipes train experts on torchao's MXFP8 grouped path; every other recipe on its
    # float8 rowwise one
    mx = is_grouped_recipe(config.recipe) and config.recipe != GROUPED_RECIPE
    recipe = config.recipe if mx else GROUPED_RECIPE
    gemm = config.gemm_model
    fp8 = "fp8" if mx else "fp8_rowwise"
    if isinstance(gemm, TableGemm) and not all(
        (dtype, role) in gemm.tables for dtype in ("bf16", fp8) for role in GEMM_ROLES
    ):
        gemm = RooflineGemm(config.gpu)
    return replace(
        config,
        recipe=recipe,
        implementation=Implementation.TORCHAO if mx else Implementation.REFERENCE,
        context=Context(),
        fused=frozenset(),
        limited=frozenset(),
        calibration=None,
        grouped=True,
        gemm=gemm,
        memory_efficiency=config.bandwidth_bytes_per_s / config.gpu.memory_bandwidth_bytes_per_s,
        launch_floor_s=config.small_kernel_s,
    )


def _timed(
    shapes: Sequence[tuple[int, int, int]],
    config: EstimateConfig,
    recompute: float,
    groups: np.ndarray | None = None,
) -> Columns:
    """`estimate`, plus the recomputed forward under full activation checkpointing of a share
    `recompute` of the blocks (1: every block). `groups`: experts per grouped gemm, per shape
    (routed experts)."""
    frame = estimate(shapes, config, groups=groups, ranges=True)
    if recompute:
        _add_recompute(frame, config, 1 if groups is None else groups, recompute)
    return frame


@lru_cache(maxsize=32)
def forward_share_fn(key: ModelKey) -> ShapeFunction:
    """numpy (M, K, N) -> the forward share of a (worst-case) model's bytes
    (`training.recompute.forward_share`)."""
    found = model_bytes(key)
    if found is None:
        import sympy as sp

        from f8roof.traffic import monomials

        share = forward_share(sympy_model(key))
        # lambdify's generated function is untyped
        function: ShapeFunction = sp.lambdify(monomials.SYMBOLS, share, modules="numpy")
        return function
    forward, total = found.sum(is_forward), found.total
    return lambda M, K, N: forward(M, K, N) / total(M, K, N)


def _add_recompute(
    frame: Columns, config: EstimateConfig, groups: float | np.ndarray, blocks: float = 1.0
) -> None:
    """Full activation checkpointing runs each linear's forward again in the backward: its
    output gemm in both precisions, and the forward share of the float8 overhead (input and
    weight casts, `training.recompute.forward_share` of the worst-case model, applied to every
    overhead level). Times and speedups are updated in place; the recomputed parts are kept
    in their own columns. Wall-clock columns are left out (NaN): the fitted fixed costs are
    per compiled step, not per recomputed forward. `blocks`: the share of the blocks
    checkpointed (torchtitan's layer SAC: every n-th), which scales what is recomputed (a row
    stands for the layer in every block)."""
    M, K, N = (frame[c].astype(np.float64) for c in ("M", "K", "N"))
    gemm = config.gemm_model
    bf16_fwd, _ = gemm.time_s("bf16", GemmRole.OUTPUT, M, K, N, groups)
    output_dtype = fp8_gemm_dtype(config.recipe, GemmRole.OUTPUT, config.implementation)
    fp8_fwd, _ = gemm.time_s(output_dtype, GemmRole.OUTPUT, M, K, N, groups)
    share_fn = forward_share_fn(config.model_key(Level.WORST))
    share = np.broadcast_to(np.asarray(share_fn(M, K, N), dtype=np.float64), M.shape)
    frame["forward_share"] = share
    bf16_fwd, fp8_fwd, share = bf16_fwd * blocks, fp8_fwd * blocks, share * blocks
    levels = [lvl for lvl in ("worst", "ideal", "fitted") if f"overhead_s_{lvl}" in frame]
    # the recomputed float8 forward at the decision level (fitted when calibrated)
    decision_level = "fitted" if "fp8_s" in frame else "worst"
    frame["recompute_bf16_s"] = bf16_fwd
    frame["recompute_fp8_s"] = fp8_fwd + share * frame[f"overhead_s_{decision_level}"]
    frame["bf16_gemm_s"] = frame["bf16_gemm_s"] + bf16_fwd
    frame["fp8_gemm_s"] = frame["fp8_gemm_s"] + fp8_fwd
    for column in [c for c in frame.columns if c.startswith("overhead_bytes_")]:
        frame[column] = frame[column] * (1 + share)
    for level in levels:
        frame[f"overhead_s_{level}"] = frame[f"overhead_s_{level}"] * (1 + share)
    for level in ("worst", "ideal"):
        frame[f"fp8_s_{level}"] = frame["fp8_gemm_s"] + frame[f"overhead_s_{level}"]
        frame[f"speedup_{level}"] = frame["bf16_gemm_s"] / frame[f"fp8_s_{level}"]
    if "fp8_s" in frame:
        before = {c: frame[c] for c in ("speedup", "speedup_context") if c in frame}
        frame["bf16_s"] = frame["bf16_s"] + bf16_fwd
        frame["fp8_s"] = frame["fp8_s"] + frame["recompute_fp8_s"]
        frame["speedup"] = frame["bf16_s"] / frame["fp8_s"]
        if "context_s" in frame:  # the context's own kernels, once per step (not recomputed)
            frame["speedup_context"] = (frame["bf16_s"] + frame["context_s"]) / (
                frame["fp8_s"] + frame["context_s"]
            )
        # the band moves with its speedup: each end keeps its ratio to it
        for column, old in before.items():
            for end in ("_low", "_high"):
                if column + end in frame:
                    frame[column + end] = frame[column + end] * (frame[column] / old)
        for column in _WALL_COLUMNS:
            if column in frame:
                frame[column] = np.full(len(frame), np.nan)


def _totals(
    counts: np.ndarray,
    bf16_s: np.ndarray,
    fp8_s: np.ndarray,
    convert: np.ndarray,
    modules: np.ndarray | None = None,
    band: tuple[np.ndarray, np.ndarray] | None = None,
) -> Totals:
    """`band`: the float8 times at the band's (fast, slow) ends, per layer."""
    modules = counts if modules is None else modules
    ends: list[float | None] = [None, None]
    if band is not None:
        ends = [float((counts * np.where(convert, t, bf16_s)).sum()) for t in band]
    return Totals(
        bf16_s=float((counts * bf16_s).sum()),
        recommended_s=float((counts * np.where(convert, fp8_s, bf16_s)).sum()),
        converted_linears=int(modules[convert].sum()),
        linears=int(modules.sum()),
        recommended_s_low=ends[0],
        recommended_s_high=ends[1],
    )


def recommend_model(
    model: str,
    *,
    tokens: int,
    resolved: Resolved,
    setup: RunConfig = ONE_GPU,
    policy: DecisionPolicy = DEFAULT_POLICY,
) -> Recommendation:
    """`recommend` for a built-in name or a config.json path (the CLI's entry)."""
    return recommend(
        resolve_model(model), tokens=tokens, resolved=resolved, setup=setup, policy=policy
    )
