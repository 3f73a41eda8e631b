"""Answers do not move unless a model or a shipped file does: the `--out` files of a fixed set
of estimates (`scripts/answer_snapshots.py`) against the recorded ones in tests/data/answers."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import answer_snapshots


@pytest.mark.parametrize("name", sorted(answer_snapshots.CASES))
def test_the_answer_matches_its_snapshot(name):
    recorded = json.loads((answer_snapshots.SNAPSHOTS / f"{name}.json").read_text())
    found = answer_snapshots.answer(answer_snapshots.CASES[name])
    assert answer_snapshots.differences(recorded, found) == []


def test_a_moved_number_is_reported():
    moved = answer_snapshots.differences({"a": [1.0, {"b": 2.0}]}, {"a": [1.0, {"b": 2.5}]})
    assert moved == [".a[1].b: 2.0 -> 2.5"]
