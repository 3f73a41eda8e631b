"""Float8 training recipes: how each role's scale is computed.

A recipe is a frozen value: its granularity, one scaling type per role, and whether the
grad_weight gemm stays in bf16. `Recipe.from_name` is the only way in from user text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from f8roof.models.errors import ModelError


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


class RecipeError(ModelError):
    """A recipe or scaling combination that makes no sense."""


RECIPE_NAMES = (
    "tensorwise",
    "tensorwise_delayed",
    "tensorwise_static_weight",
    "rowwise",
    "rowwise_gw_hp",
)


@dataclass(frozen=True)
class Recipe:
    granularity: Granularity = Granularity.TENSORWISE
    input: ScalingType = ScalingType.DYNAMIC
    weight: ScalingType = ScalingType.DYNAMIC
    grad_output: ScalingType = ScalingType.DYNAMIC
    grad_weight_in_bf16: bool = False

    def __post_init__(self) -> None:
        if self.granularity is Granularity.ROWWISE:
            # Rowwise scales are computed from the tensor at hand; an amax history per row
            # is not something torch.compile or torchao implement.
            if any(self.scaling(r) is not ScalingType.DYNAMIC for r in ROLES):
                raise RecipeError("rowwise scaling is dynamic only; drop --scaling")
        elif self.grad_weight_in_bf16:
            raise RecipeError("a bf16 grad_weight gemm exists only for rowwise (rowwise_gw_hp)")
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

    @classmethod
    def from_name(cls, name: str, scaling: Mapping[str, str] | None = None) -> Recipe:
        """Build from a recipe name (as `name` prints it) and optional per-role scaling."""
        base, _, inline = name.strip().partition(":")
        if inline:
            if scaling:
                raise RecipeError(f"recipe {name!r} already names its scaling; drop --scaling")
            scaling = parse_scaling(inline)
        if base == "rowwise" or base == "rowwise_gw_hp":
            if scaling:
                raise RecipeError(f"{base} scaling is dynamic only; --scaling is for tensorwise")
            return cls(granularity=Granularity.ROWWISE, grad_weight_in_bf16=base == "rowwise_gw_hp")
        defaults = {
            "tensorwise": ScalingType.DYNAMIC,
            "tensorwise_delayed": ScalingType.DELAYED,
            "tensorwise_static_weight": ScalingType.DYNAMIC,
        }
        if base not in defaults:
            raise RecipeError(f"unknown recipe {base!r}; known: {', '.join(RECIPE_NAMES)}")
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
        return cls(**{k: v for k, v in types.items()})


def parse_scaling(text: str) -> dict[str, str]:
    """'input=dynamic,weight=delayed' -> {'input': 'dynamic', 'weight': 'delayed'}."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        role, sep, value = item.partition("=")
        if not sep or not role.strip() or not value.strip():
            raise RecipeError(f"bad scaling item {item!r}; expected role=type, e.g. weight=delayed")
        out[role.strip()] = value.strip()
    return out
