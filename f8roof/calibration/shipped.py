"""Shipped calibration files (package data): the default estimate for the GPUs they describe.

Each preset names its file. Today all are traffic calibrations (the exact bytes of the code
torch.compile generates for that GPU, timed by the datasheet model), built by
`scripts/build_traffic_calibrations.py`; a measured calibration of the same GPU, once one
exists, replaces its file and the estimate says so.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from f8roof.hardware.presets import GPU

SHIPPED = {
    "h100": "h100.json",
    "h200": "h200.json",
    "h100-meta": "h100-meta.json",
    "b200": "b200.json",
    "gb200": "gb200.json",
    "b300": "b300.json",
    "gb300": "gb300.json",
    "mi300x": "mi300x.json",
    "mi355x": "mi355x.json",
    "mi350x": "mi350x.json",
}


def shipped_calibration(gpu: GPU) -> Path | None:
    """The shipped file for a GPU preset (a power-limited one: its preset's bytes), if any."""
    name = SHIPPED.get(gpu.silicon)
    if name is None:
        return None
    path = resources.files(__package__) / "data" / name
    return Path(str(path)) if path.is_file() else None
