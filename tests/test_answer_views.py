"""The default answer is one a user acts on: one provenance line, the rows (`shape/layer | bf16 |
float8 | speedup (low-high) | decision`), a step summary of at most five lines that leads with
what to convert and the step speedup with its band, all within 120 columns; --show-all prints
every column and note. And a plan over several recipes is never slower than any one of them."""

from dataclasses import replace

import pytest
from conftest import invoke_cli

from f8roof.engine.decision import DecisionPolicy, policy_end
from f8roof.engine.recommend import recommend
from f8roof.engine.resolve import Request, resolve
from f8roof.training.catalog import builtin

MODEL = ["estimate", "--model", "llama3-8b", "--tokens", "8192"]
SHAPE = ["estimate", "--shape", "4096,4096,4096"]


def lines(args: list[str]) -> list[str]:
    result = invoke_cli(*args)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.mark.parametrize("args", [MODEL, SHAPE], ids=["model", "shape"])
def test_the_default_view_fits_120_columns(args):
    out = lines(args)
    assert max(len(line) for line in out) <= 120, max(out, key=len)
    assert out[0].startswith("h100 tensorwise (shipped h100.json): times fitted on h100-meta")
    assert "speedup (low-high)" in out[1] and out[1].rstrip().endswith("decision")


def test_the_model_view_leads_with_what_to_convert_and_the_step():
    out = lines(MODEL)
    summary = out[out.index("") + 1 :]
    convert = [line for line in summary if not line.startswith("*")]
    convert = convert[: next(i for i, line in enumerate(convert) if line.startswith("step:")) + 2]
    assert len(convert) <= 5
    assert convert[0].startswith("convert self_attn.q_proj")
    step = next(line for line in summary if line.startswith("step:"))
    # f8roof's choice first, torchtitan's all-but-output beside it, each with its band
    ours, theirs = step.split("; ")
    assert "with f8roof's choice" in ours and "(band " in ours
    assert "as torchtitan converts (all but output)" in theirs and "(band " in theirs
    # no contradictions: nothing says lm_head stays bf16 while the table converts it
    head = next(line for line in out if line.startswith("lm_head "))
    assert head.endswith("convert") and not any("stays bf16" in line for line in out)


def test_show_all_has_every_column_and_note():
    out = "\n".join(lines([*MODEL, "--show-all"]))
    for text in ("x ideal", "x fitted", "x worst (seed)", "margin", "saved ms/step", "assumes:"):
        assert text in out
    assert "step with f8roof's choice" in out and "step as torchtitan converts it" in out


@pytest.mark.parametrize("policy", list(DecisionPolicy))
def test_several_recipes_never_plan_slower_than_one(policy):
    """Per layer, the recipe chosen is the one its decision converts that is fastest at the
    policy's value (the estimate, or the band's low or high end): at that value the plan's
    linear time is at most any single recipe's, under every policy."""
    resolved = resolve(Request(gpu="h100", recipes="all"))
    arch = builtin("llama3-8b")
    for tokens in (2048, 8192, 32768):
        plan = recommend(arch, tokens=tokens, resolved=resolved, policy=policy)
        singles = [
            recommend(arch, tokens=tokens, resolved=replace(resolved, configs=(c,)), policy=policy)
            for c in resolved.configs
        ]
        assert {str(r) for r in plan.layers["recipe"]} <= {s.recipes[0] for s in singles}
        best = min(at_policy_end(s, policy) for s in singles)
        assert at_policy_end(plan, policy) <= best * (1 + 1e-12), (tokens, policy)


def at_policy_end(rec, policy) -> float:
    """The linear time of a plan with each converted layer at the policy's end of its band."""
    layers = rec.layers
    end = policy_end(
        low=layers["speedup_low"], expected=layers["speedup"], high=layers["speedup_high"],
        policy=policy,
    )  # fmt: skip
    fp8 = layers["bf16_s"] / end
    time = layers["count"] * layers["bf16_s"].where(~layers["convert"], fp8)
    return float(time.sum())
