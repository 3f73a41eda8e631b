"""The f8roof command line: parse options, make one library call, hand the result to one
renderer (f8roof/renderers). Option rules live in the library (resolve.py, answer.py, ...).

torch, triton and torchao are imported only inside the commands that compile (compare,
calibrate, validate, estimate --overhead codegen), so `f8roof estimate` needs neither.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from f8roof.cli import options as o
from f8roof.errors import F8RoofError


class UserError(click.ClickException):
    """What the library's F8RoofError becomes at the command line: its line, exit 2."""

    exit_code = 2


class _Command(click.Command):
    """An option that takes one value, given twice, is refused: click keeps the last one
    without a word (`--gpu h100 --gpu h200`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = args[: args.index("--")] if "--" in args else args
        for param in self.params:
            if not isinstance(param, click.Option) or param.multiple or param.is_flag:
                continue
            times = sum(
                arg == name or arg.startswith(name + "=") for name in param.opts for arg in given
            )
            if times > 1:
                raise click.UsageError(f"{param.opts[0]} given {times} times: give it once")
        return super().parse_args(ctx, args)


class _Group(click.Group):
    """A problem with what the user asked for (the library's F8RoofError: an unknown GPU, a
    bad file, a value the models refuse) is one line, the parameters it names called by their
    flags (`tp` -> `--tp`), exit 2; so is a bad option (click's usage error, without the usage
    block: `--help` has it). Anything else is a bug and keeps its traceback."""

    command_class = _Command

    def invoke(self, ctx: click.Context):
        # a path the file system hands over undecoded (a name that is not UTF-8) prints
        # escaped, not as a traceback
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        try:
            return super().invoke(ctx)
        except F8RoofError as e:
            raise UserError(e.worded(o.FLAGS)) from None
        except click.UsageError as e:
            raise UserError(e.format_message()) from None


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


def _need_torch(what: str) -> None:
    """The commands that compile need the `profile` extra; say so in one line."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise F8RoofError(f"{what} compiles with torch: pip install 'f8roof[profile]'") from None


def _terminal_width() -> int | None:
    """The width `--show-all` fits: COLUMNS where set, else the terminal's; None when the
    output goes to a file or a pipe (nothing to fit)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def _warn(lines) -> None:
    for line in lines:
        click.echo(f"warning: {line}", err=True)


def _request(**options):
    from f8roof.engine.resolve import Request

    return Request(**options)


@click.group(cls=_Group)
@click.version_option(package_name="f8roof")
def main() -> None:
    """Should this linear train in float8? Float8 vs bf16 speedups from the code torch.compile
    generates, timed by models fitted to public measurements or by your GPU's calibration."""


@main.command()
@o.GPUS
def gpus(sources: bool) -> None:
    """List the GPU presets (datasheet ceilings), the scaled gemms each runs, the device names
    they match and where every number comes from."""
    from f8roof.renderers.runs import gpus_text

    click.echo(gpus_text(sources=sources))


@main.command()
def models() -> None:
    """List the built-in model architectures (for estimate --model and report --model)."""
    from f8roof.renderers.runs import models_text

    click.echo(models_text())


@main.command()
@o.ESTIMATE
def estimate(
    shape_texts,
    shapes_file,
    sweep,
    out,
    plot_file,
    overhead,
    model,
    tokens,
    recipe,
    setup,
    setup_file,
    overrides,
    policy,
    show_all,
    **request,
) -> None:
    """Estimate bf16 vs float8 forward+backward time of linears of given shapes, or of a
    model's linears at training scale, and say which to convert."""
    from f8roof.engine.answer import Question, ShapesAnswer, answer, answer_setup
    from f8roof.engine.plan import Plan
    from f8roof.files import check_output_path
    from f8roof.renderers.answers import out_rows, out_summary, render_answer
    from f8roof.renderers.notes import sentence

    if out is not None:
        from f8roof.renderers.frames import renderer_for

        check_output_path(out)
        renderer_for(out)  # an unknown format is refused before the work
    if plot_file is not None:
        from f8roof.renderers.plot import check_matplotlib, check_out

        if model is None and setup_file is None:
            raise F8RoofError("--plot draws a model's step and memory: give --model or --setup")
        check_output_path(plot_file)
        check_out(plot_file)
        check_matplotlib()  # refused before the work, as a bad name is
    if overhead == "codegen":
        _need_torch("estimate --overhead codegen")
    question = Question(
        shape_texts, shapes_file, sweep, model, tokens, overhead=overhead, policy=policy
    )
    bar = _progress("generating kernels", lambda s: "x".join(map(str, s)))
    result: ShapesAnswer | Plan
    if setup_file is not None:
        given = click.get_current_context().get_parameter_source("recipe")
        result = answer_setup(
            setup_file,
            question=question,
            setup=setup,
            recipe_given=given is not click.core.ParameterSource.DEFAULT,
            options=request,
            overrides=overrides,
            progress=bar,
        )
    else:
        if overrides:
            raise F8RoofError("--set overrides a --setup file's or config's keys: give --setup")
        result = answer(question, _request(recipes=recipe, **request), setup=setup, progress=bar)
    if not isinstance(result, Plan):
        _warn(sentence(w) for w in result.warnings)
    click.echo(
        render_answer(result, color=sys.stdout.isatty(), show_all=show_all, width=_terminal_width())
    )
    if out is not None:
        from f8roof.renderers.frames import write_rows

        rows = out_rows(result)
        summary = out_summary(result) if isinstance(result, Plan) else None
        write_rows(rows, out, summary=summary)
        what = "layer types" if isinstance(result, Plan) else "rows"
        click.echo(f"wrote {len(rows)} {what} to {out}")
    if plot_file is not None:
        from f8roof.renderers.plot import step_memory

        assert isinstance(result, Plan)  # --plot needs --model or --setup, checked above
        click.echo(f"wrote {step_memory(result, out=plot_file).path}")


@main.command()
@o.PLOT
def plot(
    kind, level, x_axis, y_axis, fixed, min_size, max_size, validation_csv, out, recipe, **request
) -> None:
    """Draw a speedup heatmap, the overhead share, or predicted vs measured (needs matplotlib)."""
    from f8roof.engine.grid import plot_data
    from f8roof.files import check_output_path
    from f8roof.renderers.notes import provenance_line
    from f8roof.renderers.plot import check_out, draw, validation_scatter

    check_output_path(out)
    check_out(out)
    kind = kind or ("validation" if validation_csv else "heatmap")
    if kind == "validation":
        if not validation_csv:
            raise click.UsageError("--kind validation needs --validation REPORT.csv")
        result = validation_scatter(validation_csv, out=out)
    else:
        if validation_csv:
            raise click.UsageError(f"--validation goes with --kind validation, not {kind}")
        if level is not None and kind != "heatmap":
            raise click.UsageError(
                "--level is for the heatmap; the overhead plot shows every level"
            )
        data, provenance = plot_data(
            kind,
            _request(recipes=recipe, **request),
            level=level,
            x=x_axis,
            y=y_axis,
            fixed=fixed,
            lo=min_size,
            hi=max_size,
        )
        result = draw(data, out=out, provenance=provenance)
        click.echo(f"using {provenance_line(provenance)}")
    click.echo(f"wrote {result.path}")


@main.command()
@o.REPORT
def report(model, tokens, no_plots, out, recipe, setup, policy, **request) -> None:
    """One markdown report for a model: per layer table, totals, torchao's filter, plots."""
    from f8roof.engine.report import model_report
    from f8roof.files import check_output_path
    from f8roof.renderers.report import check_report_path, report_lines, write_report

    check_output_path(out)
    check_report_path(out)
    built = model_report(
        model,
        tokens=tokens,
        request=_request(recipes=recipe, **request),
        setup=setup,
        policy=policy,
    )
    click.echo("\n".join(report_lines(write_report(built, out=out, plots=not no_plots))))


@main.command()
@o.PLAN
def plan(model, gpu, gpus, seq_len, recipe, top, out, fuse_qkv, plot_file) -> None:
    """The best bf16 run and the best float8 run of a model on N GPUs: torchtitan's layouts
    (TP, FSDP, HSDP, EP for MoE models, CP, a pipeline where nothing else fits, recompute,
    local batch, recipe) searched, those that do not fit dropped, ranked by tokens/s per
    GPU."""
    from f8roof.engine.api import best_runs
    from f8roof.files import check_output_path
    from f8roof.renderers.frames import renderer_for, write_rows
    from f8roof.renderers.runs import search_rows, search_text

    if out:
        check_output_path(out)
        renderer_for(out)
    if plot_file is not None:
        from f8roof.renderers.plot import check_matplotlib, check_out

        check_output_path(plot_file)
        check_out(plot_file)
        check_matplotlib()  # refused before the search, as a bad name is
    with _runs_bar() as progress:
        found = best_runs(
            model,
            gpus,
            gpu=gpu,
            seq_len=seq_len,
            recipe=recipe,
            progress=progress,
            fuse_qkv=fuse_qkv,
        )
    click.echo(search_text(found, top=top))
    if out:
        write_rows(search_rows(found), out)
        click.echo(f"wrote {out}")
    if plot_file is not None:
        from f8roof.renderers.plot import frontier

        click.echo(f"wrote {frontier(found, out=plot_file).path}")


@contextlib.contextmanager
def _runs_bar() -> Iterator[Callable[[int, int], None] | None]:
    """plan's progress on a terminal's stderr: the parallel layouts searched of those planned
    so far (a later stage, CP or a pipeline, adds its own); nothing where stderr is not a
    terminal (a pipe, a file, a test)."""
    if not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=1, label="layouts", show_eta=True, file=sys.stderr) as bar:

        def tick(done: int, planned: int) -> None:
            bar.length = planned
            bar.update(done - bar.pos)

        yield tick


@main.command("filter-compare")
@o.FILTER_COMPARE
def filter_compare(
    model, tokens, tps, ep, fsdp, recompute, step_ms, recipe, filter_fqns, policy, **request
) -> None:
    """torchao's auto filter (fixed K/N thresholds) vs f8roof, layer by layer, and the step
    time each choice predicts."""
    from f8roof.engine.filter_compare import filter_compare as run
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
        policy=policy,
    )
    click.echo(render_filter_compare(result))


@main.command()
@o.CALIBRATE
def calibrate(out, resume, before, after, contexts, budget, **options) -> None:
    """Measure this device (or generate code for --gpu) and write one calibration file."""
    from f8roof.device.calibrate import calibrate as run
    from f8roof.device.calibrate import calibrate_options, requested_contexts
    from f8roof.files import check_output_path
    from f8roof.renderers.notes import sentence
    from f8roof.renderers.runs import calibration_lines

    check_output_path(out)
    _need_torch("calibrate")
    chosen = calibrate_options(
        contexts=requested_contexts(before, after, contexts), budget_s=budget, **options
    )
    bar = _progress("calibrating", lambda t: t.label)
    calibration, warnings = run(chosen, Path(out), resume=resume, progress=bar)
    _warn(sentence(w) for w in warnings)
    click.echo("\n".join(calibration_lines(calibration, out)))


@main.command()
@o.VALIDATE
def validate(calibration_path, out_dir, resume, traces, budget, **options) -> None:
    """Measure real speedups at unseen shapes and report the prediction error."""
    from f8roof.calibration.file import Calibration
    from f8roof.device import validate as v
    from f8roof.files import check_output_dir
    from f8roof.renderers.runs import validation_lines
    from f8roof.renderers.validation import write_validation

    check_output_dir(out_dir)
    _need_torch("validate")
    calibration = Calibration.load(calibration_path)
    chosen = v.validate_options(calibration, budget_s=budget, **options)
    run = v.validate(
        calibration,
        chosen,
        Path(out_dir),
        resume=resume,
        progress=_progress("validating", lambda t: t.label),
        trace_dir=Path(traces) if traces else None,
    )
    write_validation(run, calibration, out_dir)
    run.reported()
    click.echo("\n".join(validation_lines(run.frame, run.stats, out_dir)))


@main.command()
@o.COMPARE
def compare(shape_texts, no_fit, as_json, out, model, block, **options) -> None:
    """Worst-case and ideal models beside the kernels torch.compile generates; with --model,
    one sharded transformer block's kernels, gemms and collectives, bf16 beside float8."""
    from f8roof.files import check_output_path, write_text_atomic

    if out is not None:
        check_output_path(out)
    _need_torch("compare")
    if model is not None:
        from f8roof.engine.sharded import compare_block
        from f8roof.renderers.block import block_to_json, render_block_text

        compared = compare_block(model=model, shapes_given=bool(shape_texts), **block, **options)
        text = (block_to_json if as_json else render_block_text)(compared)
        click.echo(text, nl=False)
        if out:
            write_text_atomic(out, text)
        return
    from f8roof.engine.compare import CompareRequest, run_compare
    from f8roof.renderers.comparison import render_text, to_json
    from f8roof.renderers.notes import sentence

    bar = _progress("compiling", lambda item: f"{'x'.join(map(str, item[0]))} {item[1].key}")
    request = CompareRequest(shape_texts=tuple(shape_texts), fit=not no_fit, **options)
    result = run_compare(
        request, progress=bar, warn=lambda note: click.echo(f"warning: {sentence(note)}", err=True)
    )
    render = to_json if as_json else render_text
    text = render(result.comparison, result.check)
    click.echo(text, nl=False)
    if out is not None:
        write_text_atomic(out, text)
