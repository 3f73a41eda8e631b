"""The shipped byte table is the sympy models' polynomials: an estimate reads it without
sympy, and it must say what the models say."""

import json
from importlib import resources

import numpy as np
import pytest

from f8roof.traffic.byte_table import TABLE_FILE, ModelKey, build_table, model_bytes
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.variant import Implementation, Level


def test_the_shipped_table_is_what_the_models_derive():
    shipped = json.loads(
        resources.files("f8roof.traffic").joinpath("data", TABLE_FILE).read_text("utf-8")
    )
    assert shipped == build_table(), "rebuild: PYTHONPATH=. python scripts/build_byte_table.py"


def test_a_recipe_spelled_per_role_is_derived_not_looked_up():
    recipe = Recipe.from_name("tensorwise", {"weight": "delayed"})
    key = ModelKey(recipe, Level.WORST, Implementation.REFERENCE, frozenset({Role.INPUT}))
    found = model_bytes(key)
    assert found is not None and found.small_kernels == 4  # dynamic 1 + delayed 2 + dynamic 1


def test_the_table_evaluates_like_the_sympy_model():
    sp = pytest.importorskip("sympy")
    from f8roof.traffic import monomials
    from f8roof.traffic.byte_table import sympy_model

    key = ModelKey(Recipe.from_name("rowwise"), Level.IDEAL, Implementation.TORCHAO)
    table = model_bytes(key).total(np.float64(8192), np.float64(4096), np.float64(14336))
    at = dict(zip(monomials.SYMBOLS, (8192, 4096, 14336)))
    assert table == float(sp.sympify(sympy_model(key).total).subs(at))
