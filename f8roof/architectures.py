"""Model architectures -> their linears: fully qualified name, K, N and how many there are.

Three ways in, all giving an `Architecture` (a tuple of `NamedLinear`, M = tokens per step):
- `BUILTIN`: published dimensions of well-known models, kept as the subset of each model's
  Hugging Face `config.json` that fixes its linear shapes (the source is cited per entry);
- `from_hf_config`: any Hugging Face `config.json` (llama-style, GPT-2, DeepSeek-V3 MLA);
- `from_module`: any `torch.nn.Module`, by walking its `nn.Linear` modules.

A layer type stands for all its repeats: its fqn has `*` where the layer index goes
(`model.layers.*.self_attn.q_proj`) and `count` says how many there are. No torch import at
module level: only `from_module` needs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError
from f8roof.files import read_json


class ArchitectureError(F8RoofError):
    """An unknown model, a config.json that lacks a field, a module without linears."""


@dataclass(frozen=True)
class NamedLinear:
    """One linear layer type: input (M, K) @ weight (N, K).T, repeated `count` times per step."""

    fqn: str
    K: int
    N: int
    count: int = 1

    def __post_init__(self) -> None:
        for name in ("K", "N", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArchitectureError(
                    f"linear {self.fqn}: {name} must be a positive integer (got {value!r})"
                )


@dataclass(frozen=True)
class Architecture:
    name: str
    linears: tuple[NamedLinear, ...]
    source: str = ""  # where the dimensions come from
    note: str = ""  # what is left out (routed experts, ...)

    def __post_init__(self) -> None:
        if not self.linears:
            raise ArchitectureError(f"{self.name}: no linear layers")
        fqns = [linear.fqn for linear in self.linears]
        if len(set(fqns)) != len(fqns):
            raise ArchitectureError(f"{self.name}: a linear fqn appears twice")

    def shapes(self, tokens: int) -> list[tuple[int, int, int]]:
        """(M, K, N) per layer type, M = tokens per step."""
        M = check_tokens(tokens)
        return [(M, linear.K, linear.N) for linear in self.linears]

    @property
    def linear_count(self) -> int:
        return sum(linear.count for linear in self.linears)

    @property
    def parameter_count(self) -> int:
        """Weights of the linears only (no embeddings, norms or biases)."""
        return sum(linear.K * linear.N * linear.count for linear in self.linears)


def check_tokens(tokens: Any) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        raise ArchitectureError(f"tokens per step must be a positive integer (got {tokens!r})")
    return tokens


# --- Hugging Face config.json -------------------------------------------------------------------


class _Config:
    """Typed access to a config.json; a missing or bad field is named with the file."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data, self.source = data, source

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int(self, key: str, default: int | None = None, *, allow_zero: bool = False) -> int:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise ArchitectureError(
                f"{self.source}: config.json lacks {key!r}, needed for the linear shapes"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < (0 if allow_zero else 1)
        ):
            raise ArchitectureError(
                f"{self.source}: {key} must be a positive integer (got {value!r})"
            )
        return value


def _llama_style(cfg: _Config, name: str) -> tuple[list[NamedLinear], str]:
    """Llama, Mistral, Qwen2 and friends: q/k/v/o, gate/up/down per layer, then lm_head."""
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    # HF's convention: no num_key_value_heads means multi-head attention (as many kv as q heads);
    # no head_dim means hidden_size / num_attention_heads.
    kv_heads = cfg.int("num_key_value_heads", heads)
    head_dim = cfg.int("head_dim", hidden // heads)
    vocab = cfg.int("vocab_size")
    attn = "model.layers.*.self_attn"
    linears = [
        NamedLinear(f"{attn}.q_proj", hidden, heads * head_dim, layers),
        NamedLinear(f"{attn}.k_proj", hidden, kv_heads * head_dim, layers),
        NamedLinear(f"{attn}.v_proj", hidden, kv_heads * head_dim, layers),
        NamedLinear(f"{attn}.o_proj", heads * head_dim, hidden, layers),
    ]
    note = ""
    experts = cfg.int("num_local_experts", 1)
    if experts > 1:
        # A routed expert sees about tokens * top_k / experts rows, not the step's tokens.
        note = f"{experts} routed experts per layer left out: only the dense linears are modelled"
    else:
        intermediate = cfg.int("intermediate_size")
        mlp = "model.layers.*.mlp"
        linears += [
            NamedLinear(f"{mlp}.gate_proj", hidden, intermediate, layers),
            NamedLinear(f"{mlp}.up_proj", hidden, intermediate, layers),
            NamedLinear(f"{mlp}.down_proj", intermediate, hidden, layers),
        ]
    linears.append(NamedLinear("lm_head", hidden, vocab, 1))
    return linears, note


def _gpt2(cfg: _Config, name: str) -> tuple[list[NamedLinear], str]:
    """GPT-2: fused qkv (c_attn), c_proj, c_fc, mlp c_proj, lm_head (tied to the embedding)."""
    hidden = cfg.int("n_embd")
    layers = cfg.int("n_layer")
    cfg.int("n_head")  # not a linear dimension, but its absence means a broken config
    inner = cfg.int("n_inner", 4 * hidden)  # HF: n_inner null means 4 * n_embd
    vocab = cfg.int("vocab_size")
    block = "transformer.h.*"
    # HF's GPT2 implements these as Conv1D (weight stored (K, N)), which torchao does not
    # convert; nanoGPT and most training code use nn.Linear with the same names and shapes.
    return [
        NamedLinear(f"{block}.attn.c_attn", hidden, 3 * hidden, layers),
        NamedLinear(f"{block}.attn.c_proj", hidden, hidden, layers),
        NamedLinear(f"{block}.mlp.c_fc", hidden, inner, layers),
        NamedLinear(f"{block}.mlp.c_proj", inner, hidden, layers),
        NamedLinear("lm_head", hidden, vocab, 1),
    ], ""


def _deepseek_v3(cfg: _Config, name: str) -> tuple[list[NamedLinear], str]:
    """DeepSeek-V2/V3: multi-head latent attention in every layer, dense MLP in the first
    `first_k_dense_replace` layers, one shared expert in the rest (every token passes through it,
    so it is dense too). Routed experts are left out: each sees only its share of the tokens."""
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    kv_rank = cfg.int("kv_lora_rank")
    nope, rope = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim")
    v_dim = cfg.int("v_head_dim")
    dense_layers = min(cfg.int("first_k_dense_replace", 0, allow_zero=True), layers)
    vocab = cfg.int("vocab_size")
    attn = "model.layers.*.self_attn"
    linears = []
    if cfg.has("q_lora_rank"):  # V3: queries through a low-rank bottleneck
        q_rank = cfg.int("q_lora_rank")
        linears += [
            NamedLinear(f"{attn}.q_a_proj", hidden, q_rank, layers),
            NamedLinear(f"{attn}.q_b_proj", q_rank, heads * (nope + rope), layers),
        ]
    else:  # V2-Lite: q_lora_rank null, a plain q_proj
        linears.append(NamedLinear(f"{attn}.q_proj", hidden, heads * (nope + rope), layers))
    linears += [
        # the compressed kv latent and the shared rope key come out of one projection
        NamedLinear(f"{attn}.kv_a_proj_with_mqa", hidden, kv_rank + rope, layers),
        NamedLinear(f"{attn}.kv_b_proj", kv_rank, heads * (nope + v_dim), layers),
        NamedLinear(f"{attn}.o_proj", heads * v_dim, hidden, layers),
    ]
    if dense_layers:
        intermediate = cfg.int("intermediate_size")
        linears += [
            NamedLinear("model.layers.*.mlp.gate_proj", hidden, intermediate, dense_layers),
            NamedLinear("model.layers.*.mlp.up_proj", hidden, intermediate, dense_layers),
            NamedLinear("model.layers.*.mlp.down_proj", intermediate, hidden, dense_layers),
        ]
    moe_layers = layers - dense_layers
    shared = cfg.int("n_shared_experts", 0, allow_zero=True)
    if moe_layers and shared:
        width = shared * cfg.int("moe_intermediate_size")
        expert = "model.layers.*.mlp.shared_experts"
        linears += [
            NamedLinear(f"{expert}.gate_proj", hidden, width, moe_layers),
            NamedLinear(f"{expert}.up_proj", hidden, width, moe_layers),
            NamedLinear(f"{expert}.down_proj", width, hidden, moe_layers),
        ]
    linears.append(NamedLinear("lm_head", hidden, vocab, 1))
    note = ""
    if moe_layers and cfg.has("n_routed_experts"):
        note = (
            f"routed experts ({cfg.int('n_routed_experts')} per layer in {moe_layers} layers) "
            f"left out: each sees only its share of the tokens; the router and the "
            f"multi-token-prediction layer too"
        )
    return linears, note


def _parser_for(cfg: _Config) -> Callable[[_Config, str], tuple[list[NamedLinear], str]]:
    model_type = str(cfg.data.get("model_type", ""))
    if model_type == "gpt2" or (cfg.has("n_embd") and not cfg.has("hidden_size")):
        return _gpt2
    if model_type.startswith("deepseek") or cfg.has("kv_lora_rank"):
        return _deepseek_v3
    return _llama_style


def from_hf_config(
    config: str | Path | Mapping[str, Any], *, name: str | None = None, source: str | None = None
) -> Architecture:
    """A Hugging Face config.json (a path or the parsed dict) -> its linears."""
    if isinstance(config, Mapping):
        data, where = config, source or name or "config"
    else:
        path = Path(config)
        data = read_json(path, what="", error=ArchitectureError)
        if not isinstance(data, dict):
            raise ArchitectureError(f"{path}: expected a JSON object (a config.json)")
        where = str(path)
        name = name or data.get("_name_or_path") or path.parent.name or path.stem
        source = source or str(path)
    cfg = _Config(data, where)
    linears, note = _parser_for(cfg)(cfg, name or where)
    return Architecture(str(name or where), tuple(linears), source or where, note)


# --- built-in architectures ---------------------------------------------------------------------
# Each entry is the part of the model's published config.json that fixes its linear shapes,
# copied from the config.json on its Hugging Face hub page (cited per entry).

BUILTIN_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama3-8b": (
        "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_hidden_layers": 32,
            "vocab_size": 128256,
        },
    ),
    "llama3-70b": (
        "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
        {
            "model_type": "llama",
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "num_hidden_layers": 80,
            "vocab_size": 128256,
        },
    ),
    # Llama 3 had no 405B; it came with Llama 3.1 (same architecture, "The Llama 3 Herd of
    # Models", arXiv:2407.21783, table 3).
    "llama3-405b": (
        "https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json",
        {
            "model_type": "llama",
            "hidden_size": 16384,
            "intermediate_size": 53248,
            "num_attention_heads": 128,
            "num_key_value_heads": 8,
            "num_hidden_layers": 126,
            "vocab_size": 128256,
        },
    ),
    "mistral-7b": (
        "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
        {
            "model_type": "mistral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_hidden_layers": 32,
            "vocab_size": 32000,
        },
    ),
    "qwen2.5-7b": (
        "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json",
        {
            "model_type": "qwen2",
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "num_hidden_layers": 28,
            "vocab_size": 152064,
        },
    ),
    # GPT-2 small (124M); its vocabulary, 50257, is not a multiple of 16.
    "gpt2": (
        "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
        {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_head": 12,
            "n_layer": 12,
            "n_inner": None,
            "vocab_size": 50257,
        },
    ),
    # DeepSeek-V3 (671B, 37B active): MLA attention dims from the config.json and the
    # DeepSeek-V3 technical report (arXiv:2412.19437, section 4.2).
    "deepseek-v3": (
        "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        {
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "num_hidden_layers": 61,
            "first_k_dense_replace": 3,
            "n_shared_experts": 1,
            "n_routed_experts": 256,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "vocab_size": 129280,
        },
    ),
}

ALIASES = {
    "llama3.1-405b": "llama3-405b",
    "llama-3-8b": "llama3-8b",
    "llama-3-70b": "llama3-70b",
    "mistral-7b-v0.1": "mistral-7b",
    "qwen2.5-7b-instruct": "qwen2.5-7b",
    "gpt2-small": "gpt2",
    "deepseek-v3-dense": "deepseek-v3",
}

BUILTIN_NAMES = tuple(BUILTIN_CONFIGS)


def builtin(name: str) -> Architecture:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in BUILTIN_CONFIGS:
        raise ArchitectureError(
            f"unknown model {name!r}; known: {', '.join(BUILTIN_NAMES)} "
            f"(or the path of a Hugging Face config.json)"
        )
    url, config = BUILTIN_CONFIGS[key]
    return from_hf_config(config, name=key, source=url)


def resolve_model(text: str) -> Architecture:
    """A built-in name, or the path of a config.json (anything ending .json or an existing file)."""
    path = Path(text)
    if text.lower().endswith(".json") or path.is_file():
        if path.is_dir():
            path = path / "config.json"
        return from_hf_config(path)
    if path.is_dir() and (path / "config.json").is_file():
        return from_hf_config(path / "config.json")
    return builtin(text)


# --- torch.nn.Module ----------------------------------------------------------------------------

_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)")


def layer_type(fqn: str) -> str:
    """'model.layers.17.mlp.up_proj' -> 'model.layers.*.mlp.up_proj' (indices become '*')."""
    return _INDEX.sub("*", fqn)


def module_linears(model) -> dict[str, tuple[int, int]]:
    """Every nn.Linear (and subclass) of a module: fqn -> (K, N) = (in_features, out_features)."""
    import torch

    return {
        fqn: (module.in_features, module.out_features)
        for fqn, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }


def group_by_layer_type(linears: Mapping[str, tuple[int, int]]) -> dict[str, str]:
    """fqn -> the layer type it counts under: its pattern, with the shape appended where one
    pattern holds linears of different shapes (a stack of unequal layers)."""
    shapes: dict[str, set[tuple[int, int]]] = {}
    for fqn, shape in linears.items():
        shapes.setdefault(layer_type(fqn), set()).add(shape)
    out = {}
    for fqn, (K, N) in linears.items():
        pattern = layer_type(fqn)
        out[fqn] = pattern if len(shapes[pattern]) == 1 else f"{pattern}[{K}x{N}]"
    return out


def as_module(model):
    """An nn.Module as is; a zero-argument builder called on the meta device (parameters
    without storage: a 405B model costs nothing)."""
    import torch

    if isinstance(model, torch.nn.Module):
        return model
    if not callable(model):
        raise ArchitectureError(
            f"expected an nn.Module or a function building one, got {type(model).__name__}"
        )
    with torch.device("meta"):
        built = model()
    if not isinstance(built, torch.nn.Module):
        raise ArchitectureError(f"the builder returned {type(built).__name__}, not an nn.Module")
    return built


def from_module(model, *, name: str | None = None) -> Architecture:
    """An `nn.Module`, or a zero-argument function that builds one (called on the meta device,
    so a 405B model costs no memory), -> its linears grouped by layer type."""
    model = as_module(model)
    label = name or type(model).__name__
    linears = module_linears(model)
    if not linears:
        raise ArchitectureError(f"{label} has no nn.Linear modules: nothing to convert to float8")
    grouped: dict[str, NamedLinear] = {}
    for fqn, kind in group_by_layer_type(linears).items():
        K, N = linears[fqn]
        count = grouped[kind].count + 1 if kind in grouped else 1
        grouped[kind] = NamedLinear(kind, K, N, count)
    return Architecture(label, tuple(grouped.values()), source=f"nn.Module {type(model).__name__}")
