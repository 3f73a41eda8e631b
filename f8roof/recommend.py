"""Which linears of a model should train in float8, and what the step gains.

Layers x recipes -> one row per layer type: the estimate of the best recipe, the decision
(convert or keep bf16) and its margin, and totals weighted by each layer type's count.

The decision column: the calibrated `speedup` (fitted overhead, device time) when a calibration
is present, else `speedup_worst` (the seed's worst-case overhead): without measurements the
conservative side is the honest one. A layer whose K or N is not a multiple of 16 is never
converted (float8 gemms cannot run it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from f8roof.architectures import (
    Architecture,
    as_module,
    check_tokens,
    from_module,
    group_by_layer_type,
    layer_type,
    module_linears,
    resolve_model,
)
from f8roof.calibration import Calibration
from f8roof.errors import F8RoofError
from f8roof.estimate import EstimateConfig, estimate
from f8roof.models.recipes import RECIPE_NAMES, Recipe, RecipeError

# decision column -> (bf16 time, float8 time) it is the ratio of; both device time
TIME_COLUMNS = {
    "speedup": ("bf16_s", "fp8_s"),
    "speedup_worst": ("bf16_gemm_s", "fp8_s_worst"),
    "speedup_ideal": ("bf16_gemm_s", "fp8_s_ideal"),
}
CRITERION_LABELS = {
    "speedup": "calibrated speedup (fitted overhead, device time)",
    "speedup_worst": "speedup_worst (worst-case overhead; conservative, no calibration)",
}


@dataclass(frozen=True)
class Totals:
    """Linear time of one training step (forward + backward of every linear), device time."""

    bf16_s: float
    recommended_s: float
    converted_linears: int
    linears: int

    @property
    def speedup(self) -> float:
        return self.bf16_s / self.recommended_s

    @property
    def saved_s(self) -> float:
        return self.bf16_s - self.recommended_s


@dataclass(frozen=True, eq=False)
class Recommendation:
    architecture: Architecture
    tokens: int
    criterion: str  # the column decisions are made on: "speedup" or "speedup_worst"
    recipes: tuple[str, ...]  # compared, in order
    skipped_recipes: tuple[str, ...]  # asked for but not in the calibration
    layers: pd.DataFrame  # one row per layer type
    totals: Totals  # best recipe per layer
    recipe_totals: Mapping[str, Totals] = field(default_factory=dict)  # one recipe for all
    gpu: str = ""
    calibrated_on: str = ""  # the calibration's device name, "" for roofline presets

    @property
    def converted_fqns(self) -> tuple[str, ...]:
        return tuple(self.layers.loc[self.layers["convert"], "fqn"])

    @property
    def criterion_label(self) -> str:
        return CRITERION_LABELS[self.criterion]


def parse_recipes(text: str, scaling: Mapping[str, str] | None = None) -> list[Recipe]:
    """'all', one recipe name, or a comma list of them."""
    names = (
        list(RECIPE_NAMES)
        if text.strip() == "all"
        else [t.strip() for t in text.split(",") if t.strip()]
    )
    if not names:
        raise RecipeError("no recipe given; known: all, " + ", ".join(RECIPE_NAMES))
    if scaling and len(names) > 1:
        raise RecipeError("--scaling sets one tensorwise recipe; give a single --recipe with it")
    recipes = [Recipe.from_name(n, scaling) for n in names]
    return list(dict.fromkeys(recipes))


def _usable(configs: Sequence[EstimateConfig]) -> tuple[list[EstimateConfig], list[str]]:
    """Drop recipes the calibration did not measure (an error if that leaves none, or if the
    one recipe asked for is missing)."""
    calibration = configs[0].calibration
    if calibration is None:
        return list(configs), []
    have = {v.variant for v in calibration.variants}
    usable = [c for c in configs if c.recipe.name in have]
    if len(configs) == 1 or not usable:
        for c in configs:
            calibration.variant(c.recipe.name)  # raises, naming what the file has
    return usable, [c.recipe.name for c in configs if c.recipe.name not in have]


def recommend(
    architecture: Architecture, *, tokens: int, configs: Sequence[EstimateConfig]
) -> Recommendation:
    """Estimate every layer type under every recipe; per layer keep the best recipe and
    convert it if float8 wins on the decision column."""
    tokens = check_tokens(tokens)
    if not configs:
        raise F8RoofError("no recipe to compare")
    if len({c.calibration is None for c in configs}) != 1:
        raise F8RoofError("compare recipes under one calibration (or none), not a mix")
    configs, skipped = _usable(configs)
    criterion = "speedup" if configs[0].calibration is not None else "speedup_worst"
    bf16_col, fp8_col = TIME_COLUMNS[criterion]
    shapes = architecture.shapes(tokens)
    frames = [estimate(shapes, c) for c in configs]
    recipes = tuple(c.recipe.name for c in configs)
    # layers x recipes; a recipe float8 cannot run (K, N misaligned) never wins
    scores = np.stack([f[criterion].to_numpy(dtype=np.float64) for f in frames], axis=1)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    best = scores.argmax(axis=1)
    rows = np.arange(len(shapes))
    chosen = pd.concat([frames[b].iloc[[i]] for i, b in zip(rows, best)], ignore_index=True)
    chosen["recipe"] = chosen["recipe"].astype(str)
    counts = np.array([linear.count for linear in architecture.linears])
    layers = pd.concat(
        [
            pd.DataFrame({"fqn": [linear.fqn for linear in architecture.linears], "count": counts}),
            chosen,
        ],
        axis=1,
    )
    if len(recipes) > 1:
        for name, frame in zip(recipes, frames):
            layers[f"{criterion}_{name}"] = frame[criterion].to_numpy()
    value = layers[criterion].to_numpy(dtype=np.float64)
    convert = layers["fp8_ok"].to_numpy(dtype=bool) & (value > 1.0)
    layers["convert"] = convert
    layers["decision"] = np.where(convert, "convert", "keep bf16")
    # float8 faster by this fraction (negative: slower); none where float8 cannot run at all
    layers["margin"] = np.where(layers["fp8_ok"].to_numpy(dtype=bool), value - 1.0, np.nan)
    layers["note"] = [_note(row, criterion) for row in layers.itertuples(index=False)]
    bf16_s = layers[bf16_col].to_numpy(dtype=np.float64)
    fp8_s = layers[fp8_col].to_numpy(dtype=np.float64)
    layers["bf16_step_s"] = counts * bf16_s
    layers["recommended_step_s"] = counts * np.where(convert, fp8_s, bf16_s)
    layers["saved_step_s"] = layers["bf16_step_s"] - layers["recommended_step_s"]
    totals = _totals(counts, bf16_s, fp8_s, convert)
    recipe_totals = {}
    for name, frame in zip(recipes, frames):
        ok = frame["fp8_ok"].to_numpy(dtype=bool) & (frame[criterion].to_numpy() > 1.0)
        recipe_totals[name] = _totals(
            counts,
            frame[bf16_col].to_numpy(dtype=np.float64),
            frame[fp8_col].to_numpy(dtype=np.float64),
            ok,
        )
    calibration = configs[0].calibration
    return Recommendation(
        architecture=architecture,
        tokens=tokens,
        criterion=criterion,
        recipes=recipes,
        skipped_recipes=tuple(skipped),
        layers=layers,
        totals=totals,
        recipe_totals=recipe_totals,
        gpu=configs[0].gpu.name,
        calibrated_on=calibration.environment.device_name if calibration else "",
    )


def _totals(counts, bf16_s, fp8_s, convert) -> Totals:
    return Totals(
        bf16_s=float((counts * bf16_s).sum()),
        recommended_s=float((counts * np.where(convert, fp8_s, bf16_s)).sum()),
        converted_linears=int(counts[convert].sum()),
        linears=int(counts.sum()),
    )


def _note(row, criterion: str) -> str:
    """Why a decision needs a second look: float8 cannot run it, or only a calibration can tell."""
    if not row.fp8_ok:
        return str(row.fp8_reason)
    value, ideal = getattr(row, criterion), row.speedup_ideal
    if criterion == "speedup_worst" and value <= 1.0 < ideal:
        return f"wins with ideal overhead (x{ideal:.2f}): calibrate to decide"
    return ""


def recommend_model(
    model: str, *, tokens: int, configs: Sequence[EstimateConfig]
) -> Recommendation:
    """`recommend` for a built-in name or a config.json path (the CLI's entry)."""
    return recommend(resolve_model(model), tokens=tokens, configs=configs)


def build_configs(
    *,
    gpu: str = "h100",
    recipes: str = "tensorwise",
    calibration: str | Path | Calibration | None = None,
    use_shipped: bool = True,
) -> tuple[list[EstimateConfig], str]:
    """One EstimateConfig per recipe, and what the estimate uses, in words. Like `f8roof
    estimate`: an explicit calibration, else the shipped one for the GPU if any (unless
    `use_shipped` is false), else the roofline presets."""
    from f8roof.calibrations import choose_calibration
    from f8roof.models.hardware import UnknownGPUError, resolve_gpu

    try:
        gpu_value = resolve_gpu(gpu)
        recipe_values = parse_recipes(recipes)
    except (UnknownGPUError, RecipeError) as e:
        raise F8RoofError(str(e)) from None
    loaded, source = choose_calibration(gpu_value, calibration, use_shipped=use_shipped)
    configs = [EstimateConfig(recipe=r, gpu=gpu_value, calibration=loaded) for r in recipe_values]
    return configs, source


# --- the torchao module filter ------------------------------------------------------------------

# Module names wrappers insert above a model's own (torch.compile, FSDP1, activation
# checkpointing, DDP): a filter built on the bare model still answers for the wrapped one.
WRAPPER_NAMES = frozenset(
    {"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "module"}
)


def canonical_fqn(fqn: str) -> str:
    return ".".join(p for p in fqn.split(".") if p not in WRAPPER_NAMES)


@dataclass(frozen=True, eq=False)
class ModuleFilter:
    """`(module, fqn) -> bool`: True where float8 is recommended. Pass it to torchao's
    `convert_to_float8_training(model, module_filter_fn=...)`."""

    decisions: Mapping[str, bool]  # fqn -> convert, for every nn.Linear of the model walked
    by_layer: Mapping[tuple[str, int, int], bool]  # (layer type, K, N) -> convert
    recommendation: Recommendation

    @property
    def converted(self) -> frozenset[str]:
        return frozenset(fqn for fqn, yes in self.decisions.items() if yes)

    def __call__(self, module, fqn: str) -> bool:
        name = canonical_fqn(fqn)
        if name in self.decisions:
            return self.decisions[name]
        # A linear the walk did not see (layers added since): decide by its layer type and
        # shape; anything unknown stays in bf16.
        K, N = getattr(module, "in_features", None), getattr(module, "out_features", None)
        return self.by_layer.get((layer_type(name), K, N), False)


def module_filter(
    model,
    tokens: int,
    *,
    calibration: str | Path | Calibration | None = None,
    gpu: str = "h100",
    recipe: str = "tensorwise",
) -> ModuleFilter:
    """A filter for torchao's `convert_to_float8_training`: True for the nn.Linear modules of
    `model` that train faster in float8 at `tokens` tokens per step (M = tokens).

    Without a calibration the decision uses the worst-case overhead (conservative); with one
    (a path or a loaded `Calibration`), the calibrated speedup. Assumes every linear sees all
    the step's tokens: a routed MoE expert sees fewer.
    """
    if "," in recipe or recipe.strip() == "all":
        raise F8RoofError(
            "module_filter takes one recipe: torchao converts a model with one Float8LinearConfig"
        )
    configs, _ = build_configs(gpu=gpu, recipes=recipe, calibration=calibration, use_shipped=False)
    model = as_module(model)
    architecture = from_module(model)
    linears = module_linears(model)
    recommendation = recommend(architecture, tokens=tokens, configs=configs)
    verdict = dict(zip(recommendation.layers["fqn"], recommendation.layers["convert"].astype(bool)))
    kinds = group_by_layer_type(linears)
    decisions = {canonical_fqn(fqn): bool(verdict[kind]) for fqn, kind in kinds.items()}
    by_layer = {
        (layer_type(canonical_fqn(fqn)), *linears[fqn]): decisions[canonical_fqn(fqn)]
        for fqn in linears
    }
    return ModuleFilter(decisions=decisions, by_layer=by_layer, recommendation=recommendation)
