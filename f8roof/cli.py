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
@click.option("--gpu", "gpu_name", default="h100", show_default=True,
              help="GPU preset, device name, or custom:bf16=..,fp8=..,bandwidth=..")
@click.option("--recipe", default="tensorwise", show_default=True,
              help="tensorwise, tensorwise_delayed, tensorwise_static_weight, rowwise, rowwise_gw_hp")
@click.option("--scaling", default=None,
              help="tensorwise scaling per role, e.g. input=dynamic,weight=delayed,grad_output=dynamic")
@click.option("--fused", default=None,
              help="roles fused with the previous op (the seed's F), e.g. input,grad_output")
@click.option("--compile-limitations", is_flag=True,
              help="model torch.compile limitations (the seed's L) for every role")
@click.option("--gemm-time", type=click.Choice(["roofline", "benchmarks"]), default="roofline",
              show_default=True)
@click.option("--gemm-table", type=click.Path(dir_okay=False), default=None,
              help="CSV of measured gemm times (with --gemm-time benchmarks)")
@click.option("--gemm-efficiency", type=float, default=None,
              help="fraction of peak FLOP/s gemms reach in the roofline (seed: 0.6)")
@click.option("--calibration", type=click.Path(dir_okay=False), default=None,
              help="calibration file (default: the shipped one for --gpu, if any)")
@click.option("--no-calibration", is_flag=True, help="roofline presets only, ignore shipped files")
@click.option("--shape", "shape_texts", multiple=True, help="M,K,N (repeatable)")
@click.option("--shapes-file", type=click.Path(dir_okay=False), default=None,
              help="CSV with columns M, K, N")
@click.option("--sweep", "sweep_name", default=None,
              help="seed (M, K, N in 2^9..2^15, 343 shapes) or pow2 (squares 2^7..2^16)")
@click.option("--out", default=None, help="write every row to FILE (.csv, .json or .md)")
def estimate(gpu_name, recipe, scaling, fused, compile_limitations, gemm_time, gemm_table,
             gemm_efficiency, calibration, no_calibration, shape_texts, shapes_file, sweep_name,
             out) -> None:
    """Estimate bf16 vs float8 forward+backward time of linears of given shapes."""
    from f8roof.calibration import Calibration
    from f8roof.calibrations import shipped_calibration
    from f8roof.estimate import EstimateConfig, estimate as run_estimate, square_breakeven
    from f8roof.files import write_text_atomic
    from f8roof.gemm_table import load_gemm_table
    from f8roof.models.gemm import GemmTableError, RooflineGemm
    from f8roof.models.hardware import UnknownGPUError, resolve_gpu
    from f8roof.models.recipes import Recipe, RecipeError, Role, parse_scaling
    from f8roof.render import render_table, renderer_for
    from f8roof.shapes import parse_shape, read_shapes_file, sweep

    with _fail_on(UnknownGPUError, RecipeError, ValueError):
        gpu = resolve_gpu(gpu_name)
        recipe_value = Recipe.from_name(recipe, parse_scaling(scaling) if scaling else None)
        if gemm_time == "benchmarks":
            if not gemm_table:
                raise F8RoofError("--gemm-time benchmarks needs --gemm-table FILE.csv")
            gemm = load_gemm_table(gemm_table)
        elif gemm_table:
            raise F8RoofError("--gemm-table goes with --gemm-time benchmarks")
        else:
            gemm = RooflineGemm(gpu, **({"gemm_efficiency": gemm_efficiency}
                                        if gemm_efficiency is not None else {}))
        source = "roofline presets (datasheet x seed efficiencies)"
        loaded = None
        if calibration and no_calibration:
            raise F8RoofError("--calibration and --no-calibration contradict each other")
        if calibration:
            loaded, source = Calibration.load(calibration), f"calibration {calibration}"
        elif not no_calibration and gemm_time == "roofline" and gemm_efficiency is None:
            path, caveat = shipped_calibration(gpu)
            if path is not None:
                loaded = Calibration.load(path)
                source = f"shipped calibration {path.name} ({loaded.environment.device_name})"
                if caveat:
                    source += f"; {caveat}"
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
        if loaded is not None:
            loaded.variant(recipe_value.name)  # fail now, not after the work
    shapes = [parse_shape(t) for t in shape_texts]
    if shapes_file:
        shapes += read_shapes_file(shapes_file)
    if sweep_name:
        shapes += sweep(sweep_name)
    if not shapes:
        raise F8RoofError("no shapes: give --shape M,K,N, --shapes-file or --sweep")
    render = renderer_for(out) if out else None
    with _fail_on(GemmTableError):
        frame = run_estimate(shapes, config)
    click.echo(f"gpu {gpu.name}, recipe {recipe_value.name}, gemm times: {gemm_time}")
    click.echo(f"using {source}")
    click.echo(render_table(frame, color=sys.stdout.isatty()))
    levels = ("speedup_ideal", "speedup", "speedup_worst") if loaded else ("speedup_ideal", "speedup_worst")
    for column in levels:
        size = square_breakeven(config, column)
        level = column.removeprefix("speedup_") if column != "speedup" else "fitted"
        click.echo(f"breakeven ({level}): " + (f"float8 wins for M = K = N >= {size}"
                                              if size else "float8 never wins for M = K = N <= 65536"))
    if out:
        write_text_atomic(out, render(frame))
        click.echo(f"wrote {len(frame)} rows to {out}")
