"""What `f8roof plot` draws, computed: the speedup over a grid of two dims (the third fixed) and
the float8 overhead's share of float8 time along M = K = N. The pictures themselves are
renderers/plot.py's; it draws these records and computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.engine.resolve import Provenance, Request, resolve
from f8roof.errors import F8RoofError
from f8roof.traffic.variant import FP8_DIM_MULTIPLE

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
