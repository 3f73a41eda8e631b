"""Pictures of the estimate: speedup heatmaps, overhead shares, validation scatter, layers.

matplotlib (the `plot` extra) is imported inside the functions, so `import f8roof.renderers.plot` costs
nothing and a missing matplotlib is a one-line error. Figures are built with
`matplotlib.figure.Figure` and written by the Agg / SVG canvases directly: no pyplot, so no
global backend switch and nothing left open in a caller's notebook.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from f8roof.engine.estimate import EstimateConfig
from f8roof.engine.grid import OverheadShares, SpeedupGrid
from f8roof.errors import F8RoofError
from f8roof.files import atomic_path
from f8roof.traffic.grouped import GROUPED_RECIPE

FORMATS = (".png", ".svg")
DPI = 100


def _level_name(level: str) -> str:
    """The worst case is the seed's model (no bound): plots say so."""
    return "worst, the seed's model" if level == "worst" else level


VALIDATION_COLUMNS = (
    "M",
    "K",
    "N",
    "recipe",
    "measured_speedup",
    "predicted_speedup",
    "seed_speedup",
)


class PlotError(F8RoofError):
    pass


@dataclass(frozen=True, eq=False)
class Plot:
    path: Path
    figure: Any  # the matplotlib Figure, for tests and notebooks
    data: pd.DataFrame  # what was drawn


def check_matplotlib() -> None:
    """Plotting needs matplotlib: a PlotError saying so, before anything is drawn."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install 'f8roof[plot]'") from None


def _figure(width_in: float, height_in: float):
    check_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def check_out(out: str | Path) -> Path:
    path = Path(out)
    if path.suffix.lower() not in FORMATS:
        raise PlotError(f"cannot draw {out}: use a .png or .svg file name")
    return path


def _save(figure, path: Path) -> None:
    """Atomically (files.atomic_path), in the format the name's suffix says."""
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=DPI, format=path.suffix.lstrip(".").lower())


def context_text(config: EstimateConfig) -> str:
    """', context rmsnorm+none' for a title: the op around the linear, when there is one."""
    context = config.context
    return "" if context.is_standalone else f", context {context.name}"


def setup_parts(setup) -> list[str]:
    """How a model trains, for a title: TP, EP, FSDP, recompute (`RunConfig`)."""
    parts = [f"TP {setup.tp}"] if setup.tp > 1 else []
    parts += [f"EP {setup.ep}"] if setup.ep > 1 else []
    parts += ["FSDP"] if setup.fsdp else []
    parts += [f"recompute {setup.recompute.value}"] if setup.recompute.value != "none" else []
    return parts


MAX_TICKS = 9  # labelled speedup ticks per axis (up to 5 characters each)
MAX_POW2_TICKS = 12  # labelled powers of 2 per axis ('512', '16k': narrower labels)


def _log2_ticks(ax, axis: str, values: np.ndarray) -> None:
    exps = np.arange(int(np.ceil(np.log2(values.min()))), int(np.floor(np.log2(values.max()))) + 1)
    exps = exps[:: max(1, -(-len(exps) // MAX_POW2_TICKS))]  # every other power of 2 if wide
    ticks = 2.0**exps
    labels = [
        f"{int(t) >> 20}M" if t >= 2**20 else f"{int(t) >> 10}k" if t >= 1024 else str(int(t))
        for t in ticks
    ]
    setter = ax.set_xticks if axis == "x" else ax.set_yticks
    setter(ticks, labels)


BREAKEVEN_WIDTH = 1.6


def _breakeven_handle():
    from matplotlib.lines import Line2D

    return Line2D(
        [],
        [],
        color="black",
        linewidth=BREAKEVEN_WIDTH,
        label="breakeven: speedup 1 (float8 as fast as bf16)",
    )


def _centred_norm(values: np.ndarray):
    """Diverging colours centred at speedup 1: each side scaled to its own extreme."""
    from matplotlib.colors import TwoSlopeNorm

    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    return TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 1.0 - 1e-3), vmax=max(hi, 1.0 + 1e-3))


def heatmap(grid: SpeedupGrid, *, out: str | Path, title: str | None = None) -> Plot:
    """Speedup over two dims (the third fixed), diverging colours centred at 1 and the
    breakeven contour where the speedup crosses 1."""
    path = check_out(out)
    config, level, xs, ys, speedup = grid.config, grid.level, grid.xs, grid.ys, grid.speedup
    fig = _figure(7.0, 5.6)
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(
        xs, ys, speedup, cmap="RdBu", norm=_centred_norm(speedup), shading="nearest"
    )
    bar = fig.colorbar(mesh, ax=ax)
    bar.set_label(f"speedup = bf16 / float8 ({_level_name(level)}); above 1: float8 faster")
    if np.nanmin(speedup) < 1.0 < np.nanmax(speedup):
        # The contour is drawn whole and named in a legend below the axes: an inline label
        # (clabel) cuts a gap in the line as long as its text, most of a short contour.
        ax.contour(xs, ys, speedup, levels=[1.0], colors="black", linewidths=BREAKEVEN_WIDTH)
        bar.ax.axhline(1.0, color="black", linewidth=BREAKEVEN_WIDTH)  # the same line, on the scale
        fig.legend(
            handles=[_breakeven_handle()], loc="outside lower right", fontsize=8, frameon=False
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    _log2_ticks(ax, "x", xs)
    _log2_ticks(ax, "y", ys)
    ax.set_xlabel(" = ".join(grid.x_dims))
    ax.set_ylabel(" = ".join(grid.y_dims))
    fixed_text = f", {' = '.join(grid.rest)} = {grid.fixed}" if grid.rest else ""
    basis = "calibrated" if config.calibration is not None else "roofline presets"
    ax.set_title(
        title
        or f"float8 {config.recipe.name} vs bf16 on {config.gpu.name}{context_text(config)}"
        f"{fixed_text} ({_level_name(level)} overhead, {basis})",
        fontsize=10,
    )
    _save(fig, path)
    shapes = grid.shapes
    data = pd.DataFrame(
        {"M": shapes[:, 0], "K": shapes[:, 1], "N": shapes[:, 2], grid.column: speedup.ravel()}
    )
    return Plot(path, fig, data)


OVERHEAD_LABELS = {
    "worst": "worst (seed model)",
    "ideal": "ideal (fewest bytes)",
    "fitted": "fitted (calibrated)",
}


def overhead_share(shares: OverheadShares, *, out: str | Path, title: str | None = None) -> Plot:
    """Overhead (amax, scale, cast, transpose) as a share of float8 time at M = K = N = S:
    worst, ideal and (with a calibration) fitted."""
    path = check_out(out)
    config, xs = shares.config, shares.sizes
    fig = _figure(7.0, 4.6)
    ax = fig.add_subplot()
    styles = {"worst": ("tab:red", "-"), "ideal": ("tab:green", "--"), "fitted": ("tab:blue", "-")}
    for level, share in shares.shares.items():
        colour, dash = styles[level]
        ax.plot(
            xs, 100 * share, label=OVERHEAD_LABELS[level], color=colour, linestyle=dash, linewidth=2
        )
    ax.set_xscale("log", base=2)
    _log2_ticks(ax, "x", xs)
    ax.set_ylim(0, 100)
    ax.set_xlabel("M = K = N")
    ax.set_ylabel("overhead, % of float8 linear time")
    ax.grid(True, alpha=0.3)
    ax.legend()
    basis = "calibrated" if config.calibration is not None else "roofline presets"
    ax.set_title(
        title
        or f"float8 {config.recipe.name} overhead on {config.gpu.name}{context_text(config)} "
        f"({basis})",
        fontsize=10,
    )
    _save(fig, path)
    data = pd.DataFrame({"size": xs} | dict(shares.shares))
    return Plot(path, fig, data)


def read_validation(path: str | Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise PlotError(f"cannot read validation report {path}: {e}") from None
    missing = [c for c in VALIDATION_COLUMNS if c not in frame.columns]
    if missing:
        raise PlotError(f"validation report {path} lacks column(s) {', '.join(missing)}")
    speedups = frame[["measured_speedup", "predicted_speedup"]]
    if len(frame) == 0 or not (speedups.apply(pd.to_numeric, errors="coerce") > 0).all().all():
        raise PlotError(f"validation report {path}: speedups must be positive numbers")
    # the seed's method needs a GPU's datasheet: a CPU validation leaves its column empty
    seed = pd.to_numeric(frame["seed_speedup"], errors="coerce")
    if not ((seed > 0) | frame["seed_speedup"].isna()).all():
        raise PlotError(f"validation report {path}: seed_speedup must be positive or empty")
    return frame.assign(seed_speedup=seed)


# A log axis when the speedups span more than this ratio; a linear one below it, where a log
# axis has almost no decades to put ticks on and its ticks crowd or vanish.
LOG_RANGE = 10.0
# Tick candidates per decade on a log axis, densest first: the densest that fits MAX_TICKS wins.
LOG_SUBS = ((1, 2, 5), (1, 3), (1,))


def _log_ticks(lo: float, hi: float) -> list[float]:
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    for subs in LOG_SUBS:
        ticks = [
            s * 10.0**e for e in range(first, last + 1) for s in subs if lo <= s * 10.0**e <= hi
        ]
        if len(ticks) <= MAX_TICKS:
            return ticks
    decades = [10.0**e for e in range(first, last + 1) if lo <= 10.0**e <= hi]
    return decades[:: -(-len(decades) // MAX_TICKS)]


def _speedup_axes(ax, lo: float, hi: float) -> None:
    """Both axes lo..hi with a few plain-number ticks: log (1, 2, 5 per decade, thinned) over a
    wide range, else linear at round steps (matplotlib's MaxNLocator)."""
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullFormatter, NullLocator

    wide = hi / lo > LOG_RANGE
    if wide:
        ax.set_xscale("log")
        ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        if wide:
            axis.set_major_locator(FixedLocator(_log_ticks(lo, hi)))
            axis.set_major_formatter(lambda value, _: f"{value:g}")
            axis.set_minor_formatter(NullFormatter())
        else:
            axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
            axis.set_minor_locator(NullLocator())
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)


def _percent(share: float) -> str:
    return f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


def validation_scatter(
    report: str | Path | pd.DataFrame,
    *,
    out: str | Path,
    band: float = 0.10,
    title: str | None = None,
) -> Plot:
    """Predicted vs measured speedup (ours and the seed's), the y = x line, a +-band error
    band, and the quadrants where a prediction would make the wrong call shaded. The legend
    sits below the axes, so it never hides a point."""
    path = check_out(out)
    frame = report if isinstance(report, pd.DataFrame) else read_validation(report)
    measured = frame["measured_speedup"].to_numpy(dtype=np.float64)
    ours = frame["predicted_speedup"].to_numpy(dtype=np.float64)
    seed = frame["seed_speedup"].to_numpy(dtype=np.float64)
    has_seed = np.isfinite(seed)
    every = np.concatenate([measured, ours, seed[has_seed]])
    wide = every.max() / every.min() > LOG_RANGE
    if wide:
        lo, hi = every.min() / 1.15, every.max() * 1.15
    else:  # linear: a margin of 5% of the range each side (at least 0.01)
        margin = max(0.05 * (every.max() - every.min()), 0.01)
        lo, hi = max(every.min() - margin, every.min() / 2), every.max() + margin
    fig = _figure(6.4, 6.0)
    ax = fig.add_subplot()
    line = np.geomspace(lo, hi, 100)
    ax.fill_between(
        line, line * (1 - band), line * (1 + band), color="0.85", label=f"+-{band:.0%} error band"
    )
    ax.plot(line, line, color="black", linewidth=1, label="y = x")
    # the two quadrants where the prediction picks the wrong side of breakeven
    if lo < 1 < hi:
        ax.fill_between([lo, 1], 1, hi, color="tab:red", alpha=0.07, linewidth=0)
        ax.fill_between(
            [1, hi],
            lo,
            1,
            color="tab:red",
            alpha=0.07,
            linewidth=0,
            label="wrong call (other side of 1)",
        )
        ax.axhline(1, color="0.5", linewidth=0.6)
        ax.axvline(1, color="0.5", linewidth=0.6)

    def mape(pred, truth):
        return float(np.median(np.abs(pred - truth) / truth))

    if has_seed.any():  # none on a CPU: the seed's roofline needs a GPU datasheet
        ax.scatter(
            measured[has_seed],
            seed[has_seed],
            marker="x",
            color="tab:gray",
            s=28,
            label=f"seed roofline (median |err| "
            f"{_percent(mape(seed[has_seed], measured[has_seed]))})",
        )
    recipes = list(dict.fromkeys(frame["recipe"].astype(str)))
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    for index, recipe in enumerate(recipes):
        mask = frame["recipe"].astype(str).to_numpy() == recipe
        ax.scatter(
            measured[mask],
            ours[mask],
            color=colours[index % len(colours)],
            s=30,
            edgecolor="black",
            linewidth=0.4,
            label=f"f8roof {recipe} (median |err| {_percent(mape(ours[mask], measured[mask]))})",
        )
    _speedup_axes(ax, lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured speedup (bf16 / float8)")
    ax.set_ylabel("predicted speedup")
    ax.grid(True, alpha=0.25)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    contexts = sorted(set(frame["context"].astype(str))) if "context" in frame.columns else ["none"]
    where = "" if contexts == ["none"] else f", context {', '.join(contexts)}"
    ax.set_title(title or f"predicted vs measured, {len(frame)} shapes{where}")
    _save(fig, path)
    return Plot(path, fig, frame)


def layer_speedups(recommendation, *, out: str | Path, title: str | None = None) -> Plot:
    """One bar per layer type and recipe (the decision column), breakeven at 1; a layer float8
    cannot run is marked instead of drawn."""
    path = check_out(out)
    layers = recommendation.layers
    criterion = recommendation.criterion
    recipes = recommendation.recipes
    columns = [f"{criterion}_{r}" for r in recipes] if len(recipes) > 1 else [criterion]
    labels = [
        f"{f} ({k}x{n}) x{c}"
        for f, k, n, c in zip(layers["fqn"], layers["K"], layers["N"], layers["count"])
    ]
    n_layers, n_recipes = len(layers), len(columns)
    fig = _figure(8.0, 1.6 + n_layers * (0.25 + 0.12 * n_recipes))
    ax = fig.add_subplot()
    height = 0.8 / n_recipes
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    ok = layers["fp8_ok"].to_numpy(dtype=bool)
    # routed experts are torchao's MoE path (rowwise grouped gemms, worst case) whatever the
    # recipe: drawn once, under their own label, not under a recipe's
    grouped = layers["grouped"].to_numpy(dtype=bool)
    positions = np.arange(n_layers)[::-1]
    if grouped.any():
        values = np.where(ok & grouped, layers[columns[0]].to_numpy(dtype=np.float64), np.nan)
        ax.barh(
            positions,
            values - 1.0,
            left=1.0,
            height=height,
            color="tab:gray",
            label=f"routed experts: torchao MoE, {GROUPED_RECIPE.name} grouped (worst case)",
        )
    for j, (column, recipe) in enumerate(zip(columns, recipes)):
        values = np.where(ok & ~grouped, layers[column].to_numpy(dtype=np.float64), np.nan)
        # bars grow from breakeven: right is a float8 win, left a loss
        ax.barh(
            positions + (n_recipes - 1 - 2 * j) * height / 2,
            values - 1.0,
            left=1.0,
            height=height,
            color=colours[j % len(colours)],
            label=recipe,
        )
    for pos, good, reason in zip(positions, ok, layers["fp8_reason"]):
        if not good:
            ax.text(
                1.0,
                pos,
                f"  bf16 only: {reason}",
                va="center",
                fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
            )
    ax.axvline(1.0, color="black", linewidth=1.2)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_ylim(-0.6, n_layers - 0.4)
    ax.set_xlabel(f"{criterion} (bf16 / float8); right of 1: float8 faster")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncols=min(n_recipes, 3), fontsize=8)
    arch = recommendation.architecture
    ax.set_title(
        title
        or f"{arch.name}, {recommendation.tokens} tokens per step, {recommendation.gpu}"
        + "".join(f", {part}" for part in setup_parts(recommendation.setup)),
        fontsize=10,
    )
    _save(fig, path)
    return Plot(path, fig, layers[["fqn", *columns]])


def draw(data: SpeedupGrid | OverheadShares, *, out: str | Path) -> Plot:
    """`f8roof plot`'s heatmap or overhead picture of what engine/grid.py computed."""
    if isinstance(data, SpeedupGrid):
        return heatmap(data, out=out)
    return overhead_share(data, out=out)
