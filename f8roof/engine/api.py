"""The Python API: what `f8roof estimate` answers, for scripts and notebooks.

Each function checks its parameters first (a `ParameterError` naming the parameter), then
makes the command line's own library call; any other refusal is the library's `F8RoofError`,
whose message names the library's parameters by their own names, this API's (`tp`, not the
command line's `--tp`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from f8roof.errors import ParameterError
from f8roof.training.catalog import layer_type

if TYPE_CHECKING:
    import pandas as pd

    from f8roof.calibration.file import Calibration
    from f8roof.engine.plan import Plan
    from f8roof.engine.recommend import Recommendation
    from f8roof.engine.resolve import Request
    from f8roof.engine.step.search import Layout, Point, Search
    from f8roof.training.run_config import RunConfig

POLICIES = ("expected", "conservative", "optimistic")
RECOMPUTE = ("none", "selective", "full")


def estimate_shapes(
    shapes: Iterable[tuple[int, int, int]],
    *,
    gpu: str | None = None,
    recipe: str = "tensorwise",
    implementation: str | None = None,
    calibration: str | Path | Calibration | None = None,
    no_calibration: bool = False,
    policy: str = "expected",
) -> pd.DataFrame:
    """bf16 vs float8 forward + backward time of one linear per shape, as `f8roof estimate
    --shape` answers.

    shapes: (M, K, N) per linear: M tokens, K in features, N out features (positive ints).
    gpu: a preset name (`f8roof gpus`); None: the calibration's GPU, else h100. recipe: one
    float8 recipe ("tensorwise", "rowwise", ...). implementation: "torchao" (default) or
    "reference". calibration: a calibration file or a loaded one; None: the GPU's shipped
    one. no_calibration: datasheet rooflines, no calibration. policy: the band's end a
    conversion must win at ("expected", "conservative", "optimistic").

    Returns one row per shape: times in seconds (`bf16_s`, `fp8_s`, `*_gemm_s`,
    `overhead_s_*`), bytes (`overhead_bytes_*`), speedups (bf16 / float8: `speedup`, its band
    `speedup_low`/`speedup_high`), and `decision` ("convert" or "keep") with `straddles`
    (the band crosses 1: a GPU settles it).
    """
    from f8roof.engine.answer import Question, answer
    from f8roof.training.run_config import ONE_GPU

    texts = [",".join(map(str, _shape(s))) for s in _listed("shapes", shapes)]
    if not texts:
        raise ParameterError("shapes", shapes, "one (M, K, N) or more")
    _one_recipe(recipe)
    request = _request(gpu, recipe, implementation, calibration, no_calibration)
    question = Question(shape_texts=texts, policy=_choice("policy", policy, POLICIES))
    return answer(question, request, setup=ONE_GPU).frame  # type: ignore[union-attr]


def answer_model(
    model: str,
    tokens: int | None = None,
    *,
    seq_len: int | None = None,
    local_batch_size: int | None = None,
    gpu: str | None = None,
    tp: int = 1,
    ep: int = 1,
    fsdp: int | None = None,
    recompute: str = "none",
    recipe: str = "tensorwise",
    step_ms: float | None = None,
    float8_all_gather: bool = False,
    async_tp: bool = False,
    filter_fqns: Sequence[str] | None = None,
    pp: int = 1,
    pp_schedule: str | None = None,
    microbatches: int | None = None,
    cp: int = 1,
    accumulation: int = 1,
    network_gbps: float | None = None,
    fuse_qkv: bool = False,
    calibration: str | Path | Calibration | None = None,
    no_calibration: bool = False,
    policy: str = "expected",
) -> Plan:
    """A model's linears at training scale, as `f8roof estimate --model` answers.

    model: a built-in architecture (`f8roof models`) or a Hugging Face config.json path.
    tokens: tokens per GPU per step (M of every linear), or seq_len x local_batch_size
    (torchtitan's; seq_len alone with tokens: their sequences, else whole ones up to 8192).
    gpu: a preset name. tp, ep: tensor- and expert-parallel degrees (ints >= 1; 1: none).
    fsdp: FSDP's degree (None, the default, as the command line without --fsdp: no FSDP;
    1: off, said so). recompute: activation
    checkpointing, "none", "selective" or "full". recipe: a float8 recipe, a comma list or
    "all". step_ms: a measured bf16 step in milliseconds, reconciled with the model.
    float8_all_gather: torchao's FSDP2 float8 weight all-gather with precomputed scales.
    async_tp: torch's micro-pipelined TP (tp >= 2). filter_fqns: linears kept in bf16 by
    torchtitan's substring rule (None: ["output"], as its llama configs; []: none). pp,
    pp_schedule, microbatches: pipeline parallelism ("GPipe", "1F1B", "Interleaved1F1B";
    microbatches one sequence each by default). cp: context-parallel degree. accumulation:
    forward/backward passes per optimizer step. network_gbps: the inter-node NIC per GPU.
    fuse_qkv: torchtitan's fused q/k/v projection (llama3 and qwen3; its default since
    2026-06-24), one `attention.qkv_linear.wqkv` row. calibration, no_calibration, policy: as for `estimate_shapes`.

    Returns the plan (`engine.plan.Plan`): `recommendation.layers` (one
    row per layer type, times in seconds, `convert`), `step.chosen` and `step.as_run` (the
    step per GPU with f8roof's choice and as torchtitan converts: `bf16_s`, `fp8_s`,
    `speedup`, each part with its band), `memory` (peak bytes per GPU, what fits).
    """
    from f8roof.engine.answer import Question, answer

    setup = _setup(
        tp=tp,
        ep=ep,
        fsdp=fsdp,
        recompute=recompute,
        step_ms=step_ms,
        tokens=tokens,
        float8_all_gather=_flag("float8_all_gather", float8_all_gather),
        network_gbps=_optional_number("network_gbps", network_gbps, "Gb/s per GPU, or None"),
        filter_fqns=_fqns(filter_fqns),
        async_tp=_flag("async_tp", async_tp),
        pp=_positive("pp", pp),
        pp_schedule=None if pp_schedule is None else _text("pp_schedule", pp_schedule),
        microbatches=None if microbatches is None else _positive("microbatches", microbatches),
        cp=_positive("cp", cp),
        accumulation=_positive("accumulation", accumulation),
        fuse_qkv=_flag("fuse_qkv", fuse_qkv),
        seq_len=None if seq_len is None else _positive("seq_len", seq_len),
        local_batch_size=(
            None if local_batch_size is None else _positive("local_batch_size", local_batch_size)
        ),
    )
    question = Question(
        model=_text("model", model),
        tokens=setup.tokens,
        policy=_choice("policy", policy, POLICIES),
    )
    request = _request(gpu, _text("recipe", recipe), None, calibration, no_calibration)
    return answer(question, request, setup=setup)  # type: ignore[return-value]


def answer_setup(
    setup: str | Path,
    *,
    gpu: str | None = None,
    step_ms: float | None = None,
    overrides: Sequence[str] = (),
    calibration: str | Path | Calibration | None = None,
    no_calibration: bool = False,
    policy: str = "expected",
) -> Plan:
    """A torchtitan run, as `f8roof estimate --setup` answers: its model, tokens, parallelism,
    checkpointing and float8 from the job config.

    setup: a torchtitan TOML job config (or f8roof's short form), or a named 2026 config
    ("llama3:llama3_8b"). gpu: a preset name (else the file's [f8roof] gpu). step_ms: a
    measured bf16 step in milliseconds (else the file's). overrides: "section.key=value"
    strings, as `--set`. calibration, no_calibration, policy: as for `estimate_shapes`.
    Returns the answer record, as `answer_model`.
    """
    from f8roof.engine.answer import Question
    from f8roof.engine.answer import answer_setup as answer_file
    from f8roof.training.run_config import RunConfig

    if not isinstance(setup, str | Path) or not str(setup).strip():
        raise ParameterError("setup", setup, "a job config path or a named config")
    if (
        isinstance(overrides, str | bytes)
        or not isinstance(overrides, Iterable)
        or not all(isinstance(o, str) for o in overrides)
    ):
        raise ParameterError("overrides", overrides, "a list of 'section.key=value' strings")
    # the recipe is the file's: the request's own is left out of what is passed on
    request = _request(gpu, "tensorwise", None, calibration, no_calibration)
    return answer_file(
        str(setup),
        question=Question(policy=_choice("policy", policy, POLICIES)),
        setup=RunConfig.from_options(step_ms=_step_ms(step_ms), setup_given=True),
        recipe_given=False,
        options={k: v for k, v in vars(request).items() if k != "recipes"},
        overrides=tuple(overrides),
    )


# The recipes torchtitan's converters train with (float8: tensorwise, rowwise; mx: mxfp8),
# searched by `recipe="all"` where the GPU runs their gemms (hardware/support.py)
SEARCHED_RECIPES = ("tensorwise", "rowwise", "mxfp8")


def best_runs(
    model: str,
    gpus: int,
    *,
    gpu: str = "h100",
    seq_len: int | None = None,
    recipe: str = "tensorwise",
    calibration: str | Path | Calibration | None = None,
    no_calibration: bool = False,
    progress: Callable[[int, int], None] | None = None,
    fuse_qkv: bool = False,
) -> Search:
    """The best bf16 run and the best float8 run of `model` on `gpus` GPUs, as `f8roof plan`
    answers: every torchtitan layout searched (TP within a node, FSDP over the rest, a
    pipeline where nothing else fits, recompute, local batch, recipe), each answered as
    `answer_model` answers it, ranked by tokens/s per GPU where it fits.

    gpus: the GPU count. gpu: a preset name. seq_len: tokens per sequence (None: llama3's
    8192). recipe: a float8 recipe, or "all" (those of tensorwise, rowwise, mxfp8 the GPU
    runs). calibration, no_calibration: as for `estimate_shapes`. progress: told (runs
    searched, runs planned so far) after each parallel layout's recompute modes and batches.
    fuse_qkv: every layout with torchtitan's fused q/k/v projection (as `answer_model`'s):
    the model's build, not a layout the search varies.

    Returns the search (`engine.step.search.Search`): `points` (every layout evaluated),
    `best(Arm.BF16)`, `best(Arm.FLOAT8)`, `retuned_speedup`, `like_for_like_speedup`.
    """
    from f8roof.engine.answer import Question, answer
    from f8roof.engine.plan import Plan
    from f8roof.engine.step.search import check_gpus, search
    from f8roof.hardware.fabric import Fabric
    from f8roof.hardware.presets import resolve_gpu
    from f8roof.hardware.support import unsupported_reason
    from f8roof.training.catalog import fuse_qkv as fused
    from f8roof.training.catalog import resolve_model
    from f8roof.training.run_config import LLAMA3_SEQ_LEN

    name = _text("model", model)
    count = check_gpus(gpus)
    length = LLAMA3_SEQ_LEN if seq_len is None else _positive("seq_len", seq_len)
    part = resolve_gpu(_text("gpu", gpu))
    recipe = _text("recipe", recipe)
    recipes = (
        tuple(r for r in SEARCHED_RECIPES if unsupported_reason(part, r) is None)
        if recipe.strip() == "all"
        else (recipe.strip(),)
    )
    if not recipes:
        raise ParameterError("recipe", recipe, "a recipe the GPU runs")
    node = part.fabric.gpus_per_node if isinstance(part.fabric, Fabric) else 1
    architecture = resolve_model(name)
    routed = [linear.routed.experts for linear in architecture.linears if linear.routed]
    fuse = _flag("fuse_qkv", fuse_qkv)
    if fuse:
        fused(architecture)  # refused here, in one line, for a model torchtitan does not fuse

    def evaluate(layout: Layout) -> Point:
        setup = layout_run(layout, length, fuse_qkv=fuse)
        request = _request(gpu, layout.recipe, None, calibration, no_calibration)
        plan = answer(Question(model=name, tokens=setup.tokens), request, setup=setup)
        assert isinstance(plan, Plan) and plan.memory is not None
        return point_of(plan, layout, length)

    return search(
        evaluate,
        model=name,
        gpu=gpu,
        gpus=count,
        gpus_per_node=node,
        seq_len=length,
        recipes=recipes,
        experts=max(routed, default=0),
        progress=progress,
        fuse_qkv=fuse,
    )


def layout_run(
    layout: Layout, seq_len: int, *, float8_all_gather: bool = False, fuse_qkv: bool = False
) -> RunConfig:
    """The run a layout of the search is, by the command line's own rule (HSDP's replicas,
    which the command line has no flag for, as a setup file sets them)."""
    from dataclasses import replace

    from f8roof.training.run_config import RunConfig

    run = RunConfig.from_options(
        tp=layout.tp,
        ep=layout.ep,
        fsdp=layout.fsdp,
        recompute=layout.recompute.value,
        async_tp=layout.async_tp,
        pp=layout.pp,
        cp=layout.cp,
        seq_len=seq_len,
        local_batch_size=layout.local_batch,
        float8_all_gather=float8_all_gather,
        fuse_qkv=fuse_qkv,
    )
    return replace(run, dp_replicate=layout.replicate)


def point_of(plan: Plan, layout: Layout, seq_len: int) -> Point:
    """A plan's step, memory and torchtitan converter config, as one point of the search: the
    choice's, the conversion and all-gather its config prints (what a run of it holds)."""
    from f8roof.engine.plan import chosen_memory
    from f8roof.engine.step.search import Point

    chosen = chosen_memory(plan)
    assert chosen is not None
    step, memory, config = plan.step.chosen, chosen.estimate, plan.torchtitan
    room = chosen.headroom
    return Point(
        layout=layout,
        seq_len=seq_len,
        bf16_s=step.bf16_s,
        fp8_s=step.fp8_s,
        bf16_peak_bytes=memory.bf16.peak_bytes,
        fp8_peak_bytes=memory.fp8.peak_bytes,
        bf16_fits=memory.bf16_fits,
        fp8_fits=memory.fp8_fits,
        float8_all_gather=plan.choice.float8_all_gather,
        converter=config,
        largest=(
            (room.bf16_local_batch, room.fp8_local_batch) if room.seq_len == seq_len else None
        ),
        usable_bytes=memory.usable_bytes,
    )


# Module names wrappers insert above a model's own (torch.compile, FSDP1, activation
# checkpointing, DDP): a filter built on the bare model still answers for the wrapped one.
WRAPPER_NAMES = frozenset(
    {"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "module"}
)


def canonical_fqn(fqn: str) -> str:
    return ".".join(p for p in fqn.split(".") if p not in WRAPPER_NAMES)


@dataclass(frozen=True, eq=False)
class ModuleFilter:
    """`(module, fqn) -> bool`: True where float8 is recommended. Pass it to torchao's
    `convert_to_float8_training(model, module_filter_fn=...)`."""

    decisions: Mapping[str, bool]  # fqn -> convert, for every nn.Linear of the model walked
    by_layer: Mapping[tuple[str, int, int], bool]  # (layer type, K, N) -> convert
    recommendation: Recommendation

    @property
    def converted(self) -> frozenset[str]:
        return frozenset(fqn for fqn, yes in self.decisions.items() if yes)

    def __repr__(self) -> str:
        """The decisions per layer type, not the calibration behind them (hundreds of KB)."""
        rec = self.recommendation
        layers = rec.rows
        convert = [str(f) for f, yes in zip(layers["fqn"], layers["convert"]) if yes]
        keep = [str(f) for f, yes in zip(layers["fqn"], layers["convert"]) if not yes]
        return (
            f"ModuleFilter({rec.architecture.name} on {rec.gpu}, {rec.tokens} tokens, "
            f"{'/'.join(rec.recipes)}: float8 for {len(self.converted)} of "
            f"{len(self.decisions)} linears; convert {convert}; keep bf16 {keep})"
        )

    def __call__(self, module: object, fqn: str) -> bool:
        name = canonical_fqn(fqn)
        if name in self.decisions:
            return self.decisions[name]
        # A linear the walk did not see (layers added since): decide by its layer type and
        # shape; anything unknown stays in bf16.
        K, N = getattr(module, "in_features", None), getattr(module, "out_features", None)
        if not (isinstance(K, int) and isinstance(N, int)):
            return False
        return self.by_layer.get((layer_type(name), K, N), False)


def module_filter(
    model: object,
    tokens: int,
    *,
    gpu: str | None = None,
    recipe: str = "tensorwise",
    tp: int = 1,
    ep: int = 1,
    fsdp: int | None = None,
    recompute: str = "none",
    implementation: str | None = None,
    tp_plan: dict[str, str] | None = None,
    calibration: str | Path | Calibration | None = None,
    no_calibration: bool = False,
    policy: str = "expected",
) -> ModuleFilter:
    """The `module_filter_fn` for torchao's `convert_to_float8_training`: True for the
    nn.Linear modules of `model` (an nn.Module, unsharded) that train faster in float8.

    model may also be a zero-argument builder, called on the meta device, or a built-in
    architecture's name or a config.json path (`f8roof models`), decided by the catalog's
    linears (and, sharded, the shipped blocks `estimate` times them from). tokens: tokens per
    GPU per step. gpu, recipe (one: torchao converts with one config), implementation,
    calibration, no_calibration, policy: as for `estimate_shapes`. tp, ep, fsdp: degrees (ints
    >= 1; 1: none); each linear is decided at the shard one GPU runs. recompute: "none",
    "selective" or "full". tp_plan: the tensor-parallel style of linears the built-in plan
    does not name, by fqn suffix ('column', 'row', 'replicated'). The filter's
    `recommendation` holds the per-layer rows it decided on. Decided by the plan `f8roof
    estimate` answers with (`engine.plan.plan_model`): the conversion set whose step is the
    shortest, so a layer type that wins alone but whose recompute and collectives cost the
    step more stays in bf16 (a module's own architecture has no shipped block: its step is
    summed from the per-layer rows).
    """
    from f8roof.engine.decision import DecisionPolicy
    from f8roof.engine.plan import Asked, plan_model
    from f8roof.engine.recommend import recommend
    from f8roof.engine.resolve import Request, resolve
    from f8roof.training.catalog import (
        as_module,
        from_module,
        group_by_layer_type,
        module_linears,
        resolve_model,
    )

    _one_recipe(recipe)
    if tp_plan is not None and not isinstance(tp_plan, Mapping):
        raise ParameterError(
            "tp_plan", tp_plan, "a dict of fqn suffix -> 'column', 'row' or 'replicated'"
        )
    setup = _setup(tp=tp, ep=ep, fsdp=fsdp, recompute=recompute, step_ms=None)
    resolved = resolve(
        Request(
            gpu=None if gpu is None else _text("gpu", gpu),
            recipes=recipe,
            calibration=calibration,
            implementation=_implementation(implementation),
            no_calibration=_flag("no_calibration", no_calibration),
        )
    )
    name = model if isinstance(model, str) else None
    if name is not None:  # a catalog name or a config.json: its linears, as the catalog has them
        architecture = resolve_model(_text("model", name))
        linears = {
            linear.fqn: (linear.K, linear.N)
            for linear in architecture.linears
            if not linear.grouped
        }
    else:
        module = as_module(model)
        architecture = from_module(module, tp_plan=tp_plan)
        linears = module_linears(module)
    recommendation = recommend(
        architecture,
        tokens=_positive("tokens", tokens),
        resolved=resolved,
        setup=setup,
        policy=DecisionPolicy.from_name(_choice("policy", policy, POLICIES)),
    )
    # decided as `f8roof estimate` decides: the same plan, its blocks from the shipped
    # sharded fits where the model is a catalog name
    recommendation = plan_model(recommendation, resolved, Asked(model=name)).recommendation
    verdict = dict(zip(recommendation.rows["fqn"], recommendation.rows["convert"].astype(bool)))
    kinds = group_by_layer_type(linears)
    decisions = {canonical_fqn(fqn): bool(verdict[kind]) for fqn, kind in kinds.items()}
    by_layer = {
        (layer_type(canonical_fqn(fqn)), *linears[fqn]): decisions[canonical_fqn(fqn)]
        for fqn in linears
    }
    return ModuleFilter(decisions=decisions, by_layer=by_layer, recommendation=recommendation)


def _setup(
    *,
    tp: object,
    ep: object,
    fsdp: object,
    recompute: object,
    step_ms: object,
    tokens: object = None,
    **more: Any,
) -> RunConfig:
    """The run from the API's values, checked; `more`: the rest of `RunConfig.from_options`'s
    options, checked by the caller."""
    from f8roof.training.run_config import RunConfig

    return RunConfig.from_options(
        tp=_positive("tp", tp),
        ep=_positive("ep", ep),
        fsdp=None if fsdp is None else _positive("fsdp", fsdp),
        recompute=_choice("recompute", recompute, RECOMPUTE),
        step_ms=_step_ms(step_ms),
        tokens=None if tokens is None else _positive("tokens", tokens),
        **more,
    )


def _step_ms(value: object) -> float | None:
    return _optional_number("step_ms", value, "a measured step in milliseconds, or None")


def _optional_number(name: str, value: object, expected: str) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ParameterError(name, value, expected)
    return value


def _fqns(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ParameterError("filter_fqns", value, "a list of fqn substrings, or None")
    fqns = tuple(value)
    if not all(isinstance(f, str) for f in fqns):
        raise ParameterError("filter_fqns", value, "a list of fqn substrings, or None")
    return fqns


def _request(
    gpu: object, recipe: str, implementation: object, calibration: object, no_calibration: object
) -> Request:
    from f8roof.calibration.file import Calibration
    from f8roof.engine.resolve import Request

    if calibration is not None and not isinstance(calibration, str | Path | Calibration):
        raise ParameterError("calibration", calibration, "a file path, a Calibration or None")
    return Request(
        gpu=None if gpu is None else _text("gpu", gpu),
        recipes=recipe,
        implementation=_implementation(implementation),
        calibration=calibration,
        no_calibration=_flag("no_calibration", no_calibration),
    )


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, value, "True or False")
    return value


def _implementation(value: object) -> str | None:
    return None if value is None else _choice("implementation", value, ("torchao", "reference"))


def _positive(name: str, value: object) -> int:
    """A count or degree: an int >= 1. A bool is refused: `fsdp=True` names no degree."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = (
            "a degree, an int >= 1 (1: none)" if name in ("tp", "ep", "fsdp") else "an int >= 1"
        )
        raise ParameterError(name, value, expected)
    return value


def _choice(name: str, value: object, known: tuple[str, ...]) -> str:
    if value not in known:
        raise ParameterError(name, value, "one of " + ", ".join(repr(k) for k in known))
    return str(value)


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(name, value, "a name (a non-empty str)")
    return value


def _one_recipe(recipe: object) -> None:
    if not isinstance(recipe, str) or "," in recipe or recipe.strip() in ("", "all"):
        raise ParameterError("recipe", recipe, "one recipe name, e.g. 'tensorwise' or 'rowwise'")


def _listed(name: str, values: object) -> list[Any]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ParameterError(name, values, "a list of (M, K, N) tuples")
    return list(values)


def _shape(value: object) -> tuple[int, int, int]:
    dims = tuple(value) if isinstance(value, tuple | list) else ()
    if len(dims) != 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise ParameterError("shapes", value, "(M, K, N): three ints >= 1")
    m, k, n = dims
    return int(m), int(k), int(n)
