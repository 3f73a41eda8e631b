"""The development peaks (scripts/published_memory.py): each run's terms add up to its allocated
and reserved peaks, the modelled runs land within 10% of what torchtitan logged, and
torchtitan's ChunkedCELoss holds one slice of the logits at a time."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_LLAMA

from f8roof.errors import F8RoofError
from f8roof.training.memory import GIB, RESERVE_TERMS, Phase, Term, memory_estimate
from f8roof.training.run_config import RunConfig
from f8roof.training.setup_file import parse_setup

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "published_memory.py"


def _script():
    spec = importlib.util.spec_from_file_location("published_memory", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dev_peaks():
    return _script().dev_peaks()


def test_every_dev_peak_is_the_sum_of_its_terms(dev_peaks):
    reserve = {t.value for t in RESERVE_TERMS.values()}
    for name, memory, _, _ in dev_peaks:
        for precision in ("bf16", "fp8"):
            terms = {k: v[f"{precision}_bytes"] for k, v in memory["terms"].items()}
            allocated = sum(v for k, v in terms.items() if k.replace("_", " ") not in reserve)
            assert sum(terms.values()) == memory[f"{precision}_reserved_bytes"], name
            assert allocated == memory[f"{precision}_allocated_bytes"], name


def test_no_allocated_peak_exceeds_the_reserved_peak_torchtitan_logged(dev_peaks):
    """The caching allocator reserves at least what it hands out: a modelled allocated peak above
    a logged reserved one overcounts a term (the Qwen3 run's whole logits did)."""
    for name, memory, bf16, fp8 in dev_peaks:
        assert memory["bf16_allocated_bytes"] < bf16 * GIB, name
        assert memory["fp8_allocated_bytes"] < fp8 * GIB, name


def test_the_modelled_dev_peaks_land_within_ten_percent_in_both_precisions(dev_peaks):
    """#1207, ao#1793's two recipes and the Qwen3-14B search's float8 arm; #149990 is the one
    still missed (docs/memory.md names what it lacks)."""
    checked = 0
    for name, memory, bf16, fp8 in dev_peaks:
        if name.startswith("#149990"):
            continue
        assert memory["bf16_reserved_bytes"] / (bf16 * GIB) == pytest.approx(1, abs=0.1), name
        assert memory["fp8_reserved_bytes"] / (fp8 * GIB) == pytest.approx(1, abs=0.1), name
        checked += 1
    assert checked == 4


def test_the_qwen3_search_at_other_settings_lands_within_five_percent():
    """The same search's bf16 rows at other recompute modes, resharding and batches: the terms
    carry over to runs the development peak did not set (results.tsv @0cd3d24ef)."""
    script = _script()
    for name, measured, keys in script.QWEN_SEARCH:
        memory = script.predict(script.qwen_at(**keys))
        assert memory["bf16_reserved_bytes"] / (measured * GIB) == pytest.approx(1, abs=0.05), name


def test_a_chunked_loss_holds_one_slice_of_the_logits_and_the_hidden_states_again():
    """ChunkedCELoss (torchtitan components/loss.py since 786e26f8e), the loss eager: 12 bytes
    per logit on one slice of the sequence, every slice's contiguous copy of the hidden states
    (bf16) and the fp32 buffer their gradient gathers in, and lm_head's unsharded bf16 gradient
    accumulating across the slices (FSDP 2; tiny llama, 4096 tokens: the loss holds the peak)."""
    tokens = 4096
    run = replace(RunConfig.sharded(tp=1, fsdp=2), seq_len=tokens, loss_compiled=False)
    whole, chunked = (
        memory_estimate(
            TINY_LLAMA, tokens=tokens, run=replace(run, loss_chunks=n), recipe="rowwise",
            converted=[], gpu_memory_bytes=80 * GIB,
        ).bf16
        for n in (1, 8)
    )  # fmt: skip
    head_input = tokens * 16 * 2 + tokens * 16 * 2  # the final norm's input and output
    assert whole.phase is chunked.phase is Phase.LOSS
    assert whole.bytes_of(Term.LOGITS_LOSS) == tokens * 64 * 12 + head_input
    assert chunked.bytes_of(Term.LOGITS_LOSS) == (
        tokens // 8 * 64 * 12 + head_input + tokens * 16 * (2 + 4)
    )
    assert (whole.bytes_of(Term.GRADIENTS), chunked.bytes_of(Term.GRADIENTS)) == (0, 64 * 16 * 2)
    for same in (Term.PARAMETERS, Term.OPTIMIZER, Term.WEIGHTS_IN_FLIGHT, Term.SAVED_ACTIVATIONS):
        assert whole.bytes_of(same) == chunked.bytes_of(same)


def test_a_setup_reads_the_loss_chunks_and_refuses_none():
    text = """[model]
name = "qwen3"
flavor = "14B"
[training]
local_batch_size = 4
seq_len = 4096
[loss]
num_chunks = {n}
"""
    assert parse_setup(text.format(n=8)).run.loss_chunks == 8
    assert parse_setup(text.replace("[loss]\nnum_chunks = {n}\n", "")).run.loss_chunks == 1
    with pytest.raises(F8RoofError, match="num_chunks"):
        parse_setup(text.format(n=0))
