"""torchao's float8 training, as an optional dependency: import, convert, and keep it contained.

Three things torchao does that a profiler must not inherit:
- importing it prints "Failed to load ... .so" for its CUDA extensions on a CPU-only machine
  and, on torch 2.13, a pytree deprecation warning for one of its Enums: noise, silenced here
  and only here (exactly those two messages);
- `convert_to_float8_training` patches Inductor's Triton min/max codegen for the whole process
  (`torchao.float8._inductor_patch`: `TritonOverrides.minimum/maximum` become a `tl.where`
  form, working around triton-lang/triton#11111), so a reference capture compiled after a
  torchao one would generate different code: `inductor_patch_scope` undoes it;
- its recipe names differ from f8roof's (`traffic.variant.torchao_recipe_name`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import Iterator
from types import ModuleType

import torch
from torch import nn

from f8roof.errors import F8RoofError, term
from f8roof.traffic.recipes import Granularity, Recipe
from f8roof.traffic.variant import torchao_recipe_name

# The import-time messages to drop, by logger: torchao's extension loader and torch's pytree.
_IMPORT_NOISE = {
    "torchao": ("Failed to load ",),
    "torch.utils._pytree": ("is an Enum subclass and is now natively supported",),
}


class TorchaoMissing(F8RoofError):
    """torchao asked for, but not importable here."""


class _DropNoise(logging.Filter):
    def __init__(self, fragments: tuple[str, ...]) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(f in message for f in self.fragments)


def import_float8() -> ModuleType:
    """`torchao.float8`, imported without its CPU-only import noise."""
    with contextlib.ExitStack() as stack:
        for name, fragments in _IMPORT_NOISE.items():
            logger, noise = logging.getLogger(name), _DropNoise(fragments)
            logger.addFilter(noise)
            stack.callback(logger.removeFilter, noise)
        try:
            return importlib.import_module("torchao.float8")
        except ImportError as e:
            raise TorchaoMissing(
                f"torchao is not importable here ({e}): pip install 'f8roof[torchao]', "
                f"or use {term('implementation')} reference"
            ) from None


def available() -> bool:
    try:
        import_float8()
    except TorchaoMissing:
        return False
    return True


def version() -> str | None:
    """torchao's version, or None when it is not importable."""
    if not available():
        return None
    return sys.modules["torchao"].__version__


def convert(module: nn.Module, recipe: Recipe, *, fnuz: bool = False) -> nn.Module:
    """`module` with its nn.Linear layers converted to torchao's training of `recipe`, as
    users (and torchtitan) convert models: Float8Linear for tensorwise and rowwise, the MXFP8
    weight wrapper of `MXFP8TrainingOpConfig` for MX, `fp8_blockwise_mm` for blockwise,
    `NVFP4Linear` for NVFP4. Call
    inside `inductor_patch_scope`. `fnuz`: the float8_e4m3fnuz / e5m2fnuz casts torchao makes
    on an MI300X (its `Float8TypeConfig` picks them on ROCm; codegen elsewhere does not)."""
    float8 = import_float8()
    name = torchao_recipe_name(recipe)
    if fnuz and recipe.is_block_scaled:
        raise F8RoofError(f"{recipe.name} has no fnuz float8 kernels (MI300X runs neither)")
    if recipe.granularity is Granularity.MX:
        return _convert_mx(module, name)
    if recipe.granularity is Granularity.BLOCKWISE:
        return _convert_blockwise(module)
    if recipe.is_nvfp4:
        return _convert_nvfp4(module)
    config = float8.Float8LinearConfig.from_recipe_name(name)
    if fnuz:
        config = fnuz_config(config)
    return float8.convert_to_float8_training(module, config=config)


def fnuz_config(config):
    """A Float8LinearConfig with every cast's target in the fnuz encodings (same bytes)."""
    import dataclasses

    fnuz = {torch.float8_e4m3fn: torch.float8_e4m3fnuz, torch.float8_e5m2: torch.float8_e5m2fnuz}
    casts = {
        f.name: dataclasses.replace(cast, target_dtype=fnuz[cast.target_dtype])
        for f in dataclasses.fields(config)
        if f.name.startswith("cast_config")
        and (cast := getattr(config, f.name)) is not None
        and cast.target_dtype in fnuz
    }
    return dataclasses.replace(config, **casts)


def _convert_mx(module: nn.Module, name: str) -> nn.Module:
    """torchao's MXFP8 training for nn.Linear: `quantize_` with `MXFP8TrainingOpConfig` wraps
    each linear's weight so that `F.linear` runs `mx_mm` (torchao 0.18's documented way)."""
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    config = MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe(name))
    quantize_(module, config, filter_fn=lambda m, _: isinstance(m, nn.Linear))
    return module


def _convert_nvfp4(module: nn.Module) -> nn.Module:
    """torchao's NVFP4 training for nn.Linear: `quantize_` with `NVFP4TrainingConfig` swaps
    each linear for `NVFP4Linear` (nvfp4_mm_triton; its kernels exist on sm_100 only)."""
    from torchao.prototype.moe_training.nvfp4_training.nvfp4_training import (
        NVFP4TrainingConfig,
    )
    from torchao.quantization import quantize_

    quantize_(module, NVFP4TrainingConfig(), filter_fn=lambda m, _: isinstance(m, nn.Linear))
    return module


class BlockwiseLinear(nn.Linear):
    """torchao's `Float8BlockwiseLinear.forward` (`fp8_blockwise_mm`, 128-element blocks,
    cuBLAS gemms): its constructor asserts an sm90 device is present, which codegen without a
    GPU does not have; the autograd function compiled is torchao's own."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        from torchao.prototype.blockwise_fp8_training.linear import fp8_blockwise_mm

        return fp8_blockwise_mm.apply(input, self.weight, 128, torch.bfloat16, False)


def _convert_blockwise(module: nn.Module) -> nn.Module:
    for name, child in list(module.named_children()):
        if type(child) is nn.Linear:
            if child.bias is not None:
                raise F8RoofError("torchao's blockwise linear has no bias (Float8BlockwiseLinear)")
            blockwise = BlockwiseLinear(
                child.in_features, child.out_features, bias=False, device="meta"
            )
            blockwise.weight = child.weight
            setattr(module, name, blockwise)
        else:
            _convert_blockwise(child)
    return module


@contextlib.contextmanager
def inductor_patch_scope() -> Iterator[None]:
    """Whatever `convert_to_float8_training` patches in Inductor inside this block is undone on
    exit, and torchao is told so (it patches once per process, behind a flag), so the next
    conversion patches again: compiles outside the block see Inductor's own codegen."""
    from torch._inductor.codegen.triton import TritonOverrides

    saved = {name: TritonOverrides.__dict__[name] for name in ("minimum", "maximum")}
    patch_module = sys.modules.get("torchao.float8._inductor_patch")
    flag = getattr(patch_module, "_PATCHED", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(TritonOverrides, name, value)
        patch_module = sys.modules.get("torchao.float8._inductor_patch")
        if patch_module is not None and hasattr(patch_module, "_PATCHED"):
            patch_module._PATCHED = bool(flag)  # type: ignore[attr-defined]  # torchao's own flag


# torchao 0.18's float8 grouped gemms' Triton kernels, as custom ops with fake implementations
_GROUPED_KERNELS = (
    "torchao.prototype.moe_training.kernels.float8_rowwise",
    "torchao.prototype.moe_training.kernels.jagged_float8_scales",
)


def convert_grouped_experts(experts: nn.Module) -> nn.Module:
    """Routed experts' grouped gemms in torchao's rowwise float8 (`quantize_` with
    `Float8TrainingOpConfig`, what torchtitan's `Float8GroupedExpertsConverter` applies:
    `torch._grouped_mm` on the wrapped 3-D weights becomes `_Float8GroupedMM`).

    Codegen needs torchao's kernels as custom ops, which torchao 0.18 defines only where
    `has_triton()` holds at import (not without a GPU: the stubs raise "requires triton
    installed"), and whose `triton.autotune(key=["num_elements"])` triton 3.9 refuses (no
    such kernel argument). So they are imported again here with `has_triton` true and
    `autotune` the identity (nothing launches them: their fakes give the shapes), once per
    process, and the names torchao's modules imported the stubs under are bound to them."""
    import_float8()
    from torchao.prototype.moe_training.config import Float8TrainingOpConfig
    from torchao.quantization.quant_api import quantize_

    _grouped_kernels()
    quantize_(experts, config=Float8TrainingOpConfig(), filter_fn=lambda module, fqn: True)
    return experts


def _grouped_kernels() -> None:
    from unittest import mock

    import torch.utils._triton as triton_utils
    import triton

    if hasattr(torch.ops.torchao, "triton_fp8_rowwise_2d_scale_and_cast"):
        return
    with (
        mock.patch.object(triton_utils, "has_triton", lambda: True),
        mock.patch.object(triton, "autotune", lambda *args, **kwargs: lambda fn: fn),
    ):
        kernels = [importlib.reload(importlib.import_module(name)) for name in _GROUPED_KERNELS]
    for name, module in list(sys.modules.items()):
        if name.startswith("torchao.prototype.moe_training") and module is not None:
            for kernel in kernels:
                for attr in dir(module):
                    if attr.startswith("triton_fp8") and hasattr(kernel, attr):
                        setattr(module, attr, getattr(kernel, attr))
