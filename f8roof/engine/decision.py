"""Decisions a user can act on: convert or keep, and where the band leaves it open.

A policy picks the value a conversion must win at, by the margin:
- `expected` (the default): the estimate itself; every layer is converted or kept, and those
  whose band straddles the threshold are marked (`straddles`) with the one GPU command that
  settles them (`settle_command`);
- `conservative`: the band's low end; `optimistic`: its high end. Under these two, "keep"
  needs the high end to lose (below 1), and a layer in between is "uncertain" (kept in bf16).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import numpy as np

from f8roof.errors import ModelError


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


def _check(low, expected, high, margin) -> None:
    if margin < 0:
        raise ModelError(f"a decision margin must be >= 0, got {margin}")
    if np.any(np.asarray(low) > np.asarray(expected)) or np.any(
        np.asarray(expected) > np.asarray(high)
    ):
        raise ModelError("a speedup band needs low <= expected <= high")


def policy_end(*, low, expected, high, policy: DecisionPolicy):
    """The speedup a conversion must win at under `policy`."""
    return {
        DecisionPolicy.CONSERVATIVE: low,
        DecisionPolicy.EXPECTED: expected,
        DecisionPolicy.OPTIMISTIC: high,
    }[policy]


def decide_codes(*, low, expected, high, margin: float, policy: DecisionPolicy) -> np.ndarray:
    """Vectorised: 0 keep, 1 convert, 2 uncertain per shape (index into DECISIONS); the
    expected policy never answers uncertain."""
    low, expected, high = (np.asarray(x, dtype=np.float64) for x in (low, expected, high))
    _check(low, expected, high, margin)
    end = policy_end(low=low, expected=expected, high=high, policy=policy)
    undecided = 0 if policy is DecisionPolicy.EXPECTED else 2
    return np.where(end >= 1.0 + margin, 1, np.where(high < 1.0, 0, undecided)).astype(np.int8)


def straddles(*, low, high, margin: float = 0.0) -> np.ndarray:
    """Where the band crosses the threshold 1 + margin: a GPU measurement could flip it."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return (low < 1.0 + margin) & (high >= 1.0 + margin)


DECISIONS = (Decision.KEEP, Decision.CONVERT, Decision.UNCERTAIN)


SETTLE_SHAPES = 6


def settle_command(
    *,
    recipes: Sequence[str],
    shapes: Sequence[tuple[int, int, int]],
    contexts: Sequence[str] = ("none",),
    implementation: str = "torchao",
    calibrated: bool = False,
) -> str:
    """The one GPU command line that settles uncertain answers: measure these very shapes
    (`validate` against a calibration of the same GPU, `gpu.json`; the first SETTLE_SHAPES of
    them: a sweep's dozens would not be one command) in their contexts ("layernorm+sigmoid",
    ...), calibrating first when the estimate rests on the datasheet (`calibrated` False)."""
    names = ",".join(dict.fromkeys(recipes))
    where = list(dict.fromkeys(c if "+" in c or c == "none" else f"{c}+none" for c in contexts))
    context = "" if where == ["none"] else f" --contexts {','.join(where)}"
    first = list(dict.fromkeys(shapes))[:SETTLE_SHAPES]
    shape_flags = "".join(f" --shape {M},{K},{N}" for M, K, N in first)
    validate = (
        f"f8roof validate --calibration gpu.json --out validation --recipes {names} "
        f"--impl {implementation}{context}{shape_flags}"
    )
    if calibrated:
        return validate
    return (
        f"f8roof calibrate --device cuda --recipes {names} --impl {implementation}{context} "
        f"--out gpu.json && {validate}"
    )
