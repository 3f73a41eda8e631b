"""The f8roof command line. Thin: parse options, call one library function, render.

torch, triton and torchao are imported only inside the commands that compile (compare,
calibrate, validate, estimate --overhead codegen), so `f8roof estimate` needs neither.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from f8roof.errors import F8RoofError
from f8roof.models.errors import ModelError
from f8roof.models.variant import After, Before


class _Group(click.Group):
    """A bad value the models refuse (an unknown GPU, recipe, context; a gemm table with a
    hole) is the user's: one line, exit 2; so is a bad option (click's usage error, without
    the usage block: `--help` has it). Anything else is a bug and keeps its traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ModelError as e:
            raise F8RoofError(str(e)) from None
        except click.UsageError as e:
            raise F8RoofError(e.format_message()) from None


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


def _csv(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else ()


def _options(*decorators):
    """Stack option decorators, so commands sharing a group of options declare it once."""

    def apply(fn):
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


class _Seconds(click.ParamType):
    """A positive, finite number of seconds (click's FloatRange lets nan through)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not 0 < seconds < 1e9:  # also false for nan
            self.fail(f"{value!r} is not a positive, finite number of seconds", param, ctx)
        return seconds


SECONDS = _Seconds()

IMPL = click.option(
    "--impl",
    "implementation",
    default=None,
    help="whose float8 linear: torchao or reference (default: torchao where it has the recipe)",
)
CONTEXT = _options(
    click.option(
        "--before",
        default=None,
        help="op producing the input: " + ", ".join(op.value for op in Before),
    ),
    click.option(
        "--after",
        default=None,
        help="op consuming the output: " + ", ".join(op.value for op in After),
    ),
)
CALIBRATION = _options(
    click.option(
        "--calibration",
        type=click.Path(dir_okay=False),
        default=None,
        help="calibration file (default: the shipped one for --gpu)",
    ),
    click.option("--no-calibration", is_flag=True, help="datasheet rooflines, no calibration"),
)
SEED = _options(
    click.option(
        "--fused",
        default=None,
        help="roles the worst/ideal models treat as fused with the previous op (the seed's F; "
        "default: what the context implies)",
    ),
    click.option(
        "--compile-limitations", is_flag=True, help="the seed's L (worst case) for every role"
    ),
)


def _need_torch(what: str) -> None:
    """The commands that compile need the `profile` extra; say so in one line."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise F8RoofError(f"{what} compiles with torch: pip install 'f8roof[profile]'") from None


def _scale_options(command):
    """--tp, --ep, --fsdp, --recompute and --step-ms (how the model trains, f8roof.scale),
    handed to the command as one `setup` argument (a TrainingSetup)."""
    import functools

    @functools.wraps(command)
    def wrapper(*args, tp, ep, fsdp, recompute, step_ms, **kwargs):
        from f8roof.scale import TrainingSetup

        setup = TrainingSetup.from_options(
            tp=tp, ep=ep, fsdp=fsdp, recompute=recompute, step_ms=step_ms
        )
        return command(*args, setup=setup, **kwargs)

    return _options(
        click.option(
            "--tp",
            type=int,
            default=1,
            show_default=True,
            help="tensor parallel degree: column-parallel linears (q/k/v, gate/up, lm_head) run "
            "N / tp, row-parallel ones (o, down) K / tp",
        ),
        *_PARALLEL_OPTIONS,
    )(wrapper)


_PARALLEL_OPTIONS = (
    click.option(
        "--ep",
        type=int,
        default=1,
        show_default=True,
        help="expert parallel degree: each GPU runs experts / ep of an MoE layer's experts",
    ),
    click.option("--fsdp", is_flag=True, help="FSDP (noted: it changes no gemm shape)"),
    click.option(
        "--recompute",
        type=click.Choice(["none", "full", "selective"]),
        default="none",
        show_default=True,
        help="activation checkpointing: full reruns every linear's forward in the backward",
    ),
    click.option(
        "--step-ms",
        type=float,
        default=None,
        help="measured bf16 step time (ms): also report the end-to-end speedup",
    ),
)


def _request(**options):
    from f8roof.resolve import Request

    return Request(**options)


@click.group(cls=_Group)
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
    "--gpu", default=None, help="GPU preset, device name, or custom:bf16=..,fp8=..,bandwidth=.."
)
@click.option(
    "--recipe",
    default="tensorwise",
    show_default=True,
    help="tensorwise, tensorwise_delayed, tensorwise_static_weight, rowwise, rowwise_gw_hp "
    "(with --model: a list, or all)",
)
@click.option("--scaling", default=None, help="tensorwise scaling per role: weight=delayed,...")
@IMPL
@CONTEXT
@SEED
@click.option(
    "--gemm-table",
    type=click.Path(dir_okay=False),
    default=None,
    help="CSV of measured gemm times (replaces the calibration's or the roofline's)",
)
@click.option(
    "--gemm-efficiency",
    type=float,
    default=None,
    help="fraction of peak FLOP/s gemms reach in a roofline (the seed: 0.6)",
)
@CALIBRATION
@click.option(
    "--overhead",
    type=click.Choice(["fitted", "codegen"]),
    default="fitted",
    show_default=True,
    help="codegen: generate this very shape's kernels (needs torch; slow, exact)",
)
@click.option("--shape", "shape_texts", multiple=True, help="M,K,N (repeatable)")
@click.option(
    "--shapes-file", type=click.Path(dir_okay=False), default=None, help="CSV with columns M,K,N"
)
@click.option(
    "--sweep", default=None, help="seed (M, K, N in 2^9..2^15, 343 shapes) or pow2 (2^7..2^16)"
)
@click.option("--out", default=None, help="write every row to FILE (.csv, .parquet, .json or .md)")
@click.option(
    "--model",
    default=None,
    help="a built-in model (f8roof models) or a Hugging Face config.json: one row per linear "
    "layer type, a recommendation and the step's total",
)
@click.option("--tokens", type=int, default=None, help="tokens per step (M), with --model")
@_scale_options
def estimate(
    shape_texts, shapes_file, sweep, out, overhead, model, tokens, recipe, setup, **request
) -> None:
    """Estimate bf16 vs float8 forward+backward time of linears of given shapes."""
    from f8roof.files import check_output_path
    from f8roof.render import renderer_for
    from f8roof.resolve import resolve

    if out:
        check_output_path(out)
        renderer_for(out)  # an unknown format is refused before the work
    resolved = resolve(_request(recipes=recipe, **request), many_recipes=bool(model))
    if model or tokens is not None:
        if shape_texts or shapes_file or sweep:
            raise F8RoofError("--model replaces --shape, --shapes-file and --sweep: give one")
        if request["before"] or request["after"]:
            raise F8RoofError(
                "--model takes each linear's context from the architecture: drop --before/--after"
            )
        _estimate_model(model, tokens, resolved, out=out, setup=setup)
        return
    if not setup.is_default:
        raise F8RoofError("--tp, --ep, --fsdp, --recompute and --step-ms go with --model")
    _estimate_shapes(resolved, shape_texts, shapes_file, sweep, out=out, overhead=overhead)


def _warn_versions(calibration) -> None:
    """Its fits describe the code of the versions that generated it; say where this differs."""
    from f8roof.profiler.graphs import version_mismatch

    env = calibration.environment
    mismatch = version_mismatch({"torch": env.torch, "triton": env.triton, "torchao": env.torchao})
    if mismatch:
        click.echo(
            f"warning: the calibration's code came from other versions: {mismatch}", err=True
        )


def _estimate_shapes(resolved, shape_texts, shapes_file, sweep, *, out, overhead) -> None:
    from f8roof.estimate import breakeven_lines, breakevens, codegen_columns, estimate, implausible
    from f8roof.files import write_frame
    from f8roof.render import render_table
    from f8roof.shapes import collect_shapes

    shapes = collect_shapes(shape_texts, shapes_file, sweep)
    config = resolved.config
    if overhead == "codegen":
        _need_torch("estimate --overhead codegen")
        if config.calibration is not None:
            _warn_versions(config.calibration)
    frame = estimate(shapes, config, ranges=True)
    if overhead == "codegen":
        bar = _progress("generating kernels", lambda s: "x".join(map(str, s)))
        for name, values in codegen_columns(frame, config, progress=bar).items():
            frame[name] = values
    click.echo(resolved.header)
    click.echo(f"using {resolved.source}")
    click.echo(render_table(frame, color=sys.stdout.isatty()))
    found = breakevens(config)
    for line in breakeven_lines(config, found):
        click.echo(line)
    for line in implausible(frame, config, found):
        click.echo(f"warning: {line}", err=True)
    if out:
        write_frame(frame, out)
        click.echo(f"wrote {len(frame)} rows to {out}")


def _estimate_model(model, tokens, resolved, *, out, setup) -> None:
    """`estimate --model`: per layer type estimate and decision, and the step's total."""
    from f8roof.files import write_frame
    from f8roof.recommend import recommend_model
    from f8roof.report import format_recommendation

    if not model:
        raise F8RoofError("--tokens goes with --model NAME|config.json")
    if tokens is None:
        raise F8RoofError("--model needs --tokens T (tokens per step: M of every linear)")
    result = recommend_model(model, tokens=tokens, resolved=resolved, setup=setup)
    click.echo(resolved.header)
    click.echo(f"using {resolved.source}")
    click.echo(format_recommendation(result, color=sys.stdout.isatty()))
    if out:
        write_frame(result.layers, out)
        click.echo(f"wrote {len(result.layers)} layer types to {out}")


@main.command()
def models() -> None:
    """List the built-in model architectures (for estimate --model and report --model)."""
    from f8roof.architectures import BUILTIN_NAMES, builtin

    for name in BUILTIN_NAMES:
        arch = builtin(name)
        click.echo(
            f"{name:16} {len(arch.linears):2} linear types, {arch.linear_count:5} linears, "
            f"{arch.parameter_count / 1e9:7.2f}B linear weights  {arch.source}"
        )


@main.command()
@click.option(
    "--kind",
    type=click.Choice(["heatmap", "overhead", "validation"]),
    default=None,
    help="heatmap (default), overhead share vs size, or validation scatter",
)
@click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)")
@click.option("--recipe", default="tensorwise", show_default=True)
@IMPL
@CONTEXT
@CALIBRATION
@click.option(
    "--level",
    type=click.Choice(["worst", "ideal", "fitted"]),
    default=None,
    help="heatmap overhead level (default: fitted with a calibration, else worst)",
)
@click.option(
    "--x", "x_axis", default="M", show_default=True, help="x axis: M, K, N or tied dims (K=N)"
)
@click.option("--y", "y_axis", default="K=N", show_default=True, help="heatmap y axis")
@click.option("--fixed", type=int, default=8192, show_default=True, help="the dim on neither axis")
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
    kind, level, x_axis, y_axis, fixed, min_size, max_size, validation_csv, out, recipe, **request
) -> None:
    """Draw a speedup heatmap, the overhead share, or predicted vs measured (needs matplotlib)."""
    from f8roof.files import check_output_path
    from f8roof.plot import draw

    check_output_path(out)
    result, source = draw(
        kind=kind,
        out=out,
        request=_request(recipes=recipe, **request),
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
@click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)")
@click.option("--recipe", default="tensorwise", show_default=True, help="a recipe, a list, or all")
@IMPL
@CALIBRATION
@click.option("--no-plots", is_flag=True, help="tables only")
@click.option("--out", required=True, help="FILE.md; plots go beside it as FILE_*.png")
@_scale_options
def report(model, tokens, no_plots, out, recipe, setup, **request) -> None:
    """One markdown report for a model: per layer table, totals, torchao's filter, plots."""
    from f8roof.files import check_output_path
    from f8roof.report import write_report
    from f8roof.resolve import resolve

    check_output_path(out)
    resolved = resolve(_request(recipes=recipe, **request))
    result = write_report(
        model, tokens=tokens, resolved=resolved, out=out, plots=not no_plots, setup=setup
    )
    click.echo(f"using {resolved.source}")
    for line in result.summary:
        click.echo(line)
    click.echo(f"wrote {result.path}" + (f" and {len(result.plots)} plots" if result.plots else ""))
    if result.plot_note:
        click.echo(result.plot_note)


@main.command("filter-compare")
@click.option("--model", required=True, help="a built-in model or a Hugging Face config.json")
@click.option(
    "--tokens", required=True, help="tokens per GPU per step (M); a comma list compares several"
)
@click.option("--tp", "tps", default="1", show_default=True, help="TP degree, or a comma list")
@_options(*_PARALLEL_OPTIONS)
@click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)")
@click.option(
    "--recipe",
    default="tensorwise",
    show_default=True,
    help="tensorwise or rowwise (torchao's auto filter has no rule for rowwise_gw_hp)",
)
@IMPL
@CALIBRATION
@click.option(
    "--filter-fqns",
    default="",
    help="comma list: torchao also skips linears whose fqn contains one (torchtitan's "
    "filter_fqns, e.g. output)",
)
def filter_compare(
    model, tokens, tps, ep, fsdp, recompute, step_ms, recipe, filter_fqns, **request
) -> None:
    """torchao's auto filter (fixed K/N thresholds) vs f8roof, layer by layer, and the step
    time each choice predicts."""
    from f8roof.autofilter import filter_compare_text

    text = filter_compare_text(
        model,
        tokens=_ints(tokens, "--tokens"),
        tps=_ints(tps, "--tp"),
        ep=ep,
        fsdp=fsdp,
        recompute=recompute,
        step_ms=step_ms,
        request=_request(recipes=recipe, **request),
        filter_fqns=_csv(filter_fqns),
    )
    click.echo(text)


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise F8RoofError(f"{option} {text!r}: expected integers, e.g. 2048,8192") from None
    if not values:
        raise F8RoofError(f"{option}: give at least one value")
    return values


def _variants(
    recipes: str | None,
    implementation: str | None,
    contexts: tuple[str, ...],
    *,
    default: tuple[str, ...],
):
    """Recipes x contexts -> variants for calibrate and validate ('impl:recipe' allowed)."""
    from f8roof.calibrate import parse_variants
    from f8roof.models.variant import Context
    from f8roof.profiler.graphs import resolve_implementation

    impl = resolve_implementation(implementation)
    names = _csv(recipes) or default
    return parse_variants(
        names, implementation=impl, contexts=tuple(Context.from_name(c) for c in contexts)
    )


def _contexts(before: str | None, after: str | None, contexts: str | None) -> tuple[str, ...]:
    from f8roof.models.variant import Context

    if contexts and (before or after):
        raise F8RoofError("--contexts lists contexts; --before/--after name one: give one way")
    if contexts:
        return _csv(contexts)
    return (Context.from_names(before, after).name,)


@main.command()
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="calibration file to write"
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu", "codegen"]),
    default="cuda",
    show_default=True,
    help="codegen: a traffic calibration (generated code for --gpu, datasheet times), no GPU",
)
@click.option("--gpu", default="h100", show_default=True, help="the codegen target")
@click.option(
    "--recipes",
    default=None,
    help="comma-separated recipes, or impl:recipe (default: torchao's three and the "
    "reference's tensorwise_delayed on cuda/codegen; tensorwise on cpu)",
)
@IMPL
@CONTEXT
@click.option("--contexts", default=None, help="several contexts: none,layernorm+sigmoid,...")
@click.option("--quick", is_flag=True, help="fewer shapes, gemm sizes and iterations")
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="worker processes for --device codegen",
)
@click.option("--resume", is_flag=True, help="continue from the checkpoint beside --out")
@click.option(
    "--budget",
    type=SECONDS,
    default=None,
    help="stop measuring after this many seconds",
)
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False),
    default=None,
    help="directory for raw profiler traces and generated code",
)
def calibrate(
    out,
    device,
    gpu,
    recipes,
    implementation,
    before,
    after,
    contexts,
    quick,
    jobs,
    resume,
    budget,
    artifacts,
) -> None:
    """Measure this device (or generate code for --gpu) and write one calibration file."""
    from f8roof.calibrate import CALIBRATION_VARIANTS, CalibrateOptions
    from f8roof.calibrate import calibrate as run_calibrate
    from f8roof.files import check_output_path
    from f8roof.models.hardware import resolve_gpu

    check_output_path(out)
    _need_torch("calibrate")
    default = ("tensorwise",) if device == "cpu" else CALIBRATION_VARIANTS
    options = CalibrateOptions.defaults(
        device,
        variants=_variants(
            recipes, implementation, _contexts(before, after, contexts), default=default
        ),
        quick=quick,
        budget_s=budget,
        gpu=resolve_gpu(gpu) if device == "codegen" else None,
        artifacts=Path(artifacts) if artifacts else None,
        jobs=jobs,
    )
    calibration, warnings = run_calibrate(
        options, Path(out), resume=resume, progress=_progress("calibrating", lambda t: t.label)
    )
    for line in warnings:
        click.echo(f"warning: {line}", err=True)
    click.echo(f"wrote {out}: {calibration.source}")
    if calibration.is_measured:
        residuals = calibration.kernel_time.residuals
        click.echo(
            f"{len(calibration.steps)} steps, {len(calibration.kernels)} kernel timings, "
            f"{len(calibration.gemms)} gemm timings; kernel-time model residuals: median "
            f"{residuals.median:.1%}, max {residuals.max:.1%} over {residuals.count} kernels"
        )
    for variant in calibration.variants:
        regimes, unfitted = variant.traffic.regimes, variant.traffic.unfitted
        click.echo(
            f"  {variant.variant}: bytes = {regimes[0].total}"
            + (f" (+{len(regimes) - 1} more regimes)" if len(regimes) > 1 else "")
            + (f"; {len(unfitted)} shape groups unfitted" if unfitted else "")
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
@click.option(
    "--recipes",
    default=None,
    help="comma-separated (default: the calibration's tensorwise and rowwise variants)",
)
@IMPL
@CONTEXT
@click.option("--contexts", default=None, help="several contexts: none,layernorm+sigmoid,...")
@click.option(
    "--shape",
    "shape_texts",
    multiple=True,
    help="M,K,N (repeatable; default: 32 shapes from 256 to 16384 on cuda, 4 tiny ones on cpu)",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="only the first N shapes (squares first), for a budget",
)
@click.option(
    "--budget",
    type=SECONDS,
    default=None,
    help="stop measuring after this many seconds and report on the shapes done",
)
@click.option("--resume", is_flag=True, help="continue from the checkpoint in --out")
@click.option(
    "--traces",
    type=click.Path(file_okay=False),
    default=None,
    help="directory for the profiler traces of the first shape",
)
def validate(
    calibration_path,
    out_dir,
    device,
    recipes,
    implementation,
    before,
    after,
    contexts,
    shape_texts,
    limit,
    budget,
    resume,
    traces,
) -> None:
    """Measure real speedups at unseen shapes and report the prediction error."""
    from dataclasses import replace

    from f8roof import validate as v
    from f8roof.calibration import Calibration
    from f8roof.files import check_output_dir
    from f8roof.shapes import parse_shape

    check_output_dir(out_dir)
    _need_torch("validate")
    calibration = Calibration.load(calibration_path)
    device = device or calibration.environment.device
    if recipes or implementation or before or after or contexts:
        variants = _variants(
            recipes,
            implementation,
            _contexts(before, after, contexts),
            default=v.VALIDATION_RECIPES,
        )
    else:
        variants = v.calibrated_variants(calibration)
    options = v.ValidateOptions.defaults(
        device, variants=variants, shapes=tuple(parse_shape(t) for t in shape_texts)
    )
    options = replace(options, shapes=options.shapes[:limit], budget_s=budget)
    frame, stats = v.validate(
        calibration,
        options,
        Path(out_dir),
        resume=resume,
        progress=_progress("validating", lambda t: f"{t[0].key} {'x'.join(map(str, t[1]))}"),
        trace_dir=Path(traces) if traces else None,
    )
    click.echo(f"wrote {out_dir}/validation.md and validation.csv ({len(frame)} rows)")
    for name, s in stats.iterrows():
        click.echo(
            f"  {name}: speedup error median {s.median_abs_error_pct:.1f}%, max "
            f"{s.max_abs_error_pct:.1f}% (seed: {s.seed_median_abs_error_pct:.1f}%, "
            f"{s.seed_max_abs_error_pct:.1f}%); wall clock median "
            f"{s.wall_median_abs_error_pct:.1f}%"
        )


def _compare_calibration(path, gpu, variant):
    """The calibration compare puts beside its count, loaded before anything compiles."""
    from f8roof.calibration import Calibration
    from f8roof.calibrations import shipped_calibration

    if path is None:
        return None, None
    if path == "shipped":
        path = shipped_calibration(gpu)
        if path is None:
            raise F8RoofError(f"no shipped calibration for {gpu.name}: give a file")
    calibration = Calibration.load(path)
    calibration.variant(variant.key)  # refused now, in one line, if it lacks the variant
    calibration.variant(variant.baseline.key)
    _warn_versions(calibration)
    return calibration, str(path)


@main.command()
@click.option("--recipe", default="tensorwise", show_default=True)
@click.option("--scaling", default=None, help="tensorwise scaling per role, as for estimate")
@IMPL
@CONTEXT
@click.option(
    "--shape", "shape_texts", multiple=True, help="M,K,N (repeatable; default 4096,4096,4096)"
)
@click.option(
    "--device",
    type=click.Choice(["codegen", "cuda", "cpu"]),
    default=None,
    help="where the kernels come from (default: cuda on a GPU, else codegen)",
)
@click.option("--gpu", default="h100", show_default=True, help="target GPU for --device codegen")
@SEED
@click.option("--no-fit", is_flag=True, help="skip the exact fit in M, K, N (fewer compiles)")
@click.option(
    "--calibration",
    "calibration_path",
    default=None,
    help="also show this calibration's fitted overhead at each shape ('shipped': the one for "
    "--gpu), and warn where its code came from other versions",
)
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable report")
@click.option("--out", default=None, help="also write the report to FILE")
def compare(
    recipe,
    scaling,
    implementation,
    before,
    after,
    shape_texts,
    device,
    gpu,
    fused,
    compile_limitations,
    no_fit,
    calibration_path,
    as_json,
    out,
) -> None:
    """Worst-case and ideal models beside the kernels torch.compile generates."""
    from f8roof import compare as c
    from f8roof.files import check_output_path, write_text_atomic
    from f8roof.models.hardware import resolve_gpu
    from f8roof.models.recipes import Recipe, Role, parse_scaling
    from f8roof.models.traffic import context_fused_roles
    from f8roof.models.variant import Context, Variant
    from f8roof.resolve import parse_roles
    from f8roof.shapes import parse_shape

    if out:
        check_output_path(out)
    _need_torch("compare")
    from f8roof.profiler.graphs import resolve_implementation

    recipe_value = Recipe.from_name(recipe, parse_scaling(scaling) if scaling else None)
    impl = resolve_implementation(implementation)
    variant = Variant.of(recipe_value, impl, Context.from_names(before, after))
    target = resolve_gpu(gpu)
    calibration, calibration_name = _compare_calibration(calibration_path, target, variant)
    if implementation is None:
        click.echo(f"implementation: {impl.value} (the default here; --impl)", err=True)
    shapes = [parse_shape(t) for t in shape_texts] or [(4096, 4096, 4096)]
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "codegen"
    elif device == "cuda":
        from f8roof.profiler.device import require_device

        require_device("cuda")

    bar = _progress(
        f"compiling {variant.key}", lambda item: f"{'x'.join(map(str, item[0]))} {item[1].key}"
    )
    result = c.compare(
        variant,
        shapes,
        device=device,
        gpu=target,
        fit=not no_fit,
        fused=parse_roles(fused) if fused else context_fused_roles(variant.context),
        limited=frozenset(Role) if compile_limitations else frozenset(),
        progress=bar,
    )
    check = None
    if calibration:
        check = c.against_calibration(result, calibration, calibration_name)
    text = c.to_json(result, check) if as_json else c.render_text(result, check)
    click.echo(text, nl=False)
    if out:
        write_text_atomic(out, text)
