"""Byte counting past 2**30 elements per tensor (published benchmarks sweep to 32768)."""

import pytest
import requires

from f8roof.hardware.presets import find_gpu
from f8roof.profiler.capture import capture
from f8roof.traffic.variant import Variant


@pytest.mark.slow
@pytest.mark.parametrize(
    "key",
    [
        pytest.param("torchao:tensorwise@layernorm+sigmoid", marks=requires.torchao),
        "reference:rowwise",
    ],
)
def test_three_counts_agree_at_32768_cubed(key):
    captured = capture(Variant.from_key(key), (32768,) * 3, device="codegen", gpu=find_gpu("h100"))
    assert captured.disagreements() == ()
    gemm = next(k for k in captured.launches if k.is_gemm)
    # a gemm writes its whole 32768 x 32768 bf16 output: 2 GiB, past Inductor's 1e9 elements
    assert gemm.bytes_written == 2 * 32768 * 32768 == gemm.bytes_scheduler - gemm.bytes_read
