import re
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py
import numpy as np
import pandas as pd
import pytest
import synthetic
from conftest import invoke_cli
from torch import nn

import f8roof
from f8roof.calibration.file import CalibrationError
from f8roof.calibration.fitting import fit_calibration
from f8roof.engine.api import canonical_fqn, module_filter
from f8roof.engine.decision import DecisionPolicy
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.engine.recommend import StepShare, recommend
from f8roof.engine.resolve import Request, all_recipes, resolve
from f8roof.errors import F8RoofError, ModelError, ParameterError
from f8roof.hardware.presets import find_gpu
from f8roof.renderers.cells import settle_text
from f8roof.renderers.notes import criterion_text, layer_note
from f8roof.timing.gemm import GemmRole
from f8roof.traffic.recipes import RECIPE_NAMES, Recipe, Role
from f8roof.traffic.variant import Before, Context, Implementation
from f8roof.training.catalog import ArchitectureError, builtin, layer_type
from f8roof.training.run_config import Recompute, RunConfig


@pytest.fixture(scope="module")
def calibration():
    return fit_calibration(synthetic.measurements())


@pytest.fixture(scope="module")
def calibration_file(calibration, tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "calibration.json"
    calibration.save(path)
    return path


def roofline(recipes="tensorwise"):
    return resolve(Request(gpu="h100", recipes=recipes, no_calibration=True))


def run(*args):
    return invoke_cli(*args)


def test_decisions_follow_speedup_worst_without_calibration():
    arch = builtin("gpt2")
    rec = recommend(arch, tokens=8192, resolved=roofline())
    assert rec.criterion == "speedup_worst" and "not a bound" in criterion_text(rec)
    frame = estimate(
        arch.shapes(8192), EstimateConfig(Recipe.from_name("tensorwise"), find_gpu("h100"))
    )
    layers = rec.layers.set_index("fqn")
    expected = (frame["speedup_worst"] > 1) & frame["fp8_ok"]
    assert list(layers["convert"]) == list(expected)
    # lm_head's vocabulary (50257) is not a multiple of 16: never converted, even though the
    # roofline says float8 would win there
    assert layers.loc["lm_head", "speedup_worst"] > 1
    assert not layers.loc["lm_head", "convert"]
    assert layer_note(layers.reset_index().iloc[-1], rec.criterion) == "N not a multiple of 16"
    assert np.isnan(layers.loc["lm_head", "margin"])
    assert layers.loc["transformer.h.*.attn.c_proj", "decision"] == "keep bf16"  # 768 x 768 loses
    assert layers.loc["transformer.h.*.mlp.c_fc", "margin"] == pytest.approx(
        layers.loc["transformer.h.*.mlp.c_fc", "speedup_worst"] - 1
    )


def test_totals_weight_by_count():
    rec = recommend(builtin("llama3-8b"), tokens=4096, resolved=roofline())
    layers = rec.layers
    bf16 = (layers["count"] * layers["bf16_gemm_s"]).sum()
    mixed = (
        layers["count"] * np.where(layers["convert"], layers["fp8_s_worst"], layers["bf16_gemm_s"])
    ).sum()
    assert rec.totals.bf16_s == pytest.approx(bf16)
    assert rec.totals.recommended_s == pytest.approx(mixed)
    assert rec.totals.speedup == pytest.approx(bf16 / mixed)
    assert rec.totals.linears == 32 * 7 + 1
    assert rec.totals.converted_linears == layers.loc[layers["convert"], "count"].sum()
    assert layers["saved_step_s"].sum() == pytest.approx(rec.totals.saved_s)


def test_fewer_tokens_convert_fewer_layers():
    arch = builtin("llama3-8b")
    few = recommend(arch, tokens=128, resolved=roofline())
    many = recommend(arch, tokens=16384, resolved=roofline())
    assert set(few.converted_fqns) < set(many.converted_fqns)
    assert len(many.converted_fqns) == len(arch.linears)
    assert few.totals.speedup < many.totals.speedup


def test_recipe_all_picks_the_best_per_layer():
    resolved = resolve(
        Request(gpu="h100", recipes="all", implementation="reference", no_calibration=True)
    )
    rec = recommend(builtin("gpt2"), tokens=8192, resolved=resolved)
    assert rec.recipes == RECIPE_NAMES  # the reference has every recipe
    runs = rec.layers["fp8_ok"].to_numpy()  # lm_head (N = 50257): no recipe can run it
    per_recipe = rec.layers[[f"speedup_worst_{r}" for r in RECIPE_NAMES]].to_numpy()[runs]
    best = [RECIPE_NAMES[i] for i in per_recipe.argmax(axis=1)]
    assert list(rec.layers["recipe"][runs]) == best
    assert rec.layers["speedup_worst"][runs].to_numpy() == pytest.approx(per_recipe.max(axis=1))
    assert not rec.layers["convert"][~runs].any()
    assert rec.totals.speedup >= max(t.speedup for t in rec.recipe_totals.values()) - 1e-12


def test_calibration_decides_on_the_calibrated_speedup(calibration):
    resolved = resolve(Request(gpu="h200", recipes="all", calibration=calibration))
    rec = recommend(builtin("llama3-8b"), tokens=2048, resolved=resolved)
    assert rec.criterion == "speedup" and "calibrated" in criterion_text(rec)
    assert rec.recipes == ("tensorwise", "rowwise")  # what the synthetic file measured
    # 'all' is what torchao converts with; the file lacks rowwise_gw_hp
    assert set(rec.skipped_recipes) == {"torchao:rowwise_gw_hp"}
    layers = rec.layers
    assert list(layers["convert"]) == list((layers["speedup"] > 1) & layers["fp8_ok"])
    assert rec.totals.bf16_s == pytest.approx((layers["count"] * layers["bf16_s"]).sum())
    assert rec.calibration.environment.device_name == "NVIDIA H200"


def test_a_recipe_missing_from_the_calibration(calibration):
    with pytest.raises(CalibrationError, match="has no variant 'reference:tensorwise_delayed'"):
        resolve(Request(gpu="h200", recipes="tensorwise_delayed", calibration=calibration))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(64, 64)  # too small: overhead dominates
        self.up = nn.Linear(2048, 8192)
        self.down = nn.Linear(8192, 2048)
        self.odd = nn.Linear(1000, 1024)  # K not a multiple of 16
        self.act = nn.GELU()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(2048, 8192)


def swapped(model, module_filter_fn):
    """What torchao's convert_to_float8_training would convert: the nn.Linear modules that
    pass the filter (torchao calls the filter on each Linear with its fqn)."""
    return {
        fqn
        for fqn, m in model.named_modules()
        if isinstance(m, nn.Linear) and module_filter_fn(m, fqn)
    }


def test_module_filter_on_a_real_module():
    model = Net()
    keep = module_filter(model, 16384, policy="expected")
    rec = keep.recommendation
    kinds = {"layers.*.attn", "layers.*.up", "layers.*.down", "layers.*.odd", "head"}
    assert set(rec.layers["fqn"]) == kinds
    expected = {
        fqn
        for fqn, m in model.named_modules()
        if isinstance(m, nn.Linear) and layer_type(fqn) in rec.converted_fqns
    }
    assert swapped(model, keep) == expected == keep.converted
    assert expected == {"layers.0.up", "layers.0.down", "layers.1.up", "layers.1.down", "head"}
    odd = rec.layers.set_index("fqn").loc["layers.*.odd"]
    assert not odd["fp8_ok"] and not odd["convert"] and "K" in odd["fp8_reason"]
    assert not keep(nn.Linear(2048, 8192), "some.new.layer")  # unknown: stays bf16
    assert keep(model.layers[1].up, "layers.7.up")  # a later layer of a known type and shape


def test_module_filter_fewer_tokens_converts_nothing():
    assert swapped(Net(), f8roof.module_filter(Net(), 256)) == set()


def test_module_filter_answers_for_the_wrapped_model():
    model = Net()
    keep = f8roof.module_filter(model, 16384)
    wrapper = nn.Module()
    wrapper._orig_mod = model  # what torch.compile's OptimizedModule looks like
    assert swapped(wrapper, keep) == {"_orig_mod." + f for f in keep.converted}
    assert canonical_fqn("_orig_mod.module.layers.0.up") == "layers.0.up"


def test_module_filter_built_on_meta_applies_to_the_real_model():
    keep = f8roof.module_filter(Net, 16384, policy="expected")  # a builder: walked on meta
    assert swapped(Net(), keep) == keep.converted and len(keep.converted) == 5


def test_module_filter_follows_the_policy():
    """The same model under each policy: the expected one (the default) converts what wins on
    the estimate and marks the layers whose band straddles 1, the conservative one what wins
    at the band's low end, the optimistic one what wins at the high end; under the
    conservative one a straddling layer is uncertain, kept in bf16; the recommendation names
    the GPU command that settles them all."""
    keeps = {
        p: f8roof.module_filter(Net(), 4096, policy=p)
        for p in ("conservative", "expected", "optimistic")
    }
    converted = {p: keep.converted for p, keep in keeps.items()}
    assert converted["conservative"] <= converted["expected"] <= converted["optimistic"]
    assert len(converted["expected"]) == 5 and len(converted["conservative"]) < 5
    layers = keeps["conservative"].recommendation.layers.set_index("fqn")
    up = layers.loc["layers.*.up"]
    assert up["decision"] == "uncertain" and not up["convert"] and up["straddles"]
    assert up["speedup_low"] < 1 < up["speedup"] <= up["speedup_high"]
    expected = keeps["expected"].recommendation.layers.set_index("fqn").loc["layers.*.up"]
    assert expected["decision"] == "convert" and expected["convert"] and expected["straddles"]
    assert f8roof.module_filter(Net(), 4096).converted == converted["expected"]
    settle = settle_text(keeps["conservative"].recommendation.settle)
    assert "f8roof validate" in settle and "--shape 4096,2048,8192" in settle
    assert keeps["conservative"].recommendation.policy.value == "conservative"
    with pytest.raises(ModelError, match="policy"):
        f8roof.module_filter(Net(), 16384, policy="reckless")


def test_module_filter_with_a_calibration(calibration, calibration_file):
    for cal in (calibration, calibration_file, str(calibration_file)):
        keep = f8roof.module_filter(Net(), 16384, calibration=cal, gpu="h200")
        assert keep.recommendation.criterion == "speedup"
        layers = keep.recommendation.layers
        assert list(layers["convert"]) == list((layers["speedup"] > 1) & layers["fp8_ok"])


def test_module_filter_bad_input():
    with pytest.raises(ParameterError, match="^tokens takes an int >= 1, got 0"):
        module_filter(Net(), 0)
    with pytest.raises(ArchitectureError, match="no nn.Linear"):
        module_filter(nn.Sequential(nn.ReLU()), 1024)
    with pytest.raises(F8RoofError, match="one recipe"):
        module_filter(Net(), 1024, recipe="all")
    with pytest.raises(F8RoofError, match="unknown GPU"):
        module_filter(Net(), 1024, gpu="z80")


# --- the estimate --model command ----------------------------------------------------------------


def test_estimate_model_prints_layers_and_total():
    result = run(
        "estimate", "--model", "llama3-70b", "--tokens", "8192", "--no-calibration", "--show-all"
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "times: roofline" in out
    assert "decisions by speedup_worst" in out
    for fqn in ("model.layers.*.self_attn.q_proj", "model.layers.*.mlp.down_proj", "lm_head"):
        assert fqn in out
    q = next(
        line for line in out.splitlines() if line.startswith("model.layers.*.self_attn.k_proj")
    )
    assert q.split()[1:5] == ["80", "8192", "8192", "1024"] and "convert" in q  # count M K N
    total = next(line for line in out.splitlines() if line.startswith("total linear time per step"))
    assert "561 of 561 linears in float8" in total and "x of the linear part" in total


def test_estimate_model_recipe_all_and_out(tmp_path):
    out = tmp_path / "layers.csv"
    result = run(
        "estimate",
        "--model",
        "gpt2",
        "--tokens",
        "8192",
        "--recipe",
        "all",
        "--no-calibration",
        "--out",
        str(out),
        "--show-all",
    )
    assert result.exit_code == 0, result.output
    assert "one recipe for every converted layer: tensorwise" in result.output
    assert "best single recipe:" in result.output
    frame = pd.read_csv(out)
    assert list(frame["fqn"])[-1] == "lm_head" and not frame["convert"].iloc[-1]
    assert {f"speedup_worst_{r}" for r in all_recipes()} <= set(frame.columns)
    assert "speedup_worst_tensorwise_delayed" not in frame.columns  # torchao has no such recipe


def test_estimate_model_from_config_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        '{"hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,'
        ' "num_key_value_heads": 4, "num_hidden_layers": 22, "vocab_size": 32000}'
    )
    result = run(
        "estimate", "--model", str(path), "--tokens", "4096", "--no-calibration", "--show-all"
    )
    assert result.exit_code == 0, result.output
    k = next(line for line in result.output.splitlines() if "k_proj" in line)
    assert k.split()[1:5] == ["22", "4096", "2048", "256"]


def test_estimate_model_with_a_calibration(calibration_file):
    result = run(
        "estimate",
        "--model",
        "llama3-8b",
        "--tokens",
        "2048",
        "--gpu",
        "h200",
        "--calibration",
        str(calibration_file),
        "--recipe",
        "all",
        "--show-all",
    )
    assert result.exit_code == 0, result.output
    assert "decisions by calibrated speedup" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("layer "))
    assert "x fitted" not in header and "x rowwise" in header  # recipes side by side instead
    assert "not compared (not in the calibration): torchao:rowwise_gw_hp" in result.output
    assert "exists only in f8roof's reference" not in result.output  # tensorwise: torchao has it


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model", "llama5-1t", "--tokens", "8"],
            "unknown model 'llama5-1t'; known: llama3-8b, llama3-70b",
        ),
        (
            ["--model", "llama3-8b", "--tokens", "0"],
            "tokens per step must be a positive integer (got 0)",
        ),
        (["--model", "llama3-8b", "--tokens", "-5"], "tokens per step must be a positive integer"),
        (["--model", "llama3-8b"], "--model needs --tokens"),
        (["--tokens", "8192"], "--tokens goes with --model"),
        (["--model", "gpt2", "--tokens", "8", "--shape", "16,16,16"], "--model replaces --shape"),
        (["--recipe", "all", "--shape", "16,16,16"], "use them with --model"),
        (
            ["--model", "gpt2", "--tokens", "8", "--recipe", "tensorwise,fp4"],
            "unknown recipe 'fp4'",
        ),
        (["--model", "missing/config.json", "--tokens", "8"], "cannot read missing/config.json"),
    ],
)
def test_estimate_model_bad_input(args, message):
    result = run("estimate", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_estimate_model_config_missing_field(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        '{"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 22,'
        ' "vocab_size": 32000}'
    )
    result = run("estimate", "--model", str(path), "--tokens", "4096")
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == f"Error: {path}: config.json lacks 'intermediate_size', needed for the linear shapes"
    )


def test_models_lists_the_builtins():
    result = run("models")
    assert result.exit_code == 0
    for name in (
        "llama3-8b",
        "llama3-70b",
        "llama3-405b",
        "mistral-7b",
        "qwen2.5-7b",
        "gpt2",
        "deepseek-v3",
    ):
        assert name in result.output


# --- at scale: parallelism, routed experts, recompute, step share --------------------------------


def test_tp_decides_on_the_local_shape():
    arch = builtin("llama3-8b")
    whole = recommend(arch, tokens=8192, resolved=roofline("rowwise")).layers.set_index("fqn")
    tp2 = recommend(
        arch, tokens=8192, resolved=roofline("rowwise"), setup=RunConfig(tp=2)
    ).layers.set_index("fqn")
    k = "model.layers.*.self_attn.k_proj"
    assert tuple(tp2.loc[k, ["M", "K", "N"]]) == (8192, 4096, 512)
    assert tuple(tp2.loc[k, ["full_K", "full_N"]]) == (4096, 1024)
    assert tp2.loc[k, "tp"] == "column" and tp2.loc["model.layers.*.mlp.down_proj", "tp"] == "row"
    # the same estimate as a linear of the sharded shape after RMSNorm (k_proj's context)
    config = replace(
        roofline("rowwise").config, context=Context(Before.RMSNORM), fused=frozenset({Role.INPUT})
    )
    assert tp2.loc[k, "context"] == "rmsnorm+none"
    frame = estimate([(8192, 4096, 512)], config)
    assert tp2.loc[k, "speedup_worst"] == pytest.approx(frame["speedup_worst"][0])
    # torchtitan#1207: the TP2 shard of k_proj loses in rowwise (at the worst case). The
    # ideal is a lower bound of the bytes, so an upper bound of the speedup: with RMSNorm
    # producing the input in the graph it credits the bf16 write no float8 gemm reads
    assert not tp2.loc[k, "convert"] and tp2.loc[k, "speedup_worst"] < 1
    assert tp2.loc[k, "speedup_ideal"] >= tp2.loc[k, "speedup_worst"]
    assert tp2.loc[k, "speedup_worst"] < whole.loc[k, "speedup_worst"]
    # a layer that wins whole and loses sharded: llama3-70b's k_proj, tensorwise, TP 8
    arch = builtin("llama3-70b")
    whole = recommend(arch, tokens=2048, resolved=roofline()).layers.set_index("fqn")
    tp8 = recommend(arch, tokens=2048, resolved=roofline(), setup=RunConfig(tp=8)).layers.set_index(
        "fqn"
    )
    assert whole.loc[k, "convert"] and not tp8.loc[k, "convert"]
    assert tp8.loc[k, "N"] == 128


def test_routed_experts_are_grouped_rows():
    resolved = roofline("tensorwise")
    rec = recommend(builtin("deepseek-v3"), tokens=8192, resolved=resolved, setup=RunConfig(ep=8))
    layers = rec.layers.set_index("fqn")
    row = layers.loc["model.layers.*.mlp.experts.*.gate_proj"]
    assert row["grouped"] and row["experts_per_device"] == 32 and row["tokens_per_expert"] == 2048
    assert row["recipe"] == "rowwise"  # torchao's float8 grouped gemm is rowwise only
    assert "overhead: torchao's MoE kernels" in layer_note(row, rec.criterion)
    # one grouped gemm = 32 gemms of one expert at M = 2048: the grouped path's traffic
    # (10MK + 10KN + 10MN + scale vectors at worst), the reference's gemm kinds
    # (_scaled_grouped_mm: rowwise scales in all three gemms)
    rowwise = EstimateConfig(
        Recipe.from_name("rowwise"),
        find_gpu("h100"),
        implementation=Implementation.REFERENCE,
        grouped=True,
    )
    one = estimate([(2048, 7168, 2048)], rowwise)
    for column in ("bf16_gemm_s", "fp8_s_worst", "overhead_bytes_worst", "overhead_bytes_ideal"):
        assert row[column] == pytest.approx(32 * one[column][0])
    assert row["speedup_worst"] == pytest.approx(one["speedup_worst"][0])
    M, K, N = 2048, 7168, 2048
    worst = 10 * (M * K + K * N + M * N) + 32 * K + 24 * (M + N)
    assert row["overhead_bytes_worst"] == 32 * worst
    assert row["overhead_bytes_ideal"] == 32 * (worst - 4 * M * K - 2 * K * N - 4 * M * N)
    assert row["bf16_step_s"] == pytest.approx(58 * row["bf16_gemm_s"])
    dense = layers.loc["model.layers.*.mlp.shared_experts.gate_proj"]
    assert not dense["grouped"] and dense["recipe"] == "tensorwise" and dense["M"] == 8192
    # linears per GPU: each of the 32 local experts counts
    assert rec.totals.linears == 61 * 5 + 3 * 3 + 58 * 3 * 32 + 58 * 3 + 1


def test_routed_experts_with_a_calibration_decide_on_the_sympy_model(calibration):
    resolved = resolve(Request(gpu="h200", recipes="tensorwise", calibration=calibration))
    rec = recommend(builtin("mixtral-8x7b"), tokens=4096, resolved=resolved)
    assert rec.criterion == "speedup"
    layers = rec.layers
    grouped = layers[layers["grouped"]]
    assert len(grouped) == 3
    assert list(grouped["speedup"]) == pytest.approx(list(grouped["speedup_worst"]))
    assert list(grouped["fp8_s"]) == pytest.approx(list(grouped["fp8_s_worst"]))
    assert grouped["overhead_s_fitted"].isna().all()
    assert not layers.loc[~layers["grouped"], "overhead_s_fitted"].isna().any()


def test_more_experts_per_gpu_shrink_the_gain():
    # ao#2864's trend: the same rows split into more, smaller groups lose float8's advantage
    arch = builtin("llama4-maverick")
    speedups = []
    for ep in (64, 8, 1):  # 2, 16, 128 experts per GPU
        rec = recommend(arch, tokens=8192, resolved=roofline("rowwise"), setup=RunConfig(ep=ep))
        row = rec.layers.set_index("fqn").loc["model.layers.*.feed_forward.experts.down_proj"]
        speedups.append(row["speedup_worst"])
    assert speedups[0] > speedups[1] > speedups[2]


def test_recompute_full_adds_the_forward_in_both_precisions():
    arch = builtin("llama3-8b")
    base = recommend(arch, tokens=4096, resolved=roofline()).layers.set_index("fqn")
    full = recommend(
        arch,
        tokens=4096,
        resolved=roofline(),
        setup=RunConfig(recompute=Recompute.FULL),
    ).layers.set_index("fqn")
    q = "model.layers.*.self_attn.o_proj"  # standalone: attention's output feeds it
    config = roofline().config
    fwd_bf16, _ = config.gemm_model.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096)
    fwd_fp8, _ = config.gemm_model.time_s("fp8", GemmRole.OUTPUT, 4096, 4096, 4096)
    assert full.loc[q, "bf16_gemm_s"] == pytest.approx(base.loc[q, "bf16_gemm_s"] + fwd_bf16)
    # square: input and weight casts are 2 of the 3 roles' overhead
    assert full.loc[q, "forward_share"] == pytest.approx(2 / 3)
    extra = fwd_fp8 + 2 / 3 * base.loc[q, "overhead_s_worst"]
    assert full.loc[q, "fp8_s_worst"] == pytest.approx(base.loc[q, "fp8_s_worst"] + extra)
    assert full.loc[q, "recompute_fp8_s"] == pytest.approx(extra)
    selective = recommend(
        arch, tokens=4096, resolved=roofline(), setup=RunConfig(recompute=Recompute.SELECTIVE)
    ).layers.set_index("fqn")
    assert selective.loc[q, "fp8_s_worst"] == pytest.approx(base.loc[q, "fp8_s_worst"])


def test_recompute_full_leaves_the_blocks_output_projection_alone():
    # nothing a backward needs reads a block's output: Inductor's partitioner (and eager
    # non-reentrant checkpointing, which stops once it has what the backward saved) reruns
    # every block linear's forward but down_proj's
    full = recommend(
        builtin("llama3-8b"),
        tokens=4096,
        resolved=roofline(),
        setup=RunConfig(recompute=Recompute.FULL),
    ).layers.set_index("fqn")
    again = full["recompute_bf16_s"].fillna(0)
    assert again["model.layers.*.mlp.down_proj"] == 0 and again["lm_head"] == 0
    rerun = [f for f in full.index if f.startswith("model.layers.") and "down_proj" not in f]
    assert len(rerun) == 6 and (again[rerun] > 0).all()


def test_recompute_full_with_a_calibration(calibration):
    resolved = resolve(Request(gpu="h200", recipes="rowwise", calibration=calibration))
    setup = RunConfig(recompute=Recompute.FULL)
    base = recommend(builtin("gpt2"), tokens=4096, resolved=resolved).layers
    full = recommend(builtin("gpt2"), tokens=4096, resolved=resolved, setup=setup).layers
    added = full["fp8_s"] - base["fp8_s"]
    # lm_head, outside the checkpointed blocks, recomputes nothing; nor does the block's output
    # projection (the MLP's c_proj): no backward reads its output
    head = full["fqn"].str.endswith(("lm_head", "mlp.c_proj")).to_numpy()
    assert head.sum() == 2
    assert (full.loc[head, "recompute_fp8_s"].fillna(0) == 0).all() and (added[head] == 0).all()
    assert list(added[~head]) == pytest.approx(list(full.loc[~head, "recompute_fp8_s"]))
    bf16_added = (full["bf16_s"] - base["bf16_s"])[~head]
    assert list(bf16_added) == pytest.approx(list(full.loc[~head, "recompute_bf16_s"]))
    assert full.loc[~head, "speedup_wall"].isna().all()
    # lm_head and c_proj run as without recompute: their wall-clock figures stand
    assert list(full.loc[head, "speedup_wall"]) == pytest.approx(
        list(base.loc[head, "speedup_wall"])
    )


def test_step_share():
    rec = recommend(
        builtin("llama3-8b"), tokens=8192, resolved=roofline(), setup=RunConfig(step_s=1.0)
    )
    share = rec.step_share
    assert share.linear_bf16_s == pytest.approx(rec.totals.bf16_s)
    assert share.speedup == pytest.approx(1.0 / (1.0 - rec.totals.saved_s))
    assert 1 < share.speedup < rec.totals.speedup  # the rest of the step does not speed up
    assert share.consistent
    assert not recommend(builtin("llama3-8b"), tokens=8192, resolved=roofline()).step_share
    tiny = StepShare(step_s=0.1, linear_bf16_s=0.5, saved_s=0.2)
    assert not tiny.consistent


def test_module_filter_with_tp():
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(8192, 8192, bias=False)
            self.k_proj = nn.Linear(8192, 1024, bias=False)
            self.o_proj = nn.Linear(8192, 8192, bias=False)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Attn() for _ in range(2)])

    whole = module_filter(Model, 2048, no_calibration=True)
    sharded = module_filter(Model, 2048, no_calibration=True, tp=8)
    assert "layers.0.k_proj" in whole.converted and "layers.0.k_proj" not in sharded.converted
    layers = sharded.recommendation.layers.set_index("fqn")
    assert tuple(layers.loc["layers.*.k_proj", ["K", "N"]]) == (8192, 128)
    assert tuple(layers.loc["layers.*.o_proj", ["K", "N"]]) == (1024, 8192)
    assert sharded.recommendation.setup.tp == 8
    again = f8roof.module_filter(Model, 2048, no_calibration=True, tp=8)
    assert again.converted == sharded.converted
    with pytest.raises(ArchitectureError, match="^tp 3 does not divide"):
        module_filter(Model, 8192, tp=3)
    with pytest.raises(ParameterError, match="^tp takes a degree"):
        module_filter(Model, 8192, tp=0)
    # a name outside the plan: whole under TP, unless tp_plan says otherwise
    net = module_filter(Net(), 16384, tp=2)
    assert net.recommendation.layers["N"].tolist() == [64, 8192, 2048, 1024, 8192]
    planned = module_filter(Net(), 16384, tp=2, tp_plan={"up": "column", "down": "row"})
    assert planned.recommendation.layers["N"].tolist() == [64, 4096, 2048, 1024, 8192]
    assert planned.recommendation.layers["K"].tolist() == [64, 2048, 4096, 1000, 2048]


def row_of(output: str, fqn: str) -> list[str]:
    return next(line for line in output.splitlines() if line.startswith(fqn + " ")).split()


def test_estimate_model_tp_shows_the_sharded_shapes():
    result = run(
        "estimate",
        *("--model", "llama3-8b", "--tokens", "8192", "--tp", "2", "--recipe", "rowwise"),
        "--show-all",
    )
    assert result.exit_code == 0, result.output
    assert "setup: TP 2 (column-parallel linears shard N, row-parallel shard K)" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("layer "))
    assert header.split()[:6] == ["layer", "count", "M", "K", "N", "tp"]
    for name in ("k_proj", "v_proj"):
        cells = row_of(result.output, f"model.layers.*.self_attn.{name}")
        assert cells[1:6] == ["32", "8192", "4096", "512", "col"] and "keep" in cells
    assert row_of(result.output, "model.layers.*.self_attn.o_proj")[1:6] == [
        "32",
        "8192",
        "2048",
        "4096",
        "row",
    ]
    assert "note: TP 2: each GPU runs its shard" in result.output


def test_estimate_model_ep_shows_grouped_experts(tmp_path):
    out = tmp_path / "layers.csv"
    result = run(
        "estimate",
        *("--model", "deepseek-v3", "--tokens", "8192", "--ep", "8", "--out", str(out)),
        "--show-all",
    )
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("layer "))
    assert "experts/GPU  tokens/expert" in header
    cells = row_of(result.output, "model.layers.*.mlp.experts.*.gate_proj")
    assert cells[1:7] == ["58", "2048", "7168", "2048", "32", "2048"]
    assert "grouped gemm, rowwise" in result.output
    assert "experts' gemms in one launch" in result.output
    frame = pd.read_csv(out)
    experts = frame[frame["grouped"]]
    assert len(experts) == 3 and set(experts["experts_per_device"]) == {32}
    assert set(frame.loc[~frame["grouped"], "experts_per_device"]) == {0}


def test_estimate_model_recompute_and_step():
    result = run(
        "estimate",
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--recompute",
        "full",
        "--step-ms",
        "1200",
        "--fsdp",
        "--show-all",
    )
    assert result.exit_code == 0, result.output
    assert "setup: FSDP, recompute full" in result.output
    # one end-to-end figure: the step summary's (the linears', recompute's, communication's)
    assert not any(x.startswith("end to end") for x in result.output.splitlines())
    line = next(x for x in result.output.splitlines() if x.startswith("step as torchtitan"))
    assert line.startswith("step as torchtitan converts it (measured bf16 step): bf16 1200 ms")
    assert "  recompute: " in result.output
    assert re.search(r"linears: \d+\.?\d* -> \d+\.?\d*", result.output)
    assert "note: recompute full" in result.output and "note: FSDP" in result.output
    short = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--step-ms", "10")
    assert short.exit_code == 2  # never replaced by the modelled step
    assert "measured step of 10 ms is shorter than its bf16 gemms at the GPU's peak" in short.output


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--tp", "3"],
            "Error: --tp 3 does not divide N = 4096 of model.layers.*.self_attn.q_proj",
        ),
        (["--tp", "0"], "Error: --tp must be a positive integer (got 0)"),
        (["--ep", "2"], "Error: --ep 2: llama3-8b has no routed experts"),
        (["--step-ms", "-1"], "Error: --step-ms must be a positive number of milliseconds"),
        (["--recompute", "half"], "Invalid value for '--recompute'"),
    ],
)
def test_estimate_model_bad_parallel_input(args, message):
    result = run("estimate", "--model", "llama3-8b", "--tokens", "8192", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    if "Invalid value" not in message:
        assert len(result.output.strip().splitlines()) == 1


def test_parallel_options_need_a_model():
    result = run("estimate", "--shape", "4096,4096,4096", "--tp", "2")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: --tp, --ep, --fsdp, --recompute, --step-ms and --filter-fqns go with --model"
    )


def test_step_totals_carry_the_band():
    rec = recommend(
        builtin("llama3-8b"),
        tokens=16384,
        resolved=resolve(Request(gpu="h100", recipes="tensorwise")),
        policy=DecisionPolicy.EXPECTED,
    )
    low, high = rec.totals.speedup_band
    assert low < rec.totals.speedup <= high * (1 + 1e-12)
    uncalibrated = recommend(builtin("llama3-8b"), tokens=16384, resolved=roofline("tensorwise"))
    assert uncalibrated.totals.speedup_band is None
    result = run(
        "estimate", "--model", "llama3-8b", "--tokens", "16384", "--gpu", "h100", "--show-all"
    )
    assert "of the linear part (band " in result.output
