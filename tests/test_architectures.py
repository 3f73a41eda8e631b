import json

import pytest
import torch
from torch import nn

from f8roof.renderers.notes import sentence
from f8roof.traffic.variant import Before, Context
from f8roof.training.catalog import (
    BUILTIN_CONFIGS,
    BUILTIN_NAMES,
    ArchitectureError,
    NamedLinear,
    RoutedExperts,
    TPStyle,
    builtin,
    from_hf_config,
    from_module,
    layer_type,
    resolve_model,
    tp_style,
)

REPLICATED = TPStyle.REPLICATED


def said(arch) -> str:
    """What an architecture leaves out or defaults, in words."""
    return "; ".join(sentence(n) for n in arch.notes)


def by_name(arch):
    return {linear.fqn: linear for linear in arch.linears}


def test_llama3_8b_published_dims():
    layers = by_name(builtin("llama3-8b"))
    attn, mlp = "model.layers.*.self_attn", "model.layers.*.mlp"
    assert (layers[f"{attn}.q_proj"].K, layers[f"{attn}.q_proj"].N) == (4096, 4096)
    assert layers[f"{attn}.k_proj"].N == layers[f"{attn}.v_proj"].N == 1024  # 8 kv heads x 128
    assert layers[f"{attn}.o_proj"].K == 4096
    assert layers[f"{mlp}.gate_proj"].N == layers[f"{mlp}.up_proj"].N == 14336
    assert (layers[f"{mlp}.down_proj"].K, layers[f"{mlp}.down_proj"].N) == (14336, 4096)
    assert {l.count for fqn, l in layers.items() if fqn != "lm_head"} == {32}
    assert (layers["lm_head"].K, layers["lm_head"].N, layers["lm_head"].count) == (4096, 128256, 1)
    # linears hold all of the 8.03B parameters but the 0.53B embedding
    assert builtin("llama3-8b").parameter_count == pytest.approx(7.50e9, rel=1e-3)


@pytest.mark.parametrize(
    "name, hidden, kv_n, inter, layers, vocab, params",
    [
        ("llama3-70b", 8192, 1024, 28672, 80, 128256, 69.50e9),
        ("llama3-405b", 16384, 1024, 53248, 126, 128256, 403.7e9),
        ("mistral-7b", 4096, 1024, 14336, 32, 32000, 7.11e9),
        ("qwen2.5-7b", 3584, 512, 18944, 28, 152064, 7.07e9),
    ],
)
def test_llama_style_builtins(name, hidden, kv_n, inter, layers, vocab, params):
    arch = builtin(name)
    named = by_name(arch)
    assert named["model.layers.*.self_attn.q_proj"].N == hidden
    assert named["model.layers.*.self_attn.k_proj"].N == kv_n
    assert named["model.layers.*.mlp.up_proj"].N == inter
    assert named["model.layers.*.mlp.down_proj"].count == layers
    assert named["lm_head"].N == vocab
    assert arch.linear_count == 7 * layers + 1
    assert arch.parameter_count == pytest.approx(params, rel=2e-3)


@pytest.mark.parametrize(
    "name, hidden, heads, inter, layers, non_embedding",
    [
        # non-embedding parameters as each Hugging Face model card gives them (Qwen/Qwen3-8B:
        # 6.95B, -14B: 13.2B, -32B: 31.2B): the block linears, lm_head and the embedding aside
        ("qwen3-8b", 4096, 32, 12288, 36, 6.95e9),
        ("qwen3-14b", 5120, 40, 17408, 40, 13.2e9),
        ("qwen3-32b", 5120, 64, 25600, 64, 31.2e9),
    ],
)
def test_qwen3_dense_builtins(name, hidden, heads, inter, layers, non_embedding):
    arch = builtin(name)
    named = by_name(arch)
    # torchtitan's module names (its qwen3 at b64292ba1: QKVLinear's wq, wk, wv; wo; w1/w3/w2)
    qkv, attn = "layers.*.attention.qkv_linear", "layers.*.attention"
    # q's width is heads x head_dim 128, not hidden_size (32B: 8192 from 5120)
    assert (named[f"{qkv}.wq"].K, named[f"{qkv}.wq"].N) == (hidden, heads * 128)
    assert (named[f"{attn}.wo"].K, named[f"{attn}.wo"].N) == (heads * 128, hidden)
    # k and v: two linears of 8 kv heads x 128 each (one `wkv` config builds both)
    assert named[f"{qkv}.wk"].N == named[f"{qkv}.wv"].N == 8 * 128
    assert named["layers.*.feed_forward.w1"].N == inter
    assert named["layers.*.feed_forward.w2"].K == inter
    assert {linear.count for linear in arch.linears} == {layers, 1}
    assert named["lm_head"].N == 151936 and not arch.is_moe
    head = named["lm_head"].K * named["lm_head"].N
    assert arch.parameter_count - head == pytest.approx(non_embedding, rel=5e-3)
    # q/k norms sit after the projections: every input projection still reads the block's norm,
    # the down projection silu(w1) * w3, the output projection the attention
    assert "q_norm" in said(arch) and "k_norm" in said(arch)
    for leaf in (f"{qkv}.wq", f"{qkv}.wk", f"{qkv}.wv", "layers.*.feed_forward.w3", "lm_head"):
        assert named[leaf].context == Context(Before.RMSNORM), leaf
    assert named["layers.*.feed_forward.w2"].context == Context(Before.SILU_MUL)
    assert named[f"{attn}.wo"].context == Context()
    assert arch.family == "qwen3"


def test_gpt2():
    named = by_name(builtin("gpt2"))
    assert named["transformer.h.*.attn.c_attn"].N == 3 * 768
    assert named["transformer.h.*.mlp.c_fc"].N == 3072  # n_inner null: 4 x n_embd
    assert named["transformer.h.*.mlp.c_proj"].K == 3072
    assert named["lm_head"].N == 50257 and named["lm_head"].N % 16 != 0


def test_deepseek_v3_dense_linears():
    arch = builtin("deepseek-v3")
    named = by_name(arch)
    attn = "model.layers.*.self_attn"
    assert (named[f"{attn}.q_a_proj"].K, named[f"{attn}.q_a_proj"].N) == (7168, 1536)
    assert (named[f"{attn}.q_b_proj"].K, named[f"{attn}.q_b_proj"].N) == (1536, 128 * (128 + 64))
    assert named[f"{attn}.kv_a_proj_with_mqa"].N == 512 + 64
    assert (named[f"{attn}.kv_b_proj"].K, named[f"{attn}.kv_b_proj"].N) == (512, 128 * (128 + 128))
    assert (named[f"{attn}.o_proj"].K, named[f"{attn}.o_proj"].N) == (128 * 128, 7168)
    assert named[f"{attn}.o_proj"].count == 61
    assert named["model.layers.*.mlp.gate_proj"].N == 18432
    assert named["model.layers.*.mlp.down_proj"].count == 3  # first_k_dense_replace
    assert named["model.layers.*.mlp.shared_experts.up_proj"].count == 58
    assert named["lm_head"].N == 129280
    assert "routers" in said(arch)
    # routed experts: 256 per layer, 8 per token, in the 58 MoE layers, width 2048
    experts = named["model.layers.*.mlp.experts.*.gate_proj"]
    assert (experts.K, experts.N, experts.count) == (7168, 2048, 58)
    assert experts.routed == RoutedExperts(256, 8)
    assert named["model.layers.*.mlp.experts.*.down_proj"].tp is TPStyle.ROW
    assert named["model.layers.*.mlp.shared_experts.up_proj"].routed is None
    # TP plan of torchtitan's DeepSeek-V3: low-rank down-projections replicated
    assert named[f"{attn}.q_a_proj"].tp is named[f"{attn}.kv_a_proj_with_mqa"].tp is REPLICATED
    assert named[f"{attn}.q_b_proj"].tp is named[f"{attn}.kv_b_proj"].tp is TPStyle.COLUMN
    assert named[f"{attn}.o_proj"].tp is TPStyle.ROW and named["lm_head"].tp is TPStyle.COLUMN


def test_every_builtin_is_cited_and_shapes_use_tokens():
    for name in BUILTIN_NAMES:
        arch = builtin(name)
        assert arch.source.startswith("https://huggingface.co/") and arch.source.endswith(
            "config.json"
        )
        shapes = arch.shapes(4096)
        assert [s[1:] for s in shapes] == [(l.K, l.N) for l in arch.linears]
        assert {s[0] for s in shapes} == {4096}


def test_aliases_and_unknown_names():
    assert builtin("Llama3.1-405B").name == "llama3-405b"
    with pytest.raises(ArchitectureError) as e:
        resolve_model("llama5-1t")
    for name in BUILTIN_NAMES:
        assert name in e.value.message


def test_config_json_round_trip(tmp_path):
    for name, (_, config) in BUILTIN_CONFIGS.items():
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(config | {"rope_theta": 5e5, "torch_dtype": "bfloat16"}))
        for arch in (
            from_hf_config(path),
            resolve_model(str(path)),
            resolve_model(str(path.parent)),
        ):
            assert arch.linears == builtin(name).linears
            # the file, when it has no _name_or_path: never its folder's name
            assert arch.name == str(path)


def test_config_defaults_follow_hugging_face():
    base = {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 16,
        "num_hidden_layers": 4,
        "vocab_size": 32000,
    }
    mha = by_name(from_hf_config(base, name="mha"))  # no num_key_value_heads: as many as q heads
    assert mha["model.layers.*.self_attn.k_proj"].N == 2048
    wide = by_name(from_hf_config(base | {"head_dim": 256, "num_key_value_heads": 4}, name="w"))
    assert wide["model.layers.*.self_attn.q_proj"].N == 16 * 256
    assert wide["model.layers.*.self_attn.o_proj"].K == 16 * 256
    assert wide["model.layers.*.self_attn.v_proj"].N == 4 * 256
    moe = by_name(
        from_hf_config(base | {"num_local_experts": 8, "num_experts_per_tok": 2}, name="mixtral")
    )
    assert not any(".mlp." in fqn for fqn in moe)
    w1 = moe["model.layers.*.block_sparse_moe.experts.*.w1"]
    assert (w1.K, w1.N, w1.count, w1.routed) == (2048, 8192, 4, RoutedExperts(8, 2))
    with pytest.raises(ArchitectureError, match="lacks 'num_experts_per_tok'"):
        from_hf_config(base | {"num_local_experts": 8}, name="mixtral-like")


def test_llama_style_tp_plan():
    named = by_name(builtin("llama3-8b"))
    styles = {fqn.rsplit(".", 1)[-1]: linear.tp for fqn, linear in named.items()}
    assert styles == {
        "q_proj": TPStyle.COLUMN,
        "k_proj": TPStyle.COLUMN,
        "v_proj": TPStyle.COLUMN,
        "o_proj": TPStyle.ROW,
        "gate_proj": TPStyle.COLUMN,
        "up_proj": TPStyle.COLUMN,
        "down_proj": TPStyle.ROW,
        "lm_head": TPStyle.COLUMN,  # torchtitan: vocab-sharded output (loss parallel)
    }
    gpt2 = by_name(builtin("gpt2"))
    assert gpt2["transformer.h.*.attn.c_attn"].tp is gpt2["transformer.h.*.mlp.c_fc"].tp
    assert gpt2["transformer.h.*.attn.c_attn"].tp is TPStyle.COLUMN
    assert gpt2["transformer.h.*.attn.c_proj"].tp is gpt2["transformer.h.*.mlp.c_proj"].tp
    assert gpt2["transformer.h.*.mlp.c_proj"].tp is TPStyle.ROW


@pytest.mark.parametrize(
    "name, experts, top_k, width, moe_layers, params",
    [
        # total parameters published with each model, less embeddings and norms
        ("deepseek-v3", 256, 8, 2048, 58, 670.0e9),
        ("deepseek-v2-lite", 64, 6, 1408, 26, 15.49e9),
        ("mixtral-8x7b", 8, 2, 14336, 32, 46.57e9),
        ("qwen3-30b-a3b", 128, 8, 768, 48, 30.21e9),
        ("qwen3-235b-a22b", 128, 8, 1536, 94, 234.4e9),
        ("llama4-scout", 16, 1, 8192, 48, 106.7e9),
        ("llama4-maverick", 128, 1, 8192, 24, 399.7e9),
    ],
)
def test_moe_builtins(name, experts, top_k, width, moe_layers, params):
    arch = builtin(name)
    routed = [linear for linear in arch.linears if linear.grouped]
    assert routed and {linear.routed for linear in routed} == {RoutedExperts(experts, top_k)}
    assert {linear.count for linear in routed} == {moe_layers}
    # the up/gate projections' N is the expert width (Llama 4's fused gate_up: twice it)
    assert {linear.N for linear in routed if linear.tp is TPStyle.COLUMN} <= {width, 2 * width}
    assert {linear.K for linear in routed if linear.tp is TPStyle.ROW} == {width}
    assert arch.is_moe and "routers" in said(arch)
    assert arch.parameter_count == pytest.approx(params, rel=3e-3)


def test_llama4_layers():
    named = by_name(builtin("llama4-maverick"))
    ff = "model.layers.*.feed_forward"
    assert named[f"{ff}.gate_proj"].N == 16384 and named[f"{ff}.gate_proj"].count == 24
    assert named[f"{ff}.experts.gate_up_proj"].N == 2 * 8192
    assert named[f"{ff}.experts.down_proj"].K == 8192
    assert named[f"{ff}.shared_expert.up_proj"].count == 24
    assert named[f"{ff}.shared_expert.up_proj"].routed is None
    assert named["model.layers.*.self_attn.k_proj"].N == 8 * 128
    # an explicit moe_layers list wins over the interleave step
    text = dict(BUILTIN_CONFIGS["llama4-maverick"][1]["text_config"]) | {"moe_layers": [0, 47]}
    listed = by_name(from_hf_config(text, name="listed"))
    assert listed[f"{ff}.experts.down_proj"].count == 2 and listed[f"{ff}.up_proj"].count == 46


def test_qwen_moe_dense_layers_and_shared_expert():
    base = dict(BUILTIN_CONFIGS["qwen3-30b-a3b"][1])
    sparse_every_2 = by_name(from_hf_config(base | {"decoder_sparse_step": 2}, name="q"))
    assert sparse_every_2["layers.*.moe.experts.w3"].count == 24
    assert sparse_every_2["layers.*.feed_forward.w3"].count == 24
    only = by_name(from_hf_config(base | {"mlp_only_layers": [0, 1, 2]}, name="q"))
    assert only["layers.*.moe.experts.w3"].count == 45
    qwen2 = by_name(from_hf_config(base | {"shared_expert_intermediate_size": 5632}, name="q2"))
    assert qwen2["layers.*.moe.shared_experts.w2"].K == 5632
    qwen2_moe = base | {"model_type": "qwen2_moe", "shared_expert_intermediate_size": 5632}
    assert (
        by_name(from_hf_config(qwen2_moe))["model.layers.*.mlp.shared_expert.down_proj"].K == 5632
    )


def test_routed_experts_validated():
    with pytest.raises(ArchitectureError, match="top_k 9 exceeds the 8 experts"):
        RoutedExperts(8, 9)
    config = dict(BUILTIN_CONFIGS["mixtral-8x7b"][1]) | {"num_experts_per_tok": 0}
    with pytest.raises(ArchitectureError, match="num_experts_per_tok must be a positive integer"):
        from_hf_config(config, name="bad")


@pytest.mark.parametrize(
    "field",
    ["hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size"],
)
def test_config_missing_field_is_named(tmp_path, field):
    config = dict(BUILTIN_CONFIGS["llama3-8b"][1])
    del config[field]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ArchitectureError, match=f"lacks '{field}'"):
        from_hf_config(path)


def test_deepseek_config_missing_mla_field_is_named():
    config = dict(BUILTIN_CONFIGS["deepseek-v3"][1])
    del config["qk_rope_head_dim"]
    with pytest.raises(ArchitectureError, match="lacks 'qk_rope_head_dim'"):
        from_hf_config(config, name="dsv3")


def test_bad_config_files(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ArchitectureError, match="not valid JSON"):
        from_hf_config(path)
    path.write_text(json.dumps(dict(BUILTIN_CONFIGS["llama3-8b"][1]) | {"hidden_size": "4096"}))
    with pytest.raises(ArchitectureError, match="hidden_size must be a positive integer"):
        from_hf_config(path)
    with pytest.raises(ArchitectureError, match="cannot read"):
        from_hf_config(tmp_path / "missing.json")


@pytest.mark.parametrize("tokens", [0, -8, 1.5, True])
def test_tokens_must_be_positive(tokens):
    with pytest.raises(ArchitectureError, match="tokens per step must be a positive integer"):
        builtin("gpt2").shapes(tokens)


def test_layer_type():
    assert layer_type("model.layers.17.mlp.up_proj") == "model.layers.*.mlp.up_proj"
    assert layer_type("0.weight_proj") == "*.weight_proj"
    assert layer_type("experts.3.w1.7") == "experts.*.w1.*"
    assert layer_type("lm_head") == "lm_head" and layer_type("fc2") == "fc2"


class Block(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm = nn.LayerNorm(dim)


class Tiny(nn.Module):
    def __init__(self, dim: int = 64, layers: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(layers)])
        self.head = nn.Linear(dim, 1000)


def test_module_walk_groups_linears_by_layer_type():
    arch = from_module(Tiny())
    assert arch.linears == (
        NamedLinear("blocks.*.qkv", 64, 192, 3),
        NamedLinear("blocks.*.proj", 64, 64, 3),
        NamedLinear("head", 64, 1000, 1),
    )
    assert arch.name == "Tiny"
    # none of these names is in the TP plan: replicated, and said so
    assert "blocks.*.qkv, blocks.*.proj, head" in said(arch)


def test_module_walk_tp_styles():
    plan = {"qkv": "column", "blocks.*.proj": "row"}
    arch = from_module(Tiny(), tp_plan=plan)
    assert [linear.tp for linear in arch.linears] == [TPStyle.COLUMN, TPStyle.ROW, REPLICATED]
    assert said(arch).endswith(": head")
    assert tp_style("model.layers.*.self_attn.o_proj") is TPStyle.ROW
    assert tp_style("layers.*.attention.wk") is TPStyle.COLUMN  # torchtitan's names
    assert tp_style("output") is TPStyle.COLUMN and tp_style("blocks.*.mystery") is None
    assert tp_style("x.proj", {"proj": "row"}) is TPStyle.ROW
    with pytest.raises(ArchitectureError, match="'diagonal' is not one of column, row"):
        tp_style("x.proj", {"proj": "diagonal"})


def test_unequal_layers_get_the_shape_in_their_name():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
    assert {(l.fqn, l.count) for l in from_module(model).linears} == {
        ("*[32x64]", 1),
        ("*[64x16]", 1),
    }


def test_builder_runs_on_the_meta_device():
    built = []

    def build():
        model = Tiny(dim=8192, layers=4)  # 0.8B parameters: only on meta is this free
        built.append(model)
        return model

    arch = from_module(build)
    assert built[0].head.weight.is_meta
    assert by_name(arch)["blocks.*.qkv"] == NamedLinear("blocks.*.qkv", 8192, 3 * 8192, 4)


def test_module_without_linears():
    with pytest.raises(ArchitectureError, match="has no nn.Linear modules"):
        from_module(nn.Sequential(nn.ReLU(), nn.LayerNorm(4)))
    with pytest.raises(ArchitectureError, match="expected an nn.Module"):
        from_module(42)


def test_no_torch_at_import():
    import subprocess
    import sys

    code = "import sys, f8roof.training.catalog; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert torch  # the walker itself is tested above with real modules
