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
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.contour import ContourSet
from matplotlib.image import imread

import f8roof
from f8roof.calibration.fitting import fit_calibration
from f8roof.engine.answer import Question, answer
from f8roof.engine.grid import GridError, overhead_shares, parse_axis, sizes, speedup_grid
from f8roof.engine.plan import Plan
from f8roof.engine.recommend import recommend
from f8roof.engine.resolve import Request, resolve
from f8roof.engine.step.parts import Part
from f8roof.renderers.notes import provenance_line
from f8roof.renderers.plot import (
    PlotError,
    heatmap,
    layer_speedups,
    overhead_share,
    step_memory,
    validation_scatter,
)
from f8roof.training.catalog import builtin
from f8roof.training.run_config import RunConfig

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def roofline():
    return resolve(Request(gpu="h100", no_calibration=True))


@pytest.fixture(scope="module")
def config(roofline):
    return roofline.config


@pytest.fixture(scope="module")
def basis(roofline):
    return roofline.provenance


@pytest.fixture(scope="module")
def measured():
    calibration = fit_calibration(synthetic.measurements())
    return resolve(Request(gpu="h200", calibration=calibration))


@pytest.fixture(scope="module")
def calibrated(measured):
    return measured.config


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


def test_heatmap_png_colours_and_breakeven(tmp_path, config, basis):
    plot = heatmap(speedup_grid(config), out=tmp_path / "heat.png", provenance=basis)
    assert png_size(plot.path) == (700, 580)
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


def test_heatmap_breakeven_drawn_whole_and_labelled_off_the_line(tmp_path, config, basis):
    from matplotlib.figure import Figure

    plot = heatmap(speedup_grid(config), out=tmp_path / "heat.png", provenance=basis)
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


def test_heatmap_wide_range_ticks_do_not_collide(tmp_path, config, basis):
    grid = speedup_grid(config, lo=16, hi=2**20, points=17)
    plot = heatmap(grid, out=tmp_path / "wide.png", provenance=basis)
    ax, renderer = plot.figure.axes[0], draw(plot.figure)
    assert not labels_overlap(ax.xaxis, renderer) and not labels_overlap(ax.yaxis, renderer)


def test_heatmap_where_float8_always_wins_has_no_contour(tmp_path, config, basis):
    grid = speedup_grid(config, lo=16384, hi=65536, points=9)
    plot = heatmap(grid, out=tmp_path / "big.png", provenance=basis)
    assert (plot.data["speedup_worst"] > 1).all()
    ax = plot.figure.axes[0]
    assert not [c for c in ax.collections if isinstance(c, ContourSet)]


def test_heatmap_any_two_dims_svg(tmp_path, config, basis):
    grid = speedup_grid(config, x="K", y="N", fixed=4096, points=9)
    plot = heatmap(grid, out=tmp_path / "kn.svg", provenance=basis)
    root = ET.parse(plot.path).getroot()
    assert root.tag.endswith("svg") and root.get("width") == "504pt"
    assert set(plot.data["M"]) == {4096} and plot.data["K"].nunique() == 9
    assert "M = 4096" in plot.figure.get_suptitle()


def test_heatmap_calibrated_uses_fitted_and_names_the_measured_file(tmp_path, measured):
    plot = heatmap(
        speedup_grid(measured.config, points=9),
        out=tmp_path / "cal.png",
        provenance=measured.provenance,
    )
    assert "speedup" in plot.data.columns
    title = plot.figure.get_suptitle()
    assert "(fitted overhead)" in title and "calibrated" not in title
    assert title.splitlines()[1].startswith("using h200")
    assert "measured on" in title  # a measured calibration says so, and whose


def test_overhead_share_levels(tmp_path, config, basis, measured):
    plot = overhead_share(
        overhead_shares(config, points=17), out=tmp_path / "ovh.png", provenance=basis
    )
    assert png_size(plot.path) == (700, 540)
    labels = [line.get_label() for line in plot.figure.axes[0].lines]
    assert [label.split(":")[0] for label in labels] == ["worst", "ideal"]
    assert ((plot.data["worst"] >= plot.data["ideal"] - 1e-12) & (plot.data["worst"] < 1)).all()
    assert plot.data["worst"].iloc[0] > plot.data["worst"].iloc[-1]  # a smaller share when large
    fitted = overhead_share(
        overhead_shares(measured.config, points=17),
        out=tmp_path / "ovh_cal.svg",
        provenance=measured.provenance,
    )
    labels = [line.get_label() for line in fitted.figure.axes[0].lines]
    assert labels[-1].startswith("fitted: the generated code's kernels, timed as the title says")
    assert not any("calibrated" in label for label in labels)


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


@pytest.fixture(scope="module")
def small_step():
    """llama3-8b at 2048 tokens per GPU: layers on both sides of 1, bands straddling it, and a
    decision the step changed (q_proj loses alone and is converted)."""
    return f8roof.answer_model("llama3-8b", 2048, gpu="h100", fsdp=8, recompute="selective")


@pytest.fixture(scope="module")
def step_8192():
    return f8roof.answer_model("llama3-8b", 8192, gpu="h100", fsdp=8, recompute="selective")


def top_down(patches):
    """Bars from the top row of a horizontal bar plot down (rows are drawn top first)."""
    return sorted(patches, key=lambda bar: -(bar.get_y() + bar.get_height() / 2))


def band_segments(ax) -> list[tuple[float, float, float]]:
    """(position, low, high) of every error bar drawn: x error bars carry y, y ones x."""
    found = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            for (x0, y0), (x1, y1) in container.lines[2][0].get_segments():
                found += [(y0, x0, x1)] if y0 == y1 else [(x0, y0, y1)]
    return found


def test_layer_bars_diverge_from_one_coloured_by_decision_with_their_band(tmp_path, small_step):
    rec, basis = small_step.recommendation, small_step.resolved.provenance
    rows = rec.layers
    plot = layer_speedups(rec, out=tmp_path / "layers.png", provenance=basis)
    assert png_size(plot.path)[0] == 800
    ax = plot.figure.axes[0]
    bars = top_down(ax.patches)
    speedup = rows["speedup"].to_numpy()
    assert (speedup < 1).any() and (speedup > 1).any()
    # each bar runs from 1 to the row's speedup: a loss to the left, a win to the right
    assert [bar.get_x() for bar in bars] == [1.0] * len(rows)
    assert [bar.get_x() + bar.get_width() for bar in bars] == pytest.approx(speedup, rel=1e-12)
    # a log axis symmetric about 1 that holds every band end
    lo, hi = ax.get_xlim()
    assert ax.get_xscale() == "log" and lo * hi == pytest.approx(1.0)
    assert lo < rows["speedup_low"].min() and hi > rows["speedup_high"].max()
    # coloured by the decision the answer prints (q_proj: the step converts it below 1)
    colours = {"convert": "tab:blue", "keep bf16": "tab:red"}
    assert [to_hex(bar.get_facecolor()) for bar in bars] == [
        to_hex(colours[d]) for d in rows["decision"]
    ]
    q_proj = rows["fqn"].tolist().index("model.layers.*.self_attn.q_proj")
    assert speedup[q_proj] < 1 and rows["decision"][q_proj] == "convert"
    # the band as an error bar on every row, its ends the row's
    bands = sorted(band_segments(ax), key=lambda b: -b[0])
    assert [low for _, low, _ in bands] == pytest.approx(rows["speedup_low"].tolist(), rel=1e-12)
    assert [high for _, _, high in bands] == pytest.approx(rows["speedup_high"].tolist(), rel=1e-12)
    # '*' marks exactly the rows whose band straddles 1
    marked = [label.get_text().endswith(" *") for label in ax.get_yticklabels()]
    assert marked == rows["straddles"].tolist() and any(marked) and not all(marked)
    drawn = plot.data.sort_values("y", ascending=False)
    assert drawn["speedup"].tolist() == pytest.approx(speedup.tolist(), rel=1e-12)
    subtitle = plot.figure.get_suptitle().split("\n", 1)[1]  # the answer's first line, wrapped
    assert "using " + provenance_line(basis) == subtitle.replace("\n", " ")


def test_layer_bars_of_several_recipes_colour_the_one_each_row_runs(tmp_path, basis):
    resolved = resolve(Request(gpu="h100", recipes="tensorwise,rowwise", no_calibration=True))
    rec = recommend(builtin("gpt2"), tokens=8192, resolved=resolved)
    plot = layer_speedups(rec, out=tmp_path / "layers.png", provenance=resolved.provenance)
    ax = plot.figure.axes[0]
    runnable = rec.layers["fp8_ok"].to_numpy(dtype=bool)
    assert len(ax.patches) == 2 * runnable.sum()  # a bar per runnable layer and recipe
    assert any("bf16 only: N not a multiple of 16" in t.get_text() for t in ax.texts)
    drawn = plot.data
    own = drawn["decision"] != ""
    assert own.sum() == runnable.sum()  # one coloured bar per layer: the recipe it runs
    for row in drawn[own].itertuples():
        assert row.recipe == rec.layers.set_index("fqn").loc[row.fqn, "recipe"]
        column = f"speedup_worst_{row.recipe}"
        assert row.speedup == rec.layers.set_index("fqn").loc[row.fqn, column]
    assert not band_segments(ax)  # the seed's worst case has no band


def stacks(ax, xs) -> dict[float, list[float]]:
    """The heights of the bars stacked at each x, bottom first."""
    found: dict[float, list[tuple[float, float]]] = {x: [] for x in xs}
    for bar in ax.patches:
        x = round(bar.get_x() + bar.get_width() / 2, 9)
        if x in found:
            found[x].append((bar.get_y(), bar.get_height()))
    return {x: [h for _, h in sorted(bars)] for x, bars in found.items()}


def test_step_picture_stacks_the_plans_step_by_part_with_the_band_on_float8(tmp_path, step_8192):
    plan = step_8192
    chosen, as_run = plan.step.chosen, plan.step.as_run
    plot = step_memory(plan, out=tmp_path / "step.png")
    assert png_size(plot.path) == (1100, 620)
    step_ax, memory_ax = plot.figure.axes
    drawn = stacks(step_ax, (0.0, 1.0, 2.5, 3.5))
    totals = {0.0: chosen.bf16_s, 1.0: chosen.fp8_s, 2.5: as_run.bf16_s, 3.5: as_run.fp8_s}
    for x, total in totals.items():  # each bar adds up to the step the answer prints
        assert sum(drawn[x]) == pytest.approx(total * 1e3, rel=1e-9)
    # each segment is one of the step's parts (the parts at zero in every bar left out)
    for x, summary, precision in ((0.0, chosen, "bf16_s"), (3.5, as_run, "fp8_s")):
        parts = [getattr(c, precision) * 1e3 for c in summary.components]
        assert sorted(h for h in drawn[x] if h) == pytest.approx(sorted(p for p in parts if p))
    assert chosen.fp8_s < as_run.fp8_s  # the choice's float8 bar is the shorter
    # the band on each float8 total: the step at the band's ends, as the answer's x low-high
    bands = sorted(band_segments(step_ax))
    assert [x for x, _, _ in bands] == [1.0, 3.5]
    for (_, fast, slow), summary in zip(bands, (chosen, as_run)):
        assert summary.bf16_s * 1e3 / fast == pytest.approx(summary.speedup_high)
        assert summary.bf16_s * 1e3 / slow == pytest.approx(summary.speedup_low)
    # the memory beside it: the peak per term, bf16 and float8, under the usable line
    memory = plan.memory.estimate
    peaks = stacks(memory_ax, (0.0, 1.0))
    assert sum(peaks[0.0]) == pytest.approx(memory.bf16.peak_bytes / 2**30)
    assert sum(peaks[1.0]) == pytest.approx(memory.fp8.peak_bytes / 2**30)
    (usable,) = [line for line in memory_ax.lines if line.get_linestyle() == "--"]
    assert usable.get_ydata()[0] == pytest.approx(memory.usable_bytes / 2**30)
    title = plot.figure.get_suptitle()
    assert "FSDP 8, recompute selective" in title
    assert "using " + provenance_line(plan.resolved.provenance) in title.replace("\n", " ")
    assert plot.data.choice.fp8_total_s == chosen.fp8_s


def test_step_picture_of_a_measured_step_spreads_the_parts_over_it(tmp_path):
    plan = f8roof.answer_model("llama3-8b", 8192, gpu="h100", fsdp=8, step_ms=1200)
    chosen = plan.step.chosen
    assert chosen.step_measured and chosen.modelled_bf16_s != pytest.approx(1.2)
    plot = step_memory(plan, out=tmp_path / "step.svg")
    drawn = stacks(plot.figure.axes[0], (0.0, 1.0))
    assert sum(drawn[0.0]) == pytest.approx(1200.0)  # the measured step, not the model's
    assert sum(drawn[1.0]) == pytest.approx(chosen.fp8_s * 1e3)
    spread = 1.2 / chosen.modelled_bf16_s
    linears = chosen.part(Part.LINEARS)
    assert drawn[0.0][0] == pytest.approx(linears.bf16_s * spread * 1e3)  # in proportion
    assert f"x{spread:.3f}" in plot.figure.axes[0].get_title()


def test_step_picture_without_memory_says_so(tmp_path):
    # FSDP without a degree: the states' sharding, so the memory, is unknown
    plan = answer(
        Question(model="llama3-8b", tokens=8192),
        Request(gpu="h100"),
        setup=RunConfig.from_options(fsdp=-1),
    )
    assert isinstance(plan, Plan) and plan.memory is None
    plot = step_memory(plan, out=tmp_path / "step.png")
    assert len(plot.figure.axes) == 1
    assert "peak memory: not modelled" in plot.figure.get_supxlabel()


def test_axes_and_sizes():
    assert parse_axis("k=n") == ("K", "N")
    with pytest.raises(GridError, match="bad axis"):
        parse_axis("B")
    s = sizes(100, 5000, 12)
    assert (s % 16 == 0).all() and s[0] >= 96 and s[-1] == 4992 and (np.diff(s) > 0).all()


def test_bad_output_name(tmp_path, config, basis):
    with pytest.raises(PlotError, match="use a .png or .svg"):
        heatmap(speedup_grid(config, points=5), out=tmp_path / "heat.jpg", provenance=basis)


def test_missing_matplotlib(cli, tmp_path, config, basis, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(PlotError, match=r"pip install 'f8roof\[plot\]'"):
        heatmap(speedup_grid(config, points=5), out=tmp_path / "heat.png", provenance=basis)
    result = cli("plot", "--out", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert result.output.strip() == "Error: plotting needs matplotlib: pip install 'f8roof[plot]'"


def test_cli_default_heatmap(cli, tmp_path):
    out = tmp_path / "heat.png"
    result = cli("plot", "--gpu", "h100", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert png_size(out) == (700, 580) and f"wrote {out}" in result.output


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


def test_the_docs_show_one_small_picture_of_every_kind():
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "scripts"))
    from docs_images import PICTURES

    # every kind drawn from an answer (the validation scatter draws a GPU run's report)
    assert {p.name for p in PICTURES} == {"step", "layers", "heatmap", "overhead"}
    text = (root / "docs" / "estimate.md").read_text()
    for picture in PICTURES:
        image = root / "docs" / "img" / f"{picture.name}.png"
        width, _ = png_size(image)
        assert width <= 800 and image.stat().st_size < 100_000  # small, low resolution
        assert f"](img/{picture.name}.png)" in text


def test_every_step_part_and_memory_term_has_its_colour():
    """A part or term added to the step or the memory model is drawn, not a KeyError."""
    from f8roof.engine.step.parts import Part
    from f8roof.renderers.plot import PART_COLOURS, TERM_COLOURS
    from f8roof.training.memory import Term

    assert set(PART_COLOURS) == set(Part) and set(TERM_COLOURS) == set(Term)
