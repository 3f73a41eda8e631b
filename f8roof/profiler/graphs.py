"""What gets compiled for a `Variant` at a shape: the module, its inputs and grad_output.

One graph per variant: (before op) -> linear -> (after op), forward and backward.
- linear: bf16 `nn.Linear(K, N, bias=False)`; reference: f8roof's `Float8Linear`; torchao:
  `convert_to_float8_training` on that same nn.Linear (what users and torchtitan run).
- before: `layernorm` is `nn.LayerNorm(K, elementwise_affine=False)`, as torchao's own float8
  benchmark builds it (benchmarks/float8/float8_roofline.py, `LNLinearSigmoid`: LayerNorm
  without affine weights -> Linear(bias=False) -> Sigmoid); `rmsnorm` is `nn.RMSNorm(K)` with
  its learnable weight (llama's q/k/v and gate/up inputs); `silu_mul` is `silu(gate) * up`
  on two (M, K) inputs (llama's down_proj input). Every input keeps dims M and K, so the bytes
  read off buffer shapes stay polynomials in M, K, N.
- after: `sigmoid`, `silu`, `gelu` (nn.GELU's default, exact erf).

A `StepFactory` builds a step on a device; `capture` takes any factory, so a user's own float8
module is profiled the same way (see `capture.capture_step`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from f8roof.errors import term
from f8roof.profiler import torchao_float8
from f8roof.profiler.float8_linear import make_linear
from f8roof.traffic.variant import After, Before, Context, ContextError, Implementation, Variant

DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Step:
    """One forward+backward: `module(*inputs).backward(grad_output)`. Every input requires
    grad, as a layer inside a network does."""

    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    grad_output: torch.Tensor

    def __post_init__(self) -> None:
        if not self.inputs or not all(t.requires_grad for t in self.inputs):
            raise ValueError("a step needs inputs, each requiring grad")


class StepFactory(Protocol):
    def __call__(self, *, device: str, initialize: bool) -> Step:
        """Build the step on `device`. `initialize` False: nothing will be computed from the
        values (codegen-only), so tensors may be left uninitialized (no init cost)."""


class SiluMul(nn.Module):
    """llama's MLP before down_proj: `silu(gate) * up`."""

    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up


class ContextLinear(nn.Module):
    """before -> linear -> after; a module per op, so every op of the compiled graph names the
    module it came from (the linear's float8 work vs the context's, see capture.KernelOp)."""

    def __init__(self, before: nn.Module, linear: nn.Module, after: nn.Module) -> None:
        super().__init__()
        self.before = before
        self.linear = linear
        self.after = after

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.after(self.linear(self.before(*inputs)))


def _before(before: Before, K: int) -> nn.Module:
    if before is Before.LAYERNORM:
        return nn.LayerNorm(K, elementwise_affine=False, dtype=DTYPE)
    if before is Before.RMSNORM:
        return nn.RMSNorm(K, dtype=DTYPE)
    if before is Before.SILU_MUL:
        return SiluMul()
    if before is Before.GELU:  # GPT-2's MLP c_proj input
        return nn.GELU()
    return nn.Identity()


_AFTER = {
    After.NONE: nn.Identity,
    After.SIGMOID: nn.Sigmoid,
    After.SILU: nn.SiLU,
    After.GELU: nn.GELU,
}


def input_count(context: Context) -> int:
    return 2 if context.before is Before.SILU_MUL else 1


def build_module(variant: Variant, K: int, N: int, *, fnuz: bool = False) -> nn.Module:
    """The variant's module, on the current default device (meta for uninitialized steps).
    torchao converts it as users do; call inside `torchao_float8.inductor_patch_scope`.
    `fnuz`: the part runs the fnuz float8 encodings (MI300X): torchao's casts to them; f8roof's
    reference linear casts to e4m3fn/e5m2 only, refused."""
    context = variant.context
    if fnuz and variant.implementation is Implementation.REFERENCE and variant.recipe:
        raise ContextError(
            "f8roof's reference linear casts to float8_e4m3fn/e5m2; this GPU runs the fnuz "
            f"encodings (MI300X): use {term('implementation')} torchao"
        )
    if variant.implementation is Implementation.REFERENCE:
        linear = make_linear(variant.recipe, in_features=K, out_features=N, device=None)
    else:
        linear = nn.Linear(K, N, bias=False, dtype=DTYPE)
    module = ContextLinear(_before(context.before, K), linear, _AFTER[context.after]())
    if variant.implementation is Implementation.TORCHAO:
        module = torchao_float8.convert(module, variant.recipe, fnuz=fnuz)
    return module


def build_step(
    variant: Variant,
    shape: tuple[int, int, int],
    *,
    device: str,
    initialize: bool,
    fnuz: bool = False,
) -> Step:
    """The variant's step at (M, K, N) on `device`: random weights and data when `initialize`,
    else uninitialized (built on the meta device and materialized without init)."""
    M, K, N = shape
    if initialize:
        with torch.device(device):
            module = build_module(variant, K, N, fnuz=fnuz)
    else:
        with torch.device("meta"):
            module = build_module(variant, K, N, fnuz=fnuz)
        module = module.to_empty(device=device)
    make = torch.randn if initialize else torch.empty
    inputs = tuple(
        make(M, K, device=device, dtype=DTYPE).requires_grad_(True)
        for _ in range(input_count(variant.context))
    )
    return Step(module, inputs, make(M, N, device=device, dtype=DTYPE))


def resolve_implementation(name: str | None) -> Implementation:
    """The implementation named, or the default: torchao when importable (what users train
    with), else the reference. torchao named but not importable: TorchaoMissing."""
    if name is None:
        return Implementation.TORCHAO if torchao_float8.available() else Implementation.REFERENCE
    try:
        implementation = Implementation(name.strip().lower())
    except ValueError:
        known = ", ".join(i.value for i in Implementation)
        raise ContextError(f"unknown implementation {name!r}; known: {known}") from None
    if implementation is Implementation.TORCHAO:
        torchao_float8.import_float8()
    if implementation is Implementation.TE:
        raise ContextError(
            f"{term('implementation')} te: Transformer Engine's kernels are read off its source, "
            "not compiled (estimate only)"
        )
    return implementation


def versions() -> dict[str, str]:
    """What decides the kernels generated: torch, triton and torchao ("none": not installed),
    as calibration files record them."""
    from f8roof.profiler.device import package_version

    return {"torch": torch.__version__, **{p: package_version(p) for p in ("triton", "torchao")}}


def version_mismatch(calibration_versions: dict[str, str]) -> str | None:
    """How the versions here differ from those a calibration's code was generated with (its
    fits describe their kernels), or None."""
    here = versions()
    differ = [
        f"{name} {calibration_versions[name]} there, {here[name]} here"
        for name in here
        if calibration_versions.get(name) != here[name]
    ]
    return "; ".join(differ) or None


def step_factory(
    variant: Variant, shape: tuple[int, int, int], *, fnuz: bool = False
) -> StepFactory:
    """`fnuz`: the step as a part that runs the fnuz float8 encodings trains it (MI300X)."""
    return functools.partial(build_step, variant, shape, fnuz=fnuz)
