"""The band on the shipped calibrations: it holds the datasheet estimate at every fit shape of
every variant (before any stretching), and it is not a point."""

import numpy as np
import pytest

from f8roof.calibration.file import Calibration
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, band_columns, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.variant import Variant, context_fused_roles


@pytest.mark.parametrize("gpu_name", ["h100", "h200", "h100-meta"])
def test_the_band_holds_the_datasheet_estimate_at_every_fit_shape(gpu_name):
    gpu = find_gpu(gpu_name)
    calibration = Calibration.load(shipped_calibration(gpu))
    checked = 0
    for fit in calibration.variants:
        variant = Variant.from_key(fit.variant)
        if variant.is_bf16:
            continue
        config = EstimateConfig(
            variant.recipe,
            gpu,
            implementation=variant.implementation,
            context=variant.context,
            fused=context_fused_roles(variant.context),
            calibration=calibration,
        )
        frame = estimate(list(calibration.fit_shapes), config, ranges=True)
        M, K, N = (frame[c].astype(np.float64) for c in "MKN")
        columns = {c: frame[c] for c in frame.columns}
        band = band_columns(config, columns, config.class_rates, M, K, N, contain=False)
        for name in ("speedup", "speedup_context"):
            value = frame[name]
            assert (band[f"{name}_low"] <= value * (1 + 1e-9)).all(), (fit.variant, name)
            assert (value <= band[f"{name}_high"] * (1 + 1e-9)).all(), (fit.variant, name)
            assert (band[f"{name}_high"] > band[f"{name}_low"] * 1.01).all()
        checked += len(frame)
    assert checked >= 12 * 20


def test_a_measured_calibration_collapses_the_band_to_its_residual():
    """A synthetic measured calibration whose kernels follow its kernel-time model exactly
    (residual 0): its rates replace the public ranges and the band is the gemm modes' factors
    only (the measured gemm table holds the slow-accumulation times: factor 1), a point."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import synthetic

    from f8roof.calibration.fitting import fit_calibration
    from f8roof.traffic.recipes import Recipe
    from f8roof.traffic.variant import Implementation

    calibration = fit_calibration(synthetic.measurements())
    assert calibration.is_measured and calibration.kernel_time.residuals.median < 1e-6
    config = EstimateConfig(
        Recipe.from_name("tensorwise"),
        find_gpu("h200"),
        implementation=Implementation.REFERENCE,
        calibration=calibration,
    )
    assert config.class_rates.measured
    frame = estimate([(4096, 4096, 4096), (8192, 2048, 1024)], config)
    width = (frame["speedup_high"] - frame["speedup_low"]) / frame["speedup"]
    assert (width < 1e-6).all()
