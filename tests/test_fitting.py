import numpy as np
import pytest
import synthetic

from f8roof.calibration.fitting import fit_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.fit import Polynomial, from_sympy
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Implementation
from f8roof.traffic.worst_ideal import worst_traffic

REFERENCE = Implementation.REFERENCE


@pytest.fixture(scope="module")
def calibration():
    return fit_calibration(synthetic.measurements())


def test_bytes_fit_recovers_the_generating_model(calibration):
    for recipe in ("tensorwise", "rowwise"):
        fit = calibration.variant(f"reference:{recipe}").traffic
        assert len(fit.kernel_sets) == 1 and not fit.unfitted
        assert fit.kernel_sets[0].total == from_sympy(worst_traffic(Recipe.from_name(recipe)).total)
        assert len(fit.kernel_sets[0].verified) == 2
    assert calibration.variant("bf16").traffic.kernel_sets[0].total == Polynomial.from_map({})


def test_kernel_time_model_recovers_floor_and_bandwidth(calibration):
    model = calibration.kernel_time
    assert model.kind("pointwise").floor_s == pytest.approx(synthetic.FLOOR_S, rel=1e-6)
    assert model.kind("reduction").bandwidth_bytes_per_s == pytest.approx(
        synthetic.BANDWIDTH, rel=1e-6
    )
    assert model.residuals.max < 1e-9


def test_fixed_costs(calibration):
    fixed = calibration.variant("reference:tensorwise").fixed
    assert fixed.gemm_factor == pytest.approx(1.0, rel=0.05)  # synthetic steps ran table gemms
    assert fixed.wall_extra_s == pytest.approx(synthetic.WALL_EXTRA_S, rel=1e-6)
    assert fixed.wall_floor_s == pytest.approx(synthetic.WALL_FLOOR_S)
    # the gemm table is interpolated in log space, so a little of its error lands here
    assert fixed.device_extra_s == pytest.approx(synthetic.DEVICE_EXTRA_S, abs=1.5e-6)


def test_prediction_at_unseen_shapes_matches_the_truth(calibration):
    shapes = [(3000, 5000, 7000), (700, 900, 1100)]
    config = EstimateConfig(
        Recipe.from_name("tensorwise"), find_gpu("h200"), REFERENCE, calibration=calibration
    )
    frame = estimate(shapes, config)
    for (M, K, N), row in zip(shapes, frame.rows()):
        nbytes = synthetic.total_bytes("tensorwise", (M, K, N))
        assert row["overhead_bytes_fitted"] == nbytes
        truth = 6 * synthetic.FLOOR_S + nbytes / synthetic.BANDWIDTH
        assert row["overhead_s_fitted"] == pytest.approx(truth, rel=1e-6)
        gemms = sum(synthetic.gemm_time(*d, "fp8") for d in ((M, K, N), (M, N, K), (N, M, K)))
        assert row["fp8_s"] == pytest.approx(gemms + truth + synthetic.DEVICE_EXTRA_S, rel=0.05)
        assert row["speedup"] == pytest.approx(row["bf16_s"] / row["fp8_s"])
        assert row["bf16_wall_s"] >= synthetic.WALL_FLOOR_S


def test_calibrated_levels_use_measured_bandwidth(calibration):
    config = EstimateConfig(
        Recipe.from_name("rowwise"), find_gpu("h200"), REFERENCE, calibration=calibration
    )
    row = estimate([(4096, 4096, 4096)], config).row(0)
    assert row["overhead_s_worst"] == pytest.approx(row["overhead_bytes_worst"] / 4.3e12)
    assert np.isfinite(row["speedup"])
