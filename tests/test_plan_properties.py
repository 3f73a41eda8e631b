"""The plan agrees with itself over GPUs, models, layouts and recipes (drawn with fixed seeds):
its choice is never slower than a plan it prints, alike rows get one decision, a step whose
blocks convert nothing moves no FSDP traffic, and module_filter decides as estimate does."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import f8roof
from f8roof.engine.step.conversion import converts_as_run
from f8roof.engine.step.parts import Part
from f8roof.engine.step.summarize import alike
from f8roof.errors import F8RoofError
from f8roof.renderers.answers import torchtitan_lines
from f8roof.training.checkpointing import is_block_fqn

GPUS = {
    "h100": ("tensorwise", "rowwise"),
    "h200": ("tensorwise", "rowwise"),
    "b200": ("tensorwise", "mxfp8", "nvfp4"),
    "gb200": ("mxfp8", "nvfp4"),
    "b300": ("rowwise", "mxfp8"),
    "mi300x": ("tensorwise", "rowwise"),
}
DENSE = ("llama3-8b", "llama3-70b", "qwen3-14b")
LAYOUTS = (
    {"fsdp": 8},
    {"fsdp": 8, "recompute": "selective"},
    {"fsdp": 4, "tp": 2, "recompute": "selective"},
    {"fsdp": 8, "tp": 8, "recompute": "full"},
    {"fsdp": 8, "tp": 8, "recompute": "full", "async_tp": True},
    {"fsdp": 8, "float8_all_gather": True},
    {"fsdp": 4, "pp": 2},
    {"fsdp": 4, "cp": 2},
    {"fsdp": 8, "recompute": "selective", "fuse_qkv": True},
)
MOE = ("qwen3-30b-a3b",)
MOE_LAYOUTS = ({"fsdp": 8, "ep": 8, "recompute": "full"}, {"fsdp": 16, "ep": 4})


@st.composite
def runs(draw):
    gpu = draw(st.sampled_from(sorted(GPUS)))
    recipe = draw(st.sampled_from(GPUS[gpu]))
    moe = draw(st.booleans())
    model = draw(st.sampled_from(MOE if moe else DENSE))
    layout = dict(draw(st.sampled_from(MOE_LAYOUTS if moe else LAYOUTS)))
    if layout.get("float8_all_gather") and recipe != "tensorwise":
        layout.pop("float8_all_gather")
    return gpu, recipe, model, layout


def _answer(gpu, recipe, model, layout):
    tokens = 16384 if "pp" in layout else 8192  # a pipeline's microbatches: one sequence each
    try:
        return f8roof.answer_model(model, tokens, gpu=gpu, recipe=recipe, **layout)
    except F8RoofError as e:  # a layout the model cannot take (heads TP cannot split, ...)
        pytest.skip(str(e))


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(run=runs())
def test_the_plan_agrees_with_itself(run):
    gpu, recipe, model, layout = run
    plan = _answer(gpu, recipe, model, layout)
    chosen = plan.step.chosen
    # (a) the choice is the fastest plan the answer evaluated, and it prints no faster one
    assert plan.choice.speedup == pytest.approx(chosen.speedup, rel=1e-9)
    for c in plan.candidates:
        assert chosen.speedup >= c.speedup * (1 - 1e-9), (c.arm, c.recipe, c.float8_all_gather)
    assert chosen.speedup >= plan.step.as_run.speedup * (1 - 1e-9)
    if plan.float8_all_gather is not None:
        assert chosen.speedup >= plan.float8_all_gather.speedup * (1 - 1e-9)
    # (b) rows alike (shape, context, recipe, TP style) get one decision
    rows = plan.recommendation.rows
    decided = {}
    for i in range(len(rows)):
        if plan.step.kept_by_setup[i]:
            continue
        key = alike(rows, i)
        assert decided.setdefault(key, bool(rows["convert"][i])) == bool(rows["convert"][i])
    # (c) gathering in bf16, FSDP moves the same bytes in both precisions: what it exposes can
    # change only by the compute it hides behind (a choice converting no block linear: none)
    block = [is_block_fqn(str(f)) for f in rows["fqn"]]
    converts_block = any(c and b for c, b in zip(rows["convert"], block))
    if not plan.choice.float8_all_gather:
        fsdp = chosen.part(Part.FSDP_COMM)
        compute = (Part.LINEARS, Part.OTHER_COMPUTE, Part.RECOMPUTE)
        moved = sum(abs(chosen.part(p).fp8_s - chosen.part(p).bf16_s) for p in compute)
        assert abs(fsdp.fp8_s - fsdp.bf16_s) <= moved * (1 + 1e-9) + 1e-12
        if not converts_block:
            assert fsdp.fp8_s == pytest.approx(fsdp.bf16_s, rel=1e-9)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(run=runs())
def test_module_filter_decides_as_estimate(run):
    gpu, recipe, model, layout = run
    plan = _answer(gpu, recipe, model, layout)
    switches = ("async_tp", "float8_all_gather", "pp", "cp", "fuse_qkv")
    if plan.adds_float8_all_gather or any(k in layout for k in switches):
        return  # module_filter takes no all-gather, async TP, pipeline or CP: another run
    keep = f8roof.module_filter(model, 8192, gpu=gpu, recipe=recipe, **layout)
    assert set(keep.recommendation.converted_fqns) == set(plan.recommendation.converted_fqns)


FIXTURE = Path(__file__).parent / "data" / "torchtitan_llama3_8b_tp2_fsdp2.toml"


@pytest.mark.parametrize(
    "gpu, recipe, layout",
    [
        ("h100", "tensorwise", {}),
        ("h100", "rowwise", {}),
        (
            "h100",
            "tensorwise",
            {"data_parallel_shard_degree = 2": "data_parallel_shard_degree = 8"},
        ),
        ("b200", "rowwise", {'mode = "selective"': 'mode = "full"'}),
        ("h200", "tensorwise", {"tensor_parallel_degree = 2": "tensor_parallel_degree = 1"}),
        ("h100", "rowwise", {"[float8]": "[f8roof]\nfuse_qkv = true\n\n[float8]"}),
    ],
)
def test_the_printed_torchtitan_config_read_back_gives_the_choice(tmp_path, gpu, recipe, layout):
    """(d) The converter lines f8roof prints for its choice, pasted into the job config in place
    of its own [float8] section, are a run whose step as torchtitan converts it is the choice's
    step: the same linears in float8, the same all-gather, the same seconds (q, k and v fused
    into torchtitan's wqkv too)."""
    text = FIXTURE.read_text().replace('recipe_name = "rowwise"', f'recipe_name = "{recipe}"')
    for old, new in layout.items():
        text = text.replace(old, new)
    asked = tmp_path / "asked.toml"
    asked.write_text(text)
    plan = f8roof.answer_setup(asked, gpu=gpu)
    lines = torchtitan_lines(plan.torchtitan)
    if not plan.torchtitan.converts:  # the setup's filters keep whatever the choice converts
        assert plan.choice.converted == ()
        return
    section = lines[lines.index("[float8]") : lines.index("# or on the command line:")]
    pasted = tmp_path / "pasted.toml"
    pasted.write_text(text[: text.index("[float8]")] + "\n".join(section) + "\n")
    again = f8roof.answer_setup(pasted, gpu=gpu)
    assert again.summary.fp8_s == pytest.approx(plan.step.chosen.fp8_s, rel=1e-9)
    assert again.summary.bf16_s == pytest.approx(plan.step.chosen.bf16_s, rel=1e-9)
    converts, _ = converts_as_run(again.recommendation, again.run)
    as_run = set(again.recommendation.rows["fqn"][converts])
    assert as_run == set(plan.choice.converted)
