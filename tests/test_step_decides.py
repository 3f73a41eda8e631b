"""The step decides what the layers alone cannot: a converted block linear owns its share of
what the all-float8 graphs add beside its gemms, and a layer type that wins alone stays in
bf16 where the step is shorter without it."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke_cli

from f8roof.columns import Columns
from f8roof.engine.answer import Question, answer
from f8roof.engine.plan import model_step
from f8roof.engine.recommend import decide_as, recommend_model
from f8roof.engine.resolve import Request, resolve
from f8roof.engine.step.blocks import converted_shares
from f8roof.engine.step.summarize import alike
from f8roof.training.run_config import RunConfig

FIXTURE = str(Path(__file__).parent / "data" / "torchtitan_llama3_8b_tp2_fsdp2.toml")


def test_converted_linears_own_collectives_by_count_and_recompute_by_overhead():
    rows = Columns(
        {
            "count": np.array([32, 32, 64, 1]),
            "fp8_s": np.array([3.0, 5.0, 2.0, 9.0]),
            "fp8_gemm_s": np.array([2.0, 2.0, 1.5, 1.0]),
        }
    )
    block = np.array([True, True, True, False])  # the last is lm_head: outside the blocks
    convert = np.array([False, True, True, True])
    linears, casts = converted_shares(rows, convert, block)
    assert linears == pytest.approx(96 / 128)
    # overheads 32 x 1, 32 x 3, 64 x 0.5: the converted own 96 + 32 of 160
    assert casts == pytest.approx(128 / 160)
    assert converted_shares(rows, block, block) == (1.0, 1.0)


def test_a_layer_that_wins_alone_but_loses_the_step_is_kept_and_said(tmp_path):
    out = tmp_path / "a.json"
    result = invoke_cli("estimate", "--setup", FIXTURE, "--step-ms", "762", "--out", str(out))
    assert result.exit_code == 0, result.output
    layers = json.loads(out.read_text())["layers"]
    held = [row for row in layers if row["held_by_step"]]
    assert held, "rowwise at TP 2: gate and up win alone, and lose in the step"
    for row in held:
        assert row["speedup"] > 1 and not row["convert"] and row["decision"] == "keep bf16"
    assert "the step keeps" in " ".join(result.output.split())
    shown = invoke_cli("estimate", "--setup", FIXTURE, "--step-ms", "762", "--show-all").output
    for row in held:
        line = next(x for x in shown.splitlines() if x.startswith(row["fqn"] + " "))
        assert "kept by the step" in line


def test_no_group_of_alike_layers_turned_the_other_way_would_shorten_the_step():
    question = Question(model="llama3-8b", tokens=8192)
    setup = RunConfig.from_options(tp=2, fsdp=2, recompute="selective", step_ms=762)
    request = Request(gpu="h100", recipes="tensorwise")
    result = answer(question, request, setup=setup)
    rec, step = result.recommendation, result.step
    resolved = resolve(request, many_recipes=True)
    rows = rec.rows
    settled = [f for f, k in zip(rows["fqn"], step.kept_by_setup) if k]
    groups = {}
    for i in range(len(rows)):
        if rows["fp8_ok"][i] and not step.kept_by_setup[i]:
            groups.setdefault(alike(rows, i), []).append(str(rows["fqn"][i]))
    assert len(groups) >= 4
    converted = set(rec.converted_fqns)
    for fqns in groups.values():
        flipped = converted - set(fqns) if set(fqns) <= converted else converted | set(fqns)
        other = decide_as(rec, resolved, sorted(flipped), settled)
        assert model_step(question.asked, other, resolved)[0].chosen.fp8_s >= step.chosen.fp8_s
    # the layers' own choice, nothing the step decided: never a shorter step
    alone = recommend_model("llama3-8b", tokens=rec.tokens, resolved=resolved, setup=rec.setup)
    assert model_step(question.asked, alone, resolved)[0].chosen.fp8_s >= step.chosen.fp8_s
    # and the choice is the first of every plan the answer evaluated
    assert all(result.choice.speedup >= c.speedup for c in result.candidates)
    assert result.choice.speedup == step.chosen.speedup
