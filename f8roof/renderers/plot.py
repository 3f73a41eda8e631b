"""Pictures of the estimate: speedup heatmaps, overhead shares, validation scatter, layers, a
model's step and memory per GPU, and plan's frontier (every layout's tokens/s against memory).

Every picture of an answer names what its numbers rest on in the answer's own first line
(`notes.provenance_line`: the public fit, the datasheet, or a measured calibration and its
file), and returns what it drew (`Plot.data`) so that tests check it against the answer.

matplotlib (the `plot` extra) is imported inside the functions, so `import f8roof.renderers.plot` costs
nothing and a missing matplotlib is a one-line error. Figures are built with
`matplotlib.figure.Figure` and written by the Agg / SVG canvases directly: no pyplot, so no
global backend switch and nothing left open in a caller's notebook.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from f8roof.device.accuracy import median_abs_error
from f8roof.engine.estimate import EstimateConfig
from f8roof.engine.grid import OverheadShares, SpeedupGrid, StepPicture, step_picture
from f8roof.engine.plan import Arm, Plan
from f8roof.engine.resolve import Provenance
from f8roof.engine.step.parts import Part
from f8roof.engine.step.search import Arm as SearchArm
from f8roof.engine.step.search import Search
from f8roof.errors import F8RoofError
from f8roof.files import atomic_path
from f8roof.renderers.notes import provenance_line
from f8roof.traffic.grouped import GROUPED_RECIPE
from f8roof.training.memory import GIB, MemoryEstimate, Term

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
    data: pd.DataFrame | StepPicture  # what was drawn


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


# characters of a 9-point title line per inch of figure width
TITLE_CHARS_PER_INCH = 13


def titled(main: str, provenance: Provenance, width_in: float) -> str:
    """A title and, under it, what the numbers rest on in the answer's first line's words
    ('using h100 (shipped h100.json): times fitted on ...'), wrapped to the figure."""
    basis = textwrap.fill(
        f"using {provenance_line(provenance)}", int(width_in * TITLE_CHARS_PER_INCH)
    )
    return f"{main}\n{basis}"


def context_text(config: EstimateConfig) -> str:
    """', context rmsnorm+none' for a title: the op around the linear, when there is one."""
    context = config.context
    return "" if context.is_standalone else f", context {context.name}"


def setup_parts(setup) -> list[str]:
    """How a model trains, for a title: TP, PP, CP, EP, FSDP, recompute (`RunConfig`)."""
    parts = [f"TP {setup.tp}"] if setup.tp > 1 else []
    parts += [f"PP {setup.pp}"] if setup.pp > 1 else []
    parts += [f"CP {setup.cp}"] if setup.cp > 1 else []
    parts += [f"EP {setup.ep}"] if setup.ep > 1 else []
    if setup.fsdp_on:
        parts += [f"FSDP {setup.fsdp_degree}" if setup.fsdp_degree else "FSDP"]
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


def heatmap(
    grid: SpeedupGrid, *, out: str | Path, provenance: Provenance, title: str | None = None
) -> Plot:
    """Speedup over two dims (the third fixed), diverging colours centred at 1 and the
    breakeven contour where the speedup crosses 1; `provenance`: what the estimate rests on."""
    path = check_out(out)
    config, level, xs, ys, speedup = grid.config, grid.level, grid.xs, grid.ys, grid.speedup
    fig = _figure(7.0, 5.8)
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
    main = (
        f"float8 {config.recipe.name} vs bf16 on {config.gpu.name}{context_text(config)}"
        f"{fixed_text} ({_level_name(level)} overhead)"
    )
    fig.suptitle(title or titled(main, provenance, 7.0), fontsize=9)
    _save(fig, path)
    shapes = grid.shapes
    data = pd.DataFrame(
        {"M": shapes[:, 0], "K": shapes[:, 1], "N": shapes[:, 2], grid.column: speedup.ravel()}
    )
    return Plot(path, fig, data)


# the worst and ideal levels time bytes (and the seed's few small kernels' launches) at the
# memory bandwidth (engine/estimate.py); the fit times each kernel the generated code launches at
# its class's rate with its arithmetic, so at small sizes it lies above the "worst" case
OVERHEAD_LABELS = {
    "worst": (
        "worst: the seed's byte model at the memory bandwidth; no bound: it leaves out the "
        "launches and arithmetic of the generated kernels, which the fit times, so it lies below "
        "fitted at small sizes"
    ),
    "ideal": "ideal: the fewest bytes, at the memory bandwidth",
    "fitted": "fitted: the generated code's kernels, timed as the title says",
}


def overhead_share(
    shares: OverheadShares, *, out: str | Path, provenance: Provenance, title: str | None = None
) -> Plot:
    """Overhead (amax, scale, cast, transpose) as a share of float8 time at M = K = N = S:
    worst, ideal and (with a calibration) fitted; `provenance`: what the estimate rests on."""
    path = check_out(out)
    config, xs = shares.config, shares.sizes
    fig = _figure(7.0, 5.4)
    ax = fig.add_subplot()
    styles = {"worst": ("tab:red", "-"), "ideal": ("tab:green", "--"), "fitted": ("tab:blue", "-")}
    for level, share in shares.shares.items():
        colour, dash = styles[level]
        ax.plot(
            xs,
            100 * share,
            label=textwrap.fill(OVERHEAD_LABELS[level], 100),
            color=colour,
            linestyle=dash,
            linewidth=2,
        )
    ax.set_xscale("log", base=2)
    _log2_ticks(ax, "x", xs)
    ax.set_ylim(0, 100)
    ax.set_xlabel("M = K = N")
    ax.set_ylabel("overhead, % of float8 linear time")
    ax.grid(True, alpha=0.3)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    main = f"float8 {config.recipe.name} overhead on {config.gpu.name}{context_text(config)}"
    fig.suptitle(title or titled(main, provenance, 7.0), fontsize=9)
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

    if has_seed.any():  # none on a CPU: the seed's roofline needs a GPU datasheet
        ax.scatter(
            measured[has_seed],
            seed[has_seed],
            marker="x",
            color="tab:gray",
            s=28,
            label=f"seed roofline (median |err| "
            f"{_percent(median_abs_error(seed[has_seed], measured[has_seed]))})",
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
            label=f"f8roof {recipe} (median |err| {_percent(median_abs_error(ours[mask], measured[mask]))})",
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


DECISION_COLOURS = {"convert": "tab:blue", "keep": "tab:red", "uncertain": "tab:orange"}
DECISION_LABELS = {
    "convert": "convert to float8",
    "keep": "keep bf16",
    "uncertain": "uncertain: the band straddles 1 (kept in bf16 under this policy)",
}
OTHER_RECIPE = "0.78"  # a recipe's bar where the layer runs another one
# ticks of a speedup axis, right of 1; their reciprocals mirror them left of it
RATIO_TICKS = (1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
RATIO_TICKS_PER_SIDE = 5  # at most, evenly apart in log
# room past the longest bar or band end for its value, as a power of it (log axis)
RATIO_ROOM = 1.4


def _decision_key(decision: str) -> str:
    return "keep" if decision.startswith("keep") else decision


def _ratio_axis(ax, extreme: float) -> None:
    """A log x axis symmetric about 1 out past `extreme` (> 1): x0.5 as far left of 1 as x2
    lies right of it, so a loss reads as far as a win of the same ratio."""
    from matplotlib.ticker import FixedLocator, NullLocator

    reach = max(extreme, 1.1) ** RATIO_ROOM
    ax.set_xscale("log")
    ax.set_xlim(1 / reach, reach)
    right: list[float] = []
    for tick in (t for t in RATIO_TICKS if t <= reach):
        # labels apart: at least a fifth of the side's log range from the last one kept
        if np.log(tick / (right[-1] if right else 1.0)) >= np.log(reach) / RATIO_TICKS_PER_SIDE:
            right.append(tick)
    ticks = sorted([1.0, *right, *(1 / t for t in right)])
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:.2f}".rstrip("0").rstrip("."))
    ax.xaxis.set_minor_locator(NullLocator())


def _layer_label(fqn: str) -> str:
    """`model.layers.*.mlp.up_proj` -> `mlp.up_proj` (torchtitan's `layers.*.attention.wo` ->
    `attention.wo`): the block prefix every row shares."""
    return fqn.removeprefix("model.").removeprefix("layers.*.")


def layer_speedups(
    recommendation, *, out: str | Path, provenance: Provenance, title: str | None = None
) -> Plot:
    """One bar per layer type and recipe from 1 to its speedup at the decision level, on a log
    axis symmetric about 1 (left: float8 slower), coloured by the row's decision, its band an
    error bar, a `*` on rows whose band straddles 1; several recipes: the row's own recipe's
    bar coloured, the others grey. A layer float8 cannot run is marked instead of drawn.
    `Plot.data`: one row per bar drawn."""
    path = check_out(out)
    layers = recommendation.layers
    criterion = recommendation.criterion
    recipes = recommendation.recipes
    columns = [f"{criterion}_{r}" for r in recipes] if len(recipes) > 1 else [criterion]
    band = (f"{criterion}_low", f"{criterion}_high")
    has_band = all(c in layers for c in band)
    straddles = layers["straddles"].to_numpy(dtype=bool)
    decisions = [_decision_key(str(d)) for d in layers["decision"]]
    labels = [
        f"{_layer_label(str(f))} ({k}x{n}) x{c}" + (" *" if s else "")
        for f, k, n, c, s in zip(
            layers["fqn"], layers["K"], layers["N"], layers["count"], straddles
        )
    ]
    n_layers, n_recipes = len(layers), len(columns)
    fig = _figure(8.0, 2.4 + n_layers * (0.25 + 0.12 * n_recipes))
    ax = fig.add_subplot()
    height = 0.8 / n_recipes
    ok = layers["fp8_ok"].to_numpy(dtype=bool)
    # routed experts are torchao's MoE path (rowwise grouped gemms, worst case) whatever the
    # recipe: drawn once, hatched, not under a recipe
    grouped = layers["grouped"].to_numpy(dtype=bool)
    positions = np.arange(n_layers)[::-1]
    fqns, row_recipes = (
        layers["fqn"].astype(str).to_numpy(),
        layers["recipe"].astype(str).to_numpy(),
    )
    # the step's call against the layer's own speedup (engine/plan.py: held_by_step and
    # converted_by_step)
    by_step = np.where(
        layers["converted_by_step"].to_numpy(dtype=bool),
        "step converts",
        np.where(layers["held_by_step"].to_numpy(dtype=bool), "step keeps", ""),
    )
    lows, highs = (
        layers[c].to_numpy(dtype=np.float64) if has_band else np.full(n_layers, np.nan)
        for c in band
    )
    drawn: list[dict[str, Any]] = []
    for j, (column, recipe) in enumerate(zip(columns, recipes)):
        offset = (n_recipes - 1 - 2 * j) * height / 2
        values = layers[column].to_numpy(dtype=np.float64)
        for i in range(n_layers):
            value = float(values[i])
            if not ok[i] or (grouped[i] and j > 0) or not np.isfinite(value):
                continue
            own = n_recipes == 1 or grouped[i] or row_recipes[i] == recipe
            y = positions[i] + (0.0 if grouped[i] else offset)
            low, high = float(lows[i]), float(highs[i])
            with_band = own and has_band and not grouped[i] and high > low
            drawn.append(
                {
                    "fqn": fqns[i],
                    "recipe": GROUPED_RECIPE.name if grouped[i] else recipe,
                    "speedup": value,
                    "low": low if with_band else np.nan,
                    "high": high if with_band else np.nan,
                    "decision": decisions[i] if own else "",
                    "straddles": bool(straddles[i]) and own,
                    "by_step": str(by_step[i]) if own else "",
                    "y": y,
                    "grouped": bool(grouped[i]),
                }
            )
    bars = pd.DataFrame(drawn)
    if len(bars):
        colours = [DECISION_COLOURS[d] if d else OTHER_RECIPE for d in bars["decision"]]
        # bars grow from breakeven: right is a float8 win, left a loss
        ax.barh(
            bars["y"],
            bars["speedup"] - 1.0,
            left=1.0,
            height=height if n_recipes > 1 else 0.7,
            color=colours,
            hatch=["//" if g else "" for g in bars["grouped"]],
            edgecolor="white",
            linewidth=0.5,
        )
        # the estimate itself, in its decision's colour: seen where the bar is too short to
        ax.scatter(bars["speedup"], bars["y"], color=colours, s=14, zorder=3, edgecolor="black")
        banded = bars[bars["low"].notna()]
        ax.errorbar(
            banded["speedup"],
            banded["y"],
            xerr=[banded["speedup"] - banded["low"], banded["high"] - banded["speedup"]],
            fmt="none",
            ecolor="black",
            elinewidth=1,
            capsize=3,
        )
        for row in bars.itertuples():
            right = row.speedup >= 1
            end = row.high if right and row.high == row.high else row.speedup
            if not right and row.low == row.low:
                end = row.low
            name = "" if n_recipes == 1 or row.grouped else f"{row.recipe} "
            ax.annotate(
                f"{name}x{row.speedup:.2f}"
                + (" *" if row.straddles else "")
                + (f", {row.by_step}" if row.by_step else ""),
                (end, row.y),
                xytext=(4 if right else -4, 0),
                textcoords="offset points",
                ha="left" if right else "right",
                va="center",
                fontsize=7,
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
    ends = [*bars["speedup"], *bars["low"].dropna(), *bars["high"].dropna()] if len(bars) else []
    _ratio_axis(ax, max([max(v, 1 / v) for v in ends], default=1.1))
    ax.axvline(1.0, color="black", linewidth=1.2)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_ylim(-0.6, n_layers - 0.4)
    ax.set_xlabel(f"{criterion} = bf16 / float8 time, log scale; above 1: float8 faster")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(
        handles=_layer_legend(bars, n_recipes, has_band),
        loc="outside lower center",
        ncols=1,
        fontsize=8,
        frameon=False,
    )
    arch = recommendation.architecture
    main = f"{arch.name}, {recommendation.tokens} tokens per step, {recommendation.gpu}" + "".join(
        f", {part}" for part in setup_parts(recommendation.setup)
    )
    fig.suptitle(title or titled(main, provenance, 8.0), fontsize=9)
    _save(fig, path)
    return Plot(path, fig, bars)


def _layer_legend(bars: pd.DataFrame, n_recipes: int, has_band: bool) -> list:
    """The decisions drawn, then what marks the bars: the band, `*`, other recipes, experts."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = set(bars["decision"]) if len(bars) else set()
    handles: list = [
        Patch(color=DECISION_COLOURS[d], label=DECISION_LABELS[d])
        for d in DECISION_COLOURS
        if d in shown
    ]
    if has_band and len(bars) and bars["low"].notna().any():
        handles.append(
            Line2D([], [], color="black", marker="|", label="band: the estimate's low to high end")
        )
    if len(bars) and bars["straddles"].any():
        handles.append(Patch(color="none", label="* the band straddles 1: settle it on a GPU"))
    if len(bars) and (bars["by_step"] != "").any():
        handles.append(
            Patch(
                color="none",
                label="step converts / keeps: the whole step's call, not the layer's alone",
            )
        )
    if n_recipes > 1 and "" in shown:
        handles.append(Patch(color=OTHER_RECIPE, label="a recipe this layer does not run"))
    if len(bars) and bars["grouped"].any():
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="black",
                hatch="//",
                label=f"routed experts: torchao MoE, {GROUPED_RECIPE.name} grouped (worst case)",
            )
        )
    return handles


PART_COLOURS = {
    Part.LINEARS: "tab:blue",
    Part.OTHER_COMPUTE: "0.7",
    Part.TP_COMM: "tab:orange",
    Part.FSDP_COMM: "tab:green",
    Part.RECOMPUTE: "tab:purple",
    Part.OUTSIDE: "tab:brown",
    Part.OPTIMIZER: "tab:pink",
    Part.PIPELINE: "tab:olive",
    Part.CP_COMM: "tab:cyan",
    Part.EP_COMM: "gold",
}
TERM_COLOURS = {
    Term.PARAMETERS: "tab:blue",
    Term.GRADIENTS: "tab:cyan",
    Term.OPTIMIZER: "tab:green",
    Term.WEIGHTS_IN_FLIGHT: "tab:olive",
    Term.SAVED_ACTIVATIONS: "tab:purple",
    Term.BLOCK_BACKWARD: "tab:pink",
    Term.LOGITS_LOSS: "tab:brown",
    # what the caching allocator reserves beyond the allocated peak: greys
    Term.ALL_GATHER_POOL: "0.55",
    Term.GRADIENT_POOL: "0.7",
    Term.COMPUTE_CACHE: "0.85",
}
ARM_NAMES = {Arm.CHOICE: "f8roof's choice", Arm.AS_RUN: "as torchtitan converts"}
STEP_X = {Arm.CHOICE: 0.0, Arm.AS_RUN: 2.5}  # bf16 there, float8 one to the right


def step_memory(plan: Plan, *, out: str | Path, title: str | None = None) -> Plot:
    """A model's step per GPU, bf16 beside float8, stacked by part, for f8roof's choice and as
    torchtitan converts, the band on each float8 total; beside it the peak memory per GPU by
    term, bf16 and float8, against the GPU's usable memory (where the FSDP degree is known).
    `Plot.data`: the `StepPicture` drawn (engine/grid.py)."""
    path = check_out(out)
    picture = step_picture(plan)
    width = 11.0 if picture.memory is not None else 7.5
    fig = _figure(width, 6.2)
    if picture.memory is not None:
        grid = fig.add_gridspec(1, 2, width_ratios=(2.3, 1.0))
        step_ax, memory_ax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
        _memory_bars(memory_ax, picture.memory)
    else:
        step_ax = fig.add_subplot()
        fig.supxlabel(
            "peak memory: not modelled for this run (it needs a known FSDP degree, no pipeline "
            "and a model of blocks)",
            fontsize=8,
        )
    _step_bars(step_ax, picture, plan)
    rec = plan.recommendation
    main = (
        f"{rec.architecture.name}, {rec.tokens} tokens per step, {rec.gpu}"
        + "".join(f", {part}" for part in setup_parts(rec.setup))
        + ": the step and its memory per GPU"
    )
    fig.suptitle(title or titled(main, plan.resolved.provenance, width), fontsize=9)
    _save(fig, path)
    return Plot(path, fig, picture)


def _step_bars(ax, picture: StepPicture, plan: Plan) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    top = 0.0
    for bars in (picture.choice, picture.as_run):
        x = STEP_X[bars.arm]
        for dx, times in ((0.0, bars.bf16_s), (1.0, bars.fp8_s)):
            heights = np.array(times) * 1e3
            bottoms = np.concatenate([[0.0], np.cumsum(heights)[:-1]])
            ax.bar(
                np.full(len(heights), x + dx),
                heights,
                bottom=bottoms,
                width=0.8,
                color=[PART_COLOURS[p] for p in bars.parts],
                edgecolor="white",
                linewidth=0.5,
            )
        total, fast, slow = bars.fp8_total_s * 1e3, bars.fp8_fast_s * 1e3, bars.fp8_slow_s * 1e3
        ax.errorbar(
            [x + 1.0],
            [total],
            yerr=[[total - fast], [slow - total]],
            fmt="none",
            ecolor="black",
            elinewidth=1.2,
            capsize=6,
        )
        ax.annotate(
            f"{bars.bf16_total_s * 1e3:.1f} ms",
            (x, bars.bf16_total_s * 1e3),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
        ax.annotate(
            f"{total:.1f} ms\nx{bars.speedup:.3f}\n({bars.speedup_low:.2f}-{bars.speedup_high:.2f})",
            (x + 1.0, max(slow, total)),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
        top = max(top, bars.bf16_total_s * 1e3, slow)
    ax.set_ylim(0, top * 1.25)
    ticks = [x + dx for x in STEP_X.values() for dx in (0.0, 1.0)]
    ax.set_xticks(ticks, ["bf16", "float8"] * len(STEP_X), fontsize=8)
    ax.set_xlim(-0.7, STEP_X[Arm.AS_RUN] + 1.7)
    below = blended_transform_factory(ax.transData, ax.transAxes)
    gathered = ", FSDP2's float8 all-gather" if plan.adds_float8_all_gather else ""
    filters = plan.step.as_run_filters
    as_run = f"all but {', '.join(f or repr(f) for f in filters)}" if filters else "every linear"
    names = {
        Arm.CHOICE: f"{ARM_NAMES[Arm.CHOICE]}\n({plan.step.converted_types} of "
        f"{plan.step.layer_types} layer types{gathered})",
        Arm.AS_RUN: f"{ARM_NAMES[Arm.AS_RUN]}\n({as_run})",
    }
    for arm, x in STEP_X.items():
        ax.text(x + 0.5, -0.07, names[arm], transform=below, ha="center", va="top", fontsize=8)
    ax.set_ylabel("ms per GPU per step")
    ax.grid(True, axis="y", alpha=0.3)
    measured = (
        f"bf16 step measured; the model's parts spread over it (x{picture.spread:.3f})"
        if picture.measured
        else "modelled step (no measured bf16 step)"
    )
    ax.set_title(f"step per GPU, bf16 vs float8: {measured}", fontsize=9)
    handles: list = [Patch(color=PART_COLOURS[p], label=p.value) for p in picture.choice.parts]
    handles.append(
        Line2D([], [], color="black", marker="_", label="float8 band: the step at its ends")
    )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncols=3,
        fontsize=8,
        frameon=False,
    )


def _memory_bars(ax, memory: MemoryEstimate) -> None:
    from matplotlib.patches import Patch

    peaks = (("bf16", memory.bf16), ("float8", memory.fp8))
    terms = [
        t for t in Term if any(peak.bytes_of(t) for _, peak in peaks)
    ]  # the terms either peak holds
    for x, (_, peak) in enumerate(peaks):
        heights = np.array([peak.bytes_of(t) for t in terms], dtype=np.float64) / GIB
        bottoms = np.concatenate([[0.0], np.cumsum(heights)[:-1]])
        ax.bar(
            np.full(len(heights), float(x)),
            heights,
            bottom=bottoms,
            width=0.7,
            color=[TERM_COLOURS[t] for t in terms],
            edgecolor="white",
            linewidth=0.5,
        )
        ax.annotate(
            f"{peak.peak_bytes / GIB:.1f} GiB\n" + textwrap.fill(f"at the {peak.phase.value}", 16),
            (x, peak.peak_bytes / GIB),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
        )
    usable = memory.usable_bytes / GIB
    ax.axhline(usable, color="black", linestyle="--", linewidth=1.2)
    top = max(usable, *(peak.peak_bytes / GIB for _, peak in peaks))
    ax.set_ylim(0, top * 1.3)
    ax.set_xticks([0, 1], [name for name, _ in peaks], fontsize=8)
    ax.set_xlim(-0.7, 1.7)
    ax.set_ylabel("GiB per GPU")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title("peak memory per GPU\nas torchtitan converts", fontsize=9)
    from matplotlib.lines import Line2D

    handles: list = [Patch(color=TERM_COLOURS[t], label=t.value) for t in terms]
    handles.append(
        Line2D(
            [],
            [],
            color="black",
            linestyle="--",
            label=f"usable: {usable:.1f} GiB ({memory.gpu_memory_bytes / GIB:.0f} GiB less "
            f"{memory.runtime_bytes / GIB:.0f} GiB\nfor the CUDA context and NCCL)",
        )
    )
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, frameon=False
    )


def draw(data: SpeedupGrid | OverheadShares, *, out: str | Path, provenance: Provenance) -> Plot:
    """`f8roof plot`'s heatmap or overhead picture of what engine/grid.py computed."""
    if isinstance(data, SpeedupGrid):
        return heatmap(data, out=out, provenance=provenance)
    return overhead_share(data, out=out, provenance=provenance)


# one colour per precision in the frontier (bf16 as the step bars' bf16, float8 beside it)
PRECISION_COLOURS = {SearchArm.BF16: "tab:blue", SearchArm.FLOAT8: "tab:orange"}


def frontier_points(search: Search) -> pd.DataFrame:
    """Every layout the search evaluated, once per precision: tokens/s per GPU, its reserved
    peak per GPU (GiB), whether it fits, and whether it is that precision's best."""
    best = {arm: search.best(arm) for arm in SearchArm if search.fits(arm)}
    rows = [
        {
            "precision": arm.value,
            "peak_gib": point.peak_bytes(arm) / GIB,
            "tokens_per_s": point.tokens_per_s(arm),
            "fits": point.fits(arm),
            "best": point is best.get(arm),
        }
        for arm in SearchArm
        for point in search.points
    ]
    return pd.DataFrame(rows)


def frontier(search: Search, *, out: str | Path) -> Plot:
    """`plan --plot`: every layout evaluated as a dot per precision, tokens/s per GPU against
    its reserved peak per GPU (hollow where it does not fit), each precision's best ringed,
    the GPU's usable memory as a vertical line. `Plot.data`: `frontier_points`."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import StrMethodFormatter

    path = check_out(out)
    data = frontier_points(search)
    fig = _figure(8.0, 5.5)
    ax = fig.add_subplot()
    for arm in SearchArm:
        colour = PRECISION_COLOURS[arm]
        mine = data[data["precision"] == arm.value]
        for fits, face in ((True, colour), (False, "none")):
            part = mine[mine["fits"] == fits]
            ax.scatter(part["peak_gib"], part["tokens_per_s"], s=18, color=colour, facecolors=face)
        top = mine[mine["best"]]
        ax.scatter(
            top["peak_gib"],
            top["tokens_per_s"],
            s=180,
            facecolors="none",
            edgecolors=colour,
            linewidths=2,
        )
    usable = next((p.usable_bytes for p in search.points if p.usable_bytes), None)
    handles: list = [
        Line2D([], [], marker="o", linestyle="", color=PRECISION_COLOURS[arm], label=arm.value)
        for arm in SearchArm
    ]
    handles.append(
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.4",
            markerfacecolor="none",
            label="does not fit",
        )
    )
    handles.append(
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=13,
            color="0.4",
            markerfacecolor="none",
            markeredgewidth=2,
            label="best",
        )
    )
    if usable is not None:
        ax.axvline(usable / GIB, color="black", linestyle="--", linewidth=1.2)
        handles.append(
            Line2D([], [], color="black", linestyle="--", label=f"usable: {usable / GIB:.1f} GiB")
        )
    ax.set_xlabel("reserved peak memory per GPU (GiB)")
    ax.set_ylabel("tokens/s per GPU")
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.suptitle(
        f"{search.model} on {search.gpus} {search.gpu}, seq_len {search.seq_len}: "
        f"{len(search.points)} layouts, tokens/s per GPU against memory per GPU",
        fontsize=9,
    )
    _save(fig, path)
    return Plot(path, fig, data)
