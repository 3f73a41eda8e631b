"""torchtitan's fused q/k/v projection (`attention.qkv_linear.wqkv`, its llama3 and qwen3
default since pytorch/torchtitan#3714) as a row layout: one column-parallel row of
(heads + 2 kv_heads) x head_dim outputs, one input cast, chosen by a run's `fuse_qkv`."""

import pytest
from conftest import invoke_cli

import f8roof
from f8roof.engine.step.parts import Part
from f8roof.notes import Topic
from f8roof.traffic.byte_table import ModelKey, model_bytes
from f8roof.traffic.recipes import Role
from f8roof.traffic.variant import Context, Level, context_fused_roles
from f8roof.training.catalog import FUSED_QKV, TPStyle, builtin, fuse_qkv
from f8roof.training.memory import Term, memory_estimate
from f8roof.training.parallel import local_layers
from f8roof.training.run_config import Recompute, RunConfig
from f8roof.training.torchtitan_names import filtered, printed_filters

WQKV = f"layers.*.{FUSED_QKV}"


@pytest.mark.parametrize(
    "model, dim, heads, kv_heads, head_dim",
    [("llama3-8b", 4096, 32, 8, 128), ("qwen3-14b", 5120, 40, 8, 128)],
)
def test_the_fused_row_is_q_k_and_v_as_one_column_parallel_linear(
    model, dim, heads, kv_heads, head_dim
):
    apart = builtin(model)
    fused = fuse_qkv(apart)
    (row,) = [lin for lin in fused.linears if lin.fqn == WQKV]
    assert (row.K, row.N) == (dim, (heads + 2 * kv_heads) * head_dim)
    assert row.tp is TPStyle.COLUMN and row.heads == kv_heads  # TP shards whole kv groups
    assert row.count == apart.linears[0].count
    assert row.context == apart.linears[0].context  # the attention norm's output, as q's
    assert len(fused.linears) == len(apart.linears) - 2
    assert fused.linears[0] == row  # q's place: the block's first forward mm
    assert not any(f.endswith(("q_proj", "k_proj", "v_proj", ".wq", ".wk", ".wv"))
                   for f in (lin.fqn for lin in fused.linears))  # fmt: skip
    assert fused.parameter_count == apart.parameter_count
    assert fuse_qkv(fused) == fused


def test_each_tp_rank_runs_n_over_tp_whole_kv_groups():
    # llama3-8b under TP 8: one kv group a rank, its 4 q heads, its k and its v: 6 x 128
    fused = fuse_qkv(builtin("llama3-8b"))
    local = {x.linear.fqn: x for x in local_layers(fused, 8192, RunConfig(tp=8))}
    assert local[WQKV].shape == (8192, 4096, 6144 // 8) == (8192, 4096, (4 + 2) * 128)
    with pytest.raises(f8roof.F8RoofError, match="does not divide the 8 heads"):
        local_layers(fused, 8192, RunConfig(tp=16))


def test_a_model_torchtitan_does_not_fuse_is_refused_in_one_line():
    with pytest.raises(f8roof.F8RoofError, match="llama3 and qwen3 models only, not mistral"):
        f8roof.answer_model("mistral-7b", 8192, gpu="h100", fuse_qkv=True)


def _attention_rows(plan):
    rows = plan.recommendation.rows
    return {
        str(f): rows.row(i)
        for i, f in enumerate(rows["fqn"])
        if str(f).endswith(("q_proj", "k_proj", "v_proj", FUSED_QKV))
    }


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_a_float8_fused_answer_casts_the_attention_input_once(recipe):
    """q, k and v each cast the attention norm's output (one input cast a row); the fused row
    casts it once. A linear's overhead bytes are affine in N at its M and K, so the separate
    rows pay the fused row's bytes plus twice the part no N scales: the input's casts, and
    under rowwise the input gradient's rescale (three dgrad gemms, not one)."""
    apart = _attention_rows(f8roof.answer_model("llama3-8b", 8192, gpu="h100", recipe=recipe))
    fused_plan = f8roof.answer_model("llama3-8b", 8192, gpu="h100", recipe=recipe, fuse_qkv=True)
    (fused,) = _attention_rows(fused_plan).values()
    assert len(apart) == 3
    assert fused["N"] == sum(r["N"] for r in apart.values())
    config = fused_plan.resolved.config
    key = ModelKey(
        config.recipe,
        Level.WORST,
        config.implementation,
        context_fused_roles(Context.from_name(str(fused["context"]))),
    )
    model = model_bytes(key)
    assert model is not None
    M, K = int(fused["M"]), int(fused["K"])
    per_linear = float(model.total.exact((M, K, 0)))  # what no N scales
    separate = sum(r["overhead_bytes_worst"] for r in apart.values())
    assert separate - fused["overhead_bytes_worst"] == pytest.approx(2 * per_linear, rel=1e-12)
    # ... and that part is the input's casts (reading bf16, writing float8, at least 3 bytes
    # an element), with rowwise's rescale of the input gradient, but M-wide and K-wide scales
    cast = float(model.sum(lambda k: k.role is Role.INPUT).exact((M, K, 0)))
    rescale = float(model.sum(lambda k: k.name.startswith("grad_input")).exact((M, K, 0)))
    assert cast >= 3 * M * K
    assert (rescale > 0) == (recipe == "rowwise")
    assert cast + rescale == pytest.approx(per_linear, rel=1e-3)


def test_the_printed_filter_names_wqkv_and_keeps_exactly_the_bf16_rows():
    # llama3-8b rowwise on h100 keeps the fused projection in bf16 (0.97x alone): torchtitan's
    # filter_fqns names it by its 2026 name, and keeps nothing else the answer converts
    plan = f8roof.answer_model(
        "llama3-8b", 8192, gpu="h100", recipe="rowwise", fsdp=8, recompute="selective",
        fuse_qkv=True,
    )  # fmt: skip
    rows = plan.recommendation.rows
    kept = {str(f) for f, c in zip(rows["fqn"], rows["convert"]) if not c}
    assert WQKV in kept
    entries = plan.torchtitan.filter_fqns
    assert FUSED_QKV in entries
    for fqn, count in zip(rows["fqn"], rows["count"]):
        assert filtered(str(fqn), entries, count=int(count)) == (str(fqn) in kept), fqn


def test_a_qwen3_wkv_filter_keeps_nothing_of_the_fused_layout_and_wq_keeps_it_whole():
    # torchtitan matches substrings: `attention.qkv_linear.wkv` (the B200 run's) is in no fused
    # fqn, `attention.qkv_linear.wq` is in `...wqkv`
    rows = [(WQKV, 40), ("layers.*.attention.wo", 40), ("lm_head", 1)]
    assert not filtered(WQKV, ["attention.qkv_linear.wkv"], count=40)
    assert filtered(WQKV, ["attention.qkv_linear.wq"], count=40)
    printed = printed_filters(
        [f for f, _ in rows], [c for _, c in rows], [False, True, False], [False] * 3,
        family="qwen3",
    )  # fmt: skip
    assert printed.filter_fqns == ("lm_head", FUSED_QKV)
    assert printed.kept == (WQKV, "lm_head")


def test_per_op_sac_saves_the_fused_output_as_its_first_mm():
    """torchtitan's per-op SAC saves every second mm's output: q and v of wq, wk, wv, then
    w1 and w2; fused, wqkv whole (q, k and v), then w1 and w2 as before. The fused layout
    saves k's output more: 32 blocks x 8192 tokens x 1024 x bf16."""

    def saved(fused):
        run = RunConfig(fsdp=8, seq_len=8192, recompute=Recompute.SELECTIVE, fuse_qkv=fused)
        peak = memory_estimate(
            builtin("llama3-8b"), tokens=8192, run=run, recipe="rowwise", converted=(),
            gpu_memory_bytes=2**40,
        ).bf16  # fmt: skip
        return peak.bytes_of(Term.SAVED_ACTIVATIONS)

    assert saved(True) - saved(False) == pytest.approx(32 * 8192 * 1024 * 2, abs=1)


def test_context_parallel_gathers_the_same_keys_and_values_either_way():
    def answer(fused):
        return f8roof.answer_model(
            "llama3-8b", 16384, gpu="h100", fsdp=4, cp=2, recipe="tensorwise", fuse_qkv=fused
        )

    apart, fused = answer(False), answer(True)
    cp = (apart.summary.part(Part.CP_COMM), fused.summary.part(Part.CP_COMM))
    assert cp[0].bf16_s > 0 and cp[1].bf16_s == pytest.approx(cp[0].bf16_s, rel=1e-12)
    assert fused.memory is not None and apart.memory is not None
    saved = [
        a.memory.estimate.bf16.bytes_of(Term.SAVED_ACTIVATIONS) for a in (apart, fused)
    ]  # no recompute: every linear's output saved, q, k and v as one
    assert saved[1] == saved[0]


@pytest.mark.parametrize("recipe, layout", [
    ("tensorwise", {"fsdp": 8}),
    ("rowwise", {"fsdp": 8, "recompute": "selective"}),
    ("tensorwise", {"fsdp": 4, "tp": 2, "recompute": "selective"}),
])  # fmt: skip
def test_the_fused_step_is_the_separate_graphs_moved_by_what_fusing_changes_in_the_rows(
    recipe, layout
):
    """The shipped sharded blocks hold q, k and v apart: a fused run's step is theirs, the
    separate layout converted alike, moved by the per-layer rows' difference between the two
    layouts, so the two steps differ by exactly what their per-layer steps differ by."""

    def answer(fused):
        return f8roof.answer_model(
            "llama3-8b", 8192, gpu="h100", recipe=recipe, fuse_qkv=fused, **layout
        )

    apart, fused = answer(False), answer(True)
    assert apart.block is not None and fused.block is not None  # both from the graphs
    assert any(n.topic is Topic.FUSED_QKV_MOVED for n in fused.step.as_run.notes)
    assert fused.step.fits_only is not None and apart.step.fits_only is not None
    for precision in ("bf16_s", "fp8_s"):
        on_graphs = getattr(fused.step.as_run, precision) - getattr(apart.step.as_run, precision)
        by_rows = getattr(fused.step.fits_only, precision) - getattr(
            apart.step.fits_only, precision
        )
        assert by_rows != 0
        assert on_graphs == pytest.approx(by_rows, rel=1e-9, abs=1e-12), precision


def test_the_command_line_and_a_setup_choose_the_fused_layout(tmp_path):
    base = ("estimate", "--model", "qwen3-14b", "--tokens", "8192", "--gpu", "b200")
    out = invoke_cli(*base, "--fsdp", "8", "--fuse-qkv")
    assert out.exit_code == 0, out.output
    assert "attention.qkv_linear.wqkv" in out.output
    assert "attention.qkv_linear.wk " not in out.output
    refused = invoke_cli("estimate", "--model", "gpt2", "--tokens", "8192", "--fuse-qkv")
    assert refused.exit_code == 2 and "--fuse-qkv" in refused.output
    setup = tmp_path / "fused.toml"
    setup.write_text(
        '[model]\nname = "llama3-8b"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n'
        "[parallelism]\ndata_parallel_shard_degree = 8\n[f8roof]\nfuse_qkv = true\n"
    )
    plan = f8roof.answer_setup(setup, gpu="h100")
    assert plan.run.fuse_qkv and WQKV in set(plan.recommendation.rows["fqn"])
    beside = invoke_cli("estimate", "--setup", setup, "--fuse-qkv")
    assert beside.exit_code == 2 and "drop --fuse-qkv" in beside.output
    named = invoke_cli(
        "estimate", "--setup", "llama3:llama3_8b", "--set", "f8roof.fuse_qkv=true", "--gpu", "h100"
    )
    assert named.exit_code == 0, named.output
    assert "attention.qkv_linear.wqkv" in named.output


def test_no_run_fuses_unless_asked():
    assert RunConfig().fuse_qkv is False
    plan = f8roof.answer_model("qwen3-14b", 8192, gpu="b200", fsdp=8)
    assert WQKV not in set(plan.recommendation.rows["fqn"])
