"""Only renderers write sentences. The library answers with records (rows, the step's
components, `Provenance`, `Note`s) and renderers/notes.py words them: a sentence built anywhere
else drifts from the one the renderer would write, and a script has to parse it back.

Two checks: no module outside renderers/ and cli/ appends a sentence to a list (the way notes,
assumptions and lines used to be built), and the records of real answers hold no sentence."""

import ast
import dataclasses
from enum import Enum
from pathlib import Path

import pandas as pd
import pytest

from f8roof.engine.answer import Question, answer
from f8roof.engine.resolve import Request
from f8roof.notes import Note, Topic
from f8roof.renderers.notes import TEMPLATES, sentence
from f8roof.training.run_config import RunConfig

PACKAGE = Path(__file__).resolve().parents[1] / "f8roof"
WRITERS = ("renderers", "cli")  # the packages whose job is text
SENTENCE_WORDS = 5  # a string of this many words or more is a sentence


def words(node: ast.AST) -> int:
    """Words of literal text in a string expression (an f-string's constant parts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return len(node.value.split())
    if isinstance(node, ast.JoinedStr):
        return sum(len(v.value.split()) for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp):
        return words(node.left) + words(node.right)
    return 0


def appended_sentences(tree: ast.AST) -> list[int]:
    """Lines where a sentence is appended or added to a list: `x.append("...")`,
    `x.extend([...])`, `x += [...]`."""
    found = []
    for node in ast.walk(tree):
        items: list[ast.AST] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("append", "insert") and node.args:
                items = [node.args[-1]]
            elif node.func.attr == "extend" and node.args:
                items = list(getattr(node.args[0], "elts", []))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            items = list(getattr(node.value, "elts", [node.value]))
        found += [node.lineno for item in items if words(item) >= SENTENCE_WORDS]
    return found


LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in WRITERS)


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_library_module_appends_a_sentence(path):
    lines = appended_sentences(ast.parse(path.read_text()))
    assert not lines, f"{path.relative_to(PACKAGE)} builds sentences at lines {lines}"


def test_the_check_finds_the_old_way():
    old = ast.parse(
        'notes.append(f"attention: {ms:.2f} ms per block, the same in both precisions")\n'
        'lines += [f"setup: {a} was left to its default" for a in given]\n'
        "notes.append(note(Topic.ATTENTION, ms=ms))\n"
    )
    assert appended_sentences(old) == [1]  # a comprehension's sentence is no list literal
    assert appended_sentences(ast.parse('x += ["one two three four five six"]')) == [1]


def strings(value, where: str = "answer"):
    """Every (place, string) in a record, walking dataclasses, mappings, sequences and frames;
    a Note's `source` (a citation), an enum member and a categorical column (fixed
    vocabularies) are not walked."""
    if isinstance(value, Enum):
        return  # a fixed vocabulary
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Note):
        yield from strings(dict(value.values), f"{where}.values")
    elif isinstance(value, pd.DataFrame):
        for column in value.columns:
            if value[column].dtype == object:
                yield from ((f"{where}[{column}]", v) for v in value[column] if isinstance(v, str))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, f"{where}[{k}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from strings(v, f"{where}[{i}]")


def records(result):
    """The records an answer is rendered from (the configurations and calibrations it was
    computed with are inputs, not answers)."""
    out = [result.resolved.provenance]
    if hasattr(result, "recommendation"):
        rec = result.recommendation
        out += [rec.layers, rec.totals, result.step, result.torchtitan, rec.setup]
    else:
        out += [result.frame, result.breakevens, result.warnings]
    return out


QUESTIONS = {
    "shapes": (Question(shape_texts=("4096,4096,4096", "1000,1000,1000")), RunConfig()),
    "model": (Question(model="llama3-8b", tokens=8192), RunConfig()),
    "sharded": (
        Question(model="llama3-8b", tokens=16384),
        RunConfig.from_options(tp=2, fsdp=4, recompute="selective", step_ms=1500),
    ),
    "moe": (Question(model="mixtral-8x7b", tokens=8192), RunConfig.from_options(ep=8)),
}


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_answers_hold_no_sentences(name):
    question, run = QUESTIONS[name]
    result = answer(question, Request(gpu="h100"), setup=run)
    found = [
        (where, text)
        for where, text in strings(records(result))
        if len(text.split()) >= SENTENCE_WORDS and not where.endswith("settle")
    ]
    assert not found, found[:3]


def test_every_topic_has_its_sentence():
    assert set(TEMPLATES) == set(Topic)
    values = {"ep": 8, "top_k": 8, "mb": 268.4, "ms": 0.67, "per_layer": 6, "placement": "intra"}
    said = sentence(Note(Topic.EP_ALL_TO_ALL, values))
    assert said.startswith("EP 8: each MoE layer's token dispatch and combine")
