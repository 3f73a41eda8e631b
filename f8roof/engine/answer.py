"""`f8roof estimate`'s one library call: which question was asked (shapes, or a model at scale),
the option rules that go with each, and the answer as data for renderers/.

Shapes: the estimate at each shape, the breakevens, and the warnings a result no GPU can produce
deserves; `--overhead codegen` adds the exact generated kernels' overhead (the compiling side,
f8roof.engine.compare, imported only then). A model: its plan (f8roof.engine.plan: the
per-layer decisions, the conversion sets compared and their steps, the memory, the
torchtitan converter config for the choice); a setup file (`--setup`) asks the same, in
its own words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.decision import DEFAULT_POLICY, DecisionPolicy, Settle, settle_run
from f8roof.engine.estimate import EstimateConfig, breakevens, decisions, estimate, implausible
from f8roof.engine.plan import Asked, Plan, plan_model
from f8roof.engine.recommend import recommend_model
from f8roof.engine.resolve import Request, Resolved, resolve
from f8roof.errors import F8RoofError, term
from f8roof.inputs.shapes import collect_shapes
from f8roof.notes import Note
from f8roof.traffic.variant import Implementation
from f8roof.training.run_config import RunConfig, check_float8_all_gather
from f8roof.training.torchtitan_names import (
    FLOAT8_LAYOUT,
    ConfigLayout,
)

if TYPE_CHECKING:
    import pandas as pd

    from f8roof.engine.compare import Progress


@dataclass(frozen=True, eq=False)
class ShapesAnswer:
    resolved: Resolved
    rows: Columns  # one per shape
    breakevens: dict[str, int | None]  # level -> smallest winning square size
    warnings: list[Note] = field(default_factory=list)
    settle: Settle | None = None  # the GPU run that settles the uncertain rows

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame, for scripts (built on first use: pandas is no part of an
        answer on the terminal)."""
        return self.rows.to_frame()


@dataclass(frozen=True)
class Question:
    """What `estimate` was asked: shapes (given, from a file, or a sweep) or a model."""

    shape_texts: Sequence[str] = ()
    shapes_file: str | None = None
    sweep: str | None = None
    model: str | None = None
    tokens: int | None = None
    overhead: str = "fitted"  # fitted | codegen
    from_setup: bool = False  # asked by a setup file: answer with torchtitan's converter lines
    layout: ConfigLayout = FLOAT8_LAYOUT  # ... spelled as the setup spelled its converter
    policy: str = DEFAULT_POLICY.value  # which end of the band a conversion must win at

    @property
    def asked(self) -> Asked:
        """What the model's plan is asked beside the run."""
        return Asked(self.model, self.overhead, self.layout, self.from_setup)

    def check(self, request: Request, setup: RunConfig) -> None:
        """The rules between options, before any work: one line each."""
        shapes = bool(self.shape_texts or self.shapes_file or self.sweep)
        if self.model or self.tokens is not None:
            if shapes:
                raise F8RoofError(
                    f"{term('model')} replaces {term('shapes')}, {term('shapes_file')} and "
                    f"{term('sweep')}: give one"
                )
            if request.before or request.after:
                raise F8RoofError(
                    f"{term('model')} takes each linear's context from the architecture: "
                    f"drop {term('before')}/{term('after')}"
                )
            if not self.model:
                raise F8RoofError(f"{term('tokens')} goes with {term('model')} NAME|config.json")
            if self.tokens is None:
                raise F8RoofError(
                    f"{term('model')} needs {term('tokens')} T (tokens per step: M of every linear)"
                )
        elif not setup.is_default:
            raise F8RoofError(
                f"{term('tp')}, {term('ep')}, {term('fsdp')}, {term('recompute')}, "
                f"{term('step_ms')} and {term('filter_fqns')} go with {term('model')}"
            )


def answer(
    question: Question,
    request: Request,
    *,
    setup: RunConfig,
    progress: Progress | None = None,
) -> ShapesAnswer | Plan:
    question.check(request, setup)
    resolved = resolve(request, many_recipes=bool(question.model))
    check_float8_all_gather(
        setup.float8_all_gather,
        [c.recipe.name for c in resolved.configs],
        resolved.config.implementation.value,
    )
    if question.model:
        assert question.tokens is not None
        rec = recommend_model(
            question.model,
            tokens=setup.local_tokens(question.tokens),
            resolved=resolved,
            setup=setup,
            policy=DecisionPolicy.from_name(question.policy),
        )
        found = plan_model(rec, resolved, question.asked)
        check_finite(found.recommendation.rows, resolved, grouped_nan=True)
        return found
    return answer_shapes(question, resolved, progress=progress)


def answer_shapes(
    question: Question, resolved: Resolved, *, progress: Progress | None = None
) -> ShapesAnswer:
    shapes = collect_shapes(question.shape_texts, question.shapes_file, question.sweep)
    config = resolved.config
    warnings: list[Note] = []
    rows = estimate(shapes, config, ranges=True)
    if question.overhead == "codegen":
        from f8roof.engine.compare import codegen_columns, version_warning

        if config.calibration is not None:
            warnings += version_warning(config.calibration)
        for name, values in codegen_columns(rows, config, progress=progress).items():
            rows[name] = values
    found = breakevens(config)
    rows["decision"], rows["straddles"] = decisions(
        rows, policy=DecisionPolicy.from_name(question.policy)
    )
    settle = _settle(rows, config)
    check_finite(rows, resolved)
    return ShapesAnswer(resolved, rows, found, warnings + implausible(rows, config, found), settle)


# the times and speedups every row of an estimate has (NaN is allowed elsewhere: a routed
# expert's fitted overhead, the wall clock of a traffic calibration)
_FINITE = ("bf16_gemm_s", "fp8_gemm_s", "bf16_s", "fp8_s", "context_s")


def check_finite(frame: Columns, resolved: Resolved, *, grouped_nan: bool = False) -> None:
    """Refuse, naming the shape and what the numbers rest on, an estimate that is not finite:
    the files are checked on load, so this is a file whose numbers, each in range, still
    describe no device (or a bug); an answer never prints inf or NaN. `grouped_nan`: a model's
    rows, whose routed experts have no fitted overhead (NaN by design)."""
    columns = [
        c
        for c in frame.columns
        if c in _FINITE or c.startswith(("overhead_s_", "fp8_s_", "speedup"))
        if c != "speedup_wall" and not c.startswith("speedup_level")
    ]
    for column in columns:
        values = frame[column].astype(np.float64)
        ok = np.isfinite(values)
        if grouped_nan and "grouped" in frame:
            ok |= frame["grouped"].astype(bool) & np.isnan(values)
        bad = np.flatnonzero(~ok)
        if len(bad):
            row = frame.row(int(bad[0]))
            raise F8RoofError(
                f"the estimate's {column} at {row['M']}x{row['K']}x{row['N']} is {values[bad[0]]}: "
                f"the numbers it rests on ({resolved.provenance.calibration or 'its timing'}) "
                "describe no device"
            )


def _settle(frame: Columns, config: EstimateConfig) -> Settle | None:
    """The run that settles every row whose band straddles the decision, on a GPU; none for
    Transformer Engine's linears, which f8roof cannot calibrate (it compiles torchao's)."""
    rows = frame.take(frame["straddles"].astype(bool))
    if not len(rows) or config.implementation is Implementation.TE:
        return None
    calibration = config.calibration
    return settle_run(
        recipes=(config.recipe.name,),
        shapes=list(zip(rows["M"].tolist(), rows["K"].tolist(), rows["N"].tolist())),
        contexts=(config.context.name,),
        implementation=config.implementation.value,
        calibrated=calibration is not None and calibration.is_measured,
    )


def answer_setup(
    path: str,
    *,
    question: Question,
    setup: RunConfig,
    recipe_given: bool,
    options: Mapping[str, Any],
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
) -> Plan:
    """`estimate --setup FILE`: the model question the file asks, answered; `options` the
    command line's other Request fields (gpu, calibration, ...). A problem with what the file
    says is told in the file's words: its keys, not the options they stand for."""
    from f8roof.training.setup_file import in_setup_terms

    check_setup_options(question, setup, recipe_given=recipe_given)
    gpu = options["gpu"]
    try:
        new_question, new_setup, recipe, gpu = setup_question(
            path,
            question=question,
            setup=setup,
            recipe_given=recipe_given,
            gpu=gpu,
            overrides=overrides,
        )
        request = Request(recipes=recipe, **{**options, "gpu": gpu})
        result = answer(new_question, request, setup=new_setup, progress=progress)
    except F8RoofError as e:  # a ModelError too
        raise F8RoofError(
            in_setup_terms(
                e,
                path,
                step_from_file=setup.step_s is None,
                gpu_from_file=options["gpu"] is None and gpu is not None,
            )
        ) from None
    assert isinstance(result, Plan)
    return result


def check_setup_options(question: Question, setup: RunConfig, *, recipe_given: bool) -> None:
    """What --setup replaces must not be given beside it: one line each."""
    if question.shape_texts or question.shapes_file or question.sweep:
        raise F8RoofError(
            f"{term('setup')} asks about a model: drop {term('shapes')}, {term('shapes_file')} "
            f"and {term('sweep')}"
        )
    if question.model or question.tokens is not None:
        raise F8RoofError(
            f"{term('setup')} names the model and its tokens: drop {term('model')} and "
            f"{term('tokens')}"
        )
    given = setup.fsdp is not None  # --fsdp 1 too: off, but given
    if setup.tp != 1 or setup.ep != 1 or given or setup.recompute.value != "none":
        raise F8RoofError(
            f"{term('setup')} sets the parallelism and checkpointing: drop {term('tp')}, "
            f"{term('ep')}, {term('fsdp')}, {term('recompute')}"
        )
    if setup.async_tp:
        raise F8RoofError(
            f"{term('setup')} sets async TP (enable_async_tensor_parallel): drop {term('async_tp')}"
        )
    if setup.accumulation != 1:
        raise F8RoofError(
            f"{term('setup')} sets gradient accumulation (global_batch_size): drop "
            f"{term('accumulation')}"
        )
    if setup.fuse_qkv:
        raise F8RoofError(
            f"{term('setup')} says the q/k/v layout ([f8roof] fuse_qkv): drop {term('fuse_qkv')}"
        )
    if recipe_given:
        raise F8RoofError(
            f"{term('setup')} sets the recipe ([float8] recipe_name): drop {term('recipe')}"
        )
    if setup.filter_fqns is not None:
        raise F8RoofError(
            f"{term('setup')} sets the filters ([float8] filter_fqns): drop {term('filter_fqns')}"
        )


def setup_question(
    path: str,
    *,
    question: Question,
    setup: RunConfig,
    recipe_given: bool,
    gpu: str | None,
    overrides: Sequence[str] = (),
) -> tuple[Question, RunConfig, str, str | None]:
    """`--setup FILE` -> (the model question, its RunConfig, its recipe, its GPU). The file
    replaces --model, --tokens, --tp, --ep, --fsdp, --recompute and --recipe; --step-ms and
    --gpu on the command line win over the file's [f8roof] section."""
    from f8roof.training.setup_file import read_setup, training_setup

    check_setup_options(question, setup, recipe_given=recipe_given)
    req = read_setup(path, overrides)
    step_ms = None if setup.step_s is None else setup.step_s * 1e3
    new_question = Question(
        model=req.run.model,
        tokens=req.run.tokens,
        overhead=question.overhead,
        from_setup=True,
        layout=req.layout,
        policy=question.policy,
    )
    return new_question, training_setup(req, step_ms=step_ms), req.f8roof_recipe, gpu or req.run.gpu
