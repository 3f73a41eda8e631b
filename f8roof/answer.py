"""`f8roof estimate`'s one library call: which question was asked (shapes, or a model at scale),
the option rules that go with each, and the answer as data for renderers/.

Shapes: the estimate at each shape, the breakevens, and the warnings a result no GPU can produce
deserves; `--overhead codegen` adds the exact generated kernels' overhead (the compiling side,
f8roof.compare, imported only then). A model: f8roof.recommend's per-layer decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from f8roof.architectures.training import TrainingSetup
from f8roof.errors import F8RoofError
from f8roof.estimate import breakevens, estimate, implausible
from f8roof.inputs.shapes import collect_shapes
from f8roof.recommend import Recommendation, recommend_model
from f8roof.resolve import Request, Resolved, resolve


@dataclass(frozen=True, eq=False)
class ShapesAnswer:
    resolved: Resolved
    frame: pd.DataFrame
    breakevens: dict[str, int | None]  # level -> smallest winning square size
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class ModelAnswer:
    resolved: Resolved
    recommendation: Recommendation


@dataclass(frozen=True)
class Question:
    """What `estimate` was asked: shapes (given, from a file, or a sweep) or a model."""

    shape_texts: Sequence[str] = ()
    shapes_file: str | None = None
    sweep: str | None = None
    model: str | None = None
    tokens: int | None = None
    overhead: str = "fitted"  # fitted | codegen

    def check(self, request: Request, setup: TrainingSetup) -> None:
        """The rules between options, before any work: one line each."""
        shapes = bool(self.shape_texts or self.shapes_file or self.sweep)
        if self.model or self.tokens is not None:
            if shapes:
                raise F8RoofError("--model replaces --shape, --shapes-file and --sweep: give one")
            if request.before or request.after:
                raise F8RoofError(
                    "--model takes each linear's context from the architecture: "
                    "drop --before/--after"
                )
            if not self.model:
                raise F8RoofError("--tokens goes with --model NAME|config.json")
            if self.tokens is None:
                raise F8RoofError("--model needs --tokens T (tokens per step: M of every linear)")
            if self.overhead == "codegen":
                raise F8RoofError(
                    "--overhead codegen compiles given shapes; with --model the shipped fits "
                    "answer: drop one"
                )
        elif not setup.is_default:
            raise F8RoofError("--tp, --ep, --fsdp, --recompute and --step-ms go with --model")


def answer(
    question: Question,
    request: Request,
    *,
    setup: TrainingSetup,
    progress: Callable | None = None,
) -> ShapesAnswer | ModelAnswer:
    question.check(request, setup)
    resolved = resolve(request, many_recipes=bool(question.model))
    if question.model:
        assert question.tokens is not None
        rec = recommend_model(
            question.model, tokens=question.tokens, resolved=resolved, setup=setup
        )
        return ModelAnswer(resolved, rec)
    return answer_shapes(question, resolved, progress=progress)


def answer_shapes(
    question: Question, resolved: Resolved, *, progress: Callable | None = None
) -> ShapesAnswer:
    shapes = collect_shapes(question.shape_texts, question.shapes_file, question.sweep)
    config = resolved.config
    warnings: list[str] = []
    frame = estimate(shapes, config, ranges=True)
    if question.overhead == "codegen":
        from f8roof.compare import codegen_columns, version_warning

        if config.calibration is not None:
            warnings += version_warning(config.calibration)
        for name, values in codegen_columns(frame, config, progress=progress).items():
            frame[name] = values
    found = breakevens(config)
    return ShapesAnswer(resolved, frame, found, warnings + implausible(frame, config, found))
