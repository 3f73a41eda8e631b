import re
import sys

import pytest
from conftest import invoke_cli

from f8roof.engine.plan import Asked, plan_model
from f8roof.engine.recommend import recommend
from f8roof.engine.report import model_report
from f8roof.engine.resolve import Request, resolve
from f8roof.renderers.notes import provenance_line
from f8roof.renderers.report import format_recommendation, layer_rows, markdown, write_report
from f8roof.training.catalog import builtin
from f8roof.training.run_config import RunConfig


def run(*args):
    return invoke_cli(*args)


def roofline(recipes="tensorwise"):
    return resolve(Request(gpu="h100", recipes=recipes, no_calibration=True))


def test_markdown_has_the_tables_and_totals():
    resolved = roofline("tensorwise,rowwise")
    plan = plan_model(recommend(builtin("gpt2"), tokens=8192, resolved=resolved), resolved, Asked())
    rec = plan.recommendation
    text = markdown(plan, source=provenance_line(resolved.provenance))
    assert text.startswith("# f8roof report: gpt2 at 8192 tokens per step")
    assert "## Recommendation" in text and "## Per layer type" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| layer | count | M | K | N | input from | recipe |")
    assert "x tensorwise" in table[0] and "x rowwise" in table[0]
    assert len(table) == 1 + len(rec.layers)
    assert "| lm\\_head |" not in text and "| lm_head | 1 | 8192 | 768 | 50257 |" in text
    assert "model.layers" not in text and "transformer.h.\\*.attn.c\\_attn" not in text
    assert "| transformer.h.\\*.attn.c_attn |" in text  # '*' escaped, not italics
    assert f"{rec.totals.speedup:.3f}x of the linear part" in text
    assert "module_filter(model, tokens=8192, gpu='h100', recipe=" in text
    assert f"x{plan.step.chosen.speedup:.3f}" in text  # the step, as estimate answers it


def test_report_and_estimate_decide_the_same_and_its_snippet_runs(tmp_path):
    import f8roof

    options = {"tp": 2, "fsdp": 2, "recompute": "selective"}
    setup = RunConfig.from_options(**options)
    request = Request(gpu="h100", recipes="rowwise")
    built = model_report("llama3-8b", tokens=8192, request=request, setup=setup)
    answered = f8roof.answer_model("llama3-8b", 8192, gpu="h100", recipe="rowwise", **options)
    assert built.recommendation.converted_fqns == answered.recommendation.converted_fqns
    assert built.plan.step.chosen.fp8_s == pytest.approx(answered.step.chosen.fp8_s, rel=1e-12)
    text = write_report(built, out=tmp_path / "r.md", plots=False).path.read_text()
    call = re.search(r"keep = f8roof\.(module_filter\(.*\))", text).group(1)
    assert "fsdp=2" in call and "tp=2" in call
    found = eval("f8roof." + call.replace("model,", "'llama3-8b',"), {"f8roof": f8roof})
    assert found.converted == {f for f, yes in found.decisions.items() if yes} and set(
        found.recommendation.converted_fqns
    ) == set(answered.recommendation.converted_fqns)


def test_terminal_rendering_marks_decisions():
    rec = recommend(builtin("gpt2"), tokens=8192, resolved=roofline())
    text = format_recommendation(rec)
    lines = text.splitlines()
    assert lines[0].startswith("gpt2 on h100, M = 8192 tokens per step: 5 linear types, 49 linears")
    head = next(line for line in lines if line.startswith("lm_head"))
    assert "keep bf16" in head and head.endswith("N not a multiple of 16")
    c_proj = next(line for line in lines if line.startswith("transformer.h.*.attn.c_proj"))
    # 768 x 768 loses in the worst case but wins with ideal overhead: flagged, not converted
    assert re.search(r"0\.87-  keep bf16\s+-13%", c_proj)
    assert c_proj.endswith("wins with ideal overhead (x1.03): calibrate to decide")
    assert lines[-1].startswith("total linear time per step")
    colored = format_recommendation(rec, color=True)
    assert "\x1b[32mconvert" in colored and "\x1b[31mkeep bf16" in colored


def test_write_report_with_plots(tmp_path):
    built = model_report("llama3-8b", tokens=8192, request=roofline("all"))
    result = write_report(built, out=tmp_path / "r" / "report.md")
    pytest.importorskip("matplotlib")
    text = result.path.read_text()
    assert len(result.plots) == 4 and not result.plot_note
    for plot in result.plots:
        assert plot.parent == result.path.parent and plot.read_bytes()[:4] == b"\x89PNG"
        assert f"]({plot.name})" in text
    names = [plot.name for plot in result.plots]
    assert names == [
        "report_step.png",
        "report_layers.png",
        "report_heatmap.png",
        "report_overhead.png",
    ]  # the step, the answer users act on, first


def test_report_draws_the_plans_step_and_memory(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    setup = RunConfig.from_options(fsdp=8, recompute="selective")
    built = model_report("llama3-8b", tokens=8192, request=Request(gpu="h100"), setup=setup)
    result = write_report(built, out=tmp_path / "r.md")
    step = result.plots[0]
    assert step.name == "r_step.png" and "![The step and its memory per GPU](r_step.png)" in (
        result.path.read_text()
    )
    # two panels side by side: the step, and the memory (the run's FSDP degree is known)
    height, width = imread(step).shape[:2]
    assert width > 1.5 * height


def test_report_without_matplotlib_still_has_the_tables(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    out = tmp_path / "report.md"
    result = run(
        "report", "--model", "mistral-7b", "--tokens", "4096", "--no-calibration", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    assert "plots skipped: plotting needs matplotlib" in result.output
    text = out.read_text()
    assert "## Per layer type" in text and "plots skipped" in text
    assert not list(tmp_path.glob("*.png"))


def test_cli_report(tmp_path):
    out = tmp_path / "report.md"
    result = run(
        "report",
        "--model",
        "llama3-70b",
        "--tokens",
        "8192",
        "--no-calibration",
        "--no-plots",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert "llama3-70b on h100, M = 8192 tokens per step" in result.output
    assert f"wrote {out}" in result.output
    text = out.read_text()
    assert (
        "| model.layers.\\*.mlp.down_proj | 80 | 8192 | 28672 | 8192 | silu_mul | tensorwise |"
        in text
    )
    assert "## Plots" not in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model", "gpt2", "--tokens", "0", "--out", "r.md"],
            "tokens per step must be a positive integer",
        ),
        (["--model", "gpt-5", "--tokens", "8", "--out", "r.md"], "unknown model 'gpt-5'; known:"),
        (["--model", "gpt2", "--tokens", "8", "--out", "r.html"], "use a .md file name"),
        (
            [
                "--model",
                "gpt2",
                "--tokens",
                "8",
                "--calibration",
                "c.json",
                "--no-calibration",
                "--out",
                "r.md",
            ],
            "contradict",
        ),
    ],
)
def test_cli_report_bad_input(args, message):
    result = run("report", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_cli_report_at_scale(tmp_path):
    out = tmp_path / "report.md"
    result = run(
        "report",
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--tp",
        "2",
        "--recipe",
        "rowwise",
        "--step-ms",
        "900",
        "--no-calibration",
        "--no-plots",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert "end to end: measured bf16 step 900 ms" in result.output
    text = out.read_text()
    assert "- setup: TP 2 (column-parallel linears shard N, row-parallel shard K)" in text
    assert "| layer | count | M | K | N | tp | input from | recipe |" in text
    assert "| model.layers.\\*.self\\_attn.k\\_proj |" not in text
    assert (
        "| model.layers.\\*.self_attn.k_proj | 32 | 8192 | 4096 | 512 | col | rmsnorm | rowwise |"
        in text
    )
    assert "## torchao's auto filter vs f8roof" in text
    assert "| torchao sees K x N |" in text
    assert "recipe='rowwise', tp=2)" in text  # the module_filter call to paste
    bad = run("report", "--model", "llama3-8b", "--tokens", "8", "--tp", "5", "--out", "r.md")
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
    assert "--tp 5 does not divide" in bad.output


def test_terminal_rendering_of_routed_experts():
    rec = recommend(
        builtin("qwen3-30b-a3b"),
        tokens=4096,
        resolved=roofline("rowwise"),
        setup=RunConfig(ep=4, tp=2),
    )
    text = format_recommendation(rec)
    header = next(line for line in text.splitlines() if line.startswith("layer "))
    assert header.split()[:8] == [
        "layer",
        "count",
        "M",
        "K",
        "N",
        "tp",
        "experts/GPU",
        "tokens/expert",
    ]
    row = next(line for line in text.splitlines() if "moe.experts.w2" in line).split()
    # EP 4 with TP 2: 32 experts per GPU, 4096 / 2 x 8 / 32 = 512 tokens each; experts unsharded
    assert row[1:8] == ["48", "512", "768", "2048", "-", "32", "512"]
    assert "note: routed experts: 32 of 128 experts per GPU (EP 4), top 8, 512 tokens" in text


def test_routed_experts_have_no_fitted_speedup():
    # the shipped h100 calibration fits Float8Linear's graphs, not torchao's grouped path:
    # its experts' rows show no fitted speedup and decide on the worst case
    rec = recommend(
        builtin("mixtral-8x7b"),
        tokens=4096,
        resolved=resolve(Request(gpu="h100", recipes="rowwise")),
    )
    assert rec.criterion == "speedup"
    header, rows = layer_rows(rec)
    fitted, worst = header.index("x fitted"), header.index("x worst (seed)")
    band = header.index("band")
    assert rows[0][band].count("-") == 1 or rows[0][band] == "-"
    cells = {row[0]: (row[fitted], row[worst]) for row in rows}
    assert cells["model.layers.*.block_sparse_moe.experts.*.w2"][0] == "-"
    assert cells["model.layers.*.block_sparse_moe.experts.*.w2"][1] != "-"
    assert cells["model.layers.*.self_attn.o_proj"][0] != "-"


def test_report_decides_by_policy(tmp_path):
    texts = {}
    for policy in ("conservative", "optimistic"):
        out = tmp_path / f"{policy}.md"
        result = run(
            "report",
            "--model",
            "llama3-8b",
            "--tokens",
            "8192",
            "--gpu",
            "h100",
            "--no-plots",
            "--policy",
            policy,
            "--out",
            str(out),
        )
        assert result.exit_code == 0, result.output
        texts[policy] = out.read_text()
    assert "policy conservative: convert where the band's low end wins" in texts["conservative"]
    assert "policy optimistic" in texts["optimistic"]
    assert "| x fitted | band | x worst (seed) |" in texts["conservative"]
    assert texts["conservative"].count("| convert |") <= texts["optimistic"].count("| convert |")
