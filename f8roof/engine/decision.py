"""Decisions that respect the band: convert, keep, or say it is uncertain and how to settle it.

A policy picks which end of the band a conversion must win at:
- `conservative` (the default for "convert"): the low end, every uncertain kernel against float8;
- `expected`: the expected value;
- `optimistic`: the high end.
Whatever the policy, "keep" needs the high end to lose (below 1): only then is bf16 better even
in float8's best case. Everything between is "uncertain", with the one command that measures
the answer on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


DEFAULT_POLICY = DecisionPolicy.CONSERVATIVE


class Decision(str, Enum):
    CONVERT = "convert"
    KEEP = "keep"
    UNCERTAIN = "uncertain"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str


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
    """Vectorised: 0 keep, 1 convert, 2 uncertain per shape (index into DECISIONS)."""
    low, expected, high = (np.asarray(x, dtype=np.float64) for x in (low, expected, high))
    _check(low, expected, high, margin)
    end = policy_end(low=low, expected=expected, high=high, policy=policy)
    return np.where(end >= 1.0 + margin, 1, np.where(high < 1.0, 0, 2)).astype(np.int8)


DECISIONS = (Decision.KEEP, Decision.CONVERT, Decision.UNCERTAIN)


def settle_command(
    *,
    recipes: Sequence[str],
    shapes: Sequence[tuple[int, int, int]],
    contexts: Sequence[str] = ("none",),
    implementation: str = "torchao",
    calibrated: bool = False,
) -> str:
    """The one GPU command line that settles uncertain answers: measure these very shapes
    (`validate` against a calibration of the same GPU, `gpu.json`) in their contexts
    ("layernorm+sigmoid", ...), calibrating first when the estimate rests on the datasheet
    (`calibrated` False)."""
    names = ",".join(dict.fromkeys(recipes))
    where = list(dict.fromkeys(c if "+" in c or c == "none" else f"{c}+none" for c in contexts))
    context = "" if where == ["none"] else f" --contexts {','.join(where)}"
    shape_flags = "".join(f" --shape {M},{K},{N}" for M, K, N in dict.fromkeys(shapes))
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


def decide(
    *,
    low: float,
    expected: float,
    high: float,
    margin: float,
    policy: DecisionPolicy = DEFAULT_POLICY,
    settle: str,
) -> Verdict:
    """One shape's verdict, with a reason that quotes the band and, when uncertain, `settle`
    (see `settle_command`)."""
    code = int(decide_codes(low=low, expected=expected, high=high, margin=margin, policy=policy))
    band = f"speedup {low:.2f} ({expected:.2f}) {high:.2f}"
    decision = DECISIONS[code]
    if decision is Decision.CONVERT:
        reason = f"{band}: the {policy.value} end wins by {margin:.0%} or more"
    elif decision is Decision.KEEP:
        reason = f"{band}: even the high end loses to bf16"
    else:
        reason = (
            f"{band}: the band straddles the decision ({policy.value} end below "
            f"{1 + margin:.2f}, high end above 1); settle it on a GPU: {settle}"
        )
    return Verdict(decision, reason)
