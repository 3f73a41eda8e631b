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


# Row-wise float8 on CPU: skipped, naming why, where this torch's CPU `_scaled_mm` refuses
# row-wise scales (torch 2.11); the probe is the package's own (f8roof/profiler/device.py,
# applied by conftest.py).
cpu_rowwise = pytest.mark.cpu_rowwise
