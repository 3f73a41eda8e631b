"""What the plots draw, computed: the speedup over a grid of two dims (the third fixed), the
float8 overhead's share of float8 time along M = K = N (`f8roof plot`), and a plan's step as
stacked bars (`estimate --plot`, `report`). The pictures themselves are renderers/plot.py's; it
draws these records and computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.engine.plan import Arm, Plan
from f8roof.engine.resolve import Provenance, Request, resolve
from f8roof.engine.step.parts import Part, StepSummary
from f8roof.errors import F8RoofError
from f8roof.traffic.variant import FP8_DIM_MULTIPLE
from f8roof.training.memory import MemoryEstimate

DIMS = ("M", "K", "N")
LEVEL_COLUMNS = {"worst": "speedup_worst", "ideal": "speedup_ideal", "fitted": "speedup"}


class GridError(F8RoofError):
    pass


@dataclass(frozen=True, eq=False)
class SpeedupGrid:
    """Speedups at every (x, y) of a log grid: `speedup[i, j]` at y = ys[i], x = xs[j]; the
    dims not on an axis (`rest`) at `fixed`; `column`: the estimate's column at `level`."""

    config: EstimateConfig
    xs: np.ndarray
    ys: np.ndarray
    x_dims: tuple[str, ...]
    y_dims: tuple[str, ...]
    rest: tuple[str, ...]
    fixed: int
    level: str
    column: str
    shapes: np.ndarray  # (cells, 3): M, K, N of each cell, y-major
    speedup: np.ndarray


@dataclass(frozen=True, eq=False)
class OverheadShares:
    """The overhead's share of float8 time per level (worst, ideal, fitted where calibrated)
    at M = K = N = each of `sizes`."""

    config: EstimateConfig
    sizes: np.ndarray
    shares: dict[str, np.ndarray]


def parse_axis(text: str) -> tuple[str, ...]:
    """'M' -> ('M',); 'K=N' -> ('K', 'N'): the dims that take the axis' value."""
    dims = tuple(d.strip().upper() for d in text.split("="))
    if not dims or any(d not in DIMS for d in dims) or len(set(dims)) != len(dims):
        raise GridError(f"bad axis {text!r}: use M, K, N or tied dims such as K=N")
    return dims


def sizes(lo: int, hi: int, points: int) -> np.ndarray:
    """Log-spaced sizes from lo to hi, rounded to multiples of 16 (float8 can run all)."""
    if not 0 < lo < hi:
        raise GridError(f"bad size range {lo}..{hi}: need 0 < min < max")
    raw = np.exp2(np.linspace(np.log2(lo), np.log2(hi), points))
    return np.unique(
        np.maximum(FP8_DIM_MULTIPLE, np.round(raw / FP8_DIM_MULTIPLE) * FP8_DIM_MULTIPLE)
    ).astype(np.int64)


def grid_level(config: EstimateConfig, level: str | None) -> str:
    """The overhead level a grid shows: fitted where calibrated, else the seed's worst case."""
    if level is None:
        return "fitted" if config.calibration is not None else "worst"
    if level not in LEVEL_COLUMNS:
        raise GridError(f"unknown level {level!r}; use worst, ideal or fitted")
    if level == "fitted" and config.calibration is None:
        raise GridError("the fitted level needs a calibration")
    return level


def speedup_grid(
    config: EstimateConfig,
    *,
    x: str = "M",
    y: str = "K=N",
    fixed: int = 8192,
    lo: int = 256,
    hi: int = 65536,
    points: int = 65,
    level: str | None = None,
) -> SpeedupGrid:
    """The estimate at every cell of a points x points log grid from lo to hi."""
    level = grid_level(config, level)
    x_dims, y_dims = parse_axis(x), parse_axis(y)
    if set(x_dims) & set(y_dims):
        raise GridError(f"axes {x} and {y} share a dimension")
    if fixed <= 0:
        raise GridError(f"the fixed dimension must be positive (got {fixed})")
    rest = tuple(d for d in DIMS if d not in x_dims + y_dims)
    xs, ys = sizes(lo, hi, points), sizes(lo, hi, points)
    gx, gy = np.meshgrid(xs, ys)  # rows: y, columns: x
    value = {d: gx.ravel() for d in x_dims} | {d: gy.ravel() for d in y_dims}
    value |= {d: np.full(gx.size, fixed) for d in rest}
    shapes = np.stack([value[d] for d in DIMS], axis=1)
    column = LEVEL_COLUMNS[level]
    speedup = estimate(shapes, config)[column].astype(np.float64).reshape(gx.shape)
    return SpeedupGrid(config, xs, ys, x_dims, y_dims, rest, fixed, level, column, shapes, speedup)


def overhead_shares(
    config: EstimateConfig, *, lo: int = 128, hi: int = 65536, points: int = 41
) -> OverheadShares:
    """Overhead (amax, scale, cast, transpose) over float8 time at M = K = N, per level."""
    xs = sizes(lo, hi, points)
    frame = estimate(np.repeat(xs[:, None], 3, axis=1), config)
    shares = {
        "worst": frame["overhead_s_worst"] / frame["fp8_s_worst"],
        "ideal": frame["overhead_s_ideal"] / frame["fp8_s_ideal"],
    }
    if "overhead_s_fitted" in frame:
        shares["fitted"] = frame["overhead_s_fitted"] / frame["fp8_s"]
    return OverheadShares(config, xs, shares)


def plot_data(
    kind: str,
    request: Request,
    *,
    level: str | None = None,
    x: str = "M",
    y: str = "K=N",
    fixed: int = 8192,
    lo: int = 256,
    hi: int = 65536,
) -> tuple[SpeedupGrid | OverheadShares, Provenance]:
    """`kind` heatmap or overhead for one recipe's request, and what its estimate rests on."""
    resolved = resolve(request, many_recipes=False)
    config = resolved.config
    if kind == "heatmap":
        grid = speedup_grid(config, x=x, y=y, fixed=fixed, lo=lo, hi=hi, level=level)
        return grid, resolved.provenance
    if level is not None:
        raise GridError("a level is for the heatmap; the overhead plot shows every level")
    return overhead_shares(config, lo=lo, hi=hi), resolved.provenance


@dataclass(frozen=True)
class StepBars:
    """One conversion set's step per GPU as the step picture stacks it, in seconds: each part
    in bf16 and float8, the step's own totals, and float8's step at its band's fast and slow
    ends. The parts are the model's; where the bf16 step was measured they are spread over it
    in proportion to their bf16 time, as the expected float8 step spreads the gap
    (engine/step/parts.py's `reconcile`), so that they add up to the step's figures."""

    arm: Arm
    parts: tuple[Part, ...]
    bf16_s: tuple[float, ...]
    fp8_s: tuple[float, ...]
    bf16_total_s: float
    fp8_total_s: float
    fp8_fast_s: float  # float8's step at the band's fast end (speedup_high)
    fp8_slow_s: float  # and at its slow end (speedup_low)
    speedup: float
    speedup_low: float
    speedup_high: float


@dataclass(frozen=True)
class StepPicture:
    """A plan's step, f8roof's choice beside the run as torchtitan converts it, and the peak
    memory per GPU (None: the FSDP degree is unknown). `spread`: the measured bf16 step over
    the modelled one (1 where the step is modelled)."""

    choice: StepBars
    as_run: StepBars
    spread: float
    measured: bool
    memory: MemoryEstimate | None


def step_picture(plan: Plan) -> StepPicture:
    """The bars of a plan's step: the parts either conversion set spends time on, in the
    step's order (a part at zero in both, such as TP's collectives without TP, is left out)."""
    chosen, as_run = plan.step.chosen, plan.step.as_run
    every = dict.fromkeys(c.part for s in (chosen, as_run) for c in s.components)
    parts = tuple(p for p in every if any(_times(s, p) != (0.0, 0.0) for s in (chosen, as_run)))
    return StepPicture(
        _bars(Arm.CHOICE, chosen, parts),
        _bars(Arm.AS_RUN, as_run, parts),
        chosen.bf16_s / chosen.modelled_bf16_s,
        chosen.step_measured,
        None if plan.memory is None else plan.memory.estimate,
    )


def _bars(arm: Arm, summary: StepSummary, parts: tuple[Part, ...]) -> StepBars:
    spread = summary.bf16_s / summary.modelled_bf16_s
    return StepBars(
        arm,
        parts,
        tuple(_times(summary, p)[0] * spread for p in parts),
        tuple(_times(summary, p)[1] * spread for p in parts),
        summary.bf16_s,
        summary.fp8_s,
        summary.bf16_s / summary.speedup_high,
        summary.bf16_s / summary.speedup_low,
        summary.speedup,
        summary.speedup_low,
        summary.speedup_high,
    )


def _times(summary: StepSummary, part: Part) -> tuple[float, float]:
    """A part's bf16 and float8 time in a step (zero where the step has no such part)."""
    found = [(c.bf16_s, c.fp8_s) for c in summary.components if c.part is part]
    return found[0] if found else (0.0, 0.0)
