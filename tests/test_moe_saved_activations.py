"""What a compiled MoE block saves for the backward (profiler/moe.py's MoE in profiler/block.py's
block, read by profiler/memory/saved.py's `saved_activations`) and training/memory.py's count
of it for the same run."""

import pytest

from f8roof.traffic.variant import Before, Context
from f8roof.training.block import BlockSpec, MoeSpec
from f8roof.training.catalog import Architecture, NamedLinear, RoutedExperts, TPStyle
from f8roof.training.checkpointing import Recompute, sac_policy
from f8roof.training.memory import per_block
from f8roof.training.run_config import RunConfig

torch = pytest.importorskip("torch")

_COL, _ROW = TPStyle.COLUMN, TPStyle.ROW
_RMS, _SILU = Context(Before.RMSNORM), Context(Before.SILU_MUL)
DIM, EXPERTS, TOP_K, WIDTH, SHARED, TOKENS = 64, 8, 2, 32, 48, 64
ROUTED = RoutedExperts(EXPERTS, TOP_K)


def _architecture(shared: bool) -> Architecture:
    """The tiny MoE's linears as the catalog lists a qwen3-MoE's (torchtitan's names)."""
    linears = [
        NamedLinear("layers.*.attention.wq", DIM, 64, 1, _COL, context=_RMS, heads=4),
        NamedLinear("layers.*.attention.wk", DIM, 32, 1, _COL, context=_RMS, heads=2),
        NamedLinear("layers.*.attention.wv", DIM, 32, 1, _COL, context=_RMS, heads=2),
        NamedLinear("layers.*.attention.wo", 64, DIM, 1, _ROW, heads=4),
        NamedLinear("layers.*.moe.experts.w1", DIM, WIDTH, 1, _COL, ROUTED),
        NamedLinear("layers.*.moe.experts.w3", DIM, WIDTH, 1, _COL, ROUTED),
        NamedLinear("layers.*.moe.experts.w2", WIDTH, DIM, 1, _ROW, ROUTED),
    ]
    if shared:
        linears += [
            NamedLinear("layers.*.moe.shared_experts.w1", DIM, SHARED, 1, _COL, context=_RMS),
            NamedLinear("layers.*.moe.shared_experts.w3", DIM, SHARED, 1, _COL, context=_RMS),
            NamedLinear("layers.*.moe.shared_experts.w2", SHARED, DIM, 1, _ROW, context=_SILU),
        ]
    linears.append(NamedLinear("lm_head", DIM, 128, 1, _COL, context=_RMS))
    return Architecture("tiny-moe", tuple(linears))


def _spec(run: RunConfig, shared: bool) -> BlockSpec:
    moe = MoeSpec(EXPERTS, TOP_K, WIDTH, shared_ffn_dim=SHARED if shared else 0)
    return BlockSpec(
        dim=DIM, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=WIDTH, tokens=TOKENS,
        seq_len=TOKENS, moe=moe, parallel=run, name="tiny-moe",
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "recipe", "shared", "experts"),
    [
        (Recompute.NONE, None, False, False),
        (Recompute.NONE, None, True, False),
        (Recompute.NONE, "tensorwise", True, False),
        (Recompute.NONE, "rowwise", False, False),
        (Recompute.NONE, "rowwise", False, True),
        (Recompute.SELECTIVE, None, False, False),
        (Recompute.SELECTIVE, "tensorwise", True, True),
    ],
)
def test_a_compiled_tiny_moe_block_saves_what_the_memory_model_counts(
    mode, recipe, shared, experts
):
    """A tiny MoE block (8 experts, top 2, with and without shared experts, the routed experts'
    grouped gemms in bf16 or torchao's float8) compiled as torchtitan compiles it (about 5 s
    each on one core): what its partitioned forward hands the backward is memory.py's
    per-block saved term for the same run, within 1% (the float8 scales memory.py leaves out,
    as for dense blocks)."""
    from f8roof.profiler.memory.saved import saved_activations

    run = RunConfig(
        recompute=mode, sac_policy="torchtitan-0.3.0", blocks_compiled=True,
        moe_fqns=("experts",) if experts else (),
    )  # fmt: skip
    graph = saved_activations(_spec(run, shared), recipe=recipe, sac=sac_policy(run.sac_policy))
    arch = _architecture(shared)
    converted = [
        x.fqn for x in arch.linears if x.fqn != "lm_head" and (experts or x.routed is None)
    ]
    bf16, fp8 = per_block(
        arch, tokens=TOKENS, run=run, recipe=recipe or "tensorwise", converted=converted
    ).saved
    modelled = bf16 if recipe is None else fp8
    assert modelled == pytest.approx(graph.activation_bytes + graph.from_weights_bytes, rel=0.01)
    if mode is Recompute.NONE:  # the gate's and up's outputs kept: written by which gemm
        scaled = any(t.op == "aten._scaled_grouped_mm.default" for t in graph.tensors)
        assert scaled == experts


@pytest.mark.slow
def test_the_eager_count_misses_the_routers_fp32_tensors_that_compile_keeps():
    """Eager's count of an MoE block saves the experts' inputs and outputs but nothing of the
    router; compiled, the partition keeps the gate's fp32 input (T x D x 4 bytes), which the
    eager count leaves out: the compiled count is the larger, and the graph agrees with it."""
    from dataclasses import replace

    from f8roof.profiler.memory.saved import saved_activations

    run = RunConfig(recompute=Recompute.NONE, blocks_compiled=True)
    arch = _architecture(False)
    terms = {
        compiled: per_block(
            arch,
            tokens=TOKENS,
            run=replace(run, blocks_compiled=compiled),
            recipe="tensorwise",
            converted=[],
        ).saved[0]
        for compiled in (True, False)
    }
    graph = saved_activations(_spec(run, False), recipe=None)
    saved = graph.activation_bytes + graph.from_weights_bytes
    assert terms[True] - terms[False] > TOKENS * DIM * 4
    assert terms[True] == pytest.approx(saved, rel=0.01)


def test_moe_blocks_under_tp_are_refused_naming_the_parameters():
    from f8roof.profiler.capture import CaptureError
    from f8roof.profiler.memory.saved import saved_activations

    with pytest.raises(CaptureError, match="tp 1, ep 1"):
        saved_activations(_spec(RunConfig(tp=2), False), recipe=None)


@pytest.mark.slow
def test_an_moe_blocks_backward_code_returns_every_gradient_and_holds_more():
    """The CUDA code Inductor generates for the tiny MoE block's backward (codegen only) is
    read through its custom ops (the router's histc stand-in): it returns every parameter's
    gradient in bf16 (no FSDP: the block trains in bf16) and the block input's, and holds at
    least that at its peak."""
    from f8roof.profiler.memory.buffers import block_buffers

    run = RunConfig(recompute=Recompute.NONE, blocks_compiled=True)
    read = block_buffers(_spec(run, False), recipe=None)
    attention = DIM * 64 + 2 * DIM * 32 + 64 * DIM
    experts = 3 * EXPERTS * WIDTH * DIM
    gate, norms = EXPERTS * DIM, 2 * DIM
    gradients = (attention + experts + gate + norms + TOKENS * DIM) * 2
    assert read.backward.returned_bytes == gradients
    assert read.backward.peak_bytes > gradients
