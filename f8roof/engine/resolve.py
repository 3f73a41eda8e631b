"""From what a user asked for to estimate configurations: the one place that decides.

Every front end (`estimate`, `report`, `plot`, `module_filter`) names a GPU, a calibration (or
none), recipes, an implementation, a context and the seed's knobs in its own way; `resolve`
turns them into one `EstimateConfig` per recipe and a `Provenance` record of what the numbers
rest on (renderers word it). The rules, once:
- calibration: the file given; else the shipped one for the GPU (traffic from generated code,
  or a measured one where it exists) unless `no_calibration`; else, for a preset, its
  datasheet timing (timing/datasheet.py: gemms tiled at its fitted fractions, MXFP8 and
  blockwise gemms at their own, bytes at its copy fraction); the seed's rooflines (60% of peak)
  only with `no_calibration` or a custom GPU;
- times: a traffic calibration is timed by the model fitted to public measurements where it
  has the GPU's part (`--times public`; the default on the architecture its kernels were
  fitted on, Hopper; asked for on Blackwell, `PublicTimes.is_default`), else by the datasheet
  model (`--times datasheet`, the only choice for other parts);
- GPU: the one asked for, which must be the one the calibration describes; else the
  calibration's; else h100. A calibration of a device without a preset (a CPU) is labelled
  with its device name and its measured ceilings stand in for a datasheet;
- implementation: the one asked for; else torchao where it has the recipe (what users train
  with) and the calibration has its graphs, else the reference;
- the seed's F flags: the roles given, else what the context implies;
- gemms: a given table or efficiency overrides the calibration's gemm times, never its bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from f8roof.calibration import public_file
from f8roof.calibration.file import (
    Calibration,
    CalibrationKind,
    datasheet_timed,
    timed_publicly,
)
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, calibration_covers, reads_off
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.hardware.presets import GPU, Vendor, resolve_gpu
from f8roof.hardware.support import (
    ScaledGemm,
    check_recipes,
    gemm_for_recipe,
    unsupported_reason,
)
from f8roof.inputs.gemm_table import load_gemm_table
from f8roof.timing.datasheet import KERNEL_FLOOR_S, datasheet_timing
from f8roof.timing.gemm import BlockScaledGemm, RooflineGemm, TableGemm
from f8roof.timing.public_times import CROSS_VALIDATED_PART, PublicTimes
from f8roof.traffic.recipes import (
    ALL_RECIPE_NAMES,
    MX_RECIPES,
    NVFP4,
    RECIPE_NAMES,
    ROLES,
    Recipe,
    RecipeError,
    Role,
    canonical_name,
    parse_scaling,
)
from f8roof.traffic.variant import (
    TE_RECIPES,
    TORCHAO_RECIPES,
    Context,
    Implementation,
    UnsupportedOnGPU,
    Variant,
    context_fused_roles,
    parse_implementation,
)

DEFAULT_GPU = "h100"


@dataclass(frozen=True)
class Request:
    """What a user asked for, in the words of the CLI (every field optional)."""

    gpu: str | None = None
    recipes: str = "tensorwise"  # one name, a comma list, or "all"
    scaling: str | None = None  # tensorwise scaling per role: "weight=delayed"
    implementation: str | None = None  # torchao | reference | te
    before: str | None = None
    after: str | None = None
    fused: str | None = None  # the seed's F: "input,grad_output" or "all"
    compile_limitations: bool = False  # the seed's L for every role
    gemm_table: str | Path | None = None
    gemm_efficiency: float | None = None
    calibration: str | Path | Calibration | None = None
    no_calibration: bool = False
    times: str | None = None  # public | datasheet; None: public where the GPU has a part


class Times(str, Enum):
    """What an estimate's times rest on."""

    MEASURED = "measured"  # a calibration measured on the GPU
    PUBLIC = "public"  # generated code's bytes, times fitted to public measurements
    DATASHEET = "datasheet"  # generated code's bytes, the preset's datasheet fractions
    DATASHEET_ONLY = "datasheet only"  # no calibration: the preset's datasheet timing
    ROOFLINE = "roofline"  # no calibration: the seed's rooflines at 60% of peak


class Gemms(str, Enum):
    """How gemms are timed."""

    CALIBRATION = "the calibration's"  # measured, or its tiled roofline
    PUBLIC = "tiled roofline fitted to public measurements"
    DATASHEET = "tiled roofline at datasheet fractions"
    BORROWED = "tiled roofline at H100 SXM's fractions"  # none published for this part
    TABLE = "a gemm table"
    EFFICIENCY = "a roofline at a given efficiency"
    SEED = "the seed's roofline at 60% of peak"


@dataclass(frozen=True)
class Provenance:
    """What an answer's numbers rest on, as data."""

    gpu: str
    times: Times
    gemms: Gemms
    calibration: str = ""  # the file: its path, or the shipped one's name
    shipped: bool = False
    # torch, triton, torchao of the generated code
    stack: dict[str, str] = field(default_factory=dict)
    codegen_gpu: str = ""
    measured_on: str = ""  # device and date of a measured calibration
    cv_median: float = math.nan  # public fit: cross-validated median speedup error on this part
    band_coverage: float = math.nan  # public fit: share of held-out cells inside the band
    fitted_on: str = ""  # public fit: the part its float8 linears were measured on
    transferred: bool = False  # public fit: another architecture's kernel model (asked for)
    transfer_check: float = math.nan  # and how much faster a published kernel ran than it says
    gemm_table: str = ""
    gemm_efficiency: float = math.nan
    memory_efficiency: float = math.nan  # datasheet timing's copy fraction
    missing: tuple[str, ...] = field(default=())  # variants the shipped file lacks
    # datasheet gemms: the families whose fraction is H100 SXM's, carried over to this part
    carried: tuple[str, ...] = field(default=())
    # datasheet gemms: (family, the family whose fraction it takes) with no public sweep of it
    assumed: tuple[tuple[str, str], ...] = field(default=())


@dataclass(frozen=True)
class Resolved:
    configs: tuple[EstimateConfig, ...]  # one per recipe, in the order asked
    skipped: tuple[str, ...]  # recipes asked for that the calibration lacks (several asked)
    provenance: Provenance

    @property
    def config(self) -> EstimateConfig:
        return self.configs[0]

    @property
    def gpu(self) -> GPU:
        return self.configs[0].gpu

    @property
    def calibration(self) -> Calibration | None:
        return self.configs[0].calibration


def all_recipes(implementation: str | None = None, gpu: GPU | None = None) -> tuple[str, ...]:
    """What 'all' means: the recipes torchao converts with (what its advice can be), unless
    the reference implementation is asked for, which has delayed and static scaling too; on a
    part with MX gemms (Blackwell, gfx950) torchao's MXFP8 recipes too (not the emulated one,
    a debugging aid), and on one with NVFP4 gemms (Blackwell) torchao's NVFP4. Transformer
    Engine's: MXFP8BlockScaling on a part with MXFP8 gemms, else its two tensorwise recipes
    (like torchao's, not blockwise)."""
    asked = None if implementation is None else parse_implementation(implementation)
    if asked is Implementation.TE:  # the part's: MXFP8 on Blackwell, tensorwise elsewhere
        if gpu is not None and unsupported_reason(gpu, ScaledGemm.MXFP8) is None:
            return tuple(name for name in TE_RECIPES if name in MX_RECIPES)
        return tuple(name for name in TE_RECIPES if gemm_for_recipe(name) is ScaledGemm.TENSORWISE)
    if asked is Implementation.REFERENCE:
        return RECIPE_NAMES
    names = tuple(name for name in RECIPE_NAMES if name in TORCHAO_RECIPES)
    if gpu is not None and unsupported_reason(gpu, ScaledGemm.MXFP8) is None:
        names += tuple(name for name, (_, emulated) in MX_RECIPES.items() if not emulated)
    if gpu is not None and unsupported_reason(gpu, ScaledGemm.NVFP4) is None:
        names += (NVFP4,)
    return names


def recipe_names(text: str) -> list[str]:
    """A comma list of recipe names in f8roof's spelling (`mxfp8` -> `mxfp8_rceil`)."""
    return [canonical_name(t) for t in text.split(",") if t.strip()]


def parse_recipes(
    text: str,
    scaling: str | None = None,
    implementation: str | None = None,
    gpu: GPU | None = None,
) -> list[Recipe]:
    """'all' (see `all_recipes`), one recipe name, or a comma list of them."""
    names = list(all_recipes(implementation, gpu)) if text.strip() == "all" else recipe_names(text)
    if not names:
        raise RecipeError("no recipe given; known: all, " + ", ".join(ALL_RECIPE_NAMES))
    if scaling and len(names) > 1:
        raise RecipeError(
            f"{term('scaling')} sets one tensorwise recipe; give a single {term('recipe')} with it"
        )
    per_role = parse_scaling(scaling) if scaling else None
    return list(dict.fromkeys(Recipe.from_name(n, per_role) for n in names))


def one_recipe(text: str, scaling: str | None = None) -> Recipe:
    """Commands that compile one variant (compare) take one recipe name."""
    recipes = parse_recipes(text, scaling)
    if len(recipes) > 1:
        raise F8RoofError(f"give one recipe, not {text!r}")
    return recipes[0]


def load_calibration(spec: str | Path | None, gpu: GPU) -> tuple[Calibration | None, str]:
    """A calibration file named by the user, or "shipped" for the GPU's shipped one; with the
    path it came from (None, "" when none is asked for)."""
    if spec is None:
        return None, ""
    path = shipped_calibration(gpu) if spec == "shipped" else Path(spec)
    if path is None:
        raise F8RoofError(f"no shipped calibration for {gpu.name}: give a file")
    return Calibration.load(path), str(path)


def parse_roles(text: str | None) -> frozenset[Role]:
    if not text:
        return frozenset()
    if text.strip() == "all":
        return frozenset(Role)
    try:
        return frozenset(Role(p.strip()) for p in text.split(",") if p.strip())
    except ValueError:
        raise F8RoofError(f"bad role list {text!r}; roles: input, weight, grad_output") from None


def _implementation(
    text: str | None, recipe: Recipe, context: Context, calibration: Calibration | None
) -> Implementation:
    """The one asked for; else torchao where it has the recipe, unless the calibration has
    only the reference's graphs of it."""
    if text is not None:
        return parse_implementation(text)
    if recipe.is_block_scaled:  # MX and blockwise: torchao's only
        return Implementation.TORCHAO
    candidates = [Implementation.REFERENCE]
    if recipe.name in TORCHAO_RECIPES:
        candidates.insert(0, Implementation.TORCHAO)
    if calibration is not None:
        for impl in candidates:
            if calibration.has(Variant(recipe, impl, context).key):
                return impl
    return candidates[0]


TIMES = ("public", "datasheet")


def _timed(calibration: Calibration, times: str | None, gpu: GPU | None = None) -> Calibration:
    """The traffic calibration timed as asked (see the module docstring)."""
    if times is not None and times not in TIMES:
        raise F8RoofError(f"unknown {term('times')} {times!r}; known: {', '.join(TIMES)}")
    if calibration.kind is not CalibrationKind.TRAFFIC:
        if times == "datasheet" or (times == "public" and calibration.public is None):
            raise F8RoofError(
                f"{term('times')} {times}: the calibration is {calibration.kind.value}, its "
                "times are its own"
            )
        return calibration
    if times == "datasheet":
        return _on_datasheet(calibration, gpu)
    model = public_file.shipped()
    part = gpu.name if gpu is not None else calibration.environment.gpu or ""
    has_part = model is not None and model.part(part) is not None
    if model is not None and has_part and times is None and not model.is_default(part):
        return _on_datasheet(calibration, gpu)
    if not has_part:
        if times == "public":
            fitted = "none" if model is None else ", ".join(p.part for p in model.parts)
            raise F8RoofError(
                f"{term('times')} public: no public time model for "
                f"{calibration.environment.label} (fitted: {fitted}); use {term('times')} "
                "datasheet"
            )
        return _on_datasheet(calibration, gpu)
    assert model is not None, "a part was found in it"
    return timed_publicly(calibration, model, part)


def _on_datasheet(calibration: Calibration, gpu: GPU | None) -> Calibration:
    """A traffic calibration timed by `gpu`'s datasheet model where `gpu` runs its code under
    another datasheet (`GPU.code_of`: b200-750w on b200's bytes), else as it is."""
    if gpu is None or gpu.name == calibration.environment.gpu:
        return calibration
    return datasheet_timed(calibration, datasheet_timing(gpu))


def _calibration(request: Request, gpu: GPU | None) -> tuple[Calibration | None, str, bool]:
    """The calibration, the name it goes by ('' for none) and whether it is the shipped one."""
    given = request.calibration
    if given is not None and request.no_calibration:
        raise F8RoofError(
            f"{term('calibration')} and {term('no_calibration')} contradict each other"
        )
    if isinstance(given, Calibration):
        return given, "", False
    if given is not None:
        return _timed(Calibration.load(given), request.times, gpu), str(given), False
    if request.no_calibration:
        if request.times is not None:
            raise F8RoofError(
                f"{term('times')} needs a calibration; {term('no_calibration')} has none"
            )
        return None, "", False
    path = shipped_calibration(gpu or resolve_gpu(DEFAULT_GPU))
    if path is None:
        if request.times == "public":
            raise F8RoofError(
                f"{term('times')} public: no shipped calibration for "
                f"{(gpu or resolve_gpu(DEFAULT_GPU)).name}"
            )
        return None, "", False
    return _timed(Calibration.load(path), request.times, gpu), path.name, True


def _cv_median(public: PublicTimes | None, part: str) -> float:
    """The heatmap's cross-validated error where it applies: on the part it ran on."""
    error = None if public is None else public.cv_error(part)
    return math.nan if error is None else error


def _band_coverage(public: PublicTimes | None, part: str) -> float:
    """The band's held-out coverage where it was checked: on the heatmap's part."""
    coverage = None if public is None else public.band_coverage(part)
    return math.nan if coverage is None else coverage


def _provenance(
    calibration: Calibration | None,
    name: str,
    shipped: bool,
    gpu: GPU,
    request: Request,
    gemms: Gemms | None,
) -> Provenance:
    """What the numbers rest on: the calibration's kind and stack; `gemms` the gemm timing
    a table or an efficiency overrides (None: the calibration's, or the seed's roofline)."""
    extra: dict[str, Any] = {
        "gemm_table": "" if request.gemm_table is None else str(request.gemm_table),
        "gemm_efficiency": (
            math.nan if request.gemm_efficiency is None else request.gemm_efficiency
        ),
    }
    if calibration is None:
        return Provenance(gpu.name, Times.ROOFLINE, gemms or Gemms.SEED, **extra)
    env = calibration.environment
    if calibration.is_measured:
        times, gemm = Times.MEASURED, Gemms.CALIBRATION
    elif calibration.kind is CalibrationKind.PUBLIC:
        times, gemm = Times.PUBLIC, Gemms.PUBLIC
    else:
        times = Times.DATASHEET
        gemm = Gemms.DATASHEET if calibration.datasheet_gemm else Gemms.CALIBRATION
    datasheet = gemms is None and gemm is Gemms.DATASHEET
    carried, assumed = (_hopper_carried(gpu), _assumed(gpu)) if datasheet else ((), ())
    return Provenance(
        gpu=gpu.name,
        times=times,
        gemms=gemms or gemm,
        calibration=name,
        shipped=shipped,
        stack={"torch": env.torch, "triton": env.triton, "torchao": env.torchao},
        codegen_gpu=env.gpu or "",
        measured_on=f"{env.label}, {env.date}" if calibration.is_measured else "",
        cv_median=_cv_median(calibration.public, gpu.name),
        band_coverage=_band_coverage(calibration.public, gpu.name),
        fitted_on="" if calibration.public is None else CROSS_VALIDATED_PART,
        transferred=calibration.public is not None and not calibration.public.is_default(gpu.name),
        transfer_check=math.nan
        if calibration.public is None
        else calibration.public.transfer_check(gpu.name),
        carried=carried,
        assumed=assumed,
        **extra,
    )


def _hopper_carried(gpu: GPU) -> tuple[str, ...]:
    """The gemm families whose fraction on `gpu` is H100 SXM's, carried over with no source
    for the part (hardware/efficiency.py's `hopper_carried`)."""
    if gpu.efficiency is None:
        return ()
    return tuple(f.family for f in gpu.efficiency.families if f.hopper_carried)


def _assumed(gpu: GPU) -> tuple[tuple[str, str], ...]:
    """(family, the family whose fraction it takes) for the gemm families no public sweep times
    on `gpu` (hardware/efficiency.py's `assumed_as`)."""
    if gpu.efficiency is None:
        return ()
    return tuple((f.family, f.assumed_as) for f in gpu.efficiency.families if f.assumed_as)


def calibrated_gpu(calibration: Calibration, asked: GPU | None) -> GPU:
    """The GPU a calibration describes; a --gpu naming another one is refused."""
    env = calibration.environment
    if env.gpu is not None:
        preset = resolve_gpu(env.gpu)
        if asked is not None and asked.silicon == preset.name:
            return asked  # the preset itself, or it at a power limit
        if asked is not None:
            raise F8RoofError(
                f"the calibration describes {env.label}, not {asked.name}: drop {term('gpu')} "
                "or give a calibration of that GPU"
            )
        return preset
    if asked is not None:
        raise F8RoofError(
            f"the calibration was measured on {env.label}, which is no GPU preset: "
            f"drop {term('gpu')}"
        )
    ceilings = calibration.ceilings
    return GPU(
        env.device_name,
        ceilings.bf16_flops,
        ceilings.fp8_flops,
        ceilings.copy_bandwidth_bytes_per_s,
        sm_count=env.sm_count,
    )


def resolve(request: Request, *, many_recipes: bool = True) -> Resolved:
    """One EstimateConfig per recipe asked for; see the module docstring for the rules. Bad
    values (an unknown GPU, recipe or context) raise F8RoofError, for Python callers too."""
    try:
        return _resolve(request, many_recipes=many_recipes)
    except ModelError as e:
        raise F8RoofError(e.marked) from None


def _check_te_part(implementation: str | None, gpu: GPU, names: str) -> None:
    """`--impl te` models Transformer Engine's recipes where its casts are read off
    (traffic/te.py): on Hopper its tensorwise recipes, whose casts write each operand's
    transposed copy (TN-only fp8 gemms), and Float8BlockScaling; on Blackwell
    MXFP8BlockScaling. TE's tensorwise casts on Blackwell write no transposed copy (not
    modelled) and TE on AMD is another port: refused in one line rather than answered with
    Hopper's bytes."""
    if implementation is None or parse_implementation(implementation) is not Implementation.TE:
        return
    if gpu.vendor is not Vendor.NVIDIA or gpu.compute_capability[0] not in (9, 10):
        raise UnsupportedOnGPU(
            f"{term('implementation')} te models Transformer Engine on Hopper and Blackwell, not "
            f"{gpu.name} ({gpu.arch_label})"
        )
    if gpu.compute_capability[0] == 9:
        return
    for name in filter(None, (n.strip() for n in names.split(","))):
        if name == "all" or not name.startswith(("tensorwise", "blockwise", "rowwise")):
            continue  # MX, or a name the recipe parser refuses listing the known ones
        raise UnsupportedOnGPU(
            f"{term('implementation')} te on {gpu.arch_label} models MXFP8BlockScaling "
            f"(mxfp8), not {name}: TE's other casts there are not Hopper's"
        )


def _resolve(request: Request, *, many_recipes: bool) -> Resolved:
    asked = resolve_gpu(request.gpu) if request.gpu else None
    names = ",".join(recipe_names(request.recipes))
    if asked is not None:
        check_recipes(asked, names)  # MX on an H100: one line, before anything else
    calibration, name, shipped = _calibration(request, asked)
    gpu = calibrated_gpu(calibration, asked) if calibration else asked or resolve_gpu(DEFAULT_GPU)
    check_recipes(gpu, names)
    _check_te_part(request.implementation, gpu, names)
    recipes = parse_recipes(request.recipes, request.scaling, request.implementation, gpu)
    if len(recipes) > 1 and not many_recipes:
        raise F8RoofError(
            f"several recipes are compared per layer: use them with {term('model')}, or give "
            f"one {term('recipe')}"
        )
    if request.gemm_table is not None:
        _check_table_recipes(recipes)
    elif (
        request.gemm_efficiency is None
        and calibration is not None
        and any(r.is_nvfp4 for r in recipes)
        and not _times_fp4_gemms(calibration)
    ):
        if request.recipes.strip() != "all":
            raise F8RoofError(
                "the calibration times no nvfp4 gemms (its gemm families are bf16 and float8's)"
            )
        recipes = [r for r in recipes if not r.is_nvfp4]  # 'all': those it can time
    named = asked is not None or request.calibration is not None  # else h100 by default
    gemm, gemm_kind = _gemm(request, gpu, calibration, gpu_named=named)
    # the calibration's bytes stand, a given table's or efficiency's gemm times replace its
    provenance = _provenance(calibration, name, shipped, gpu, request, gemm_kind)
    context = Context.from_names(request.before, request.after)
    fused = parse_roles(request.fused) if request.fused else context_fused_roles(context)
    base = EstimateConfig(
        recipe=recipes[0],
        gpu=gpu,
        implementation=_implementation(request.implementation, recipes[0], context, calibration),
        context=context,
        fused=fused,
        limited=frozenset(ROLES) if request.compile_limitations else frozenset(),
        gemm=gemm,
        calibration=calibration,
    )
    configs = [
        replace(
            base,
            recipe=r,
            implementation=_implementation(request.implementation, r, context, calibration),
        )
        for r in recipes
    ]
    if calibration is None:
        if not request.no_calibration:
            configs, provenance = _datasheet(configs, gemm, provenance)
        return Resolved(tuple(configs), (), provenance)
    usable = [c for c in configs if calibration_covers(calibration, c.variant)]
    shipped = request.calibration is None
    if shipped and not usable:
        # What the shipped file lacks (a per-role scaling, a context it has no graphs of) is
        # estimated on the datasheet rooflines, saying so; a file the user gave is refused.
        roofline = [replace(c, calibration=None, gemm=gemm) for c in configs]
        bare = _provenance(None, "", False, gpu, request, gemm_kind)
        timed, provenance = _datasheet(roofline, gemm, bare)
        missing = tuple(c.variant.key for c in configs)
        return Resolved(tuple(timed), (), replace(provenance, missing=missing))
    if len(configs) == 1 or not usable:
        for c in configs:
            # refuses, naming what the file has
            calibration.variant(c.variant.baseline.key if reads_off(c.variant) else c.variant.key)
    skipped = tuple(c.variant.key for c in configs if c not in usable)
    return Resolved(tuple(usable), skipped, provenance)


def _check_table_recipes(recipes: list[Recipe]) -> None:
    """A gemm table holds bf16 and fp8 (tensorwise, rowwise) gemms: a block-scaled recipe's
    gemms are other kernels, which it would time silently as fp8's."""
    scaled = [r.name for r in recipes if r.is_block_scaled and not r.emulated]
    if scaled:
        raise F8RoofError(
            f"{term('gemm_table')} holds bf16 and fp8 gemms, not {', '.join(scaled)}'s "
            f"block-scaled ones: drop {term('gemm_table')}"
        )


def _times_fp4_gemms(calibration: Calibration) -> bool:
    """Whether the calibration's gemm model has NVFP4's gemms, which are no float8 family: a
    measured gemm table has not (a preset's tiled roofline has, `Calibration.gemm_model`)."""
    model = calibration.gemm_model
    if isinstance(model, TableGemm):
        return any(dtype == "nvfp4" for dtype, _ in model.tables)
    return any(dtype == "nvfp4" for dtype, _ in model.efficiencies)


def _datasheet(
    configs: list[EstimateConfig],
    gemm: RooflineGemm | TableGemm | None,
    provenance: Provenance,
) -> tuple[list[EstimateConfig], Provenance]:
    """No calibration for a preset: its datasheet timing (timing/datasheet.py), not the seed's
    60% roofline: gemms tiled at the preset's fitted fractions (a block-scaled recipe's at its
    own family), worst and ideal bytes at its copy fraction. A given gemm table or efficiency
    still times the gemms. A custom GPU keeps the seed's rooflines."""
    gpu = configs[0].gpu
    if gpu.efficiency is None:
        return configs, provenance
    timing = datasheet_timing(gpu)
    tiled = timing.all_gemms
    assert tiled is not None
    timed = [
        replace(
            c,
            gemm=gemm if gemm is not None else BlockScaledGemm.of(tiled, c.recipe),
            memory_efficiency=timing.memory_efficiency,
            launch_floor_s=KERNEL_FLOOR_S,
        )
        for c in configs
    ]
    own = not gpu.efficiency.borrowed
    return timed, replace(
        provenance,
        times=Times.DATASHEET_ONLY,
        gemms=provenance.gemms
        if gemm is not None
        else (Gemms.DATASHEET if own else Gemms.BORROWED),
        memory_efficiency=timing.memory_efficiency,
        carried=_hopper_carried(gpu) if gemm is None and own else (),
        assumed=_assumed(gpu) if gemm is None and own else (),
    )


def _gemm(
    request: Request, gpu: GPU, calibration: Calibration | None, *, gpu_named: bool = True
) -> tuple[RooflineGemm | TableGemm | None, Gemms | None]:
    """A gemm model that overrides the calibration's (None: the calibration's, or the
    datasheet roofline at the seed's efficiency), and its kind. A table's times are bounded
    by the GPU's peak when one is named (`gpu_named`), else by the fastest preset's."""
    if request.gemm_table is not None and request.gemm_efficiency is not None:
        raise F8RoofError(
            f"{term('gemm_table')} and {term('gemm_efficiency')} contradict each other"
        )
    if request.gemm_table is not None:
        table = load_gemm_table(request.gemm_table, gpu=gpu if gpu_named else None)
        return table, Gemms.TABLE
    if request.gemm_efficiency is not None:
        roofline = RooflineGemm(gpu, gemm_efficiency=request.gemm_efficiency)
        return roofline, Gemms.EFFICIENCY
    return None, None
