"""Skip marks for optional dependencies: without torchao, the reference implementation is
tested alone."""

import pytest

from f8roof.profiler import torchao_float8

torchao = pytest.mark.skipif(not torchao_float8.available(), reason="torchao is not installed")
