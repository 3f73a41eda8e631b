"""`f8roof estimate`'s one library call: which question was asked (shapes, or a model at scale),
the option rules that go with each, and the answer as data for renderers/.

Shapes: the estimate at each shape, the breakevens, and the warnings a result no GPU can produce
deserves; `--overhead codegen` adds the exact generated kernels' overhead (the compiling side,
f8roof.engine.compare, imported only then). A model: f8roof.engine.recommend's per-layer decisions and the step summary (f8roof.engine.step_summary:
communication, recompute, the step speedup); from a setup file (`--setup`), also the
torchtitan `filter_fqns` and converter lines for those decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.decision import DEFAULT_POLICY, DecisionPolicy, Settle, settle_run
from f8roof.engine.estimate import EstimateConfig, breakevens, decisions, estimate, implausible
from f8roof.engine.recommend import Recommendation, recommend_alone, recommend_model
from f8roof.engine.resolve import Request, Resolved, resolve
from f8roof.engine.sharded import (
    BlockComparison,
    NoBlock,
    compiled_block,
    no_block,
    shipped_bf16_block,
    shipped_block,
)
from f8roof.engine.step_summary import (
    DEFAULT_FILTER,
    StepAnswer,
    kept_by_setup,
    step_decides,
    summarize_step,
)
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.inputs.shapes import collect_shapes
from f8roof.notes import Note, Topic, note
from f8roof.traffic.recipes import NVFP4, canonical_name
from f8roof.training.checkpointing import Recompute
from f8roof.training.memory import (
    GIB,
    RUNTIME_BYTES,
    Headroom,
    MemoryEstimate,
    fitting_fsdp,
    headroom,
    memory_estimate,
)
from f8roof.training.run_config import RunConfig, check_float8_all_gather
from f8roof.training.step import StepSummary
from f8roof.training.torchtitan_names import (
    FLOAT8_LAYOUT,
    NVFP4_CONVERTER,
    RECIPES,
    ConfigLayout,
    filter_fqns_for,
    filtered,
    layer_type,
    nvfp4_fqns,
    to_torchtitan_fqn,
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
class TorchtitanConfig:
    """What to tell torchtitan to train with f8roof's decisions: its float8 recipe (None: it
    has none for f8roof's choice), the filter_fqns keeping the rest in bf16."""

    recipe: str | None
    filter_fqns: tuple[str, ...]
    float8_all_gather: bool = False
    wanted: str = ""  # f8roof's recipe, where torchtitan has none for it
    converts: bool = True  # False: the filters keep every linear, so train without float8
    # the converter's section: [float8] (2024-25) or [quantize.linear.float8], as the setup
    # wrote it; [quantize.linear.mx] for MX; NVFP4LinearConverter (a Python config) for NVFP4
    section: str = "float8"
    # NVFP4LinearConverter's include list (`fqns`): the linears it converts
    fqns: tuple[str, ...] = ()
    switch: bool = False  # float8 on by [float8] enable_float8_linear (ConfigLayout)
    filters: bool = True  # torchtitan has filter_fqns (ConfigLayout)


@dataclass(frozen=True)
class FittingSpeedup:
    """float8 at the cheapest recompute mode it fits with, against bf16 at its own: both steps
    modelled (no measured step: it belongs to the run's own mode), as torchtitan converts."""

    bf16_recompute: Recompute
    fp8_recompute: Recompute
    bf16_s: float  # bf16's step at its mode
    fp8_s: float  # float8's step at its mode
    like_for_like: float  # the speedup at the run's own mode, modelled the same way

    def __post_init__(self) -> None:
        if not (self.bf16_s > 0 and self.fp8_s > 0 and self.like_for_like > 0):
            raise F8RoofError("a fitting speedup needs positive step times")

    @property
    def speedup(self) -> float:
        return self.bf16_s / self.fp8_s


@dataclass(frozen=True)
class MemoryAnswer:
    """Peak memory per GPU as torchtitan converts the run (training/memory.py), what fits in
    the GPU's memory, the speedup where float8 fits a cheaper recompute mode, and the
    assumptions behind them."""

    estimate: MemoryEstimate
    headroom: Headroom
    notes: tuple[Note, ...] = ()
    fitting: FittingSpeedup | None = None
    measured: bool = False  # the bf16 step was measured (--step-ms): the run ran, so it fits
    # bf16 fits no recompute mode: the smallest FSDP degree (and the mode) at which it would
    fsdp_fits: tuple[int, Recompute] | None = None


@dataclass(frozen=True)
class Plan:
    """One candidate when several recipes are asked: a recipe for every converted linear, or
    (`recipe` None) each linear its own best recipe."""

    recipe: str | None
    speedup: float


@dataclass(frozen=True, eq=False)
class ModelAnswer:
    resolved: Resolved
    recommendation: Recommendation
    step: StepAnswer
    torchtitan: TorchtitanConfig | None = None  # asked by a setup file (--setup)
    block: BlockComparison | None = None  # the sharded block its blocks were timed from
    # the step as torchtitan converts it with FSDP2's float8 all-gather (and precomputed
    # scales), where the run is tensorwise over a known FSDP degree and gathers in bf16
    float8_all_gather: StepSummary | None = None
    memory: MemoryAnswer | None = None  # None: the FSDP degree is unknown
    # several recipes asked: each plan's step speedup with f8roof's choice, the answer's first
    plans: tuple[Plan, ...] = ()

    @property
    def summary(self) -> StepSummary:
        """The step as torchtitan converts it: what published runs measure."""
        return self.step.as_run


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
) -> ShapesAnswer | ModelAnswer:
    question.check(request, setup)
    resolved = resolve(request, many_recipes=bool(question.model))
    check_float8_all_gather(setup.float8_all_gather, [c.recipe.name for c in resolved.configs])
    if question.model:
        assert question.tokens is not None
        rec = recommend_model(
            question.model,
            tokens=setup.local_tokens(question.tokens),
            resolved=resolved,
            setup=setup,
            policy=DecisionPolicy.from_name(question.policy),
        )
        rec, step, block, plans = best_plan(question, rec, resolved)
        check_finite(rec.rows, resolved, grouped_nan=True)
        memory = memory_answer(rec, resolved)
        if memory is not None and memory.headroom.cheaper_recompute:
            fitting = fitting_speedup(question, resolved, rec, memory.headroom)
            memory = replace(memory, fitting=fitting)
        config = torchtitan_config(rec, layout=question.layout) if question.from_setup else None
        gathered = with_float8_all_gather(question, rec, resolved)
        return ModelAnswer(
            resolved,
            rec,
            step,
            config,
            block,
            float8_all_gather=gathered,
            memory=memory,
            plans=plans,
        )
    return answer_shapes(question, resolved, progress=progress)


def with_float8_all_gather(
    question: Question, rec: Recommendation, resolved: Resolved
) -> StepSummary | None:
    """The step as torchtitan converts it had the run gathered its float8 weights in float8
    (torchao's FSDP2 float8 all-gather, tensorwise only): the same answer with that switch
    and precomputed scales, its block from the graphs that gather them; None where it does
    not apply (no FSDP degree, already on, not tensorwise)."""
    setup = rec.setup
    if setup.float8_all_gather or setup.fsdp_ranks < 2 or _block_recipes(rec) != ["tensorwise"]:
        return None
    gathered = replace(rec, setup=replace(setup, float8_all_gather=True, precompute_scales=True))
    return model_step(question, gathered, resolved)[0].as_run


def memory_answer(rec: Recommendation, resolved: Resolved) -> MemoryAnswer | None:
    """Peak memory per GPU with the linears float8 converts as torchtitan does (every one but
    the filter_fqns: what published runs measure), and what fits; None where the FSDP degree
    is unknown. A run that does not fit in bf16 is answered, whichever front end stated its
    layout, and said so with what would fit: the cheapest recompute mode (`headroom`), else
    the smallest FSDP degree (`fitting_fsdp`); with a measured bf16 step the run ran, so the
    memory model is what overstates it (said)."""
    run = rec.setup
    if (run.fsdp and run.fsdp_degree is None) or run.pipeline is not None:
        return None  # a pipeline's in-flight microbatches: not modelled yet
    gpu = resolved.config.gpu
    filters = run.filter_fqns if run.filter_fqns is not None else DEFAULT_FILTER
    rows = rec.rows
    # memory is modelled per layer type (a mean block): a type filters split counts as
    # converted by its larger part
    larger: dict[str, tuple[int, bool]] = {}
    for fqn, count, grouped in zip(rows["fqn"], rows["count"], rows["grouped"]):
        converts = not filtered(fqn, filters, count=count) and (
            not grouped or any(m in fqn for m in run.moe_fqns)
        )
        larger[layer_type(fqn)] = max(larger.get(layer_type(fqn), (0, False)), (count, converts))
    converted = [fqn for fqn, (_, converts) in larger.items() if converts]
    recipe = rec.best_recipe

    def estimate_at(at: RunConfig, tokens: int) -> MemoryEstimate:
        return memory_estimate(
            rec.architecture,
            tokens=tokens,
            run=at,
            recipe=recipe,
            converted=converted,
            gpu_memory_bytes=gpu.memory_bytes,
        )

    try:
        found = estimate_at(run, rec.tokens)
        room = headroom(estimate_at, run, tokens=rec.tokens)
    except ModelError as e:
        raise F8RoofError(e.marked) from None
    measured = run.step_s is not None
    wider = None
    if not found.bf16_fits and room.bf16_recompute is None:
        wider = fitting_fsdp(estimate_at, run, tokens=rec.tokens)
    assumed = note(
        Topic.MEMORY_ASSUMED,
        runtime_gib=RUNTIME_BYTES / GIB,
        source=(
            "torchtitan@fcdbe91c1 run_train.sh (expandable_segments:True), "
            "components/metrics.py (reserved_bytes.all.peak, GiB)"
        ),
    )
    return MemoryAnswer(found, room, (assumed,), measured=measured, fsdp_fits=wider)


def fitting_speedup(
    question: Question, resolved: Resolved, rec: Recommendation, room: Headroom
) -> FittingSpeedup | None:
    """The step of float8 at its cheapest fitting recompute mode against bf16 at its own (the
    answer run again with the mode replaced, as torchtitan converts, both modelled), beside
    the like-for-like speedup at the run's own mode modelled the same way. None where bf16
    fits no mode."""
    if room.bf16_recompute is None or room.fp8_recompute is None:
        return None
    assert question.model is not None
    modes = {room.bf16_recompute, room.fp8_recompute, rec.setup.recompute}
    steps = {}
    for mode in modes:
        run = replace(rec.setup, recompute=mode, recompute_every=1, step_s=None)
        again = recommend_model(
            question.model,
            tokens=rec.tokens,
            resolved=resolved,
            setup=run,
            policy=rec.policy,
        )
        fitted = replace(question, overhead="fitted")  # never compile again for this
        steps[mode] = model_step(fitted, again, resolved)[0].as_run
    return FittingSpeedup(
        bf16_recompute=room.bf16_recompute,
        fp8_recompute=room.fp8_recompute,
        bf16_s=steps[room.bf16_recompute].bf16_s,
        fp8_s=steps[room.fp8_recompute].fp8_s,
        like_for_like=steps[rec.setup.recompute].speedup,
    )


def best_plan(
    question: Question, mixed: Recommendation, resolved: Resolved
) -> tuple[Recommendation, StepAnswer, BlockComparison | None, tuple[Plan, ...]]:
    """Several recipes asked: the plan whose step is fastest with f8roof's choice, among one
    recipe for the whole run (what torchtitan's converter runs) and each linear's own best
    (the recommendation's mix), so that asking for several is never worse than asking for any
    one of them. The plans come back best first; one recipe asked: that one, no plans."""
    mixed, step, block = decided_step(question, mixed, resolved)
    if len(resolved.configs) == 1:
        return mixed, step, block, ()
    found: list[tuple[str | None, Recommendation, StepAnswer, BlockComparison | None]] = []
    for config in resolved.configs:
        alone = replace(resolved, configs=(config,))
        rec = recommend_alone(mixed, resolved, config.recipe.name)
        found.append((config.recipe.name, *decided_step(question, rec, alone)))
    found.append((None, mixed, step, block))
    # one recipe wins a tie: torchtitan converts with one
    found.sort(key=lambda f: -f[2].chosen.speedup)
    plans = tuple(Plan(name, s.chosen.speedup) for name, _, s, _ in found)
    name, rec, step, block = found[0]
    if name is not None:  # one recipe won: its rows, with the comparison the mix made
        compared = Columns({c: v for c, v in mixed.rows.items() if c not in rec.rows})
        rec = replace(
            rec,
            recipes=mixed.recipes,
            skipped_recipes=mixed.skipped_recipes,
            rows=rec.rows.join(compared),
            recipe_totals=mixed.recipe_totals,
        )
    return rec, step, block, plans


def decided_step(
    question: Question, rec: Recommendation, resolved: Resolved
) -> tuple[Recommendation, StepAnswer, BlockComparison | None]:
    """The recommendation the step bears out (`step_decides`), its step and block."""
    rec, (step, block) = step_decides(rec, resolved, lambda r: model_step(question, r, resolved))
    return rec, step, block


def model_step(
    question: Question, rec: Recommendation, resolved: Resolved
) -> tuple[StepAnswer, BlockComparison | None]:
    """The step of a recommendation and the sharded block it was timed from (None: the
    per-layer rows). Without a float8 block the shipped bf16 graphs still time bf16, so a
    setup's bf16 step is the same whichever recipe is asked."""
    block, why_not = sharded_block(question, rec, resolved)
    bf16 = None
    sharded = rec.setup.tp > 1 or bool(rec.setup.fsdp)
    timed = resolved.calibration is not None and not rec.architecture.is_moe
    if block is None and sharded and timed and question.model:
        bf16 = shipped_bf16_block(question.model, tokens=rec.tokens, run=rec.setup)
    step = summarize_step(rec, resolved, block=block, no_block=why_not, bf16_block=bf16)
    return step, block


def sharded_block(
    question: Question, rec: Recommendation, resolved: Resolved
) -> tuple[BlockComparison | None, Note | None]:
    """The block one rank of the run executes, to time the step's blocks from: compiled
    (`--overhead codegen`) or the shipped sharded fits; None and the note saying why where
    neither applies (the step is then summed from the per-layer fits)."""
    setup = rec.setup
    if question.overhead != "codegen" and setup.tp == 1 and not setup.fsdp:
        return None, None  # one GPU, no sharding: the per-layer rows are the block
    why = _why_no_block(rec, resolved)
    if why is not None and question.overhead == "codegen":
        # asked for and impossible: never an answer without it and without a word
        raise F8RoofError(
            f"{term('overhead')} codegen compiles one block of the model, and cannot: "
            f"{why['why'].value}"
        )
    if why is not None:
        return None, why
    recipes = _block_recipes(rec)
    assert question.model is not None, "a block is a model's"
    if question.overhead == "codegen":
        gpu = resolved.config.gpu.name
        block = compiled_block(
            question.model,
            tokens=rec.tokens,
            recipe=recipes[0],
            run=setup,
            gpu=gpu,
        )
        return block, None
    return shipped_block(question.model, tokens=rec.tokens, recipe=recipes[0], run=setup)


def _block_recipes(rec: Recommendation) -> list[str]:
    converted = rec.rows["recipe"][rec.rows["convert"].astype(bool)]
    return sorted({str(r) for r in converted}) or list(rec.recipes[:1])


def _why_no_block(rec: Recommendation, resolved: Resolved) -> Note | None:
    """Why no sharded block (compiled or shipped) can time this answer's blocks; None if one
    can."""
    if rec.architecture.is_moe:
        return no_block(NoBlock.MOE)
    recipes = _block_recipes(rec)
    if len(recipes) != 1:
        return no_block(NoBlock.MIXED_RECIPES, recipes=recipes)
    if resolved.calibration is None:
        return no_block(NoBlock.NO_CALIBRATION)
    if resolved.config.implementation.value != "torchao":
        return no_block(NoBlock.NOT_TORCHAO, implementation=resolved.config.implementation.value)
    return None


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
    """The run that settles every row whose band straddles the decision, on a GPU."""
    rows = frame.take(frame["straddles"].astype(bool))
    if not len(rows):
        return None
    calibration = config.calibration
    return settle_run(
        recipes=(config.recipe.name,),
        shapes=list(zip(rows["M"].tolist(), rows["K"].tolist(), rows["N"].tolist())),
        contexts=(config.context.name,),
        implementation=config.implementation.value,
        calibrated=calibration is not None and calibration.is_measured,
    )


def torchtitan_config(
    rec: Recommendation, *, layout: ConfigLayout = FLOAT8_LAYOUT
) -> TorchtitanConfig:
    """torchtitan's recipe and filter_fqns for the recommended decisions (and the setup's own
    filters); float8's spelled as the setup's `layout` spells it (section, switch, whether its
    torchtitan has filter_fqns). MX is [quantize.linear.mx], or the setup's 2025 [mx] with its
    own recipe_name where that is the recipe f8roof recommends. NVFP4 is
    torchtitan's NVFP4LinearConverter (a Python config, no TOML section), its `fqns` the
    linears to convert."""
    kept: list[str] = []
    converted: list[str] = []
    for fqn, convert, held in zip(rec.rows["fqn"], rec.rows["convert"], kept_by_setup(rec)):
        try:
            to_torchtitan_fqn(fqn)
        except F8RoofError:
            continue  # no torchtitan name (routed experts, other families): not listed
        (converted if convert and not held else kept).append(fqn)
    run = rec.setup
    fqns = list(dict.fromkeys([*(run.filter_fqns or ()), *filter_fqns_for(kept)]))
    recipe = rec.best_recipe
    if recipe == NVFP4:
        blocks = max((linear.count for linear in rec.architecture.linears), default=0)
        return TorchtitanConfig(
            recipe=recipe,
            filter_fqns=(),
            wanted=recipe,
            converts=bool(converted),
            section=NVFP4_CONVERTER,
            fqns=tuple(nvfp4_fqns(converted, kept, blocks=blocks)),
        )
    if recipe in TORCHTITAN_MX:
        own = layout.mx_recipe
        return TorchtitanConfig(
            recipe=own if own and canonical_name(own) == recipe else TORCHTITAN_MX[recipe],
            filter_fqns=tuple(fqns),
            wanted=recipe,
            converts=bool(converted),
            section="quantize.linear.mx" if own is None else "mx",
        )
    recipe = {"rowwise_gw_hp": "rowwise_with_gw_hp"}.get(recipe, recipe)
    return TorchtitanConfig(
        recipe=recipe if recipe in RECIPES else None,
        filter_fqns=tuple(fqns),
        float8_all_gather=run.float8_all_gather,
        wanted=recipe,
        converts=bool(converted),
        section="quantize.linear.float8" if layout.quantize else "float8",
        switch=layout.switch,
        filters=layout.filters,
    )


# f8roof's MX recipes -> torchtitan's [quantize.linear.mx] recipe_name (torchao's
# MXLinearRecipeName); the others (a bf16 grad_weight, emulation) it has no name for
TORCHTITAN_MX = {"mxfp8_rceil": "mxfp8_cublas_rceil"}


def answer_setup(
    path: str,
    *,
    question: Question,
    setup: RunConfig,
    recipe_given: bool,
    options: Mapping[str, Any],
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
) -> ModelAnswer:
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
    assert isinstance(result, ModelAnswer)
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
    given = setup.fsdp or setup.fsdp_degree is not None  # --fsdp 1 too: off, but given
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
