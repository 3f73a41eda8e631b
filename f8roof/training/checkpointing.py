"""Activation checkpointing as torchtitan applies it: what the backward runs again.

Three policies (`Recompute`), torchtitan's `activation_checkpoint.mode`:
- `none`: nothing recomputed;
- `full`: every transformer block is wrapped whole (`checkpoint_wrapper`), so its forward runs
  again in the backward. Only the blocks: torchtitan wraps `model.layers.*` and never the
  embedding, the final norm or the output projection (lm_head), so `recomputed_in_full` is
  false for those;
- `selective`: with `selective_ac_option = "op"`, per-op SAC: the outputs of a list of ops are
  saved (`CheckpointPolicy.MUST_SAVE`), everything else is recomputed, and of the matmuls only
  every second one (1st, 3rd, ... of a block's forward) is saved. With an integer option n,
  layer SAC: every n-th block is checkpointed whole (`layer_checkpointed_blocks`).

The per-op policy is data: one `SacPolicy` per torchtitan version in `SAC_POLICIES`, each
citing the file it was read from. A new torchtitan policy is one new entry.

Op names are aten overload names as strings ("aten.mm.default"), what part A hands to
`torch.utils.checkpoint.create_selective_checkpoint_contexts` after resolving them.

Which op a float8 linear shows the policy: torchao's Float8Linear calls `torch.mm` on float8
tensor subclasses, and SAC's dispatch mode sees `aten.mm` before the subclass turns it into
`aten._scaled_mm`. Checked here (torch 2.13, torchao 0.18, CPU, a policy logging every op,
eager and torch.compile of a checkpoint_wrapper'd pair of linears): tensorwise and rowwise both
show `aten.mm.default`, never `_scaled_mm`; so float8 linears take part in the every-second-mm
rule exactly as bf16 ones (`float8_gemm_op` defaults to aten.mm). The amax differs: tensorwise
shows `aten.max.default` (saved by both policies), rowwise `aten.amax.default` (in neither
list: recomputed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from f8roof.errors import ModelError

MM = "aten.mm.default"
LINEAR = "aten.linear.default"
SCALED_MM = "aten._scaled_mm.default"


class CheckpointingError(ModelError):
    pass


class Recompute(str, Enum):
    """Activation checkpointing of the transformer blocks.

    - `none`: nothing recomputed.
    - `full`: the backward reruns every block's forward (torchtitan's `mode = "full"`): each
      linear's forward gemm and its forward float8 overhead (casts of input and weight) run
      twice, in both precisions.
    - `selective`: torchtitan's op-level SAC, which saves the outputs of a list of ops and
      recomputes the rest, of the matmuls only every second one. The per-layer rows leave it
      out; the step summary (f8roof.engine.step, training/checkpointing.py: torchtitan's save
      lists as data) adds what it reruns: every second linear's forward gemm, in both
      precisions, and the float8 casts.
    Only the transformer blocks are checkpointed: lm_head (torchtitan's `output`) never is.
    """

    NONE = "none"
    FULL = "full"
    SELECTIVE = "selective"

    @classmethod
    def from_name(cls, name: str | Recompute) -> Recompute:
        if isinstance(name, Recompute):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            raise CheckpointingError(
                f"unknown recompute {name!r}; use none, full or selective"
            ) from None


class Decision(str, Enum):
    SAVE = "save"
    RECOMPUTE = "recompute"


@dataclass(frozen=True)
class SacPolicy:
    """torchtitan's per-op SAC at one version: the ops whose outputs are saved, and the matmul
    ops of which only every `mm_save_period`-th is saved (counted per block and pass).
    `recompute_router_gate`: a matmul shaped like an MoE router's gate weight is always
    recomputed and not counted (`force_recompute_mm_shapes_by_fqns`, ["moe.router.gate"])."""

    name: str
    source: str  # version, file and symbol it was read from
    save_ops: frozenset[str]
    mm_ops: frozenset[str]
    mm_save_period: int = 2
    recompute_router_gate: bool = False

    def __post_init__(self) -> None:
        for label, ops in (("save_ops", self.save_ops), ("mm_ops", self.mm_ops)):
            if not isinstance(ops, frozenset) or not ops:
                raise CheckpointingError(f"SAC policy {self.name!r}: {label} must be a frozenset")
            bad = [op for op in ops if not _OP_NAME.fullmatch(op)]
            if bad:
                raise CheckpointingError(
                    f"SAC policy {self.name!r}: {bad[0]!r} is not an op name like 'aten.mm.default'"
                )
        if self.mm_save_period < 1:
            raise CheckpointingError(f"SAC policy {self.name!r}: mm_save_period must be >= 1")

    def decide(self, op: str, *, mm_count: int = 0) -> Decision:
        """torchtitan's rule for one op. `mm_count`: this op's 1-based position among the
        block's matmul ops in this pass (only read for `mm_ops`)."""
        if op not in self.save_ops:
            return Decision.RECOMPUTE
        if op in self.mm_ops:
            if mm_count < 1:
                raise CheckpointingError(f"{op}: a matmul needs its 1-based mm_count")
            # torchtitan: recompute when count % 2 == 0 (the 2nd, 4th, ...); save the others
            return Decision.RECOMPUTE if mm_count % self.mm_save_period == 0 else Decision.SAVE
        return Decision.SAVE

    def decide_sequence(self, ops: Sequence[str]) -> tuple[Decision, ...]:
        """Decisions for a block's forward ops in order, counting the matmuls as torchtitan's
        policy does (its counter is fresh for each block)."""
        count = 0
        out = []
        for op in ops:
            if op in self.mm_ops:
                count += 1
            out.append(self.decide(op, mm_count=count))
        return tuple(out)


_OP_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+")

# torchtitan at the commit of the published 2025 runs (441a63ca4, 2025-05-20, the HEAD that
# pytorch/torchtitan#1207 ran): torchtitan/models/llama3/parallelize_llama.py, `_save_list`
# and `_apply_ac_to_transformer_block` (the rule: "Saves output of all compute ops, except every
# second mm"; only aten.mm is counted). `_scaled_mm` is not in the list: float8 gemms that show
# the policy `_scaled_mm` are recomputed.
TORCHTITAN_2025_05 = SacPolicy(
    name="torchtitan-2025-05",
    source=(
        "pytorch/torchtitan@441a63ca4 (2025-05-20) torchtitan/models/llama3/parallelize_llama.py "
        "_save_list"
    ),
    save_ops=frozenset(
        {
            MM,
            "aten._scaled_dot_product_efficient_attention.default",
            "aten._scaled_dot_product_flash_attention.default",
            "_c10d_functional.reduce_scatter_tensor.default",
            "aten.max.default",  # the amax of low-precision scaling
        }
    ),
    mm_ops=frozenset({MM}),
)

# torchtitan 0.3.0 (PyPI, 2026-09): torchtitan/distributed/activation_checkpoint.py,
# `_get_default_save_ops` and `SelectiveAC._wrap_block`. The save set is torch's
# `get_default_op_list().compute_intensive_ops` (torch 2.13: mm, convolution,
# convolution_backward, bmm, addmm, SDPA flash/efficient, _flash/_efficient_attention_forward,
# upsample_bilinear2d, _scaled_mm) plus torchtitan's own compute and comm ops; aten.mm and
# aten.linear count for the every-second rule. `_scaled_mm` is saved and never counted.
# (Ops that exist only with extra packages - deepep, hybridep, torch_attn - and the
# inductor_compiled_code / flex_attention higher-order ops are left out: they are not aten
# overloads.)
TORCHTITAN_0_3_0 = SacPolicy(
    name="torchtitan-0.3.0",
    source=(
        "torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py "
        "_get_default_save_ops (with torch 2.13 get_default_op_list)"
    ),
    save_ops=frozenset(
        {
            # torch._functorch.partitioners.get_default_op_list().compute_intensive_ops
            MM,
            "aten.convolution.default",
            "aten.convolution_backward.default",
            "aten.bmm.default",
            "aten.addmm.default",
            "aten._scaled_dot_product_flash_attention.default",
            "aten._scaled_dot_product_efficient_attention.default",
            "aten._flash_attention_forward.default",
            "aten._efficient_attention_forward.default",
            "aten.upsample_bilinear2d.default",
            SCALED_MM,
            # torchtitan's compute_ops
            "aten._scaled_dot_product_cudnn_attention.default",
            "aten._scaled_dot_product_attention_math.default",
            "aten._scaled_dot_product_fused_attention_overrideable.default",
            "aten.max.default",
            LINEAR,
            "aten.topk.default",
            # torchtitan's comm_ops
            "_c10d_functional.reduce_scatter_tensor.default",
            "_c10d_functional.all_to_all_single.default",
        }
    ),
    mm_ops=frozenset({MM, LINEAR}),
    recompute_router_gate=True,
)

SAC_POLICIES: dict[str, SacPolicy] = {p.name: p for p in (TORCHTITAN_2025_05, TORCHTITAN_0_3_0)}
# The TOML job configs of published runs are torchtitan's 2024-25 layout; 0.3.0 is the release.
TOML_LAYOUT_POLICY = TORCHTITAN_2025_05.name
DEFAULT_POLICY = TORCHTITAN_0_3_0.name


def sac_policy(name: str = DEFAULT_POLICY) -> SacPolicy:
    key = name.strip().lower()
    if key not in SAC_POLICIES:
        raise CheckpointingError(f"unknown SAC policy {name!r}; known: {', '.join(SAC_POLICIES)}")
    return SAC_POLICIES[key]


def save_ops(name: str = DEFAULT_POLICY) -> frozenset[str]:
    """The op names whose outputs the policy saves (for create_selective_checkpoint_contexts;
    the every-second-matmul rule is `SacPolicy.decide`)."""
    return sac_policy(name).save_ops


# A dense llama block's linears in forward order, torchtitan's names: attention.wq/wk/wv, then
# wo; feed_forward computes w2(silu(w1(x)) * w3(x)), so w1, w3, w2.
LLAMA_FORWARD_LINEARS = (
    "attention.wq",
    "attention.wk",
    "attention.wv",
    "attention.wo",
    "feed_forward.w1",
    "feed_forward.w3",
    "feed_forward.w2",
)


def recomputed_linears(
    policy: str | Recompute,
    *,
    linears: Sequence[str] = LLAMA_FORWARD_LINEARS,
    float8: bool,
    sac: str = DEFAULT_POLICY,
    float8_gemm_op: str = MM,
) -> tuple[str, ...]:
    """Which of a block's linears run their forward gemm again in the backward.

    `float8_gemm_op`: the op a float8 linear shows the policy (see the module docstring); bf16
    linears show aten.mm. Under `full` every block linear is recomputed; under `none`, none."""
    policy = Recompute.from_name(policy)
    if policy is Recompute.NONE:
        return ()
    if policy is Recompute.FULL:
        return tuple(linears)
    op = float8_gemm_op if float8 else MM
    decisions = sac_policy(sac).decide_sequence([op] * len(linears))
    return tuple(name for name, d in zip(linears, decisions) if d is Decision.RECOMPUTE)


# a block's linears sit under a repeated index: `layers.3.`, `model.layers.*.`, GPT-2's
# `transformer.h.*.`, or a range of blocks filters split off (`model.layers.0-26.`); lm_head /
# output, embeddings and the final norm have none
_BLOCK_FQN = re.compile(r"(^|\.)(\*|\d+(-\d+)?)\.")


def is_block_fqn(fqn: str) -> bool:
    """Whether a linear lives inside a transformer block (under a layer index: torchtitan's
    `layers.N.`, f8roof's and Hugging Face's `model.layers.*.`, GPT-2's `transformer.h.*.`)."""
    return bool(_BLOCK_FQN.search(fqn))


def recomputed_in_full(fqn: str) -> bool:
    """Full AC recomputes the transformer blocks only: never lm_head / output, embeddings or
    the final norm (torchtitan wraps each of model.layers, nothing else)."""
    return is_block_fqn(fqn)


def layer_checkpointed_blocks(layers: int, every: int) -> int:
    """Layer SAC (`selective_ac_option = "<n>"`): torchtitan counts wrapped blocks from 1 and
    checkpoints a block when count % n == 0, so floor(layers / n) of them, each whole."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise CheckpointingError(f"layers must be an integer >= 1 (got {layers!r})")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise CheckpointingError(
            f"selective_ac_option must be 'op' or a positive integer (got {every!r})"
        )
    return layers // every
