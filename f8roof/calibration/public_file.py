"""The public time model's file (`calibration/data/public_times.json`): load it validated, save it.

Written by `scripts/fit_public_times.py` from the repository's data (a rebuild reproduces what
the data determine, to a test's tolerances); read by every estimate that times a traffic calibration with public measurements
(`--times public`, the default where the GPU has a fitted part). Every field is checked on
load, the file and field named in the one-line error, as for calibrations.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from f8roof.calibration.file import CalibrationError, _Reader, _tile
from f8roof.errors import ModelError
from f8roof.files import read_json, write_text_atomic
from f8roof.hardware.efficiency import GemmEfficiency
from f8roof.hardware.presets import find_gpu
from f8roof.timing.public_times import (
    FITTED_CLASSES,
    FP4_FAMILY,
    GEMM_FAMILIES,
    ParameterRange,
    PartTimes,
    PublicTimes,
)

SCHEMA_VERSION = 2
SHIPPED = Path(__file__).resolve().parent / "data" / "public_times.json"


def to_dict(times: PublicTimes) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "parts": _parts_to_dict(times.parts),
        "band_low_parts": _parts_to_dict(times.low_parts),
        "band_high_parts": _parts_to_dict(times.high_parts),
        "ranges": {r.name: [r.low, r.value, r.high] for r in times.ranges},
        "residual_quantiles": [times.residual_low, times.residual_high],
        "coverage": times.coverage,
        "cv_median": times.cv_median,
        "cv_by_n": {str(n): e for n, e in times.cv_by_n},
        "derived": dict(times.derived),
        "sources": list(times.sources),
        "checks": dict(times.checks),
    }


def _parts_to_dict(parts: tuple[PartTimes, ...]) -> dict[str, Any]:
    return {
        p.part: {
            "floor_s": p.floor_s,
            "fractions": dict(p.fractions),
            "scattered_bytes_per_element": p.scattered_bytes_per_element,
            "reread_share": p.reread_share,
            "arithmetic_per_s": p.arithmetic_per_s,
            "gemms": {
                family: {
                    "peak_fraction": e.peak_fraction,
                    "k_overhead": e.k_overhead,
                    "latency_s": e.latency_s,
                    "tiles": [list(t) for t in e.tiles],
                    "slow_accum_factor": e.slow_accum_factor,
                }
                for family, e in p.gemms
            },
        }
        for p in parts
    }


def save(times: PublicTimes, path: str | Path) -> None:
    write_text_atomic(path, json.dumps(to_dict(times), indent=1) + "\n")


def load(path: str | Path) -> PublicTimes:
    data = read_json(path, what="public time model", error=CalibrationError)
    return from_dict(data, source=str(path))


@cache
def shipped() -> PublicTimes | None:
    return load(SHIPPED) if SHIPPED.is_file() else None


def from_dict(data: Any, *, source: str) -> PublicTimes:
    root = _Reader(data, source, "")
    version = root.int("schema_version")
    if version != SCHEMA_VERSION:
        root.fail("schema_version", f"{version} is not {SCHEMA_VERSION}")
    try:
        parts, low_parts, high_parts = (
            tuple(_part(name, reader) for name, reader in _members(root.obj(key)))
            for key in ("parts", "band_low_parts", "band_high_parts")
        )
        ranges_reader = root.obj("ranges")
        ranges = []
        for name, _ in _members(ranges_reader):
            values = ranges_reader.data[name]
            if not (
                isinstance(values, list)
                and len(values) == 3
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            ):
                ranges_reader.fail(name, "expected [low, value, high] numbers")
            low, value, high = (float(v) for v in values)
            ranges.append(ParameterRange(name, value, low, high))
        quantiles = root.data.get("residual_quantiles")
        if not (
            isinstance(quantiles, list)
            and len(quantiles) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in quantiles)
        ):
            root.fail("residual_quantiles", "expected [low, high] numbers")
        by_n = root.obj("cv_by_n")
        derived = root.obj("derived")
        checks = root.obj("checks")
        sources = root.data.get("sources")
        if not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
            root.fail("sources", "expected a list of strings")
        return PublicTimes(
            parts,
            low_parts,
            high_parts,
            tuple(ranges),
            float(quantiles[0]),
            float(quantiles[1]),
            root.num("coverage"),
            root.num("cv_median"),
            tuple((_positive_int(by_n, n), by_n.num(n)) for n in by_n.data),
            tuple((name, derived.str(name)) for name in derived.data),
            tuple(sources),
            tuple((_part_name(checks, name), checks.num(name)) for name in checks.data),
        )
    except ModelError as e:
        raise CalibrationError(f"{source}: {e}") from None


def _members(reader: _Reader) -> list[tuple[str, _Reader]]:
    return [(name, reader) for name in reader.data]


def _part_name(reader: _Reader, name: str) -> str:
    try:
        find_gpu(name)
    except ModelError:
        reader.fail(name, "not a GPU preset (or one at a known power limit)")
    return name


def _positive_int(reader: _Reader, key: str) -> int:
    if not key.isdigit() or int(key) < 1:
        reader.fail(key, "expected a positive integer N")
    return int(key)


def _part(name: str, parts: _Reader) -> PartTimes:
    r = parts.obj(_part_name(parts, name))
    fractions = r.obj("fractions")
    for key in fractions.data:
        if key not in FITTED_CLASSES:
            fractions.fail(key, f"not one of {', '.join(FITTED_CLASSES)}")
    gemms = r.obj("gemms")
    for key in gemms.data:
        if key not in (*GEMM_FAMILIES, FP4_FAMILY):
            gemms.fail(key, f"not one of {', '.join((*GEMM_FAMILIES, FP4_FAMILY))}")
    families = []
    for family in gemms.data:
        e = gemms.obj(family)
        families.append(
            (
                family,
                GemmEfficiency(
                    e.num("peak_fraction", positive=True),
                    e.int("k_overhead"),
                    e.num("latency_s"),
                    tuple(_tile(t) for t in e.items("tiles")),
                    e.num("slow_accum_factor", positive=True),
                ),
            )
        )
    return PartTimes(
        name,
        r.num("floor_s", positive=True),
        tuple((c, fractions.num(c, positive=True)) for c in fractions.data),
        tuple(families),
        r.num("scattered_bytes_per_element"),
        r.num("reread_share"),
        r.num("arithmetic_per_s", positive=True),
    )
