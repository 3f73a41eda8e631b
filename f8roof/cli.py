"""The f8roof command line. Thin: parse options, call one library function, render."""

from __future__ import annotations

import sys

import click

from f8roof.errors import F8RoofError


def _fail_on(*errors: type[Exception]):
    """Turn the models' ValueErrors into one-line user errors."""

    class _Guard:
        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            if kind is not None and issubclass(kind, errors):
                raise F8RoofError(str(value)) from None
            return False

    return _Guard()


def _progress(label: str, describe=str):
    """A progress bar on stderr (current item and time left) for a long loop: a function that
    takes the items and yields them."""

    def bar(items):
        with click.progressbar(
            items,
            label=label,
            show_eta=True,
            file=sys.stderr,
            item_show_func=lambda item: describe(item) if item else "",
        ) as shown:
            yield from shown

    return bar


def _roles(text: str | None) -> frozenset:
    from f8roof.models.recipes import Role

    if not text:
        return frozenset()
    if text.strip() == "all":
        return frozenset(Role)
    try:
        return frozenset(Role(p.strip()) for p in text.split(",") if p.strip())
    except ValueError:
        raise F8RoofError(f"bad role list {text!r}; roles: input, weight, grad_output") from None


@click.group()
@click.version_option(package_name="f8roof")
def main() -> None:
    """Should this linear train in float8? Measured float8 vs bf16 speedups for torch.compile."""


@main.command()
def gpus() -> None:
    """List the GPU presets (datasheet ceilings) and the device names they match."""
    from f8roof.models.hardware import PRESETS

    click.echo(f"{'name':10} {'bf16 TFLOP/s':>12} {'fp8 TFLOP/s':>12} {'HBM TB/s':>9}  matches")
    for gpu in PRESETS.values():
        click.echo(
            f"{gpu.name:10} {gpu.bf16_flops / 1e12:12.1f} {gpu.fp8_flops / 1e12:12.1f} "
            f"{gpu.memory_bandwidth_bytes_per_s / 1e12:9.2f}  {', '.join(gpu.device_prefixes)}"
        )
    click.echo("custom GPU: --gpu custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12")


@main.command()
@click.option(
    "--gpu",
    "gpu_name",
    default=None,
    help="GPU preset, device name, or custom:bf16=..,fp8=..,bandwidth=.. (default: the "
    "calibration's GPU, else h100)",
)
@click.option(
    "--recipe",
    default="tensorwise",
    show_default=True,
    help="tensorwise, tensorwise_delayed, tensorwise_static_weight, rowwise, rowwise_gw_hp",
)
@click.option(
    "--scaling",
    default=None,
    help="tensorwise scaling per role, e.g. input=dynamic,weight=delayed,grad_output=dynamic",
)
@click.option(
    "--fused",
    default=None,
    help="roles fused with the previous op (the seed's F), e.g. input,grad_output",
)
@click.option(
    "--compile-limitations",
    is_flag=True,
    help="model torch.compile limitations (the seed's L) for every role",
)
@click.option(
    "--gemm-time",
    type=click.Choice(["roofline", "benchmarks"]),
    default="roofline",
    show_default=True,
)
@click.option(
    "--gemm-table",
    type=click.Path(dir_okay=False),
    default=None,
    help="CSV of measured gemm times (with --gemm-time benchmarks)",
)
@click.option(
    "--gemm-efficiency",
    type=float,
    default=None,
    help="fraction of peak FLOP/s gemms reach in the roofline (seed: 0.6)",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    default=None,
    help="calibration file (default: the shipped one for --gpu, if any)",
)
@click.option("--no-calibration", is_flag=True, help="roofline presets only, ignore shipped files")
@click.option(
    "--overhead",
    type=click.Choice(["fitted", "codegen"]),
    default="fitted",
    show_default=True,
    help="codegen: generate this very shape's kernels (slow, exact)",
)
@click.option("--shape", "shape_texts", multiple=True, help="M,K,N (repeatable)")
@click.option(
    "--shapes-file", type=click.Path(dir_okay=False), default=None, help="CSV with columns M, K, N"
)
@click.option(
    "--sweep",
    "sweep_name",
    default=None,
    help="seed (M, K, N in 2^9..2^15, 343 shapes) or pow2 (squares 2^7..2^16)",
)
@click.option("--out", default=None, help="write every row to FILE (.csv, .json or .md)")
@click.option(
    "--model",
    default=None,
    help="a built-in model (f8roof models) or a Hugging Face config.json: one row per "
    "linear layer type, a recommendation and the step's total",
)
@click.option("--tokens", type=int, default=None, help="tokens per step (M), with --model")
def estimate(
    gpu_name,
    recipe,
    scaling,
    fused,
    compile_limitations,
    gemm_time,
    gemm_table,
    gemm_efficiency,
    calibration,
    no_calibration,
    overhead,
    shape_texts,
    shapes_file,
    sweep_name,
    out,
    model,
    tokens,
) -> None:
    """Estimate bf16 vs float8 forward+backward time of linears of given shapes."""
    from f8roof.estimate import codegen_columns, square_breakeven
    from f8roof.estimate import estimate as run_estimate
    from f8roof.files import write_text_atomic
    from f8roof.models.gemm import GemmTableError
    from f8roof.render import render_table, renderer_for
    from f8roof.shapes import parse_shape, read_shapes_file, sweep

    config, recipe_values, gemm_time, source = _estimate_setup(
        gpu_name=gpu_name,
        recipe=recipe,
        scaling=scaling,
        fused=fused,
        compile_limitations=compile_limitations,
        gemm_time=gemm_time,
        gemm_table=gemm_table,
        gemm_efficiency=gemm_efficiency,
        calibration=calibration,
        no_calibration=no_calibration,
        many_recipes_ok=bool(model),
    )
    gpu, recipe_value, loaded = config.gpu, config.recipe, config.calibration
    if model or tokens is not None:
        names = ", ".join(r.name for r in recipe_values)
        _estimate_model(
            model,
            tokens,
            config,
            recipe_values,
            out=out,
            header=f"gpu {gpu.name}, recipe{'s' * (len(recipe_values) > 1)} {names}, "
            f"gemm times: {gemm_time}",
            source=source,
            has_shapes=bool(shape_texts or shapes_file or sweep_name),
        )
        return
    shapes = [parse_shape(t) for t in shape_texts]
    if shapes_file:
        shapes += read_shapes_file(shapes_file)
    if sweep_name:
        shapes += sweep(sweep_name)
    if not shapes:
        raise F8RoofError("no shapes: give --shape M,K,N, --shapes-file or --sweep")
    render = renderer_for(out) if out else None
    with _fail_on(GemmTableError, ValueError):
        frame = run_estimate(shapes, config)
        if overhead == "codegen":
            bar = _progress("generating kernels", lambda s: "x".join(map(str, s)))
            for name, values in codegen_columns(frame, config, progress=bar).items():
                frame[name] = values
    click.echo(f"gpu {gpu.name}, recipe {recipe_value.name}, gemm times: {gemm_time}")
    click.echo(f"using {source}")
    click.echo(render_table(frame, color=sys.stdout.isatty()))
    levels = (
        ("speedup_ideal", "speedup", "speedup_worst")
        if loaded
        else ("speedup_ideal", "speedup_worst")
    )
    for column in levels:
        size = square_breakeven(config, column)
        level = column.removeprefix("speedup_") if column != "speedup" else "fitted"
        click.echo(
            f"breakeven ({level}): "
            + (
                f"float8 wins for M = K = N >= {size}"
                if size
                else "float8 never wins for M = K = N <= 65536"
            )
        )
    if out:
        write_text_atomic(out, render(frame))
        click.echo(f"wrote {len(frame)} rows to {out}")


def _estimate_setup(
    *,
    gpu_name,
    recipe,
    scaling,
    fused,
    compile_limitations,
    gemm_time,
    gemm_table,
    gemm_efficiency,
    calibration,
    no_calibration,
    many_recipes_ok,
):
    """estimate's options -> (config of the first recipe, all recipes, gemm label, source line)."""
    from f8roof.calibrations import choose_calibration
    from f8roof.estimate import EstimateConfig
    from f8roof.gemm_table import load_gemm_table
    from f8roof.models.gemm import RooflineGemm
    from f8roof.models.hardware import UnknownGPUError, resolve_gpu
    from f8roof.models.recipes import RecipeError, Role, parse_scaling
    from f8roof.recommend import parse_recipes

    with _fail_on(UnknownGPUError, RecipeError, ValueError):
        gpu = resolve_gpu(gpu_name or "h100")
        recipe_values = parse_recipes(recipe, parse_scaling(scaling) if scaling else None)
        recipe_value = recipe_values[0]
        if len(recipe_values) > 1 and not many_recipes_ok:
            raise F8RoofError(
                "--recipe all (or a list) compares recipes per layer: use it with --model"
            )
        if gemm_time == "benchmarks":
            if not gemm_table:
                raise F8RoofError("--gemm-time benchmarks needs --gemm-table FILE.csv")
            gemm = load_gemm_table(gemm_table)
        elif gemm_table:
            raise F8RoofError("--gemm-table goes with --gemm-time benchmarks")
        else:
            gemm = RooflineGemm(
                gpu, **({"gemm_efficiency": gemm_efficiency} if gemm_efficiency is not None else {})
            )
        if calibration and no_calibration:
            raise F8RoofError("--calibration and --no-calibration contradict each other")
        # The seed's knobs (a gemm table or efficiency) ask for the roofline, not a shipped file.
        use_shipped = not no_calibration and gemm_time == "roofline" and gemm_efficiency is None
        loaded, source = choose_calibration(gpu, calibration, use_shipped=use_shipped)
        if calibration:
            gpu = _calibrated_gpu(loaded, calibration, gpu_name) or gpu
        if loaded is not None and gemm_time == "roofline":
            gemm = None  # the calibration's measured gemm table
            gemm_time = "measured (calibration)"
        config = EstimateConfig(
            recipe=recipe_value,
            gpu=gpu,
            fused=_roles(fused),
            limited=frozenset(Role) if compile_limitations else frozenset(),
            gemm=gemm,
            calibration=loaded,
        )
        if loaded is not None and len(recipe_values) == 1:
            loaded.variant(recipe_value.name)  # fail now, not after the work
    return config, recipe_values, gemm_time, source


def _calibrated_gpu(calibration, path: str, gpu_name: str | None):
    """The preset of the GPU a calibration measured; refuse a --gpu that names another."""
    from f8roof.models.hardware import UnknownGPUError, find_gpu, resolve_gpu

    measured = calibration.environment.device_name
    try:
        preset = find_gpu(measured) if calibration.environment.device == "cuda" else None
    except UnknownGPUError:
        preset = None
    if gpu_name and calibration.environment.device == "cuda":
        asked = resolve_gpu(gpu_name)
        if preset is None or asked.name != preset.name:
            raise F8RoofError(
                f"calibration {path} was measured on {measured}, not {asked.name}: "
                "drop --gpu or give a calibration of that GPU"
            )
    return preset


def _estimate_model(model, tokens, config, recipes, *, out, header, source, has_shapes) -> None:
    """`estimate --model`: per layer type estimate and decision, and the step's total."""
    from dataclasses import replace

    from f8roof.files import write_text_atomic
    from f8roof.recommend import recommend_model
    from f8roof.render import renderer_for
    from f8roof.report import format_recommendation

    if not model:
        raise F8RoofError("--tokens goes with --model NAME|config.json")
    if tokens is None:
        raise F8RoofError("--model needs --tokens T (tokens per step: M of every linear)")
    if has_shapes:
        raise F8RoofError(
            "--model replaces --shape, --shapes-file and --sweep: give one or the other"
        )
    render = renderer_for(out) if out else None
    with _fail_on(ValueError):
        result = recommend_model(
            model, tokens=tokens, configs=[replace(config, recipe=r) for r in recipes]
        )
    click.echo(header)
    click.echo(f"using {source}")
    click.echo(format_recommendation(result, color=sys.stdout.isatty()))
    if out:
        write_text_atomic(out, render(result.layers))
        click.echo(f"wrote {len(result.layers)} layer types to {out}")


@main.command()
def models() -> None:
    """List the built-in model architectures (for estimate --model and report --model)."""
    from f8roof.architectures import BUILTIN_NAMES, builtin

    for name in BUILTIN_NAMES:
        arch = builtin(name)
        click.echo(
            f"{name:12} {len(arch.linears):2} linear types, {arch.linear_count:4} linears, "
            f"{arch.parameter_count / 1e9:7.2f}B linear weights  {arch.source}"
        )


@main.command()
@click.option(
    "--kind",
    type=click.Choice(["heatmap", "overhead", "validation"]),
    default=None,
    help="heatmap (default), overhead share vs size, or validation scatter",
)
@click.option("--gpu", "gpu_name", default="h100", show_default=True, help="GPU preset")
@click.option("--recipe", default="tensorwise", show_default=True)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    default=None,
    help="calibration file (default: the shipped one for --gpu, if any)",
)
@click.option("--no-calibration", is_flag=True, help="roofline presets only")
@click.option(
    "--level",
    type=click.Choice(["worst", "ideal", "fitted"]),
    default=None,
    help="heatmap overhead level (default: fitted with a calibration, else worst)",
)
@click.option(
    "--x",
    "x_axis",
    default="M",
    show_default=True,
    help="heatmap x axis: M, K, N or tied dims such as K=N",
)
@click.option("--y", "y_axis", default="K=N", show_default=True, help="heatmap y axis")
@click.option(
    "--fixed", type=int, default=8192, show_default=True, help="the dim on neither heatmap axis"
)
@click.option("--min", "min_size", type=int, default=256, show_default=True)
@click.option("--max", "max_size", type=int, default=65536, show_default=True)
@click.option(
    "--validation",
    "validation_csv",
    type=click.Path(dir_okay=False),
    default=None,
    help="validation report CSV (M,K,N,recipe,measured_speedup,predicted_speedup,seed_speedup)",
)
@click.option("--out", required=True, help="FILE.png or FILE.svg")
def plot(
    kind,
    gpu_name,
    recipe,
    calibration,
    no_calibration,
    level,
    x_axis,
    y_axis,
    fixed,
    min_size,
    max_size,
    validation_csv,
    out,
) -> None:
    """Draw a speedup heatmap, the overhead share, or predicted vs measured (needs matplotlib)."""
    from f8roof.plot import draw

    with _fail_on(ValueError):
        result, source = draw(
            kind=kind,
            out=out,
            gpu=gpu_name,
            recipe=recipe,
            calibration=calibration,
            no_calibration=no_calibration,
            level=level,
            x=x_axis,
            y=y_axis,
            fixed=fixed,
            lo=min_size,
            hi=max_size,
            validation=validation_csv,
        )
    if source:
        click.echo(f"using {source}")
    click.echo(f"wrote {result.path}")


@main.command()
@click.option("--model", required=True, help="a built-in model or a Hugging Face config.json")
@click.option("--tokens", type=int, required=True, help="tokens per step (M)")
@click.option("--gpu", "gpu_name", default="h100", show_default=True, help="GPU preset")
@click.option("--recipe", default="tensorwise", show_default=True, help="a recipe, a list, or all")
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    default=None,
    help="calibration file (default: the shipped one for --gpu, if any)",
)
@click.option("--no-calibration", is_flag=True, help="roofline presets only")
@click.option("--no-plots", is_flag=True, help="tables only")
@click.option("--out", required=True, help="FILE.md; plots go beside it as FILE_*.png")
def report(model, tokens, gpu_name, recipe, calibration, no_calibration, no_plots, out) -> None:
    """One markdown report for a model: per layer table, totals and plots."""
    from f8roof.report import write_model_report

    with _fail_on(ValueError):
        result = write_model_report(
            model,
            tokens=tokens,
            out=out,
            gpu=gpu_name,
            recipes=recipe,
            calibration=calibration,
            no_calibration=no_calibration,
            plots=not no_plots,
        )
    click.echo(f"using {result.source}")
    for line in result.summary:
        click.echo(line)
    click.echo(f"wrote {result.path}" + (f" and {len(result.plots)} plots" if result.plots else ""))
    if result.plot_note:
        click.echo(result.plot_note)


def _csv(text: str | None) -> tuple[str, ...] | None:
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else None


@main.command()
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="calibration file to write"
)
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option(
    "--recipes",
    default=None,
    help="comma-separated (default: tensorwise, tensorwise_delayed, rowwise, rowwise_gw_hp "
    "on cuda; tensorwise on cpu)",
)
@click.option("--quick", is_flag=True, help="fewer shapes, gemm sizes and iterations")
@click.option("--resume", is_flag=True, help="continue from the checkpoint beside --out")
@click.option("--budget", type=float, default=None, help="stop measuring after this many seconds")
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False),
    default=None,
    help="directory for raw profiler traces and generated code",
)
def calibrate(out, device, recipes, quick, resume, budget, artifacts) -> None:
    """Measure this device and write one calibration file."""
    from pathlib import Path

    from f8roof.calibrate import CalibrateOptions
    from f8roof.calibrate import calibrate as run_calibrate
    from f8roof.models.recipes import RecipeError

    with _fail_on(RecipeError):
        options = CalibrateOptions.defaults(
            device,
            quick=quick,
            recipes=_csv(recipes),
            budget_s=budget,
            artifacts=Path(artifacts) if artifacts else None,
        )

    calibration, warnings = run_calibrate(
        options, Path(out), resume=resume, progress=_progress("calibrating", lambda t: t.label)
    )
    for line in warnings:
        click.echo(f"warning: bytes disagree: {line}", err=True)
    model = calibration.kernel_time
    click.echo(
        f"wrote {out}: {len(calibration.steps)} steps, {len(calibration.kernels)} kernel "
        f"timings, {len(calibration.gemms)} gemm timings on {calibration.environment.device_name}"
    )
    click.echo(
        f"kernel-time model residuals: median {model.residuals.median:.1%}, "
        f"max {model.residuals.max:.1%} over {model.residuals.count} kernels"
    )
    for variant in calibration.variants:
        regimes = variant.traffic.regimes
        click.echo(
            f"  {variant.variant}: bytes = {regimes[0].total}"
            + (f" (+{len(regimes) - 1} more regimes)" if len(regimes) > 1 else "")
            + (
                f"; {len(variant.traffic.unfitted)} shape groups unfitted"
                if variant.traffic.unfitted
                else ""
            )
        )


@main.command()
@click.option("--calibration", "calibration_path", required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="directory for validation.md, validation.csv and environment.json",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    default=None,
    help="default: the device the calibration was made on",
)
@click.option("--recipes", default=None, help="comma-separated (default: tensorwise,rowwise)")
@click.option(
    "--shape",
    "shape_texts",
    multiple=True,
    help="M,K,N (repeatable; default: 32 shapes from 256 to 16384 on cuda, 4 tiny ones on cpu)",
)
@click.option(
    "--limit",
    type=int,
    default=None,
    help="only the first N default shapes (squares first), to fit a time budget",
)
@click.option("--resume", is_flag=True, help="continue from the checkpoint in --out")
@click.option(
    "--traces",
    type=click.Path(file_okay=False),
    default=None,
    help="directory for the profiler traces of the first shape",
)
def validate(
    calibration_path, out_dir, device, recipes, shape_texts, limit, resume, traces
) -> None:
    """Measure real speedups at unseen shapes and report the prediction error."""
    from pathlib import Path

    from f8roof import validate as v
    from f8roof.calibration import Calibration
    from f8roof.shapes import parse_shape

    calibration = Calibration.load(calibration_path)
    device = device or calibration.environment.device
    available = {r.variant for r in calibration.variants}
    names = _csv(recipes) or tuple(r for r in v.DEFAULT_RECIPES if r in available)
    shapes = tuple(parse_shape(t) for t in shape_texts) or (
        v.CPU_SHAPES if device == "cpu" else v.GPU_SHAPES
    )
    if limit is not None:
        if limit < 1:
            raise F8RoofError(f"--limit {limit}: validate needs at least one shape")
        shapes = shapes[:limit]
    options = v.ValidateOptions(device, names, shapes, *((1, 3) if device == "cpu" else ()))

    bar = _progress("validating", lambda t: f"{t[0]} {t[1]}")
    frame, stats = v.validate(
        calibration,
        options,
        Path(out_dir),
        resume=resume,
        progress=bar,
        trace_dir=Path(traces) if traces else None,
    )
    click.echo(f"wrote {out_dir}/validation.md and validation.csv ({len(frame)} rows)")
    for recipe, s in stats.iterrows():
        click.echo(
            f"  {recipe}: speedup error median {s.median_abs_error_pct:.1f}%, max "
            f"{s.max_abs_error_pct:.1f}% (seed: {s.seed_median_abs_error_pct:.1f}%, "
            f"{s.seed_max_abs_error_pct:.1f}%); wall clock median {s.wall_median_abs_error_pct:.1f}%"
        )


@main.command()
@click.option("--recipe", default="tensorwise", show_default=True)
@click.option("--scaling", default=None, help="tensorwise scaling per role, as for estimate")
@click.option(
    "--impl",
    default=None,
    help="whose float8 linear: torchao or reference (default: torchao when installed)",
)
@click.option("--before", default="none", show_default=True, help="none|layernorm|rmsnorm|silu_mul")
@click.option("--after", default="none", show_default=True, help="none|sigmoid|silu|gelu")
@click.option(
    "--shape", "shape_texts", multiple=True, help="M,K,N (repeatable; default 4096,4096,4096)"
)
@click.option(
    "--device",
    type=click.Choice(["codegen", "cuda", "cpu"]),
    default=None,
    help="where the kernels come from (default: cuda on a GPU, else codegen)",
)
@click.option(
    "--gpu",
    "gpu_name",
    default="h100",
    show_default=True,
    help="target GPU preset for --device codegen",
)
@click.option("--fused", default=None, help="roles the worst/ideal models treat as fused (F)")
@click.option("--compile-limitations", is_flag=True, help="the worst model's L for every role")
@click.option("--no-fit", is_flag=True, help="skip the exact fit in M, K, N (fewer compiles)")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable report")
@click.option("--out", default=None, help="also write the report to FILE")
def compare(
    recipe,
    scaling,
    impl,
    before,
    after,
    shape_texts,
    device,
    gpu_name,
    fused,
    compile_limitations,
    no_fit,
    as_json,
    out,
) -> None:
    """Worst-case and ideal models beside the kernels torch.compile generates."""
    from f8roof import compare as c
    from f8roof.files import write_text_atomic
    from f8roof.models.hardware import UnknownGPUError, resolve_gpu
    from f8roof.models.recipes import Recipe, RecipeError, Role, parse_scaling
    from f8roof.models.variant import Context, Variant
    from f8roof.profiler.graphs import resolve_implementation
    from f8roof.shapes import parse_shape

    with _fail_on(UnknownGPUError, RecipeError):
        recipe_value = Recipe.from_name(recipe, parse_scaling(scaling) if scaling else None)
        implementation = resolve_implementation(impl)
        variant = Variant.of(recipe_value, implementation, Context.from_names(before, after))
        gpu = resolve_gpu(gpu_name)
    if impl is None:
        click.echo(f"implementation: {implementation.value} (the default here; --impl)", err=True)
    shapes = [parse_shape(t) for t in shape_texts] or [(4096, 4096, 4096)]
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "codegen"
    elif device == "cuda":
        from f8roof.calibrate import require_device

        require_device("cuda")

    bar = _progress(
        f"compiling {variant.key}", lambda item: f"{'x'.join(map(str, item[0]))} {item[1].key}"
    )
    result = c.compare(
        variant,
        shapes,
        device=device,
        gpu=gpu,
        fit=not no_fit,
        fused=_roles(fused),
        limited=frozenset(Role) if compile_limitations else frozenset(),
        progress=bar,
    )
    text = c.to_json(result) if as_json else c.render_text(result)
    click.echo(text, nl=False)
    if out:
        write_text_atomic(out, text)
