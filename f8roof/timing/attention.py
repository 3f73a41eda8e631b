"""Attention's time in one block: the same in bf16 and float8 (torchao converts linears only),
but part of every step, so a modelled step that leaves it out overstates the speedup.

FLOPs as FlashAttention's own benchmarks count them (Dao-AILab/flash-attention
`benchmarks/benchmark_flash_attention.py`): forward 4 x B x S^2 x H x D, halved with a causal
mask; the backward 2.5 forwards (it recomputes the scores); so causal forward + backward is
7 x S x D x H per token of a sequence of S. torchtitan's MFU counts 12 x S x D x H (no causal
discount, no recomputation): its FLOPs are not these.

Throughput: FlashAttention-2's causal forward + backward on an H100 SXM (700 W), head dim 128,
bf16, 16k tokens per batch, as the flash-attention repository plots it
(`assets/flash2_h100_fwd_bwd_benchmark.png`, panel "with causal mask", 2023-07, values read off
the chart): 265, 294, 308, 328 TFLOP/s at S = 2k, 4k, 8k, 16k. PyTorch's scaled_dot_product_attention
runs a FlashAttention-2 kernel on H100, which is what torchtitan's llama blocks call. It is
taken relative to a bf16 gemm on the same kind of part (torch.mm at 8192^3 on an H100 SXM:
797.5 TFLOP/s, zzc0721/torch-performance-test-data#79), so a part whose gemms run slower
(a power cap) runs attention slower by as much: an assumption, no public measurement
separates the two.
"""

from __future__ import annotations

import numpy as np

from f8roof.errors import ModelError

# (sequence length, TFLOP/s): FlashAttention-2 causal forward + backward, H100 SXM, D = 128
FLASH2_CAUSAL_TFLOPS = ((2048, 265.0), (4096, 294.0), (8192, 308.0), (16384, 328.0))
REFERENCE_GEMM_TFLOPS = 797.5  # torch.mm bf16 8192^3 on an H100 SXM (zzc0721#79)
SOURCE = "Dao-AILab/flash-attention assets/flash2_h100_fwd_bwd_benchmark.png (causal, D 128)"
FORWARD_SHARE = 2 / 7  # of the forward + backward FLOPs: what full checkpointing reruns


def attention_flops(*, tokens: int, seq_len: int, heads: int, head_dim: int) -> float:
    """Causal forward + backward FLOPs of `tokens` (sequences of `seq_len`) over `heads`."""
    for name, value in (("tokens", tokens), ("seq_len", seq_len), ("heads", heads)):
        if value < 1:
            raise ModelError(f"attention: {name} must be positive (got {value})")
    if head_dim < 1:
        raise ModelError(f"attention: head_dim must be positive (got {head_dim})")
    return 7.0 * tokens * seq_len * heads * head_dim


def relative_efficiency(seq_len: int) -> float:
    """FlashAttention-2's throughput over a large bf16 gemm's, at `seq_len` (interpolated in
    log2 of S; the ends held beyond the measured range)."""
    lengths = np.log2([s for s, _ in FLASH2_CAUSAL_TFLOPS])
    tflops = [t for _, t in FLASH2_CAUSAL_TFLOPS]
    return float(np.interp(np.log2(seq_len), lengths, tflops)) / REFERENCE_GEMM_TFLOPS


def attention_s(
    *, tokens: int, seq_len: int, heads: int, head_dim: int, gemm_flops_per_s: float
) -> float:
    """Seconds of one block's attention, forward + backward, on a part whose large bf16 gemms
    run at `gemm_flops_per_s`."""
    if not gemm_flops_per_s > 0:
        raise ModelError("attention: the gemm throughput must be positive")
    flops = attention_flops(tokens=tokens, seq_len=seq_len, heads=heads, head_dim=head_dim)
    return flops / (gemm_flops_per_s * relative_efficiency(seq_len))
