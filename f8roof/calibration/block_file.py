"""The sharded block file: `BlockFit`s (training/block_fit.py) per architecture, TP degree,
checkpointing policy and recipe, with the stack that compiled them and their checks against
fresh compiles. The shipped one (`calibration/data/blocks.json`) is what `estimate --model` times
a sharded block from without compiling; `scripts/build_block_fits.py` writes it.

Bytes, FLOPs and collective sizes only: no times. Inductor's fusion choices do not depend on
the GPU it generates for (within a family), so one target's code serves every preset, each
timed by its own calibration.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from f8roof.calibration.file import GRAPHS, KERNEL_KINDS, MAX_KERNEL_BYTES
from f8roof.errors import F8RoofError, ModelError
from f8roof.files import parse_json, read_json, read_text, write_text_atomic
from f8roof.hardware.presets import PRESETS
from f8roof.traffic.recipes import ALL_RECIPE_NAMES
from f8roof.training.block import CollectiveKind
from f8roof.training.block_fit import Affine, BlockFit
from f8roof.training.run_config import RunConfig

SCHEMA_VERSION = 1
SHIPPED = Path(__file__).resolve().parent / "data" / "blocks.json"


class BlockFileError(F8RoofError):
    pass


@dataclass(frozen=True)
class BlockKey:
    """What a fit is for: the block of `architecture` at TP `tp`, checkpointed by `recompute`,
    in `recipe` ("bf16" for none), with or without float8 all-gather, for one sequence per
    rank or several (different graphs: with several, sequence parallelism's all-gathers need
    a copy to interleave the ranks' chunks), compiled with Inductor's emulate_precision_casts
    or not (`RunConfig.emulates_precision_casts`: rowwise as torchtitan sets it since 2025-04)."""

    architecture: str
    tp: int
    recompute: str
    recipe: str
    float8_all_gather: bool = False
    several_sequences: bool = False
    emulate_precision_casts: bool = False

    @classmethod
    def of(cls, fit: BlockFit) -> BlockKey:
        spec = fit.capture.spec
        return cls(
            architecture=spec.name,
            tp=spec.parallel.tp,
            recompute=spec.parallel.recompute.value,
            recipe=fit.recipe or "bf16",
            float8_all_gather=spec.parallel.float8_all_gather,
            several_sequences=spec.batch > 1,
            emulate_precision_casts=spec.parallel.emulates_precision_casts(fit.recipe),
        )

    def __str__(self) -> str:
        gather = ", float8 all-gather" if self.float8_all_gather else ""
        sequences = "several sequences" if self.several_sequences else "one sequence"
        plain = self.recipe == "rowwise" and not self.emulate_precision_casts
        casts = ", without emulate_precision_casts" if plain else ""
        return (
            f"{self.architecture} TP {self.tp}, recompute {self.recompute}, {self.recipe}{gather}"
            f"{casts}, {sequences} per rank"
        )


@dataclass(frozen=True)
class BlockFits:
    fits: tuple[BlockFit, ...]
    produced_by: dict[str, Any] = field(default_factory=dict)  # stack, codegen target, command

    def __post_init__(self) -> None:
        seen: set[BlockKey] = set()
        for key in (BlockKey.of(f) for f in self.fits):
            if key in seen:
                raise BlockFileError(
                    f"two fits for {key}: a block file holds one fit per architecture, TP, "
                    "policy, recipe and sequences"
                )
            seen.add(key)

    def find(self, key: BlockKey) -> BlockFit | None:
        return self._index.get(key)

    @cached_property
    def _index(self) -> dict[BlockKey, BlockFit]:
        return {BlockKey.of(f): f for f in self.fits}

    @property
    def keys(self) -> tuple[BlockKey, ...]:
        return tuple(BlockKey.of(f) for f in self.fits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "produced_by": self.produced_by,
            "keys": [asdict(k) for k in self.keys],
            "fits": [f.to_dict() for f in self.fits],
        }

    def save(self, path: str | Path) -> None:
        """One JSON object laid out a fit per line after a first line holding everything else
        (`_line_index` reads one fit without parsing the others)."""
        data = self.to_dict()
        fits = [json.dumps(f, sort_keys=True) for f in data.pop("fits")]
        head = json.dumps(data, sort_keys=True)[:-1] + ', "fits": ['
        write_text_atomic(path, "\n".join([head, ",\n".join(fits), "]}"]) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> BlockFits:
        fits, produced_by = _read(path)
        return cls(tuple(_parse(path, f) for f in fits), produced_by)


def _read(path: str | Path) -> tuple[list[Any], dict[str, Any]]:
    data = read_json(path, what="block file", error=BlockFileError)
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise BlockFileError(
            f"block file {path}: not schema {SCHEMA_VERSION} "
            f"(got {data.get('schema_version') if isinstance(data, dict) else data!r})"
        )
    fits = data.get("fits")
    if not isinstance(fits, list):
        raise BlockFileError(f"block file {path}: 'fits' must be a list")
    return fits, dict(data.get("produced_by", {}))


def _parse(path: str | Path, raw: Any) -> BlockFit:
    try:
        fit = BlockFit.from_dict(raw)
    except ModelError as e:
        raise BlockFileError(f"block file {path}: {e.marked}") from None
    problem = _problem(fit)
    if problem:
        raise BlockFileError(f"block file {path}: the fit for {BlockKey.of(fit)}: {problem}")
    return fit


# What a fit's fields may hold: the values the profiler records (profiler/block.py), torch's
# dtype names, counts and bytes that are whole and in range at every knot (the fit is exact
# there; between knots and beyond them it is what they give).
WORK = ("float8", "context", "fused")
GEMM_OPS = ("mm", "addmm", "bmm", "_scaled_mm", "_grouped_mm", "_scaled_grouped_mm")
MESHES = ("tp", "dp_shard")
DTYPES = (
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "int8",
    "int32",
    "int64",
    "uint8",
)
MAX_COUNT = 2**20  # launches of one kind in one block
MAX_GEMM_DIM = 2**31 - 1  # inputs/shapes.MAX_DIM


def _problem(fit: BlockFit) -> str:
    """What is wrong with a parsed fit, in words naming the field; "" when nothing is."""
    capture = fit.capture
    if capture.recipe is not None and capture.recipe not in ALL_RECIPE_NAMES:
        return f"capture.recipe {capture.recipe!r} is no recipe"
    if capture.device not in ("cpu", "codegen", "cuda"):
        return f"capture.device {capture.device!r} is not cpu, codegen or cuda"
    if capture.gpu is not None and capture.gpu not in PRESETS:
        return f"capture.gpu {capture.gpu!r} is no GPU preset"
    for s in fit.segments:
        t1, t2 = s.tokens
        where = f"segment {t1}-{t2}"
        if not 0 < t1 < t2:
            return f"{where}: tokens must rise from a positive count"
        for i, k in enumerate(s.kernels):
            item = f"{where}: kernels[{i}]"
            problem = (
                _choice("graph", k.graph, GRAPHS)
                or _choice("kind", k.kind, KERNEL_KINDS)
                or _choice("work", k.work, WORK)
                or _flags(recomputed=k.recomputed, after_all_gather=k.after_all_gather)
                or _steps(k.float8_steps)
                or _whole("count", k.count, (t1, t2), 0, MAX_COUNT)
                or _whole("bytes_read", k.bytes_read, (t1, t2), 0, MAX_KERNEL_BYTES, k.count)
                or _whole("bytes_written", k.bytes_written, (t1, t2), 0, MAX_KERNEL_BYTES, k.count)
            )
            if problem:
                return f"{item}: {problem}"
        for i, g in enumerate(s.gemms):
            problem = (
                _choice("graph", g.graph, GRAPHS)
                or _choice("op", g.op, GEMM_OPS)
                or _choice("dtype", g.dtype, DTYPES)
                or _flags(recomputed=g.recomputed)
                or next(
                    (
                        p
                        for name in ("m", "k", "n")
                        if (p := _whole(name, getattr(g, name), (t1, t2), 1, MAX_GEMM_DIM))
                    ),
                    "",
                )
                or _whole("bytes", g.bytes, (t1, t2), 0, MAX_KERNEL_BYTES)
            )
            if problem:
                return f"{where}: gemms[{i}]: {problem}"
        for i, c in enumerate(s.collectives):
            problem = (
                _choice("kind", c.kind, tuple(k.value for k in CollectiveKind))
                or _choice("dtype", c.dtype, DTYPES)
                or _choice("mesh", c.mesh, MESHES)
                or _choice("graph", c.graph, GRAPHS)
                or _flags(compiled=c.compiled, recomputed=c.recomputed, feeds_cast=c.feeds_cast)
                or (
                    ""
                    if _is_int(c.group_size) and 1 <= c.group_size <= 2**18
                    else f"group_size {c.group_size!r} is no group of ranks"
                )
                or _whole("count", c.count, (t1, t2), 0, MAX_COUNT)
                or _whole("bytes", c.bytes, (t1, t2), 0, MAX_KERNEL_BYTES, c.count)
            )
            if problem:
                return f"{where}: collectives[{i}]: {problem}"
    saved = fit.saved_bytes
    if saved is not None and saved.per_token < 0:
        return f"saved_bytes falls with tokens ({float(saved.per_token):.4g} a token)"
    if saved is not None and not (0 <= saved.at(fit.tokens[0]) <= MAX_KERNEL_BYTES):
        return f"saved_bytes is {float(saved.at(fit.tokens[0])):.4g} at {fit.tokens[0]} tokens"
    for i, check in enumerate(fit.checks):
        numbers = {
            "kernel_bytes_error": check.kernel_bytes_error,
            "gemm_flops_error": check.gemm_flops_error,
            "collective_bytes_error": check.collective_bytes_error,
            **({} if check.time_error is None else {"time_error": check.time_error}),
        }
        for name, value in numbers.items():
            if not _is_number(value) or not 0 <= value < math.inf:
                return f"checks[{i}].{name} {value!r} is not a finite error >= 0"
        for name in ("tokens", "kernels_fit", "kernels_compiled"):
            value = getattr(check, name)
            if not _is_int(value) or value < (name == "tokens"):
                return f"checks[{i}].{name} {value!r} is not a count"
    return ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    return "" if value in options else f"{name} {value!r} is not one of {', '.join(options)}"


def _flags(**values: Any) -> str:
    bad = [name for name, value in values.items() if not isinstance(value, bool)]
    return f"{bad[0]} must be true or false" if bad else ""


def _steps(steps: Any) -> str:
    if all(isinstance(step, str) for step in steps):
        return ""
    return f"float8_steps {list(steps)!r} must be strings"


def _whole(
    name: str,
    term: Affine,
    knots: tuple[int, int],
    low: int,
    high: int,
    count: Affine | None = None,
) -> str:
    """An affine count or size: a whole number in [low, high] at both knots; with `count`, the
    summed size of that many launches, each in [low, high]."""
    for tokens in knots:
        value: Fraction = term.at(tokens)
        top = high if count is None else high * count.at(tokens)
        if value.denominator != 1 or not low <= value <= top:
            each = "" if count is None else " per launch"
            return (
                f"{name} is {value} at {tokens} tokens (a whole number in {low}..{high:.3g}{each})"
            )
    return ""


def _raw_key(path: str | Path, raw: Any) -> BlockKey:
    """A fit's key read off its capture alone, before parsing the fit."""
    try:
        capture = raw["capture"]
        spec, parallel = capture["spec"], capture["spec"]["parallel"]
        recipe = str(capture["recipe"] or "bf16")
        emulate = bool(parallel.get("emulate_precision_casts", True))
        return BlockKey(
            architecture=str(spec["name"]),
            tp=int(parallel["tp"]),
            recompute=str(parallel["recompute"]),
            recipe=recipe,
            float8_all_gather=bool(parallel["float8_all_gather"]),
            several_sequences=int(spec["tokens"]) > int(spec["seq_len"]),
            emulate_precision_casts=RunConfig(
                emulate_precision_casts=emulate
            ).emulates_precision_casts(recipe),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise BlockFileError(f"block file {path}: not a block fit: {e!r}") from None


def _line_index(path: Path) -> tuple[dict[BlockKey, str], dict[str, Any]] | None:
    """Each fit's line of a file `BlockFits.save` wrote, by the keys its first line lists, and
    its producer: parsing two fits of a hundred and eighty instead of all (the whole file's
    parse is most of an answer's time). None for a file laid out otherwise."""
    lines = read_text(path, what="block file", error=BlockFileError).splitlines()
    if len(lines) < 2 or not lines[0].endswith(', "fits": [') or lines[-1] != "]}":
        return None
    head = parse_json(lines[0] + "]}", path, what="block file", error=BlockFileError)
    keys, fits = head.get("keys"), lines[1:-1]
    if head.get("schema_version") != SCHEMA_VERSION or not isinstance(keys, list):
        return None
    if len(keys) != len(fits):
        return None
    try:
        index = {BlockKey(**k): line.removesuffix(",") for k, line in zip(keys, fits)}
    except TypeError:
        return None
    if len(index) != len(keys):  # never the last one silently
        raise BlockFileError(f"block file {path}: two fits for one key")
    return index, dict(head.get("produced_by", {}))


@cache
def _shipped_index() -> tuple[dict[BlockKey, Any], dict[str, Any]]:
    found = _line_index(SHIPPED)
    if found is not None:
        lines, produced_by = found
        return {k: ("line", v) for k, v in lines.items()}, produced_by
    fits, produced_by = _read(SHIPPED)
    index: dict[BlockKey, Any] = {}
    for raw in fits:
        key = _raw_key(SHIPPED, raw)
        if key in index:  # never the last one silently
            raise BlockFileError(f"block file {SHIPPED}: two fits for {key}")
        index[key] = ("parsed", raw)
    return index, produced_by


@cache
def shipped_fit(key: BlockKey) -> BlockFit | None:
    """One fit of the shipped file, parsed when first asked for (an answer needs two)."""
    if not SHIPPED.is_file():
        return None
    found = _shipped_index()[0].get(key)
    if found is None:
        return None
    how, raw = found
    if how == "line":
        raw = parse_json(raw, SHIPPED, what="block file", error=BlockFileError)
    fit = _parse(SHIPPED, raw)
    if BlockKey.of(fit) != key:
        raise BlockFileError(f"block file {SHIPPED}: the fit listed as {key} is {BlockKey.of(fit)}")
    return fit


def shipped_stack() -> dict[str, str]:
    """What compiled the shipped file: torch, torchao, the codegen target."""
    made = _shipped_index()[1]
    return {k: str(made.get(k, "?")) for k in ("torch", "torchao", "gpu")}


@cache
def shipped_block_fits() -> BlockFits | None:
    """The shipped block file, read once per process; None if the package has none."""
    return BlockFits.load(SHIPPED) if SHIPPED.is_file() else None
