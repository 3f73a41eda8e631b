"""training/memory.py against torch's own FSDP2 memory tracker (profiler/memory_check.py): a
small llama trained one step on a fake TP 2 x FSDP 2 world, counted tensor by tensor."""

import pytest

from f8roof.profiler.memory.step import beside_the_model
from f8roof.training.block import BlockSpec
from f8roof.training.catalog import from_hf_config
from f8roof.training.checkpointing import Recompute
from f8roof.training.memory import Term
from f8roof.training.run_config import RunConfig

pytest.importorskip("torchao")

LAYERS, VOCAB, TOKENS, SEQ = 4, 4096, 2048, 1024
CONFIG = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "num_hidden_layers": LAYERS,
    "vocab_size": VOCAB,
}
MIB = 2**20


def _both(recompute: Recompute, recipe: str | None):
    run = RunConfig.sharded(tp=2, fsdp=2, recompute=recompute)
    spec = BlockSpec(
        dim=512, n_heads=8, n_kv_heads=4, head_dim=64, ffn_dim=1536, tokens=TOKENS, seq_len=SEQ,
        parallel=run,
    )  # fmt: skip
    arch = from_hf_config(CONFIG, name="small-llama")
    return beside_the_model(arch, spec, recipe=recipe, gpu_memory_bytes=80 * 2**30)


@pytest.mark.parametrize("recipe", [None, "tensorwise", "rowwise"])
@pytest.mark.parametrize("recompute", [Recompute.FULL, Recompute.SELECTIVE])
def test_the_modelled_peak_is_what_torch_counts(recompute, recipe):
    model, torch_counts = _both(recompute, recipe)
    # FSDP2's states and gathered weights byte for byte: fp32 shards of every parameter,
    # AdamW's two states, the last block and the root unsharded in bf16
    assert model.bytes_of(Term.PARAMETERS) == pytest.approx(
        torch_counts.by_category["Sharded Param"], rel=1e-3
    )
    assert model.bytes_of(Term.OPTIMIZER) == pytest.approx(
        torch_counts.by_category["OptState"], rel=1e-3
    )
    assert model.bytes_of(Term.WEIGHTS_IN_FLIGHT) == pytest.approx(
        torch_counts.by_category["Unsharded Param"], rel=1e-3
    )
    # the peak at the loss, where no gradient exists yet; the rest (saved activations, the
    # loss-parallel tensors) within 3 MiB of 130-170: eager's final norm saves a little more
    assert model.bytes_of(Term.GRADIENTS) == torch_counts.by_category.get("Sharded Grad", 0) == 0
    assert 0 <= torch_counts.total_bytes - model.allocated_bytes < 3.5 * MIB


def test_tensorwise_saves_float8_inputs_where_torch_does_without_recompute():
    # the one mode where the block's own saved tensors reach the peak: tensorwise under TP
    # saves the linears' float8 inputs (torchao's float8 TP plan casts before the gather)
    bf16, bf16_counts = _both(Recompute.NONE, None)
    fp8, fp8_counts = _both(Recompute.NONE, "tensorwise")
    saved = bf16.allocated_bytes - fp8.allocated_bytes
    counted = bf16_counts.total_bytes - fp8_counts.total_bytes
    assert saved > 0 and counted > 0
    assert saved == pytest.approx(counted, rel=0.2)


@pytest.mark.slow
def test_a_measured_step_trains_the_compiled_rank_and_reads_no_allocator_on_cpu():
    # the GPU session's path (scripts/gpu_session.sh --memory), run on CPU: the whole model
    # built on meta, parallelized, each block compiled, materialized and trained two steps
    import torch

    from f8roof.profiler.memory.step import measured_peak

    run = RunConfig.sharded(tp=2, fsdp=2, recompute=Recompute.SELECTIVE)
    spec = BlockSpec(
        dim=256, n_heads=4, n_kv_heads=2, head_dim=64, ffn_dim=768, tokens=512, seq_len=256,
        parallel=run,
    )  # fmt: skip
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    got = measured_peak(spec, layers=2, vocab=1024, device="cpu")
    assert got.device == "cpu" and got.step_seconds > 0
    assert got.allocated_bytes is None and got.reserved_bytes is None
    # one block graph compiled and reused by the other block
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_a_measured_peak_without_a_gpu_is_refused_in_one_line(monkeypatch):
    import torch

    from f8roof.profiler.capture import CaptureError
    from f8roof.profiler.memory.step import measured_peak

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    spec = BlockSpec(
        dim=256, n_heads=4, n_kv_heads=2, head_dim=64, ffn_dim=768, tokens=512, seq_len=256,
        parallel=RunConfig.sharded(tp=2, fsdp=2, recompute=Recompute.SELECTIVE),
    )  # fmt: skip
    with pytest.raises(CaptureError, match="needs a CUDA device"):
        measured_peak(spec, layers=2, vocab=1024, device="cuda")
