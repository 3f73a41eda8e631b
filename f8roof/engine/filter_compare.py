"""torchao's automatic float8 module filter, reproduced, beside f8roof's recommendation.

After Llama3-8B with TP2 ran rowwise float8 slower than bf16 (pytorch/torchtitan#1207: the
sharded wk/wv were too small), torchao added `_auto_filter_for_recipe(recipe, filter_fqns)`
(torchtitan turns it on with `filter_fqns = ["auto_filter_small_kn"]`). Its rule, as torchao
0.18.0 has it in torchao/float8/float8_linear_utils.py (`_auto_filter_for_tensorwise`,
`_auto_filter_for_rowwise`), for an nn.Linear with weight (N, K):
- not converted when its fqn contains one of `filter_fqns`, or K or N is not a multiple of 16;
- tensorwise: not converted when K <= 4096 and N <= 1024;
- rowwise: not converted when N <= 2048, or K <= 1024, or N <= 4096 and K <= 2048;
- rowwise_with_gw_hp: no rule (NotImplementedError); delayed and static scaling: no recipe.
The thresholds come from H100 benchmarks of torchao's float8 README. They do not look at M
(the tokens), and they see the weight the module holds when torchao converts it: torchtitan
converts the model before it parallelizes it, so under TP the filter decides on the unsharded
(K, N) while each GPU runs the shard. f8roof decides on the local shape and the tokens.

f8roof does not import torchao for this (it stays optional); tests check the reproduction
against torchao's own function on a grid of K and N when torchao is installed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from f8roof.engine.decision import DEFAULT_POLICY, DecisionPolicy
from f8roof.engine.plan import Asked, Candidate, Plan, plan_model
from f8roof.engine.recommend import TIME_COLUMNS, Recommendation, gemm_floor_s, recommend
from f8roof.engine.resolve import Request, Resolved
from f8roof.engine.step.conversion import (
    NoAutoFilter,
    torchao_auto_filter,
)
from f8roof.engine.step.parts import check_measured_step
from f8roof.errors import F8RoofError, term
from f8roof.training.catalog import Architecture, check_tokens
from f8roof.training.run_config import ONE_GPU, RunConfig
from f8roof.training.torchtitan_names import filtered

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Choice:
    """One step per GPU when the layers a choice converts train in float8 (the plan's step:
    gemms, casts, collectives, recompute), and how many linears it converts."""

    name: str
    step_s: float
    converted_linears: int


# the conversion sets filter-compare asks the plan to step beside its own
TORCHAO_CHOICE = "torchao auto filter"
ALL_CHOICE = "all convertible"


@dataclass(frozen=True, eq=False)
class FilterComparison:
    plan: Plan  # f8roof's, one recipe, with torchao's filter and every linear stepped beside
    torchao: np.ndarray | None  # torchao converts, per row; None: no rule for the recipe
    no_rule: str  # why torchao is None
    filter_fqns: tuple[str, ...]

    @property
    def recommendation(self) -> Recommendation:
        return self.plan.recommendation

    @property
    def recipe(self) -> str:
        return self.recommendation.recipes[0]

    @property
    def layers(self) -> pd.DataFrame:
        """The recommendation's rows with `torchao_convert` (bool, or None for routed experts,
        which are not nn.Linear and outside the filter) and each choice's ms/step."""
        layers = self.recommendation.layers.copy()
        grouped = layers["grouped"].to_numpy(dtype=bool)
        if self.torchao is not None:
            layers["torchao_convert"] = [
                None if g else bool(t) for g, t in zip(grouped, self.torchao)
            ]
            layers["torchao_step_s"] = self._step_times(self._torchao_mask())
        layers["f8roof_step_s"] = layers["recommended_step_s"]
        return layers

    def _times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rec = self.recommendation
        bf16_col, fp8_col = TIME_COLUMNS[rec.criterion]
        layers = rec.rows
        counts = layers["count"].astype(np.float64)
        return counts, layers[bf16_col].astype(np.float64), layers[fp8_col].astype(np.float64)

    def _step_times(self, mask: np.ndarray) -> np.ndarray:
        counts, bf16, fp8 = self._times()
        return counts * np.where(mask, fp8, bf16)

    def _torchao_mask(self) -> np.ndarray:
        """torchao's filter for the linears; routed experts (grouped gemms, converted by
        torchao's MoE config, not by this filter) take f8roof's decision in both choices."""
        assert self.torchao is not None
        layers = self.recommendation.rows
        grouped = layers["grouped"].astype(bool)
        return np.where(grouped, layers["convert"].astype(bool), self.torchao)

    def _choice(self, name: str, candidate: Candidate) -> Choice:
        layers = self.recommendation.rows
        modules = layers["count"] * np.maximum(1, layers["experts_per_device"])
        converted = np.isin(layers["fqn"].astype(str), list(candidate.converted))
        return Choice(name, candidate.summary.fp8_s, int(modules[converted].sum()))

    @property
    def choices(self) -> list[Choice]:
        """bf16 everywhere, torchao's filter (when it has a rule), f8roof's, and every linear
        float8 can run converted: each the plan's step."""
        plan = self.plan
        out = [Choice("bf16", plan.step.chosen.bf16_s, 0)]
        for name in (TORCHAO_CHOICE, "f8roof", ALL_CHOICE):
            found = plan.choice if name == "f8roof" else plan.asked_for(name)
            if found is not None:
                out.append(self._choice(name, found))
        return out

    def choice(self, name: str) -> Choice | None:
        return next((c for c in self.choices if c.name == name), None)


def compare_filters(
    architecture: Architecture,
    *,
    tokens: int,
    resolved: Resolved,
    setup: RunConfig = ONE_GPU,
    filter_fqns: Sequence[str] = (),
    policy: DecisionPolicy = DEFAULT_POLICY,
) -> FilterComparison:
    """torchao's auto filter (on the unsharded weights, as torchtitan applies it) beside
    f8roof's recommendation (on the local shapes, decided by `policy`, as the plan `estimate`
    answers with decides it: the step included), for the first recipe of `resolved`."""
    from dataclasses import replace

    tokens = check_tokens(tokens)
    one = replace(resolved, configs=(resolved.config,), skipped=())
    rec = recommend(architecture, tokens=tokens, resolved=one, setup=setup, policy=policy)
    recipe = resolved.config.recipe.name
    torchao, no_rule = None, ""
    try:
        torchao = torchao_auto_filter(recipe, rec.rows["full_K"], rec.rows["full_N"])
    except NoAutoFilter as e:
        no_rule = e.message
    fqns = tuple(f for f in filter_fqns if f)
    if torchao is not None and fqns:
        rows = rec.rows
        named = np.array(
            [filtered(fqn, fqns, count=c) for fqn, c in zip(rows["fqn"], rows["count"])],
            dtype=bool,
        )
        torchao = torchao & ~named
    check_measured(rec, one)  # refused as `estimate` refuses it, before the plan steps it
    rows = rec.rows
    fqn = rows["fqn"].astype(str)
    also = [(ALL_CHOICE, tuple(fqn[rows["fp8_ok"].astype(bool)]))]
    if torchao is not None:
        grouped = rows["grouped"].astype(bool)  # routed experts: f8roof's decision in both
        mask = np.where(grouped, rows["convert"].astype(bool), torchao & rows["fp8_ok"])
        also.append((TORCHAO_CHOICE, tuple(fqn[mask.astype(bool)])))
    plan = plan_model(rec, one, Asked(model=architecture.name, also=tuple(also)))
    return FilterComparison(plan, torchao, no_rule, fqns)


def comparison_grid(
    architecture: Architecture,
    *,
    tokens: Sequence[int],
    tps: Sequence[int],
    resolved: Resolved,
    setup: RunConfig = ONE_GPU,
    filter_fqns: Sequence[str] = (),
    policy: DecisionPolicy = DEFAULT_POLICY,
) -> tuple[list[FilterComparison], pd.DataFrame]:
    """One comparison per (tokens, tp), and a summary row for each."""
    from dataclasses import replace

    import pandas as pd

    comparisons, rows = [], []
    for t in tokens:
        for tp in tps:
            cmp = compare_filters(
                architecture,
                tokens=t,
                resolved=resolved,
                setup=replace(setup, tp=tp),
                filter_fqns=filter_fqns,
                policy=policy,
            )
            comparisons.append(cmp)
            torchao, ours = cmp.choice("torchao auto filter"), cmp.choice("f8roof")
            bf16 = cmp.choices[0]
            assert ours is not None
            rows.append(
                {
                    "tokens": t,
                    "tp": tp,
                    "bf16_ms": bf16.step_s * 1e3,
                    "torchao_ms": torchao.step_s * 1e3 if torchao else math.nan,
                    "f8roof_ms": ours.step_s * 1e3,
                    "torchao_linears": torchao.converted_linears if torchao else -1,
                    "f8roof_linears": ours.converted_linears,
                    "linears": cmp.recommendation.totals.linears,
                }
            )
    return comparisons, pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class FilterCompareResult:
    resolved: Resolved
    model: str
    comparisons: tuple[FilterComparison, ...]
    grid: pd.DataFrame  # one row per (tokens, tp)


def filter_compare(
    model: str,
    *,
    tokens: Sequence[int],
    tps: Sequence[int],
    ep: int = 1,
    fsdp: bool = False,
    recompute: str = "none",
    step_ms: float | None = None,
    request: Request | None = None,
    filter_fqns: Sequence[str] = (),
    policy: str | DecisionPolicy = DEFAULT_POLICY,
) -> FilterCompareResult:
    """`f8roof filter-compare`: a comparison per (tokens, tp), and their summary grid.
    `request`: GPU, recipe (one), implementation and calibration, as for `f8roof estimate`."""
    from f8roof.engine.resolve import resolve
    from f8roof.training.catalog import resolve_model

    request = request or Request()
    policy = policy if isinstance(policy, DecisionPolicy) else DecisionPolicy.from_name(policy)
    if "," in request.recipes or request.recipes.strip() == "all":
        raise F8RoofError("filter-compare takes one recipe (torchao converts with one config)")
    if step_ms is not None and len(tokens) * len(tps) > 1:
        raise F8RoofError(
            f"{term('step_ms')} is one measured bf16 step, of one {term('tokens')} and "
            f"{term('tp')}: {len(tokens)} tokens x {len(tps)} TP degrees given"
        )
    setup = RunConfig.from_options(ep=ep, fsdp=fsdp, recompute=recompute, step_ms=step_ms)
    for tp in tps:
        RunConfig.from_options(tp=tp)  # one-line error for a bad degree before any work
    resolved = resolve(request, many_recipes=False)
    architecture = resolve_model(model)
    comparisons, grid = comparison_grid(
        architecture,
        tokens=tokens,
        tps=tps,
        resolved=resolved,
        setup=setup,
        filter_fqns=filter_fqns,
        policy=policy,
    )
    return FilterCompareResult(resolved, architecture.name, tuple(comparisons), grid)


def check_measured(rec: Recommendation, resolved: Resolved) -> None:
    """The run's measured bf16 step, refused as `estimate` refuses it: shorter than the step's
    bf16 gemms at the GPU's peak (one rank's share of them under a pipeline)."""
    setup = rec.setup
    if setup.step_s is not None:
        share = setup.pipeline.rank_share if setup.pipeline is not None else 1.0
        check_measured_step(setup.step_s, gemm_floor_s(rec, resolved) * share)
