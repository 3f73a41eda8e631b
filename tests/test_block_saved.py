"""The memory model's saved activations against what every shipped block fit's partitioned
forward hands its backward (`BlockFit.saved_bytes`, traced by build_block_fits.py --saved):
llama3-8b, 70b and 405b at TP 1-8, no recompute and per-op SAC, bf16, tensorwise (with and
without FSDP2's float8 all-gather) and rowwise (with and without emulate_precision_casts), one
sequence per rank and several."""

from dataclasses import replace

import pytest

from f8roof.calibration.block_file import BlockKey, shipped_block_fits
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import DEFAULT_POLICY, is_block_fqn
from f8roof.training.memory import per_block

FITS = shipped_block_fits()
TOKENS = 8192  # a knot of both layouts' fits: exact there
TOLERANCE = 0.01


def _modelled(fit) -> float:
    spec = fit.capture.spec
    run = replace(spec.parallel, sac_policy=DEFAULT_POLICY, blocks_compiled=True)
    arch = builtin(spec.name)
    converted = [lin.fqn for lin in arch.linears if is_block_fqn(lin.fqn)]
    recipe = fit.recipe
    bf16, fp8 = per_block(
        arch, tokens=TOKENS, run=run, recipe=recipe or "tensorwise", converted=converted
    ).saved
    return bf16 if recipe is None else fp8


def test_every_shipped_fit_records_what_its_graph_saves():
    assert FITS is not None
    missing = [str(BlockKey.of(f)) for f in FITS.fits if f.saved_bytes is None]
    assert not missing


@pytest.mark.parametrize("key", [str(k) for k in FITS.keys] if FITS else [])
def test_the_memory_model_saves_what_the_shipped_graph_saves(key):
    fit = next(f for f in FITS.fits if str(BlockKey.of(f)) == key)
    graph = float(fit.saved_bytes.at(TOKENS))
    assert _modelled(fit) / graph == pytest.approx(1, abs=TOLERANCE), key
