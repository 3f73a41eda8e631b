"""`--setup FILE`: a training setup as users write it, a torchtitan job config in TOML.

torchtitan's job configs of the published 2024-25 runs are TOML files (torchtitan moved to
Python config objects in 2026): sections [model], [training], [parallelism],
[activation_checkpoint] and the converter's carry what f8roof needs; every other torchtitan
section (job, profiling, optimizer, checkpoint, ...) is accepted and ignored. The converter's
section comes in two layouts (`LAYOUTS`): [float8] / [mx] with `converters = ["float8"]` or
`["mx"]` (2024-25), and [quantize.linear.float8] / [quantize.linear.mx] with converters
`quantize.linear.float8` / `quantize.linear.mx` (torchtitan's `Quantize` job config, late 2025,
and the TOML twins of its 2026 configs), [quantize.grouped_mm.*] `fqns` naming routed experts.
MX reads torchtitan's MXLinear defaults (recipe_name "mxfp8_cublas", filter_fqns ["output"]);
its recipe names map to f8roof's (`traffic.recipes.canonical_name`). Key names are read from
torchtitan's JobConfig at two commits: 441a63ca4 (2025-05-20, torchtitan/config_manager.py,
the HEAD of pytorch/torchtitan#1207) and cf30b2902 (2025-07, torchtitan/config/job_config.py,
where training.batch_size became local_batch_size). A key torchtitan did not have there is an
error naming it and its section (a typo must not silently become a default).

The earlier layout (`_earlier_layout`, torchtitan before 785c34c99, 2025-03-18: its 2024-12
benchmark's configs, config_manager.py at 9dec370) kept the parallel degrees in [training] and
the rest of the parallelism in [experimental], counted pipeline microbatches
(`pipeline_parallel_microbatches`, default the pipeline degree, until 5e2033c75 made it a size,
2025-04-07), and always kept the output projection in bf16 (`module_filter_fn` was
`fqn != "output"` until a6524d8a0, 2025-04-07); [model] norm_type (until 2025-04-23) names the
norm, and [float8] scaling_type_* the scaling (dynamic, or the delayed scaling f8roof refuses).

The f8roof short form uses the same sections and keys; [model] name may be an f8roof
built-in (`name = "llama3-8b"`, no flavor), and an optional [f8roof] section holds `gpu`,
`gpus` (the world size, for data_parallel_shard_degree -1), `step_ms` (the measured bf16 step,
as --step-ms), `network_gbps`, `emulate_precision_casts`
(false: rowwise compiled as torchtitan did before it set that Inductor option, 2025-04-16;
`RunConfig.emulate_precision_casts`) and `fuse_qkv` (true: torchtitan's fused q/k/v
projection, its llama3 and qwen3 models' default from 2026-06-24, which a model builder's
argument sets and no job config key; `RunConfig.fuse_qkv`).

Defaults for keys left out are torchtitan's (JobConfig of 2025), listed in
the run's `assumptions` (notes); keys without a sensible default (model name and flavor, seq_len,
the batch size) are required. Every key read is honoured or refused in one line: expert-tensor
parallelism (degrees above 1), zero-bubble pipeline schedules, float8 emulation, converters
other than float8 and MX, FSDP's CPU offload, parameters other than bf16 under fp32 master
weights, a schedule CSV, compile backends other than Inductor, async TP without compile (as
torchtitan refuses it), an [activation_checkpoint] mode not spelled as torchtitan compares it,
and `nvfp4_bf16_tail` in a converter's filter_fqns (NVFP4's tail, which those converters match
against no linear) are refused; a key that changes nothing f8roof models is accepted and
ignored, and a section f8roof does not read ([job], ...) must still be a table.
`global_batch_size` above local batch x data-parallel ranks is gradient accumulation
(`RunConfig.accumulation`); `disable_loss_parallel` gathers the logits before the loss
(`RunConfig.loss_parallel`); [loss] num_chunks is torchtitan's 2026 ChunkedCELoss (the qwen3
configs' loss: the logits one slice of the sequence at a time, `RunConfig.loss_chunks`).

The names of layers both ways, `filter_fqns` and converter lines: f8roof/training/torchtitan_names.py.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

from f8roof.errors import F8RoofError, called
from f8roof.files import read_text
from f8roof.notes import Note, Topic, note
from f8roof.traffic.recipes import MX_RECIPES, canonical_name
from f8roof.training.checkpointing import TOML_LAYOUT_POLICY, Recompute
from f8roof.training.config_registry import is_config_name, named_config, with_overrides
from f8roof.training.run_config import (
    REDUCE_DTYPES,
    RESHARD,
    Pipeline,
    PipelineError,
    RunConfig,
    check_step_ms,
)
from f8roof.training.torchtitan_names import BF16_TAIL, FLOAT8_LAYOUT, RECIPES, ConfigLayout

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI (pyproject's tomli marker)
    import tomli as tomllib


AUTO_FILTER = "auto_filter_small_kn"  # torchtitan's flag for torchao's _auto_filter_for_recipe
# The converter sections f8roof reads (the 2024-25 layout, then torchtitan's Quantize config
# of late 2025 on: the module docstring), for its one line about a section it does not know.
LAYOUTS = "[float8]/[mx] (2024-25), [quantize.linear.float8|mx]"
# the converter names read, each also the name of the section holding its keys
CONVERTERS = frozenset(
    {
        "float8",
        "mx",
        "quantize.linear.float8",
        "quantize.linear.mx",
        "quantize.grouped_mm.float8",
        "quantize.grouped_mm.mx",
    }
)
# torchtitan's MXLinear job config defaults (config/job_config.py, 2025)
MX_DEFAULT_RECIPE = "mxfp8_cublas"
MX_DEFAULT_FILTERS = ("output",)

# torchtitan (model name, flavor) -> f8roof built-in (f8roof/training/catalog.py BUILTIN_NAMES).
# Flavors from torchtitan's model registries: models/llama3 ("8B", "70B", "405B"),
# experiments/llama4 ("17bx16e", "17bx128e"), models/deepseek_v3 ("16B", "671B"),
# models/qwen3 ("8B", "14B", "32B", "30B-A3B", "235B-A22B"; pytorch/torchtitan@238fa9953
# torchtitan/models/qwen3/__init__.py, its dimensions the Hugging Face configs').
TORCHTITAN_MODELS: dict[tuple[str, str], str] = {
    ("llama3", "8B"): "llama3-8b",
    ("llama3", "70B"): "llama3-70b",
    ("llama3", "405B"): "llama3-405b",
    ("llama4", "17bx16e"): "llama4-scout",
    ("llama4", "17bx128e"): "llama4-maverick",
    ("deepseek_v3", "16B"): "deepseek-v2-lite",
    ("deepseek_v3", "671B"): "deepseek-v3",
    ("qwen3", "8B"): "qwen3-8b",
    ("qwen3", "14B"): "qwen3-14b",
    ("qwen3", "32B"): "qwen3-32b",
    ("qwen3", "30B-A3B"): "qwen3-30b-a3b",
    ("qwen3", "235B-A22B"): "qwen3-235b-a22b",
}
F8ROOF_MODELS = frozenset(TORCHTITAN_MODELS.values()) | {
    "mistral-7b",
    "qwen2.5-7b",
    "gpt2",
    "mixtral-8x7b",
}

# [float8] keys of torchao's delayed-scaling era (torchtitan until early 2025)
SCALING_KEYS = ("scaling_type_input", "scaling_type_weight", "scaling_type_grad_output")
# torchtitan's norms then ([model] norm_type): the one its llama blocks (and f8roof's) use,
# and its Triton kernel of the same RMSNorm (eager only: torchtitan refuses it with compile)
NORMS = ("rmsnorm", "fused_rmsnorm")
# torchtitan's [activation_checkpoint] mode values, compared as written (config_manager.py at
# 441a63ca4: Literal["selective", "full", "none"])
AC_MODES = ("none", "full", "selective")
# the earlier layout's parallelism keys, by the section that held them (config_manager.py at
# 9dec370, 2024-12-26), read as the later [parallelism]'s
EARLIER_PARALLELISM = {
    "training": (
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "tensor_parallel_degree",
        "disable_loss_parallel",
    ),
    "experimental": (
        "context_parallel_degree",
        "context_parallel_rotate_method",
        "enable_async_tensor_parallel",
        "enable_compiled_autograd",
        "pipeline_parallel_degree",
        "pipeline_parallel_microbatches",
        "pipeline_parallel_schedule",
        "pipeline_parallel_schedule_csv",
        "pipeline_parallel_split_points",
    ),
}
EARLIER_LAYOUT = "torchtitan before 2025-03-18 (config_manager.py @9dec370)"

# where the defaults of keys a setup leaves out come from
JOB_CONFIG = "torchtitan JobConfig (config_manager.py 2025-05, config/job_config.py 2025-07)"
# Keys of the sections f8roof reads, per torchtitan's JobConfig (see the module docstring):
# the ones used, and the ones that exist there but change nothing f8roof models.
USED_KEYS: dict[str, frozenset[str]] = {
    "model": frozenset({"name", "flavor", "converters", "norm_type"}),
    "training": frozenset(
        {
            "local_batch_size",
            "batch_size",
            "seq_len",
            "compile",
            "mixed_precision_reduce",
            # their defaults, or refused (`_check_training`)
            "global_batch_size",
            "enable_cpu_offload",
            "dtype",
            "mixed_precision_param",
        }
    ),
    "parallelism": frozenset(
        {
            "data_parallel_shard_degree",
            "data_parallel_replicate_degree",
            "fsdp_reshard_after_forward",
            "tensor_parallel_degree",
            "enable_async_tensor_parallel",
            "pipeline_parallel_degree",
            "pipeline_parallel_schedule",
            "pipeline_parallel_microbatch_size",
            "pipeline_parallel_microbatches",  # a count, until 2025-04-07
            "pipeline_parallel_split_points",
            "pipeline_parallel_layers_per_stage",
            "context_parallel_degree",
            "context_parallel_rotate_method",
            "expert_parallel_degree",
            "expert_tensor_parallel_degree",  # 1, or refused
            "disable_loss_parallel",
            "pipeline_parallel_schedule_csv",  # empty, or refused
        }
    ),
    "activation_checkpoint": frozenset({"mode", "selective_ac_option"}),
    "float8": frozenset(
        {
            "recipe_name",
            "filter_fqns",
            "enable_fsdp_float8_all_gather",
            "precompute_float8_dynamic_scale_for_fsdp",
            "enable_float8_linear",  # the 2024 layout's switch (before [model] converters)
            "moe_fqns_prototype",
            "emulate",  # false, or refused
            *SCALING_KEYS,  # dynamic, or refused (delayed)
        }
    ),
    "mx": frozenset({"recipe_name", "filter_fqns"}),
    "grouped_mm": frozenset({"fqns"}),  # [quantize.grouped_mm.float8|mx]: routed experts
    "compile": frozenset({"enable", "components", "backend"}),  # torchtitan's later [compile]
    "loss": frozenset({"num_chunks"}),  # ChunkedCELoss.Config (2026): `RunConfig.loss_chunks`
    "f8roof": frozenset(
        {"gpu", "gpus", "step_ms", "network_gbps", "emulate_precision_casts", "fuse_qkv"}
    ),
}
IGNORED_KEYS: dict[str, frozenset[str]] = {
    "model": frozenset({"tokenizer_path", "hf_assets_path", "print_after_conversion"}),
    "training": frozenset(
        {
            "dataset",
            "dataset_path",
            "max_norm",
            "steps",
            "gc_freq",
            "gc_debug",
            "seed",
            "deterministic",
            "warmup_steps",  # pre-2025 layouts kept the scheduler here
        }
    ),
    "parallelism": frozenset(
        {
            "enable_compiled_autograd",
            "module_fqns_per_model_part",
            "pipeline_parallel_first_stage_less_layers",
            "pipeline_parallel_last_stage_less_layers",
        }
    ),
    "activation_checkpoint": frozenset(
        {"per_op_sac_force_recompute_mm_shapes_by_fqns", "early_stop"}
    ),
    "float8": frozenset({"force_recompute_fp8_weight_in_bwd"}),
    "mx": frozenset({"mxfp8_dim1_cast_kernel_choice", "use_fp8_dim1_cast_triton_kernel"}),
    "grouped_mm": frozenset({"recipe_name", "pad_multiple"}),
    "compile": frozenset(),
    "loss": frozenset(),
    "f8roof": frozenset(),
}
# torchtitan sections f8roof does not read at all
IGNORED_SECTIONS = frozenset(
    {
        "job",
        "profiling",
        "metrics",
        "optimizer",
        "lr_scheduler",
        "checkpoint",
        "comm",
        "memory_estimation",
        "fault_tolerance",
        "experimental",
        "validation",
    }
)


@dataclass(frozen=True)
class SetupFile:
    """What a setup file asks: the run (`RunConfig`: the model, the tokens each rank runs, how
    it is parallelized and checkpointed, torchao's float8 switches, the GPU and step of its
    [f8roof] section) and its float8 recipe."""

    run: RunConfig
    recipe: str = "tensorwise"  # torchtitan's name (rowwise_with_gw_hp, mxfp8_cublas)
    float8: bool = True  # the float8 converter is on (or the file asks about float8 at all)
    compile: bool = False
    source: str = ""  # the file, and which layout it was read as
    layout: ConfigLayout = FLOAT8_LAYOUT  # how the file spells the converter

    def __post_init__(self) -> None:
        if self.run.model not in F8ROOF_MODELS:
            raise F8RoofError(f"setup: unknown f8roof model {self.run.model!r}")
        if self.run.tokens is None:
            raise F8RoofError("setup: the tokens per rank are not known")
        if self.recipe not in RECIPES and not self.is_mx:
            raise F8RoofError(f"setup: unknown recipe {self.recipe!r}; known: {', '.join(RECIPES)}")

    @property
    def is_mx(self) -> bool:
        return canonical_name(self.recipe) in MX_RECIPES

    @property
    def f8roof_recipe(self) -> str:
        """The recipe's name in f8roof (torchtitan's rowwise_with_gw_hp is rowwise_gw_hp,
        mxfp8_cublas is mxfp8_rceil)."""
        return canonical_name(self.recipe)


def _fail(message: str) -> F8RoofError:
    return F8RoofError(f"setup: {message}")


class _Section:
    """One TOML table, read with type checks that name the key and the section."""

    def __init__(self, name: str, values: Mapping[str, Any], path: str) -> None:
        self.name = name
        self.values = values
        self.path = path
        self.notes: list[Note] = []  # how a value was read, where it was not as written

    def has(self, key: str) -> bool:
        return key in self.values

    def _where(self, key: str) -> str:
        return f"'{key}' in [{self.name}] of {self.path}"

    def require(self, key: str) -> Any:
        if key not in self.values:
            raise _fail(f"missing key '{key}' in [{self.name}] of {self.path}")
        return self.values[key]

    @overload
    def integer(self, key: str, default: int, *, minimum: int = 1) -> int: ...

    @overload
    def integer(self, key: str, default: None = None, *, minimum: int = 1) -> int | None: ...

    def integer(self, key: str, default: int | None = None, *, minimum: int = 1) -> int | None:
        value = self.values.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(f"{self._where(key)} must be an integer >= {minimum} (got {value!r})")
        return value

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.values.get(key, default)
        if not isinstance(value, bool):
            raise _fail(f"{self._where(key)} must be true or false (got {value!r})")
        return value

    @overload
    def string(self, key: str, default: str) -> str: ...

    @overload
    def string(self, key: str, default: None = None) -> str | None: ...

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self.values.get(key, default)
        if value is not None and not isinstance(value, str):
            raise _fail(f"{self._where(key)} must be a string (got {value!r})")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        """A list of strings as given (torchtitan reads a TOML list as it is: `[""]` is one
        entry, the empty string), or torchtitan's older comma-separated string, split as its
        `string_list` splits it (stripped, blanks dropped)."""
        value = self.values.get(key, [])
        given = value
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(f"{self._where(key)} must be a list of strings (got {value!r})")
        read = tuple(value)
        if isinstance(given, str):
            self.notes.append(
                note(
                    Topic.SETUP_STRING_LIST,
                    section=self.name,
                    key=key,
                    value=given,
                    read=list(read),
                )
            )
        return read


def _check_keys(doc: Mapping[str, Any], path: str) -> None:
    for section, values in doc.items():
        if section in IGNORED_SECTIONS:
            if not isinstance(values, Mapping):  # `job = 5`: torchtitan's [job] is a table
                raise _fail(f"'{section}' in {path} must be a table ([{section}])")
            continue
        if section not in USED_KEYS or section == "grouped_mm":
            raise _fail(f"unknown section [{section}] in {path}; read: {LAYOUTS}")
        _check_table(section, values, path, kind=section)


def _check_table(section: str, values: Any, path: str, *, kind: str) -> None:
    """A table's keys against the keys of its `kind` (a section of USED_KEYS)."""
    if not isinstance(values, Mapping):
        raise _fail(f"[{section}] in {path} must be a table")
    known = USED_KEYS[kind] | IGNORED_KEYS[kind]
    for key in values:
        if key not in known:
            raise _fail(f"unknown key '{key}' in [{section}] of {path}")


def _converter_tables(doc: Mapping[str, Any], path: str) -> dict[str, _Section]:
    """The converter sections of either layout, by their dotted name ([float8], [mx],
    [quantize.linear.float8], ...), keys checked; [quantize] itself leaves the document."""
    tables = {name: doc[name] for name in ("float8", "mx") if name in doc}
    quantize = doc.get("quantize", {})
    if not isinstance(quantize, Mapping):
        raise _fail(f"[quantize] in {path} must be a table")
    for group, kinds in quantize.items():
        if group not in ("linear", "grouped_mm") or not isinstance(kinds, Mapping):
            raise _fail(f"unknown section [quantize.{group}] in {path}; read: {LAYOUTS}")
        for kind, values in kinds.items():
            if kind not in ("float8", "mx"):
                raise _fail(f"unknown section [quantize.{group}.{kind}] in {path}; read: {LAYOUTS}")
            name = f"quantize.{group}.{kind}"
            _check_table(name, values, path, kind="grouped_mm" if group == "grouped_mm" else kind)
            tables[name] = values
    layouts = {name.startswith("quantize.linear") for name in tables if "grouped_mm" not in name}
    if len(layouts) > 1:
        raise _fail(f"{path} mixes [float8]/[mx] with [quantize.linear.*]: give one layout")
    return {name: _Section(name, values, path) for name, values in tables.items()}


def _earlier_layout(doc: Mapping[str, Any], path: str) -> tuple[dict[str, Any], bool]:
    """A job config in torchtitan's layout before 2025-03-18 (`EARLIER_PARALLELISM`: the
    degrees in [training], the rest in [experimental]) as the later one, its parallelism keys
    moved to [parallelism]; and whether the file was in it."""
    out = dict(doc)
    moved: dict[str, Any] = {}
    for section, keys in EARLIER_PARALLELISM.items():
        table = doc.get(section)
        if not isinstance(table, Mapping):
            continue
        found = {k: table[k] for k in keys if k in table}
        if found:
            moved |= found
            out[section] = {k: v for k, v in table.items() if k not in found}
    if not moved:
        return out, False
    if doc.get("parallelism"):
        raise _fail(
            f"{path} has [parallelism] and torchtitan's earlier parallelism keys "
            f"('{min(moved)}', ...): give one layout"
        )
    out["parallelism"] = moved
    return out, True


def _model_name(model: _Section) -> tuple[str, bool]:
    """f8roof built-in name, and whether the file named it torchtitan's way."""
    name = model.require("name")
    if not isinstance(name, str):
        raise _fail(f"'name' in [model] of {model.path} must be a string (got {name!r})")
    if name.lower() in F8ROOF_MODELS and not model.has("flavor"):
        return name.lower(), False
    flavor = model.string("flavor")
    if flavor is None and name not in {n for n, _ in TORCHTITAN_MODELS}:
        raise _fail(
            f"unknown model {name!r} ('name' in [model] of {model.path}): torchtitan's "
            f"{', '.join(sorted({n for n, _ in TORCHTITAN_MODELS}))} with a flavor, or an "
            f"f8roof built-in ({', '.join(sorted(F8ROOF_MODELS))})"
        )
    if flavor is None:
        raise _fail(f"missing key 'flavor' in [model] of {model.path}")
    key = (name, flavor)
    if key not in TORCHTITAN_MODELS:
        known = ", ".join(f"{n}/{f}" for n, f in TORCHTITAN_MODELS)
        raise _fail(f"no f8roof built-in for torchtitan model {name}/{flavor}; known: {known}")
    return TORCHTITAN_MODELS[key], True


# torchtitan's [quantize.linear.mx] recipe_name values f8roof models (torchao's
# MXLinearRecipeName); every other spelling of an MX recipe (`traffic.recipes`) is read too
TORCHTITAN_MX_NAMES = ("mxfp8_cublas", "mxfp8_cublas_rceil")


@dataclass(frozen=True)
class _Converter:
    """Which linear converter a setup turns on and the section holding its keys."""

    section: _Section
    on: bool  # the converter is in [model] converters (or the file is f8roof's short form)
    mx: bool = False
    experts: tuple[str, ...] = ()  # routed experts' fqns a grouped_mm converter names


def _converter(
    model: _Section, tables: dict[str, _Section], torchtitan_names: bool, path: str
) -> _Converter:
    """The linear converter of [model] converters (float8 or MX, either layout) and its
    section; a file naming none is read as float8 with its section's switches."""
    converters = model.names("converters")
    for name in converters:
        if name not in CONVERTERS:
            raise _fail(
                f"unknown converter {name!r} in [model] of {path}: f8roof reads "
                "float8, mx and quantize.linear.float8|mx"
            )
    linear = [c for c in converters if "grouped_mm" not in c]
    if len(linear) > 1:
        raise _fail(f"converters {linear} in [model] of {path}: give one linear converter")
    experts = tuple(
        f for c in converters if "grouped_mm" in c and c in tables for f in tables[c].names("fqns")
    )
    if linear:
        name = linear[0]
        section = tables.get(name, _Section(name, {}, path))
        return _Converter(section, on=True, mx=name.endswith("mx"), experts=experts)
    # no linear converter: the float8 section present (either layout) says what is asked
    name = "quantize.linear.float8" if "quantize.linear.float8" in tables else "float8"
    section = tables.get(name, _Section(name, {}, path))
    on = section.boolean("enable_float8_linear", False) or not torchtitan_names
    return _Converter(section, on=on, experts=experts)


def parse_setup(text: str, *, path: str = "<setup>", overrides: Sequence[str] = ()) -> SetupFile:
    """A setup TOML (torchtitan's job config or f8roof's short form) -> SetupFile; `overrides`
    (`section.key=value`) set keys on top of the file's."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _fail(f"{path} is not valid TOML: {e}") from None
    doc = with_overrides(doc, overrides, where=path)
    tables = _converter_tables(doc, path)
    doc = {k: v for k, v in doc.items() if k != "quantize"}
    doc, earlier = _earlier_layout(doc, path)
    _check_keys(doc, path)
    sec = {name: _Section(name, doc.get(name, {}), path) for name in USED_KEYS}
    assumptions: list[Note] = []

    model, torchtitan_names = _model_name(sec["model"])
    training = sec["training"]
    seq_len = training.integer("seq_len", None)
    if seq_len is None:
        raise _fail(f"missing key 'seq_len' in [training] of {path}")
    if training.has("local_batch_size") and training.has("batch_size"):
        raise _fail(
            f"[training] of {path} has both 'local_batch_size' and 'batch_size' (its name "
            "before 2025-06): give one"
        )
    if training.has("local_batch_size"):
        batch = training.integer("local_batch_size")
    elif training.has("batch_size"):  # torchtitan before 2025-06: the per-rank batch
        batch = training.integer("batch_size")
    else:
        raise _fail(f"missing key 'local_batch_size' (or 'batch_size') in [training] of {path}")
    assert batch is not None, "a key TOML holds has a value"
    compile_ = training.boolean("compile", False) or sec["compile"].boolean("enable", False)
    if not compile_:
        assumptions.append(note(Topic.NOT_COMPILED))
    if earlier:
        assumptions.append(note(Topic.SETUP_EARLIER_LAYOUT, layout=EARLIER_LAYOUT))
    norm = sec["model"].string("norm_type", "rmsnorm")
    if norm not in NORMS:
        raise _fail(
            f"'norm_type' = {norm!r} in [model] of {path}: f8roof's llama blocks are RMSNorm "
            f"({', '.join(NORMS)})"
        )
    if norm == "fused_rmsnorm" and compile_:  # torchtitan's parallelize_llama refused it
        raise _fail(f"torchtitan refuses norm_type 'fused_rmsnorm' with compile ({path})")

    par = sec["parallelism"]
    tp = par.integer("tensor_parallel_degree", 1)
    shard = par.integer("data_parallel_shard_degree", -1, minimum=-1)
    if shard == 0:
        raise _fail(f"'data_parallel_shard_degree' in [parallelism] of {path} must be -1 or >= 1")
    if not par.has("data_parallel_shard_degree"):
        assumptions.append(
            note(Topic.SETUP_DEFAULT, source=JOB_CONFIG, key="data_parallel_shard_degree", value=-1)
        )
    fsdp = None if shard == -1 else shard
    async_tp = par.boolean("enable_async_tensor_parallel", False)
    pipeline = _pipeline(par, sequences=batch, path=path, earlier=earlier)
    cp = par.integer("context_parallel_degree", 1)
    cp_rotate = par.string("context_parallel_rotate_method", "allgather")
    for key, what in (("expert_tensor_parallel_degree", "expert tensor parallelism"),):
        degree = par.integer(key, 1)
        if degree != 1:
            raise _fail(f"'{key}' = {degree} in [parallelism] of {path}: {what} is not modelled")
    ep = par.integer("expert_parallel_degree", 1)
    loss_parallel = not par.boolean("disable_loss_parallel", False)
    if par.string("pipeline_parallel_schedule_csv", ""):
        raise _fail(
            f"'pipeline_parallel_schedule_csv' in {path}: a custom schedule is not modelled"
        )
    backend = sec["compile"].string("backend", "inductor")
    if backend != "inductor":
        raise _fail(f"[compile] backend {backend!r} in {path}: f8roof models Inductor's kernels")
    if async_tp and tp > 1 and not compile_:
        # torchtitan's parallelize_llama: "Async TP requires --training.compile"
        raise _fail(
            f"torchtitan refuses enable_async_tensor_parallel without compile ({path}): "
            "async TP is an Inductor pass"
        )
    replicate = par.integer("data_parallel_replicate_degree", 1)
    fsdp = _shard_degree(
        sec["f8roof"].integer("gpus", None),
        fsdp,
        others=replicate * cp * tp * (pipeline.degree if pipeline else 1),
        path=path,
    )
    accumulation = _check_training(
        sec["training"],
        path=path,
        local_batch=batch,
        dp=None if fsdp is None else fsdp * replicate,
        assumptions=assumptions,
    )
    reshard = par.string("fsdp_reshard_after_forward", "default")
    reduce_dtype = sec["training"].string("mixed_precision_reduce", "float32")
    for key, value, known in (
        ("fsdp_reshard_after_forward", reshard, RESHARD),
        ("mixed_precision_reduce", reduce_dtype, REDUCE_DTYPES),
    ):
        if value not in known:
            raise _fail(f"'{key}' = {value!r} in {path}: torchtitan takes {', '.join(known)}")

    ac = sec["activation_checkpoint"]
    mode_name = ac.string("mode")
    if mode_name is None:
        mode_name = "selective"
        assumptions.append(
            note(
                Topic.SETUP_DEFAULT,
                source=JOB_CONFIG,
                key="activation_checkpoint.mode",
                value="selective",
            )
        )
    if mode_name not in AC_MODES:  # torchtitan compares the mode case-sensitively
        raise _fail(
            f"'mode' in [activation_checkpoint] of {path} must be one of "
            f"{', '.join(AC_MODES)} (got {mode_name!r})"
        )
    recompute = Recompute.from_name(mode_name)
    recompute_every = None
    if recompute is Recompute.SELECTIVE:
        option = ac.values.get("selective_ac_option")
        if option is None:
            option = "2"
            assumptions.append(
                note(Topic.SETUP_DEFAULT, source=JOB_CONFIG, key="selective_ac_option", value="2")
            )
        option = str(option).strip()
        if option != "op":
            if not option.isdigit():
                raise _fail(
                    f"'selective_ac_option' in [activation_checkpoint] of {path} must be 'op' "
                    f"or an integer >= 0 (got {option!r})"
                )
            # torchtitan checkpoints blocks whose count divides by n; 0: every block
            recompute_every = max(int(option), 1)

    converter = _converter(sec["model"], tables, torchtitan_names, path)
    f8 = converter.section
    if f8.boolean("emulate", False):
        raise _fail(
            f"'emulate' = true in [{f8.name}] of {path}: torchtitan emulates float8 in bf16 (a "
            "test mode), which f8roof does not model"
        )
    for key in SCALING_KEYS:
        scaling = f8.string(key, "dynamic")
        if scaling != "dynamic":
            raise _fail(
                f"'{key}' = {scaling!r} in [{f8.name}] of {path}: only dynamic scaling is "
                "modelled, not delayed"
            )
    float8 = converter.on
    converter_named = bool(sec["model"].values.get("converters"))
    if not float8:
        assumptions.append(note(Topic.CONVERTER_OFF))
    recipe_name = f8.string("recipe_name")
    all_gather = f8.boolean("enable_fsdp_float8_all_gather", False)
    precompute = f8.boolean("precompute_float8_dynamic_scale_for_fsdp", False)
    known = TORCHTITAN_MX_NAMES if converter.mx else RECIPES
    readable = (
        canonical_name(recipe_name or "") in MX_RECIPES if converter.mx else recipe_name in known
    )
    if recipe_name is not None and not readable:
        raise _fail(
            f"'recipe_name' in [{f8.name}] of {path} must be one of {', '.join(known)} "
            f"(got {recipe_name!r})"
        )
    if recipe_name is not None and all_gather:
        # torchtitan/components/quantization/float8.py (2025): an assert refuses the pair
        raise _fail(
            f"torchtitan refuses [{f8.name}] enable_fsdp_float8_all_gather with recipe_name in "
            f"{path}; leave recipe_name out for tensorwise with float8 all-gather"
        )
    default_recipe = MX_DEFAULT_RECIPE if converter.mx else "tensorwise"
    if recipe_name is None:
        assumptions.append(
            note(
                Topic.SETUP_DEFAULT,
                source=JOB_CONFIG,
                key=f"{f8.name}.recipe_name",
                value=default_recipe,
            )
        )
    recipe = recipe_name or default_recipe
    default_filters = MX_DEFAULT_FILTERS if converter.mx else ()
    if earlier:  # torchtitan's module_filter_fn then: every linear but the output projection
        default_filters = ("output",)
    filter_fqns = f8.names("filter_fqns") if f8.has("filter_fqns") else default_filters
    if BF16_TAIL in filter_fqns:
        # f8roof's shorthand for torchtitan's NVFP4 configs (nvfp4_bf16_tail_fqns), which
        # have no TOML section: this converter matches the name against no linear
        raise _fail(
            f"filter_fqns {BF16_TAIL!r} in [{f8.name}] of {path} matches no linear "
            "(NVFP4's tail: write out its layers.N.)"
        )
    if not f8.has("filter_fqns") and not earlier:
        assumptions.append(
            note(
                Topic.SETUP_DEFAULT,
                source=JOB_CONFIG,
                key=f"{f8.name}.filter_fqns",
                value=list(default_filters),
            )
        )
    if AUTO_FILTER in filter_fqns and recipe not in ("tensorwise", "rowwise"):
        raise _fail(
            f"filter_fqns {AUTO_FILTER!r} with recipe_name {recipe!r} in [{f8.name}] of {path}: "
            "torchao's _auto_filter_for_recipe has no rule for it (NotImplementedError)"
        )
    fsdp_on = fsdp is None or fsdp > 1
    # torchtitan gathers in float8 only with FSDP on, and precomputes scales only then
    float8_all_gather = all_gather and fsdp_on
    precompute_scales = float8_all_gather and precompute
    if all_gather and not fsdp_on:
        assumptions.append(note(Topic.FLOAT8_ALL_GATHER_UNUSED, section=f8.name))

    extra = sec["f8roof"]
    gpu = extra.string("gpu")
    step_ms = extra.values.get("step_ms")
    network = extra.values.get("network_gbps")
    emulate = extra.boolean("emulate_precision_casts", True)
    if step_ms is not None:
        try:
            check_step_ms(step_ms)
        except F8RoofError as e:
            raise _fail(f"'step_ms' in [f8roof] of {path}: {e.marked}") from None

    try:
        run = RunConfig.from_options(
            tp=tp,
            ep=ep,
            fsdp=-1 if fsdp is None else fsdp,
            recompute="full" if recompute_every is not None else recompute.value,
            recompute_every=recompute_every or 1,
            step_ms=None if step_ms is None else float(step_ms),
            seq_len=seq_len,
            local_batch_size=batch,  # the tokens: local_batch_size x seq_len, token_layout
        )
        moe_fqns = f8.names("moe_fqns_prototype")
        assumptions += [n for section in sec.values() for n in section.notes]
        run = replace(
            run,
            model=model,
            gpu=gpu,
            async_tp=async_tp,
            float8_all_gather=float8_all_gather,
            precompute_scales=precompute_scales,
            sac_policy=TOML_LAYOUT_POLICY,
            filter_fqns=filter_fqns,
            moe_fqns=moe_fqns + converter.experts,
            reduce_dtype=reduce_dtype,
            reshard_after_forward=reshard,
            dp_replicate=replicate,
            network_gbps=network,
            emulate_precision_casts=emulate,
            # torchtitan compiled the loss with the model from 2025-04-02, after the earlier
            # layout; [compile] components (2025-08-20 on) can leave it out
            loss_compiled=compile_
            and not earlier
            and "loss" in (sec["compile"].names("components") or ("model", "loss")),
            blocks_compiled=compile_
            and "model" in (sec["compile"].names("components") or ("model", "loss")),
            pipeline=pipeline,
            accumulation=accumulation,
            loss_parallel=loss_parallel,
            loss_chunks=sec["loss"].integer("num_chunks", 1),
            fuse_qkv=extra.boolean("fuse_qkv", False),
            cp=cp,
            cp_rotate=cp_rotate,
            assumptions=tuple(assumptions),
        )
    except F8RoofError as e:  # the degrees and step came from the file: in its words
        raise F8RoofError(in_setup_terms(e, path)) from None
    return SetupFile(
        run=run,
        recipe=recipe,
        float8=float8,
        compile=compile_,
        source=f"{path} ({'torchtitan job config' if torchtitan_names else 'f8roof setup'})",
        layout=ConfigLayout(
            quantize=f8.name.startswith("quantize."),
            switch=f8.has("enable_float8_linear") and not converter_named,
            filters=not earlier,
            mx_recipe=recipe if converter.mx and not f8.name.startswith("quantize.") else None,
        ),
    )


def _check_training(
    training: _Section, *, path: str, local_batch: int, dp: int | None, assumptions: list[Note]
) -> int:
    """The [training] keys that would change what runs beyond what f8roof models, refused
    unless at torchtitan's defaults: FSDP's CPU offload, fp32 parameters under FSDP, pure bf16
    training (no fp32 master weights). Returns the gradient accumulation steps: torchtitan's
    global_batch_size over local batch x data-parallel ranks (`dp`), which must divide it
    (train.py since 8570415c3, 2025-06-05); one pass, said in `assumptions`, where
    data_parallel_shard_degree -1 leaves the ranks unknown (`dp` None)."""
    if training.boolean("enable_cpu_offload", False):
        raise _fail(f"'enable_cpu_offload' in {path}: FSDP's CPU offload is not modelled")
    for key, default in (("mixed_precision_param", "bfloat16"), ("dtype", "float32")):
        value = training.string(key, default)
        if value != default:
            raise _fail(
                f"'{key}' = {value!r} in [training] of {path}: only {default!r} is modelled"
            )
    total = training.integer("global_batch_size", -1, minimum=-1)
    if total == -1:
        return 1
    if dp is None:
        assumptions.append(note(Topic.ACCUMULATION_UNKNOWN, total=total))
        return 1
    if total % (local_batch * dp):
        raise _fail(
            f"'global_batch_size' {total} in {path}: not a multiple of local batch "
            f"{local_batch} x {dp} data-parallel ranks"
        )
    return total // (local_batch * dp)


def _shard_degree(world: int | None, shard: int | None, *, others: int, path: str) -> int | None:
    """The FSDP degree: as given, or with `data_parallel_shard_degree` -1 (None), what
    torchtitan's ParallelDims leaves of the world size ([f8roof] gpus, torchrun's) once the
    `others` (replicate x CP x TP x PP) are placed; the two must multiply to the world."""
    if world is None:
        return shard
    if shard is None:
        if world % others:
            raise _fail(
                f"[f8roof] gpus {world} in {path} does not divide by the other degrees' product "
                f"{others} (replicate x CP x TP x PP)"
            )
        return world // others
    if world != shard * others:
        raise _fail(
            f"the degrees in {path} multiply to {shard * others} GPUs, not [f8roof] gpus {world}"
        )
    return shard


def _pipeline(par: _Section, *, sequences: int, path: str, earlier: bool) -> Pipeline | None:
    """torchtitan's pipeline from [parallelism]: its degree, schedule, microbatch size (or,
    until 2025-04-07, count: by default the degree in the `earlier` layout) and the stages per
    rank its split points make (None at degree 1)."""
    degree = par.integer("pipeline_parallel_degree", 1)
    if degree == 1:
        return None
    count = par.integer("pipeline_parallel_microbatches", None)
    if count is not None and par.has("pipeline_parallel_microbatch_size"):
        raise _fail(
            f"{path} has 'pipeline_parallel_microbatches' and its successor "
            "'pipeline_parallel_microbatch_size': give one"
        )
    default = count is None and earlier
    if default:
        count = degree
    size = par.integer("pipeline_parallel_microbatch_size", 1)
    if count is not None:
        if sequences % count:
            raise _fail(
                f"{count} pipeline microbatches{' (by default the degree)' if default else ''} "
                f"do not divide the local batch of {sequences} sequences ({path})"
            )
        size = sequences // count
    points = par.names("pipeline_parallel_split_points")
    stages = None
    if points:
        if (len(points) + 1) % degree:
            raise _fail(
                f"{len(points) + 1} stages from 'pipeline_parallel_split_points' in {path} do "
                f"not divide over 'pipeline_parallel_degree' {degree}"
            )
        stages = (len(points) + 1) // degree
    try:
        return Pipeline.torchtitan(
            degree=degree,
            sequences=sequences,
            microbatch_size=size,
            schedule=par.string("pipeline_parallel_schedule", "1F1B"),
            stages_per_rank=stages,
            layers_per_stage=par.integer("pipeline_parallel_layers_per_stage", None),
        )
    except PipelineError as e:
        raise _fail(f"[parallelism] of {path}: {e}") from None


def read_setup(path: str | Path, overrides: Sequence[str] = ()) -> SetupFile:
    """A TOML file, or a torchtitan config name (`llama3:llama3_8b`, f8roof's copy of it:
    training/config_registry.py) where no such file exists."""
    if isinstance(path, str) and is_config_name(path) and not Path(path).exists():
        named = named_config(path)
        got = parse_setup(named.toml, path=path, overrides=overrides)
        return replace(got, source=f"{path} (torchtitan config, {named.source})")
    p = Path(path)
    text = read_text(p, what="setup", error=F8RoofError)
    return parse_setup(text, path=str(p), overrides=overrides)


def training_setup(setup: SetupFile, *, step_ms: float | None = None) -> RunConfig:
    """The estimate's RunConfig for a setup file; `step_ms` (the command line's) wins over the
    file's [f8roof] step_ms."""
    if step_ms is None:
        return setup.run
    return replace(setup.run, step_s=check_step_ms(step_ms) / 1e3)


# The library's parameters (f8roof.errors.term) a setup file sets -> its keys, for the models'
# messages about them
FILE_KEYS = {
    "tp": "tensor_parallel_degree",
    "ep": "expert_parallel_degree",
    "fsdp": "data_parallel_shard_degree",
    "tokens": "local_batch_size x seq_len",
    "recompute": "[activation_checkpoint] mode",
    "recipe": "recipe_name",
    "model": "[model] name",
    "step_ms": "step_ms",
    "network_gbps": "network_gbps in [f8roof]",
    "dp_replicate": "data_parallel_replicate_degree",
    "float8_all_gather": "enable_fsdp_float8_all_gather",
    "microbatch_size": "pipeline_parallel_microbatch_size",
    "cp": "context_parallel_degree",
    "accumulation": "global_batch_size",
    "seq_len": "seq_len",
    "local_batch_size": "local_batch_size",
    "pp": "pipeline_parallel_degree",
    "loss_chunks": "[loss] num_chunks",
    "fuse_qkv": "fuse_qkv in [f8roof]",
}


def in_setup_terms(
    error: F8RoofError, path: str, *, step_from_file: bool = True, gpu_from_file: bool = False
) -> str:
    """A refusal about parameters that came from a setup file, in the file's words: its keys
    for the parameters they set (`tp 3 does not divide ...` -> `tensor_parallel_degree 3 does
    not divide ...`), the file named; the message comes back marked (f8roof.errors.term), the
    parameters the file does not set still to be called by the caller. `step_from_file` False:
    the step was given beside the file and keeps its name; `gpu_from_file`: the GPU is the
    file's [f8roof] gpu."""
    if error.marked.startswith("setup"):  # the file's own words already
        return error.marked
    keys = {k: v for k, v in FILE_KEYS.items() if step_from_file or k != "step_ms"}
    if gpu_from_file:
        keys["gpu"] = "gpu in [f8roof]"
    if not set(error.parameters) & set(keys):
        return error.marked
    return f"setup {path}: {called(error.marked, keys)}"
