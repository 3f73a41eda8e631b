"""The command line's options: each command's option stack, and the stacks they share. Only
cli.py uses them; what an option means is decided in the library, not here."""

from __future__ import annotations

import click

from f8roof.traffic.recipes import known_recipes
from f8roof.traffic.variant import After, Before, Implementation

# The library's parameters (the names its messages mark with f8roof.errors.term) -> the flag
# that sets each: the library's refusals are printed with these. One table for every command:
# a parameter is the same flag wherever a command takes it. (dp_replicate has no flag: only a
# setup file sets it, and the setup file names it by its key.)
FLAGS = {
    "after": "--after",
    "async_tp": "--async-tp",
    "before": "--before",
    "calibration": "--calibration",
    "compile_limitations": "--compile-limitations",
    "contexts": "--contexts",
    "device": "--device",
    "ep": "--ep",
    "filter_fqns": "--filter-fqns",
    "float8_all_gather": "--float8-all-gather",
    "fsdp": "--fsdp",
    "fuse_qkv": "--fuse-qkv",
    "fused": "--fused",
    "gemm_efficiency": "--gemm-efficiency",
    "gemm_table": "--gemm-table",
    "gpu": "--gpu",
    "gpus": "--gpus",
    "help": "--help",
    "implementation": "--impl",
    "model": "--model",
    "network_gbps": "--network",
    "no_calibration": "--no-calibration",
    "overhead": "--overhead",
    "pp": "--pp",
    "pp_schedule": "--pp-schedule",
    "local_batch_size": "--local-batch-size",
    "cp": "--cp",
    "microbatches": "--microbatches",
    "accumulation": "--accumulation",
    "recipe": "--recipe",
    "recipes": "--recipes",
    "recompute": "--recompute",
    "resume": "--resume",
    "scaling": "--scaling",
    "seq_len": "--seq-len",
    "setup": "--setup",
    "shapes": "--shape",
    "shapes_file": "--shapes-file",
    "step_ms": "--step-ms",
    "sweep": "--sweep",
    "times": "--times",
    "tokens": "--tokens",
    "tp": "--tp",
}


def stack(*decorators):
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

POLICY = click.option(
    "--policy",
    type=click.Choice(["expected", "conservative", "optimistic"]),
    default="expected",
    show_default=True,
    help="what a conversion must win at: the estimate (a band straddling 1 is marked *), its "
    "band's low end, or its high end (under these two, keep needs the high end to lose; "
    "between: uncertain)",
)
SHOW_ALL = click.option(
    "--show-all",
    is_flag=True,
    help="print every column, every level's breakeven and every note (--out writes them too)",
)
IMPL = click.option(
    "--impl",
    "implementation",
    type=click.Choice([i.value for i in Implementation], case_sensitive=False),
    default=None,
    help="whose float8 linear (default: torchao where it has the recipe); te: Transformer "
    "Engine's as NeMo/Megatron run it (tensorwise, tensorwise_delayed; estimate only)",
)
CONTEXT = stack(
    click.option(
        "--before",
        type=click.Choice([op.value for op in Before], case_sensitive=False),
        default=None,
        help="the op producing the input",
    ),
    click.option(
        "--after",
        type=click.Choice([op.value for op in After], case_sensitive=False),
        default=None,
        help="the op consuming the output",
    ),
)
CALIBRATION = stack(
    click.option(
        "--calibration",
        type=click.Path(dir_okay=False),
        default=None,
        help="calibration file (default: the shipped one for --gpu)",
    ),
    click.option("--no-calibration", is_flag=True, help="datasheet rooflines, no calibration"),
    click.option(
        "--times",
        type=click.Choice(["public", "datasheet"]),
        default=None,
        help="how a traffic calibration is timed: fitted to public measurements (default where "
        "the GPU has a fitted part: h100, h100-meta, h200) or the datasheet model",
    ),
)
SEED = stack(
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


def training_setup(command):
    """--tp, --ep, --fsdp, --recompute, --step-ms and the rest of how the model trains
    (f8roof.training.parallel), handed to the command as one `setup` argument (a RunConfig)."""
    import functools

    @functools.wraps(command)
    def wrapper(
        *args,
        tp,
        ep,
        fsdp,
        recompute,
        step_ms,
        float8_all_gather,
        network,
        filter_fqns,
        pp,
        pp_schedule,
        microbatches,
        cp,
        async_tp,
        accumulation,
        seq_len,
        local_batch_size,
        fuse_qkv,
        **kwargs,
    ):
        from f8roof.training.run_config import RunConfig

        fqns = None
        if filter_fqns is not None:
            fqns = tuple(f.strip() for f in filter_fqns.split(",") if f.strip())
        setup = RunConfig.from_options(
            tp=tp,
            ep=ep,
            fsdp=fsdp,
            recompute=recompute,
            step_ms=step_ms,
            float8_all_gather=float8_all_gather,
            network_gbps=network,
            filter_fqns=fqns,
            async_tp=async_tp,
            pp=pp,
            pp_schedule=pp_schedule,
            microbatches=microbatches,
            cp=cp,
            accumulation=accumulation,
            tokens=kwargs.get("tokens"),
            seq_len=seq_len,
            local_batch_size=local_batch_size,
            fuse_qkv=fuse_qkv,
            setup_given=kwargs.get("setup_file") is not None,
        )
        if "tokens" in kwargs:  # local batch x sequence length, when given so
            kwargs["tokens"] = setup.tokens
        return command(*args, setup=setup, **kwargs)

    return stack(
        click.option(
            "--tp",
            type=int,
            default=1,
            show_default=True,
            help="tensor parallel degree: column-parallel linears (q/k/v, gate/up, lm_head) run "
            "N / tp, row-parallel ones (o, down) K / tp",
        ),
        *PARALLEL,
        click.option(
            "--async-tp",
            is_flag=True,
            help="with --tp: torch's micro-pipelined TP, each collective beside the gemm it "
            "feeds or drains (torchtitan's enable_async_tensor_parallel; needs compile)",
        ),
        click.option(
            "--float8-all-gather",
            is_flag=True,
            help="with --fsdp N: torchao's FSDP2 float8 weight all-gather with precomputed "
            "scales, as torchtitan's float8 docs run tensorwise",
        ),
        click.option(
            "--fuse-qkv",
            is_flag=True,
            help="with --model (llama3, qwen3): torchtitan's fused q/k/v projection, one "
            "attention.qkv_linear.wqkv linear (its default since 2026-06-24); without it q, k "
            "and v apart, as torchtitan before",
        ),
        click.option(
            "--filter-fqns",
            default=None,
            metavar="LIST",
            help="with --model: linears kept in bf16, torchtitan's rule (an entry that is a "
            "substring of the fqn: output, attention.wk, layers.27.; f8roof's names too); "
            "nvfp4_bf16_tail (NVFP4 and MX recipes): torchtitan's NVFP4 configs' last 15% of "
            "blocks and output. Default: output, as torchtitan's llama configs; '' converts "
            "every linear (a blank entry is dropped, as torchtitan splits a comma list)",
        ),
        click.option(
            "--cp",
            type=int,
            default=1,
            show_default=True,
            help="context parallel degree: each sequence split over N ranks, keys and values "
            "all-gathered for attention (torchtitan's context_parallel_degree)",
        ),
        click.option(
            "--pp",
            type=int,
            default=1,
            show_default=True,
            help="pipeline parallel degree: the blocks split into stages over N ranks, the step "
            "run as microbatches through the schedule (torchtitan's pipeline_parallel_degree)",
        ),
        click.option(
            "--pp-schedule",
            default=None,
            help="with --pp: GPipe, 1F1B (default) or Interleaved1F1B (2 stages per rank, "
            "torchtitan's)",
        ),
        click.option(
            "--microbatches",
            type=int,
            default=None,
            help="with --pp: microbatches per step (default: one sequence each, torchtitan's "
            "pipeline_parallel_microbatch_size 1)",
        ),
        click.option(
            "--accumulation",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            metavar="N",
            help="gradient accumulation: N forward/backward passes of --tokens per optimizer "
            "step (torchtitan's global_batch_size / (local batch x data-parallel ranks)); "
            "--step-ms is then the whole step",
        ),
        click.option(
            "--seq-len",
            type=int,
            default=None,
            help="with --model: tokens per sequence (torchtitan's seq_len; default: whole "
            "sequences up to 8192 of --tokens); --tokens = --local-batch-size x --seq-len",
        ),
        click.option(
            "--local-batch-size",
            type=int,
            default=None,
            help="with --seq-len: sequences per rank per step (torchtitan's local_batch_size), "
            "for --tokens",
        ),
        click.option(
            "--network",
            type=float,
            default=None,
            metavar="GBPS",
            help="each GPU's NIC line rate in Gb/s for collectives across nodes (default: the "
            "GPU preset's, 400)",
        ),
    )(wrapper)


PARALLEL = (
    click.option(
        "--ep",
        type=int,
        default=1,
        show_default=True,
        help="expert parallel degree: each GPU runs experts / ep of an MoE layer's experts",
    ),
    click.option(
        "--fsdp",
        type=int,
        is_flag=False,
        flag_value=-1,
        default=None,
        metavar="[N]",
        help="FSDP, optionally its degree N (it changes no gemm shape; with N the step summary "
        "models its all-gathers and reduce-scatters); alone or -1: degree unknown, 1: off "
        "(torchtitan's data_parallel_shard_degree)",
    ),
    click.option(
        "--recompute",
        type=click.Choice(["none", "full", "selective"]),
        default="none",
        show_default=True,
        help="activation checkpointing: full reruns the blocks' linears' forward in the "
        "backward (not lm_head's)",
    ),
    click.option(
        "--step-ms",
        type=float,
        default=None,
        help="measured bf16 step time (ms, up to a day): also report the end-to-end speedup",
    ),
)


GPUS = stack(
    click.option(
        "--sources/--no-sources",
        default=True,
        show_default=True,
        help="each preset's datasheet sources, the public sweeps behind its timing, its assumptions",
    ),
)


ESTIMATE = stack(
    click.option(
        "--gpu",
        default=None,
        help=(
            "GPU preset, device name, a preset at a power limit (h100@500w), or "
            "custom:bf16=..,fp8=..,bandwidth=.."
        ),
    ),
    click.option(
        "--recipe",
        default="tensorwise",
        show_default=True,
        help=f"{known_recipes()} (float8: rowwise, the default of torchtitan's 2026 Python "
        "Float8LinearConverter, #3127; its TOML job configs' [float8] defaulted to tensorwise, "
        "as --setup reads them; mxfp8 and mx: mxfp8_rceil; nvfp4: torchao's NVFP4, on "
        "Blackwell). With --model: a list, or all: "
        "torchao's recipes (every one with --impl reference, TE's two with --impl te; the MXFP8 ones on MX parts, "
        "nvfp4 on NVFP4 parts)",
    ),
    click.option("--scaling", default=None, help="tensorwise scaling per role: weight=delayed,..."),
    IMPL,
    CONTEXT,
    SEED,
    click.option(
        "--gemm-table",
        type=click.Path(dir_okay=False),
        default=None,
        help="CSV of measured gemm times (replaces the calibration's or the roofline's)",
    ),
    click.option(
        "--gemm-efficiency",
        type=float,
        default=None,
        help="fraction of peak FLOP/s gemms reach in a roofline (the seed: 0.6)",
    ),
    CALIBRATION,
    click.option(
        "--overhead",
        type=click.Choice(["fitted", "codegen"]),
        default="fitted",
        show_default=True,
        help="codegen: generate this very shape's kernels (needs torch; slow, exact)",
    ),
    click.option("--shape", "shape_texts", multiple=True, help="M,K,N (repeatable)"),
    click.option(
        "--shapes-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="CSV with columns M,K,N",
    ),
    click.option(
        "--sweep",
        default=None,
        help="pr668 (the seed's 343 shapes, M, K, N in 2^9..2^15) or pow2 (2^7..2^16)",
    ),
    click.option(
        "--out", default=None, help="write every row to FILE (.csv, .parquet, .json or .md)"
    ),
    click.option(
        "--plot",
        "plot_file",
        default=None,
        help="with --model or --setup: draw the step per GPU by part (bf16 vs float8, f8roof's "
        "choice and as torchtitan converts) and the peak memory per GPU to FILE.png or FILE.svg "
        "(needs matplotlib)",
    ),
    click.option(
        "--model",
        default=None,
        help="a built-in model (f8roof models) or a Hugging Face config.json: one row per linear "
        "layer type, a recommendation and the step's total",
    ),
    click.option("--tokens", type=int, default=None, help="tokens per step (M), with --model"),
    click.option(
        "--setup",
        "setup_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="a torchtitan job config (TOML, either converter layout), a torchtitan config name "
        "(llama3:llama3_8b, f8roof's copy) or f8roof's short form: model, tokens per rank, "
        "parallelism, checkpointing, recipe and filters (replaces --model, --tokens, --tp, "
        "--fsdp, --recompute, --recipe); prints torchtitan's filter_fqns for the answer",
    ),
    click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="with --setup: set a key, dotted as in the TOML (parallelism.tensor_parallel_degree=2, "
        "quantize.linear.float8.recipe_name=rowwise); repeatable",
    ),
    POLICY,
    SHOW_ALL,
    training_setup,
)


PLOT = stack(
    click.option(
        "--kind",
        type=click.Choice(["heatmap", "overhead", "validation"]),
        default=None,
        help="heatmap (default), overhead share vs size, or validation scatter",
    ),
    click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)"),
    click.option("--recipe", default="tensorwise", show_default=True),
    IMPL,
    CONTEXT,
    CALIBRATION,
    click.option(
        "--level",
        type=click.Choice(["worst", "ideal", "fitted"]),
        default=None,
        help="heatmap overhead level (default: fitted with a calibration, else the seed's worst case)",
    ),
    click.option(
        "--x", "x_axis", default="M", show_default=True, help="x axis: M, K, N or tied dims (K=N)"
    ),
    click.option("--y", "y_axis", default="K=N", show_default=True, help="heatmap y axis"),
    click.option(
        "--fixed", type=int, default=8192, show_default=True, help="the dim on neither axis"
    ),
    click.option("--min", "min_size", type=int, default=256, show_default=True),
    click.option("--max", "max_size", type=int, default=65536, show_default=True),
    click.option(
        "--validation",
        "validation_csv",
        type=click.Path(dir_okay=False),
        default=None,
        help="validation report CSV (M,K,N,recipe,measured_speedup,predicted_speedup,seed_speedup)",
    ),
    click.option("--out", required=True, help="FILE.png or FILE.svg"),
)


REPORT = stack(
    click.option("--model", required=True, help="a built-in model or a Hugging Face config.json"),
    click.option("--tokens", type=int, required=True, help="tokens per step (M)"),
    click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)"),
    click.option(
        "--recipe",
        default="tensorwise",
        show_default=True,
        help=f"a recipe, a list, or all ({known_recipes()})",
    ),
    IMPL,
    CALIBRATION,
    click.option("--no-plots", is_flag=True, help="tables only"),
    click.option("--out", required=True, help="FILE.md; plots go beside it as FILE_*.png"),
    POLICY,
    training_setup,
)


PLAN = stack(
    click.option("--model", required=True, help="a built-in model or a Hugging Face config.json"),
    click.option("--gpu", default="h100", show_default=True, help="GPU preset"),
    click.option("--gpus", type=int, required=True, help="how many GPUs the run trains on"),
    click.option(
        "--seq-len", type=int, default=None, help="tokens per sequence (default: llama3's 8192)"
    ),
    click.option(
        "--recipe",
        default="tensorwise",
        show_default=True,
        help="the float8 recipe, or all (tensorwise, rowwise, mxfp8: those the GPU runs)",
    ),
    click.option(
        "--top",
        type=click.IntRange(min=1),
        default=5,
        show_default=True,
        help="layouts shown per precision",
    ),
    click.option("--out", default=None, help="every layout evaluated: FILE.csv, .json, .md"),
    click.option(
        "--fuse-qkv",
        is_flag=True,
        help="every layout with torchtitan's fused q/k/v projection (llama3, qwen3; its "
        "default since 2026-06-24), as estimate --fuse-qkv answers it",
    ),
    click.option(
        "--plot",
        "plot_file",
        default=None,
        help="draw every layout's tokens/s per GPU against its reserved memory per GPU, both "
        "precisions, to FILE.png or FILE.svg (needs matplotlib)",
    ),
)


FILTER_COMPARE = stack(
    click.option("--model", required=True, help="a built-in model or a Hugging Face config.json"),
    click.option(
        "--tokens", required=True, help="tokens per GPU per step (M); a comma list compares several"
    ),
    click.option("--tp", "tps", default="1", show_default=True, help="TP degree, or a comma list"),
    stack(*PARALLEL),
    click.option("--gpu", default=None, help="GPU preset (default: the calibration's, else h100)"),
    click.option(
        "--recipe",
        default="tensorwise",
        show_default=True,
        help="tensorwise or rowwise (torchao's auto filter has no rule for rowwise_gw_hp)",
    ),
    IMPL,
    CALIBRATION,
    click.option(
        "--filter-fqns",
        default="",
        help="comma list: torchao also skips linears whose fqn contains one (torchtitan's "
        "filter_fqns, e.g. output)",
    ),
    POLICY,
)


CALIBRATE = stack(
    click.option(
        "--out", required=True, type=click.Path(dir_okay=False), help="calibration file to write"
    ),
    click.option(
        "--device",
        type=click.Choice(["cuda", "cpu", "codegen"]),
        default="cuda",
        show_default=True,
        help="codegen: a traffic calibration (generated code for --gpu, datasheet times), no GPU",
    ),
    click.option("--gpu", default="h100", show_default=True, help="the codegen target"),
    click.option(
        "--recipes",
        default=None,
        help="comma-separated recipes, or impl:recipe (default: torchao's three and the "
        "reference's tensorwise_delayed on cuda/codegen; tensorwise on cpu)",
    ),
    IMPL,
    CONTEXT,
    click.option("--contexts", default=None, help="several contexts: none,layernorm+sigmoid,..."),
    click.option("--quick", is_flag=True, help="fewer shapes, gemm sizes and iterations"),
    click.option(
        "--jobs",
        type=click.IntRange(1, 64),
        default=1,
        show_default=True,
        help="worker processes for --device codegen",
    ),
    click.option("--resume", is_flag=True, help="continue from the checkpoint beside --out"),
    click.option(
        "--budget", type=SECONDS, default=None, help="stop measuring after this many seconds"
    ),
    click.option(
        "--artifacts",
        type=click.Path(file_okay=False),
        default=None,
        help="directory for raw profiler traces and generated code",
    ),
)


VALIDATE = stack(
    click.option(
        "--calibration", "calibration_path", required=True, type=click.Path(dir_okay=False)
    ),
    click.option(
        "--out",
        "out_dir",
        required=True,
        type=click.Path(file_okay=False),
        help="directory for validation.md, validation.csv and environment.json",
    ),
    click.option(
        "--device",
        type=click.Choice(["cuda", "cpu"]),
        default=None,
        help="default: the device the calibration was made on",
    ),
    click.option(
        "--recipes",
        default=None,
        help="comma-separated (default: the calibration's tensorwise and rowwise variants)",
    ),
    IMPL,
    CONTEXT,
    click.option("--contexts", default=None, help="several contexts: none,layernorm+sigmoid,..."),
    click.option(
        "--shape",
        "shape_texts",
        multiple=True,
        help="M,K,N (repeatable; default: 32 shapes from 256 to 16384 on cuda, 4 tiny ones on cpu)",
    ),
    click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=None,
        help="only the first N shapes (squares first), for a budget",
    ),
    click.option(
        "--budget",
        type=SECONDS,
        default=None,
        help="stop measuring after this many seconds and report on the shapes done",
    ),
    click.option("--resume", is_flag=True, help="continue from the checkpoint in --out"),
    click.option(
        "--traces",
        type=click.Path(file_okay=False),
        default=None,
        help="directory for the profiler traces of the first shape",
    ),
)


def block_options(command):
    """compare --model's sharding: --tokens, --seq-len, --tp, --fsdp, --float8-all-gather,
    --recompute and --async-tp, handed to the command as one `block` dict."""
    import functools

    @functools.wraps(command)
    def wrapper(*args, tokens, seq_len, tp, fsdp, float8_all_gather, recompute, async_tp, **kwargs):
        block = {
            "tokens": tokens,
            "seq_len": seq_len,
            "tp": tp,
            "fsdp": fsdp,
            "float8_all_gather": float8_all_gather,
            "recompute": recompute,
            "async_tp": async_tp,
        }
        return command(*args, block=block, **kwargs)

    return stack(
        click.option("--tokens", type=int, default=None, help="with --model: tokens per rank"),
        click.option("--seq-len", type=int, default=None, help="with --model (default: --tokens)"),
        click.option(
            "--tp", type=int, default=1, show_default=True, help="with --model: TP degree"
        ),
        click.option(
            "--fsdp", type=int, default=1, show_default=True, help="with --model: FSDP degree"
        ),
        click.option(
            "--float8-all-gather",
            is_flag=True,
            help="with --model: torchao's FSDP2 float8 weight all-gather (tensorwise)",
        ),
        click.option(
            "--recompute",
            type=click.Choice(["none", "full", "selective"]),
            default="none",
            show_default=True,
            help="with --model: activation checkpointing of the block (torchtitan's)",
        ),
        click.option(
            "--async-tp",
            is_flag=True,
            help="with --model and --tp: also which TP collectives Inductor's micro-pipeline "
            "pass runs beside which gemms (codegen)",
        ),
    )(wrapper)


COMPARE = stack(
    click.option("--recipe", default="tensorwise", show_default=True),
    click.option("--scaling", default=None, help="tensorwise scaling per role, as for estimate"),
    IMPL,
    CONTEXT,
    click.option(
        "--shape", "shape_texts", multiple=True, help="M,K,N (repeatable; default 4096,4096,4096)"
    ),
    click.option(
        "--device",
        type=click.Choice(["codegen", "cuda", "cpu"]),
        default=None,
        help="where the kernels come from (default: cuda on a GPU, else codegen)",
    ),
    click.option(
        "--gpu", default="h100", show_default=True, help="target GPU for --device codegen"
    ),
    SEED,
    click.option("--no-fit", is_flag=True, help="skip the exact fit in M, K, N (fewer compiles)"),
    click.option(
        "--calibration",
        default=None,
        help="also show this calibration's fitted overhead at each shape ('shipped': the one for "
        "--gpu), and warn where its code came from other versions",
    ),
    click.option("--json", "as_json", is_flag=True, help="print a machine-readable report"),
    click.option("--out", default=None, help="also write the report to FILE"),
    click.option(
        "--model",
        default=None,
        help="compile one transformer block of this model as one rank of a sharded run compiles "
        "it (fake process group), bf16 beside --recipe",
    ),
    block_options,
)
