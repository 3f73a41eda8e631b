"""Async TP read off the compiled graph: a block compiled with Inductor's micro-pipeline pass
on a fake process group (codegen for h100, TP 2, per-op SAC), and which TP collectives the pass
fused with which gemms (`profiler.block.pipelined_collectives`).

These are the facts `engine/step/tp.async_tp` prices (its docstring, pair by pair): the
forward's gather beside every column gemm of its sub-block, the forward's reduce-scatter beside
the row gemm, the backward's gradient gather beside the row gemm's input gradient, SAC's
gathered-again input beside only the column gemms SAC reruns, and the backward's summed
input-gradient reduce-scatter left plain. Where torch 2.13 with torchao 0.18 compiles
otherwise than the pass's patterns intend (tensorwise's float8 gathers, one sequence per rank),
the test pins what it compiles, so a torch that changes it shows here.
"""

from __future__ import annotations

import pytest
import requires

from f8roof.training.block import BlockSpec, CollectiveKind, PipelinedCollective, Recompute
from f8roof.training.checkpointing import recomputed_linears
from f8roof.training.run_config import RunConfig

AG, RS = CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER
TP = 2
DIMS = {"dim": 1024, "n_heads": 32, "n_kv_heads": 8, "head_dim": 32, "ffn_dim": 2048}


def spec(sequences: int) -> BlockSpec:
    parallel = RunConfig.sharded(tp=TP, recompute=Recompute.SELECTIVE, async_tp=True)
    return BlockSpec(tokens=256 * sequences, seq_len=256, parallel=parallel, **DIMS)


def compiled(recipe: str | None, sequences: int = 2) -> tuple[PipelinedCollective, ...]:
    from f8roof.profiler.block import pipelined_collectives

    return pipelined_collectives(spec(sequences), recipe=recipe)


def kinds(found: tuple[PipelinedCollective, ...], graph: str) -> list[tuple[str, bool]]:
    return [(c.kind.name, c.fused) for c in found if c.graph == graph]


@pytest.mark.slow
def test_bf16_pairs_each_collective_as_the_step_prices_it() -> None:
    s = spec(2)
    m, dim, ffn = s.tokens, s.dim, s.ffn_dim // TP
    q, kv = s.q_dim // TP, s.kv_dim // TP
    found = compiled(None)
    fwd = [c for c in found if c.graph == "fwd"]
    bwd = [c for c in found if c.graph == "bwd"]
    # forward: each sub-block's gather beside all its column gemms, its reduce-scatter beside
    # the row gemm
    assert [(c.kind, c.gemms) for c in fwd] == [
        (AG, ((m, dim, q), (m, dim, kv), (m, dim, kv))),
        (RS, ((m, q, dim),)),
        (AG, ((m, dim, ffn), (m, dim, ffn))),
        (RS, ((m, ffn, dim),)),
    ]
    # backward: per sub-block (MLP first) the gradient gather beside the row gemm's input
    # gradient, SAC's gather of the input again beside the one column gemm it reruns (wk,
    # w3: the every-second-mm rule), and the summed input gradient's reduce-scatter plain
    rerun = recomputed_linears("selective", float8=False)
    assert rerun == ("attention.wk", "attention.wo", "feed_forward.w3")
    gathers = sorted(c.gemms for c in bwd if c.kind is AG)
    assert gathers == sorted([((m, dim, ffn),), ((m, dim, ffn),), ((m, dim, q),), ((m, dim, kv),)])
    assert [c.fused for c in bwd if c.kind is RS] == [False, False]
    # sizes: the full (batch, seq, dim) bf16 activation, an all-gather's output
    assert {c.bytes for c in found} == {m * dim * 2}


@pytest.mark.slow
@requires.torchao
@requires.torch_213_torchao_018
def test_float8_gathers_as_torch_2_13_compiles_them() -> None:
    # rowwise casts after the gather: no gather is fused, only the forward's reduce-scatters
    # (pytorch/pytorch#149990's trace); tensorwise gathers float8, and on torch 2.13 with
    # torchao 0.18 a detach between the uint8 view and the cat hides it from the pass too
    for recipe, itemsize in (("rowwise", 2), ("tensorwise", 1)):
        found = compiled(recipe)
        assert kinds(found, "fwd") == [("ALL_GATHER", False), ("REDUCE_SCATTER", True)] * 2
        assert not any(c.fused for c in found if c.graph == "bwd")
        gathered = {c.bytes for c in found if c.kind is AG}
        assert gathered == {spec(2).tokens * spec(2).dim * itemsize}


@pytest.mark.slow
@requires.torch_213_torchao_018
def test_one_sequence_per_rank_fuses_no_gather() -> None:
    # two reshapes stand between the gather and its gemm ((1, s, d) -> (s, d)): the pass's
    # pattern wants one; the reduce-scatters still fuse
    found = compiled(None, sequences=1)
    assert kinds(found, "fwd") == [("ALL_GATHER", False), ("REDUCE_SCATTER", True)] * 2
    assert not any(c.fused for c in found if c.kind is AG)


def test_what_async_tp_cannot_compile_says_so() -> None:
    from f8roof.profiler.block import pipelined_collectives
    from f8roof.profiler.capture import CaptureError

    one = BlockSpec(tokens=256, seq_len=256, parallel=RunConfig.sharded(fsdp=2), **DIMS)
    with pytest.raises(CaptureError, match="async TP needs tp 2 or more"):
        pipelined_collectives(one, recipe=None)


def llama_config(tmp_path) -> str:
    """A one-layer llama config.json of the test's dims."""
    import json

    config = {
        "model_type": "llama",
        "hidden_size": DIMS["dim"],
        "intermediate_size": DIMS["ffn_dim"],
        "num_attention_heads": DIMS["n_heads"],
        "num_key_value_heads": DIMS["n_kv_heads"],
        "num_hidden_layers": 1,
        "vocab_size": 256,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.slow
@requires.torchao
@requires.torch_213_torchao_018
def test_compare_async_tp_lists_each_collective_fused_or_plain(cli, tmp_path) -> None:
    args = ["compare", "--model", llama_config(tmp_path), "--tokens", "512", "--seq-len", "256"]
    result = cli(*args, "--tp", "2", "--recipe", "rowwise", "--async-tp")
    assert result.exit_code == 0, result.output
    text = result.output.split("async TP")[1]
    # no recompute: per sub-block the forward's gather and reduce-scatter and the backward's
    # gradient gather run beside gemms; the backward's summed reduce-scatter stays plain
    assert "bf16: 6 of 8 TP collectives run beside gemms" in text
    # rowwise casts after each gather: only its forward reduce-scatters fuse
    assert "rowwise: 2 of 8 TP collectives run beside gemms" in text
    rowwise = text.split("rowwise:")[1].splitlines()[1:]
    assert rowwise[0].split()[:2] == ["fwd", "all_gather_into_tensor"]
    assert rowwise[0].endswith("plain") and rowwise[1].endswith(
        "512x512x1024"
    )  # wo: M, q_dim / tp, dim


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tp", "1"], "--async-tp pipelines TP collectives: give --tp 2 or more"),
        (["--tp", "2", "--device", "cpu"], "--async-tp compiles for codegen only"),
    ],
)
def test_compare_async_tp_refuses_in_one_line(cli, tmp_path, extra, message) -> None:
    args = ["compare", "--model", llama_config(tmp_path), "--tokens", "512", "--async-tp"]
    result = cli(*args, *extra)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
