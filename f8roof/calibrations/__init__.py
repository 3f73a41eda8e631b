"""Shipped calibration files (package data), one per measured GPU."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from f8roof.models.hardware import GPU

# GPU preset -> (file, what to say when it is a stand-in). H100 SXM shares H200's SMs and
# clocks; its HBM3 is slower (3.35 vs 4.8 TB/s), so overhead there is underestimated.
NEAREST = {
    "h200": ("h200.json", None),
    "h100": ("h200.json", "no measured H100 calibration yet: using the H200's, the nearest "
                          "(same SMs and clocks, 43% more memory bandwidth)"),
}


def shipped_calibration(gpu: GPU) -> tuple[Path | None, str | None]:
    """The shipped file for a GPU preset if one exists, and a caveat when it is a stand-in."""
    if gpu.name not in NEAREST:
        return None, None
    name, caveat = NEAREST[gpu.name]
    path = resources.files(__package__) / name
    if not path.is_file():
        return None, None
    return Path(str(path)), caveat
