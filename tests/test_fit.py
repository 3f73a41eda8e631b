from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from f8roof.timing.overhead import nearest_kernel_set
from f8roof.traffic.fit import (
    FIT_SHAPES,
    FitError,
    KernelSample,
    Polynomial,
    ShapeSample,
    buffer_polynomial,
    fit_polynomial,
    fit_traffic,
    from_sympy,
    kernel_keys,
)
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.worst_ideal import worst_traffic


def bytes_of(coefficients, shape):
    return int(Polynomial.from_map(coefficients).exact(shape))


def test_fit_recovers_integer_and_rational_coefficients():
    truth = {"M*K": 5, "K*N": 7, "M*N": Fraction(1, 2), "M": 4, "1": 16}
    shapes = list(FIT_SHAPES[:7])
    fitted = fit_polynomial(shapes, [bytes_of(truth, s) for s in shapes])
    assert fitted.as_map() == {k: Fraction(v) for k, v in truth.items()}


def test_fit_refuses_underdetermined_powers_of_two_squares():
    shapes = [(2**i,) * 3 for i in range(8, 16)]  # M = K = N: the three products coincide
    with pytest.raises(FitError, match="do not determine"):
        fit_polynomial(shapes, [3 * s[0] ** 2 for s in shapes])


def test_fit_refuses_non_polynomial_data():
    shapes = list(FIT_SHAPES[:9])
    with pytest.raises(FitError, match="no polynomial"):
        fit_polynomial(shapes, [s[0] * s[1] * s[2] for s in shapes])


def test_sympy_round_trip_of_a_model():
    expr = worst_traffic(Recipe.from_name("rowwise")).total
    assert from_sympy(expr).to_sympy() == expr


def test_polynomial_evaluates_on_arrays():
    poly = Polynomial.from_map({"M*K": 2, "N": 3, "1": 1})
    M, K, N = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])
    assert list(poly(M, K, N)) == [2 * 3 + 15 + 1, 2 * 8 + 18 + 1]


def _sample(shape, split, *, reverse=False):
    m, k, _ = shape
    amax = Polynomial.from_map({"M*K": 2, "1": 4})
    cast = Polynomial.from_map({"M*K": 4, "1": 8})
    kernels = [
        KernelSample(
            "triton_red_fused_abs_amax_0", "fwd", "reduction", "input", 2 * m * k + 4, 0, amax
        ),
        KernelSample("triton_poi_fused_1", "fwd", "pointwise", "input", 4 * m * k + 8, 0, cast),
    ]
    if split:  # a split reduction appears: a second small kernel and a workspace of partials
        second = Polynomial.from_map({"M": 8, "1": 4})
        kernels.insert(
            1,
            KernelSample(
                "triton_per_fused_2",
                "fwd",
                "persistent_reduction",
                "input",
                8 * m + 4 + 4096,
                4096,
                second,
            ),
        )
    return ShapeSample(shape, tuple(reversed(kernels) if reverse else kernels))


def test_kernel_sets_are_found_read_off_buffers_and_solved_independently():
    small = [_sample(s, False) for s in FIT_SHAPES[:9]]
    large = [_sample((m * 2, k * 2, n * 2), True) for m, k, n in FIT_SHAPES[:9]]
    fit = fit_traffic(small + large, verify=2)
    assert len(fit.kernel_sets) == 2 and not fit.unfitted
    split = next(r for r in fit.kernel_sets if len(r.kernels) == 3)
    assert split.total.as_map() == {"M*K": 6, "M": 8, "1": 16}
    assert len(split.shapes) == 9 and len(split.verified) == 2
    assert split.workspace_max == 4096
    assert sorted(k.key for k in split.kernels) == ["fwd.0", "fwd.1", "fwd.2"]
    owner = nearest_kernel_set(
        fit.kernel_sets, ShapeArrays([300.0, 30000.0], [700.0, 30000.0], [500.0, 30000.0])
    )
    assert [len(fit.kernel_sets[i].kernels) for i in owner] == [2, 3]


def test_launch_order_does_not_split_a_kernel_set():
    samples = [_sample(s, False, reverse=i % 2 == 1) for i, s in enumerate(FIT_SHAPES[:4])]
    fit = fit_traffic(samples)
    assert len(fit.kernel_sets) == 1 and len(fit.kernel_sets[0].shapes) == 4
    keys = kernel_keys(list(samples[0].kernels)), kernel_keys(list(samples[1].kernels))
    assert keys[0] == list(reversed(keys[1]))  # the same kernel keeps its key


def test_one_shape_is_a_kernel_set_without_the_independent_solve():
    fit = fit_traffic([_sample((99984, 99968, 99952), True)])
    assert len(fit.kernel_sets) == 1 and fit.kernel_sets[0].verified == ()
    assert fit.kernel_sets[0].total.as_map() == {"M*K": 6, "M": 8, "1": 16}


def test_a_kernel_without_a_polynomial_is_reported_not_dropped():
    good = [_sample(s, False) for s in FIT_SHAPES[:3]]
    last = good[-1]
    bad = ShapeSample((7, 7, 7), (replace(last.kernels[0], polynomial=None),))
    fit = fit_traffic(good + [bad])
    assert len(fit.kernel_sets) == 1 and fit.unfitted[0].shapes == ((7, 7, 7),)
    assert "read off" in fit.unfitted[0].reason


def test_polynomials_that_miss_the_measured_bytes_are_caught():
    samples = [_sample(s, False) for s in FIT_SHAPES[:9]]
    last = samples[-1]
    wrong = ShapeSample(last.shape, (last.kernels[0], replace(last.kernels[1], nbytes=1)))
    fit = fit_traffic(samples[:-1] + [wrong])
    assert not fit.kernel_sets and "the code 1" in fit.unfitted[0].reason


def test_buffer_polynomial_names_each_dim():
    # input (M, K) bf16, its float8 transpose (K, M), a row of fp32 scales (M, 1), a scalar
    poly = buffer_polynomial((48, 64, 80), [(2, (48, 64)), (1, (64, 48)), (4, (48, 1)), (4, ())])
    assert poly.as_map() == {"M*K": 3, "M": 4, "1": 4}
    with pytest.raises(FitError, match="ambiguous"):
        buffer_polynomial((64, 64, 80), [(2, (64, 64))])
    with pytest.raises(FitError, match="no size"):
        buffer_polynomial((48, 64, 80), [(4, (1024,))])
