"""The sharded block file: `BlockFit`s (models/block_fit.py) per architecture, TP degree,
checkpointing policy and recipe, with the stack that compiled them and their checks against
fresh compiles. The shipped one (`calibrations/blocks.json`) is what `estimate --model` times
a sharded block from without compiling; `scripts/build_block_fits.py` writes it.

Bytes, FLOPs and collective sizes only: no times. Inductor's fusion choices do not depend on
the GPU it generates for (within a family), so one target's code serves every preset, each
timed by its own calibration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError
from f8roof.files import read_json, write_text_atomic
from f8roof.models.block_fit import BlockFit
from f8roof.models.errors import ModelError

SCHEMA_VERSION = 1
SHIPPED = Path(__file__).resolve().parent.parent / "calibrations" / "blocks.json"


class BlockFileError(F8RoofError):
    pass


@dataclass(frozen=True)
class BlockKey:
    """What a fit is for: the block of `architecture` at TP `tp`, checkpointed by `recompute`,
    in `recipe` ("bf16" for none), with or without float8 all-gather, for one sequence per
    rank or several (different graphs: with several, sequence parallelism's all-gathers need
    a copy to interleave the ranks' chunks)."""

    architecture: str
    tp: int
    recompute: str
    recipe: str
    float8_all_gather: bool = False
    several_sequences: bool = False

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
        )

    def __str__(self) -> str:
        gather = ", float8 all-gather" if self.float8_all_gather else ""
        sequences = "several sequences" if self.several_sequences else "one sequence"
        return (
            f"{self.architecture} TP {self.tp}, recompute {self.recompute}, {self.recipe}{gather}, "
            f"{sequences} per rank"
        )


@dataclass(frozen=True)
class BlockFits:
    fits: tuple[BlockFit, ...]
    produced_by: dict[str, Any] = field(default_factory=dict)  # stack, codegen target, command

    def __post_init__(self) -> None:
        keys = [BlockKey.of(f) for f in self.fits]
        if len(set(keys)) != len(keys):
            raise BlockFileError(
                "a block file holds one fit per architecture/TP/policy/recipe/sequences"
            )

    def find(self, key: BlockKey) -> BlockFit | None:
        return self._index.get(key)

    @cached_property
    def _index(self) -> dict[BlockKey, BlockFit]:
        return {BlockKey.of(f): f for f in self.fits}

    @property
    def keys(self) -> tuple[BlockKey, ...]:
        return tuple(BlockKey.of(f) for f in self.fits)

    @property
    def source(self) -> str:
        return _source(self.produced_by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "produced_by": self.produced_by,
            "fits": [f.to_dict() for f in self.fits],
        }

    def save(self, path: str | Path) -> None:
        write_text_atomic(path, json.dumps(self.to_dict(), sort_keys=True) + "\n")

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
        return BlockFit.from_dict(raw)
    except ModelError as e:
        raise BlockFileError(f"block file {path}: {e}") from None


def _raw_key(path: str | Path, raw: Any) -> BlockKey:
    """A fit's key read off its capture alone, before parsing the fit."""
    try:
        capture = raw["capture"]
        spec, parallel = capture["spec"], capture["spec"]["parallel"]
        return BlockKey(
            architecture=str(spec["name"]),
            tp=int(parallel["tp"]),
            recompute=str(parallel["recompute"]),
            recipe=str(capture["recipe"] or "bf16"),
            float8_all_gather=bool(parallel["float8_all_gather"]),
            several_sequences=int(spec["tokens"]) > int(spec["seq_len"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise BlockFileError(f"block file {path}: not a block fit: {e!r}") from None


@cache
def _shipped_index() -> tuple[dict[BlockKey, Any], dict[str, Any]]:
    fits, produced_by = _read(SHIPPED)
    return {_raw_key(SHIPPED, f): f for f in fits}, produced_by


@cache
def shipped_fit(key: BlockKey) -> BlockFit | None:
    """One fit of the shipped file, parsed when first asked for (an answer needs two of 96)."""
    if not SHIPPED.is_file():
        return None
    raw = _shipped_index()[0].get(key)
    return None if raw is None else _parse(SHIPPED, raw)


def shipped_source() -> str:
    """What compiled the shipped file, in words."""
    return _source(_shipped_index()[1])


def _source(made: dict[str, Any]) -> str:
    return (
        f"compiled with torch {made.get('torch', '?')}, torchao {made.get('torchao', '?')}, "
        f"codegen for {made.get('gpu', '?')}"
    )


@cache
def shipped_block_fits() -> BlockFits | None:
    """The shipped block file, read once per process; None if the package has none."""
    return BlockFits.load(SHIPPED) if SHIPPED.is_file() else None
