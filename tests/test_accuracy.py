"""The validation report: errors, summaries and the measured breakeven, on synthetic steps."""

import pytest
import synthetic

from f8roof.calibration.file import StepMeasurement
from f8roof.calibration.fitting import fit_calibration
from f8roof.device.accuracy import (
    Pair,
    measured_square_breakeven,
    percent_error,
    summary,
    validation_frame,
)
from f8roof.renderers.validation import markdown_report
from f8roof.traffic.variant import Variant


def step(variant, shape, device_s, wall_s=None):
    return StepMeasurement(variant, *shape, device_s, device_s / 2, wall_s or device_s * 1.1, 10)


TENSORWISE = Variant.from_key("reference:tensorwise")


@pytest.fixture(scope="module")
def calibration():
    return fit_calibration(synthetic.measurements())


def test_percent_error_is_signed_relative_to_measured():
    assert percent_error(1.1, 1.0) == pytest.approx(10.0)
    assert percent_error(0.9, 1.0) == pytest.approx(-10.0)


def test_frame_has_the_contract_columns_and_both_predictions(calibration):
    pairs = [
        Pair(
            TENSORWISE,
            step("bf16", (2048, 2048, 2048), 300e-6),
            step(TENSORWISE.key, (2048, 2048, 2048), 200e-6),
        )
    ]
    frame = validation_frame(calibration, pairs)
    row = frame.iloc[0]
    assert row.measured_speedup == pytest.approx(1.5)
    assert row.error_pct == pytest.approx(100 * (row.predicted_speedup - 1.5) / 1.5)
    assert row.seed_error_pct == pytest.approx(100 * (row.seed_speedup - 1.5) / 1.5)
    for column in (
        "M",
        "K",
        "N",
        "recipe",
        "implementation",
        "context",
        "measured_speedup",
        "predicted_speedup",
        "seed_speedup",
        "measured_fp8_s",
        "predicted_fp8_s",
        "measured_wall_speedup",
    ):
        assert column in frame.columns


def test_summary_and_breakeven(calibration):
    speedups = {512: 0.8, 1024: 0.95, 2048: 1.1, 4096: 1.3}
    pairs = [
        Pair(TENSORWISE, step("bf16", (s,) * 3, 100e-6 * x), step(TENSORWISE.key, (s,) * 3, 100e-6))
        for s, x in speedups.items()
    ]
    frame = validation_frame(calibration, pairs)
    stats = summary(frame).loc["reference:tensorwise"]
    assert stats.shapes == 4
    assert stats.median_abs_error_pct == pytest.approx(frame.error_pct.abs().median())
    assert stats.max_abs_error_pct == pytest.approx(frame.error_pct.abs().max())
    assert measured_square_breakeven(frame) == 2048
    text = markdown_report(frame, calibration)
    assert "| reference:tensorwise | 4 |" in text
    assert "float8 wins from M = K = N = 2048" in text
