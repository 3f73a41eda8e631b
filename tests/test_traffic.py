import itertools

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from f8roof.models.recipes import ROLES, Recipe, Role
from f8roof.models.traffic import K, M, N, ideal_traffic, worst_traffic

SEED_FUSED = frozenset({Role.INPUT, Role.GRAD_OUTPUT})
ALL = frozenset(Role)
RECIPES = [
    Recipe.from_name(n)
    for n in (
        "tensorwise",
        "tensorwise_delayed",
        "tensorwise_static_weight",
        "rowwise",
        "rowwise_gw_hp",
    )
]
RECIPES.append(Recipe.from_name("tensorwise", {"weight": "delayed"}))


def test_seed_totals_all_dynamic():
    recipe = Recipe.from_name("tensorwise")
    assert worst_traffic(recipe, fused=SEED_FUSED).total == 4 * M * K + 6 * K * N + 4 * M * N
    assert (
        worst_traffic(recipe, fused=SEED_FUSED, limited=ALL).total
        == 5 * M * K + 7 * K * N + 5 * M * N
    )


def test_seed_totals_all_delayed():
    recipe = Recipe.from_name("tensorwise_delayed")
    assert worst_traffic(recipe, fused=SEED_FUSED).total == 2 * M * K + 4 * K * N + 2 * M * N
    assert (
        worst_traffic(recipe, fused=SEED_FUSED, limited=ALL).total
        == 5 * M * K + 7 * K * N + 5 * M * N
    )


def test_standalone_linear_reads_every_tensor_for_amax():
    # Nothing fused: every dynamic role pays 2n for amax, 2n for the cast read, 2n of copies.
    total = worst_traffic(Recipe.from_name("tensorwise")).total
    assert total == 6 * M * K + 6 * K * N + 6 * M * N


def test_kernels_sum_to_role_totals():
    for recipe in RECIPES:
        model = worst_traffic(recipe, limited=ALL)
        assert sp.expand(sum(model.role_total(r) for r in ROLES) - model.total) == 0
        assert all(k.name.startswith(k.role.value + ".") for k in model.kernels)


def test_rowwise_gw_hp_skips_column_casts_of_input_and_grad_output():
    names = {k.name for k in worst_traffic(Recipe.from_name("rowwise_gw_hp")).kernels}
    assert "weight.cast_cols" in names
    assert "input.cast_cols" not in names and "grad_output.cast_cols" not in names


def test_rowwise_ideal_counts_scale_vectors():
    ideal = ideal_traffic(Recipe.from_name("rowwise")).total
    # two float8 copies per role plus 4-byte scales along each dim of each role
    scales = 4 * (M + K) + 4 * (N + K) + 4 * (M + N)
    assert ideal == sp.expand(4 * M * K + 4 * K * N + 4 * M * N + scales)


def test_seed_small_kernel_counts():
    assert worst_traffic(Recipe.from_name("tensorwise")).small_kernels == 3
    assert worst_traffic(Recipe.from_name("tensorwise_delayed")).small_kernels == 6
    assert worst_traffic(Recipe.from_name("rowwise")).small_kernels == 0


role_sets = st.sets(st.sampled_from(list(Role))).map(frozenset)
dims = st.integers(min_value=1, max_value=1 << 16)


@settings(max_examples=200, deadline=None)
@given(recipe=st.sampled_from(RECIPES), fused=role_sets, limited=role_sets, m=dims, k=dims, n=dims)
def test_ideal_never_exceeds_worst(recipe, fused, limited, m, k, n):
    at = {M: m, K: k, N: n}
    worst = worst_traffic(recipe, fused=fused, limited=limited).total.subs(at)
    ideal = ideal_traffic(recipe, fused=fused).total.subs(at)
    assert 0 < ideal <= worst


def test_limitations_never_reduce_traffic():
    for recipe, fused in itertools.product(RECIPES, (frozenset(), SEED_FUSED)):
        diff = (
            worst_traffic(recipe, fused=fused, limited=ALL).total
            - worst_traffic(recipe, fused=fused).total
        )
        coefficients = sp.Poly(diff, M, K, N).coeffs()
        assert all(c >= 0 for c in coefficients)
