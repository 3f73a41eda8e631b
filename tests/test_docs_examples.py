"""Every example output in README.md and docs/*.md is what its command prints now
(`scripts/docs_examples.py`): one test per example, and one that the markers and the list of
examples agree. Regenerate a drifted one with `PYTHONPATH=. python scripts/docs_examples.py
--only NAME`. The README is a front door: at most 200 lines, its examples at most 120 columns
wide."""

import importlib.util
import sys
from pathlib import Path

import pytest

from f8roof.renderers.answers import WIDTH

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "docs_examples.py"


def _load():
    spec = importlib.util.spec_from_file_location("docs_examples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_examples"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


docs_examples = _load()


def test_every_marker_has_an_example_and_every_example_its_marker():
    assert docs_examples.problems() == []


@pytest.mark.parametrize(
    "example",
    [
        pytest.param(e, id=e.name, marks=[pytest.mark.slow] if e.slow else [])
        for e in docs_examples.EXAMPLES
    ],
)
def test_the_example_in_the_docs_is_what_its_command_prints(example):
    block = docs_examples.markers(docs_examples.ROOT / example.path)[example.name]
    generated = docs_examples.render(example, docs_examples.run(example))
    assert block == generated, (
        f"{example.path}: example {example.name} drifted; regenerate it with "
        f"PYTHONPATH=. python scripts/docs_examples.py --only {example.name}"
    )


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = (docs_examples.ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200


@pytest.mark.parametrize(
    "example",
    [e for e in docs_examples.EXAMPLES if e.path == "README.md"],
    ids=lambda e: e.name,
)
def test_every_line_of_a_readme_example_fits_120_columns(example):
    block = docs_examples.markers(docs_examples.ROOT / "README.md")[example.name]
    wide = [line for line in block.splitlines() if len(line) > WIDTH]
    assert not wide, f"{example.name}: {len(wide)} lines over {WIDTH} columns: {wide[0]}"
