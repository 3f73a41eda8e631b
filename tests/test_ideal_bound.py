"""'ideal' bounds what Inductor generates: at every fit and check shape of every shipped
calibration, each variant's ideal overhead is at most its fitted overhead (the float8 graph's
fitted non-gemm bytes less the bf16 graph's of the same context, as the estimate computes it)."""

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import f8roof
from f8roof.calibration import shipped as calibrations
from f8roof.calibration.file import Calibration
from f8roof.timing.overhead import fitted_kernels
from f8roof.traffic.monomials import SYMBOLS, ShapeArrays
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation, Variant, context_fused_roles
from f8roof.traffic.worst_ideal import ideal_traffic

SHIPPED = sorted(
    Path(f8roof.__file__).parent / "calibration" / "data" / name
    for name in calibrations.SHIPPED.values()
)


def fitted_overhead_bytes(calibration, variant: Variant, shapes) -> np.ndarray:
    arrays = ShapeArrays(*(np.array([s[i] for s in shapes], dtype=np.float64) for i in range(3)))
    fp8 = calibration.variant(variant.key)
    bf16 = calibration.variant(variant.baseline.key)
    fp8_bytes, _ = fitted_kernels(
        fp8.traffic.kernel_sets, calibration.kernel_time, fp8.variant, arrays
    )
    bf16_bytes, _ = fitted_kernels(
        bf16.traffic.kernel_sets, calibration.kernel_time, bf16.variant, arrays
    )
    return fp8_bytes - bf16_bytes


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_ideal_is_at_most_fitted_at_every_fit_and_check_shape(path):
    calibration = Calibration.load(path)
    checked = variants = 0
    for fit in calibration.variants:
        variant = Variant.from_key(fit.variant)
        if variant.is_bf16:
            continue
        variants += 1
        shapes = sorted(
            set(calibration.fit_shapes)
            | {s for r in fit.traffic.kernel_sets for s in (*r.shapes, *r.verified)}
        )
        fitted = fitted_overhead_bytes(calibration, variant, shapes)
        model = ideal_traffic(
            variant.recipe,
            implementation=variant.implementation,
            fused=context_fused_roles(variant.context),
        )
        ideal = sp.lambdify(SYMBOLS, model.total, modules="numpy")
        for shape, fitted_bytes in zip(shapes, fitted):
            assert ideal(*shape) <= fitted_bytes, (fit.variant, shape)
            checked += 1
    # every variant (18 float8 ones at least: torchao's three recipes in six contexts), every
    # fit shape
    assert variants >= 18 and checked >= len(calibration.fit_shapes) * variants


def test_ideal_stays_below_fitted_where_layernorm_absorbs_a_read_and_a_rescale():
    """Rowwise, torchao, LayerNorm -> Sigmoid, 8192^3: the ideal was once 1,342,504,960 B,
    above the fitted 1,208,336,388 B, because it charged a bf16 read the LayerNorm's kernel
    fuses away and torchao's grad_input rescale, which LayerNorm's backward absorbs."""
    calibration = Calibration.load(next(p for p in SHIPPED if p.stem == "h100"))
    variant = Variant.of(
        Recipe.from_name("rowwise"), Implementation.TORCHAO, Context.from_name("layernorm+sigmoid")
    )
    shape = (8192, 8192, 8192)
    fitted = fitted_overhead_bytes(calibration, variant, [shape])[0]
    assert fitted == 1_208_336_388
    model = ideal_traffic(
        variant.recipe,
        implementation=variant.implementation,
        fused=context_fused_roles(variant.context),
    )
    ideal = int(model.total.subs(dict(zip(SYMBOLS, shape))))
    assert ideal <= fitted
    # the old value is the standalone linear's ideal, which nothing fuses into: unchanged
    standalone = ideal_traffic(variant.recipe, implementation=variant.implementation)
    assert int(standalone.total.subs(dict(zip(SYMBOLS, shape)))) == 1_342_504_960
