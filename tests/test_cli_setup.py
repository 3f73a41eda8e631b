"""`f8roof estimate --setup FILE` and the step summary in --out files, through click."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import invoke_cli

from f8roof.renderers.notes import run_text

FIXTURE = str(Path(__file__).parent / "data" / "torchtitan_llama3_8b_tp2_fsdp2.toml")


def run(*args):
    return invoke_cli(*args)


def test_setup_prints_summary_filter_fqns_and_converter_lines(tmp_path):
    out = tmp_path / "e2e.json"
    result = run("estimate", "--setup", FIXTURE, "--step-ms", "762", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "  bf16 762 ms -> float8 " in result.output  # the short view's step
    # every rowwise linear of this run stays bf16 (lm_head by its filter_fqns): no converter
    assert "the setup's filter_fqns keep lm_head" in result.output
    assert 'train in bf16 ("float8" out of [model] converters)' in result.output
    result = run(
        "estimate", "--setup", FIXTURE, "--step-ms", "762", "--out", str(out), "--show-all"
    )
    text = result.output
    assert "step as torchtitan converts it (measured bf16 step): bf16 762 ms" in text
    assert 'train in bf16 ("float8" out of [model] converters)' in text
    assert "TP 2: the collectives the compiled graphs hold" in text and "FSDP 2:" in text
    assert "blocks from the shipped sharded block for llama3-8b TP 2, recompute selective" in text
    doc = json.loads(out.read_text())
    summary = doc["summary"]
    assert summary["bf16_s"] == pytest.approx(0.762) and summary["step_measured"]
    assert summary["speedup"] == pytest.approx(summary["bf16_s"] / summary["fp8_s"])
    assert summary["comm_bf16_s"] > 0 and summary["recompute_bf16_s"] > 0
    assert summary["lm_head_fp8_s"] == summary["lm_head_bf16_s"]  # filter_fqns: output
    assert [row["fqn"] for row in doc["layers"]][-1] == "lm_head"
    tensorwise = tmp_path / "tensorwise.toml"  # converts the MLP: its converter lines
    tensorwise.write_text(
        Path(FIXTURE).read_text().replace('recipe_name = "rowwise"', 'recipe_name = "tensorwise"')
    )
    text = run("estimate", "--setup", str(tensorwise)).output
    # the choice gathers its float8 weights in float8 (FSDP 2, tensorwise): torchtitan takes
    # no recipe_name beside the all-gather, tensorwise being its default
    assert (
        "[float8]\nenable_fsdp_float8_all_gather = true\n"
        'precompute_float8_dynamic_scale_for_fsdp = true\nfilter_fqns = ["output", "attention.'
    ) in text
    assert "--model.converters float8 --float8.enable_fsdp_float8_all_gather" in text


def test_setup_matches_the_same_question_asked_with_options(tmp_path):
    short = tmp_path / "s.toml"
    short.write_text(
        "[model]\nname = 'llama3-8b'\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n"
        "compile = true\n[parallelism]\ntensor_parallel_degree = 2\n"
        "data_parallel_shard_degree = 1\n[activation_checkpoint]\nmode = 'full'\n"
        "[float8]\nrecipe_name = 'rowwise'\nfilter_fqns = ['output']\n"
    )
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    by_file = run("estimate", "--setup", str(short), "--step-ms", "762", "--out", str(a))
    by_options = run(
        "estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2",
        "--recompute", "full", "--recipe", "rowwise", "--step-ms", "762", "--out", str(b),
    )  # fmt: skip
    assert by_file.exit_code == 0, by_file.output
    assert by_options.exit_code == 0, by_options.output
    sa, sb = json.loads(a.read_text())["summary"], json.loads(b.read_text())["summary"]
    for key in ("bf16_s", "fp8_s", "speedup", "comm_bf16_s", "recompute_fp8_s"):
        assert sa[key] == pytest.approx(sb[key]), key


def test_a_torchtitan_job_config_and_its_options_give_one_answer_from_the_sharded_block(tmp_path):
    """Issue 18's question both ways: the torchtitan job config of pytorch/torchtitan#1207 and
    the same setup as options; both time the blocks from the shipped sharded block."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    by_file = run("estimate", "--setup", FIXTURE, "--step-ms", "762", "--out", str(a))
    by_options = run(
        "estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2", "--fsdp", "2",
        "--recompute", "selective", "--recipe", "rowwise", "--step-ms", "762", "--out", str(b),
    )  # fmt: skip
    assert by_file.exit_code == 0, by_file.output
    assert by_options.exit_code == 0, by_options.output
    sa, sb = json.loads(a.read_text())["summary"], json.loads(b.read_text())["summary"]
    for key in ("bf16_s", "fp8_s", "speedup", "comm_fp8_s", "recompute_fp8_s", "linear_fp8_s"):
        assert sa[key] == pytest.approx(sb[key]), key
    for summary in (sa, sb):
        notes = "\n".join(summary["assumptions"])
        assert "blocks from the shipped sharded block" in notes
        assert [n["topic"] for n in summary["notes"]].count("blocks_from") == 1
        fits = summary["fits_only"]["speedup"]
        assert fits != pytest.approx(summary["speedup"], abs=1e-4)  # the graphs decided
        assert summary["chosen"]["bf16_s"] == pytest.approx(summary["bf16_s"])
    # float8's amax all-reduces and recomputed casts: more comm and recompute than bf16
    assert sa["comm_fp8_s"] > sa["comm_bf16_s"] and sa["recompute_fp8_s"] > sa["recompute_bf16_s"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".md"])
def test_summary_beside_tables(tmp_path, suffix):
    out = tmp_path / f"layers{suffix}"
    result = run(
        "estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    if suffix == ".md":
        text = out.read_text()
        assert "## Step summary" in text and "| speedup |" in text and "Assumptions:" in text
    else:
        side = pd.read_csv(tmp_path / "layers.summary.csv")
        assert len(side) == 1 and side["speedup"].iloc[0] > 0
        assert "modelled step" in side["assumptions"].iloc[0]


def test_shapes_output_has_no_summary(tmp_path):
    out = tmp_path / "x.json"
    assert run("estimate", "--shape", "1024,1024,1024", "--out", str(out)).exit_code == 0
    assert isinstance(json.loads(out.read_text()), list)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "llama3-8b"], "--setup names the model and its tokens"),
        (["--tp", "2"], "--setup sets the parallelism and checkpointing"),
        (["--recipe", "tensorwise"], "--setup sets the recipe"),
        (["--shape", "16,16,16"], "--setup asks about a model"),
    ],
)
def test_setup_conflicts_are_one_line(extra, message):
    result = run("estimate", "--setup", FIXTURE, *extra)
    assert result.exit_code == 2
    assert message in result.output


def test_bad_setup_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(FIXTURE).read_text().replace("seq_len", "seqlen"))
    result = run("estimate", "--setup", str(bad))
    assert result.exit_code == 2
    assert "unknown key 'seqlen' in [training]" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_fsdp_takes_an_optional_degree():
    alone = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "--show-all")
    assert alone.exit_code == 0, alone.output
    assert "FSDP degree unknown" in alone.output
    bad = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "two")
    assert bad.exit_code == 2 and "'two' is not a valid integer" in bad.output
    from f8roof.training.run_config import ParallelismError, RunConfig

    with pytest.raises(ParallelismError, match="^fsdp takes a degree >= 1"):
        RunConfig.from_options(fsdp=-2)
    with pytest.raises(ParallelismError, match="^fsdp takes a degree >= 1"):
        RunConfig.from_options(fsdp=0)
    off = RunConfig.from_options(fsdp=1)  # off, as torchtitan's 1, and said so
    assert not off.fsdp_on and off.fsdp_degree == 1 and run_text(off) == "FSDP 1 (off)"
    assert RunConfig.from_options(fsdp=-1) == RunConfig(fsdp=-1)
    assert RunConfig.from_options(fsdp=4).fsdp_degree == 4


def tp8_summary(tmp_path, *, async_tp: bool, mode: str = "none", recipe: str = "") -> dict:
    """`estimate --setup`'s summary for llama3-8b at TP 8, two 8192-token sequences per rank."""
    name = f"{recipe or 'bf16'}-{mode}-{async_tp}"
    option = '\nselective_ac_option = "op"' if mode == "selective" else ""
    float8 = "" if recipe in ("", "tensorwise") else f'recipe_name = "{recipe}"\n'
    setup = tmp_path / f"{name}.toml"
    setup.write_text(
        "[model]\nname = 'llama3-8b'\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n"
        "compile = true\n[parallelism]\ntensor_parallel_degree = 8\n"
        "data_parallel_shard_degree = 1\n"
        f"enable_async_tensor_parallel = {str(async_tp).lower()}\n"
        f"[activation_checkpoint]\nmode = '{mode}'{option}\n[float8]\n{float8}"
    )
    out = tmp_path / f"{name}.json"
    result = run("estimate", "--setup", str(setup), "--out", str(out))
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["summary"]


def test_async_tp_hides_each_tp_collective_behind_the_gemm_it_pairs_with(tmp_path):
    vanilla = tp8_summary(tmp_path, async_tp=False)
    pipelined = tp8_summary(tmp_path, async_tp=True)
    assert vanilla["comm_bf16_s"] > 0.01  # 8 collectives of 2 x 8192 x 4096 bf16 per block
    # by hand, per block: 8 collectives of 16384 x 4096 bf16, ~0.35 ms each at TP 8. The two
    # reduce-scatters of the input gradients (summed over q/k/v, over w1/w3) run unfused: a
    # quarter. Of the rest, the MLP's gemms (~0.65 ms) hide theirs and attention's q/k/v
    # (~0.14 ms) and o (~0.09 ms) hide 7/8 of themselves: three collectives' 1.05 ms less
    # ~0.3 ms shows beside them; each of the two fused reduce-scatters then sums its partials
    # (128 MiB read, 16 MiB written: ~0.06 ms): between an eighth and 3/8 of vanilla
    unfused = vanilla["comm_bf16_s"] / 4
    assert vanilla["comm_bf16_s"] / 8 < pipelined["comm_bf16_s"] - unfused
    assert pipelined["comm_bf16_s"] - unfused < vanilla["comm_bf16_s"] * 3 / 8
    assert pipelined["bf16_s"] < vanilla["bf16_s"]  # a modelled step


def test_async_tp_fuses_float8_gathers_only_where_the_gemm_consumes_them(tmp_path):
    # tensorwise casts before each gather (torchao's float8 TP plan): pipelined like bf16, in
    # half the bytes; rowwise casts after it, so Inductor's pass finds no matmul to fuse with
    # (pytorch/pytorch#149990) and its four gathers per block run whole
    rowwise = tp8_summary(tmp_path, async_tp=True, recipe="rowwise")
    tensorwise = tp8_summary(tmp_path, async_tp=True, recipe="tensorwise")
    vanilla = tp8_summary(tmp_path, async_tp=False, recipe="rowwise")["comm_bf16_s"]
    # rowwise: 4 gathers and the 2 summed input-gradient reduce-scatters unfused, 3/4
    assert rowwise["comm_fp8_s"] >= 0.74 * vanilla
    assert rowwise["comm_bf16_s"] < 0.6 * vanilla
    # tensorwise: its gathers move half the bytes and hide as bf16's do (behind faster gemms,
    # with an amax all-reduce before each cast)
    assert tensorwise["comm_fp8_s"] < 0.6 * vanilla < rowwise["comm_fp8_s"]


def test_async_tp_under_sac_hides_the_gathered_again_input_behind_the_rerun_gemm_only(tmp_path):
    def comm(mode: str, async_tp: bool) -> float:
        return tp8_summary(tmp_path, async_tp=async_tp, mode=mode)["comm_bf16_s"]

    one = comm("none", False) / 8  # one collective: 8 a block without recompute
    assert comm("selective", False) == pytest.approx(10 * one)  # SAC gathers two inputs again
    # the compiled graph (tests/test_async_tp_graph.py): each input gathered again runs beside
    # the one column gemm SAC reruns, wk (N 128: ~0.03 ms against ~0.35 ms of gather, nearly
    # all of it shows) and w3 (N 1792: ~0.4 ms, 7/8 of it hides the gather): about one
    # collective more than without recompute, not the half that q/k/v and w1/w3 would leave
    extra = comm("selective", True) - comm("none", True)
    assert 0.8 * one < extra < 1.3 * one


@pytest.mark.parametrize("gemms", [("--gemm-efficiency", "0.7"), ("--times", "datasheet")])
def test_a_sharded_model_times_its_block_gemms_with_any_gemm_model(gemms):
    # the shipped block's gemms carry their accumulation; a roofline at a given efficiency
    # has no notion of it and still times them
    args = ["estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2", "--gpu", "h100"]
    result = invoke_cli(*args, *gemms)
    assert result.exit_code == 0, result.output
    assert "step" in result.output


def test_async_tp_as_an_option_answers_as_the_setup_key(tmp_path):
    short = tmp_path / "s.toml"
    short.write_text(
        "[model]\nname = 'llama3-8b'\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n"
        "compile = true\n[parallelism]\ntensor_parallel_degree = 4\n"
        "data_parallel_shard_degree = 2\nenable_async_tensor_parallel = true\n"
        "[activation_checkpoint]\nmode = 'full'\n[float8]\nfilter_fqns = ['output']\n"
    )
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    options = ("estimate", "--model", "llama3-8b", "--tokens", "16384", "--tp", "4", "--fsdp",
               "2", "--recompute", "full", "--step-ms", "900")  # fmt: skip
    by_file = run("estimate", "--setup", str(short), "--step-ms", "900", "--out", str(a))
    by_options = run(*options, "--async-tp", "--out", str(b))
    vanilla = run(*options, "--out", str(c))
    for result in (by_file, by_options, vanilla):
        assert result.exit_code == 0, result.output
    sa, sb, sc = (json.loads(p.read_text())["summary"] for p in (a, b, c))
    for key in ("bf16_s", "fp8_s", "speedup", "comm_bf16_s", "comm_fp8_s"):
        assert sa[key] == pytest.approx(sb[key]), key
    # async TP hides part of the TP collectives vanilla TP leaves bare
    assert sb["comm_bf16_s"] < sc["comm_bf16_s"]
    refused = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--async-tp")
    assert refused.exit_code == 2 and "give --tp 2 or more" in refused.output
    beside = run("estimate", "--setup", str(short), "--async-tp")
    assert beside.exit_code == 2 and "drop --async-tp" in beside.output


DEEPSEEK_16B = """
[model]
name = "deepseek_v3"
flavor = "16B"
converters = ["float8"]
[training]
seq_len = 8192
local_batch_size = 1
[parallelism]
data_parallel_shard_degree = 8
[float8]
recipe_name = "tensorwise"
"""


def test_a_deepseek_setup_prints_its_filter_in_torchtitans_deepseek_names(tmp_path):
    """kv_a_proj_with_mqa (N = 576) stays bf16 in the table, so the printed filter names it as
    torchtitan's deepseek_v3 does; the router and the routed experts are said as comments."""
    path = tmp_path / "ds.toml"
    path.write_text(DEEPSEEK_16B)
    result = run("estimate", "--setup", str(path))
    assert result.exit_code == 0, result.output
    table = {line.split()[0]: line.split()[-1] for line in result.output.splitlines()[2:16]}
    assert table["self_attn.kv_a_proj_with_mqa"] == "bf16"
    line = next(x for x in result.output.splitlines() if x.startswith("filter_fqns = "))
    assert '"attention.wkv_a"' in line and '"router.gate"' in line
    assert "self_attn" not in line and "kv_a_proj" not in line
    assert "# routed experts (moe.experts: 3D parameters, no nn.Linear)" in result.output
