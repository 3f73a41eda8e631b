"""One bf16 step per setup whatever recipe is asked, and several recipes never answering worse
than any one of them (the plan with the fastest step wins, each candidate listed)."""

import pytest

from f8roof.engine.answer import Question, answer
from f8roof.engine.resolve import Request
from f8roof.training.run_config import RunConfig

SINGLE = ("tensorwise", "rowwise", "rowwise_gw_hp")
# (model, tokens, tp, fsdp, recompute): shipped float8 graphs for some recipes only, none for
# others, full AC, one GPU
SETUPS = [
    ("llama3-8b", 8192, 2, 2, "selective"),
    ("llama3-8b", 8192, 1, 8, "selective"),
    ("llama3-8b", 16384, 8, 8, "full"),
    ("llama3-70b", 8192, 8, 16, "full"),
    ("llama3-8b", 4096, 1, False, "none"),
]


def model_answer(setup, recipes):
    model, tokens, tp, fsdp, recompute = setup
    run = RunConfig.from_options(tp=tp, fsdp=fsdp, recompute=recompute)
    question = Question(model=model, tokens=tokens)
    return answer(question, Request(gpu="h100", recipes=recipes), setup=run)


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: "-".join(map(str, s)))
def test_bf16_step_is_one_and_several_recipes_never_answer_worse_than_one(setup):
    singles = {r: model_answer(setup, r) for r in SINGLE}
    bf16 = {r: a.step.chosen.bf16_s for r, a in singles.items()}
    assert len(set(bf16.values())) == 1, bf16
    assert len({a.step.as_run.bf16_s for a in singles.values()}) == 1
    several = model_answer(setup, "all")
    assert several.step.chosen.bf16_s == pytest.approx(bf16["tensorwise"], rel=1e-12)
    best = max(a.step.chosen.speedup for a in singles.values())
    assert several.step.chosen.speedup >= best * (1 - 1e-12)
    # every candidate listed, the answer's first and best
    plans = several.recipe_plans
    assert {p.recipe for p in plans} == {*SINGLE, None}
    assert plans[0].speedup == pytest.approx(several.step.chosen.speedup, rel=1e-12)
    assert [p.speedup for p in plans] == sorted((p.speedup for p in plans), reverse=True)


def test_one_recipe_asked_lists_no_plans():
    assert model_answer(SETUPS[0], "tensorwise").recipe_plans == ()


def test_a_recipe_without_float8_graphs_times_its_float8_from_the_bf16_graphs():
    a = model_answer(SETUPS[0], "rowwise_gw_hp")
    topics = {n.topic.value for n in a.step.chosen.notes}
    assert "float8_by_layers" in topics and "no_block" in topics
