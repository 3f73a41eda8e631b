import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py
import numpy as np
import pandas as pd
import pytest
import synthetic

pytest.importorskip("matplotlib")
from matplotlib.contour import ContourSet
from matplotlib.image import imread

from f8roof.calibration.fitting import fit_calibration
from f8roof.engine.grid import GridError, overhead_shares, parse_axis, sizes, speedup_grid
from f8roof.engine.recommend import recommend
from f8roof.engine.resolve import Request, resolve
from f8roof.renderers.plot import (
    PlotError,
    heatmap,
    layer_speedups,
    overhead_share,
    validation_scatter,
)
from f8roof.training.catalog import builtin

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def config():
    return resolve(Request(gpu="h100", no_calibration=True)).config


@pytest.fixture(scope="module")
def calibrated():
    calibration = fit_calibration(synthetic.measurements())
    return resolve(Request(gpu="h200", calibration=calibration)).config


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def pixel(plot, ax, fx: float, fy: float) -> np.ndarray:
    """RGB of the PNG at a fraction (fx, fy) of the axes, measured from its bottom left."""
    image = imread(plot.path)
    box = ax.get_window_extent()
    x = int(box.x0 + fx * box.width)
    y = int(box.y0 + fy * box.height)
    return image[image.shape[0] - 1 - y, x, :3]


def test_heatmap_png_colours_and_breakeven(tmp_path, config):
    plot = heatmap(speedup_grid(config), out=tmp_path / "heat.png")
    assert png_size(plot.path) == (700, 560)
    ax = plot.figure.axes[0]
    contours = [c for c in ax.collections if isinstance(c, ContourSet)]
    assert len(contours) == 1 and list(contours[0].levels) == [1.0]
    mesh = ax.collections[0]
    assert mesh.norm.vcenter == 1.0 and mesh.get_cmap().name == "RdBu"
    # large M and K = N (top right): float8 wins, blue; small (bottom left): it loses, red
    top_right, bottom_left = pixel(plot, ax, 0.97, 0.97), pixel(plot, ax, 0.03, 0.03)
    assert top_right[2] > top_right[0] + 0.3
    assert bottom_left[0] > bottom_left[2] + 0.3
    speedup = plot.data["speedup_worst"]
    assert speedup.min() < 1 < speedup.max()
    assert ax.get_xlabel() == "M" and ax.get_ylabel() == "K = N"


def draw(figure):
    """Lay the figure out as it is saved and return its renderer, for text extents."""
    figure.draw_without_rendering()
    return figure._get_renderer()


def path_length(paths) -> tuple[int, float]:
    vertices = [p.vertices for p in paths if len(p.vertices)]
    return sum(len(v) for v in vertices), sum(
        float(np.hypot(*np.diff(np.log2(v), axis=0).T).sum()) for v in vertices
    )


def test_heatmap_breakeven_drawn_whole_and_labelled_off_the_line(tmp_path, config):
    from matplotlib.figure import Figure

    plot = heatmap(speedup_grid(config), out=tmp_path / "heat.png")
    ax, renderer = plot.figure.axes[0], draw(plot.figure)
    (contour,) = [c for c in ax.collections if isinstance(c, ContourSet)]
    # the uncut contour of the same speedups, drawn on a bare axes
    xs, ys = np.unique(plot.data["M"]), np.unique(plot.data["K"])
    speedup = plot.data["speedup_worst"].to_numpy().reshape(len(ys), len(xs))
    bare = Figure().add_subplot().contour(xs, ys, speedup, levels=[1.0])
    count, length = path_length(contour.get_paths())
    bare_count, bare_length = path_length(bare.get_paths())
    assert count == bare_count > 20 and length == pytest.approx(bare_length, rel=1e-9)
    assert not ax.texts  # no inline label on the line
    (legend,) = plot.figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "breakeven: speedup 1 (float8 as fast as bf16)"
    ]
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def labels_overlap(axis, renderer) -> bool:
    lo, hi = sorted(axis.get_view_interval())
    boxes = [
        label.get_window_extent(renderer)
        for loc, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels())
        if lo <= loc <= hi and label.get_visible() and label.get_text()
    ]
    assert len(boxes) >= 2, "an axis without two labelled ticks"
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_heatmap_wide_range_ticks_do_not_collide(tmp_path, config):
    plot = heatmap(speedup_grid(config, lo=16, hi=2**20, points=17), out=tmp_path / "wide.png")
    ax, renderer = plot.figure.axes[0], draw(plot.figure)
    assert not labels_overlap(ax.xaxis, renderer) and not labels_overlap(ax.yaxis, renderer)


def test_heatmap_where_float8_always_wins_has_no_contour(tmp_path, config):
    plot = heatmap(speedup_grid(config, lo=16384, hi=65536, points=9), out=tmp_path / "big.png")
    assert (plot.data["speedup_worst"] > 1).all()
    ax = plot.figure.axes[0]
    assert not [c for c in ax.collections if isinstance(c, ContourSet)]


def test_heatmap_any_two_dims_svg(tmp_path, config):
    plot = heatmap(
        speedup_grid(config, x="K", y="N", fixed=4096, points=9), out=tmp_path / "kn.svg"
    )
    root = ET.parse(plot.path).getroot()
    assert root.tag.endswith("svg") and root.get("width") == "504pt"
    assert set(plot.data["M"]) == {4096} and plot.data["K"].nunique() == 9
    assert "M = 4096" in plot.figure.axes[0].get_title()


def test_heatmap_calibrated_uses_fitted(tmp_path, calibrated):
    plot = heatmap(speedup_grid(calibrated, points=9), out=tmp_path / "cal.png")
    assert "speedup" in plot.data.columns
    assert "fitted overhead, calibrated" in plot.figure.axes[0].get_title()


def test_overhead_share_levels(tmp_path, config, calibrated):
    plot = overhead_share(overhead_shares(config, points=17), out=tmp_path / "ovh.png")
    assert png_size(plot.path) == (700, 460)
    labels = [line.get_label() for line in plot.figure.axes[0].lines]
    assert labels == ["worst (seed model)", "ideal (fewest bytes)"]
    assert ((plot.data["worst"] >= plot.data["ideal"] - 1e-12) & (plot.data["worst"] < 1)).all()
    assert plot.data["worst"].iloc[0] > plot.data["worst"].iloc[-1]  # a smaller share when large
    fitted = overhead_share(overhead_shares(calibrated, points=17), out=tmp_path / "ovh_cal.svg")
    assert [line.get_label() for line in fitted.figure.axes[0].lines][-1] == "fitted (calibrated)"


def validation_frame(n=24, seed=0, lo=0.4, hi=1.8, noise=0.04):
    rng = np.random.default_rng(seed)
    measured = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return pd.DataFrame(
        {
            "M": 4096,
            "K": 4096,
            "N": 4096,
            "recipe": ["tensorwise", "rowwise"] * (n // 2),
            "measured_speedup": measured,
            "predicted_speedup": measured * np.exp(rng.normal(0, noise, n)),
            "seed_speedup": measured * 1.3,
        }
    )


def test_validation_scatter(tmp_path):
    csv = tmp_path / "validation.csv"
    validation_frame().to_csv(csv, index=False)
    plot = validation_scatter(csv, out=tmp_path / "val.png")
    assert png_size(plot.path) == (640, 600)
    ax = plot.figure.axes[0]
    points = sum(
        len(c.get_offsets()) for c in ax.collections if c.get_label().startswith(("f8roof", "seed"))
    )
    assert points == 2 * 24  # ours and the seed's
    identity = [line for line in ax.lines if line.get_label() == "y = x"]
    assert identity and np.allclose(identity[0].get_xdata(), identity[0].get_ydata())
    (legend,) = plot.figure.legends
    assert any("error band" in t.get_text() for t in legend.get_texts())


@pytest.mark.parametrize(
    "lo, hi, scale",
    [(0.4, 1.8, "linear"), (0.05, 3.0, "log"), (0.002, 40.0, "log"), (0.97, 1.08, "linear")],
)
def test_validation_scatter_readable_at_any_range(tmp_path, lo, hi, scale):
    frame = validation_frame(lo=lo, hi=hi, noise=0.01 if hi / lo < 1.5 else 0.04)
    plot = validation_scatter(frame, out=tmp_path / "val.png")
    ax, renderer = plot.figure.axes[0], draw(plot.figure)
    assert ax.get_xscale() == ax.get_yscale() == scale
    for axis in (ax.xaxis, ax.yaxis):
        assert not labels_overlap(axis, renderer)
        shown = [t for t in axis.get_majorticklocs() if lo / 2 <= t <= hi * 2]
        assert len(shown) <= 9
    # no point under the legend: every marker's box lies apart from the legend's
    (legend,) = plot.figure.legends
    box = legend.get_window_extent(renderer)
    for c in ax.collections:
        if c.get_label().startswith(("f8roof", "seed")):
            xy = ax.transData.transform(c.get_offsets())
            inside = (
                (xy[:, 0] > box.x0 - 4)
                & (xy[:, 0] < box.x1 + 4)
                & (xy[:, 1] > box.y0 - 4)
                & (xy[:, 1] < box.y1 + 4)
            )
            assert not inside.any()


def test_validation_report_missing_column(tmp_path):
    csv = tmp_path / "validation.csv"
    validation_frame().drop(columns=["seed_speedup"]).to_csv(csv, index=False)
    with pytest.raises(PlotError, match="lacks column.s. seed_speedup"):
        validation_scatter(csv, out=tmp_path / "val.png")


def test_layer_speedups(tmp_path):
    resolved = resolve(Request(gpu="h100", recipes="tensorwise,rowwise", no_calibration=True))
    rec = recommend(builtin("gpt2"), tokens=8192, resolved=resolved)
    plot = layer_speedups(rec, out=tmp_path / "layers.png")
    ax = plot.figure.axes[0]
    assert len(ax.patches) == 2 * 5  # a bar per layer and recipe (lm_head: NaN, so empty)
    assert any("bf16 only: N not a multiple of 16" in t.get_text() for t in ax.texts)
    assert png_size(plot.path)[0] == 800


def test_axes_and_sizes():
    assert parse_axis("k=n") == ("K", "N")
    with pytest.raises(GridError, match="bad axis"):
        parse_axis("B")
    s = sizes(100, 5000, 12)
    assert (s % 16 == 0).all() and s[0] >= 96 and s[-1] == 4992 and (np.diff(s) > 0).all()


def test_bad_output_name(tmp_path, config):
    with pytest.raises(PlotError, match="use a .png or .svg"):
        heatmap(speedup_grid(config, points=5), out=tmp_path / "heat.jpg")


def test_missing_matplotlib(cli, tmp_path, config, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(PlotError, match=r"pip install 'f8roof\[plot\]'"):
        heatmap(speedup_grid(config, points=5), out=tmp_path / "heat.png")
    result = cli("plot", "--out", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert result.output.strip() == "Error: plotting needs matplotlib: pip install 'f8roof[plot]'"


def test_cli_default_heatmap(cli, tmp_path):
    out = tmp_path / "heat.png"
    result = cli("plot", "--gpu", "h100", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert png_size(out) == (700, 560) and f"wrote {out}" in result.output


def test_cli_kinds(cli, tmp_path):
    csv = tmp_path / "validation.csv"
    validation_frame().to_csv(csv, index=False)
    result = cli("plot", "--validation", str(csv), "--out", str(tmp_path / "v.svg"))
    assert result.exit_code == 0, result.output
    result = cli("plot", "--kind", "overhead", "--no-calibration", "--out", str(tmp_path / "o.png"))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--out", "x.gif"], "use a .png or .svg"),
        (["--kind", "validation", "--out", "x.png"], "needs --validation"),
        (["--x", "M", "--y", "M=N", "--out", "x.png"], "share a dimension"),
        (["--x", "Q", "--out", "x.png"], "bad axis 'Q'"),
        (["--level", "fitted", "--no-calibration", "--out", "x.png"], "needs a calibration"),
        (["--recipe", "all", "--out", "x.png"], "one --recipe"),
        (["--gpu", "z80", "--out", "x.png"], "unknown GPU 'z80'"),
        (["--min", "4096", "--max", "512", "--out", "x.png"], "bad size range"),
    ],
)
def test_cli_bad_input(cli, tmp_path, args, message):
    result = cli("plot", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
