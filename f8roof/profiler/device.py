"""Where measurements run: the device check, and the environment every calibration records."""

from __future__ import annotations

import datetime
import platform
from importlib import metadata

import f8roof
from f8roof.calibration.records import Environment
from f8roof.errors import F8RoofError, term
from f8roof.hardware.presets import GPU, UnknownGPUError, find_gpu

DEVICES = ("cuda", "cpu")


class DeviceError(F8RoofError):
    """No device of the kind asked for, or a calibration of another device."""


def require_device(device: str) -> None:
    import torch

    if device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}: use cuda or cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError(
            f"no CUDA GPU here: {term('device')} cuda needs one (without a GPU: "
            f"{term('device')} cpu)"
        )


def package_version(name: str) -> str:
    """An installed package's version without importing it ('none' when absent): torchao's
    import loads CUDA extensions and prints warnings on a CPU machine."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


def environment(device: str, *, gpu: GPU | None = None) -> Environment:
    """What this run measures on: `device` cuda or cpu, or codegen for the preset `gpu`."""
    import torch

    versions = {name: package_version(name) for name in ("triton", "torchao")}
    if device == "codegen":
        return Environment(
            device="codegen",
            device_name=gpu.name,
            gpu=gpu.name,
            sm_count=gpu.sm_count,
            torch=torch.__version__,
            cuda="none",
            date=None,
            f8roof=f8roof.__version__,
            **versions,
        )
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        name, units = props.name, props.multi_processor_count
        try:
            preset = find_gpu(name).name
        except UnknownGPUError:
            preset = None
    else:
        name = platform.processor() or platform.machine() or "cpu"
        units, preset = torch.get_num_threads(), None
    return Environment(
        device=device,
        device_name=name,
        gpu=preset,
        sm_count=units,
        torch=torch.__version__,
        cuda=torch.version.cuda or "none",
        date=datetime.date.today().isoformat(),
        f8roof=f8roof.__version__,
        **versions,
    )


def check_same_device(made: Environment, device: str) -> None:
    """Validation compares a calibration with this device: it must be the one it describes."""
    here = environment(device)
    if (made.device, made.device_name) != (here.device, here.device_name):
        raise DeviceError(
            f"the calibration was made on {made.label}; this is {here.label}: "
            "validate on the device it describes"
        )
