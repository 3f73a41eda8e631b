"""torchtitan's checkpointing policies as data: lookups, the every-second-mm rule, full AC."""

import pytest

from f8roof.errors import ModelError
from f8roof.training.checkpointing import (
    DEFAULT_POLICY,
    LLAMA_FORWARD_LINEARS,
    MM,
    SAC_POLICIES,
    SCALED_MM,
    CheckpointingError,
    Decision,
    Recompute,
    SacPolicy,
    is_block_fqn,
    layer_checkpointed_blocks,
    recomputed_in_full,
    recomputed_linears,
    sac_policy,
    save_ops,
)


def test_policy_names():
    assert Recompute.from_name("Selective") is Recompute.SELECTIVE
    assert Recompute.from_name(Recompute.FULL) is Recompute.FULL
    with pytest.raises(ModelError, match="unknown recompute 'op'; use none, full or selective"):
        Recompute.from_name("op")


def test_save_ops_table_lookups():
    old = save_ops("torchtitan-2025-05")
    new = save_ops("torchtitan-0.3.0")
    assert save_ops() == new and DEFAULT_POLICY == "torchtitan-0.3.0"
    for op in (MM, "aten.max.default", "_c10d_functional.reduce_scatter_tensor.default"):
        assert op in old and op in new
    assert SCALED_MM not in old  # 2025: _scaled_mm never saved
    assert SCALED_MM in new  # 0.3.0: torch's compute_intensive_ops include it
    assert "aten.linear.default" in new and "aten.linear.default" not in old
    assert "aten.amax.default" not in old | new  # rowwise's amax is recomputed
    assert all(isinstance(op, str) and op.count(".") >= 2 for op in new)
    for policy in SAC_POLICIES.values():
        assert "torchtitan" in policy.source


def test_unknown_sac_policy_is_one_line():
    with pytest.raises(CheckpointingError, match="unknown SAC policy 'torchtitan-9'; known: "):
        sac_policy("torchtitan-9")


def test_every_second_mm_is_recomputed():
    policy = sac_policy("torchtitan-2025-05")
    got = policy.decide_sequence([MM, "aten.max.default", MM, "aten.add.Tensor", MM, MM])
    assert got == (
        Decision.SAVE,
        Decision.SAVE,
        Decision.RECOMPUTE,
        Decision.RECOMPUTE,
        Decision.SAVE,
        Decision.RECOMPUTE,
    )
    assert policy.decide(SCALED_MM) is Decision.RECOMPUTE
    assert sac_policy("torchtitan-0.3.0").decide(SCALED_MM) is Decision.SAVE
    with pytest.raises(CheckpointingError, match="needs its 1-based mm_count"):
        policy.decide(MM)


def test_llama_block_recomputes_wk_wo_w3_under_selective():
    bf16 = recomputed_linears("selective", float8=False, sac="torchtitan-2025-05")
    assert bf16 == ("attention.wk", "attention.wo", "feed_forward.w3")
    # float8 linears show SAC aten.mm (checked on torch 2.13 + torchao 0.18): same rule
    assert recomputed_linears("selective", float8=True, sac="torchtitan-2025-05") == bf16
    # if a graph showed _scaled_mm instead: 2025 recomputes all, 0.3.0 saves all
    assert (
        recomputed_linears(
            "selective", float8=True, sac="torchtitan-2025-05", float8_gemm_op=SCALED_MM
        )
        == LLAMA_FORWARD_LINEARS
    )
    assert (
        recomputed_linears(
            "selective", float8=True, sac="torchtitan-0.3.0", float8_gemm_op=SCALED_MM
        )
        == ()
    )
    assert recomputed_linears("full", float8=True) == LLAMA_FORWARD_LINEARS
    assert recomputed_linears("none", float8=False) == ()


def test_full_recomputes_blocks_never_lm_head():
    assert recomputed_in_full("model.layers.*.self_attn.q_proj")
    assert recomputed_in_full("layers.3.feed_forward.w2")
    assert recomputed_in_full("transformer.h.*.attn.c_attn")
    for fqn in ("lm_head", "output", "tok_embeddings", "norm", "model.embed_tokens"):
        assert not recomputed_in_full(fqn)
        assert not is_block_fqn(fqn)


def test_layer_sac_counts_blocks():
    assert layer_checkpointed_blocks(32, 2) == 16
    assert layer_checkpointed_blocks(32, 1) == 32
    assert layer_checkpointed_blocks(5, 3) == 1
    with pytest.raises(CheckpointingError, match="'op' or a positive integer"):
        layer_checkpointed_blocks(32, 0)


def test_a_new_policy_is_one_entry():
    policy = SacPolicy(
        name="test",
        source="here",
        save_ops=frozenset({MM}),
        mm_ops=frozenset({MM}),
        mm_save_period=3,
    )
    assert [d.value for d in policy.decide_sequence([MM] * 4)] == [
        "save",
        "save",
        "recompute",
        "save",
    ]
    with pytest.raises(CheckpointingError, match="not an op name like 'aten.mm.default'"):
        SacPolicy(name="bad", source="", save_ops=frozenset({"mm"}), mm_ops=frozenset({MM}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe, amax",
    [
        ("tensorwise", "aten.max.default"),
        # row-wise _scaled_mm on CPU: refused by torch 2.11's CPU backend (skipped there)
        pytest.param("rowwise", "aten.amax.default", marks=pytest.mark.cpu_rowwise),
    ],
)
def test_sac_sees_aten_mm_for_a_float8_linear_eager_and_compiled(recipe, amax):
    """The module's claim: SAC's policy sees a float8 linear as aten.mm (not _scaled_mm)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    from f8roof.profiler import torchao_float8

    seen: set[str] = set()

    def policy(ctx, func, *args, **kwargs):
        seen.add(str(func))
        return CheckpointPolicy.PREFER_RECOMPUTE

    def context_fn():
        return create_selective_checkpoint_contexts(policy)

    for compiled in (False, True):
        seen.clear()
        model = torch.nn.Sequential(
            torch.nn.Linear(32, 32, bias=False), torch.nn.Linear(32, 32, bias=False)
        ).to(torch.bfloat16)
        # torchao's conversion patches Inductor process-wide: undone after, for later tests
        with torchao_float8.inductor_patch_scope():
            convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe))
            wrapped = checkpoint_wrapper(model, context_fn=context_fn, preserve_rng_state=False)
            if compiled:
                wrapped = torch.compile(wrapped)
            x = torch.randn(16, 32, dtype=torch.bfloat16, requires_grad=True)
            wrapped(x).sum().backward()
        assert MM in seen, (compiled, sorted(seen))
        assert SCALED_MM not in seen
        assert amax in seen
