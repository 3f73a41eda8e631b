"""Which linears of a model should train in float8, and what the step gains.

Layers x recipes -> one row per layer type: the estimate of the best recipe, the decision
(convert or keep bf16) and its margin, and totals weighted by each layer type's count.

The decision column: `speedup` when a calibration is present (the shipped ones by default: the
exact bytes of the code torch.compile generates, datasheet times; or a measured one), else
`speedup_worst` (the seed's worst-case bytes at datasheet rooflines, which is no bound: for
tensorwise torch.compile moves more). A layer float8 gemms cannot run (a dim not a multiple of
16) is never converted, whichever recipe would otherwise look best.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from f8roof.estimate import estimate
from f8roof.resolve import Request, Resolved, resolve

# decision column -> (bf16 time, float8 time) it is the ratio of; both device time
TIME_COLUMNS = {
    "speedup": ("bf16_s", "fp8_s"),
    "speedup_worst": ("bf16_gemm_s", "fp8_s_worst"),
    "speedup_ideal": ("bf16_gemm_s", "fp8_s_ideal"),
}


def criterion_label(criterion: str, calibration: Calibration | None) -> str:
    if criterion == "speedup_worst":
        return (
            "speedup_worst (the seed's worst-case bytes at datasheet rooflines; not a bound: "
            "torch.compile moves more than it for tensorwise)"
        )
    if calibration is not None and not calibration.is_measured:
        return "speedup (exact bytes of the generated code, datasheet times)"
    return "calibrated speedup (measured; fitted overhead, device time)"


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
    calibration: Calibration | None = None

    @property
    def converted_fqns(self) -> tuple[str, ...]:
        return tuple(self.layers.loc[self.layers["convert"], "fqn"])

    @property
    def criterion_label(self) -> str:
        return criterion_label(self.criterion, self.calibration)


def recommend(architecture: Architecture, *, tokens: int, resolved: Resolved) -> Recommendation:
    """Estimate every layer type under every recipe; per layer keep the best recipe float8 can
    run and convert it if float8 wins on the decision column."""
    tokens = check_tokens(tokens)
    configs = resolved.configs
    calibration = resolved.calibration
    criterion = "speedup" if calibration is not None else "speedup_worst"
    bf16_col, fp8_col = TIME_COLUMNS[criterion]
    shapes = architecture.shapes(tokens)
    frames = [estimate(shapes, c) for c in configs]
    recipes = tuple(c.recipe.name for c in configs)
    # layers x recipes; a recipe float8 cannot run at a layer's shape never wins there
    scores = np.stack(
        [
            np.where(f["fp8_ok"].to_numpy(dtype=bool), f[criterion].to_numpy(np.float64), -np.inf)
            for f in frames
        ],
        axis=1,
    )
    best = scores.argmax(axis=1)
    rows = np.arange(len(shapes))
    chosen = pd.concat([frames[b].iloc[[i]] for i, b in zip(rows, best)], ignore_index=True)
    for column in ("recipe", "implementation", "context"):
        chosen[column] = chosen[column].astype(str)
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
    return Recommendation(
        architecture=architecture,
        tokens=tokens,
        criterion=criterion,
        recipes=recipes,
        skipped_recipes=resolved.skipped,
        layers=layers,
        totals=totals,
        recipe_totals=recipe_totals,
        gpu=resolved.gpu.name,
        calibration=calibration,
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


def recommend_model(model: str, *, tokens: int, resolved: Resolved) -> Recommendation:
    """`recommend` for a built-in name or a config.json path (the CLI's entry)."""
    return recommend(resolve_model(model), tokens=tokens, resolved=resolved)


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
    gpu: str | None = None,
    recipe: str = "tensorwise",
    implementation: str | None = None,
) -> ModuleFilter:
    """A filter for torchao's `convert_to_float8_training`: True for the nn.Linear modules of
    `model` that train faster in float8 at `tokens` tokens per step (M = tokens).

    Decides as `f8roof estimate` does: on the given calibration (a path or a loaded
    `Calibration`), else the shipped one for the GPU (the exact bytes of the code torch.compile
    generates, datasheet times). Assumes every linear sees all the step's tokens: a routed MoE
    expert sees fewer.
    """
    if "," in recipe or recipe.strip() == "all":
        raise F8RoofError(
            "module_filter takes one recipe: torchao converts a model with one Float8LinearConfig"
        )
    resolved = resolve(
        Request(gpu=gpu, recipes=recipe, calibration=calibration, implementation=implementation)
    )
    model = as_module(model)
    architecture = from_module(model)
    linears = module_linears(model)
    recommendation = recommend(architecture, tokens=tokens, resolved=resolved)
    verdict = dict(zip(recommendation.layers["fqn"], recommendation.layers["convert"].astype(bool)))
    kinds = group_by_layer_type(linears)
    decisions = {canonical_fqn(fqn): bool(verdict[kind]) for fqn, kind in kinds.items()}
    by_layer = {
        (layer_type(canonical_fqn(fqn)), *linears[fqn]): decisions[canonical_fqn(fqn)]
        for fqn in linears
    }
    return ModuleFilter(decisions=decisions, by_layer=by_layer, recommendation=recommendation)
