"""`f8roof plan` / `f8roof.best_runs`: the best run of each precision over torchtitan's layouts.

The search's pruning is checked against a brute force over a synthetic model (memory and step
as the real ones behave: memory grows with the local batch, recompute adds time and frees
memory); the real search on a small model (gpt2 on 2 GPUs, seconds) and on cells of the
issue's matrix (dense and MoE, FSDP and HSDP) for the properties the issue names: the re-tuned
speedup never below the like-for-like one, every printed layout re-read from its torchtitan
overrides to the same step, refusals in one line; the frontier plot draws the search's points."""

import json
import math
from dataclasses import replace

import pytest
from conftest import invoke_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import f8roof
from f8roof.engine.plan import TorchtitanConfig
from f8roof.engine.step.search import (
    HSDP_MIN_GPUS,
    LONG_SEQ_LEN,
    MAX_LOCAL_BATCH,
    RECOMPUTE_ORDER,
    Arm,
    Layout,
    Point,
    search,
    torchtitan_overrides,
)
from f8roof.errors import F8RoofError
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import ParallelismError

GIB = 2**30
# a synthetic part: per-sequence activations by recompute mode (GiB), the time it reruns
SAVED = {Recompute.NONE: 10.0, Recompute.SELECTIVE: 6.0, Recompute.FULL: 2.0}
RERUN = {Recompute.NONE: 1.0, Recompute.SELECTIVE: 1.15, Recompute.FULL: 1.33}


def synthetic(layout: Layout) -> Point:
    """A model whose memory grows with the local batch and whose step has a fixed part (so
    tokens/s grows with the batch); float8 saves 20% of activations and 25% of compute."""
    if layout.tp == 8:
        raise ParallelismError("8 does not divide the heads")
    states = 60.0 / layout.fsdp / layout.tp
    saved = SAVED[layout.recompute] * layout.local_batch / layout.tp
    work = RERUN[layout.recompute] * layout.local_batch / layout.tp
    return Point(
        layout=layout,
        seq_len=1024,
        bf16_s=0.3 + work,
        fp8_s=0.3 + 0.75 * work,
        bf16_peak_bytes=int((states + saved) * GIB),
        fp8_peak_bytes=int((states + 0.8 * saved) * GIB),
        bf16_fits=states + saved <= 75,
        fp8_fits=states + 0.8 * saved <= 75,
        float8_all_gather=False,
        converter=TorchtitanConfig(recipe=layout.recipe, filter_fqns=("output",)),
    )


def largest_fitting(layout: Layout, arm: Arm) -> int:
    """The synthetic part's true largest local batch in `arm` (0: none)."""
    fitting = [b for b in range(1, 200) if synthetic(replace(layout, local_batch=b)).fits(arm)]
    return max(fitting, default=0)


def run_synthetic(gpus: int, asked: list[Layout] | None = None, *, hint: int | None = None):
    """The search over the synthetic part; `hint`: each answer knows its largest batches
    (their error added: 0 exact, more: a wrong hint the bisection must correct)."""

    def evaluate(layout: Layout) -> Point:
        if asked is not None:
            asked.append(layout)
        point = synthetic(layout)
        if hint is None:
            return point
        largest = tuple(largest_fitting(layout, arm) + hint for arm in Arm)
        return replace(point, largest=largest)

    return search(
        evaluate,
        model="synthetic",
        gpu="h100",
        gpus=gpus,
        gpus_per_node=8,
        seq_len=1024,
        recipes=("tensorwise",),
    )


def brute_force_best(gpus: int, arm: Arm) -> float:
    """Every layout, every local batch up to the synthetic part's limit: the best tokens/s."""
    best = 0.0
    for tp in (1, 2, 4):
        for mode in RECOMPUTE_ORDER:
            for batch in range(1, 200):
                p = synthetic(Layout("tensorwise", 1, tp, gpus // tp, mode, batch))
                if p.fits(arm):
                    best = max(best, p.tokens_per_s(arm))
    return best


@pytest.mark.parametrize("hint", [None, 0, 3])
@pytest.mark.parametrize("gpus", [4, 8])
def test_pruned_search_finds_the_brute_force_best(gpus, hint):
    found = run_synthetic(gpus, hint=hint)
    for arm in Arm:
        assert math.isclose(found.best(arm).tokens_per_s(arm), brute_force_best(gpus, arm))


def test_pruned_search_asks_far_fewer_layouts_than_the_grid():
    asked: list[Layout] = []
    run_synthetic(8, asked)
    assert len(asked) == len(set(asked))  # each layout asked once
    assert len(asked) < 3 * 3 * 30  # the grid up to the largest batch that fits


def test_known_largest_batches_spare_the_doubling():
    doubled: list[Layout] = []
    hinted: list[Layout] = []
    run_synthetic(8, doubled)
    run_synthetic(8, hinted, hint=0)
    assert len(hinted) < len(doubled)


def test_costlier_recompute_is_asked_only_where_cheaper_ones_do_not_fit_both():
    asked: list[Layout] = []
    run_synthetic(8, asked)
    for lay in asked:
        if lay.tp == 8:  # refused
            continue
        for cheaper in RECOMPUTE_ORDER[: RECOMPUTE_ORDER.index(lay.recompute)]:
            p = synthetic(Layout(lay.recipe, lay.pp, lay.tp, lay.fsdp, cheaper, lay.local_batch))
            assert not (p.bf16_fits and p.fp8_fits), lay


def test_refused_layouts_are_kept_with_their_reason():
    found = run_synthetic(8)
    assert found.refused and all(lay.tp == 8 for lay, _ in found.refused)
    assert all("divide" in reason for _, reason in found.refused)


def test_float8_memory_headroom_buys_a_larger_batch_than_bf16():
    found = run_synthetic(8)
    assert found.best(Arm.FLOAT8).layout.local_batch > found.best(Arm.BF16).layout.local_batch
    assert found.retuned_speedup > found.like_for_like_speedup


def test_a_model_that_fits_nowhere_is_refused_in_one_line():
    def never(layout: Layout) -> Point:
        return synthetic(Layout(layout.recipe, layout.pp, layout.tp, 1, layout.recompute, 1000))

    with pytest.raises(F8RoofError) as e:
        search(never, model="m", gpu="h100", gpus=4, gpus_per_node=8, seq_len=1024, recipes=("x",))
    assert "fits no layout" in str(e.value) and "\n" not in str(e.value)


def test_batches_stop_at_the_largest_searched():
    def tiny(layout: Layout) -> Point:
        p = synthetic(layout)
        return Point(**{**vars(p), "bf16_fits": True, "fp8_fits": True})

    found = search(
        tiny, model="m", gpu="h100", gpus=1, gpus_per_node=8, seq_len=1024, recipes=("x",)
    )
    assert max(p.layout.local_batch for p in found.points) == MAX_LOCAL_BATCH


def test_overrides_name_torchtitans_keys_and_the_float8_converter():
    point = synthetic(Layout("tensorwise", 2, 4, 2, Recompute.SELECTIVE, 3))
    bf16 = dict(torchtitan_overrides(point, Arm.BF16))
    assert bf16["parallelism.tensor_parallel_degree"] == 4
    assert bf16["parallelism.data_parallel_shard_degree"] == 2
    assert bf16["parallelism.pipeline_parallel_degree"] == 2
    assert bf16["parallelism.enable_async_tensor_parallel"] is True
    assert bf16["activation_checkpoint.mode"] == "selective"
    assert bf16["training.local_batch_size"] == 3
    assert not any(k.startswith(("float8", "model.converters")) for k in bf16)
    fp8 = dict(torchtitan_overrides(point, Arm.FLOAT8))
    assert fp8["model.converters"] == ["float8"] and fp8["float8.recipe_name"] == "tensorwise"


# the real search: gpt2 (12 heads: TP 8 refused) on 2 H100s, short sequences
@pytest.fixture(scope="module")
def small():
    return f8roof.best_runs("gpt2", 2, gpu="h100", seq_len=1024)


def test_retuned_speedup_is_never_below_like_for_like(small):
    assert small.like_for_like_speedup is not None
    assert small.retuned_speedup >= small.like_for_like_speedup


def _reanswered(model: str, point, gpu: str, *, fuse_qkv: bool = False):
    """A searched point answered again through the public API, from its layout alone."""
    lay = point.layout
    return f8roof.answer_model(
        model,
        seq_len=point.seq_len,
        local_batch_size=lay.local_batch,
        gpu=gpu,
        tp=lay.tp,
        fsdp=lay.fsdp,
        recompute=lay.recompute.value,
        recipe=lay.recipe or "tensorwise",
        async_tp=lay.async_tp,
        float8_all_gather=point.float8_all_gather,
        fuse_qkv=fuse_qkv,
    )


def test_every_printed_layout_reanswers_to_the_same_step(small):
    for arm in Arm:
        for point in small.ranked(arm)[:3]:
            plan = _reanswered("gpt2", point, "h100")
            assert math.isclose(plan.step.chosen.bf16_s, point.bf16_s, rel_tol=1e-9)
            assert math.isclose(plan.step.chosen.fp8_s, point.fp8_s, rel_tol=1e-9)
            assert plan.memory is not None and plan.memory.estimate.fp8_fits == point.fp8_fits


def test_every_ranked_layout_fits_and_none_unfitting_is_ranked(small):
    for arm in Arm:
        ranked = small.ranked(arm)
        assert all(p.fits(arm) for p in ranked)
        assert len(ranked) == sum(p.fits(arm) for p in small.points)


@pytest.mark.parametrize("gpus", [0, -8, True, "8", 2.0])
def test_bad_gpu_counts_are_refused(gpus):
    with pytest.raises(F8RoofError):
        f8roof.best_runs("gpt2", gpus)


def test_cli_prints_both_bests_and_writes_every_layout(tmp_path):
    out = tmp_path / "layouts.json"
    result = invoke_cli("plan", "--model", "gpt2", "--gpus", "2", "--seq-len", "1024", "--out", out)
    assert result.exit_code == 0, result.output
    assert "best bf16:" in result.output and "best float8:" in result.output
    assert "layouts evaluated" in result.output and "--set parallelism." in result.output
    rows = json.loads(out.read_text())
    evaluated = int(result.output.split(": ")[1].split(" layouts")[0])
    assert len(rows) == evaluated


def test_cli_refuses_a_model_that_fits_nowhere_in_one_line():
    result = invoke_cli("plan", "--model", "llama3-8b", "--gpus", "1")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "fits no layout" in result.output


def test_cli_refuses_a_bad_gpu_count_by_its_flag():
    result = invoke_cli("plan", "--model", "gpt2", "--gpus", "0")
    assert result.exit_code == 2 and "--gpus" in result.output


@pytest.mark.slow
def test_llama3_8b_on_8_h100s_gains_from_float8_and_reanswers():
    found = f8roof.best_runs("llama3-8b", 8, gpu="h100")
    best = found.best(Arm.FLOAT8)
    assert found.retuned_speedup >= (found.like_for_like_speedup or 0) > 1
    plan = _reanswered("llama3-8b", best, "h100")
    assert math.isclose(plan.step.chosen.fp8_s, best.fp8_s, rel_tol=1e-9)


@pytest.mark.slow
def test_a_fused_qkv_search_answers_every_layout_fused():
    """--fuse-qkv is the model's build, not a layout: each best re-answers with estimate's
    --fuse-qkv, and the fused search differs from the separate one (one input cast, one gemm)."""
    fused = f8roof.best_runs("llama3-8b", 8, gpu="h100", fuse_qkv=True)
    apart = f8roof.best_runs("llama3-8b", 8, gpu="h100")
    assert fused.fuse_qkv and not apart.fuse_qkv
    for arm in Arm:
        best = fused.best(arm)
        plan = _reanswered("llama3-8b", best, "h100", fuse_qkv=True)
        assert math.isclose(plan.step.chosen.bf16_s, best.bf16_s, rel_tol=1e-9)
        assert math.isclose(plan.step.chosen.fp8_s, best.fp8_s, rel_tol=1e-9)
    # the layouts both searched (each searches the local batches its own choice fits)
    apart_at = {p.layout: p for p in apart.points}
    both = [(p, apart_at[p.layout]) for p in fused.points if p.layout in apart_at]
    assert both and all(f.fp8_s != a.fp8_s for f, a in both if f.layout.recipe)


def test_cli_refuses_fused_qkv_for_a_model_torchtitan_does_not_fuse_in_one_line():
    result = invoke_cli("plan", "--model", "gpt2", "--gpus", "2", "--fuse-qkv")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "--fuse-qkv" in result.output and "gpt2" in result.output


@pytest.mark.slow
def test_the_printed_overrides_on_torchtitans_named_config_give_the_same_step():
    """Each best run's `--set` lines, on torchtitan's own llama3_8b named config, answer with
    the step the search ranked it by (the overrides say everything the answer assumed)."""
    import f8roof
    from f8roof.engine.step.search import Arm, torchtitan_overrides
    from f8roof.renderers.runs import overrides_text

    found = f8roof.best_runs("llama3-8b", 8, gpu="h100")
    for arm in (Arm.BF16, Arm.FLOAT8):
        point = found.best(arm)
        lines = overrides_text(point, arm).splitlines()
        assert len(lines) == len(torchtitan_overrides(point, arm))
        sets = [line.strip().removeprefix("--set ") for line in lines]
        again = f8roof.answer_setup("llama3:llama3_8b", gpu="h100", overrides=sets)
        step = again.summary
        assert step.bf16_s == pytest.approx(point.bf16_s, rel=1e-9)
        if arm is Arm.FLOAT8:
            assert step.fp8_s == pytest.approx(point.fp8_s, rel=1e-9)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(
    states=st.floats(5.0, 70.0),
    saved=st.floats(0.5, 20.0),
    fp8_memory=st.floats(0.5, 1.0),
    fp8_work=st.floats(0.5, 1.1),
    fixed=st.floats(0.0, 2.0),
    gpus=st.sampled_from([2, 8, 64]),
)
def test_retuned_speedup_is_never_below_like_for_like_on_any_part(
    states, saved, fp8_memory, fp8_work, fixed, gpus
):
    """Whatever float8 saves or costs in memory and time (float8 slower than bf16 included),
    its best is at least float8 at the bf16 best's layout, which the search evaluated."""

    def part(layout: Layout) -> Point:
        held = states / layout.gpus + saved * RERUN[layout.recompute] ** -3 * layout.local_batch
        work = RERUN[layout.recompute] * layout.local_batch / (layout.tp * layout.cp)
        return Point(
            layout=layout,
            seq_len=1024,
            bf16_s=fixed + work,
            fp8_s=fixed + fp8_work * work,
            bf16_peak_bytes=int(held * GIB),
            fp8_peak_bytes=int(fp8_memory * held * GIB),
            bf16_fits=held <= 75,
            fp8_fits=fp8_memory * held <= 75,
            float8_all_gather=False,
            converter=TorchtitanConfig(recipe=layout.recipe, filter_fqns=()),
        )

    try:
        found = search(
            part, model="m", gpu="h100", gpus=gpus, gpus_per_node=8, seq_len=1024, recipes=("x",)
        )
    except F8RoofError:
        return  # fits nowhere: refused, no speedup to compare
    try:
        found.best(Arm.FLOAT8)
    except IndexError:
        return  # float8 fits nowhere bf16 does not: no re-tuned speedup
    same = found.like_for_like_speedup
    assert same is None or found.retuned_speedup >= same * (1 - 1e-12)


def searched(gpus: int, *, seq_len: int = 1024, experts: int = 0, fits: bool = True):
    """The synthetic part's search (`fits` False: a part no layout fits), and every layout it
    asked, in order."""
    asked: list[Layout] = []

    def evaluate(layout: Layout) -> Point:
        asked.append(layout)
        point = replace(synthetic(layout), seq_len=seq_len)
        return point if fits else replace(point, bf16_fits=False, fp8_fits=False)

    try:
        search(
            evaluate,
            model="m",
            gpu="h100",
            gpus=gpus,
            gpus_per_node=8,
            seq_len=seq_len,
            recipes=("x",),
            experts=experts,
        )
    except F8RoofError:
        assert not fits
    return asked


def test_dense_models_never_get_ep_and_moe_models_get_it_within_a_node():
    dense = searched(64)
    moe = searched(64, experts=128)
    assert {lay.ep for lay in dense} == {1}
    assert {lay.ep for lay in moe} == {1, 2, 4, 8}
    assert all(lay.fsdp % lay.ep == 0 for lay in moe)


def test_hsdp_replicates_across_nodes_from_64_gpus_and_shards_within_one():
    small = searched(HSDP_MIN_GPUS // 2)
    large = searched(HSDP_MIN_GPUS)
    assert {lay.replicate for lay in small} == {1}
    hsdp = [lay for lay in large if lay.replicate > 1]
    assert hsdp and all(lay.fsdp * lay.tp * lay.cp == 8 for lay in hsdp)
    assert all(lay.gpus == HSDP_MIN_GPUS for lay in large)


def test_cp_is_asked_for_long_sequences_or_where_nothing_else_fits_before_a_pipeline():
    assert {lay.cp for lay in searched(8)} == {1}
    assert {lay.cp for lay in searched(8, seq_len=LONG_SEQ_LEN)} == {1, 2, 4, 8}
    stage = [(lay.pp > 1, lay.cp > 1 and lay.pp == 1) for lay in searched(8, fits=False)]
    cp_first, pp_first = stage.index((False, True)), stage.index((True, False))
    assert all(s == (False, False) for s in stage[:cp_first])  # without CP or a pipeline first
    assert all(s == (False, True) for s in stage[cp_first:pp_first])  # then CP
    assert all(s == (True, False) for s in stage[pp_first:])  # then pipelines


def test_progress_counts_every_run_up_to_those_planned():
    told: list[tuple[int, int]] = []
    search(
        synthetic,
        model="m",
        gpu="h100",
        gpus=8,
        gpus_per_node=8,
        seq_len=1024,
        recipes=("x",),
        progress=lambda done, planned: told.append((done, planned)),
    )
    assert [done for done, _ in told] == list(range(1, len(told) + 1))
    assert all(done <= planned for done, planned in told) and told[-1][0] == told[-1][1]


# cells of the matrix that search in seconds on one core: a dense model at 64 GPUs
# (HSDP searched), an MoE model (EP searched), and one at a long seq_len (CP searched: some
# 25 s on one core, so slow)
MATRIX_CELLS = (
    ("llama3-8b", "h100", 64, None),
    ("qwen3-30b-a3b", "h200", 8, None),
    pytest.param(("llama3-8b", "b200", 8, LONG_SEQ_LEN), marks=pytest.mark.slow),
)


@pytest.fixture(
    scope="module",
    params=MATRIX_CELLS,
    ids=("llama3-8b-h100-64", "qwen3-30b-a3b-h200-8", "llama3-8b-b200-8-cp"),
)
def cell(request):
    model, gpu, gpus, seq_len = request.param
    return f8roof.best_runs(model, gpus, gpu=gpu, seq_len=seq_len), gpu


def reread(point: Point, arm: Arm, gpu: str, setup) -> tuple[float, float, bool]:
    """A layout's printed overrides as `estimate --setup FILE --set ...` reads them: the
    step's bf16 and float8 seconds and whether `arm` fits."""
    from f8roof.renderers.runs import overrides_text

    lines = overrides_text(point, arm).split("\n")
    sets = [line.strip().removeprefix("--set ") for line in lines]
    again = f8roof.answer_setup(setup, gpu=gpu, overrides=sets)
    assert again.memory is not None
    fits = again.memory.estimate.bf16_fits, again.memory.estimate.fp8_fits
    return again.step.chosen.bf16_s, again.step.chosen.fp8_s, fits[arm is Arm.FLOAT8]


def test_a_matrix_cells_printed_layouts_reread_from_their_overrides_give_the_same_step(
    cell, tmp_path
):
    """Each best and the top rows printed, and the fastest layout of each degree the cell
    searched (EP, HSDP, CP), re-read from a job config naming only the model and the printed
    overrides, give the step and the fit the search ranked them by."""
    found, gpu = cell
    setup = tmp_path / "job.toml"
    setup.write_text(f'[model]\nname = "{found.model}"\n')
    asked = {(arm, p.layout): p for arm in Arm for p in found.ranked(arm)[:2]}
    for name in ("ep", "replicate", "cp"):
        for arm in Arm:
            wider = [p for p in found.ranked(arm) if getattr(p.layout, name) > 1]
            asked.update({(arm, p.layout): p for p in wider[:1]})
    assert any(max(lay.ep, lay.replicate, lay.cp) > 1 for _, lay in asked)
    for (arm, layout), point in sorted(asked.items()):
        bf16_s, fp8_s, fits = reread(point, arm, gpu, setup)
        assert bf16_s == pytest.approx(point.bf16_s, rel=1e-9), (arm, layout)
        if arm is Arm.FLOAT8:
            assert fp8_s == pytest.approx(point.fp8_s, rel=1e-9), layout
        assert fits == point.fits(arm)
    assert found.retuned_speedup >= (found.like_for_like_speedup or 0)


def test_the_frontier_draws_every_layout_of_the_search_and_rings_the_bests(small, tmp_path):
    from f8roof.renderers.plot import frontier

    drawn = frontier(small, out=tmp_path / "frontier.png")
    assert drawn.path.stat().st_size > 0
    data = drawn.data
    for arm in Arm:
        mine = data[data["precision"] == arm.value]
        assert sorted(zip(mine["peak_gib"], mine["tokens_per_s"])) == sorted(
            (p.peak_bytes(arm) / GIB, p.tokens_per_s(arm)) for p in small.points
        )
        ringed = mine[mine["best"]]
        assert len(ringed) == 1
        assert ringed["tokens_per_s"].iloc[0] == small.best(arm).tokens_per_s(arm)
    # what matplotlib holds: the dots of both precisions, fitting and not, and the two rings
    ax = drawn.figure.axes[0]
    offsets = sum(len(c.get_offsets()) for c in ax.collections)
    assert offsets == 2 * len(small.points) + 2


def test_cli_draws_the_frontier_and_prints_no_progress_off_a_terminal(tmp_path):
    out = tmp_path / "frontier.png"
    result = invoke_cli(
        "plan", "--model", "gpt2", "--gpus", "2", "--seq-len", "1024", "--plot", out
    )
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0 and f"wrote {out}" in result.output
    assert "layouts  [" not in result.output and "%" not in result.output
