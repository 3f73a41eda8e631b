"""What a device run records: its environment, and each kernel, gemm and step it timed.

The profiler fills these and the calibration file stores them, so they live below both."""

from __future__ import annotations

from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

from f8roof.traffic.fit import Polynomial


@dataclass(frozen=True)
class Environment:
    device: str  # "cuda", "cpu", or "codegen" (traffic: code generated for `gpu`)
    device_name: str  # as the device reports itself; the preset's name for codegen
    gpu: str | None  # the GPU preset it matches; None for a CPU or a GPU without a preset
    sm_count: int
    torch: str
    triton: str
    torchao: str  # "none" when not installed
    cuda: str
    date: str | None  # None in traffic calibrations, so a rebuild is byte-identical
    f8roof: str

    @property
    def label(self) -> str:
        """How outputs name where the numbers come from."""
        if self.device == "codegen":
            return f"codegen for {self.gpu}"
        return f"{self.device_name} ({self.device})"

    @property
    def versions(self) -> str:
        return f"torch {self.torch}, triton {self.triton}, torchao {self.torchao}"


@dataclass(frozen=True)
class GemmMeasurement:
    dtype: str  # bf16, fp8, fp8_rowwise
    gemm: str  # output, grad_input, grad_weight
    m: int
    k: int
    n: int
    time_s: float


@dataclass(frozen=True)
class KernelMeasurement:
    variant: str
    M: int
    K: int
    N: int
    key: str
    kernel: str
    graph: str
    kind: str
    role: str | None
    bytes_read: int
    bytes_written: int
    workspace_bytes: int  # split-reduction workspace among those bytes (see traffic/fit.py)
    time_s: float
    polynomial: Polynomial  # the other bytes, read off the kernel's buffer shapes
    kernel_class: str | None = None  # KernelClass value, read off its code

    def to_json(self) -> dict[str, Any]:
        data = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("polynomial", "kernel_class")
        }
        if self.kernel_class is not None:
            data["class"] = self.kernel_class
        return {**data, "bytes_polynomial": polynomial_to_json(self.polynomial)}


@dataclass(frozen=True)
class StepMeasurement:
    """One compiled forward+backward of a variant at a shape: both clocks."""

    variant: str
    M: int
    K: int
    N: int
    device_s: float  # every device kernel of the step, summed (median over iterations)
    gemm_s: float  # the gemm kernels among them
    wall_s: float
    launches: int


def coefficient_to_json(c: Fraction) -> int | str:
    return c.numerator if c.denominator == 1 else f"{c.numerator}/{c.denominator}"


def polynomial_to_json(poly: Polynomial) -> dict[str, int | str]:
    return {m: coefficient_to_json(c) for m, c in poly.terms}
