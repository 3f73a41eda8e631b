"""An MoE feed-forward as torchtitan builds it, for profiler/block.py's block to compile.

Read off torchtitan@6a1b334e8 (2026-05-18, the modules training/catalog.py names):
torchtitan/models/common/moe.py (`TokenChoiceTopKRouter`, `GroupedExperts`, `MoE`) and
token_dispatcher.py (`LocalTokenDispatcher`, the dispatcher without expert parallelism):
- the router: the gate linear computed in fp32 (torchtitan runs it under
  `autocast(dtype=float32)`, which casts the bf16 input and weight up), softmax or sigmoid,
  `topk` of the scores plus the load-balancing `expert_bias` (a buffer), the chosen scores
  gathered and normalized (`route_norm`), the tokens per expert counted by `histc`;
- the dispatch: the routed slots sorted by expert (`argsort`, stable), each token's row
  gathered once per expert it goes to (T x top_k rows, in expert order);
- the routed experts: 3-D weights (experts, out, in) run by `torch._grouped_mm` with the
  cumulative token counts as offsets, `w2(silu(w1 x) * w3 x)`;
- the combine: the shared experts' output (a dense SwiGLU every token passes through, where
  the model has them) or zeros, the routed outputs scaled by their scores in fp32 after the
  experts (`score_before_experts=False`, qwen3's and deepseek-v3's) and scatter-added back to
  their tokens. torchtitan's `deterministic_scatter_add` is a custom op whose autograd saves
  the index alone, as `Tensor.scatter_add`'s does: the latter stands in for it.
Left out: the expert-usage counter (`tokens_per_expert`, an experts-long fp32 buffer updated
under no_grad), expert parallelism's all-to-alls and the experts' tensor parallelism
(`profiler.block` refuses both for an MoE block), node-limited routing (deepseek-v3's groups).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from f8roof.training.block import BlockSpec, MoeSpec, Score

__all__ = ["GroupedExperts", "MoE", "Router", "SwiGLU"]


class SwiGLU(nn.Module):
    """`w2(silu(w1 x) * w3 x)`: torchtitan's FeedForward, here the shared experts."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Router(nn.Module):
    """torchtitan's TokenChoiceTopKRouter: (chosen scores, chosen experts, tokens per expert)."""

    def __init__(self, dim: int, moe: MoeSpec) -> None:
        super().__init__()
        self.moe = moe
        self.gate = nn.Linear(dim, moe.experts, bias=False)

    def forward(
        self, x: torch.Tensor, expert_bias: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # torchtitan's autocast to fp32 casts both operands up; the casts are the graph's
        scores = F.linear(x.float(), self.gate.weight.float())
        if self.moe.score is Score.SIGMOID:
            scores = torch.sigmoid(scores)
        else:
            scores = F.softmax(scores, dim=1)
        _, chosen = torch.topk(scores + expert_bias, k=self.moe.top_k, dim=-1, sorted=False)
        top = scores.gather(dim=1, index=chosen)
        top = top / (top.sum(dim=-1, keepdim=True) + 1e-20)  # route_norm
        counts = torch.ops.f8roof.histc(chosen.view(-1), self.moe.experts)
        return top, chosen, counts


@torch.library.custom_op("f8roof::histc", mutates_args=())
def _histc(chosen: torch.Tensor, bins: int) -> torch.Tensor:
    """Stands in for torchtitan's `torch.histc(chosen, bins, min=0, max=bins)` of the int64
    expert ids: CUDA's histc takes int64, CPU's (the one a CPU trace checks shapes with)
    refuses it. Counted in float here, returned in the ids' dtype as CUDA's is."""
    return torch.histc(chosen.float(), bins=bins, min=0, max=bins).to(chosen.dtype)


@_histc.register_fake
def _(chosen: torch.Tensor, bins: int) -> torch.Tensor:
    return chosen.new_empty(bins)


class GroupedExperts(nn.Module):
    """The routed experts as 3-D weights, torchtitan's names and layout (w1, w3: experts x
    hidden x dim; w2: experts x dim x hidden), one `torch._grouped_mm` per projection."""

    def __init__(self, dim: int, moe: MoeSpec) -> None:
        super().__init__()
        hidden = moe.expert_ffn_dim
        self.w1 = nn.Parameter(torch.empty(moe.experts, hidden, dim))
        self.w2 = nn.Parameter(torch.empty(moe.experts, dim, hidden))
        self.w3 = nn.Parameter(torch.empty(moe.experts, hidden, dim))

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
        x = x.bfloat16()
        h = F.silu(torch._grouped_mm(x, self.w1.bfloat16().transpose(-2, -1), offs=offsets))
        h = h * torch._grouped_mm(x, self.w3.bfloat16().transpose(-2, -1), offs=offsets)
        out = torch._grouped_mm(h, self.w2.bfloat16().transpose(-2, -1), offs=offsets)
        return out.type_as(x)


class MoE(nn.Module):
    """torchtitan's MoE with the local dispatcher: route, dispatch, experts, combine."""

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        assert spec.moe is not None
        self.spec = spec.moe
        self.router = Router(spec.dim, spec.moe)
        self.experts = GroupedExperts(spec.dim, spec.moe)
        self.shared_experts = (
            SwiGLU(spec.dim, spec.moe.shared_ffn_dim) if spec.moe.shared_ffn_dim else None
        )
        # auxiliary-loss-free load balancing (torchtitan's load_balance_coeff, on by default)
        self.register_buffer("expert_bias", torch.zeros(spec.moe.experts, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        x = x.view(-1, dim)
        top, chosen, counts = self.router(x, self.expert_bias)
        # dispatch: the routed slots in expert order, each a copy of its token's row
        order = torch.argsort(chosen.view(-1), stable=True)
        scores = top.view(-1)[order]
        tokens = order // self.spec.top_k
        routed = self.experts(x[tokens], counts)
        # combine: scored in fp32 after the experts, added back to the tokens
        out = self.shared_experts(x) if self.shared_experts is not None else torch.zeros_like(x)
        routed = (routed.to(torch.float32) * scores.reshape(-1, 1)).to(routed.dtype)
        out = out.scatter_add(0, tokens.reshape(-1, 1).expand(-1, dim), routed)
        return out.reshape(batch, seq, dim)
