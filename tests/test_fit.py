from fractions import Fraction

import numpy as np
import pytest

from f8roof.models.fit import (
    FIT_SHAPES,
    FitError,
    KernelSample,
    Polynomial,
    ShapeSample,
    fit_polynomial,
    fit_traffic,
    from_sympy,
    nearest_regime,
)
from f8roof.models.recipes import Recipe
from f8roof.models.traffic import worst_traffic


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


def _sample(shape, split):
    m, k, _ = shape
    kernels = [KernelSample("triton_red_fused_abs_amax_0", "fwd", "reduction", "input", 2 * m * k + 4),
               KernelSample("triton_poi_fused_1", "fwd", "pointwise", "input", 4 * m * k + 8)]
    if split:  # a split reduction appears: an extra small kernel and partial buffers
        kernels.insert(1, KernelSample("triton_red_fused_2", "fwd", "reduction", "input", 8 * m + 4))
    return ShapeSample(shape, tuple(kernels))


def test_regimes_are_found_fitted_and_verified():
    small = [_sample(s, False) for s in FIT_SHAPES[:9]]
    large = [_sample((m * 2, k * 2, n * 2), True) for m, k, n in FIT_SHAPES[:9]]
    fit = fit_traffic(small + large, verify=2)
    assert len(fit.regimes) == 2 and not fit.unfitted
    split = next(r for r in fit.regimes if len(r.kernels) == 3)
    assert split.total.as_map() == {"M*K": 6, "M": 8, "1": 16}
    assert len(split.verified) == 2
    assert [k.key for k in split.kernels] == ["fwd.0", "fwd.1", "fwd.2"]
    owner = nearest_regime(fit.regimes, np.array([300.0, 30000.0]), np.array([700.0, 30000.0]),
                           np.array([500.0, 30000.0]))
    assert [len(fit.regimes[i].kernels) for i in owner] == [2, 3]


def test_small_regime_is_reported_not_dropped():
    samples = [_sample(s, False) for s in FIT_SHAPES[:9]] + [_sample((99999, 99999, 99999), True)]
    fit = fit_traffic(samples)
    assert len(fit.regimes) == 1
    assert fit.unfitted[0].shapes == ((99999, 99999, 99999),)
    assert "needs 9" in fit.unfitted[0].reason


def test_verification_catches_a_wrong_fit():
    samples = [_sample(s, False) for s in FIT_SHAPES[:9]]
    last = samples[-1]
    bad = ShapeSample(last.shape, (last.kernels[0], KernelSample("x", "fwd", "pointwise", "input", 1)))
    fit = fit_traffic(samples[:-1] + [bad])
    assert not fit.regimes and "measured 1" in fit.unfitted[0].reason
