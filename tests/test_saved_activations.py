"""What a compiled block saves for the backward (profiler/memory_check.py's `saved_activations`,
read off AOTAutograd's partition)."""

import pytest

torch = pytest.importorskip("torch")


def _read_saved(fn, *args):
    """fn's forward and backward graphs as AOTAutograd partitions them, and what they save."""
    from functorch.compile import aot_function, min_cut_rematerialization_partition

    from f8roof.profiler.memory_check import saved_tensors

    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return gm

    compiled = aot_function(
        fn, fw_compiler=keep, bw_compiler=keep, partition_fn=min_cut_rematerialization_partition
    )
    compiled(*args).sum().backward()
    forward, backward = graphs[0].graph, graphs[1].graph
    first = [i == 0 for i, _ in enumerate(forward.find_nodes(op="placeholder"))]
    return saved_tensors(forward, backward, first)


def test_the_reader_returns_what_the_backward_takes_and_marks_what_grows_with_the_input():
    """sin(x @ w): the backward needs x and w for the gemm's gradients and the gemm's output
    for sin's (cos of it, recomputed or not); only what x flows into is an activation."""
    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 6, requires_grad=True)
    saved = _read_saved(lambda x, w: torch.sin(x @ w), x, w)
    # the gemm's backward takes x and w transposed: views, each keeping its input's storage
    inputs = {t.bytes: t.activation for t in saved if t.op == "input"}
    assert inputs == {8 * 4 * 4: True, 4 * 6 * 4: False}
    computed = [t for t in saved if t.op != "input"]
    assert computed and all(t.activation for t in computed)
    assert all(t.bytes == 8 * 6 * 4 for t in computed)  # fp32, the gemm's output's size
