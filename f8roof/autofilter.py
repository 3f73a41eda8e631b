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

import numpy as np
import pandas as pd

from f8roof.architectures import Architecture, check_tokens
from f8roof.errors import F8RoofError
from f8roof.recommend import TIME_COLUMNS, Recommendation, StepShare, recommend
from f8roof.resolve import Request, Resolved
from f8roof.scale import ONE_GPU, TrainingSetup

TORCHAO_VERSION = "0.18.0"
TORCHAO_SOURCE = (
    f"torchao/float8/float8_linear_utils.py _auto_filter_for_recipe (torchao {TORCHAO_VERSION})"
)
# f8roof recipe -> the torchao recipe whose auto filter applies
AUTO_FILTER_RECIPES = {"tensorwise": "tensorwise", "rowwise": "rowwise"}


class NoAutoFilter(F8RoofError):
    """torchao has no auto filter for this recipe."""


def no_rule_reason(recipe: str) -> str:
    if recipe == "rowwise_gw_hp":
        return "torchao's _auto_filter_for_recipe raises NotImplementedError for rowwise_with_gw_hp"
    return f"torchao has no recipe {recipe!r} (it removed delayed and static scaling)"


def torchao_auto_filter(recipe: str, K, N) -> np.ndarray:
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
    return aligned & ~small


@dataclass(frozen=True)
class Choice:
    """Linear time of one step when the layers in `convert` train in float8."""

    name: str
    step_s: float
    converted_linears: int


@dataclass(frozen=True, eq=False)
class FilterComparison:
    recommendation: Recommendation  # f8roof's, one recipe
    torchao: np.ndarray | None  # torchao converts, per row; None: no rule for the recipe
    no_rule: str  # why torchao is None
    filter_fqns: tuple[str, ...]

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
            layers["torchao_convert"] = np.where(grouped, None, self.torchao)
            layers["torchao_step_s"] = self._step_times(self._torchao_mask())
        layers["f8roof_step_s"] = layers["recommended_step_s"]
        return layers

    def _times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rec = self.recommendation
        bf16_col, fp8_col = TIME_COLUMNS[rec.criterion]
        layers = rec.layers
        counts = layers["count"].to_numpy(dtype=np.float64)
        return (
            counts,
            layers[bf16_col].to_numpy(dtype=np.float64),
            layers[fp8_col].to_numpy(dtype=np.float64),
        )

    def _step_times(self, mask: np.ndarray) -> np.ndarray:
        counts, bf16, fp8 = self._times()
        return counts * np.where(mask, fp8, bf16)

    def _torchao_mask(self) -> np.ndarray:
        """torchao's filter for the linears; routed experts (grouped gemms, converted by
        torchao's MoE config, not by this filter) take f8roof's decision in both choices."""
        assert self.torchao is not None
        layers = self.recommendation.layers
        grouped = layers["grouped"].to_numpy(dtype=bool)
        return np.where(grouped, layers["convert"].to_numpy(dtype=bool), self.torchao)

    def _choice(self, name: str, mask: np.ndarray) -> Choice:
        layers = self.recommendation.layers
        modules = layers["count"].to_numpy() * np.maximum(1, layers["experts_per_device"])
        return Choice(name, float(self._step_times(mask).sum()), int(modules[mask].sum()))

    @property
    def choices(self) -> list[Choice]:
        """bf16 everywhere, torchao's filter (when it has a rule), f8roof's, and every linear
        float8 can run converted."""
        layers = self.recommendation.layers
        none = np.zeros(len(layers), dtype=bool)
        out = [self._choice("bf16", none)]
        if self.torchao is not None:
            out.append(self._choice("torchao auto filter", self._torchao_mask()))
        out.append(self._choice("f8roof", layers["convert"].to_numpy(dtype=bool)))
        out.append(self._choice("all convertible", layers["fp8_ok"].to_numpy(dtype=bool)))
        return out

    def choice(self, name: str) -> Choice | None:
        return next((c for c in self.choices if c.name == name), None)


def compare_filters(
    architecture: Architecture,
    *,
    tokens: int,
    resolved: Resolved,
    setup: TrainingSetup = ONE_GPU,
    filter_fqns: Sequence[str] = (),
) -> FilterComparison:
    """torchao's auto filter (on the unsharded weights, as torchtitan applies it) beside
    f8roof's recommendation (on the local shapes), for the first recipe of `resolved`."""
    from dataclasses import replace

    tokens = check_tokens(tokens)
    one = replace(resolved, configs=(resolved.config,), skipped=())
    rec = recommend(architecture, tokens=tokens, resolved=one, setup=setup)
    recipe = resolved.config.recipe.name
    torchao, no_rule = None, ""
    try:
        torchao = torchao_auto_filter(
            recipe, rec.layers["full_K"].to_numpy(), rec.layers["full_N"].to_numpy()
        )
    except NoAutoFilter as e:
        no_rule = e.message
    fqns = tuple(f for f in filter_fqns if f)
    if torchao is not None and fqns:
        named = np.array([any(f in fqn for f in fqns) for fqn in rec.layers["fqn"]], dtype=bool)
        torchao = torchao & ~named
    return FilterComparison(rec, torchao, no_rule, fqns)


# --- rendering ----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def _decision(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return "convert" if value else "keep bf16"


def comparison_rows(cmp: FilterComparison) -> tuple[list[str], list[list[str]]]:
    rec = cmp.recommendation
    layers = cmp.layers
    tp = rec.setup.tp > 1
    header = ["layer", "count", "M", "K", "N"]
    header += ["torchao sees K x N"] if tp else []
    header += ["x fitted" if rec.criterion == "speedup" else "x worst"]
    header += ["torchao", "f8roof", "torchao ms/step", "f8roof ms/step", "note"]
    rows = []
    for _, r in layers.iterrows():
        notes = []
        torchao = r.get("torchao_convert") if cmp.torchao is not None else None
        if r["grouped"]:
            notes.append("routed experts: not nn.Linear, outside torchao's filter")
        elif torchao and not r["fp8_ok"]:
            notes.append(f"torchao converts, but the local shape cannot run: {r['fp8_reason']}")
        elif not r["fp8_ok"]:
            notes.append(str(r["fp8_reason"]))
        row = [str(r["fqn"]), str(r["count"]), str(r["M"]), str(r["K"]), str(r["N"])]
        row += [f"{r['full_K']} x {r['full_N']}"] if tp else []
        value = float(r[rec.criterion])
        row += ["-" if math.isnan(value) else f"{value:.2f}"]
        row += [_decision(torchao), _decision(bool(r["convert"]))]
        row += [
            _ms(r["torchao_step_s"]) if cmp.torchao is not None else "-",
            _ms(r["f8roof_step_s"]),
            "; ".join(notes),
        ]
        rows.append(row)
    return header, rows


def summary_lines(cmp: FilterComparison) -> list[str]:
    rec = cmp.recommendation
    level = "calibrated" if rec.criterion == "speedup" else "worst case"
    choices = cmp.choices
    bf16 = choices[0]
    total = rec.totals.linears
    parts = [
        f"{c.name} {_ms(c.step_s)} ms ({bf16.step_s / c.step_s:.3f}x, "
        f"{c.converted_linears} of {total} linears)"
        for c in choices[1:]
    ]
    lines = [
        f"linear time per step (fwd+bwd, device, {level}): bf16 {_ms(bf16.step_s)} ms; "
        + "; ".join(parts)
    ]
    torchao, ours = cmp.choice("torchao auto filter"), cmp.choice("f8roof")
    assert ours is not None
    if torchao is None:
        lines.append(f"torchao: {cmp.no_rule}")
    else:
        gain = torchao.step_s - ours.step_s
        lines.append(
            f"f8roof vs torchao's filter: {_ms(gain)} ms per step saved "
            f"({gain / torchao.step_s:+.1%} of torchao's linear time)"
        )
    if rec.setup.step_s is not None:
        for c in choices[1:3]:
            share = StepShare(rec.setup.step_s, bf16.step_s, bf16.step_s - c.step_s)
            if share.consistent:
                lines.append(
                    f"end to end ({c.name}): step speedup {share.speedup:.3f}x of the measured "
                    f"{_ms(rec.setup.step_s)} ms bf16 step"
                )
    if rec.setup.tp > 1:
        lines.append(
            "torchao's filter sees the unsharded K x N (torchtitan converts before it applies "
            "TP); f8roof decides on the local shape"
        )
    return lines


def format_comparison(cmp: FilterComparison) -> str:
    from f8roof.report import _aligned

    rec = cmp.recommendation
    header, rows = comparison_rows(cmp)
    fqns = f", filter_fqns {list(cmp.filter_fqns)}" if cmp.filter_fqns else ""
    return "\n".join(
        [
            (
                f"{rec.architecture.name} on {rec.gpu}, {rec.tokens} tokens per GPU, "
                f"{rec.setup.describe()}, recipe {cmp.recipe}: torchao's auto filter vs f8roof"
            ),
            f"torchao: {TORCHAO_SOURCE}{fqns}; f8roof: decisions by {rec.criterion_label}",
            _aligned(header, rows, color=False),
            *summary_lines(cmp),
        ]
    )


def markdown_section(cmp: FilterComparison) -> str:
    from f8roof.report import _md_table

    header, rows = comparison_rows(cmp)
    return "\n".join(
        [
            "## torchao's auto filter vs f8roof",
            "",
            (
                f"torchao's `_auto_filter_for_recipe` ({TORCHAO_SOURCE}) converts by fixed K/N "
                f"thresholds measured on H100, blind to the tokens and (applied before "
                f"parallelism) to the TP shard; f8roof decides on the local shape at these "
                f"tokens. Recipe {cmp.recipe}."
            ),
            "",
            _md_table(header, rows),
            "",
            *[f"- {line}" for line in summary_lines(cmp)],
            "",
        ]
    )


def comparison_grid(
    architecture: Architecture,
    *,
    tokens: Sequence[int],
    tps: Sequence[int],
    resolved: Resolved,
    setup: TrainingSetup = ONE_GPU,
    filter_fqns: Sequence[str] = (),
) -> tuple[list[FilterComparison], pd.DataFrame]:
    """One comparison per (tokens, tp), and a summary row for each."""
    from dataclasses import replace

    comparisons, rows = [], []
    for t in tokens:
        for tp in tps:
            cmp = compare_filters(
                architecture,
                tokens=t,
                resolved=resolved,
                setup=replace(setup, tp=tp),
                filter_fqns=filter_fqns,
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


def format_grid(grid: pd.DataFrame, *, model: str, recipe: str) -> str:
    from f8roof.report import _aligned

    header = [
        "tokens",
        "tp",
        "bf16 ms",
        "torchao ms",
        "x torchao",
        "f8roof ms",
        "x f8roof",
        "f8roof vs torchao",
        "converted (torchao / f8roof / all)",
    ]
    rows = []
    for r in grid.itertuples(index=False):
        has = not math.isnan(r.torchao_ms)
        rows.append(
            [
                str(r.tokens),
                str(r.tp),
                f"{r.bf16_ms:.4g}",
                f"{r.torchao_ms:.4g}" if has else "-",
                f"{r.bf16_ms / r.torchao_ms:.3f}" if has else "-",
                f"{r.f8roof_ms:.4g}",
                f"{r.bf16_ms / r.f8roof_ms:.3f}",
                f"{(r.torchao_ms - r.f8roof_ms) / r.torchao_ms:+.1%}" if has else "-",
                f"{r.torchao_linears if has else '-'} / {r.f8roof_linears} / {r.linears}",
            ]
        )
    return "\n".join(
        [
            f"{model}, recipe {recipe}: linear time per step per GPU (fwd+bwd, device)",
            _aligned(header, rows, color=False),
        ]
    )


def filter_compare_text(
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
) -> str:
    """`f8roof filter-compare`: a table per (tokens, tp), and a summary grid when several.
    `request`: GPU, recipe (one), implementation and calibration, as for `f8roof estimate`."""
    from f8roof.architectures import resolve_model
    from f8roof.resolve import resolve

    request = request or Request()
    if "," in request.recipes or request.recipes.strip() == "all":
        raise F8RoofError("filter-compare takes one recipe (torchao converts with one config)")
    setup = TrainingSetup.from_options(ep=ep, fsdp=fsdp, recompute=recompute, step_ms=step_ms)
    for tp in tps:
        TrainingSetup.from_options(tp=tp)  # one-line error for a bad degree before any work
    resolved = resolve(request, many_recipes=False)
    architecture = resolve_model(model)
    comparisons, grid = comparison_grid(
        architecture,
        tokens=tokens,
        tps=tps,
        resolved=resolved,
        setup=setup,
        filter_fqns=filter_fqns,
    )
    parts = [resolved.header, f"using {resolved.source}"]
    parts += [format_comparison(c) + "\n" for c in comparisons]
    if len(comparisons) > 1:
        parts.append(format_grid(grid, model=architecture.name, recipe=resolved.config.recipe.name))
    return "\n".join(parts).rstrip()
