"""Calibrations carry each fitted kernel's class: written when known, read back, refused when
unknown; files written before kernel classes load without them (the band then takes each
kind's widest range), and a known class narrows the band to its own range."""

import copy

import numpy as np
import pytest

from f8roof.calibration.file import Calibration, CalibrationError, sample_from_json, sample_to_json
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.fit import KernelSample
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Implementation

GPU = find_gpu("h100")


def shipped() -> dict:
    """The shipped h100 file as a file written before kernel classes (no 'class' fields)."""
    data = Calibration.load(shipped_calibration(GPU)).to_dict()
    for variant in data["variants"]:
        for kernel_set in variant["kernel_sets"]:
            for kernel in kernel_set["kernels"]:
                kernel.pop("class", None)
    return data


def test_the_shipped_files_carry_every_kernels_class():
    for name in ("h100", "h200", "h100-meta"):
        calibration = Calibration.load(shipped_calibration(find_gpu(name)))
        kernels = [
            k for v in calibration.variants for r in v.traffic.kernel_sets for k in r.kernels
        ]
        assert kernels and all(k.kernel_class is not None for k in kernels)
        classes = {k.kernel_class for k in kernels}
        # at the fit shapes column amaxes over M compile as split reductions
        assert {"reduction_inner", "reduction_split", "pointwise_transpose"} <= classes


def with_classes(data: dict, kernel_class: str) -> dict:
    data = copy.deepcopy(data)
    for variant in data["variants"]:
        for kernel_set in variant["kernel_sets"]:
            for kernel in kernel_set["kernels"]:
                kernel["class"] = kernel_class if kernel["kind"] != "extern" else "extern"
    return data


def test_files_before_kernel_classes_load_without_them():
    calibration = Calibration.from_dict(shipped())
    kernels = [k for v in calibration.variants for r in v.traffic.kernel_sets for k in r.kernels]
    assert kernels and all(k.kernel_class is None for k in kernels)
    assert "class" not in str(calibration.to_dict()["variants"][1]["kernel_sets"][0]["kernels"][0])


def test_classes_round_trip_and_unknown_ones_are_refused():
    data = with_classes(shipped(), "pointwise")
    again = Calibration.from_dict(data).to_dict()
    kernel = again["variants"][1]["kernel_sets"][0]["kernels"][0]
    assert kernel["class"] in ("pointwise", "extern")
    bad = copy.deepcopy(data)
    bad["variants"][1]["kernel_sets"][0]["kernels"][0]["class"] = "warp_speed"
    with pytest.raises(CalibrationError, match="unknown kernel class 'warp_speed'"):
        Calibration.from_dict(bad)


def test_checkpoint_samples_keep_their_class():
    sample = KernelSample("k", "fwd", "reduction", "input", 10, 0, None, "reduction_outer")
    assert sample_from_json(sample_to_json(sample), source="x").kernel_class == "reduction_outer"
    plain = KernelSample("k", "fwd", "reduction", "input", 10)
    assert "class" not in sample_to_json(plain)
    assert sample_from_json(sample_to_json(plain), source="x").kernel_class is None


def test_a_recorded_class_narrows_the_band():
    """Every kernel recorded as pointwise (0.70-0.92 of HBM) instead of its kind's widest
    range (reductions down to 0.30): the same estimate, a narrower band."""
    config = EstimateConfig(Recipe.from_name("rowwise"), GPU, Implementation.TORCHAO)
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)]
    kinds = estimate(
        shapes, EstimateConfig(**{**vars(config), "calibration": Calibration.from_dict(shipped())})
    )
    classes = estimate(
        shapes,
        EstimateConfig(
            **{
                **vars(config),
                "calibration": Calibration.from_dict(with_classes(shipped(), "pointwise")),
            }
        ),
    )
    assert np.allclose(kinds["speedup"], classes["speedup"])
    assert (classes["speedup_low"] > kinds["speedup_low"]).all()
    assert (classes["speedup_low"] <= classes["speedup"]).all()
