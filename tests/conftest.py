import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from f8roof.traffic.variant import Before, Context
from f8roof.training.catalog import Architecture, NamedLinear, TPStyle

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cpu_rowwise: runs row-wise float8 _scaled_mm on CPU (skipped where refused)"
    )


@pytest.hookimpl(tryfirst=True)  # before fixtures are set up: a capture fixture would compile
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `cpu_rowwise` run row-wise float8 `_scaled_mm` on CPU, which torch 2.11's
    CPU backend refuses (f8roof/profiler/device.py): there they skip, naming why."""
    if item.get_closest_marker("cpu_rowwise") is not None:
        from f8roof.profiler.device import cpu_rowwise_refusal

        refusal = cpu_rowwise_refusal()
        if refusal is not None:
            pytest.skip(refusal)


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs are compared at no width: a shell's exported COLUMNS would cut `--show-all`'s
    tables (a test that sets it, sets it itself)."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True)
def _block_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    """Compiled blocks are kept in a cache of the test session's own, never the user's."""
    monkeypatch.setenv("F8ROOF_CACHE", str(tmp_path_factory.getbasetemp() / "f8roof-cache"))


def invoke_cli(*args: object, **kwargs) -> Result:
    """`f8roof ARGS` run in this process through click's CliRunner: its exit code, output and
    exception. Arguments are turned to text (paths, numbers); `kwargs` go to `invoke`."""
    from f8roof.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


@pytest.fixture
def cli():
    """The shared CLI runner: `cli("estimate", "--shape", "64,64,64")` -> click's Result."""
    return invoke_cli


# a tiny llama for the memory model's tests: hidden 16, four heads of 4 (two kv heads), MLP 32,
# vocabulary 64
_COL, _ROW = TPStyle.COLUMN, TPStyle.ROW
_RMS, _SILU = Context(Before.RMSNORM), Context(Before.SILU_MUL)
TINY_LLAMA = Architecture(
    "tiny",
    (
        NamedLinear("layers.*.attn.q", 16, 16, 1, _COL, context=_RMS, heads=4),
        NamedLinear("layers.*.attn.k", 16, 8, 1, _COL, context=_RMS, heads=2),
        NamedLinear("layers.*.attn.v", 16, 8, 1, _COL, context=_RMS, heads=2),
        NamedLinear("layers.*.attn.o", 16, 16, 1, _ROW, heads=4),
        NamedLinear("layers.*.mlp.gate", 16, 32, 1, _COL, context=_RMS),
        NamedLinear("layers.*.mlp.up", 16, 32, 1, _COL, context=_RMS),
        NamedLinear("layers.*.mlp.down", 32, 16, 1, _ROW, context=_SILU),
        NamedLinear("lm_head", 16, 64, 1, _COL, context=_RMS),
    ),
)
