"""torchtitan's 2026 named configs, as `--setup MODULE:CONFIG` reads them, and dotted overrides.

torchtitan's 2026 job configs are Python (`torchtitan/models/<module>/config_registry.py`,
one function per config returning a `Trainer.Config`, run as `--module llama3 --config
llama3_8b` with dotted overrides such as `--parallelism.tensor_parallel_degree 2`). f8roof
does not import torchtitan: it keeps its own copy of the configs it knows, each written as its
TOML twin in the Quantize layout `setup_file` reads, with the commit it was read at; fields
that change nothing f8roof models (paths, optimizer, profiling, checkpoints, validation) are
left out. An override is `KEY=VALUE` with the twin's dotted key (`training.local_batch_size=2`,
`quantize.linear.float8.recipe_name=rowwise_with_gw_hp`); the value is read as a TOML value,
else as a string. The same overrides apply to a TOML file.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from f8roof.errors import F8RoofError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI (pyproject's tomli marker)
    import tomli as tomllib

LLAMA3_SOURCE = "pytorch/torchtitan@00d1c0e444a8 torchtitan/models/llama3/config_registry.py"


@dataclass(frozen=True)
class NamedConfig:
    """One torchtitan config function as its TOML twin, and where it was read."""

    toml: str
    source: str


# llama3_8b: model_registry("8B"), local_batch_size 1, seq_len 8192, selective AC, no converter
# and no compile; llama3_70b: 8B's form at local_batch_size 8, TP 8, full AC; llama3_405b:
# Float8LinearConverter with FSDP float8 all-gather, precomputed scales and filter_fqns
# ["output"] (tensorwise: torchao takes no recipe with the all-gather), local_batch_size 2,
# TP 8 with async TP, full AC, compile on.
CONFIGS: dict[str, NamedConfig] = {
    "llama3:llama3_8b": NamedConfig(
        """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 8192
[activation_checkpoint]
mode = "selective"
""",
        LLAMA3_SOURCE,
    ),
    "llama3:llama3_70b": NamedConfig(
        """
[model]
name = "llama3"
flavor = "70B"
[training]
local_batch_size = 8
seq_len = 8192
[parallelism]
tensor_parallel_degree = 8
[activation_checkpoint]
mode = "full"
""",
        LLAMA3_SOURCE,
    ),
    "llama3:llama3_405b": NamedConfig(
        """
[model]
name = "llama3"
flavor = "405B"
converters = ["quantize.linear.float8"]
[quantize.linear.float8]
enable_fsdp_float8_all_gather = true
precompute_float8_dynamic_scale_for_fsdp = true
filter_fqns = ["output"]
[training]
local_batch_size = 2
seq_len = 8192
[parallelism]
tensor_parallel_degree = 8
enable_async_tensor_parallel = true
[activation_checkpoint]
mode = "full"
[compile]
enable = true
""",
        LLAMA3_SOURCE,
    ),
}


def is_config_name(text: str) -> bool:
    """`llama3:llama3_8b`: a module and a config, no path separator, no file suffix."""
    module, colon, config = text.partition(":")
    return bool(colon and module and config) and not any(c in text for c in "/\\.")


def named_config(name: str) -> NamedConfig:
    if name not in CONFIGS:
        raise F8RoofError(f"setup: no torchtitan config {name!r} here; known: {', '.join(CONFIGS)}")
    return CONFIGS[name]


def with_overrides(doc: Mapping[str, Any], overrides: Sequence[str], *, where: str) -> dict:
    """The job config with each `KEY=VALUE` set at its dotted key (tables made as needed)."""
    out: dict[str, Any] = _copy(doc)
    for item in overrides:
        key, eq, text = item.partition("=")
        parts = [p.strip() for p in key.split(".")]
        if not eq or len(parts) < 2 or not all(parts):
            raise F8RoofError(
                f"setup: bad override {item!r} for {where}; expected section.key=value, "
                "e.g. parallelism.tensor_parallel_degree=2"
            )
        table = out
        for part in parts[:-1]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise F8RoofError(f"setup: override {item!r}: {part!r} in {where} is no table")
        table[parts[-1]] = _value(text.strip())
    return out


def _value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _copy(doc: Mapping[str, Any]) -> dict:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in doc.items()}
