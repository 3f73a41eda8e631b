import itertools

import numpy as np
import pytest
from conftest import invoke_cli

from f8roof.engine.filter_compare import compare_filters, comparison_grid
from f8roof.engine.resolve import Request, resolve
from f8roof.engine.step.conversion import NoAutoFilter, torchao_auto_filter
from f8roof.renderers.filters import format_comparison, markdown_section
from f8roof.training.catalog import builtin
from f8roof.training.run_config import RunConfig


def roofline(recipe="tensorwise"):
    return resolve(Request(gpu="h100", recipes=recipe, no_calibration=True))


def run(*args):
    return invoke_cli(*args)


# K and N around every threshold of both rules, multiples of 16 or not
GRID = sorted(
    {
        v
        for t in (16, 512, 1024, 2048, 4096, 8192)
        for v in (t - 16, t - 1, t, t + 1, t + 16, 2 * t)
        if v > 0
    }
)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_reproduction_matches_torchao(recipe):
    """Our thresholds against torchao's own `_auto_filter_for_recipe` on a grid of K and N."""
    pytest.importorskip("torchao")
    import torch
    from torchao.float8 import _auto_filter_for_recipe

    theirs = _auto_filter_for_recipe(recipe, filter_fqns=[])
    pairs = list(itertools.product(GRID, GRID))
    with torch.device("meta"):
        expected = [theirs(torch.nn.Linear(K, N, bias=False), "layer") for K, N in pairs]
    K, N = (np.array(x) for x in zip(*pairs))
    assert list(torchao_auto_filter(recipe, K, N)) == expected


def test_reproduction_no_rule_like_torchao():
    with pytest.raises(NoAutoFilter, match="raises NotImplementedError for rowwise_with_gw_hp"):
        torchao_auto_filter("rowwise_gw_hp", 4096, 4096)
    with pytest.raises(NoAutoFilter, match="no recipe 'tensorwise_delayed'"):
        torchao_auto_filter("tensorwise_delayed", 4096, 4096)
    torchao = pytest.importorskip("torchao.float8")
    with pytest.raises(NotImplementedError):
        torchao._auto_filter_for_recipe("rowwise_with_gw_hp", filter_fqns=[])


def test_thresholds_by_hand():
    # tensorwise: small only when K <= 4096 and N <= 1024 (llama3-8b's k_proj: 4096 x 1024)
    assert list(torchao_auto_filter("tensorwise", [4096, 4112, 4096], [1024, 1024, 1040])) == [
        False,
        True,
        True,
    ]
    # rowwise: N <= 2048, or K <= 1024, or N <= 4096 and K <= 2048
    assert list(
        torchao_auto_filter(
            "rowwise", [8192, 1024, 2048, 2064, 4096], [2048, 8192, 4096, 4096, 4112]
        )
    ) == [False, False, False, True, True]
    assert not torchao_auto_filter("tensorwise", 8192, 50257)  # not a multiple of 16


def test_torchao_sees_the_unsharded_weight():
    cmp = compare_filters(
        builtin("llama3-70b"), tokens=2048, resolved=roofline(), setup=RunConfig(tp=8)
    )
    layers = cmp.layers.set_index("fqn")
    k = "model.layers.*.self_attn.k_proj"
    # full 8192 x 1024 passes torchao's tensorwise rule; the TP8 shard (N = 128) does not win
    assert tuple(layers.loc[k, ["full_K", "full_N", "K", "N"]]) == (8192, 1024, 8192, 128)
    rec = cmp.recommendation
    assert layers.loc[k, "torchao_convert"] and layers.loc[k, rec.criterion] < 1
    choices = {c.name: c for c in cmp.choices}
    assert set(choices) == {"bf16", "torchao auto filter", "f8roof", "all convertible"}
    # each choice is the plan's step of its conversion set; f8roof's is the fastest of them
    assert choices["f8roof"].step_s <= choices["torchao auto filter"].step_s
    assert choices["f8roof"].step_s <= choices["all convertible"].step_s
    assert choices["bf16"].step_s == pytest.approx(cmp.plan.step.chosen.bf16_s)
    assert choices["f8roof"].step_s == pytest.approx(cmp.plan.step.chosen.fp8_s)
    text = format_comparison(cmp)
    assert "torchao sees K x N" in text and "8192 x 1024" in text
    assert "f8roof vs torchao's filter:" in text
    assert "torchao's filter sees the unsharded K x N" in text


def test_filter_fqns_and_routed_experts():
    cmp = compare_filters(
        builtin("mixtral-8x7b"),
        tokens=8192,
        resolved=roofline("rowwise"),
        setup=RunConfig(ep=8),
        filter_fqns=["lm_head"],
    )
    layers = cmp.layers.set_index("fqn")
    assert not layers.loc["lm_head", "torchao_convert"]
    experts = layers.loc["model.layers.*.block_sparse_moe.experts.*.w1"]
    assert experts["torchao_convert"] is None  # a grouped gemm, not an nn.Linear
    assert experts["torchao_step_s"] == pytest.approx(experts["f8roof_step_s"])
    assert "outside torchao's filter" in format_comparison(cmp)


def test_no_rule_for_rowwise_gw_hp():
    cmp = compare_filters(builtin("llama3-8b"), tokens=8192, resolved=roofline("rowwise_gw_hp"))
    assert cmp.torchao is None and "NotImplementedError" in cmp.no_rule
    assert [c.name for c in cmp.choices] == ["bf16", "f8roof", "all convertible"]
    text = format_comparison(cmp)
    assert "torchao: torchao's _auto_filter_for_recipe raises NotImplementedError" in text
    assert "## torchao's auto filter vs f8roof" in markdown_section(cmp)


def test_grid():
    comparisons, grid = comparison_grid(
        builtin("llama3-8b"), tokens=[2048, 8192], tps=[1, 8], resolved=roofline("rowwise")
    )
    assert len(comparisons) == 4
    assert list(zip(grid["tokens"], grid["tp"])) == [(2048, 1), (2048, 8), (8192, 1), (8192, 8)]
    # torchao's choice does not depend on the tokens or the TP degree; f8roof's does
    assert grid["torchao_linears"].nunique() == 1
    assert grid["f8roof_linears"].nunique() > 1
    assert (grid["f8roof_ms"] <= grid["torchao_ms"] * (1 + 1e-9)).all()


def test_cli_filter_compare():
    result = run(
        "filter-compare",
        "--model",
        "llama3-8b",
        "--tokens",
        "2048,8192",
        "--tp",
        "1,8",
        "--recipe",
        "rowwise",
        "--no-calibration",
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("torchao: torchao/float8/float8_linear_utils.py _auto_filter_for_recipe") == 4
    assert "llama3-8b, recipe rowwise: step per GPU (ms) with each choice" in out
    grid = out[out.index("llama3-8b, recipe rowwise: step per GPU") :].splitlines()
    assert grid[1].split()[:4] == ["tokens", "tp", "bf16", "ms"]
    assert [line.split()[:2] for line in grid[2:6]] == [
        ["2048", "1"],
        ["2048", "8"],
        ["8192", "1"],
        ["8192", "8"],
    ]
    # a measured step is of one run: one --tokens, one --tp
    one = run(
        "filter-compare",
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--recipe",
        "rowwise",
        "--no-calibration",
        "--step-ms",
        "2000",
    )
    assert one.exit_code == 0, one.output
    # each choice's step, reconciled with the measured one: bf16 is it
    assert "step per GPU (measured bf16 step): bf16 2000 ms;" in one.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokens", "8192", "--tp", "3"], "--tp 3 does not divide"),
        (["--tokens", "8192", "--tp", "0"], "--tp must be a positive integer"),
        (["--tokens", "lots"], "--tokens 'lots': expected integers"),
        (["--tokens", "8192", "--recipe", "all"], "filter-compare takes one recipe"),
    ],
)
def test_cli_filter_compare_bad_input(args, message):
    result = run("filter-compare", "--model", "llama3-8b", "--no-calibration", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_filter_fqns_accept_torchtitan_names():
    """torchtitan's `output` and `attention.wk` filter f8roof's lm_head and k_proj."""
    kw = {"tokens": 8192, "resolved": roofline("tensorwise")}
    theirs = compare_filters(builtin("llama3-8b"), filter_fqns=["output", "attention.wk"], **kw)
    ours = compare_filters(builtin("llama3-8b"), filter_fqns=["lm_head", "self_attn.k_proj"], **kw)
    a = theirs.layers.set_index("fqn")["torchao_convert"]
    b = ours.layers.set_index("fqn")["torchao_convert"]
    assert list(a) == list(b)
    assert not a["lm_head"] and not a["model.layers.*.self_attn.k_proj"]


def test_filter_compare_follows_the_policy():
    """With the shipped calibration (a band per layer) f8roof's choice depends on --policy:
    the conservative filter converts no more than the expected one, the optimistic no fewer;
    an uncertain layer stays in bf16 and says so."""
    from f8roof.engine.filter_compare import filter_compare

    converted = {}
    for policy in ("conservative", "expected", "optimistic"):
        result = filter_compare(
            "llama3-8b",
            tokens=[2048],
            tps=[1],
            request=Request(gpu="h100", recipes="tensorwise"),
            policy=policy,
        )
        converted[policy] = int(result.grid["f8roof_linears"].iloc[0])
        layers = result.comparisons[0].recommendation.layers
        assert set(layers["decision"]) <= {"convert", "keep bf16", "uncertain"}
    assert converted["conservative"] <= converted["expected"] <= converted["optimistic"]
    assert converted["conservative"] < converted["optimistic"]
    cli = {
        policy: run(
            "filter-compare",
            "--model",
            "llama3-8b",
            "--tokens",
            "2048",
            "--gpu",
            "h100",
            "--policy",
            policy,
        )
        for policy in ("conservative", "optimistic")
    }
    assert all(r.exit_code == 0 for r in cli.values()), cli
    assert "policy conservative" in cli["conservative"].output
    assert "policy optimistic" in cli["optimistic"].output
