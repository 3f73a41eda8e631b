"""One plan behind every model answer: a run (its recommendation, GPU and calibration) -> a
frozen `Plan`, which `estimate`, `report`, the Python API, `module_filter` and
`filter-compare` read and renderers only format.

The plan evaluates every conversion set it prints: f8roof's per-layer decisions the step
bears out (per recipe asked, and each layer its best recipe), the run as torchtitan converts
it (every linear but the filter_fqns), and where torchao can (tensorwise over FSDP) both with
FSDP2's float8 all-gather. f8roof's choice is the fastest of them: where another set's step is
shorter, the choice takes it (the layers it converts, its all-gather), and the rows say which
decisions the step changed (`held_by_step`, `converted_by_step`). Beside it: the peak memory
as torchtitan converts, what fits, and the torchtitan converter config for the choice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

from f8roof.columns import Columns
from f8roof.engine.decision import DecisionPolicy
from f8roof.engine.recommend import Recommendation, decide_as, recommend_alone, recommend_model
from f8roof.engine.resolve import Resolved
from f8roof.engine.sharded import (
    BlockComparison,
    NoBlock,
    compiled_block,
    no_block,
    shipped_bf16_block,
    shipped_block,
)
from f8roof.engine.step.blocks import TimedBlock
from f8roof.engine.step.conversion import converts_as_run, converts_chosen, kept_by_setup
from f8roof.engine.step.parts import StepSummary
from f8roof.engine.step.summarize import (
    StepAnswer,
    choice_s,
    step_decides,
    step_improves,
    summarize_step,
    timed_block,
)
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.notes import Note, Topic, note
from f8roof.traffic.recipes import NVFP4, canonical_name
from f8roof.training.checkpointing import Recompute, is_block_fqn
from f8roof.training.memory import (
    GIB,
    RUNTIME_BYTES,
    Headroom,
    MemoryEstimate,
    fitting_fsdp,
    headroom,
    memory_estimate,
)
from f8roof.training.run_config import RunConfig
from f8roof.training.torchtitan_names import (
    FLOAT8_LAYOUT,
    NVFP4_CONVERTER,
    RECIPES,
    ConfigLayout,
    experts_at_ep1,
    layer_type,
    nvfp4_fqns,
    printed_filters,
)


@dataclass(frozen=True)
class Asked:
    """What a plan is asked beside the run: the model by name (a catalog name or a
    config.json: its shipped or compiled blocks; None for a module's own architecture), the
    block's overhead (`fitted`, or `codegen`: compile it), the setup's converter layout, and
    whether a setup file stated the layout."""

    model: str | None = None
    overhead: str = "fitted"
    layout: ConfigLayout = FLOAT8_LAYOUT
    from_setup: bool = False
    # other conversion sets to step beside the plan's own, by name (torchao's auto filter,
    # every convertible linear: filter-compare's); one recipe asked only
    also: tuple[tuple[str, tuple[str, ...]], ...] = ()


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
    # what filter_fqns cannot say: routed experts, the router, a model torchtitan lacks
    notes: tuple[Note, ...] = ()

    @property
    def settings(self) -> tuple[tuple[str, object], ...]:
        """The converter as torchtitan's dotted job-config keys and their values, for a TOML
        converter that converts something (empty otherwise: none, no recipe, NVFP4's Python
        config): the one place its rules live, for the TOML, the command line and `--set`."""
        if not self.converts or self.recipe is None or self.section == NVFP4_CONVERTER:
            return ()
        section = self.section
        out: list[tuple[str, object]] = [
            (f"{section}.enable_float8_linear", True)
            if self.switch  # torchtitan before [model] converters (2025-02-15)
            else ("model.converters", [section])
        ]
        if self.recipe == "tensorwise" and self.float8_all_gather:
            # torchtitan refuses recipe_name with float8 all-gather; tensorwise is its default
            out += [
                (f"{section}.enable_fsdp_float8_all_gather", True),
                (f"{section}.precompute_float8_dynamic_scale_for_fsdp", True),
            ]
        else:
            out.append((f"{section}.recipe_name", self.recipe))
        if self.filters:
            out.append((f"{section}.filter_fqns", list(self.filter_fqns)))
        return tuple(out)


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


class Arm(str, Enum):
    """How a conversion set the plan evaluates was chosen."""

    CHOICE = "f8roof's choice"  # per-layer decisions the step bears out
    AS_RUN = "as torchtitan converts"  # every linear but the filter_fqns
    ASKED = "asked for"  # a set the question names (`Asked.also`)


@dataclass(frozen=True)
class Candidate:
    """One conversion set the plan evaluated and its step: `recipe` for every converted
    linear (None: each layer its own best recipe), with or without FSDP2's float8
    all-gather."""

    arm: Arm
    recipe: str | None
    summary: StepSummary
    converted: tuple[str, ...]  # the rows (fqns) it converts
    float8_all_gather: bool = False
    name: str = ""  # an asked-for set's name
    recipes: tuple[str, ...] = ()  # the recipes its converted linears run

    def __post_init__(self) -> None:
        if (self.arm is Arm.ASKED) != bool(self.name):
            raise F8RoofError("a conversion set asked for is named, and only it")

    @property
    def speedup(self) -> float:
        return self.summary.speedup

    @property
    def one_converter(self) -> bool:
        """torchtitan runs it: one converter section, one recipe_name for every converted
        linear (its model converters must share one quantization type, and each has one
        recipe: torchtitan/protocols/model_converter.py). A mix of recipes is torchao's
        per-module conversion, not a torchtitan run."""
        return len(self.recipes) <= 1


# a float8 all-gather gain below half a percent is within the step model's rounding: not said
SHOWN_GAIN = 1.005


# a tie goes to the plan nearest the per-layer answer: the choice, then one recipe, then the
# run's own switches
def _rank(c: Candidate) -> tuple[float, int, int, int]:
    return (-round(c.speedup, 9), c.arm is not Arm.CHOICE, c.recipe is None, c.float8_all_gather)


@dataclass(frozen=True, eq=False)
class Plan:
    """A model's answer: the rows and decisions of f8roof's choice, its step beside the run as
    torchtitan converts it (`step`), every conversion set evaluated (`candidates`, best
    first: the choice is the first), the memory, and torchtitan's config for the choice."""

    resolved: Resolved
    run: RunConfig  # the run as asked (the choice's may add FSDP2's float8 all-gather)
    recommendation: Recommendation
    step: StepAnswer
    candidates: tuple[Candidate, ...]
    torchtitan: TorchtitanConfig
    block: BlockComparison | None = None  # the sharded block its blocks were timed from
    memory: MemoryAnswer | None = None  # None: the FSDP degree is unknown
    from_setup: bool = False  # asked by a setup file: answered with torchtitan's lines
    chosen_from: Arm = Arm.CHOICE  # where the choice's conversion set came from

    @property
    def summary(self) -> StepSummary:
        """The step as torchtitan converts it: what published runs measure."""
        return self.step.as_run

    @property
    def choice(self) -> Candidate:
        return self.candidates[0]

    def asked_for(self, name: str) -> Candidate | None:
        """The conversion set the question named `name` (`Asked.also`), stepped."""
        return next((c for c in self.candidates if c.name == name), None)

    @property
    def recipe_plans(self) -> tuple[Candidate, ...]:
        """Several recipes asked: each recipe's fastest conversion set, and each layer its best
        recipe's, best first (the choice)."""
        if len(self.recommendation.recipes) < 2:
            return ()
        best: dict[str | None, Candidate] = {}
        for c in self.candidates:  # best first
            best.setdefault(c.recipe, c)
        return tuple(best.values())

    @property
    def adds_float8_all_gather(self) -> bool:
        """The choice gathers float8 weights in float8 where the run as asked does not."""
        return self.choice.float8_all_gather and not self.run.float8_all_gather

    @property
    def float8_all_gather(self) -> Candidate | None:
        """As torchtitan converts with FSDP2's float8 all-gather, where the run could and does
        not gather in float8, and it is faster than without."""
        if self.run.float8_all_gather:
            return None
        recipe = self.recommendation.best_recipe
        found = [
            c
            for c in self.candidates
            if c.arm is Arm.AS_RUN and c.float8_all_gather and c.recipe == recipe
        ]
        faster = found and found[0].speedup > self.step.as_run.speedup * SHOWN_GAIN
        return found[0] if faster else None


def plan_model(rec: Recommendation, resolved: Resolved, asked: Asked) -> Plan:
    """The plan of a run: the conversion sets the answer prints, each stepped, the fastest
    the choice (see the module docstring)."""
    stepper: dict[str | None, _Steps] = {}

    def steps_of(recipe: str | None) -> _Steps:
        """One stepper per recipe: its blocks read and timed once for the whole plan."""
        if recipe not in stepper:
            stepper[recipe] = _Steps(asked, _one_recipe(resolved, recipe))
        return stepper[recipe]

    found = _recipe_plans(rec, resolved, steps_of)
    # a recipe's memory as torchtitan converts the run (the answer's, and the all-gather's
    # check), answered once
    memories: dict[str | None, MemoryAnswer | None] = {}

    def logged(recipe: str | None, decided: Recommendation) -> MemoryAnswer | None:
        if recipe not in memories:
            memories[recipe] = memory_answer(decided, resolved)
        return memories[recipe]

    candidates: list[Candidate] = []
    for recipe, decided, step, _ in found:
        candidates.append(_candidate(Arm.CHOICE, recipe, decided, step.chosen))
        candidates.append(_candidate(Arm.AS_RUN, recipe, decided, step.as_run))
        gathered = _gathered(decided)
        if gathered is not None and _gather_fits(logged(recipe, decided), gathered, resolved):
            both = steps_of(recipe)(gathered)[0]
            candidates.append(_candidate(Arm.CHOICE, recipe, gathered, both.chosen))
            candidates.append(_candidate(Arm.AS_RUN, recipe, gathered, both.as_run))
    if asked.also and len(found) == 1:
        recipe, decided, _, _ = found[0]
        settled = [str(f) for f, k in zip(decided.rows["fqn"], kept_by_setup(decided)) if k]
        for name, converted in asked.also:
            named = decide_as(decided, steps_of(recipe).resolved, converted, settled)
            summary = steps_of(recipe)(named)[0].chosen
            candidates.append(
                replace(_candidate(Arm.CHOICE, recipe, named, summary), arm=Arm.ASKED, name=name)
            )
    candidates.sort(key=_rank)
    # a conservative policy converts only what wins at its band's low end: no set that
    # converts more than the per-layer decisions can be its choice; and the choice is one
    # torchtitan runs (one recipe), a faster mix of recipes shown beside it
    may_convert = rec.policy is not DecisionPolicy.CONSERVATIVE
    best = next(
        c for c in candidates if c.one_converter and (may_convert or _within_decisions(c, found))
    )
    recipe, recipe_rec, as_asked, block = next(f for f in found if f[0] == best.recipe)
    steps = steps_of(best.recipe)
    one = steps.resolved
    decided, step = recipe_rec, as_asked
    if best.arm is not Arm.CHOICE or best.float8_all_gather:
        decided = _adopt(recipe_rec, one, best)
        step, block = steps(decided)
    decided, (step, block) = step_improves(
        decided, one, steps, steps.probe, (step, block), may_convert=may_convert
    )
    final = _candidate(Arm.CHOICE, best.recipe, decided, step.chosen)
    if final.speedup > best.speedup or best is not candidates[0]:
        candidates.insert(0, final)  # the choice leads
    # the run as torchtitan converts it stays the run as asked
    step = replace(as_asked, chosen=step.chosen, converted_types=step.converted_types)
    # the memory of the run as asked, as torchtitan converts it: what its log would say
    memory = logged(best.recipe, recipe_rec)
    if memory is not None and memory.headroom.cheaper_recompute and asked.model is not None:
        room = memory.headroom
        memory = replace(memory, fitting=fitting_speedup(asked, resolved, recipe_rec, room))
    return Plan(
        resolved,
        rec.setup,
        _with_compared(decided, found),
        step,
        tuple(candidates),
        torchtitan_config(decided, layout=asked.layout),
        block,
        memory,
        from_setup=asked.from_setup,
        chosen_from=best.arm,
    )


def _within_decisions(candidate: Candidate, found: list[_Found]) -> bool:
    """The candidate converts no row its recipe's per-layer decisions keep."""
    rec = next(f[1] for f in found if f[0] == candidate.recipe)
    return set(candidate.converted) <= set(rec.converted_fqns)


def _candidate(arm: Arm, recipe: str | None, rec: Recommendation, step: StepSummary) -> Candidate:
    rows = rec.rows
    if arm is Arm.AS_RUN:
        converts = converts_as_run(rec, rec.setup)[0]
    else:
        converts = converts_chosen(rec)
    return Candidate(
        arm,
        recipe,
        step,
        tuple(str(f) for f in rows["fqn"][converts]),
        float8_all_gather=rec.setup.float8_all_gather,
        recipes=tuple(dict.fromkeys(str(r) for r in rows["recipe"][converts])),
    )


def _gathered(rec: Recommendation) -> Recommendation | None:
    """The run with FSDP2's float8 all-gather and precomputed scales (torchao's, tensorwise
    only), where it gathers in bf16 over a known FSDP degree; None where that does not apply
    (Transformer Engine's linears: torchao's all-gather is not theirs)."""
    setup = rec.setup
    if setup.float8_all_gather or setup.fsdp_ranks < 2 or _block_recipes(rec) != ["tensorwise"]:
        return None
    if rec.te_stack is not None:
        return None
    return replace(rec, setup=replace(setup, float8_all_gather=True, precompute_scales=True))


def _gather_fits(
    without: MemoryAnswer | None, gathered: Recommendation, resolved: Resolved
) -> bool:
    """FSDP2's float8 all-gather is a candidate only where the float8 arm fits with it wherever
    it fits without (`without`: the run's memory as torchtitan converts it): it halves the
    weights in flight, but a compiled block without recompute then keeps a transposed float8
    copy of each MLP weight for its backward (training/memory.py's `_keeps_float8_weight`),
    which can cost more."""
    if without is None or not without.estimate.fp8_fits:
        return True
    with_gather = memory_answer(gathered, resolved)
    return with_gather is None or with_gather.estimate.fp8_fits


def _adopt(rec: Recommendation, resolved: Resolved, best: Candidate) -> Recommendation:
    """The choice as the faster conversion set `best`: its layers converted (the step's
    decisions marked on the rows, the setup's filters left as they are), its all-gather."""
    if best.float8_all_gather:
        rec = replace(rec, setup=replace(rec.setup, float8_all_gather=True, precompute_scales=True))
    settled = [str(f) for f, k in zip(rec.rows["fqn"], kept_by_setup(rec)) if k]
    return decide_as(rec, resolved, best.converted, settled)


def _one_recipe(resolved: Resolved, recipe: str | None) -> Resolved:
    if recipe is None or len(resolved.configs) == 1:
        return resolved
    return replace(resolved, configs=tuple(c for c in resolved.configs if c.recipe.name == recipe))


_Found = tuple[str | None, Recommendation, StepAnswer, BlockComparison | None]


def _recipe_plans(
    mixed: Recommendation, resolved: Resolved, steps_of: Callable[[str | None], _Steps]
) -> list[_Found]:
    """The choice per recipe asked (one recipe for the whole run: what torchtitan's converter
    runs) and each linear's own best (the recommendation's mix), each as the step decides it
    (`step_decides`); one recipe asked: that one."""
    if len(resolved.configs) == 1:
        name = resolved.configs[0].recipe.name
        return [(name, *_decided(mixed, steps_of(name)))]
    found: list[_Found] = []
    for config in resolved.configs:
        rec = recommend_alone(mixed, resolved, config.recipe.name)
        found.append((config.recipe.name, *_decided(rec, steps_of(config.recipe.name))))
    found.append((None, *_decided(mixed, steps_of(None))))
    return found


def _decided(
    rec: Recommendation, steps: _Steps
) -> tuple[Recommendation, StepAnswer, BlockComparison | None]:
    """The recommendation the step bears out (`step_decides`), its step and block."""
    rec, (step, block) = step_decides(rec, steps.resolved, steps, steps.probe)
    return rec, step, block


def _with_compared(rec: Recommendation, found: list[_Found]) -> Recommendation:
    """One recipe's rows, with the comparison the mix made (each recipe's speedup per row)."""
    mixed = next((f[1] for f in found if f[0] is None), None)
    if mixed is None or rec is mixed:
        return rec
    compared = {c: v for c, v in mixed.rows.items() if c not in rec.rows}
    return replace(
        rec,
        recipes=mixed.recipes,
        skipped_recipes=mixed.skipped_recipes,
        rows=rec.rows.join(Columns(compared)),
        recipe_totals=mixed.recipe_totals,
    )


def model_step(
    asked: Asked, rec: Recommendation, resolved: Resolved
) -> tuple[StepAnswer, BlockComparison | None]:
    """The step of a recommendation and the sharded block it was timed from (None: the
    per-layer rows)."""
    return _Steps(asked, resolved)(rec)


@dataclass
class _Steps:
    """The steps of one run's conversion sets: the sharded block each is timed from read and
    timed once per (recipe, run). Without a float8 block the shipped bf16 graphs still time
    bf16, so a setup's bf16 step is the same whichever recipe is asked."""

    asked: Asked
    resolved: Resolved
    seen: dict[str, tuple[BlockComparison | None, Note | None, TimedBlock | None]] = field(
        default_factory=dict
    )
    apart: dict[str, Recommendation] = field(default_factory=dict)

    def _block(
        self, rec: Recommendation
    ) -> tuple[BlockComparison | None, Note | None, TimedBlock | None]:
        key = repr((_block_recipes(rec), rec.tokens, rec.setup))
        if key not in self.seen:
            block, why_not = sharded_block(self.asked, rec, self.resolved)
            bf16 = None
            sharded = rec.setup.tp > 1 or rec.setup.fsdp_on
            timed = self.resolved.calibration is not None and not rec.architecture.is_moe
            if block is None and sharded and timed and self.asked.model:
                bf16 = shipped_bf16_block(self.asked.model, tokens=rec.tokens, run=rec.setup)
            graphs = timed_block(self.resolved, block=block, bf16_block=bf16)
            self.seen[key] = (block, why_not, graphs)
        return self.seen[key]

    def _apart(self, rec: Recommendation, graphs: TimedBlock | None) -> Recommendation | None:
        """A fused-q/k/v run's recommendation in the separate layout, whose rows pair with the
        graphs' three linears (`summarize_step`'s `apart`); None for any other run."""
        if graphs is None or not rec.setup.fuse_qkv or self.asked.model is None:
            return None
        key = repr((rec.tokens, rec.setup))
        if key not in self.apart:
            self.apart[key] = recommend_model(
                self.asked.model,
                tokens=rec.tokens,
                resolved=self.resolved,
                setup=replace(rec.setup, fuse_qkv=False),
                policy=rec.policy,
            )
        return self.apart[key]

    def __call__(self, rec: Recommendation) -> tuple[StepAnswer, BlockComparison | None]:
        block, why_not, graphs = self._block(rec)
        apart = self._apart(rec, graphs)
        step = summarize_step(rec, self.resolved, timed=graphs, no_block=why_not, apart=apart)
        return step, block

    def probe(self, rec: Recommendation) -> float:
        """The float8 step with f8roof's choice, seconds: what a search compares."""
        _, why_not, graphs = self._block(rec)
        apart = self._apart(rec, graphs)
        return choice_s(rec, self.resolved, timed=graphs, no_block=why_not, apart=apart)


def sharded_block(
    asked: Asked, rec: Recommendation, resolved: Resolved
) -> tuple[BlockComparison | None, Note | None]:
    """The block one rank of the run executes, to time the step's blocks from: compiled
    (`--overhead codegen`) or the shipped sharded fits; None and the note saying why where
    neither applies (the step is then summed from the per-layer fits)."""
    setup = rec.setup
    if asked.overhead != "codegen" and setup.tp == 1 and not setup.fsdp_on:
        return None, None  # one GPU, no sharding: the per-layer rows are the block
    why = _why_no_block(rec, resolved, asked)
    if why is not None and asked.overhead == "codegen":
        # asked for and impossible: never an answer without it and without a word
        raise F8RoofError(
            f"{term('overhead')} codegen compiles one block of the model, and cannot: "
            f"{why['why'].value}"
        )
    if why is not None:
        return None, why
    recipes = _block_recipes(rec)
    assert asked.model is not None, "a block is a named model's"
    if asked.overhead == "codegen":
        gpu = resolved.config.gpu.name
        return compiled_block(
            asked.model, tokens=rec.tokens, recipe=recipes[0], run=setup, gpu=gpu
        ), None
    return shipped_block(asked.model, tokens=rec.tokens, recipe=recipes[0], run=setup)


def _block_recipes(rec: Recommendation) -> list[str]:
    converted = rec.rows["recipe"][rec.rows["convert"].astype(bool)]
    return sorted({str(r) for r in converted}) or list(rec.recipes[:1])


def _why_no_block(rec: Recommendation, resolved: Resolved, asked: Asked) -> Note | None:
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
    if asked.model is None:  # a module's own architecture
        return no_block(NoBlock.NOT_BUILTIN, model=rec.architecture.name)
    return None


def memory_answer(
    rec: Recommendation, resolved: Resolved, *, chosen: bool = False
) -> MemoryAnswer | None:
    """Peak memory per GPU with the linears float8 converts as torchtitan does (every one but
    the filter_fqns: what published runs measure), or with `chosen` as the recommendation's
    decisions convert them (the filter_fqns its torchtitan config prints: what a run of the
    recommendation measures), and what fits; None where the FSDP degree is unknown. A run that does not fit in bf16 is answered, whichever front end stated its
    layout, and said so with what would fit: the cheapest recompute mode (`headroom`), else
    the smallest FSDP degree (`fitting_fsdp`); with a measured bf16 step the run ran, so the
    memory model is what overstates it (said)."""
    run = rec.setup
    if run.fsdp_on and run.fsdp_degree is None:
        return None
    blocks = [is_block_fqn(linear.fqn) for linear in rec.architecture.linears]
    if all(blocks) or not any(blocks):
        return None  # the memory model is a transformer's: blocks and an output projection
    gpu = resolved.config.gpu
    # memory is modelled per layer type (a mean block): a type filters split counts as
    # converted by its larger part
    if chosen:
        converts = converts_chosen(rec)
    else:
        converts = converts_as_run(rec, run)[0]
    larger: dict[str, tuple[int, bool]] = {}
    for fqn, count, yes in zip(rec.rows["fqn"], rec.rows["count"], converts):
        kind = layer_type(str(fqn))
        larger[kind] = max(larger.get(kind, (0, False)), (int(count), bool(yes)))
    converted = [fqn for fqn, (_, yes) in larger.items() if yes]
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
            "components/metrics.py (reserved_bytes.all.peak, GiB); "
            "pytorch c10/cuda/CUDACachingAllocator.cpp (training/allocator.py)"
        ),
    )
    return MemoryAnswer(found, room, (assumed,), measured=measured, fsdp_fits=wider)


def chosen_memory(plan: Plan) -> MemoryAnswer | None:
    """The memory of a run of the plan's choice (`memory_answer(chosen=True)`): the plan's own
    where the choice converts what torchtitan converts, with the same all-gather."""
    rec = plan.recommendation
    as_run = converts_as_run(rec, plan.run)[0]
    if not plan.adds_float8_all_gather and bool((converts_chosen(rec) == as_run).all()):
        return plan.memory
    return memory_answer(rec, plan.resolved, chosen=True)


def fitting_speedup(
    asked: Asked, resolved: Resolved, rec: Recommendation, room: Headroom
) -> FittingSpeedup | None:
    """The step of float8 at its cheapest fitting recompute mode against bf16 at its own (the
    answer run again with the mode replaced, as torchtitan converts, both modelled), beside
    the like-for-like speedup at the run's own mode modelled the same way. None where bf16
    fits no mode."""
    if room.bf16_recompute is None or room.fp8_recompute is None:
        return None
    assert asked.model is not None
    modes = {room.bf16_recompute, room.fp8_recompute, rec.setup.recompute}
    steps = {}
    for mode in modes:
        run = replace(rec.setup, recompute=mode, recompute_every=1, step_s=None)
        again = recommend_model(
            asked.model, tokens=rec.tokens, resolved=resolved, setup=run, policy=rec.policy
        )
        fitted = replace(asked, overhead="fitted")  # never compile again for this
        steps[mode] = model_step(fitted, again, resolved)[0].as_run
    return FittingSpeedup(
        bf16_recompute=room.bf16_recompute,
        fp8_recompute=room.fp8_recompute,
        bf16_s=steps[room.bf16_recompute].bf16_s,
        fp8_s=steps[room.fp8_recompute].fp8_s,
        like_for_like=steps[rec.setup.recompute].speedup,
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
    run, rows = rec.setup, rec.rows
    printed = printed_filters(
        rows["fqn"],
        rows["count"],
        converts_chosen(rec),
        rows["grouped"],
        family=rec.architecture.family,
        setup_filters=run.filter_fqns,
        moe_fqns=run.moe_fqns,
    )
    kept, converted, fqns = printed.kept, printed.converted, printed.filter_fqns
    experts = [
        (str(f), bool(c)) for f, c, g in zip(rows["fqn"], rows["convert"], rows["grouped"]) if g
    ]
    at_ep1 = experts_at_ep1(
        run.ep,
        choice=any(c for _, c in experts),
        setup=any(m in f for f, _ in experts for m in run.moe_fqns),
    )
    printed = replace(printed, notes=printed.notes + ((at_ep1,) if at_ep1 else ()))
    recipe = rec.best_recipe
    if recipe == NVFP4:
        blocks = max((linear.count for linear in rec.architecture.linears), default=0)
        return TorchtitanConfig(
            recipe=recipe,
            filter_fqns=(),
            wanted=recipe,
            converts=bool(converted),
            section=NVFP4_CONVERTER,
            notes=printed.notes,
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
            notes=printed.notes,
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
        notes=printed.notes,
    )


# f8roof's MX recipes -> torchtitan's [quantize.linear.mx] recipe_name (torchao's
# MXLinearRecipeName); the others (a bf16 grad_weight, emulation) it has no name for
TORCHTITAN_MX = {"mxfp8_rceil": "mxfp8_cublas_rceil"}
