"""The shipped traffic calibrations: they load, they say what they are, their exact fits match
fresh captures of the same versions, and the build script rebuilds them byte for byte."""

import sys
from pathlib import Path

import numpy as np
import pytest
import requires
import torch

from f8roof.calibration.file import Calibration
from f8roof.calibration.shipped import SHIPPED, shipped_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import Float8Family, find_gpu
from f8roof.timing.gemm import GemmRole
from f8roof.timing.overhead import nearest_kernel_set
from f8roof.traffic.fit import FIT_SHAPES, kind_family
from f8roof.traffic.monomials import ShapeArrays
from f8roof.traffic.variant import Variant

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


@pytest.fixture(scope="module", params=list(SHIPPED))
def shipped(request):
    return request.param, Calibration.load(shipped_calibration(find_gpu(request.param)))


def test_each_loads_and_says_what_it_is(shipped):
    preset, calibration = shipped
    env = calibration.environment
    assert not calibration.is_measured and env.device == "codegen" and env.gpu == preset
    assert env.date is None  # a rebuild on the same versions is byte-identical
    assert "traffic from generated code" in calibration.source and "datasheet" in calibration.source
    assert calibration.fit_shapes == FIT_SHAPES
    keys = {v.variant for v in calibration.variants}
    for context in ("none", "layernorm+sigmoid", "rmsnorm+none", "silu_mul+none"):
        suffix = "" if context == "none" else f"@{context}"
        assert {f"bf16{suffix}", f"torchao:tensorwise{suffix}", f"torchao:rowwise{suffix}"} <= keys
    # the reference casts to the OCP encodings only: none for a part with fnuz float8
    fnuz = find_gpu(preset).fp8_dtype_family is Float8Family.FNUZ
    assert ("reference:tensorwise_delayed" in keys) is not fnuz
    for variant in calibration.variants:  # every fit shape has a kernel set; nothing left unfitted
        assert not variant.traffic.unfitted
        assert sum(len(r.shapes) for r in variant.traffic.kernel_sets) == len(FIT_SHAPES)


@pytest.mark.parametrize(
    "code, also",
    [
        ("h100", "h200"),
        ("b200", "gb200"),
        ("b200", "b300"),
        ("b200", "gb300"),
        ("mi355x", "mi350x"),
    ],
)
def test_a_part_with_the_same_generated_code_shares_bytes_not_times(code, also):
    """h200's bytes are h100's; gb200's, b300's and gb300's are b200's; mi350x's are mi355x's
    (the build script generates them again and compares); each part times them by its own
    datasheet."""
    first, second = (Calibration.load(shipped_calibration(find_gpu(g))) for g in (code, also))
    assert [v.traffic for v in first.variants] == [v.traffic for v in second.variants]
    assert first.datasheet_gemm.gpu.name == code and second.datasheet_gemm.gpu.name == also
    cube = (np.array([8192.0]),) * 3
    gemm_s = [
        c.datasheet_gemm.time_s("bf16", GemmRole.OUTPUT, *cube)[0][0] for c in (first, second)
    ]
    copy = [c.ceilings.copy_bandwidth_bytes_per_s for c in (first, second)]
    # h200: H100's SMs at more bandwidth; gb200 and the B300s: b200's bandwidth, faster bf16
    # gemms; mi350x: mi355x's HBM, slower gemms (2.2 against 2.4 GHz)
    assert copy[1] != copy[0] or gemm_s[1] != gemm_s[0]


def test_mi300x_reads_its_own_code_where_the_cu_count_changes_it():
    """mi300x.json is the code generated for MI300X's properties, not h100's: Inductor sizes
    split reductions by the CU count (304 against 132), which moves rowwise's overhead bytes at
    the largest fit shape; tensorwise's are the same code's."""
    largest, middle = FIT_SHAPES[-1], (8192, 4096, 4096)

    def overhead(gpu: str, key: str) -> list[float]:
        variant = Variant.from_key(key)
        calibration = Calibration.load(shipped_calibration(find_gpu(gpu)))
        config = EstimateConfig(
            variant.recipe,
            find_gpu(gpu),
            variant.implementation,
            variant.context,
            calibration=calibration,
        )
        rows = estimate([largest, middle], config)
        return [rows.row(i)["overhead_bytes_fitted"] for i in range(2)]

    assert overhead("mi300x", "torchao:tensorwise") == overhead("h100", "torchao:tensorwise")
    ours, theirs = overhead("mi300x", "torchao:rowwise"), overhead("h100", "torchao:rowwise")
    assert ours[0] > 1.03 * theirs[0] and ours[1] == theirs[1]


def test_default_estimate_is_the_shipped_one(cli):
    result = cli("estimate", "--gpu", "h200", "--shape", "4096,4096,4096")
    assert result.exit_code == 0
    assert result.output.startswith("h200 tensorwise (shipped h200.json): times fitted")
    full = cli("estimate", "--gpu", "h200", "--shape", "4096,4096,4096", "--show-all")
    assert "traffic from generated code: torch" in full.output and "x fitted" in full.output


# (variant, shape, whether the split-reduction workspace stays within the kernel set's bound)
CHECKED = [
    ("torchao:rowwise", (4096, 4096, 4096), True),  # between fit shapes
    ("torchao:tensorwise@layernorm+sigmoid", (2048, 1280, 3072), True),  # a fit shape
    ("reference:tensorwise_delayed", (8192, 3072, 2048), True),
    # llama3-8b's q_proj and down_proj at 8192 tokens: Inductor compiles the kernel set of a
    # farther fit shape (RMSNorm's backward as a mix-order reduction, whose partials, a
    # quarter of M x K, outgrow the bound seen at (4096, 2048, 5120); fused amaxes after
    # silu*mul): the nearest shape's set is wrong there, the kernel-set range brackets it
    ("torchao:rowwise@rmsnorm+none", (8192, 4096, 4096), False),
    ("torchao:rowwise@silu_mul+none", (8192, 14336, 4096), True),
]


@pytest.mark.slow
@requires.torchao
@requires.torch_213_torchao_018
@pytest.mark.parametrize("key, shape, bounded", CHECKED)
def test_fits_match_fresh_captures(key, shape, bounded):
    """The kernel set Inductor generates at the shape is one of the variant's fitted kernel sets,
    whose polynomial gives its bytes exactly: what compare counts (the float8 graph minus the bf16
    graph of its context) less the split-reduction workspace Inductor's heuristics size, which
    traffic/fit.py keeps out of the exact fit and which stays within the kernel set's bound. Where the
    estimate's kernel set (that of the nearest fit shape) is that set, overhead_bytes_fitted is it."""
    from f8roof.profiler.capture import capture

    variant = Variant.from_key(key)
    calibration = Calibration.load(shipped_calibration(find_gpu("h100")))
    graphs = [
        capture(v, shape, device="codegen", gpu=find_gpu("h100"))
        for v in (variant, variant.baseline)
    ]
    exact = []
    for v, captured in zip((variant, variant.baseline), graphs):
        samples = tuple(captured.samples())
        kernel_sets = calibration.variant(v.key).traffic.kernel_sets
        kernels = sorted(
            (s.graph, kind_family(s.kind), s.role or "", s.fitted_bytes) for s in samples
        )
        kernel_set = next(r for r in kernel_sets if _kernels_at(r, shape) == kernels)  # one of them
        workspace = sum(s.workspace for s in samples)
        assert kernel_set.total.exact(shape) == captured.overhead_bytes - workspace
        assert workspace <= max(kernel_set.workspace_max, 4 * 2**20) or not bounded
        exact.append((kernel_sets, kernel_set, int(kernel_set.total.exact(shape))))
    row = estimate([shape], _config(variant, calibration), ranges=True).row(0)
    fitted = row["overhead_bytes_fitted"]
    # whichever set the estimate chose, the range over nearby sets holds the one compiled
    overhead = exact[0][2] - exact[1][2]
    low = row.get("overhead_bytes_fitted_low", fitted)  # absent: one set at every fit shape
    high = row.get("overhead_bytes_fitted_high", fitted)
    assert low <= overhead <= high
    chosen = [
        kernel_sets[nearest_kernel_set(kernel_sets, ShapeArrays(*([float(d)] for d in shape)))[0]]
        for kernel_sets, _, _ in exact
    ]
    if all(c is kernel_set for c, (_, kernel_set, _) in zip(chosen, exact)):
        assert fitted == overhead


def _config(variant: Variant, calibration: Calibration) -> EstimateConfig:
    return EstimateConfig(
        variant.recipe,
        find_gpu("h100"),
        variant.implementation,
        variant.context,
        calibration=calibration,
    )


def _kernels_at(kernel_set, shape) -> list:
    """A kernel set's kernels with their bytes at `shape` (buffer polynomials cannot be read off a
    capture whose M, K, N are not distinct, as at 4096^3: compare the bytes instead)."""
    return sorted(
        (k.graph, kind_family(k.kind), k.role or "", int(k.nbytes.exact(shape)))
        for k in kernel_set.kernels
    )


@pytest.mark.slow
@requires.torchao
@requires.torch_213_torchao_018
def test_the_build_script_rebuilds_a_variant_byte_for_byte():
    """One variant over the 12 fit shapes, through the script's own steps, serialized as the
    shipped file serializes it."""
    import json

    import build_traffic_calibrations as build

    from f8roof.calibration.fitting import traffic_calibration
    from f8roof.device.calibrate import CalibrateOptions, generated_samples
    from f8roof.profiler.device import environment
    from f8roof.timing.datasheet import datasheet_timing

    key = "torchao:tensorwise"
    assert Variant.from_key(key) in build.shipped_variants()
    gpu = find_gpu("h100")
    options = CalibrateOptions.defaults("codegen", variants=(Variant.from_key(key),), gpu=gpu)
    rebuilt = traffic_calibration(
        generated_samples(options),
        environment=environment("codegen", gpu=gpu),
        fit_shapes=options.shapes,
        timing=datasheet_timing(gpu),
    )
    shipped = json.loads(shipped_calibration(gpu).read_text())
    assert torch.__version__ == shipped["environment"]["torch"]
    ours = {v["variant"]: v for v in rebuilt.to_dict()["variants"]}
    theirs = {v["variant"]: v for v in shipped["variants"]}
    for name in (key, "bf16"):
        assert json.dumps(ours[name], indent=1) == json.dumps(theirs[name], indent=1)


def test_codegen_estimate_warns_when_versions_differ(monkeypatch):
    from f8roof.profiler import graphs

    env = Calibration.load(shipped_calibration(find_gpu("h100"))).environment
    theirs = {"torch": env.torch, "triton": env.triton, "torchao": env.torchao}
    monkeypatch.setattr(graphs, "versions", lambda: theirs)
    assert graphs.version_mismatch(theirs) is None
    monkeypatch.setattr(graphs, "versions", lambda: {**theirs, "torch": "2.11.0"})
    assert graphs.version_mismatch(theirs) == f"torch {env.torch} there, 2.11.0 here"


def test_kernel_set_range_holds_the_fitted_overhead():
    """Everywhere, the nearest set's overhead lies in the range over the nearby sets; a
    variant compiled to one set at every fit shape has no range columns (its fit is exact)."""
    calibration = Calibration.load(shipped_calibration(find_gpu("h100")))
    shapes = np.random.default_rng(1).integers(1, 2048, size=(5000, 3)) * 16
    ranged = 0
    for fit in calibration.variants:
        variant = Variant.from_key(fit.variant)
        if variant.recipe is None:
            continue  # a bf16 baseline
        frame = estimate(shapes, _config(variant, calibration), ranges=True)
        if "overhead_bytes_fitted_low" not in frame:
            baseline = calibration.variant(variant.baseline.key)
            assert len(fit.traffic.kernel_sets) == len(baseline.traffic.kernel_sets) == 1, (
                fit.variant
            )
            continue
        ranged += 1
        fitted = frame["overhead_bytes_fitted"]
        assert (frame["overhead_bytes_fitted_low"] <= fitted + 1e-6).all(), fit.variant
        assert (fitted <= frame["overhead_bytes_fitted_high"] + 1e-6).all(), fit.variant
    assert ranged >= 5  # rowwise's sets vary with the shape in every context


@pytest.mark.parametrize("gpu, recipe", [("mi355x", "mxfp8_rceil"), ("b200", "mxfp8_rceil")])
def test_a_datasheet_calibration_times_block_scaled_gemms_as_its_preset_does(gpu, recipe):
    """The file stores bf16 and float8 families only; MX gemms still run the preset's MXFP8
    family (on MI355X at bf16's throughput, pytorch/ao#4290), as without the file."""
    from f8roof.engine.resolve import Request, resolve
    from f8roof.timing.datasheet import datasheet_timing
    from f8roof.timing.gemm import BlockScaledGemm, GemmRole
    from f8roof.traffic.recipes import Recipe

    config = resolve(Request(gpu=gpu, recipes=recipe)).config
    assert config.calibration is not None
    dims = (8192, 4096, 14336)
    ours = config.gemm_model.time_s("fp8", GemmRole.OUTPUT, *dims)[0]
    preset = BlockScaledGemm.of(datasheet_timing(find_gpu(gpu)).all_gemms, Recipe.from_name(recipe))
    assert ours == pytest.approx(preset.time_s("fp8", GemmRole.OUTPUT, *dims)[0])
    fp8 = config.calibration.gemm_model.time_s("fp8", GemmRole.OUTPUT, *dims)[0]
    assert bool(ours > 1.9 * fp8) == (gpu == "mi355x")
