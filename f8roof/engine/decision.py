"""Decisions a user can act on: convert or keep, and where the band leaves it open.

A policy picks the value a conversion must win at, by the margin:
- `expected` (the default): the estimate itself; every layer is converted or kept, and those
  whose band straddles the threshold are marked (`straddles`) with the one GPU command that
  settles them (`settle_run`);
- `conservative`: the band's low end; `optimistic`: its high end. Under these two, "keep"
  needs the high end to lose (below 1), and a layer in between is "uncertain" (kept in bf16).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from f8roof.columns import Columns
from f8roof.errors import ModelError

_End = TypeVar("_End")


class DecisionPolicy(str, Enum):
    EXPECTED = "expected"
    CONSERVATIVE = "conservative"
    OPTIMISTIC = "optimistic"

    @classmethod
    def from_name(cls, name: str) -> DecisionPolicy:
        try:
            return cls(name.strip().lower())
        except ValueError:
            known = ", ".join(p.value for p in cls)
            raise ModelError(f"unknown decision policy {name!r}; known: {known}") from None


DEFAULT_POLICY = DecisionPolicy.EXPECTED


class Decision(str, Enum):
    CONVERT = "convert"
    KEEP = "keep"
    UNCERTAIN = "uncertain"


def _check(low: npt.ArrayLike, expected: npt.ArrayLike, high: npt.ArrayLike, margin: float) -> None:
    if margin < 0:
        raise ModelError(f"a decision margin must be >= 0, got {margin}")
    if np.any(np.asarray(low) > np.asarray(expected)) or np.any(
        np.asarray(expected) > np.asarray(high)
    ):
        raise ModelError("a speedup band needs low <= expected <= high")


def policy_end(*, low: _End, expected: _End, high: _End, policy: DecisionPolicy) -> _End:
    """The speedup a conversion must win at under `policy`."""
    return {
        DecisionPolicy.CONSERVATIVE: low,
        DecisionPolicy.EXPECTED: expected,
        DecisionPolicy.OPTIMISTIC: high,
    }[policy]


def decide_codes(
    *,
    low: npt.ArrayLike,
    expected: npt.ArrayLike,
    high: npt.ArrayLike,
    margin: float,
    policy: DecisionPolicy,
) -> np.ndarray:
    """Vectorised: 0 keep, 1 convert, 2 uncertain per shape (index into DECISIONS); the
    expected policy never answers uncertain."""
    low, expected, high = (np.asarray(x, dtype=np.float64) for x in (low, expected, high))
    _check(low, expected, high, margin)
    end = policy_end(low=low, expected=expected, high=high, policy=policy)
    undecided = 0 if policy is DecisionPolicy.EXPECTED else 2
    return np.where(end >= 1.0 + margin, 1, np.where(high < 1.0, 0, undecided)).astype(np.int8)


def straddles(*, low: npt.ArrayLike, high: npt.ArrayLike, margin: float = 0.0) -> np.ndarray:
    """Where the band crosses the threshold 1 + margin: a GPU measurement could flip it."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return (low < 1.0 + margin) & (high >= 1.0 + margin)


DECISIONS = (Decision.KEEP, Decision.CONVERT, Decision.UNCERTAIN)


def frame_band(
    frame: Columns, criterion: str = "speedup"
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(low, expected, high) of a frame's decision column where it has a band (a calibrated
    estimate's `speedup` with `speedup_low`/`speedup_high`, widened to hold the estimate),
    else None: the one place a row's band is read."""
    if criterion != "speedup" or "speedup_low" not in frame:
        return None
    value = np.asarray(frame[criterion], dtype=np.float64)
    low = np.minimum(np.asarray(frame["speedup_low"], dtype=np.float64), value)
    return low, value, np.maximum(np.asarray(frame["speedup_high"], dtype=np.float64), value)


def float8_time_ends(
    frame: Columns, criterion: str = "speedup"
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's float8 time at its band's fast and slow ends (bf16 time over the band's
    high and low speedups), or None where the frame has no band."""
    band = frame_band(frame, criterion)
    if band is None:
        return None
    low, _, high = band
    bf16_s = np.asarray(frame["bf16_s"], dtype=np.float64)
    return bf16_s / high, bf16_s / low


def frame_decisions(
    frame: Columns, *, criterion: str, policy: DecisionPolicy, margin: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of an estimate: the decision code (0 keep, 1 convert, 2 uncertain; keep where
    float8 cannot run the shape) and whether its band straddles 1 + margin. The band decides
    where the frame has one, else the criterion alone (> 1 + margin) and nothing straddles:
    the one decision every shape, layer and step answer rests on."""
    ok = np.asarray(frame["fp8_ok"], dtype=bool)
    band = frame_band(frame, criterion)
    if band is None:
        value = np.asarray(frame[criterion], dtype=np.float64)
        codes = np.where(ok & (value > 1.0 + margin), 1, 0).astype(np.int8)
        return codes, np.zeros(len(frame), dtype=bool)
    low, expected, high = band
    codes = decide_codes(low=low, expected=expected, high=high, margin=margin, policy=policy)
    return np.where(ok, codes, 0).astype(np.int8), ok & straddles(low=low, high=high, margin=margin)


def frame_policy_end(frame: Columns, criterion: str, policy: DecisionPolicy) -> np.ndarray:
    """The speedup `policy` decides on per row: its end of the band, or the criterion where
    the frame has no band."""
    band = frame_band(frame, criterion)
    if band is None:
        return np.asarray(frame[criterion], dtype=np.float64)
    low, expected, high = band
    return policy_end(low=low, expected=expected, high=high, policy=policy)


SETTLE_SHAPES = 6


@dataclass(frozen=True)
class Settle:
    """What settles uncertain answers on a GPU: measure these very shapes (validating against
    a calibration of the same GPU; the first SETTLE_SHAPES of them: a sweep's dozens would not
    be one run) in their contexts ("layernorm+sigmoid", ...), calibrating first when the
    estimate rests on no measurement of that GPU (`calibrated` False). The renderer writes
    it as the command line."""

    recipes: tuple[str, ...]
    shapes: tuple[tuple[int, int, int], ...]
    contexts: tuple[str, ...]  # "none" alone: no context
    implementation: str
    calibrated: bool


def settle_run(
    *,
    recipes: Sequence[str],
    shapes: Sequence[tuple[int, int, int]],
    contexts: Sequence[str] = ("none",),
    implementation: str = "torchao",
    calibrated: bool = False,
) -> Settle:
    """The one GPU run that settles the rows given (their recipes, shapes and contexts)."""
    where = dict.fromkeys(c if "+" in c or c == "none" else f"{c}+none" for c in contexts)
    return Settle(
        recipes=tuple(dict.fromkeys(recipes)),
        shapes=tuple(dict.fromkeys(shapes))[:SETTLE_SHAPES],
        contexts=tuple(where),
        implementation=implementation,
        calibrated=calibrated,
    )
