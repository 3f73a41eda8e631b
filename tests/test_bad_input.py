"""Every user-caused failure is one line naming the problem and exit 2, never a traceback;
every output tells the truth. One test per class, through the CLI."""

import json

import pytest


def one_line_error(result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("warning")]
    assert len(lines) == 1 and message in lines[0], result.output


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("x")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--shape", "64,64,64", "--out"],
        ["plot", "--out"],
        ["report", "--model", "gpt2", "--tokens", "64", "--out"],
        ["calibrate", "--device", "cpu", "--out"],
        ["compare", "--device", "cpu", "--no-fit", "--shape", "32,48,64", "--out"],
    ],
    ids=["estimate", "plot", "report", "calibrate", "compare"],
)
@pytest.mark.parametrize("where", ["under a file", "a directory"])
def test_output_paths_are_checked_before_the_work(cli, command, where, a_file, tmp_path):
    suffix = {"plot": "x.png", "report": "r.md", "calibrate": "c.json"}.get(command[0], "o.csv")
    target = a_file / suffix if where == "under a file" else tmp_path
    result = cli(*command, str(target))
    message = "is a file, not a directory" if where == "under a file" else "is a directory"
    one_line_error(result, message)


def test_validate_output_directory_under_a_file(cli, a_file, tmp_path):
    calibration = tmp_path / "c.json"
    calibration.write_text("{}")
    result = cli("validate", "--calibration", str(calibration), "--out", str(a_file / "v"))
    one_line_error(result, "is a file, not a directory")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", f"{2**70},16,16"], "exceeds"),
        (
            ["--gpu", "custom:bf16=inf,fp8=1e15,bandwidth=3e12", "--shape", "16,16,16"],
            "bf16_flops must be a positive finite number",
        ),
        (
            ["--gpu", "custom:bf16=nan,fp8=1e15,bandwidth=3e12", "--shape", "16,16,16"],
            "bf16_flops must be a positive finite number",
        ),
        (["--gemm-efficiency", "1.5", "--shape", "16,16,16"], "gemm_efficiency must be in (0, 1]"),
        (["--model", "gpt2", "--tokens", str(2**70)], "exceeds"),
        (
            ["--impl", "triton", "--shape", "16,16,16"],
            "Invalid value for '--impl': 'triton' is not one of 'torchao', 'reference'",
        ),
        (
            ["--before", "batchnorm", "--shape", "16,16,16"],
            "Invalid value for '--before': 'batchnorm' is not one of",
        ),
        (["--model", "gpt2", "--tokens", "64", "--before", "layernorm"], "drop --before/--after"),
    ],
)
def test_bad_numbers_and_names(cli, args, message):
    one_line_error(cli("estimate", *args), message)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_budgets_must_be_positive_finite(cli, value, tmp_path):
    result = cli("calibrate", "--device", "cpu", "--budget", value, "--out", str(tmp_path / "c"))
    assert result.exit_code == 2 and "--budget" in result.output


@pytest.mark.parametrize(
    "config, message",
    [
        ({"hidden_size": 4095, "num_attention_heads": 32}, "not divisible by num_attention_heads"),
        ({"num_key_value_heads": 5}, "not divisible by num_key_value_heads"),
    ],
)
def test_model_configs_whose_heads_do_not_divide(cli, config, message, tmp_path):
    base = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 32000,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base | config))
    one_line_error(cli("estimate", "--model", str(path), "--tokens", "1024"), message)


def test_validate_unknown_recipe(cli, tmp_path):
    import synthetic

    from f8roof.calibration.fitting import fit_calibration

    path = tmp_path / "c.json"
    fit_calibration(synthetic.measurements()).save(path)
    result = cli(
        "validate",
        "--calibration",
        str(path),
        "--recipes",
        "junk",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "v"),
    )
    one_line_error(result, "unknown recipe 'junk'")


def test_best_recipe_is_one_float8_can_run():
    """M = 8200 is no multiple of 16: tensorwise's grad_weight gemm cannot run, rowwise_gw_hp's
    (kept in bf16) can. The recommendation must pick the recipe that runs."""
    from f8roof.engine.decision import DecisionPolicy
    from f8roof.engine.recommend import recommend
    from f8roof.training.catalog import builtin

    EXPECTED = DecisionPolicy.EXPECTED
    from f8roof.engine.resolve import Request, resolve

    resolved = resolve(Request(gpu="h100", recipes="tensorwise,rowwise_gw_hp"))
    rec = recommend(builtin("llama3-8b"), tokens=8200, resolved=resolved, policy=EXPECTED)
    layers = rec.layers
    assert set(layers.loc[layers["convert"], "recipe"]) == {"rowwise_gw_hp"}
    assert rec.totals.converted_linears > 0 and rec.totals.speedup > 1


def test_a_cpu_calibration_is_labelled_cpu_and_implausible_results_warn(cli, tmp_path):
    import synthetic

    from f8roof.calibration.fitting import fit_calibration

    measurements = synthetic.measurements(device="cpu")
    measurements = type(measurements)(
        synthetic.environment(device="cpu", name="x86_64", gpu=None),
        *(
            getattr(measurements, f)
            for f in ("ceilings", "fit_shapes", "gemms", "kernels", "steps")
        ),
    )
    path = tmp_path / "cpu.json"
    fit_calibration(measurements).save(path)
    result = cli(
        "estimate", "--calibration", str(path), "--shape", "64,64,64", "--impl", "reference"
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("x86_64 reference tensorwise")
    assert "measured on x86_64 (cpu)" in result.output.splitlines()[0]
    refused = cli("estimate", "--calibration", str(path), "--gpu", "h100", "--shape", "64,64,64")
    one_line_error(refused, "which is no GPU preset: drop --gpu")
