"""Decisions under each policy: convert at the policy's end, keep when the high end loses."""

import numpy as np
import pytest

from f8roof.engine.decision import (
    Decision,
    DecisionPolicy,
    decide,
    decide_codes,
    settle_command,
)
from f8roof.errors import ModelError

P = DecisionPolicy
# (low, expected, high): a sure win, a straddle, a sure loss, a win only at the high end
BANDS = [(1.2, 1.4, 1.6), (0.8, 1.1, 1.3), (0.5, 0.7, 0.9), (0.9, 0.97, 1.2)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (P.CONSERVATIVE, ["convert", "uncertain", "keep", "uncertain"]),
        (P.EXPECTED, ["convert", "convert", "keep", "uncertain"]),
        (P.OPTIMISTIC, ["convert", "convert", "keep", "convert"]),
    ],
)
def test_each_policy(policy, expected):
    low, mid, high = (np.array(x) for x in zip(*BANDS))
    codes = decide_codes(low=low, expected=mid, high=high, margin=0.05, policy=policy)
    names = [("keep", "convert", "uncertain")[c] for c in codes]
    assert names == expected


def test_margin_moves_convert_to_uncertain():
    verdict = decide(low=1.03, expected=1.2, high=1.4, margin=0.05, settle="cmd")
    assert verdict.decision is Decision.UNCERTAIN  # conservative by default
    verdict = decide(low=1.03, expected=1.2, high=1.4, margin=0.0, settle="cmd")
    assert verdict.decision is Decision.CONVERT


def test_uncertain_names_the_command_that_settles_it():
    command = settle_command(
        recipes=["rowwise"], shapes=[(2048, 2048, 2048)], contexts=["layernorm+sigmoid"]
    )
    verdict = decide(low=0.8, expected=0.95, high=1.2, margin=0.05, settle=command)
    assert verdict.decision is Decision.UNCERTAIN
    assert "f8roof calibrate --device cuda --recipes rowwise" in verdict.reason
    assert "--contexts layernorm+sigmoid" in verdict.reason
    assert "--shape 2048,2048,2048" in verdict.reason
    measured = settle_command(recipes=["rowwise"], shapes=[(1, 2, 3)], calibrated=True)
    assert measured.startswith("f8roof validate") and "calibrate" not in measured
    several = settle_command(
        recipes=["rowwise", "rowwise"],
        shapes=[(16, 32, 48), (16, 32, 64)],
        contexts=["rmsnorm+none", "none"],
    )
    assert "--recipes rowwise " in several and "--contexts rmsnorm+none,none" in several
    assert several.endswith("--shape 16,32,48 --shape 16,32,64")


def test_bad_inputs():
    with pytest.raises(ModelError, match="policy"):
        DecisionPolicy.from_name("bold")
    assert DecisionPolicy.from_name(" Expected ") is P.EXPECTED
    with pytest.raises(ModelError, match="low <= expected"):
        decide(low=1.2, expected=1.0, high=1.4, margin=0.0, settle="")
    with pytest.raises(ModelError, match="margin"):
        decide(low=1.0, expected=1.0, high=1.0, margin=-0.1, settle="")
