"""What a compiled block holds while it runs (profiler/memory/buffers.py's `wrapper_buffers`,
read off Inductor's wrapper code) and training/memory.py's one-block backward beside it."""

import pytest

torch = pytest.importorskip("torch")

# A wrapper as Inductor writes one (torch 2.13's Runner.call), by hand: an allocation, a
# kernel, an op returning a tuple (SDPA's output and logsumexp, read by getitem and sized by
# assert_size_stride), a graph input freed early, a reuse, a functional collective, a return.
WRAPPER = """
class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        args.clear()
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((64, 32), (32, 1), torch.bfloat16)
            extern_kernels.mm(arg0_1, arg1_1, out=buf0)
            buf1 = empty_strided_cuda((64, ), (1, ), torch.float32)
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused_0.run(buf0, buf1, 64, stream=raw_stream0)
            buf2 = torch.ops.aten._scaled_dot_product_flash_attention.default(buf0, buf0, buf0)
            buf3 = buf2[0]
            assert_size_stride(buf3, (1, 4, 64, 8), (2048, 8, 32, 1), 'sdpa')
            buf4 = buf2[1]
            assert_size_stride(buf4, (1, 4, 64), (256, 64, 1), 'sdpa')
            del buf2
            del arg0_1
            buf5 = reinterpret_tensor(buf0, (32, 64), (64, 1), 0); del buf0  # reuse
            triton_poi_fused_1.run(buf3, buf5, 2048, stream=raw_stream0)
            del buf3
            buf6 = torch.ops._c10d_functional.all_gather_into_tensor.default(buf5, 2, '0')
            assert_size_stride(buf6, (64, 64), (64, 1), 'all_gather_into_tensor')
            torch.ops._c10d_functional.wait_tensor.default(buf6)
            del buf5
        return (buf6, buf1, reinterpret_tensor(buf4, (4, 64), (64, 1), 0), )
"""
# what the wrapper prints no dtype for: the op's outputs, by buffer (Inductor's buffers)
ITEMSIZES = {"buf3": 2, "buf4": 4, "buf6": 2}


def test_the_reader_follows_allocations_reuse_ops_and_frees_to_the_hand_counted_peak():
    """Counted by hand: buf0 64x32 bf16 (4096 B), buf1 64 fp32 (256 B), SDPA's output
    1x4x64x8 bf16 (4096 B) and logsumexp 1x4x64 fp32 (1024 B) at once, the reuse allocating
    nothing, SDPA's output freed, then the all-gather's 64x64 bf16 (8192 B) while buf0's storage
    (as buf5) is still live: 4096 + 256 + 1024 + 8192. The input freed early counts nowhere;
    the return keeps buf6, buf1 and buf4 (a view of it)."""
    from f8roof.profiler.memory.buffers import wrapper_buffers

    read = wrapper_buffers(WRAPPER, ITEMSIZES)
    assert read.peak_bytes == 4096 + 256 + 1024 + 8192
    assert {b.name: b.bytes for b in read.at_peak} == {
        "buf0": 4096, "buf1": 256, "buf4": 1024, "buf6": 8192
    }  # fmt: skip
    assert read.returned_bytes == 8192 + 256 + 1024
    written = {b.name: b.written_by for b in read.at_peak}
    assert written["buf0"] == "extern_kernels.mm"
    assert written["buf6"] == "torch.ops._c10d_functional.all_gather_into_tensor.default"


@pytest.mark.parametrize(
    ("statement", "why"),
    [
        # an op's output the wrapper does not size
        ("buf7 = torch.ops.aten.new_op.default(buf6)", "does not size"),
        # an allocator this reader does not know
        ("buf7 = empty_strided_mtia((8, ), (1, ), torch.bfloat16)", "does not know"),
        # a statement form this reader does not know
        ("if buf6 is not None: pass", "does not know"),
    ],
)
def test_an_unknown_allocating_statement_fails_naming_its_line(statement, why):
    from f8roof.profiler.capture import CaptureError
    from f8roof.profiler.memory.buffers import wrapper_buffers

    lines = WRAPPER.splitlines()
    at = next(i for i, line in enumerate(lines) if "del buf5" in line)
    code = "\n".join([*lines[:at], " " * 12 + statement, *lines[at:]])
    with pytest.raises(CaptureError, match=why) as raised:
        wrapper_buffers(code, ITEMSIZES)
    assert statement.split(" (")[0][:20] in str(raised.value)


def _small_llama(dim, heads, kv_heads, head_dim, ffn):
    """A llama block's linears at small dims, for memory.py beside the compiled block."""
    from f8roof.traffic.variant import Before
    from f8roof.training.catalog import Architecture, Context, NamedLinear, TPStyle

    col, row = TPStyle.COLUMN, TPStyle.ROW
    rms, silu = Context(Before.RMSNORM), Context(Before.SILU_MUL)
    q, kv = heads * head_dim, kv_heads * head_dim
    return Architecture(
        "small",
        (
            NamedLinear("layers.*.attn.q", dim, q, 1, col, context=rms, heads=heads),
            NamedLinear("layers.*.attn.k", dim, kv, 1, col, context=rms, heads=kv_heads),
            NamedLinear("layers.*.attn.v", dim, kv, 1, col, context=rms, heads=kv_heads),
            NamedLinear("layers.*.attn.o", q, dim, 1, row, heads=heads),
            NamedLinear("layers.*.mlp.gate", dim, ffn, 1, col, context=rms),
            NamedLinear("layers.*.mlp.up", dim, ffn, 1, col, context=rms),
            NamedLinear("layers.*.mlp.down", ffn, dim, 1, row, context=silu),
            NamedLinear("lm_head", dim, 64, 1, col, context=rms),
        ),
    )


# The smallest llama block whose float8 gemms Inductor's CUDA codegen accepts (every dim of a
# scaled_mm's operands a multiple of 16, under TP 2 too): hidden 64, 4 heads of 16, 2 kv heads,
# MLP 128, 128 tokens.
SMALL = {"dim": 64, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "ffn_dim": 128}
SMALL_TOKENS = 128
# memory.py's compiled rule is read off llama3-8b's code, where activations outweigh the
# block's weights 16 to 1 at 8192 tokens (scripts/block_buffers.py: within 10% but for two
# rows). At these dims the weight gradients weigh as much as the activations' and the scales
# and norms' small tensors are a few percent of the peak, so Inductor's order moves the
# moments' contents a little: within 15% here (measured 0.92 to 1.11).
SMALL_TOLERANCE = 0.15


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tp", "mode", "recipe"),
    [
        (1, "none", None),
        (1, "none", "rowwise"),
        (1, "selective", None),
        (1, "selective", "tensorwise"),
        (2, "none", "tensorwise"),
        (2, "selective", None),
    ],
)
def test_a_compiled_blocks_backward_peak_is_what_the_memory_model_counts(tp, mode, recipe):
    """A small llama block compiled as torchtitan compiles it, its backward's CUDA wrapper
    generated on CPU (about 6 s each): the peak of its live buffers is memory.py's one-block
    backward without FSDP's fp32 copy (`per_block`'s backward, the blocks compiled) for the
    same dims, TP, recompute mode and precision, within SMALL_TOLERANCE."""
    from f8roof.profiler.memory.buffers import block_buffers
    from f8roof.training.block import BlockSpec
    from f8roof.training.checkpointing import Recompute, sac_policy
    from f8roof.training.memory import per_block
    from f8roof.training.run_config import RunConfig

    arch = _small_llama(64, 4, 2, 16, 128)
    run = RunConfig(tp=tp, recompute=Recompute(mode), sac_policy="torchtitan-0.3.0")
    spec = BlockSpec(**SMALL, tokens=SMALL_TOKENS, seq_len=SMALL_TOKENS, parallel=run)
    read = block_buffers(spec, recipe=recipe, sac=sac_policy(run.sac_policy))
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]
    bf16, fp8 = per_block(
        arch, tokens=SMALL_TOKENS, run=run, recipe=recipe or "tensorwise", converted=converted
    ).backward
    modelled = bf16 if recipe is None else fp8
    assert modelled == pytest.approx(read.backward.peak_bytes, rel=SMALL_TOLERANCE)
    # what the backward returns, the block's weight gradients and its input's, in bf16
    weights = sum(lin.K * lin.N for lin in arch.linears if lin.fqn != "lm_head") / tp
    grads = (weights + 2 * 64 + SMALL_TOKENS * 64 / tp) * 2
    assert read.backward.returned_bytes == grads
