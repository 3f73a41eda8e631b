"""The f8roof command line: parse options, make one library call, hand the result to one
renderer (f8roof/renderers). Option rules live in the library (resolve.py, answer.py, ...).

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


def _warn(lines) -> None:
    for line in lines:
        click.echo(f"warning: {line}", err=True)


def _scale_options(command):
    """--tp, --ep, --fsdp, --recompute and --step-ms (how the model trains, f8roof.architectures.training),
    handed to the command as one `setup` argument (a TrainingSetup)."""
    import functools

    @functools.wraps(command)
    def wrapper(*args, tp, ep, fsdp, recompute, step_ms, **kwargs):
        from f8roof.architectures.training import TrainingSetup

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
    from f8roof.renderers.runs import gpus_text

    click.echo(gpus_text())


@main.command()
def models() -> None:
    """List the built-in model architectures (for estimate --model and report --model)."""
    from f8roof.renderers.runs import models_text

    click.echo(models_text())


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
    "--sweep",
    default=None,
    help="seed-grid (M, K, N in 2^9..2^15, 343 shapes, the seed's sweep) or pow2 (2^7..2^16)",
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
    from f8roof.answer import ModelAnswer, Question, answer
    from f8roof.files import check_output_path
    from f8roof.renderers.answers import render_answer
    from f8roof.renderers.frames import renderer_for

    if out is not None:
        check_output_path(out)
        renderer_for(out)  # an unknown format is refused before the work
    if overhead == "codegen":
        _need_torch("estimate --overhead codegen")
    question = Question(shape_texts, shapes_file, sweep, model, tokens, overhead)
    bar = _progress("generating kernels", lambda s: "x".join(map(str, s)))
    result = answer(question, _request(recipes=recipe, **request), setup=setup, progress=bar)
    _warn(result.warnings if not isinstance(result, ModelAnswer) else [])
    click.echo(render_answer(result, color=sys.stdout.isatty()))
    if out is not None:
        from f8roof.renderers.frames import write_frame

        frame = result.recommendation.layers if isinstance(result, ModelAnswer) else result.frame
        write_frame(frame, out)
        what = "layer types" if isinstance(result, ModelAnswer) else "rows"
        click.echo(f"wrote {len(frame)} {what} to {out}")


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
    help="heatmap overhead level (default: fitted with a calibration, else the seed's worst case)",
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
    from f8roof.renderers.plot import draw

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
    from f8roof.renderers.report import check_report_path, report_lines, write_report
    from f8roof.report import model_report
    from f8roof.resolve import resolve

    check_output_path(out)
    check_report_path(out)
    resolved = resolve(_request(recipes=recipe, **request))
    built = model_report(model, tokens=tokens, resolved=resolved, setup=setup)
    click.echo("\n".join(report_lines(write_report(built, out=out, plots=not no_plots))))


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
    from f8roof.filter_compare import filter_compare as run
    from f8roof.inputs.shapes import parse_ints
    from f8roof.renderers.filters import render_filter_compare

    result = run(
        model,
        tokens=parse_ints(tokens, "--tokens"),
        tps=parse_ints(tps, "--tp"),
        ep=ep,
        fsdp=fsdp,
        recompute=recompute,
        step_ms=step_ms,
        request=_request(recipes=recipe, **request),
        filter_fqns=tuple(f.strip() for f in filter_fqns.split(",") if f.strip()),
    )
    click.echo(render_filter_compare(result))


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
@click.option("--budget", type=SECONDS, default=None, help="stop measuring after this many seconds")
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False),
    default=None,
    help="directory for raw profiler traces and generated code",
)
def calibrate(out, resume, before, after, contexts, budget, **options) -> None:
    """Measure this device (or generate code for --gpu) and write one calibration file."""
    from f8roof.calibrate import calibrate as run
    from f8roof.calibrate import calibrate_options, requested_contexts
    from f8roof.files import check_output_path
    from f8roof.renderers.runs import calibration_lines

    check_output_path(out)
    _need_torch("calibrate")
    chosen = calibrate_options(
        contexts=requested_contexts(before, after, contexts), budget_s=budget, **options
    )
    bar = _progress("calibrating", lambda t: t.label)
    calibration, warnings = run(chosen, Path(out), resume=resume, progress=bar)
    _warn(warnings)
    click.echo("\n".join(calibration_lines(calibration, out)))


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
def validate(calibration_path, out_dir, resume, traces, budget, **options) -> None:
    """Measure real speedups at unseen shapes and report the prediction error."""
    from f8roof import validate as v
    from f8roof.calibration.file import Calibration
    from f8roof.files import check_output_dir
    from f8roof.renderers.runs import validation_lines

    check_output_dir(out_dir)
    _need_torch("validate")
    calibration = Calibration.load(calibration_path)
    chosen = v.validate_options(calibration, budget_s=budget, **options)
    frame, stats = v.validate(
        calibration,
        chosen,
        Path(out_dir),
        resume=resume,
        progress=_progress("validating", lambda t: t.label),
        trace_dir=Path(traces) if traces else None,
    )
    click.echo("\n".join(validation_lines(frame, stats, out_dir)))


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
    default=None,
    help="also show this calibration's fitted overhead at each shape ('shipped': the one for "
    "--gpu), and warn where its code came from other versions",
)
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable report")
@click.option("--out", default=None, help="also write the report to FILE")
def compare(shape_texts, no_fit, as_json, out, **options) -> None:
    """Worst-case and ideal models beside the kernels torch.compile generates."""
    from f8roof.compare import CompareRequest, run_compare
    from f8roof.files import check_output_path, write_text_atomic
    from f8roof.renderers.comparison import render_text, to_json

    if out:
        check_output_path(out)
    _need_torch("compare")
    bar = _progress("compiling", lambda item: f"{'x'.join(map(str, item[0]))} {item[1].key}")
    request = CompareRequest(shape_texts=tuple(shape_texts), fit=not no_fit, **options)
    result = run_compare(request, progress=bar, warn=lambda line: click.echo(line, err=True))
    render = to_json if as_json else render_text
    text = render(result.comparison, result.check)
    click.echo(text, nl=False)
    if out:
        write_text_atomic(out, text)
