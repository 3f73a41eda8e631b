"""The worst and ideal byte models as polynomials, read from a shipped table without sympy.

An estimate evaluates the sympy models of `traffic.worst_ideal` (and `traffic.grouped`) as
polynomials in the monomials; deriving them costs an import of sympy, half a second of a
model answer in a fresh process. The named recipes' models (both implementations, both
levels, every F, no L) are kept in `data/byte_polynomials.json`, written by
`scripts/build_byte_table.py` and checked against the sympy models by the tests; any other
model (a recipe spelled per role, the seed's L, a model outside the monomials) is derived
from sympy on demand.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from f8roof.traffic.fit import FitError, Polynomial, polynomial_sum
from f8roof.traffic.recipes import ALL_RECIPE_NAMES, ROLES, Recipe, RecipeError, Role
from f8roof.traffic.variant import Implementation, Level

if TYPE_CHECKING:
    from f8roof.traffic.kernel_traffic import TrafficModel

TABLE_FILE = "byte_polynomials.json"
TABLE_VERSION = 1


@dataclass(frozen=True)
class KernelBytes:
    """One pass of a byte model: its name and role as the sympy model names them, and its
    read + written bytes."""

    name: str
    role: Role | None
    polynomial: Polynomial


@dataclass(frozen=True)
class ModelBytes:
    """A byte model's passes as polynomials, and its small-kernel count (launch floors)."""

    kernels: tuple[KernelBytes, ...]
    small_kernels: int

    @property
    def total(self) -> Polynomial:
        return self.sum(lambda kernel: True)

    def sum(self, keep: Callable[[KernelBytes], bool]) -> Polynomial:
        """The bytes of the passes `keep(kernel)` selects."""
        return polynomial_sum(k.polynomial for k in self.kernels if keep(k))


@dataclass(frozen=True)
class ModelKey:
    """Which byte model: what `engine.estimate.EstimateConfig` holds of it."""

    recipe: Recipe
    level: Level
    implementation: Implementation
    fused: frozenset[Role] = frozenset()
    limited: frozenset[Role] = frozenset()
    grouped: bool = False

    @property
    def text(self) -> str:
        """The table's key: 'rowwise/torchao/worst/input+grad_output/-'."""
        if self.grouped:
            return f"grouped/{self.recipe.name}/{self.level.value}"
        roles = ("+".join(sorted(r.value for r in s)) or "-" for s in (self.fused, self.limited))
        return "/".join([self.recipe.name, self.implementation.value, self.level.value, *roles])


def model_bytes(key: ModelKey) -> ModelBytes | None:
    """The model's passes as polynomials: from the table, else derived from sympy; None for a
    model whose bytes are no polynomial in the monomials."""
    found = _table().get(key.text)
    if found is not None and _named(key.recipe):
        return _read_model(key.text)
    return _derived(key)


def _named(recipe: Recipe) -> bool:
    """A recipe the table's names stand for (a per-role spelling may print another name)."""
    try:
        return Recipe.from_name(recipe.name) == recipe
    except RecipeError:
        return False


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    """The table's models, unread: a model answer reads a few of its two hundred."""
    text = (resources.files("f8roof.traffic") / "data" / TABLE_FILE).read_text("utf-8")
    data = json.loads(text)
    if data.get("version") != TABLE_VERSION:
        return {}  # a table of another layout: every model is derived
    models: dict[str, Any] = data["models"]
    return models


@lru_cache(maxsize=256)
def _read_model(key: str) -> ModelBytes:
    model = _table()[key]
    kernels = tuple(
        KernelBytes(
            name,
            None if role is None else Role(role),
            Polynomial.from_map({m: Fraction(c) for m, c in coefficients.items()}),
        )
        for name, role, coefficients in model["kernels"]
    )
    return ModelBytes(kernels, int(model["small_kernels"]))


@lru_cache(maxsize=128)
def _derived(key: ModelKey) -> ModelBytes | None:
    from f8roof.traffic.fit import from_sympy

    model = sympy_model(key)
    try:
        kernels = tuple(
            KernelBytes(k.name, k.role, from_sympy(k.bytes_total)) for k in model.kernels
        )
    except FitError:
        return None
    return ModelBytes(kernels, model.small_kernels)


def sympy_model(key: ModelKey) -> TrafficModel:
    """The sympy model (`traffic.kernel_traffic.TrafficModel`): torchao's grouped-gemm path for
    routed experts, else the linear's worst or ideal model with the seed's F and L."""
    from f8roof.traffic.grouped import grouped_traffic
    from f8roof.traffic.worst_ideal import ideal_traffic, worst_traffic

    if key.grouped:
        return grouped_traffic(key.level, key.recipe)
    if key.level is Level.WORST:
        return worst_traffic(
            key.recipe, implementation=key.implementation, fused=key.fused, limited=key.limited
        )
    return ideal_traffic(key.recipe, implementation=key.implementation, fused=key.fused)


def table_keys() -> list[ModelKey]:
    """The models the table holds: every named recipe its implementations run, both levels,
    every subset of roles fused, none limited; the grouped path's recipes."""
    from f8roof.traffic.grouped import is_grouped_recipe

    subsets = [
        frozenset(c) for n in range(len(ROLES) + 1) for c in itertools.combinations(ROLES, n)
    ]
    keys = []
    for name in ALL_RECIPE_NAMES:
        recipe = Recipe.from_name(name)
        for implementation, level, fused in itertools.product(Implementation, Level, subsets):
            keys.append(ModelKey(recipe, level, implementation, fused))
        if is_grouped_recipe(recipe):
            keys += [
                ModelKey(recipe, level, Implementation.TORCHAO, grouped=True) for level in Level
            ]
    return keys


def build_table() -> dict[str, Any]:
    """The table's contents, derived from the sympy models (models a recipe's implementation
    lacks, or outside the monomials, are left out)."""
    models = {}
    for key in table_keys():
        try:
            found = _derived(key)
        except (RecipeError, ValueError):
            continue  # torchao lacks the recipe, or the reference the MX recipes
        if found is None:
            continue
        models[key.text] = {
            "small_kernels": found.small_kernels,
            "kernels": [
                [
                    k.name,
                    None if k.role is None else k.role.value,
                    {m: str(c) for m, c in k.polynomial.terms},
                ]
                for k in found.kernels
            ],
        }
    return {"version": TABLE_VERSION, "models": models}
