import itertools
import subprocess
import sys

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from f8roof.traffic.recipes import ROLES, Recipe, Role
from f8roof.traffic.variant import (
    TORCHAO_RECIPES,
    Context,
    ContextError,
    Implementation,
    context_fused_roles,
)
from f8roof.traffic.worst_ideal import K, M, N, ideal_traffic, worst_traffic

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
TORCHAO = Implementation.TORCHAO
# Every (recipe, implementation) pair that exists: torchao has no delayed or static scaling.
VARIANTS = [(r, Implementation.REFERENCE) for r in RECIPES] + [
    (Recipe.from_name(n), TORCHAO) for n in TORCHAO_RECIPES
]
FLAG_SETS = [frozenset(c) for k in range(4) for c in itertools.combinations(ROLES, k)]


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
    for recipe, impl in VARIANTS:
        model = worst_traffic(recipe, implementation=impl, limited=ALL)
        parts = sum(model.role_total(r) for r in (*ROLES, None))  # None: gemm outputs
        assert sp.expand(parts - model.total) == 0
        for k in model.kernels:
            assert k.name.startswith(k.role.value + ".") if k.role else k.name.endswith(".rescale")


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


@settings(max_examples=300, deadline=None)
@given(
    variant=st.sampled_from(VARIANTS), fused=role_sets, limited=role_sets, m=dims, k=dims, n=dims
)
def test_ideal_never_exceeds_worst(variant, fused, limited, m, k, n):
    recipe, impl = variant
    at = {M: m, K: k, N: n}
    worst = worst_traffic(recipe, implementation=impl, fused=fused, limited=limited)
    ideal = ideal_traffic(recipe, implementation=impl, fused=fused)
    assert 0 < ideal.total.subs(at) <= worst.total.subs(at)


def test_limitations_never_reduce_traffic():
    for (recipe, impl), fused in itertools.product(VARIANTS, (frozenset(), SEED_FUSED)):
        diff = (
            worst_traffic(recipe, implementation=impl, fused=fused, limited=ALL).total
            - worst_traffic(recipe, implementation=impl, fused=fused).total
        )
        coefficients = sp.Poly(diff, M, K, N).coeffs()
        assert all(c >= 0 for c in coefficients)


# ---- torchao's algorithm ------------------------------------------------------------------


def test_torchao_tensorwise_models_equal_the_references():
    recipe = Recipe.from_name("tensorwise")
    for fused, limited in itertools.product(FLAG_SETS, FLAG_SETS):
        ours = worst_traffic(recipe, implementation=TORCHAO, fused=fused, limited=limited)
        ref = worst_traffic(recipe, fused=fused, limited=limited)
        assert ours.kernels == ref.kernels and ours.small_kernels == ref.small_kernels
        ideal = ideal_traffic(recipe, implementation=TORCHAO, fused=fused)
        assert ideal.kernels == ideal_traffic(recipe, fused=fused).kernels


@pytest.mark.parametrize("name", ["tensorwise_delayed", "tensorwise_static_weight"])
def test_torchao_models_refuse_recipes_torchao_lacks(name):
    with pytest.raises(ContextError, match="torchao has no recipe"):
        worst_traffic(Recipe.from_name(name), implementation=TORCHAO)
    with pytest.raises(ContextError, match="torchao has no recipe"):
        ideal_traffic(Recipe.from_name(name), implementation=TORCHAO)


def test_torchao_rowwise_is_the_reference_plus_the_backward_rescales():
    recipe = Recipe.from_name("rowwise")
    # grad_input (M,K) and grad_weight (N,K) read and written in bf16, plus the inverse
    # scales of both operands: grad_output rows (M) and weight columns (K) for grad_input,
    # grad_output columns (N) and input columns (K) for grad_weight.
    rescales = 4 * M * K + 4 * K * N + 4 * (M + K) + 4 * (N + K)
    for fused, limited in itertools.product(FLAG_SETS, FLAG_SETS):
        ours = worst_traffic(recipe, implementation=TORCHAO, fused=fused, limited=limited)
        ref = worst_traffic(recipe, fused=fused, limited=limited)
        assert sp.expand(ours.total - ref.total - rescales) == 0
        assert sp.expand(ours.role_total(None) - rescales) == 0
    ideal = ideal_traffic(recipe, implementation=TORCHAO).total
    assert sp.expand(ideal - ideal_traffic(recipe).total - rescales) == 0
    names = [k.name for k in worst_traffic(recipe, implementation=TORCHAO).kernels]
    assert names[-2:] == ["grad_input.rescale", "grad_weight.rescale"]


def test_torchao_rowwise_gw_hp_casts_the_weight_tensorwise_for_grad_input():
    recipe = Recipe.from_name("rowwise_gw_hp")
    model = worst_traffic(recipe, implementation=TORCHAO)
    names = {k.name for k in model.kernels}
    assert {"weight.amax_tensorwise", "weight.cast_tensorwise", "grad_input.rescale"} <= names
    assert "weight.cast_cols" not in names and "grad_weight.rescale" not in names
    # input and grad_output: one row cast each; weight: a row cast and a tensorwise cast.
    assert model.total == sp.expand(
        (5 * M * K + 8 * M) + (10 * K * N + 8 * N) + (5 * M * N + 8 * M) + (4 * M * K + 4 * M)
    )
    limited = worst_traffic(recipe, implementation=TORCHAO, limited=frozenset({Role.WEIGHT}))
    assert sp.expand(limited.total - model.total) == 2 * K * N  # float8 transpose pass
    # One bf16 read per role, one float8 write per cast with its scales, the rescale.
    assert ideal_traffic(recipe, implementation=TORCHAO).total == sp.expand(
        (3 * M * K + 4 * M) + (4 * K * N + 4 * N) + (3 * M * N + 4 * M) + (4 * M * K + 4 * M)
    )


def test_torchao_small_kernels():
    def count(name):
        return worst_traffic(Recipe.from_name(name), implementation=TORCHAO).small_kernels

    # rowwise: the unit-scale fill; gw_hp: that and the weight's tensorwise scale.
    assert (count("tensorwise"), count("rowwise"), count("rowwise_gw_hp")) == (3, 1, 2)


# What Inductor generated for torchao 0.18's Float8Linear (torch 2.13, h100 codegen, f8roof's
# profiler): a standalone linear, so nothing is fused (F) and L is not assumed. Checked
# against, not fitted to: the models are derived from torchao's code (module docstring).
MEASURED_TORCHAO = [
    ("rowwise", (4096, 4096, 4096), 473_030_660),
    ("rowwise_gw_hp", (16384, 8192, 1024), 1_057_107_978),
]


@pytest.mark.parametrize("name,shape,actual", MEASURED_TORCHAO)
def test_torchao_models_bracket_what_inductor_generates(name, shape, actual):
    at = dict(zip((M, K, N), shape))
    recipe = Recipe.from_name(name)
    worst = worst_traffic(recipe, implementation=TORCHAO).total.subs(at)
    ideal = ideal_traffic(recipe, implementation=TORCHAO).total.subs(at)
    assert ideal <= actual <= worst
    # The reference's models miss torchao's rescales: its worst case is no bound here.
    reference_ideal = ideal_traffic(recipe).total.subs(at)
    assert reference_ideal < ideal


def test_context_fused_roles_from_context():
    assert context_fused_roles(Context()) == frozenset()
    assert context_fused_roles(Context.from_names("layernorm", "sigmoid")) == SEED_FUSED
    assert context_fused_roles(Context.from_names("silu_mul")) == frozenset({Role.INPUT})
    assert context_fused_roles(Context.from_names(after="gelu")) == frozenset({Role.GRAD_OUTPUT})


def test_models_import_no_torch():
    code = "import sys, f8roof.traffic.worst_ideal; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_ideal_in_a_context_credits_what_the_producer_does():
    """LayerNorm -> Linear -> Sigmoid (input and grad_output produced in the graph):
    tensorwise: each fused role writes its two copies, pays a second pass for its dynamic
    amax and is credited the bf16 write no float8 gemm reads; rowwise_gw_hp: the row casts
    happen in the producers' passes, the bf16 tensors stay (bf16 grad_weight reads them) and
    grad_input's rescale moves into LayerNorm's backward (only its scale vectors remain)."""
    fused = frozenset({Role.INPUT, Role.GRAD_OUTPUT})
    tensorwise = ideal_traffic(Recipe.from_name("tensorwise"), fused=fused).total
    assert tensorwise == sp.expand(2 * M * K + 4 * K * N + 2 * M * N)
    gw_hp = ideal_traffic(Recipe.from_name("rowwise_gw_hp"), implementation=TORCHAO, fused=fused)
    assert gw_hp.total == sp.expand(M * K + 4 * K * N + M * N + 12 * M + 4 * N)
    assert gw_hp.role_total(None) == 4 * M  # the rescale's scale reads (the weight's: a scalar)
    # the weight is never credited: its producer (the optimizer) is outside the graph
    delayed = ideal_traffic(Recipe.from_name("tensorwise_delayed"), fused=frozenset(ROLES))
    assert delayed.role_total(Role.WEIGHT) == 2 * N * K
