"""Variants (recipe x implementation x context), their keys, and the float8 alignment rule."""

import numpy as np
import pytest

from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import (
    TE_RECIPES,
    Context,
    ContextError,
    Implementation,
    Variant,
    fp8_reason_codes,
    fp8_shape_reason,
)

RECIPES = [
    "tensorwise",
    "tensorwise_delayed",
    "tensorwise_static_weight",
    "rowwise",
    "rowwise_gw_hp",
]
CONTEXTS = [Context(), Context.from_names("layernorm", "sigmoid"), Context.from_names("silu_mul")]


@pytest.mark.parametrize("context", CONTEXTS, ids=lambda c: c.name)
@pytest.mark.parametrize("recipe", RECIPES)
def test_keys_round_trip(recipe, context):
    for impl in Implementation:
        try:
            variant = Variant(Recipe.from_name(recipe), impl, context)
        except ContextError:
            lacks = {
                Implementation.TORCHAO: "delayed" in recipe or "static" in recipe,
                Implementation.TE: recipe not in TE_RECIPES,
            }
            assert lacks.get(impl, False)
            continue
        assert Variant.from_key(variant.key) == variant
        assert variant.baseline == Variant.from_key(variant.baseline.key)
        assert variant.baseline.is_bf16 and variant.baseline.context == context


def test_bf16_has_no_implementation():
    assert Variant.of(None, Implementation.TORCHAO).key == "bf16"
    with pytest.raises(ContextError):
        Variant(None, Implementation.TORCHAO)
    with pytest.raises(ContextError):
        Variant(Recipe(), None)


def test_torchao_lacks_delayed_scaling():
    with pytest.raises(ContextError, match="use implementation reference"):
        Variant(Recipe.from_name("tensorwise_delayed"), Implementation.TORCHAO)


@pytest.mark.parametrize("bad", ["norm", "layernorm>tanh", "a>b>c"])
def test_bad_context_names(bad):
    with pytest.raises(ContextError):
        Context.from_name(bad)


def test_alignment_rule_scalar_and_vector_agree():
    rng = np.random.default_rng(0)
    shapes = rng.integers(1, 200, size=(500, 3)) * rng.choice([1, 16], size=(500, 3))
    for name in ("tensorwise", "rowwise_gw_hp"):
        recipe = Recipe.from_name(name)
        codes, table = fp8_reason_codes(recipe, *shapes.T)
        for (m, k, n), code in zip(shapes, codes):
            reason = table[code]
            assert (fp8_shape_reason(recipe, int(m), int(k), int(n)) is None) == (reason == "")


def test_alignment_rule_names_dims():
    tensorwise, gw_hp = Recipe(), Recipe.from_name("rowwise_gw_hp")
    assert fp8_shape_reason(tensorwise, 16, 4096, 8192) is None
    assert "K=40" in fp8_shape_reason(tensorwise, 32, 40, 64)
    assert "N=100" in fp8_shape_reason(tensorwise, 32, 48, 100)
    # grad_weight contracts over M: M counts unless that gemm stays in bf16
    assert "M=30" in fp8_shape_reason(tensorwise, 30, 48, 64)
    assert fp8_shape_reason(gw_hp, 30, 48, 64) is None
