"""`f8roof report`: what a model's report holds, computed (rendering is renderers/report.py):
the plan `estimate` answers with (its decisions and step), and torchao's auto filter beside
it for the best recipe where torchao has a rule."""

from __future__ import annotations

from dataclasses import dataclass, replace

from f8roof.engine.decision import DEFAULT_POLICY, DecisionPolicy
from f8roof.engine.estimate import EstimateConfig
from f8roof.engine.filter_compare import (
    FilterComparison,
    check_measured,
    compare_filters,
)
from f8roof.engine.grid import OverheadShares, SpeedupGrid, overhead_shares, speedup_grid
from f8roof.engine.plan import Asked, Plan, plan_model
from f8roof.engine.recommend import Recommendation, recommend_model
from f8roof.engine.resolve import Provenance, Request, Resolved, resolve
from f8roof.engine.step.conversion import AUTO_FILTER_RECIPES
from f8roof.training.run_config import ONE_GPU, RunConfig, check_float8_all_gather


@dataclass(frozen=True)
class ModelReport:
    plan: Plan  # the decisions and the step, as `estimate` answers them
    comparison: FilterComparison | None  # None where torchao has no rule for the best recipe
    best: EstimateConfig  # the best single recipe's configuration (the plots show it)
    provenance: Provenance  # what the estimate rests on
    grid: SpeedupGrid  # the best recipe's speedup over M and K = N
    overhead: OverheadShares  # and its overhead's share along M = K = N

    @property
    def recommendation(self) -> Recommendation:
        return self.plan.recommendation


def model_report(
    model: str,
    *,
    tokens: int,
    request: Request | Resolved,
    setup: RunConfig = ONE_GPU,
    policy: DecisionPolicy | str = DEFAULT_POLICY,
) -> ModelReport:
    """`request` as the user gave it (resolved here), or already resolved."""
    resolved = request if isinstance(request, Resolved) else resolve(request)
    check_float8_all_gather(
        setup.float8_all_gather,
        [c.recipe.name for c in resolved.configs],
        resolved.config.implementation.value,
    )
    policy = DecisionPolicy.from_name(policy) if isinstance(policy, str) else policy
    tokens = setup.local_tokens(tokens)
    rec = recommend_model(model, tokens=tokens, resolved=resolved, setup=setup, policy=policy)
    check_measured(rec, resolved)  # refused as `estimate` refuses it
    found = plan_model(rec, resolved, Asked(model=model))
    rec = found.recommendation
    best = next(c for c in resolved.configs if c.recipe.name == rec.best_recipe)
    comparison = None
    if best.recipe.name in AUTO_FILTER_RECIPES:
        one = replace(resolved, configs=(best,), skipped=())
        comparison = compare_filters(
            rec.architecture, tokens=tokens, resolved=one, setup=setup, policy=policy
        )
    return ModelReport(
        found, comparison, best, resolved.provenance, speedup_grid(best), overhead_shares(best)
    )
