"""Where measurements run: the device check, the environment every calibration records, and
whether this torch runs row-wise float8 `_scaled_mm` on CPU.

CUDA `_scaled_mm` takes row-wise scales (an (M, 1) scale for the first operand, (1, N) for the
second) on every torch f8roof supports. CPU's does from torch 2.13 on; 2.11's oneDNN path
refuses them with an internal assert ("only supports per-tensor scaling for CPU backend"). So
the CPU pipeline (calibrate, validate, compare on `--device cpu`) can run the rowwise recipes
only where `cpu_rowwise_refusal` passes, and the tests that run them skip elsewhere
(tests/conftest.py).
"""

from __future__ import annotations

import datetime
import functools
import platform
from collections.abc import Iterable
from importlib import metadata

import f8roof
from f8roof.calibration.records import Environment
from f8roof.errors import F8RoofError, reason, term
from f8roof.hardware.presets import GPU, UnknownGPUError, find_gpu
from f8roof.traffic.recipes import Recipe

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


@functools.cache
def cpu_rowwise_refusal() -> str | None:
    """None if CPU `torch._scaled_mm` runs a tiny row-wise product; otherwise why it refuses
    (one line). Cached: the answer is the installed torch's."""
    import torch

    # Both operand dtype pairs training uses: torch 2.11 refuses them in two places (oneDNN for
    # e4m3 x e4m3, the generic CPU path for e5m2 x e4m3).
    b = torch.ones(16, 16).to(torch.float8_e4m3fn).t()  # column-major, as CUDA requires
    for a_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        try:
            out = torch._scaled_mm(
                torch.ones(16, 16).to(a_dtype),
                b,
                scale_a=torch.full((16, 1), 0.5),
                scale_b=torch.full((1, 16), 0.25),
                out_dtype=torch.bfloat16,
            )
        except RuntimeError as e:  # NotImplementedError included
            return (
                f"CPU torch._scaled_mm refuses row-wise scales on torch {torch.__version__}: "
                + reason(e)
            )
        if not torch.equal(out.float(), torch.full((16, 16), 16 * 0.5 * 0.25)):
            return f"CPU torch._scaled_mm on torch {torch.__version__} ignores row-wise scales"
    return None


def require_cpu_rowwise(recipes: Iterable[Recipe | None], *, device: str) -> None:
    """Refuse, in one line, running rowwise recipes on a CPU whose `_scaled_mm` cannot (None,
    the bf16 baseline, never needs it)."""
    rowwise = list(dict.fromkeys(r.name for r in recipes if r is not None and r.is_rowwise))
    if device != "cpu" or not rowwise:
        return
    refusal = cpu_rowwise_refusal()
    if refusal is not None:
        raise F8RoofError(
            f"{', '.join(rowwise)} cannot run on cpu here (use {term('device')} cuda, or torch "
            f"2.13 on cpu): {refusal}"
        )
