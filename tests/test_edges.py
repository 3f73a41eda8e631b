"""The edges of the features of issue 26: every input honoured or refused in one line naming
its field or option (exit 2), every file checked on load, no inf or NaN from a file accepted.
One test per class of case, through the CLI where a user meets it."""

import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/synthetic.py
import pytest
from conftest import invoke_cli


def run(*args: str, short: bool = False):
    """The command; an estimate with every note (`--show-all`) unless `short`."""
    full = ["--show-all"] if args and args[0] == "estimate" and not short else []
    return invoke_cli(*args, *full)


def refused(result, *texts: str) -> None:
    """One line, exit 2, naming the problem; no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("warning")]
    assert len(lines) == 1, result.output
    for text in texts:
        assert text in lines[0], result.output


# --- output files --------------------------------------------------------------------------------


def test_an_output_name_too_long_is_refused_and_one_near_the_limit_written(tmp_path):
    refused(
        run("estimate", "--shape", "64,64,64", "--out", tmp_path / ("a" * 300 + ".csv")), "long"
    )
    near = tmp_path / ("b" * 246 + ".csv")  # 250 bytes: its temporary file's name must fit too
    result = run("estimate", "--shape", "64,64,64", "--out", near)
    assert result.exit_code == 0, result.output
    assert near.is_file() and [p.name for p in tmp_path.iterdir()] == [near.name]


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--shape", "64,64,64", "--out"],
        ["plot", "--out"],
        ["report", "--model", "gpt2", "--tokens", "64", "--out"],
    ],
    ids=["estimate", "plot", "report"],
)
def test_an_output_in_a_missing_directory_is_refused_not_created(command, tmp_path):
    name = {"plot": "p.png", "report": "r.md"}.get(command[0], "x.csv")
    target = tmp_path / "missing" / "sub" / name
    refused(run(*command, target), f"no directory {tmp_path / 'missing'}")
    assert not (tmp_path / "missing").exists()


def test_an_output_directory_is_created_only_under_an_existing_one(tmp_path):
    from f8roof.files import OutputError, check_output_dir

    assert check_output_dir(tmp_path / "new") == tmp_path / "new"  # one level: created later
    with pytest.raises(OutputError, match="no directory"):
        check_output_dir(tmp_path / "a" / "b")


def test_an_interrupted_report_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from f8roof.renderers import plot

    out = tmp_path / "r.md"
    assert run("report", "--model", "gpt2", "--tokens", "1024", "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(before) == 5  # the report and its four plots (the step first)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the last plot is drawn

    monkeypatch.setattr(plot, "overhead_share", interrupted)
    result = run("report", "--model", "gpt2", "--tokens", "2048", "--out", out)
    assert result.exit_code != 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporaries


def test_a_model_table_and_its_summary_are_written_as_one_set(tmp_path, monkeypatch):
    from f8roof.renderers import frames

    out = tmp_path / "m.csv"

    def broken(summary):
        raise KeyboardInterrupt

    monkeypatch.setattr(frames, "summary_csv", broken)
    result = run("estimate", "--model", "gpt2", "--tokens", "1024", "--out", out)
    assert result.exit_code != 0 and list(tmp_path.iterdir()) == []


# --- calibration files: every field checked on load ------------------------------------------


def _shipped() -> dict:
    from f8roof.calibration.shipped import shipped_calibration
    from f8roof.hardware.presets import resolve_gpu

    return json.loads(shipped_calibration(resolve_gpu("h100")).read_text())


def _kernel(d):
    return d["variants"][1]["kernel_sets"][0]["kernels"][0]


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["datasheet_gemm"]["dtypes"]["bf16"].update(tiles=[]), "bf16.tiles: empty"),
        (
            lambda d: d["ceilings"].update(copy_bandwidth_bytes_per_s=1e-300),
            "ceilings.copy_bandwidth_bytes_per_s",
        ),
        (
            lambda d: d["kernel_time"]["pooled"].update(bandwidth_bytes_per_s=1e-3),
            "kernel_time.pooled.bandwidth_bytes_per_s",
        ),
        (lambda d: d["ceilings"].update(launch_floor_s=1e6), "ceilings.launch_floor_s"),
        (lambda d: d["kernel_time"]["pooled"].update(floor_s=1e6), "pooled.floor_s"),
        (lambda d: _kernel(d).update(kind="bogus"), "kernels[0].kind"),
        (lambda d: _kernel(d).update(graph="sideways"), "kernels[0].graph"),
        (lambda d: _kernel(d).update(role="chef"), "kernels[0].role"),
        (lambda d: _kernel(d).update(role="weight,input"), "kernels[0].role"),
        (lambda d: d["environment"].update(sm_count=0), "environment.sm_count"),
        (lambda d: d["variants"][1]["kernel_sets"][0].update(shapes=[]), "shapes: empty"),
        (lambda d: d["fit_shapes"].append(d["fit_shapes"][0]), "fit_shapes: a shape appears"),
        (lambda d: d["kernel_time"]["kinds"].update(bogus=d["kernel_time"]["pooled"]), "bogus"),
    ],
    ids=[
        "empty tiles",
        "tiny bandwidth",
        "tiny kernel bandwidth",
        "launch floor of 10^6 s",
        "kernel floor of 10^6 s",
        "kernel kind",
        "graph",
        "role",
        "roles out of order",
        "sm 0",
        "kernel set without shapes",
        "a fit shape twice",
        "kernel-time kind",
    ],
)
def test_a_damaged_calibration_is_refused_naming_the_field(edit, field, tmp_path):
    data = _shipped()
    edit(data)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    refused(run("estimate", "--calibration", path, "--shape", "4096,4096,4096"), field)


def test_a_key_twice_in_a_file_is_refused(tmp_path):
    path = tmp_path / "twice.json"
    text = json.dumps(_shipped())
    path.write_text(text.replace('"kind": "traffic"', '"kind": "traffic", "kind": "measured"', 1))
    refused(run("estimate", "--calibration", path, "--shape", "64,64,64"), "'kind' appears twice")


def test_an_estimate_that_is_not_finite_is_refused_not_printed():
    from f8roof.engine.answer import check_finite
    from f8roof.engine.estimate import estimate
    from f8roof.engine.resolve import Request, resolve
    from f8roof.errors import F8RoofError

    resolved = resolve(Request(gpu="h100"))
    frame = estimate([(4096, 4096, 4096)], resolved.config, ranges=True)
    check_finite(frame, resolved)
    frame["speedup"][0] = float("inf")
    with pytest.raises(F8RoofError, match="speedup at 4096x4096x4096 is inf"):
        check_finite(frame, resolved)


# --- the sharded block file --------------------------------------------------------------------


@pytest.fixture(scope="module")
def blocks() -> dict:
    from f8roof.calibration.block_file import SHIPPED

    return json.loads(SHIPPED.read_text())


def _fit(data: dict, recipe="tensorwise") -> dict:
    return next(
        f
        for f in data["fits"]
        if f["capture"]["recipe"] == recipe
        and f["capture"]["spec"]["parallel"]["tp"] == 2
        and f["capture"]["spec"]["name"] == "llama3-8b"
        and f["capture"]["spec"]["parallel"]["recompute"] == "none"
        and f["capture"]["spec"]["tokens"] == f["capture"]["spec"]["seq_len"]
    )


def _segments(data):
    return _fit(data)["segments"]


def _duplicate(data):
    twin = json.loads(json.dumps(_fit(data, recipe=None)))
    twin["capture"]["recipe"] = "tensorwise"
    data["fits"].insert(0, twin)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: [k.update(count=["-3", "0"]) for s in _segments(d) for k in s["kernels"]],
            "count is -3",
        ),
        (
            lambda d: _segments(d)[0]["kernels"][0].update(bytes_read=["1" + "0" * 23, "0"]),
            "bytes_read is 1" + "0" * 23,
        ),
        (lambda d: _segments(d)[0]["kernels"][0].update(kind="bogus"), "kind 'bogus'"),
        (lambda d: _segments(d)[0]["gemms"][0].update(dtype="float3"), "dtype 'float3'"),
        (lambda d: _segments(d)[0]["gemms"][0].update(m=["0", "0"]), "m is 0"),
        (lambda d: _fit(d)["checks"][0].update(kernel_bytes_error=math.nan), "kernel_bytes_error"),
        (_duplicate, "two fits for llama3-8b TP 2"),
        (lambda d: _fit(d).update(saved_bytes=["0", "-5"]), "saved_bytes falls with tokens"),
        (lambda d: _fit(d).update(saved_bytes=["-1" + "0" * 9, "1"]), "saved_bytes is -1e+09"),
        (lambda d: _fit(d).update(saved_bytes=["0"]), "not a block fit"),
    ],
    ids=[
        "negative count",
        "1e23 bytes",
        "kind",
        "dtype",
        "gemm dim 0",
        "NaN check",
        "twice",
        "saved bytes falling",
        "saved bytes negative",
        "saved bytes malformed",
    ],
)
def test_a_damaged_block_file_is_refused_naming_the_fit(edit, message, blocks, tmp_path):
    from f8roof.calibration import block_file

    data = json.loads(json.dumps(blocks))
    edit(data)
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(block_file.BlockFileError, match=re.escape(message)):
        block_file.BlockFits.load(path)


def test_the_estimate_refuses_a_damaged_shipped_block_file(blocks, tmp_path, monkeypatch):
    from f8roof.calibration import block_file

    data = json.loads(json.dumps(blocks))
    _duplicate(data)
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(block_file, "SHIPPED", path)
    for cached in (block_file._shipped_index, block_file.shipped_fit):
        cached.cache_clear()
    try:
        result = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2")
    finally:
        monkeypatch.undo()
        for cached in (block_file._shipped_index, block_file.shipped_fit):
            cached.cache_clear()
    refused(result, "two fits for llama3-8b TP 2")


# --- setup files: honoured or refused, in the file's words --------------------------------------

LLAMA = """[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]

[training]
local_batch_size = 1
seq_len = 8192
compile = true

[parallelism]
data_parallel_shard_degree = 8
tensor_parallel_degree = 1
"""
OP_SAC = '\n[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n'


def setup_file(tmp_path, text: str, name="setup.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def step_line(result) -> str:
    assert result.exit_code == 0, result.output
    return next(
        line for line in result.output.splitlines() if line.startswith("step as torchtitan")
    )


def assumed(result) -> list[str]:
    return [line.strip() for line in result.output.splitlines() if "assumes:" in line]


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1", "binary"])
def test_a_setup_that_is_not_utf8_is_one_line(encoding, tmp_path):
    path = tmp_path / "s.toml"
    if encoding == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    else:
        path.write_bytes(("# caf\u00e9\n" + LLAMA + OP_SAC).encode(encoding))
    refused(run("estimate", "--setup", path), f"setup {path} is not UTF-8 text")


def test_rowwise_with_gw_hp_in_a_setup_is_f8roofs_rowwise_gw_hp(tmp_path):
    path = setup_file(tmp_path, LLAMA + OP_SAC + '[float8]\nrecipe_name = "rowwise_with_gw_hp"\n')
    result = run("estimate", "--setup", path, short=True)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("h100 rowwise_gw_hp (shipped h100.json)")
    assert 'recipe_name = "rowwise_with_gw_hp"' in result.output  # told back in torchtitan's name


def test_a_setup_without_activation_checkpoint_is_torchtitans_layer_sac(tmp_path):
    """torchtitan's JobConfig: mode 'selective', selective_ac_option '2': every 2nd block
    checkpointed whole. Modelled (half the blocks' forward again) and said."""
    layer, full = tmp_path / "layer.json", tmp_path / "full.json"
    result = run("estimate", "--setup", setup_file(tmp_path, LLAMA), "--out", layer)
    assert result.exit_code == 0, result.output
    text = " ".join(assumed(result))
    assert "torchtitan's default 'selective'" in text and "default '2' (layer SAC" in text
    assert "recompute full on every 2nd block" in result.output
    whole = setup_file(tmp_path, LLAMA + "[activation_checkpoint]\nmode = 'full'\n", "f.toml")
    assert run("estimate", "--setup", whole, "--out", full).exit_code == 0
    plain = tmp_path / "none.json"
    off = setup_file(tmp_path, LLAMA + "[activation_checkpoint]\nmode = 'none'\n", "n.toml")
    assert run("estimate", "--setup", off, "--out", plain).exit_code == 0
    every_2nd, every, none = (json.loads(p.read_text())["summary"] for p in (layer, full, plain))
    # 16 of llama3-8b's 32 blocks rerun their forward, beside what the partitioner
    # recomputes in every block without checkpointing
    for key in ("recompute_bf16_s", "recompute_fp8_s"):
        assert every_2nd[key] == pytest.approx((every[key] + none[key]) / 2)
        assert none[key] < every_2nd[key] < every[key]


def test_filter_fqns_empty_absent_and_auto_filter_are_three_answers(tmp_path):
    def step(extra: str, name: str) -> tuple[str, list[str]]:
        result = run("estimate", "--setup", setup_file(tmp_path, LLAMA + OP_SAC + extra, name))
        return step_line(result), assumed(result)

    empty, empty_notes = step("[float8]\nfilter_fqns = []\n", "e.toml")
    absent, absent_notes = step("", "a.toml")
    output, _ = step('[float8]\nfilter_fqns = ["output"]\n', "o.toml")
    auto, auto_notes = step('[float8]\nfilter_fqns = ["auto_filter_small_kn"]\n', "f.toml")
    assert empty == absent != output  # [] converts the output projection, ["output"] does not
    assert any("filter_fqns [] (none)" in n for n in empty_notes)
    assert any("filter_fqns not set: torchtitan's default []" in n for n in absent_notes)
    assert auto != empty  # torchao's auto filter keeps llama3-8b's k/v projections in bf16
    assert any("torchao's auto filter for tensorwise" in n for n in auto_notes)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_layers_per_stage = 5\n",
            "7 pipeline stages of 5 layers do not divide over 4 ranks",
        ),
        (
            "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = 'ZBVZeroBubble'\n",
            "splits the backward",
        ),
        ("[parallelism]\nexpert_tensor_parallel_degree = 2\n", "'expert_tensor_parallel_degree'"),
        ("[float8]\nemulate = true\n", "'emulate' = true"),
        (
            "[float8]\nrecipe_name = 'rowwise_with_gw_hp'\nfilter_fqns = ['auto_filter_small_kn']\n",
            "no rule",
        ),
    ],
    ids=[
        "pipeline layers per stage",
        "zero-bubble schedule",
        "expert tensor",
        "emulate",
        "auto filter without a rule",
    ],
)
def test_setup_keys_f8roof_does_not_model_are_refused(extra, message, tmp_path):
    text = (
        LLAMA.replace("[parallelism]\n", "[parallelism]\n" + extra.split("\n", 1)[1])
        if extra.startswith("[parallelism]")
        else LLAMA + OP_SAC + extra
    )
    refused(run("estimate", "--setup", setup_file(tmp_path, text)), message)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda t: t.replace("local_batch_size = 1", "local_batch_size = 1\nbatch_size = 4"),
            "both 'local_batch_size' and 'batch_size'",
        ),
        (
            lambda t: t.replace('name = "llama3"\nflavor = "8B"', 'name = "gemma"'),
            "unknown model 'gemma'",
        ),
        (
            lambda t: t.replace('converters = ["float8"]', 'converters = ["mx"]'),
            "h100 (sm_90) has no MXFP8 gemms",  # torchtitan's MX converter, on the default GPU
        ),
        (
            lambda t: t.replace('converters = ["float8"]', 'converters = ["int4"]'),
            "unknown converter 'int4'",
        ),
        (
            lambda t: t.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 3"),
            "seq_len 8192 does not split over tensor_parallel_degree 3",
        ),
        (
            lambda t: t.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 3").replace(
                "8192", "6144"
            ),
            "tensor_parallel_degree 3 does not divide N = 4096",
        ),
        (
            lambda t: t.replace(
                "data_parallel_shard_degree = 8", "data_parallel_shard_degree = 1000000"
            ),
            "data_parallel_shard_degree 1000000 exceeds",
        ),
        (
            lambda t: t + "[f8roof]\nstep_ms = 50\n",
            "step of 50 ms is shorter than its bf16 gemms at the GPU's peak",
        ),
    ],
    ids=[
        "two batch sizes",
        "unknown model",
        "mx",
        "other converter",
        "seq_len and tp",
        "file terms",
        "fsdp 10^6",
        "short step",
    ],
)
def test_a_bad_setup_is_one_line_naming_its_key(edit, message, tmp_path):
    result = run("estimate", "--setup", setup_file(tmp_path, edit(LLAMA + OP_SAC)))
    refused(result, message)
    assert "--tp" not in result.output and "--fsdp" not in result.output


def test_expert_parallel_degree_in_a_setup_is_honoured(tmp_path):
    text = LLAMA.replace('name = "llama3"\nflavor = "8B"', 'name = "mixtral-8x7b"')
    text = text.replace(
        "tensor_parallel_degree = 1", "tensor_parallel_degree = 1\nexpert_parallel_degree = 8"
    )
    result = run("estimate", "--setup", setup_file(tmp_path, text + OP_SAC), "--show-all")
    assert result.exit_code == 0, result.output
    assert "setup: EP 8" in result.output and "EP all-to-alls: " in result.output
    assert "4 a MoE layer" in result.output  # per-op SAC saves the all-to-alls: none rerun


# --- workloads ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokens", "8193", "--tp", "2"], "--tokens 8193: sequence parallelism"),
        (["--tokens", "1", "--tp", "8"], "--tp 8 does not divide them"),
        (["--tokens", "7", "--tp", "8"], "--tp 8 does not divide them"),
        (["--tokens", "8192", "--fsdp", "1000000"], "--fsdp 1000000 exceeds 262144"),
        (["--tokens", "8192", "--tp", "8", "--fsdp", "65536"], "ranks exceed 262144"),
        (["--tokens", "8192", "--fsdp", "0"], "--fsdp takes a degree >= 1"),
        (["--tokens", "8192", "--step-ms", "1e308"], "--step-ms must be a positive number"),
        (["--tokens", "8192", "--step-ms", "50"], "step of 50 ms is shorter than its bf16 gemms"),
    ],
    ids=[
        "8193 on TP 2",
        "1 on TP 8",
        "7 on TP 8",
        "FSDP 10^6",
        "world 2^19",
        "FSDP 0",
        "1e308 ms",
        "short step",
    ],
)
def test_a_workload_no_run_has_is_refused(args, message):
    refused(run("estimate", "--model", "llama3-8b", *args), message)


def test_compare_refuses_what_estimate_refuses():
    refused(
        run("compare", "--model", "llama3-8b", "--tokens", "2048", "--fsdp", "1000000"),
        "exceeds 262144",
    )
    refused(
        run("compare", "--model", "llama3-8b", "--tokens", "2049", "--tp", "2"), "--tokens 2049"
    )
    refused(
        run("compare", "--model", "llama3-8b", "--tokens", "2048", "--float8-all-gather"),
        "give --fsdp 2 or more",
    )


def test_a_billion_experts_are_refused(tmp_path):
    config = {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "vocab_size": 32000, "num_local_experts": 10**9, "num_experts_per_tok": 2,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    refused(run("estimate", "--model", path, "--tokens", "8192"), "1000000000 routed experts")


def test_fsdp_1_is_said_not_dropped():
    """FSDP off answers as no --fsdp does, said: llama3-8b's fp32 states alone need 120 GiB,
    so neither fits one GPU either way, and the answer names the FSDP degree that would;
    GPT-2's fits, FSDP 1 said."""
    off = run("estimate", "--model", "llama3-8b", "--tokens", "8192", "--fsdp", "1", short=True)
    plain = run("estimate", "--model", "llama3-8b", "--tokens", "8192", short=True)
    assert off.exit_code == plain.exit_code == 0, off.output + plain.output
    memory = [line for line in plain.output.splitlines() if "peak memory" in line]
    assert memory and "neither fits" in memory[0] and memory[0] in off.output
    assert "bf16 fits at FSDP" in off.output
    result = run("estimate", "--model", "gpt2", "--tokens", "8192", "--fsdp", "1")
    assert result.exit_code == 0, result.output
    assert (
        "setup: FSDP 1 (off)" in result.output and "note: FSDP 1: one rank holds" in result.output
    )
    refused(run("estimate", "--shape", "64,64,64", "--fsdp", "1"), "go with --model")


def test_tokens_without_a_sequence_length_are_whole_long_sequences():
    result = run("estimate", "--model", "llama3-8b", "--tokens", "100000", "--tp", "2")
    assert result.exit_code == 0, result.output
    assert "16 x 6250 tokens per rank" in result.output and "3125 x 32" not in result.output


# --- options honoured where the answer is, or refused -------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "mixtral-8x7b"], "MoE blocks are not compiled yet"),
        (["--model", "llama3-8b", "--no-calibration"], "needs a calibration"),
        (["--model", "llama3-8b", "--gpu", "h100-pcie"], "needs a calibration"),
    ],
    ids=["MoE", "no calibration", "preset without a shipped file"],
)
def test_overhead_codegen_that_cannot_compile_is_refused(args, message):
    refused(run("estimate", *args, "--tokens", "8192", "--overhead", "codegen"), message)


def test_impl_reference_reaches_the_step_summary():
    result = run(
        "estimate", "--model", "llama3-8b", "--tokens", "8192", "--tp", "2", "--impl", "reference"
    )
    assert result.exit_code == 0, result.output
    assert "the sharded block is torchao's Float8Linear, not --impl reference" in result.output
    assert "shipped sharded block" not in result.output


def test_routed_experts_stay_bf16_as_torchtitan_converts_and_their_all_to_alls_are_timed(tmp_path):
    result = run("estimate", "--model", "mixtral-8x7b", "--tokens", "8192", "--ep", "8")
    assert result.exit_code == 0, result.output
    notes = " ".join(assumed(result))
    assert "routed experts (3D parameters, no nn.Linear) stay bf16" in notes
    assert "EP 8: each MoE layer's token dispatch and combine" in notes
    # FSDP 16: at FSDP 8 Mixtral's fp32 states alone (46.7B x 16 B / 8) exceed an H100
    text = (
        LLAMA.replace('name = "llama3"\nflavor = "8B"', 'name = "mixtral-8x7b"').replace(
            "data_parallel_shard_degree = 8", "data_parallel_shard_degree = 16"
        )
        + OP_SAC
    )
    plain = step_line(run("estimate", "--setup", setup_file(tmp_path, text)))
    moe = run(
        "estimate",
        "--setup",
        setup_file(tmp_path, text + '[float8]\nmoe_fqns_prototype = ["experts"]\n', "m.toml"),
    )
    assert step_line(moe) != plain
    assert "routed experts in float8 rowwise (moe_fqns_prototype ['experts'])" in moe.output


def test_a_config_is_named_by_its_file_and_gets_no_other_models_block(tmp_path):
    folder = tmp_path / "llama3-8b"  # a folder named after a built-in, holding another model
    folder.mkdir()
    small = {
        "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
        "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 16,
        "vocab_size": 32000,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(small))
    result = run("estimate", "--model", folder / "config.json", "--tokens", "8192", "--tp", "2")
    assert result.exit_code == 0, result.output
    assert f"{folder / 'config.json'} on h100" in result.output
    assert "shipped sharded block for llama3-8b" not in result.output


def test_the_total_counts_the_linears_of_one_gpu_and_says_so():
    result = run("estimate", "--model", "deepseek-v3", "--tokens", "8192", "--ep", "8")
    assert result.exit_code == 0, result.output
    assert "45033 linears" in result.output  # the model's
    assert "of 6057 linears on each GPU (its share of the routed experts)" in result.output


def test_validation_without_a_seed_model_prints_no_nan():
    import pandas as pd

    from f8roof.device.accuracy import summary
    from f8roof.renderers.runs import validation_lines

    nan = float("nan")
    frame = pd.DataFrame(
        {
            "M": [32, 64], "K": [48, 64], "N": [64, 64], "recipe": ["tensorwise"] * 2,
            "context": ["none"] * 2, "implementation": ["torchao"] * 2,
            "error_pct": [3.0, -5.0], "seed_error_pct": [nan, nan], "wall_error_pct": [2.0, 1.0],
        }
    )  # fmt: skip
    line = validation_lines(frame, summary(frame), "out")[-1]
    assert "nan" not in line and "the seed's model: none here" in line


# --- presets without a shipped calibration: their own fitted fractions ------------------------


@pytest.mark.parametrize("gpu", ["h100-pcie"])
def test_a_preset_without_a_shipped_file_times_gemms_at_its_own_fractions(gpu):
    from f8roof.engine.resolve import Request, resolve
    from f8roof.hardware.presets import resolve_gpu
    from f8roof.timing.datasheet import datasheet_timing
    from f8roof.timing.gemm import GemmRole

    result = run("estimate", "--gpu", gpu, "--shape", "4096,4096,4096", short=True)
    assert result.exit_code == 0, result.output
    using = result.output.splitlines()[0]
    assert using.startswith(f"{gpu} ") and "datasheet timing, no calibration" in using
    assert "the seed" not in using
    config = resolve(Request(gpu=gpu)).config
    tiled = datasheet_timing(resolve_gpu(gpu)).all_gemms
    got = config.gemm_model.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096)[0]
    assert got == pytest.approx(tiled.time_s("bf16", GemmRole.OUTPUT, 4096, 4096, 4096)[0])
    seed = run("estimate", "--gpu", gpu, "--no-calibration", "--shape", "4096,4096,4096")
    assert "times: roofline" in seed.output and "gemms: the seed's roofline" in seed.output


@pytest.mark.parametrize(
    "gpu, code", [("b200-750w", "b200"), ("h100-nvl", "h100"), ("h200-nvl", "h100")]
)
def test_a_part_running_anothers_code_times_its_bytes_at_its_own_datasheet(gpu, code):
    """b200-750w is b200's die at 750 W, the NVL boards have H100's SMs and compute capability:
    torch.compile generates the same code, so each reads that preset's shipped bytes and times
    them by its own datasheet model."""
    from f8roof.engine.resolve import Request, resolve
    from f8roof.hardware.presets import resolve_gpu
    from f8roof.timing.datasheet import datasheet_timing
    from f8roof.timing.gemm import GemmRole

    result = run("estimate", "--gpu", gpu, "--shape", "8192,4096,14336", short=True)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{gpu} tensorwise (shipped {code}.json): datasheet times")
    part, source = (resolve(Request(gpu=g, times="datasheet")).config for g in (gpu, code))
    shape = (8192, 4096, 14336)
    tiled = datasheet_timing(resolve_gpu(gpu)).all_gemms
    got = part.gemm_model.time_s("bf16", GemmRole.OUTPUT, *shape)[0]
    assert got == pytest.approx(tiled.time_s("bf16", GemmRole.OUTPUT, *shape)[0])
    assert part.calibration.variants == source.calibration.variants
    bandwidth = datasheet_timing(resolve_gpu(gpu)).kernel_bandwidth_bytes_per_s
    assert part.calibration.ceilings.copy_bandwidth_bytes_per_s == pytest.approx(bandwidth)
    with_times = run("estimate", "--gpu", gpu, "--times", "datasheet", "--shape", "64,64,64")
    assert with_times.exit_code == 0, with_times.output


def test_mxfp8_on_mi355x_is_timed_by_its_mxfp8_gemms_and_kept_in_bf16():
    """f8roof gpus cites MXFP8 slower than bf16 on MI355X (pytorch/ao#4290): no llama3-8b
    linear converts (it converted every one at x1.66 on the seed's roofline)."""
    result = run("estimate", "--gpu", "mi355x", "--model", "llama3-8b", "--tokens", "8192",
                 "--recipe", "mxfp8_rceil")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "with 0 of 225 linears in float8" in result.output


def test_a_gemm_table_is_refused_for_block_scaled_gemms(tmp_path):
    path = tmp_path / "gemms.csv"
    path.write_text("M,K,N,bf16_time_s,fp8_time_s\n4096,4096,4096,0.000170,0.0000900\n")
    refused(
        run(
            "estimate",
            "--gpu",
            "b200",
            "--recipe",
            "mxfp8_rceil",
            "--gemm-table",
            path,
            "--shape",
            "4096,4096,4096",
        ),
        "not mxfp8_rceil's block-scaled ones",
    )


@pytest.mark.parametrize("gpu, recipe", [("b200", "mxfp8_rceil"), ("h100", "blockwise")])
def test_block_scaled_worst_and_ideal_overheads_take_their_launches(gpu, recipe):
    from f8roof.engine.estimate import estimate
    from f8roof.engine.resolve import Request, resolve

    frame = estimate([(16, 16, 16)], resolve(Request(gpu=gpu, recipes=recipe)).config)
    # three casts at least, each a 2 us launch; it was 0.0 us
    assert frame["overhead_s_ideal"].item() >= 3 * 2e-6
    assert frame["overhead_s_worst"].item() >= frame["overhead_s_ideal"].item()


# --- MI300X: the fnuz float8 encodings it runs -------------------------------------------------


def test_mi300x_code_is_generated_with_fnuz_casts():
    pytest.importorskip("torchao")
    from f8roof.hardware.presets import find_gpu
    from f8roof.profiler.capture import capture
    from f8roof.traffic.variant import Variant

    got = capture(
        Variant.from_key("torchao:tensorwise"),
        (64, 64, 64),
        device="codegen",
        gpu=find_gpu("mi300x"),
    )
    code = "\n".join(got.code.values())
    assert "float8_e4m3fnuz" in code and "float8_e5m2fnuz" in code
    assert "float8_e4m3fn)" not in code and "float8_e5m2)" not in code
    refused(
        run("compare", "--gpu", "mi300x", "--device", "codegen", "--shape", "64,64,64",
            "--no-fit", "--impl", "reference"),
        "mi300x runs fnuz: use --impl torchao",
    )  # fmt: skip


def test_a_gpu_from_the_setup_is_named_as_the_files_key(tmp_path):
    from f8roof.calibration.shipped import shipped_calibration
    from f8roof.hardware.presets import resolve_gpu

    text = LLAMA + OP_SAC + '[f8roof]\ngpu = "b200"\n'
    h100 = shipped_calibration(resolve_gpu("h100"))
    result = run("estimate", "--setup", setup_file(tmp_path, text), "--calibration", h100)
    refused(result, "drop gpu in [f8roof]")


def test_a_power_capped_part_stays_below_the_peak_ratio_unwarned_and_warns_above_it():
    """b200 at 750 W: a cap slows every gemm family alike (docs/mx.md, power caps), so MXFP8's
    ideal speedup at 8192^3 stays under the peaks' 2x as at 1000 W, unwarned; above float8's
    gemms at the peaks is not a GPU's, and warns."""
    from f8roof.engine.estimate import estimate, implausible
    from f8roof.engine.resolve import Request, resolve

    config = resolve(Request(gpu="b200-750w", recipes="mxfp8_rceil")).config
    stock = resolve(Request(gpu="b200", recipes="mxfp8_rceil")).config
    frame = estimate([(8192, 8192, 8192)], config)
    at_1000w = estimate([(8192, 8192, 8192)], stock)["speedup_ideal"][0]
    assert 1.5 < frame["speedup_ideal"][0] < 2.0
    # the casts keep their bandwidth under the cap: the capped speedup is a little higher
    assert at_1000w <= frame["speedup_ideal"][0] < 1.1 * at_1000w
    assert implausible(frame, config, {}) == []
    frame["speedup_ideal"] *= 3
    (warning,) = implausible(frame, config, {})
    assert warning["column"] == "speedup_ideal" and warning["value"] > warning["bound"]
