"""Which scaled gemms a GPU runs, so a recipe on a part without them is refused in one line.

The rules are torch's own checks in aten/src/ATen/native/cuda/ScaledBlas.cpp (main, 2026):
- `_scaled_mm` at all: CUDA compute capability >= 8.9, or ROCm MI300 and later
  (`scaled_mm_arch_allowed`); gfx942 takes the fnuz float8 dtypes (`_scaled_mm_is_fnuz`).
- rowwise: CUDA >= 9.0 through cuBLAS >= 12.9, or CUTLASS `f8f8bf16_rowwise` (always on
  10.x: cuBLAS takes no 2-D row scales there); ROCm through hipBLASLt, bf16 output only (what
  torchao's rowwise asks for), on gfx942 and gfx950.
- blockwise 1x128 / 128x128 (DeepSeek-V3 style, torchao.prototype.blockwise_fp8_training's
  default path): `_check_deepseek_support` allows compute capability 9.x only (cuBLAS >= 12.9);
  ROCm: "1x128 and 128x128 scaling not available with ROCm". torchao's Triton blockwise gemms
  (`use_triton=True`) are not what the recipe runs by default, so they do not count here.
- MX (one e8m0 scale per 32 elements along K): cuBLAS block-scaled kernels on compute
  capability 10.x (nvjet_sm100_*_Avec32UE8M0 kernels, triton-lang/triton#9044); ROCm
  `check_blockwise_e8m0fnu_arch_supported`: gfx950 only. MXFP4 on CUDA: 10.x only
  (`_check_mxfp4_support`). NVFP4 (1x16, e4m3 scales): CUDA 10.x, none on ROCm.
Pure: no torch here, the rules are written out and tested against the presets.
"""

from __future__ import annotations

from enum import Enum

from f8roof.errors import ModelError
from f8roof.hardware.presets import GPU, Vendor


class ScaledGemm(str, Enum):
    """The gemm kernel family a recipe's float8 (or fp4) gemms need."""

    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    BLOCKWISE = "blockwise"  # 1x128 activations, 128x128 weights
    MXFP8 = "mxfp8"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"


class UnsupportedGemmError(ModelError):
    """A recipe whose gemms the GPU cannot run."""


# Recipe names (this package's and torchao 0.18's) -> the gemm they need. Prefix rules keep
# future variants (mxfp8_rceil_wgrad_with_hp, rowwise_gw_hp, ...) mapped without edits here.
_PREFIXES: tuple[tuple[str, ScaledGemm], ...] = (
    ("mxfp8", ScaledGemm.MXFP8),
    ("mxfp4", ScaledGemm.MXFP4),
    ("nvfp4", ScaledGemm.NVFP4),
    ("blockwise", ScaledGemm.BLOCKWISE),
    ("rowwise", ScaledGemm.ROWWISE),
    ("tensorwise", ScaledGemm.TENSORWISE),
)

_AMD_FLOAT8 = ("gfx942", "gfx950")  # MI300X/MI325X, MI350X/MI355X
_AMD_MX = ("gfx950",)


def gemm_for_recipe(recipe_name: str) -> ScaledGemm:
    """The scaled gemm a recipe runs, from its name (tensorwise_delayed -> tensorwise)."""
    key = recipe_name.strip().lower()
    for prefix, gemm in _PREFIXES:
        if key.startswith(prefix):
            return gemm
    raise UnsupportedGemmError(
        f"recipe {recipe_name!r} names no known gemm ({', '.join(g.value for g in ScaledGemm)})"
    )


def unsupported_reason(gpu: GPU, gemm: ScaledGemm | str) -> str | None:
    """None when `gpu` runs `gemm` (a ScaledGemm or a recipe name), else one line saying why
    not and where it runs."""
    kind = gemm if isinstance(gemm, ScaledGemm) else _as_gemm(gemm)
    if gpu.vendor is Vendor.AMD:
        return _amd_reason(gpu, kind)
    return _nvidia_reason(gpu, kind)


def check_supported(gpu: GPU, gemm: ScaledGemm | str) -> None:
    """Raise UnsupportedGemmError (one line) when `gpu` cannot run `gemm`."""
    reason = unsupported_reason(gpu, gemm)
    if reason is not None:
        raise UnsupportedGemmError(reason)


def check_recipes(gpu: GPU, recipe_names: str) -> None:
    """Refuse (one line) the first recipe of a comma list whose gemms `gpu` cannot run. Names
    that map to no gemm ("all", a typo) are left to the recipe parser, which lists the known
    ones."""
    for name in filter(None, (n.strip() for n in recipe_names.split(","))):
        if "emulated" in name:  # mxfp8_emulated_rceil: its gemms run in bf16, anywhere
            continue
        try:
            gemm = gemm_for_recipe(name)
        except UnsupportedGemmError:
            continue
        check_supported(gpu, gemm)


def _as_gemm(name: str) -> ScaledGemm:
    try:
        return ScaledGemm(name.strip().lower())
    except ValueError:
        return gemm_for_recipe(name)


def _nvidia_reason(gpu: GPU, kind: ScaledGemm) -> str | None:
    cc = gpu.compute_capability
    where = f"{gpu.name} ({gpu.arch_label})"
    if cc < (8, 9):
        return f"{where} has no float8 gemms: torch._scaled_mm needs compute capability >= 8.9"
    if kind is ScaledGemm.TENSORWISE:
        return None
    if kind is ScaledGemm.ROWWISE:
        return None
    if kind is ScaledGemm.BLOCKWISE:
        if cc[0] == 9:
            return None
        return (
            f"{where} has no 1x128/128x128 blockwise float8 gemms: torch._scaled_mm runs them "
            "on compute capability 9.x only (H100, H200)"
        )
    if kind in (ScaledGemm.MXFP8, ScaledGemm.NVFP4):
        if cc >= (10, 0):
            return None
        return (
            f"{where} has no {kind.value.upper()} gemms: they need compute capability >= 10.0 "
            "(B200, GB200, B300)" + ("" if kind is ScaledGemm.NVFP4 else " or AMD gfx950")
        )
    # MXFP4
    if cc[0] == 10:
        return None
    return f"{where} has no MXFP4 gemms: torch runs them on compute capability 10.x only"


def _amd_reason(gpu: GPU, kind: ScaledGemm) -> str | None:
    arch = gpu.gfx_arch or ""
    where = f"{gpu.name} ({arch})"
    if arch not in _AMD_FLOAT8:
        return f"{where} has no float8 gemms in torch: ROCm runs them on gfx942 and gfx950"
    if kind in (ScaledGemm.TENSORWISE, ScaledGemm.ROWWISE):
        return None
    if kind is ScaledGemm.BLOCKWISE:
        return (
            f"{where} has no 1x128/128x128 blockwise float8 gemms: torch has none on ROCm "
            "(compute capability 9.x NVIDIA parts only)"
        )
    if kind is ScaledGemm.NVFP4:
        return f"{where} has no NVFP4 gemms: torch runs them on NVIDIA compute capability 10.x"
    if arch in _AMD_MX:
        return None
    return (
        f"{where} has no {kind.value.upper()} gemms: ROCm runs MX block scales on gfx950 only "
        "(MI350X, MI355X)"
    )
