"""Float8 training recipes: how each role's scale is computed.

A recipe is a frozen value: its granularity, one scaling type per role, whether the
grad_weight gemm stays in bf16, and (MX only) whether its gemms are emulated in bf16.
`Recipe.from_name` is the only way in from user text.

Block-scaled recipes (torchao 0.18 prototypes, torchao implementation only):
- `mx`: MXFP8, float8 e4m3 elements with one e8m0 (1-byte power-of-two) scale per 32
  consecutive elements along each gemm's reduction dim (OCP MX v1.0; torchao
  `prototype.moe_training.config.MXFP8TrainingRecipe`): `mxfp8_rceil` (scales rounded up,
  cuBLAS's RCEIL), `mxfp8_rceil_wgrad_with_hp` (grad_weight gemm in bf16),
  `mxfp8_emulated_rceil` (torch-native casts, gemms dequantized to bf16: for debugging on
  GPUs without MX gemms). Rounding changes no bytes, so no field holds it.
- `blockwise`: float8 e4m3 with one fp32 scale per 1x128 block of activations and gradients
  and per 128x128 block of the weight, as DeepSeek-V3 trains
  (`prototype.blockwise_fp8_training.linear.Float8BlockwiseLinear`; torch runs its gemms on
  Hopper only).
- `nvfp4`: NVFP4, 4-bit e2m1 elements (two per byte) with one e4m3 scale per 16 consecutive
  elements along each gemm's reduction dim and an fp32 scale per tensor, a random Hadamard
  transform on grad_weight's operands and stochastic rounding of grad_output (torchao 0.18
  `prototype.moe_training.nvfp4_training`, `NVFP4TrainingConfig`; its bytes:
  `traffic/nvfp4.py`). FP4 gemms on compute capability 10.x only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from f8roof.errors import ModelError, term


class Role(str, Enum):
    """The three tensors a float8 linear casts."""

    INPUT = "input"
    WEIGHT = "weight"
    GRAD_OUTPUT = "grad_output"


ROLES: tuple[Role, ...] = (Role.INPUT, Role.WEIGHT, Role.GRAD_OUTPUT)


class ScalingType(str, Enum):
    DYNAMIC = "dynamic"  # amax of this tensor now
    DELAYED = "delayed"  # amax history from earlier steps
    STATIC = "static"  # fixed scale, no amax at all


class Granularity(str, Enum):
    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    MX = "mx"  # one e8m0 scale per 1x32 block along the reduction dim
    BLOCKWISE = "blockwise"  # fp32 scales per 1x128 (activations) and 128x128 (weight) block
    NVFP4 = "nvfp4"  # fp4 e2m1 with one e4m3 scale per 1x16 block and an fp32 one per tensor


# Block-scaled granularities: elements per scale along the reduction dim and bytes per scale.
BLOCK_ELEMENTS = {Granularity.MX: 32, Granularity.BLOCKWISE: 128, Granularity.NVFP4: 16}
BLOCK_SCALE_BYTES = {Granularity.MX: 1, Granularity.BLOCKWISE: 4, Granularity.NVFP4: 1}


class RecipeError(ModelError):
    """A recipe or scaling combination that makes no sense."""


RECIPE_NAMES = (
    "tensorwise",
    "tensorwise_delayed",
    "tensorwise_static_weight",
    "rowwise",
    "rowwise_gw_hp",
)
# torchao's MXFP8TrainingRecipe values (torchao 0.18) -> (grad_weight_in_bf16, emulated)
MX_RECIPES = {
    "mxfp8_rceil": (False, False),
    "mxfp8_rceil_wgrad_with_hp": (True, False),
    "mxfp8_emulated_rceil": (False, True),
}
# The float8 block-scaled recipes (torchao only); RECIPE_NAMES are the ones f8roof's reference
# has.
BLOCK_SCALED_NAMES = (*MX_RECIPES, "blockwise")
# NVFP4 (torchao 0.18 `moe_training.nvfp4_training`, torchao only): block-scaled too, in fp4.
NVFP4 = "nvfp4"
ALL_RECIPE_NAMES = RECIPE_NAMES + BLOCK_SCALED_NAMES + (NVFP4,)

# Recipe names as users write them -> f8roof's:
# - mxfp8: torchao 0.18's MXFP8TrainingOpConfig() default (wgrad_with_hp False, RCEIL scales);
# - mx: torchtitan's MX converter name (model.converters = ["mx"], 2025);
# - mxfp8_cublas, mxfp8_cublas_rceil: torchtitan's [quantize.linear.mx] recipe_name values
#   (torchao's MXLinearRecipeName); floor or RCEIL rounding moves the same bytes;
# - float8: torchtitan's Float8LinearConverter at its 2026 default, rowwise (the 2024-25 TOML
#   layout defaulted to tensorwise: `--setup` reads that from the file);
# - rowwise_with_gw_hp: torchtitan's and torchao's name for rowwise_gw_hp.
RECIPE_ALIASES = {
    "mxfp8": "mxfp8_rceil",
    "mx": "mxfp8_rceil",
    "mxfp8_cublas": "mxfp8_rceil",
    "mxfp8_cublas_rceil": "mxfp8_rceil",
    "float8": "rowwise",
    "rowwise_with_gw_hp": "rowwise_gw_hp",
}
# Every recipe name --recipe takes, per family, for --help and error messages.
RECIPE_FAMILIES: dict[str, tuple[str, ...]] = {
    "float8": (*RECIPE_NAMES, "float8", "rowwise_with_gw_hp"),
    "MX": (*MX_RECIPES, "mxfp8", "mx", "mxfp8_cublas", "mxfp8_cublas_rceil"),
    "blockwise": ("blockwise",),
    "NVFP4": (NVFP4,),
}


def canonical_name(name: str) -> str:
    """f8roof's name for a recipe as a user or torchtitan writes it (`mxfp8` -> `mxfp8_rceil`);
    other names, a per-role suffix included, come back as given."""
    base, colon, rest = name.strip().partition(":")
    return RECIPE_ALIASES.get(base.lower(), base) + colon + rest


def known_recipes(*, short: bool = False) -> str:
    """Every name --recipe takes, family by family; `short`: each family's first name, for
    a one-line error."""
    if short:
        heads = ", ".join(names[0] for names in RECIPE_FAMILIES.values())
        return f"{heads} and their variants ({term('help')} lists them)"
    return "; ".join(f"{family}: {', '.join(names)}" for family, names in RECIPE_FAMILIES.items())


@dataclass(frozen=True)
class Recipe:
    granularity: Granularity = Granularity.TENSORWISE
    input: ScalingType = ScalingType.DYNAMIC
    weight: ScalingType = ScalingType.DYNAMIC
    grad_output: ScalingType = ScalingType.DYNAMIC
    grad_weight_in_bf16: bool = False
    emulated: bool = False  # MX only: torch-native casts, gemms dequantized to bf16

    def __post_init__(self) -> None:
        if not isinstance(self.granularity, Granularity):
            raise RecipeError(f"granularity must be a Granularity, got {self.granularity!r}")
        # Row and block scales are computed from the tensor at hand; an amax history per row or
        # block is not something torch.compile or torchao implement.
        if self.granularity is not Granularity.TENSORWISE and any(
            self.scaling(r) is not ScalingType.DYNAMIC for r in ROLES
        ):
            raise RecipeError(
                f"{self.granularity.value} scaling is dynamic only; drop {term('scaling')}"
            )
        if self.grad_weight_in_bf16 and self.granularity not in (
            Granularity.ROWWISE,
            Granularity.MX,
        ):
            raise RecipeError(
                "a bf16 grad_weight gemm exists only for rowwise (rowwise_gw_hp) and MX "
                "(mxfp8_rceil_wgrad_with_hp)"
            )
        if self.emulated and (self.granularity is not Granularity.MX or self.grad_weight_in_bf16):
            raise RecipeError("only mxfp8_emulated_rceil is emulated")
        if self.grad_output is ScalingType.STATIC:
            # Gradients change scale by orders of magnitude during training.
            raise RecipeError(
                "grad_output cannot use static scaling: gradients have no fixed range"
            )

    def scaling(self, role: Role) -> ScalingType:
        return getattr(self, role.value)

    @property
    def name(self) -> str:
        """Short, round-trippable label used in files and tables."""
        if self.granularity is Granularity.ROWWISE:
            return "rowwise_gw_hp" if self.grad_weight_in_bf16 else "rowwise"
        if self.granularity is Granularity.MX:
            flags = (self.grad_weight_in_bf16, self.emulated)
            return next(name for name, f in MX_RECIPES.items() if f == flags)
        if self.granularity is Granularity.BLOCKWISE:
            return "blockwise"
        if self.granularity is Granularity.NVFP4:
            return NVFP4
        types = tuple(self.scaling(r) for r in ROLES)
        if types == (ScalingType.DYNAMIC,) * 3:
            return "tensorwise"
        if types == (ScalingType.DELAYED,) * 3:
            return "tensorwise_delayed"
        if types == (ScalingType.DYNAMIC, ScalingType.STATIC, ScalingType.DYNAMIC):
            return "tensorwise_static_weight"
        return "tensorwise:" + ",".join(f"{r.value}={self.scaling(r).value}" for r in ROLES)

    @property
    def is_rowwise(self) -> bool:
        return self.granularity is Granularity.ROWWISE

    @property
    def is_block_scaled(self) -> bool:
        """MX, blockwise or NVFP4: scales per block along the reduction dim
        (`traffic.block_scaled`, `traffic.nvfp4`)."""
        return self.granularity in BLOCK_ELEMENTS

    @property
    def is_nvfp4(self) -> bool:
        return self.granularity is Granularity.NVFP4

    @classmethod
    def from_name(cls, name: str, scaling: Mapping[str, str] | None = None) -> Recipe:
        """Build from a recipe name (as `name` prints it) and optional per-role scaling."""
        base, _, inline = canonical_name(name).partition(":")
        if inline:
            if scaling:
                raise RecipeError(
                    f"recipe {name!r} already names its scaling; drop {term('scaling')}"
                )
            scaling = parse_scaling(inline)
        if base == "rowwise" or base == "rowwise_gw_hp":
            if scaling:
                raise RecipeError(
                    f"{base} scaling is dynamic only; {term('scaling')} is for tensorwise"
                )
            return cls(granularity=Granularity.ROWWISE, grad_weight_in_bf16=base == "rowwise_gw_hp")
        if base in MX_RECIPES or base in ("blockwise", NVFP4):
            if scaling:
                raise RecipeError(
                    f"{base} scaling is dynamic only; {term('scaling')} is for tensorwise"
                )
            if base == "blockwise":
                return cls(granularity=Granularity.BLOCKWISE)
            if base == NVFP4:
                return cls(granularity=Granularity.NVFP4)
            gw_hp, emulated = MX_RECIPES[base]
            return cls(granularity=Granularity.MX, grad_weight_in_bf16=gw_hp, emulated=emulated)
        defaults = {
            "tensorwise": ScalingType.DYNAMIC,
            "tensorwise_delayed": ScalingType.DELAYED,
            "tensorwise_static_weight": ScalingType.DYNAMIC,
        }
        if base not in defaults:
            raise RecipeError(f"unknown recipe {base!r}; known: {known_recipes(short=True)}")
        types = {r.value: defaults[base] for r in ROLES}
        if base == "tensorwise_static_weight":
            types["weight"] = ScalingType.STATIC
        for role, value in (scaling or {}).items():
            if role not in types:
                raise RecipeError(
                    f"unknown role {role!r} in scaling; roles: input, weight, grad_output"
                )
            try:
                types[role] = ScalingType(value)
            except ValueError:
                raise RecipeError(
                    f"unknown scaling type {value!r} for {role}; use dynamic, delayed or static"
                ) from None
        return cls(input=types["input"], weight=types["weight"], grad_output=types["grad_output"])


def parse_scaling(text: str) -> dict[str, str]:
    """'input=dynamic,weight=delayed' -> {'input': 'dynamic', 'weight': 'delayed'}."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        role, sep, value = item.partition("=")
        if not sep or not role.strip() or not value.strip():
            raise RecipeError(f"bad scaling item {item!r}; expected role=type, e.g. weight=delayed")
        out[role.strip()] = value.strip()
    return out
