"""Skip marks for optional dependencies: without torchao, the reference implementation is
tested alone; byte counts of generated code are pinned to the versions that generated them."""

import pytest
import torch

from f8roof.profiler import torchao_float8

torchao = pytest.mark.skipif(not torchao_float8.available(), reason="torchao is not installed")
torch_213_torchao_018 = pytest.mark.skipif(
    not torch.__version__.startswith("2.13.") or torchao_float8.version() != "0.18.0",
    reason="the expected bytes are what torch 2.13 + torchao 0.18 generate",
)


def _cpu_takes_rowwise_scales() -> bool:
    a = torch.zeros(16, 16, dtype=torch.float8_e4m3fn)
    b = torch.zeros(16, 16, dtype=torch.float8_e4m3fn).t()
    try:
        torch._scaled_mm(
            a, b, scale_a=torch.ones(16, 1), scale_b=torch.ones(1, 16), out_dtype=torch.bfloat16
        )
    except RuntimeError:
        return False
    return True


# torch 2.13's CPU `_scaled_mm` takes (M,1)/(1,N) scales; 2.11's asserts per-tensor scales only.
cpu_rowwise = pytest.mark.skipif(
    not _cpu_takes_rowwise_scales(),
    reason=f"CPU _scaled_mm takes no row-wise scales on torch {torch.__version__} (CUDA does)",
)
