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
