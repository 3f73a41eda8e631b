"""Decisions under each policy: the expected policy converts or keeps and marks a straddling
band; the conservative and optimistic ones convert at their end and keep when the high end
loses, leaving the rest uncertain."""

import numpy as np
import pytest

from f8roof.engine.decision import (
    DEFAULT_POLICY,
    DecisionPolicy,
    decide_codes,
    settle_run,
    straddles,
)
from f8roof.errors import ModelError
from f8roof.renderers.cells import settle_text

P = DecisionPolicy
# (low, expected, high): a sure win, a straddle, a sure loss, a win only at the high end
BANDS = [(1.2, 1.4, 1.6), (0.8, 1.1, 1.3), (0.5, 0.7, 0.9), (0.9, 0.97, 1.2)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (P.CONSERVATIVE, ["convert", "uncertain", "keep", "uncertain"]),
        (P.EXPECTED, ["convert", "convert", "keep", "keep"]),
        (P.OPTIMISTIC, ["convert", "convert", "keep", "convert"]),
    ],
)
def test_each_policy(policy, expected):
    low, mid, high = (np.array(x) for x in zip(*BANDS))
    codes = decide_codes(low=low, expected=mid, high=high, margin=0.05, policy=policy)
    names = [("keep", "convert", "uncertain")[c] for c in codes]
    assert names == expected


def test_the_default_decides_by_the_estimate_and_marks_a_straddling_band():
    assert DEFAULT_POLICY is P.EXPECTED
    low, _mid, high = (np.array(x) for x in zip(*BANDS))
    assert straddles(low=low, high=high).tolist() == [False, True, False, True]
    # the threshold moves with the margin: 1.2-1.6 straddles 1.3
    assert straddles(low=low, high=high, margin=0.3).tolist() == [True, True, False, False]


def test_a_margin_moves_the_threshold():
    one = {"low": 1.03, "expected": 1.2, "high": 1.4}
    assert decide_codes(**one, margin=0.05, policy=P.CONSERVATIVE) == 2
    assert decide_codes(**one, margin=0.0, policy=P.CONSERVATIVE) == 1
    assert decide_codes(**one, margin=0.25, policy=P.EXPECTED) == 0


def test_the_settle_run_measures_those_shapes():
    run = settle_run(
        recipes=["rowwise"], shapes=[(2048, 2048, 2048)], contexts=["layernorm+sigmoid"]
    )
    assert run.recipes == ("rowwise",) and run.shapes == ((2048, 2048, 2048),)
    command = settle_text(run)
    assert "f8roof calibrate --device cuda --recipes rowwise" in command
    assert "--contexts layernorm+sigmoid" in command
    assert "--shape 2048,2048,2048" in command
    measured = settle_text(settle_run(recipes=["rowwise"], shapes=[(1, 2, 3)], calibrated=True))
    assert measured.startswith("f8roof validate") and "calibrate" not in measured
    several = settle_run(
        recipes=["rowwise", "rowwise"],
        shapes=[(16, 32, 48), (16, 32, 64)],
        contexts=["rmsnorm+none", "none"],
    )
    assert several.recipes == ("rowwise",) and several.contexts == ("rmsnorm+none", "none")
    text = settle_text(several)
    assert "--recipes rowwise " in text and "--contexts rmsnorm+none,none" in text
    assert text.endswith("--shape 16,32,48 --shape 16,32,64")
    # at most SETTLE_SHAPES shapes: one run, not a sweep's dozens
    many = settle_run(recipes=["rowwise"], shapes=[(16, 16, 16 * i) for i in range(1, 20)])
    assert len(many.shapes) == 6


def test_bad_inputs():
    with pytest.raises(ModelError, match="policy"):
        DecisionPolicy.from_name("bold")
    assert DecisionPolicy.from_name(" Expected ") is P.EXPECTED
    with pytest.raises(ModelError, match="low <= expected"):
        decide_codes(low=1.2, expected=1.0, high=1.4, margin=0.0, policy=P.EXPECTED)
    with pytest.raises(ModelError, match="margin"):
        decide_codes(low=1.0, expected=1.0, high=1.0, margin=-0.1, policy=P.EXPECTED)
