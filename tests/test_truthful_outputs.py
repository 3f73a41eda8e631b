"""Outputs that were wrong or misleading with exit 0 (issue #22, item 7): each now tells the
truth or refuses in one line (exit 2). One test per case; each fails on the code before it."""

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py
import pandas as pd
import pytest
import synthetic
from conftest import invoke_cli

from f8roof.calibration.file import Calibration, CalibrationError
from f8roof.calibration.fitting import fit_calibration
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.filter_compare import compare_filters
from f8roof.engine.recommend import recommend
from f8roof.engine.resolve import Request, resolve
from f8roof.errors import ModelError
from f8roof.hardware.presets import resolve_gpu
from f8roof.renderers.filters import comparison_rows
from f8roof.renderers.notes import sentence
from f8roof.traffic.variant import Before, Context
from f8roof.training.catalog import (
    ArchitectureError,
    builtin,
    from_hf_config,
    from_module,
)
from f8roof.training.run_config import RunConfig

nn = pytest.importorskip("torch.nn")


def said(arch) -> str:
    """What an architecture leaves out or defaults, in words."""
    return "; ".join(sentence(n) for n in arch.notes)


def run(*args):
    return invoke_cli(*args)


def refused(result, text: str) -> None:
    """One line, exit 2, naming the problem; no traceback."""
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert "Traceback" not in result.output and result.output.count("\n") == 1


def shipped_dict(gpu: str = "h100") -> dict:
    return json.loads(shipped_calibration(resolve_gpu(gpu)).read_text())


# --- a calibration whose environment.gpu was edited ---------------------------------------------


def test_edited_gpu_of_a_traffic_calibration_is_refused(tmp_path):
    data = shipped_dict()
    data["environment"]["gpu"] = "h200"
    with pytest.raises(CalibrationError, match="'h200' disagrees with its device_name 'h100'"):
        Calibration.from_dict(data)
    data["environment"]["device_name"] = "h200"  # edited twice: the gemm model still says h100
    with pytest.raises(CalibrationError, match="disagrees with datasheet_gemm.gpu 'h100'"):
        Calibration.from_dict(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    refused(run("estimate", "--calibration", str(path), "--shape", "4096,4096,4096"), "h200")


def test_edited_gpu_of_a_measured_calibration_is_refused():
    measured = fit_calibration(synthetic.measurements())
    assert measured.environment.device_name == "NVIDIA H200"
    data = measured.to_dict()
    Calibration.from_dict(data)  # as measured: accepted
    data["environment"]["gpu"] = "b200"
    with pytest.raises(CalibrationError, match="device_name 'NVIDIA H200' \\(h200\\)"):
        Calibration.from_dict(data)
    data["environment"]["gpu"], data["environment"]["device"] = "h200", "cpu"
    with pytest.raises(CalibrationError, match="measured on a CPU"):
        Calibration.from_dict(data)


def test_a_ceiling_above_the_named_gpus_datasheet_is_refused():
    data = shipped_dict("h200")
    data["ceilings"]["copy_bandwidth_bytes_per_s"] = 9e12  # h200: 4.8 TB/s
    with pytest.raises(CalibrationError, match="exceeds that GPU's datasheet"):
        Calibration.from_dict(data)


def test_shipped_calibrations_pass_the_gpu_check():
    for name in ("h100", "h100-meta", "h200"):
        assert Calibration.load(shipped_calibration(resolve_gpu(name))).environment.gpu == name


# --- routed experts: their speedup is the worst case, and says so -------------------------------


@pytest.fixture(scope="module")
def moe():
    resolved = resolve(Request(gpu="h100"))  # the shipped calibration: dense rows fitted
    return recommend(builtin("mixtral-8x7b"), tokens=8192, resolved=resolved)


def test_routed_expert_rows_say_their_level(moe):
    layers = moe.layers
    grouped = layers["grouped"].to_numpy(dtype=bool)
    assert grouped.any() and (~grouped).any()
    assert set(layers.loc[grouped, "speedup_level"]) == {"worst"}
    assert set(layers.loc[~grouped, "speedup_level"]) == {"fitted"}
    assert layers.loc[grouped, "overhead_s_fitted"].isna().all()
    assert layers.loc[grouped, "speedup"].to_numpy() == pytest.approx(
        layers.loc[grouped, "speedup_worst"].to_numpy()
    )


def test_filter_table_marks_routed_experts_worst(moe):
    cmp = compare_filters(
        builtin("mixtral-8x7b"), tokens=8192, resolved=resolve(Request(gpu="h100"))
    )
    header, rows = comparison_rows(cmp)
    column = header.index("x fitted")
    grouped = cmp.recommendation.layers["grouped"].to_numpy(dtype=bool)
    assert all(row[column].endswith("(worst)") for row, g in zip(rows, grouped) if g)
    assert not any(row[column].endswith("(worst)") for row, g in zip(rows, grouped) if not g)


def test_expert_bars_are_not_plotted_under_a_recipe(moe, tmp_path):
    pytest.importorskip("matplotlib")
    from f8roof.renderers.plot import layer_speedups

    basis = resolve(Request(gpu="h100")).provenance
    plot = layer_speedups(moe, out=tmp_path / "layers.png", provenance=basis)
    drawn = plot.data
    grouped = moe.layers["grouped"].to_numpy(dtype=bool)
    experts = drawn[drawn["grouped"]]
    # one hatched bar per routed-expert row, under torchao's MoE recipe, not tensorwise
    assert sorted(experts["fqn"]) == sorted(moe.layers["fqn"][grouped])
    assert set(experts["recipe"]) == {"rowwise"} and set(drawn[~drawn["grouped"]]["recipe"]) == {
        "tensorwise"
    }
    hatched = [bar for bar in plot.figure.axes[0].patches if bar.get_hatch()]
    assert len(hatched) == grouped.sum()
    (legend,) = plot.figure.legends
    assert any(
        t.get_text().startswith("routed experts: torchao MoE, rowwise") for t in legend.get_texts()
    )


# --- how the model trains ------------------------------------------------------------------------


def test_full_recompute_leaves_lm_head_alone():
    resolved = resolve(Request(gpu="h100"))
    plain, full = (
        recommend(builtin("llama3-8b"), tokens=8192, resolved=resolved, setup=setup).layers
        for setup in (RunConfig(), RunConfig.from_options(recompute="full"))
    )
    # lm_head, outside the blocks, and down_proj, the block's output projection whose output
    # no backward reads, run once
    head = plain["fqn"].str.endswith(("lm_head", "down_proj"))
    assert head.sum() == 2
    for column in ("bf16_s", "fp8_s", "speedup"):
        assert list(full.loc[head, column]) == pytest.approx(list(plain.loc[head, column]))
        # the blocks' other linears run their forward twice
        assert (full.loc[~head, "bf16_s"] > plain.loc[~head, "bf16_s"] * 1.2).all()


def test_mixtral_without_expert_fields_has_huggingfaces_defaults():
    config = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
    }
    arch = from_hf_config(config, name="mixtral")
    assert arch.is_moe
    experts = [lin for lin in arch.linears if lin.grouped]
    assert {(lin.routed.experts, lin.routed.top_k) for lin in experts} == {(8, 2)}
    explicit = from_hf_config(
        {**config, "num_local_experts": 8, "num_experts_per_tok": 2}, name="mixtral"
    )
    assert arch.linears == explicit.linears
    assert "MixtralConfig defaults" in said(arch) and "defaults" not in said(explicit)


def test_tp_beyond_the_kv_heads_is_refused():
    refused(
        run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "256"),
        "--tp 256 does not divide the 32 heads of model.layers.*.self_attn.q_proj",
    )
    # k_proj N = 1024 divides by 16, its 8 kv heads do not
    refused(
        run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "16"),
        "--tp 16 does not divide the 8 heads of model.layers.*.self_attn.k_proj",
    )
    assert run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "8").exit_code == 0


def test_filter_compare_refuses_one_step_for_several_runs():
    refused(
        run("filter-compare", "--model", "llama3-8b", "--tokens", "2048,8192", "--step-ms", "200"),
        "--step-ms is one measured bf16 step",
    )
    refused(
        run(
            "filter-compare",
            "--model",
            "llama3-8b",
            "--tokens",
            "8192",
            "--tp",
            "1,2",
            "--step-ms",
            "200",
        ),
        "2 TP degrees",
    )


def test_a_step_shorter_than_its_gemms_is_refused_as_estimate_refuses_it():
    resolved = resolve(Request(gpu="h100"))
    with pytest.raises(ModelError, match="shorter than its bf16 gemms at the GPU's peak"):
        compare_filters(
            builtin("llama3-8b"),
            tokens=8192,
            resolved=resolved,
            setup=RunConfig.from_options(step_ms=1.0),  # the linears alone take ~470 ms
        )


# --- recipes, outputs, options -------------------------------------------------------------------


def test_recipe_all_is_what_torchao_can_convert():
    assert [c.recipe.name for c in resolve(Request(recipes="all")).configs] == [
        "tensorwise",
        "rowwise",
        "rowwise_gw_hp",
    ]
    reference = resolve(Request(recipes="all", implementation="reference", no_calibration=True))
    assert len(reference.configs) == 5
    result = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--recipe", "all")
    assert result.exit_code == 0 and "tensorwise_delayed" not in result.output


def test_a_reference_only_recipe_chosen_is_said():
    result = run(
        "estimate",
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--recipe",
        "tensorwise,tensorwise_static_weight",
    )
    assert result.exit_code == 0
    assert "tensorwise_static_weight exists only in f8roof's reference" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--shape", "4096,4096,4096", "--out", ""],
        ["plot", "--out", ""],
        ["report", "--model", "gpt2", "--tokens", "1024", "--out", ""],
        ["compare", "--out", ""],
    ],
)
def test_an_empty_out_is_refused(command):
    refused(run(*command), "an empty output path")


def test_an_unknown_custom_gpu_item_is_refused():
    refused(
        run(
            "estimate",
            "--gpu",
            "custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12,foo=1",
            "--shape",
            "4096,4096,4096",
        ),
        "unknown custom GPU item(s) foo",
    )


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(1024, 4096)
        self.out = nn.Linear(4096, 1024)


def test_a_tp_plan_that_would_be_ignored_is_refused():
    with pytest.raises(ArchitectureError, match="'colwise' is not one of column, row"):
        from_module(Net(), tp_plan={"nothing_here": "colwise"})
    with pytest.raises(ArchitectureError, match="tp_plan 'nothing_here' names none"):
        from_module(Net(), tp_plan={"nothing_here": "column"})
    arch = from_module(Net(), tp_plan={"proj": "column", "out": "row"})
    assert [lin.tp.value for lin in arch.linears] == ["column", "row"]


# --- gemm tables ---------------------------------------------------------------------------------

README_TABLE = """M,K,N,bf16_time_s,fp8_time_s
8192,4096,4096,0.000360,0.000215
8192,4096,14336,0.001190,0.000700
8192,14336,4096,0.001230,0.000720
"""


def test_wide_table_rows_stand_for_all_three_gemms(tmp_path):
    path = tmp_path / "gemms.csv"
    path.write_text(README_TABLE)
    from f8roof.engine.estimate import estimate

    config = resolve(Request(gpu="h100", gemm_table=str(path))).config
    frame = estimate([(8192, 4096, 4096), (8192, 4096, 14336), (8192, 14336, 4096)], config)
    assert not frame["gemm_extrapolated"].any()
    # three gemms, each the row's time
    assert frame["bf16_gemm_s"] == pytest.approx([3 * 360e-6, 3 * 1190e-6, 3 * 1230e-6])


def test_gemm_table_source_line_says_table_only(tmp_path):
    path = tmp_path / "gemms.csv"
    path.write_text(README_TABLE)
    result = run("estimate", "--gemm-table", str(path), "--shape", "8192,4096,4096")
    assert result.exit_code == 0, result.output
    source = result.output.splitlines()[0]
    assert source.endswith(f"gemms from {path}") and "tiled roofline" not in source


def test_impossible_gemm_times_are_refused(tmp_path):
    path = tmp_path / "fast.csv"
    # 8192^3 x 2 in 0.4 us: 2.7 EFLOP/s
    path.write_text("M,K,N,bf16_time_s,fp8_time_s\n8192,8192,8192,0.00036,4e-7\n")
    refused(
        run("estimate", "--gpu", "h100", "--gemm-table", str(path), "--shape", "8192,8192,8192"),
        "above the h100's peak",
    )
    refused(
        run("estimate", "--gemm-table", str(path), "--shape", "8192,8192,8192"),
        "above twice any preset's peak",
    )


# --- plots ---------------------------------------------------------------------------------------


def test_cpu_validation_without_seed_column_plots(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "validation.csv"
    pd.DataFrame(
        {
            "M": [32, 64],
            "K": [48, 64],
            "N": [64, 64],
            "recipe": ["tensorwise"] * 2,
            "context": ["none", "rmsnorm+none"],
            "measured_speedup": [0.5, 0.6],
            "predicted_speedup": [0.55, 0.58],
            "seed_speedup": [math.nan, math.nan],  # what validate writes on a CPU
        }
    ).to_csv(path, index=False)
    assert pd.read_csv(path)["seed_speedup"].isna().all()  # the empty column plot refused
    out = tmp_path / "v.png"
    result = run("plot", "--validation", str(path), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.exists()
    from f8roof.renderers.plot import validation_scatter

    title = validation_scatter(path, out=tmp_path / "w.png").figure.axes[0].get_title()
    assert "context none, rmsnorm+none" in title


def test_plot_titles_name_context_tp_and_ep(tmp_path):
    pytest.importorskip("matplotlib")
    from f8roof.engine.grid import overhead_shares, speedup_grid
    from f8roof.renderers.plot import heatmap, layer_speedups, overhead_share

    resolved = resolve(Request(gpu="h100", before="rmsnorm", no_calibration=True))
    for draw, data in ((heatmap, speedup_grid), (overhead_share, overhead_shares)):
        plot = draw(
            data(resolved.config),
            out=tmp_path / f"{draw.__name__}.png",
            provenance=resolved.provenance,
        )
        assert "context rmsnorm+none" in plot.figure.get_suptitle()
    shipped = resolve(Request(gpu="h100"))
    rec = recommend(
        builtin("mixtral-8x7b"), tokens=8192, resolved=shipped, setup=RunConfig(tp=2, ep=8)
    )
    plot = layer_speedups(rec, out=tmp_path / "l.png", provenance=shipped.provenance)
    assert "TP 2, EP 8" in plot.figure.get_suptitle()


# --- module_filter -------------------------------------------------------------------------------


def test_module_filter_prints_its_decisions_not_its_calibration():
    from f8roof.engine.api import module_filter

    text = repr(module_filter(Net(), 8192))
    assert len(text) < 1000
    assert text.startswith("ModuleFilter(Net on h100, 8192 tokens, tensorwise")
    assert "'proj'" in text and "Calibration" not in text


class TitanAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.wq, self.wo = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.wk, self.wv = nn.Linear(dim, dim // 4), nn.Linear(dim, dim // 4)


class TitanFeedForward(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w1, self.w3 = nn.Linear(dim, 4 * dim), nn.Linear(dim, 4 * dim)
        self.w2 = nn.Linear(4 * dim, dim)


class TitanBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attention_norm, self.attention = nn.RMSNorm(dim), TitanAttention(dim)
        self.ffn_norm, self.feed_forward = nn.RMSNorm(dim), TitanFeedForward(dim)


class Titan(nn.Module):
    """torchtitan's llama3 names: attention_norm -> attention.wq/wk/wv, ffn_norm ->
    feed_forward.w1/w3, norm -> output."""

    def __init__(self, dim=256, layers=2, vocab=1024):
        super().__init__()
        self.layers = nn.ModuleList(TitanBlock(dim) for _ in range(layers))
        self.norm, self.output = nn.RMSNorm(dim), nn.Linear(dim, vocab)


def test_torchtitan_names_get_their_norm_context():
    contexts = {lin.fqn: lin.context for lin in from_module(Titan()).linears}
    after_norm = Context(Before.RMSNORM)
    for name in ("wq", "wk", "wv"):
        assert contexts[f"layers.*.attention.{name}"] == after_norm
    assert contexts["layers.*.feed_forward.w1"] == contexts["layers.*.feed_forward.w3"]
    assert contexts["layers.*.feed_forward.w1"] == after_norm
    assert contexts["output"] == after_norm
    assert contexts["layers.*.attention.wo"] == Context()
    assert contexts["layers.*.feed_forward.w2"] == Context(Before.SILU_MUL)
