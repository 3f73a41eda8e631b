"""Shipped calibration files (package data): the default estimate for the GPUs they describe.

Each preset's record names the file it ships (`GPU.shipped`); a part that runs another's code
(`GPU.code_of`: an NVL board, a power-limited part) reads that preset's. Today all are
traffic calibrations (the exact bytes of the code torch.compile generates for that GPU, timed
by the datasheet model), built by `scripts/build_traffic_calibrations.py`; a measured
calibration of the same GPU, once one exists, replaces its file and the estimate says so.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from f8roof.hardware.presets import GPU, PRESETS

# preset -> the file it ships, read off the records
SHIPPED = {g.name: g.shipped.file for g in PRESETS.values() if g.shipped is not None}


def shipped_file(gpu: GPU) -> str | None:
    """The file name a part reads: its own preset's, or its silicon's."""
    own = PRESETS.get(gpu.silicon)
    return None if own is None or own.shipped is None else own.shipped.file


def shipped_calibration(gpu: GPU) -> Path | None:
    """The shipped file for a GPU preset (a power-limited one: its preset's bytes), if any."""
    name = shipped_file(gpu)
    if name is None:
        return None
    path = resources.files(__package__) / "data" / name
    return Path(str(path)) if path.is_file() else None
