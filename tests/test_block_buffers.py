"""What a compiled block holds while it runs (profiler/memory_check.py's `wrapper_buffers`,
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
    from f8roof.profiler.memory_check import wrapper_buffers

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
    from f8roof.profiler.memory_check import wrapper_buffers

    lines = WRAPPER.splitlines()
    at = next(i for i, line in enumerate(lines) if "del buf5" in line)
    code = "\n".join([*lines[:at], " " * 12 + statement, *lines[at:]])
    with pytest.raises(CaptureError, match=why) as raised:
        wrapper_buffers(code, ITEMSIZES)
    assert statement.split(" (")[0][:20] in str(raised.value)
