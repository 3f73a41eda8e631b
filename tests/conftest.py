import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cpu_rowwise: runs row-wise float8 _scaled_mm on CPU (skipped where refused)"
    )


@pytest.hookimpl(tryfirst=True)  # before fixtures are set up: a capture fixture would compile
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `cpu_rowwise` run row-wise float8 `_scaled_mm` on CPU, which torch 2.11's
    CPU backend refuses (f8roof/profiler/cpu_rowwise.py): there they skip, naming why."""
    if item.get_closest_marker("cpu_rowwise") is not None:
        from f8roof.profiler.cpu_rowwise import cpu_rowwise_refusal

        refusal = cpu_rowwise_refusal()
        if refusal is not None:
            pytest.skip(refusal)
