"""The caching allocator's rules (training/allocator.py) on sequences worked by hand, and the
step's sequence (training/memory.py) against the phases' allocated peak it is built from."""

from dataclasses import replace

import pytest

from f8roof.training.allocator import (
    MIB,
    Alloc,
    AllocatorError,
    Free,
    Stream,
    round_size,
    segment_size,
    simulate,
)
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import Recompute
from f8roof.training.memory import RESERVE_TERMS, Term, memory_estimate
from f8roof.training.run_config import RunConfig

GIB = 2**30


def test_requests_round_to_512_bytes_and_segments_to_the_pool_sizes():
    assert round_size(1) == 512 and round_size(513) == 1024
    assert segment_size(MIB) == 2 * MIB  # small pool: 2 MiB segments
    assert segment_size(5 * MIB) == 20 * MIB  # 1-10 MiB: a 20 MiB segment
    assert segment_size(30 * MIB + 1) == 32 * MIB  # larger: rounded up to 2 MiB


def test_a_free_block_serves_its_own_stream_only():
    same = simulate([Alloc("a", 100 * MIB), Free("a"), Alloc("b", 100 * MIB)])
    other = simulate(
        [Alloc("a", 100 * MIB), Free("a"), Alloc("b", 100 * MIB, Stream.REDUCE_SCATTER)]
    )
    assert same.reserved_bytes == 100 * MIB
    assert other.reserved_bytes == 200 * MIB
    assert other.allocated_bytes == 100 * MIB


def test_an_expandable_segment_maps_20_mib_pages_and_folds_its_free_tail():
    found = simulate([Alloc("a", 30 * MIB), Alloc("b", 30 * MIB)])
    # a: two pages (40 MiB); b: the 10 MiB free tail and one page more
    assert found.reserved_bytes == 60 * MIB
    assert found.allocated_bytes == 60 * MIB


def test_a_hole_too_small_for_a_request_is_reserved_beyond_the_allocated_peak():
    events = [Alloc("a", 100 * MIB), Alloc("b", 100 * MIB), Free("a"), Alloc("c", 150 * MIB)]
    expandable = simulate(events)
    segments = simulate(events, expandable=False)
    assert expandable.allocated_bytes == segments.allocated_bytes == 250 * MIB
    assert expandable.reserved_bytes == (100 + 100 + 160) * MIB  # c: eight 20 MiB pages
    assert segments.reserved_bytes == (100 + 100 + 150) * MIB  # c: its own segment
    assert expandable.reserve_beyond(Stream.COMPUTE) == 110 * MIB


def test_freed_neighbours_merge_and_serve_a_request_of_their_sum():
    events = [Alloc("a", 40 * MIB), Alloc("b", 40 * MIB), Free("a"), Free("b")]
    assert simulate([*events, Alloc("c", 80 * MIB)]).reserved_bytes == 80 * MIB


def test_a_sequence_that_frees_what_it_never_allocated_is_refused():
    with pytest.raises(AllocatorError):
        simulate([Free("a")])
    with pytest.raises(AllocatorError):
        simulate([Alloc("a", 1), Alloc("a", 1)])


CASES = [
    (tp, fsdp, mode, compiled)
    for tp, fsdp in ((1, 1), (1, 8), (2, 2), (8, 8))
    for mode in Recompute
    for compiled in (True, False)
]


@pytest.mark.parametrize(("tp", "fsdp", "mode", "compiled"), CASES)
def test_the_terms_add_up_to_the_reserved_peak_and_the_sequence_to_the_allocated(
    tp, fsdp, mode, compiled
):
    arch = builtin("llama3-8b")
    run = replace(
        RunConfig.from_options(tp=tp, fsdp=fsdp, recompute=mode.value),
        seq_len=8192,
        loss_compiled=compiled,
    )
    converted = [lin.fqn for lin in arch.linears if lin.fqn != "lm_head"]
    found = memory_estimate(
        arch, tokens=8192, run=run, recipe="tensorwise", converted=converted,
        gpu_memory_bytes=80 * GIB,
    )  # fmt: skip
    for peak in (found.bf16, found.fp8):
        reserve = sum(peak.bytes_of(t) for t in RESERVE_TERMS.values())
        assert sum(t.bytes for t in peak.terms) == peak.peak_bytes
        assert peak.peak_bytes - reserve == peak.allocated_bytes
        assert reserve >= 0
        if fsdp > 1:  # the sharded gradients stay cached on the reduce-scatter stream
            grads = peak.bytes_of(Term.PARAMETERS)  # fp32, as many as the parameters
            held = peak.bytes_of(Term.GRADIENTS)
            assert peak.bytes_of(Term.GRADIENT_POOL) + held >= grads * 0.99
