import math
import re

import pytest
import sympy as sp

from f8roof.errors import F8RoofError
from f8roof.notes import Topic
from f8roof.renderers.notes import run_text, sentence
from f8roof.traffic.monomials import SYMBOLS
from f8roof.traffic.recipes import Recipe, Role
from f8roof.traffic.worst_ideal import worst_traffic
from f8roof.training.catalog import Architecture, NamedLinear, TPStyle, builtin
from f8roof.training.parallel import (
    GROUPED_M_ALIGNMENT,
    local_layers,
    padded_group_rows,
    tokens_per_expert,
)
from f8roof.training.recompute import forward_share, is_forward
from f8roof.training.run_config import ParallelismError, Recompute, RunConfig


def by_name(layers):
    return {layer.linear.fqn: layer for layer in layers}


def test_column_parallel_shards_n_row_parallel_shards_k():
    layers = by_name(local_layers(builtin("llama3-8b"), 8192, RunConfig(tp=2)))
    attn, mlp = "model.layers.*.self_attn", "model.layers.*.mlp"
    # torchtitan#1207: TP2 halves the already small k/v projections
    assert layers[f"{attn}.k_proj"].shape == layers[f"{attn}.v_proj"].shape == (8192, 4096, 512)
    assert layers[f"{attn}.q_proj"].shape == (8192, 4096, 2048)
    assert layers[f"{attn}.o_proj"].shape == (8192, 2048, 4096)  # row-parallel: K / tp
    assert layers[f"{mlp}.gate_proj"].shape == (8192, 4096, 7168)
    assert layers[f"{mlp}.down_proj"].shape == (8192, 7168, 4096)
    assert layers["lm_head"].shape == (8192, 4096, 128256 // 2)  # vocab-sharded
    # every TP rank runs all the tokens
    assert {layer.M for layer in layers.values()} == {8192}


def test_replicated_linears_keep_their_shape():
    layers = by_name(local_layers(builtin("deepseek-v3"), 4096, RunConfig(tp=8)))
    attn = "model.layers.*.self_attn"
    assert layers[f"{attn}.q_a_proj"].shape == (4096, 7168, 1536)
    assert layers[f"{attn}.kv_a_proj_with_mqa"].shape == (4096, 7168, 576)
    assert layers[f"{attn}.kv_b_proj"].shape == (4096, 512, 128 * 256 // 8)


def test_no_parallelism_is_the_global_shape():
    arch = builtin("mistral-7b")
    assert [layer.shape for layer in local_layers(arch, 2048)] == arch.shapes(2048)


@pytest.mark.parametrize(
    "model, tp, message",
    [
        ("llama3-8b", 3, "tp 3 does not divide N = 4096 of model.layers.*.self_attn.q_proj"),
        (
            "llama3-8b",
            2048,
            "tp 2048 does not divide the 32 heads of model.layers.*.self_attn.q_",
        ),
        # k_proj N = 1024 divides by 256 (4 columns each), but 8 kv heads do not: refused
        ("llama3-8b", 256, "tp 256 does not divide the 32 heads of model.layers.*.self_attn.q_"),
        ("llama3-8b", 16, "tp 16 does not divide the 8 heads of model.layers.*.self_attn.k_proj"),
        ("gpt2", 2, "tp 2 does not divide N = 50257 of lm_head (column-parallel)"),
    ],
)
def test_tp_that_does_not_divide(model, tp, message):
    with pytest.raises(ParallelismError, match=re.escape(message)):
        local_layers(builtin(model), 4096, RunConfig(tp=tp))


def test_row_parallel_error_names_k():
    arch = Architecture("x", (NamedLinear("down", 100, 64, 1, TPStyle.ROW),))
    with pytest.raises(ParallelismError, match=r"does not divide K = 100 of down \(row-parallel\)"):
        local_layers(arch, 64, RunConfig(tp=8))


def test_expert_counts_and_tokens_per_expert():
    # DeepSeek-V3: 256 experts, top 8; EP 8 -> 32 per GPU, 8192 x 8 / 32 = 2048 rows each
    layers = by_name(local_layers(builtin("deepseek-v3"), 8192, RunConfig(ep=8)))
    experts = layers["model.layers.*.mlp.experts.*.gate_proj"]
    assert experts.grouped and experts.experts_per_device == 32
    assert experts.tokens_per_expert == 2048 and experts.shape == (2048, 7168, 2048)
    assert not layers["model.layers.*.mlp.shared_experts.gate_proj"].grouped
    assert layers["model.layers.*.mlp.shared_experts.gate_proj"].M == 8192
    # without EP: all 256 on every GPU, 8192 x 8 / 256 = 256 rows each
    one = by_name(local_layers(builtin("deepseek-v3"), 8192))
    assert one["model.layers.*.mlp.experts.*.gate_proj"].experts_per_device == 256
    assert one["model.layers.*.mlp.experts.*.gate_proj"].M == 256
    # the per-GPU rows routed (tokens x top_k) stay the same; the groups get bigger with EP
    for setup in (RunConfig(), RunConfig(ep=8), RunConfig(ep=64)):
        layer = by_name(local_layers(builtin("deepseek-v3"), 8192, setup))[
            "model.layers.*.mlp.experts.*.up_proj"
        ]
        assert layer.tokens_per_expert * layer.experts_per_device == 8192 * 8


def test_experts_under_tp():
    # EP 1: the experts are tensor-parallel like the dense MLP, every rank routes all tokens
    layers = by_name(local_layers(builtin("mixtral-8x7b"), 4096, RunConfig(tp=2)))
    w1, w2 = (layers[f"model.layers.*.block_sparse_moe.experts.*.{w}"] for w in ("w1", "w2"))
    assert w1.shape == (4096 * 2 // 8, 4096, 14336 // 2) and w1.experts_per_device == 8
    assert w2.shape == (1024, 14336 // 2, 4096)
    # EP > 1 with TP: experts whole, TP borrowed for EP splits the routed tokens over TP ranks
    layers = by_name(local_layers(builtin("mixtral-8x7b"), 4096, RunConfig(tp=2, ep=2)))
    w1 = layers["model.layers.*.block_sparse_moe.experts.*.w1"]
    assert w1.experts_per_device == 4 and w1.tokens_per_expert == 4096 / 2 * 2 / 4
    assert (w1.K, w1.N) == (4096, 14336)
    assert layers["model.layers.*.self_attn.q_proj"].N == 2048  # attention still TP-sharded


def test_padding_to_the_grouped_gemm_alignment():
    assert GROUPED_M_ALIGNMENT == 16
    assert padded_group_rows(0) == 16  # an empty expert still gets one alignment unit
    assert padded_group_rows(1) == padded_group_rows(16) == 16
    assert padded_group_rows(16.5) == padded_group_rows(32) == 32
    assert padded_group_rows(33) == 48
    # Llama 4 Maverick at 1000 tokens: 1000 x 1 / 128 = 7.8 rows per expert -> 16
    layers = by_name(local_layers(builtin("llama4-maverick"), 1000))
    experts = layers["model.layers.*.feed_forward.experts.gate_up_proj"]
    assert experts.tokens_per_expert == pytest.approx(1000 / 128)
    assert experts.M == 16  # padded up from 7.8 rows
    exact = by_name(local_layers(builtin("llama4-scout"), 4096))
    assert exact["model.layers.*.feed_forward.experts.down_proj"].M == 256
    assert exact["model.layers.*.feed_forward.experts.down_proj"].tokens_per_expert == 256


@pytest.mark.parametrize(
    "model, setup, tokens, message",
    [
        ("deepseek-v3", RunConfig(ep=7), 4096, "ep 7 does not divide the 256 routed"),
        ("llama3-8b", RunConfig(ep=2), 4096, "ep 2: llama3-8b has no routed experts"),
        ("mixtral-8x7b", RunConfig(tp=4, ep=2), 4098, "tp 4 does not divide them"),
        ("mixtral-8x7b", RunConfig(), 0, "tokens per step must be a positive integer"),
    ],
)
def test_bad_parallel_input(model, setup, tokens, message):
    with pytest.raises(F8RoofError, match=message):
        local_layers(builtin(model), tokens, setup)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"tp": 0}, "tp must be a positive integer"),
        ({"ep": -1}, "ep must be a positive integer"),
        ({"tp": 2.0}, "tp must be a positive integer"),
        ({"recompute": "some"}, "unknown recompute 'some'"),
        ({"step_ms": 0}, "step_ms must be a positive number"),
        ({"step_ms": "fast"}, "step_ms must be a positive number"),
    ],
)
def test_setup_validation(options, message):
    with pytest.raises(F8RoofError, match=message):
        RunConfig.from_options(**options)


def test_setup_description():
    setup = RunConfig.from_options(tp=2, ep=8, fsdp=True, recompute="full", step_ms=1500)
    assert setup.step_s == pytest.approx(1.5) and setup.recompute is Recompute.FULL
    assert run_text(setup).startswith("TP 2 (column-parallel linears shard N")
    assert "EP 8, FSDP, recompute full" in run_text(setup)
    assert [n.topic for n in setup.notes()] == [
        Topic.TP_SHARDS,
        Topic.FSDP_GATHERED,
        Topic.FULL_RECOMPUTE,
    ]
    assert sentence(setup.notes()[1]).startswith("FSDP: weights are all-gathered")
    assert RunConfig().is_default and not RunConfig().is_parallel
    assert tokens_per_expert(4096, experts=8, top_k=2) == (1024.0, 8)


# --- the forward share of the float8 overhead ---------------------------------------------------


def test_forward_share_tensorwise():
    M, K, N = SYMBOLS
    # forward casts input (M K) and weight (K N); backward grad_output (M N): each 4n bytes
    assert (
        sp.simplify(
            forward_share(worst_traffic(Recipe.from_name("tensorwise")))
            - K * (M + N) / (M * K + K * N + M * N)
        )
        == 0
    )


def test_forward_share_rowwise_is_the_row_casts():
    recipe = Recipe.from_name("rowwise")
    model = worst_traffic(recipe)
    forward = {k.name for k in model.kernels if is_forward(k)}
    assert forward == {
        "input.amax_rows",
        "input.cast_rows",
        "weight.amax_rows",
        "weight.cast_rows",
    }
    share = sp.lambdify(SYMBOLS, forward_share(model))
    # square shapes: 2 of the 6 casts run in the forward
    assert share(8192, 8192, 8192) == pytest.approx(1 / 3, rel=1e-3)
    limited = worst_traffic(recipe, limited=frozenset(Role))
    assert {k.name for k in limited.kernels if is_forward(k)} == forward  # transposes: backward


@pytest.mark.parametrize("name", ["tensorwise", "tensorwise_delayed", "rowwise", "rowwise_gw_hp"])
def test_forward_share_is_a_fraction(name):
    share = sp.lambdify(SYMBOLS, forward_share(worst_traffic(Recipe.from_name(name))))
    for shape in [(16, 16, 16), (8192, 4096, 1024), (256, 16384, 128256)]:
        assert 0 < share(*shape) < 1
    assert not math.isnan(share(1, 1, 1))
