"""Shipped calibration files (package data), one per measured GPU."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from f8roof.calibration import Calibration
from f8roof.models.hardware import GPU

# GPU preset -> (file, what to say when it is a stand-in). H100 SXM shares H200's SMs and
# clocks; its HBM3 is slower (3.35 vs 4.8 TB/s), so overhead there is underestimated.
NEAREST = {
    "h200": ("h200.json", None),
    "h100": (
        "h200.json",
        (
            "no measured H100 calibration yet: using the H200's, the nearest "
            "(same SMs and clocks, 43% more memory bandwidth)"
        ),
    ),
}


ROOFLINE = "roofline presets (datasheet x seed efficiencies)"


def choose_calibration(
    gpu: GPU, given: str | Path | Calibration | None, *, use_shipped: bool
) -> tuple[Calibration | None, str]:
    """The calibration to estimate with (given, else shipped for `gpu` when allowed, else none)
    and a line saying which, for the output."""
    if isinstance(given, Calibration):
        return given, f"calibration ({given.environment.device_name})"
    if given is not None:
        return Calibration.load(given), f"calibration {given}"
    if use_shipped:
        path, caveat = shipped_calibration(gpu)
        if path is not None:
            loaded = Calibration.load(path)
            source = f"shipped calibration {path.name} ({loaded.environment.device_name})"
            return loaded, source + (f"; {caveat}" if caveat else "")
    return None, ROOFLINE


def shipped_calibration(gpu: GPU) -> tuple[Path | None, str | None]:
    """The shipped file for a GPU preset if one exists, and a caveat when it is a stand-in."""
    if gpu.name not in NEAREST:
        return None, None
    name, caveat = NEAREST[gpu.name]
    path = resources.files(__package__) / name
    if not path.is_file():
        return None, None
    return Path(str(path)), caveat
