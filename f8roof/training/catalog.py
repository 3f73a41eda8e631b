"""Model architectures -> their linears: fully qualified name, K, N and how many there are.

Three ways in, all giving an `Architecture` (a tuple of `NamedLinear`, M = tokens per step):
- `BUILTIN`: published dimensions of well-known models, kept as the subset of each model's
  Hugging Face `config.json` that fixes its linear shapes (the source is cited per entry);
- `from_hf_config`: any Hugging Face `config.json` (llama-style, GPT-2, DeepSeek-V3 MLA);
- `from_module`: any `torch.nn.Module`, by walking its `nn.Linear` modules.

A layer type stands for all its repeats: its fqn has `*` where the layer index goes
(`model.layers.*.self_attn.q_proj`) and `count` says how many there are. Each linear also says
how tensor parallelism shards it (`tp`, torchtitan's plans: see `TPStyle`) and, for the routed
experts of an MoE layer, how many experts share the layer's tokens (`routed`): one row stands
for the grouped gemm of all of them, `count` for the MoE layers. `f8roof.training.parallel` turns both into
the local (M, K, N) each GPU runs. No torch import at module level: only `from_module` needs it.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from f8roof.errors import F8RoofError, term
from f8roof.files import read_json
from f8roof.inputs.shapes import MAX_DIM
from f8roof.notes import Note, Topic, note
from f8roof.traffic.variant import Before, Context

if TYPE_CHECKING:
    import torch


class ArchitectureError(F8RoofError):
    """An unknown model, a config.json that lacks a field, a module without linears."""


class TPStyle(str, Enum):
    """How tensor parallelism splits a linear's weight (N, K) over the TP ranks.

    torchtitan's plans (and Megatron's): a column-parallel linear shards the weight's rows, so
    each rank computes N / tp of the outputs from the whole input (q/k/v, gate/up, GPT-2's
    c_attn and c_fc, DeepSeek's q_b_proj and kv_b_proj, and lm_head: torchtitan's `output` is
    ColwiseParallel, the vocabulary sharded, with loss parallel); a row-parallel linear shards
    the weight's columns, so each rank reduces over K / tp and the partial outputs are summed
    (o_proj, down_proj, GPT-2's c_proj). Replicated linears run whole on every rank (DeepSeek's
    low-rank q_a_proj and kv_a_proj_with_mqa: torchtitan's NoParallel). Under sequence
    parallelism every rank still sees all the step's tokens (the sequence is all-gathered
    before a column-parallel linear), so M is not divided.
    """

    COLUMN = "column"
    ROW = "row"
    REPLICATED = "replicated"


MAX_EXPERTS = 2**20


@dataclass(frozen=True)
class RoutedExperts:
    """The routed experts of an MoE layer: `experts` of them, each token goes to `top_k`."""

    experts: int
    top_k: int

    def __post_init__(self) -> None:
        for name in ("experts", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArchitectureError(f"{name} must be a positive integer (got {value!r})")
        if self.top_k > self.experts:
            raise ArchitectureError(
                f"top_k {self.top_k} exceeds the {self.experts} experts it chooses from"
            )
        if self.experts > MAX_EXPERTS:
            raise ArchitectureError(
                f"{self.experts} routed experts per layer exceed {MAX_EXPERTS} (2**20, the "
                "million experts of PEER, the most any published MoE has)"
            )


@dataclass(frozen=True)
class NamedLinear:
    """One linear layer type: input (M, K) @ weight (N, K).T, repeated `count` times per step.

    `routed` set: the routed experts of an MoE layer, one grouped gemm per layer whose every
    expert has this (K, N); `count` is then the number of MoE layers."""

    fqn: str
    K: int
    N: int
    count: int = 1
    tp: TPStyle = TPStyle.REPLICATED
    routed: RoutedExperts | None = None
    context: Context = field(default_factory=Context)  # its input's op (see input_context)
    # attention heads its sharded dim holds (N column-parallel, K row-parallel; the fused
    # wqkv: its kv groups, a group's q heads, k and v together); 0: not attention, or unknown.
    # TP shards whole heads, so a degree must divide them.
    heads: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads < 0:
            raise ArchitectureError(
                f"linear {self.fqn}: heads must be a non-negative integer (got {self.heads!r})"
            )
        for name in ("K", "N", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArchitectureError(
                    f"linear {self.fqn}: {name} must be a positive integer (got {value!r})"
                )
        if not isinstance(self.tp, TPStyle):
            raise ArchitectureError(f"linear {self.fqn}: tp must be a TPStyle (got {self.tp!r})")

    @property
    def grouped(self) -> bool:
        return self.routed is not None


@dataclass(frozen=True)
class Architecture:
    name: str
    linears: tuple[NamedLinear, ...]
    source: str = ""  # where the dimensions come from
    notes: tuple[Note, ...] = ()  # what is left out (routers, ...) or defaulted
    # the config.json's model_type (its text config's: llama4_text), which decides the module
    # names torchtitan gives these linears (training/torchtitan_names.py); "" for a module's
    # own linears, named as the module names them
    family: str = ""

    def __post_init__(self) -> None:
        if not self.linears:
            raise ArchitectureError(f"{self.name}: no linear layers")
        fqns = [linear.fqn for linear in self.linears]
        if len(set(fqns)) != len(fqns):
            raise ArchitectureError(f"{self.name}: a linear fqn appears twice")

    def shapes(self, tokens: int) -> list[tuple[int, int, int]]:
        """(M, K, N) per layer type, M = tokens per step, on one GPU without parallelism and
        without routing (a routed expert's M is its share: see `f8roof.training.parallel.local_layers`)."""
        M = check_tokens(tokens)
        return [(M, linear.K, linear.N) for linear in self.linears]

    @property
    def linear_count(self) -> int:
        """Linear modules, each routed expert counted once per layer."""
        return sum(linear.count * _experts(linear) for linear in self.linears)

    @property
    def parameter_count(self) -> int:
        """Weights of the linears only (no embeddings, norms or biases), every expert included."""
        return sum(linear.K * linear.N * linear.count * _experts(linear) for linear in self.linears)

    @property
    def is_moe(self) -> bool:
        return any(linear.grouped for linear in self.linears)


def _experts(linear: NamedLinear) -> int:
    return linear.routed.experts if linear.routed else 1


def check_tokens(tokens: Any) -> int:
    """Tokens per step (M): a positive integer no larger than any shape dimension may be."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        raise ArchitectureError(f"tokens per step must be a positive integer (got {tokens!r})")
    if tokens > MAX_DIM:
        raise ArchitectureError(f"tokens per step {tokens} exceeds {MAX_DIM} (2**31-1)")
    return tokens


# --- Hugging Face config.json -------------------------------------------------------------------


class _Config:
    """Typed access to a config.json; a missing or bad field is named with the file."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data, self.source = data, source

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int(
        self,
        key: str,
        default: builtins.int | None = None,
        *,
        allow_zero: bool = False,
        null_ok: bool = True,
    ) -> builtins.int:
        """`key`'s positive integer, or `default` where it is absent (or null, unless not
        `null_ok`: a count whose null transformers would not replace by its default)."""
        value = self.data.get(key)
        if value is None and key in self.data and not null_ok:
            raise ArchitectureError(f"{self.source}: {key} is null: give its number")
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

    def int_list(self, key: str) -> list[builtins.int] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
        ):
            raise ArchitectureError(
                f"{self.source}: {key} must be a list of layer indices (got {value!r})"
            )
        return value

    def routed(
        self,
        experts_key: str,
        *,
        experts: builtins.int | None = None,
        top_k: builtins.int | None = None,
    ) -> RoutedExperts:
        """The routed experts; `experts`, `top_k`: the model's defaults for absent fields."""
        experts = self.int(experts_key, experts, null_ok=False)
        top_k = self.int("num_experts_per_tok", top_k, null_ok=False)
        try:
            return RoutedExperts(experts, top_k)
        except ArchitectureError as e:
            raise ArchitectureError(f"{self.source}: {e.message}") from None


COLUMN, ROW, REPLICATED = TPStyle.COLUMN, TPStyle.ROW, TPStyle.REPLICATED
MIXTRAL_EXPERTS, MIXTRAL_TOP_K = 8, 2  # transformers' MixtralConfig defaults


def _attention(cfg: _Config, prefix: str, layers: int) -> list[NamedLinear]:
    """q/k/v (column-parallel) and o (row-parallel) of grouped-query attention."""
    hidden = cfg.int("hidden_size")
    heads = cfg.int("num_attention_heads")
    # HF's convention: no num_key_value_heads means multi-head attention (as many kv as q heads);
    # no head_dim means hidden_size / num_attention_heads.
    kv_heads = cfg.int("num_key_value_heads", heads)
    if not cfg.has("head_dim") and hidden % heads:
        raise ArchitectureError(
            f"{cfg.source}: hidden_size {hidden} is not divisible by num_attention_heads "
            f"{heads}, and no head_dim says the heads' width"
        )
    if heads % kv_heads:
        raise ArchitectureError(
            f"{cfg.source}: num_attention_heads {heads} is not divisible by "
            f"num_key_value_heads {kv_heads}"
        )
    head_dim = cfg.int("head_dim", hidden // heads)
    return [
        NamedLinear(f"{prefix}.q_proj", hidden, heads * head_dim, layers, COLUMN, heads=heads),
        NamedLinear(
            f"{prefix}.k_proj", hidden, kv_heads * head_dim, layers, COLUMN, heads=kv_heads
        ),
        NamedLinear(
            f"{prefix}.v_proj", hidden, kv_heads * head_dim, layers, COLUMN, heads=kv_heads
        ),
        NamedLinear(f"{prefix}.o_proj", heads * head_dim, hidden, layers, ROW, heads=heads),
    ]


def _mlp(
    prefix: str,
    hidden: int,
    width: int,
    count: int,
    routed: RoutedExperts | None = None,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
) -> list[NamedLinear]:
    """A SwiGLU MLP (gate and up column-parallel, down row-parallel); with `routed`, the
    routed experts of `count` MoE layers (each expert one such MLP, all of them one grouped
    gemm per projection)."""
    gate, up, down = names
    return [
        NamedLinear(f"{prefix}.{gate}", hidden, width, count, COLUMN, routed),
        NamedLinear(f"{prefix}.{up}", hidden, width, count, COLUMN, routed),
        NamedLinear(f"{prefix}.{down}", width, hidden, count, ROW, routed),
    ]


def _moe_layer_count(cfg: _Config, layers: int, *, step_key: str, only_dense_key: str) -> int:
    """Qwen-MoE's rule (transformers' Qwen2/3-MoE): layer i is sparse unless listed in
    `mlp_only_layers`, and only when (i + 1) is a multiple of `decoder_sparse_step`."""
    step = cfg.int(step_key, 1)
    dense = set(cfg.int_list(only_dense_key) or [])
    return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)


def _llama_style(cfg: _Config, name: str) -> tuple[list[NamedLinear], list[Note]]:
    """Llama, Mistral, Qwen2 and friends: q/k/v/o, gate/up/down per layer, then lm_head.
    Mixtral (`num_local_experts`) and Qwen2/3-MoE (`num_experts`) route their MLPs."""
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers")
    vocab = cfg.int("vocab_size")
    linears = _attention(cfg, "model.layers.*.self_attn", layers)
    notes: list[Note] = []
    # transformers' MixtralConfig defaults: num_local_experts=8, num_experts_per_tok=2
    # (transformers/models/mixtral/configuration_mixtral.py); a Mixtral config.json may omit them
    mixtral = cfg.data.get("model_type") == "mixtral"
    defaults = {"experts": MIXTRAL_EXPERTS, "top_k": MIXTRAL_TOP_K} if mixtral else {}
    # Mixtral's fields checked whenever given (top_k within the experts, none null), so a
    # one-expert Mixtral routing to two is refused, not read as a dense MLP
    routes = mixtral or "num_local_experts" in cfg.data
    if routes and cfg.routed("num_local_experts", **defaults).experts > 1:
        # Mixtral: every layer's MLP is routed; experts are w1 (gate), w3 (up), w2 (down).
        routed = cfg.routed("num_local_experts", **defaults)
        linears += _mlp(
            "model.layers.*.block_sparse_moe.experts.*",
            hidden,
            cfg.int("intermediate_size"),
            layers,
            routed,
            names=("w1", "w3", "w2"),
        )
        notes.append(note(Topic.LEFT_OUT, modules=["routers (block_sparse_moe.gate)"]))
        absent = [k for k in ("num_local_experts", "num_experts_per_tok") if not cfg.has(k)]
        if mixtral and absent:
            notes.append(
                note(
                    Topic.CONFIG_DEFAULTS,
                    keys=absent,
                    config="transformers' MixtralConfig",
                    values=[MIXTRAL_EXPERTS, MIXTRAL_TOP_K],
                )
            )
    elif cfg.int("num_experts", 0, allow_zero=True, null_ok=False) > 1:
        routed = cfg.routed("num_experts")
        moe_layers = _moe_layer_count(
            cfg, layers, step_key="decoder_sparse_step", only_dense_key="mlp_only_layers"
        )
        if moe_layers < layers:
            linears += _mlp(
                "model.layers.*.mlp", hidden, cfg.int("intermediate_size"), layers - moe_layers
            )
        if moe_layers:
            width = cfg.int("moe_intermediate_size")
            linears += _mlp("model.layers.*.mlp.experts.*", hidden, width, moe_layers, routed)
            shared = cfg.int("shared_expert_intermediate_size", 0, allow_zero=True)
            if shared:  # Qwen2-MoE: a shared expert every token passes through (dense)
                linears += _mlp("model.layers.*.mlp.shared_expert", hidden, shared, moe_layers)
        qwen3 = str(cfg.data.get("model_type", "")).startswith("qwen3")
        gate = "moe.router.gate" if qwen3 else "mlp.gate"  # torchtitan's name for qwen3's
        notes.append(note(Topic.LEFT_OUT, modules=[f"routers ({gate})"]))
    else:
        linears += _mlp("model.layers.*.mlp", hidden, cfg.int("intermediate_size"), layers)
    linears.append(NamedLinear("lm_head", hidden, vocab, 1, COLUMN))
    if str(cfg.data.get("model_type", "")).startswith("qwen3"):
        # Qwen3's q_norm and k_norm: an RMSNorm per head on q and k after their projections,
        # before attention (transformers' Qwen3Attention; torchtitan's qwen3 qk_norm)
        notes.append(note(Topic.QK_NORM, modules=["attention.q_norm", "attention.k_norm"]))
        linears = [replace(lin, fqn=torchtitan_qwen3_fqn(lin.fqn)) for lin in linears]
    return linears, notes


# torchtitan's qwen3 modules as its 2026-05 model builds them (pytorch/torchtitan@b64292ba1,
# 2026-05-15, the commit the public Qwen3-14B B200 run branched from: torchtitan/models/qwen3/
# __init__.py, models/common/attention.py, config_utils.py, moe.py): GQAttention's
# `qkv_linear` is QKVLinear (every qwen3 flavor but debugmodel_fused_qkv builds with
# fuse_qkv=False), whose `wq` and whose `wk` and `wv`, two nn.Linear of kv_heads x head_dim
# each, both built from its one `wkv` config; `wo`; q_norm and k_norm (RMSNorm per head)
# between the projections and attention; FeedForward w1 = gate, w3 = up, w2 = down; an MoE
# block's `moe.experts` (GroupedExperts: w1, w3, w2 as 3D parameters) and `moe.router.gate`,
# no shared experts; `lm_head` (tied to the embedding in 0.6B-4B only). torchtitan fused q, k
# and v into one `wqkv` by default from #3714 (2026-06-24) on.
_TORCHTITAN_QWEN3 = {
    "self_attn.q_proj": "attention.qkv_linear.wq",
    "self_attn.k_proj": "attention.qkv_linear.wk",
    "self_attn.v_proj": "attention.qkv_linear.wv",
    "self_attn.o_proj": "attention.wo",
    "mlp.gate_proj": "feed_forward.w1",
    "mlp.up_proj": "feed_forward.w3",
    "mlp.down_proj": "feed_forward.w2",
    "mlp.experts.*.gate_proj": "moe.experts.w1",
    "mlp.experts.*.up_proj": "moe.experts.w3",
    "mlp.experts.*.down_proj": "moe.experts.w2",
    # a shared expert (Qwen2-MoE's field, should a qwen3_moe config.json carry it): models/
    # common/moe.py's shared_experts FeedForward
    "mlp.shared_expert.gate_proj": "moe.shared_experts.w1",
    "mlp.shared_expert.up_proj": "moe.shared_experts.w3",
    "mlp.shared_expert.down_proj": "moe.shared_experts.w2",
}


def torchtitan_qwen3_fqn(fqn: str) -> str:
    """A Qwen3 linear's Hugging Face name -> torchtitan's module fqn (`model.layers.*.mlp.up_proj`
    -> `layers.*.feed_forward.w3`); lm_head as it is."""
    block, _, leaf = fqn.partition(".*.") if fqn.startswith("model.layers.") else ("", "", fqn)
    return f"layers.*.{_TORCHTITAN_QWEN3[leaf]}" if block else fqn


# torchtitan's fused q/k/v projection (pytorch/torchtitan@3396a4b37, #3714, 2026-06-24: "Enable
# Fused qkv by default" for llama3, qwen3 and gpt-oss; torchtitan/models/common/attention.py's
# FusedQKVLinear, config_utils.py's make_gqa_config(fuse_qkv=True)): one nn.Linear `wqkv` of
# (heads + 2 kv_heads) x head_dim outputs in place of wq, wk and wv, its weight laid out per kv
# group (kv_heads x (heads / kv_heads + 2) x head_dim rows: the group's q heads, its k, its
# v), so ColwiseParallel's Shard(0) gives each TP rank whole groups (decoder_sharding.py's
# set_qkv_linear_sharding at HEAD b5bcd76c6) and FSDP2 shards dim 0 as any weight (#3807
# gathers it only to split a checkpoint: #3656 and #3728's state_dict hooks save and load it
# as the stock wq, wk, wv, which no training step runs). torchtitan's float8 converter swaps
# its one Linear.Config (components/quantization/float8.py: traverse(Linear.Config)): one
# Float8Linear, one input cast, one gemm. The switch back is the model builder's `fuse_qkv=False` (a Python
# argument, no config key: qwen3's debugmodel_non_fused_qkv flavor). Before #3714 every llama3
# and qwen3 flavor built QKVLinear (wq, and wk, wv from one `wkv` config: two linears).
FUSED_QKV = "attention.qkv_linear.wqkv"
FUSED_QKV_FAMILIES = ("llama", "qwen3", "qwen3_moe")  # torchtitan's llama3 and qwen3
_QKV_LEAVES = (
    ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    ("attention.qkv_linear.wq", "attention.qkv_linear.wk", "attention.qkv_linear.wv"),
)


_BLOCK_LEAF = re.compile(r"^(?:model\.)?layers\.(\*|\d+(?:-\d+)?)\.(.+)$")


def fused_fqn(fqn: str) -> str:
    """The row a linear of the separate layout is part of in the fused one: q, k and v's
    (`model.layers.0-26.self_attn.k_proj`) -> `layers.0-26.attention.qkv_linear.wqkv`, the
    block index or range kept; any other linear itself."""
    m = _BLOCK_LEAF.match(fqn)
    if m is None or not any(m.group(2) in names for names in _QKV_LEAVES):
        return fqn
    return f"layers.{m.group(1)}.{FUSED_QKV}"


def fuse_qkv(architecture: Architecture) -> Architecture:
    """The architecture as torchtitan's fused layout builds it: each block's q, k and v
    projections one column-parallel row `layers.*.attention.qkv_linear.wqkv` in q's place, N =
    (heads + 2 kv_heads) x head_dim, its heads the kv groups (TP shards whole groups), its
    input q's (the attention norm's output); an architecture fused already as it is. Refused
    for a model torchtitan does not fuse."""
    if architecture.family not in FUSED_QKV_FAMILIES:
        raise ArchitectureError(
            f"{term('fuse_qkv')}: torchtitan fuses q, k and v in its llama3 and qwen3 models "
            f"only, not {architecture.name} ({architecture.family or 'a module'})"
        )
    leaves = {lin.fqn.partition(".*.")[2]: lin for lin in architecture.linears}
    if FUSED_QKV in leaves:
        return architecture
    found = next((names for names in _QKV_LEAVES if all(n in leaves for n in names)), None)
    if found is None:
        raise ArchitectureError(f"{architecture.name}: no q, k and v projections to fuse")
    q, k, v = (leaves[n] for n in found)
    fused = replace(q, fqn=f"layers.*.{FUSED_QKV}", N=q.N + k.N + v.N, heads=k.heads)
    apart = {q.fqn, k.fqn, v.fqn}
    linears = [
        fused if lin is q else lin
        for lin in architecture.linears
        if lin is q or lin.fqn not in apart
    ]
    return replace(architecture, linears=tuple(linears))


def _llama4(cfg: _Config, name: str) -> tuple[list[NamedLinear], list[Note]]:
    """Llama 4 (the text model): grouped-query attention in every layer; MoE layers (every
    `interleave_moe_layer_step`-th, or those listed in `moe_layers`) hold routed experts of
    width `intermediate_size`, stored fused as gate_up_proj (E, hidden, 2 x width) and
    down_proj, plus one shared expert of the same width every token passes through; the other
    layers a dense MLP of width `intermediate_size_mlp` (transformers' Llama4TextConfig)."""
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers")
    vocab = cfg.int("vocab_size")
    linears = _attention(cfg, "model.layers.*.self_attn", layers)
    routed = cfg.routed("num_local_experts")
    listed = cfg.int_list("moe_layers")
    if listed is not None:
        moe_layers = len({i for i in listed if i < layers})
    else:
        step = cfg.int("interleave_moe_layer_step", 1)
        moe_layers = len(range(step - 1, layers, step))
    if moe_layers < layers:
        linears += _mlp(
            "model.layers.*.feed_forward",
            hidden,
            cfg.int("intermediate_size_mlp"),
            layers - moe_layers,
        )
    if moe_layers:
        width = cfg.int("intermediate_size")
        experts = "model.layers.*.feed_forward.experts"
        linears += [
            NamedLinear(f"{experts}.gate_up_proj", hidden, 2 * width, moe_layers, COLUMN, routed),
            NamedLinear(f"{experts}.down_proj", width, hidden, moe_layers, ROW, routed),
        ]
        linears += _mlp("model.layers.*.feed_forward.shared_expert", hidden, width, moe_layers)
    linears.append(NamedLinear("lm_head", hidden, vocab, 1, COLUMN))
    return linears, [note(Topic.LEFT_OUT, modules=["routers (feed_forward.router)"])]


def _gpt2(cfg: _Config, name: str) -> tuple[list[NamedLinear], list[Note]]:
    """GPT-2: fused qkv (c_attn), c_proj, c_fc, mlp c_proj, lm_head (tied to the embedding)."""
    hidden = cfg.int("n_embd")
    layers = cfg.int("n_layer")
    n_head = cfg.int("n_head")
    if hidden % n_head:
        raise ArchitectureError(
            f"{cfg.source}: n_embd {hidden} is not divisible by n_head {n_head}"
        )
    inner = cfg.int("n_inner", 4 * hidden)  # HF: n_inner null means 4 * n_embd
    vocab = cfg.int("vocab_size")
    block = "transformer.h.*"
    # HF's GPT2 implements these as Conv1D (weight stored (K, N)), which torchao does not
    # convert; nanoGPT and most training code use nn.Linear with the same names and shapes.
    return [
        NamedLinear(f"{block}.attn.c_attn", hidden, 3 * hidden, layers, COLUMN, heads=n_head),
        NamedLinear(f"{block}.attn.c_proj", hidden, hidden, layers, ROW, heads=n_head),
        NamedLinear(f"{block}.mlp.c_fc", hidden, inner, layers, COLUMN),
        NamedLinear(f"{block}.mlp.c_proj", inner, hidden, layers, ROW),
        NamedLinear("lm_head", hidden, vocab, 1, COLUMN),
    ], []


def _deepseek_v3(cfg: _Config, name: str) -> tuple[list[NamedLinear], list[Note]]:
    """DeepSeek-V2/V3: multi-head latent attention in every layer; a dense MLP in the first
    `first_k_dense_replace` layers (and any layer `moe_layer_freq` skips), in the rest routed
    experts of width `moe_intermediate_size` plus `n_shared_experts` shared ones every token
    passes through (one dense MLP of n_shared x that width). TP as torchtitan's DeepSeek-V3
    plan: the low-rank down-projections q_a_proj and kv_a_proj_with_mqa replicated, the
    up-projections column-parallel, o_proj row-parallel."""
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    kv_rank = cfg.int("kv_lora_rank")
    nope, rope = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim")
    v_dim = cfg.int("v_head_dim")
    first_dense = min(cfg.int("first_k_dense_replace", 0, allow_zero=True), layers)
    vocab = cfg.int("vocab_size")
    attn = "model.layers.*.self_attn"
    linears = []
    if cfg.has("q_lora_rank"):  # V3: queries through a low-rank bottleneck
        q_rank = cfg.int("q_lora_rank")
        linears += [
            NamedLinear(f"{attn}.q_a_proj", hidden, q_rank, layers, REPLICATED),
            NamedLinear(
                f"{attn}.q_b_proj", q_rank, heads * (nope + rope), layers, COLUMN, heads=heads
            ),
        ]
    else:  # V2-Lite: q_lora_rank null, a plain q_proj
        linears.append(
            NamedLinear(
                f"{attn}.q_proj", hidden, heads * (nope + rope), layers, COLUMN, heads=heads
            )
        )
    linears += [
        # the compressed kv latent and the shared rope key come out of one projection
        NamedLinear(f"{attn}.kv_a_proj_with_mqa", hidden, kv_rank + rope, layers, REPLICATED),
        NamedLinear(
            f"{attn}.kv_b_proj", kv_rank, heads * (nope + v_dim), layers, COLUMN, heads=heads
        ),
        NamedLinear(f"{attn}.o_proj", heads * v_dim, hidden, layers, ROW, heads=heads),
    ]
    # transformers' DeepseekV3: layer i is MoE when i >= first_k_dense_replace and
    # i % moe_layer_freq == 0 (and the config has routed experts at all).
    has_experts = cfg.int("n_routed_experts", 0, allow_zero=True) > 0
    freq = cfg.int("moe_layer_freq", 1)
    moe_layers = sum(1 for i in range(first_dense, layers) if i % freq == 0) if has_experts else 0
    if layers - moe_layers:
        linears += _mlp(
            "model.layers.*.mlp", hidden, cfg.int("intermediate_size"), layers - moe_layers
        )
    notes: list[Note] = []
    if moe_layers:
        width = cfg.int("moe_intermediate_size")
        routed = cfg.routed("n_routed_experts")
        linears += _mlp("model.layers.*.mlp.experts.*", hidden, width, moe_layers, routed)
        shared = cfg.int("n_shared_experts", 0, allow_zero=True)
        if shared:
            linears += _mlp("model.layers.*.mlp.shared_experts", hidden, shared * width, moe_layers)
        notes.append(
            note(Topic.LEFT_OUT, modules=["routers (mlp.gate)", "multi-token-prediction layer"])
        )
    linears.append(NamedLinear("lm_head", hidden, vocab, 1, COLUMN))
    return linears, notes


def _parser_for(cfg: _Config) -> Callable[[_Config, str], tuple[list[NamedLinear], list[Note]]]:
    model_type = str(cfg.data.get("model_type", ""))
    if model_type == "gpt2" or (cfg.has("n_embd") and not cfg.has("hidden_size")):
        return _gpt2
    if model_type.startswith("deepseek") or cfg.has("kv_lora_rank"):
        return _deepseek_v3
    if model_type.startswith("llama4") or cfg.has("intermediate_size_mlp"):
        return _llama4
    return _llama_style


def _text_config(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal configs (Llama 4) keep the language model's fields under `text_config`."""
    text = data.get("text_config")
    if isinstance(text, Mapping) and not data.get("hidden_size"):
        return text
    return data


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
        # the model it names (a Hugging Face repository id), else the file: never its folder,
        # which may be named anything (another model's name too)
        named = data.get("_name_or_path")
        name = name or (named if isinstance(named, str) and named.strip() else str(path))
        source = source or str(path)
    cfg = _Config(_text_config(data), where)
    parser = _parser_for(cfg)
    linears, notes = parser(cfg, name or where)
    norm = Before.LAYERNORM if parser is _gpt2 else Before.RMSNORM
    linears = [
        replace(lin, context=input_context(lin.fqn, norm=norm, routed=lin.grouped))
        for lin in linears
    ]
    family = str(cfg.data.get("model_type", ""))
    return Architecture(str(name or where), tuple(linears), source or where, tuple(notes), family)


# The op producing a linear's input in the pre-norm transformers f8roof knows, by the linear's
# name: the block's norm (RMSNorm in llama-style models, LayerNorm in GPT-2) before attention's
# input projections, the MLP's up projections and lm_head (the final norm); the latent's own
# RMSNorm before DeepSeek's q_b/kv_b; silu(gate) * up before a SwiGLU down projection; GELU
# before GPT-2's MLP c_proj. Attention outputs come from the attention kernel and routed
# experts' inputs from the token permutation: nothing there a cast could fuse into.
# torchtitan's names for the same places: attention_norm -> attention.wq/wk/wv (or the fused
# qkv_linear.wqkv), ffn_norm ->
# feed_forward.w1/w3, norm -> output; DeepSeek's wq_a/wkv_a after the block's norm and
# wq_b/wkv_b after q_norm/kv_norm (torchtitan/models/llama3/model.py, deepseek_v3/model.py).
_FROM_NORM = {
    "q_proj",
    "wqkv",
    "k_proj",
    "v_proj",
    "wq",
    "wk",
    "wv",
    "gate_proj",
    "up_proj",
    "w1",
    "w3",
    "gate_up_proj",
    "q_a_proj",
    "kv_a_proj_with_mqa",
    "wq_a",
    "wkv_a",
    "c_attn",
    "c_fc",
    "lm_head",
    "output",
}
_FROM_LATENT_NORM = {"q_b_proj", "kv_b_proj", "wq_b", "wkv_b"}
_FROM_SILU_MUL = {"down_proj", "w2"}


def input_context(fqn: str, *, norm: Before, routed: bool = False) -> Context:
    """The context of a linear named `fqn` (see above); `Context()` for names it does not know."""
    parts = fqn.split(".")
    name, parent = parts[-1], parts[-2] if len(parts) > 1 else ""
    if routed:
        return Context()
    if name in _FROM_NORM:
        return Context(norm)
    if name in _FROM_LATENT_NORM:
        return Context(Before.RMSNORM)
    if name in _FROM_SILU_MUL:
        return Context(Before.SILU_MUL)
    if name == "c_proj" and parent == "mlp":
        return Context(Before.GELU)
    return Context()


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
    # DeepSeek-V3 technical report (arXiv:2412.19437, section 4.2); 256 routed experts, 8 per
    # token, in layers 3..60.
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
            "num_experts_per_tok": 8,
            "moe_layer_freq": 1,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "vocab_size": 129280,
        },
    ),
    # DeepSeek-V2-Lite (15.7B, 2.4B active): the dimensions of torchtitan's "16B" DeepSeek-V3
    # flavor (the model of torchtitan#2086's 0.95x MoE layer on B200).
    "deepseek-v2-lite": (
        "https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json",
        {
            "model_type": "deepseek_v2",
            "hidden_size": 2048,
            "intermediate_size": 10944,
            "moe_intermediate_size": 1408,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "num_hidden_layers": 27,
            "first_k_dense_replace": 1,
            "moe_layer_freq": 1,
            "n_shared_experts": 2,
            "n_routed_experts": 64,
            "num_experts_per_tok": 6,
            "q_lora_rank": None,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "vocab_size": 102400,
        },
    ),
    "mixtral-8x7b": (
        "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_hidden_layers": 32,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
        },
    ),
    # Qwen3 dense: head_dim 128 whatever the width, so q's output (heads x 128) is not
    # hidden_size in qwen3-32b (64 x 128 = 8192 from 5120); q and k pass a per-head RMSNorm
    # before attention (QK_NORM). The same numbers as torchtitan's qwen3 flavors "8B", "14B",
    # "32B" (pytorch/torchtitan@238fa9953 torchtitan/models/qwen3/__init__.py).
    "qwen3-8b": (
        "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
        {
            "model_type": "qwen3",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 36,
            "vocab_size": 151936,
        },
    ),
    "qwen3-14b": (
        "https://huggingface.co/Qwen/Qwen3-14B/blob/main/config.json",
        {
            "model_type": "qwen3",
            "hidden_size": 5120,
            "intermediate_size": 17408,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 40,
            "vocab_size": 151936,
        },
    ),
    "qwen3-32b": (
        "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
        {
            "model_type": "qwen3",
            "hidden_size": 5120,
            "intermediate_size": 25600,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 64,
            "vocab_size": 151936,
        },
    ),
    # Qwen3 MoE: 128 routed experts, 8 per token, in every layer, no shared expert (torchtitan's
    # "30B-A3B" and "235B-A22B": num_shared_experts=0)
    "qwen3-30b-a3b": (
        "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        {
            "model_type": "qwen3_moe",
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_hidden_layers": 48,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "vocab_size": 151936,
        },
    ),
    "qwen3-235b-a22b": (
        "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json",
        {
            "model_type": "qwen3_moe",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_hidden_layers": 94,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "vocab_size": 151936,
        },
    ),
    # Llama 4 configs nest the language model under text_config (the vision tower is not
    # modelled). Scout: every layer MoE (16 experts, top 1) with a shared expert.
    "llama4-scout": (
        "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E/blob/main/config.json",
        {
            "model_type": "llama4",
            "text_config": {
                "model_type": "llama4_text",
                "hidden_size": 5120,
                "intermediate_size": 8192,
                "intermediate_size_mlp": 16384,
                "num_attention_heads": 40,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "num_hidden_layers": 48,
                "num_local_experts": 16,
                "num_experts_per_tok": 1,
                "interleave_moe_layer_step": 1,
                "vocab_size": 202048,
            },
        },
    ),
    # Maverick: MoE every second layer (128 experts, top 1), dense MLPs in between.
    "llama4-maverick": (
        "https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E/blob/main/config.json",
        {
            "model_type": "llama4",
            "text_config": {
                "model_type": "llama4_text",
                "hidden_size": 5120,
                "intermediate_size": 8192,
                "intermediate_size_mlp": 16384,
                "num_attention_heads": 40,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "num_hidden_layers": 48,
                "num_local_experts": 128,
                "num_experts_per_tok": 1,
                "interleave_moe_layer_step": 2,
                "vocab_size": 202048,
            },
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
    "deepseek-v3-16b": "deepseek-v2-lite",
    "mixtral-8x7b-v0.1": "mixtral-8x7b",
    "llama-4-scout": "llama4-scout",
    "llama-4-maverick": "llama4-maverick",
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


def as_module(model: object) -> torch.nn.Module:
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


# Module names -> how torchtitan's and Megatron's TP plans (and Hugging Face's `base_model_tp_plan`
# for the same names) shard them: llama/Mistral/Qwen (q/k/v/o, gate/up/down), torchtitan's
# own (wq/wk/wv/wo, w1/w3/w2, output), GPT-2 (c_attn, c_fc, c_proj), DeepSeek MLA (q_a/kv_a
# replicated, q_b/kv_b column), Llama 4 (gate_up_proj), nn.TransformerEncoderLayer (linear1,
# linear2, out_proj) and fc1/fc2 MLPs.
TP_PLAN: dict[str, TPStyle] = {
    **dict.fromkeys(
        [
            "q_proj",
            "k_proj",
            "v_proj",
            "qkv_proj",
            "gate_proj",
            "up_proj",
            "gate_up_proj",
            "c_attn",
            "c_fc",
            "w1",
            "w3",
            "wq",
            "wk",
            "wv",
            "wqkv",
            "q_b_proj",
            "kv_b_proj",
            "wq_b",
            "wkv_b",
            "lm_head",
            "output",
            "linear1",
            "fc1",
            "query_key_value",
            "dense_h_to_4h",
        ],
        TPStyle.COLUMN,
    ),
    **dict.fromkeys(
        [
            "o_proj",
            "down_proj",
            "c_proj",
            "w2",
            "wo",
            "out_proj",
            "linear2",
            "fc2",
            "dense_4h_to_h",
        ],
        TPStyle.ROW,
    ),
    **dict.fromkeys(
        ["q_a_proj", "kv_a_proj_with_mqa", "wq_a", "wkv_a", "gate", "router"], TPStyle.REPLICATED
    ),
}


def check_tp_plan(plan: Mapping[str, TPStyle | str] | None, fqns) -> None:
    """Refuse a tp_plan entry that would be ignored: a style other than column, row or
    replicated, or a suffix that names none of the model's linears."""
    for suffix, style in (plan or {}).items():
        try:
            TPStyle(style)
        except ValueError:
            raise ArchitectureError(
                f"tp_plan {suffix!r}: {style!r} is not one of column, row, replicated"
            ) from None
        if not any(f == suffix or f.endswith("." + suffix) for f in fqns):
            raise ArchitectureError(f"tp_plan {suffix!r} names none of the model's linears")


def tp_style(fqn: str, plan: Mapping[str, TPStyle | str] | None = None) -> TPStyle | None:
    """How TP shards the linear `fqn`: `plan` first (its keys are fqn suffixes, e.g.
    'attn.proj' or 'proj'), then `TP_PLAN` by the last name; None when neither knows it."""
    for table in (plan or {}, TP_PLAN):
        for suffix, style in table.items():
            if fqn == suffix or fqn.endswith("." + suffix):
                try:
                    return TPStyle(style)
                except ValueError:
                    raise ArchitectureError(
                        f"tp_plan {suffix!r}: {style!r} is not one of column, row, replicated"
                    ) from None
    return None


def _norm_of(model) -> Before:
    """The norm a module's blocks use, by its layers' types: LayerNorm, or RMSNorm (any class
    so named, e.g. LlamaRMSNorm); none when it has neither (nothing to fuse a cast into)."""
    import torch

    modules = list(model.modules())
    if any(isinstance(m, torch.nn.LayerNorm) for m in modules):
        return Before.LAYERNORM
    if any("RMSNorm" in type(m).__name__ for m in modules):
        return Before.RMSNORM
    return Before.NONE


def from_module(
    model, *, name: str | None = None, tp_plan: Mapping[str, TPStyle | str] | None = None
) -> Architecture:
    """An `nn.Module`, or a zero-argument function that builds one (called on the meta device,
    so a 405B model costs no memory), -> its linears grouped by layer type, each with the TP
    style `tp_style` gives its name (replicated, and listed in the note, where none does)."""
    model = as_module(model)
    label = name or type(model).__name__
    linears = module_linears(model)
    if not linears:
        raise ArchitectureError(f"{label} has no nn.Linear modules: nothing to convert to float8")
    check_tp_plan(tp_plan, [layer_type(fqn) for fqn in linears])
    grouped: dict[str, NamedLinear] = {}
    unknown: list[str] = []
    norm = _norm_of(model)
    for fqn, kind in group_by_layer_type(linears).items():
        K, N = linears[fqn]
        count = grouped[kind].count + 1 if kind in grouped else 1
        style = tp_style(layer_type(fqn), tp_plan)
        if style is None and kind not in grouped:
            unknown.append(kind)
        context = input_context(kind, norm=norm)
        grouped[kind] = NamedLinear(kind, K, N, count, style or TPStyle.REPLICATED, None, context)
    notes = (note(Topic.NOT_IN_TP_PLAN, layers=unknown),) if unknown else ()
    return Architecture(
        label, tuple(grouped.values()), source=f"nn.Module {type(model).__name__}", notes=notes
    )
