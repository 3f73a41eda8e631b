"""`f8roof estimate`'s answer on the terminal and in --out files.

The default view is one a user acts on, in at most 120 columns: the provenance line, one row per
shape or layer type (`shape/layer | bf16 | float8 | speedup (low-high) | decision`), then for a
model a step summary of at most five lines leading with what to convert and the expected step
speedup with its band (f8roof's choice first, torchtitan's all-but-output beside it), and the
command that settles the rows whose band straddles 1. `--show-all` prints every column, every
level's breakeven, every note; `--out` files carry every column and the notes in words.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np

from f8roof.columns import Columns
from f8roof.engine.answer import ShapesAnswer
from f8roof.engine.decision import SETTLE_SHAPES, Settle
from f8roof.engine.plan import Candidate, FittingSpeedup, MemoryAnswer, Plan, TorchtitanConfig
from f8roof.engine.sharded import BlockComparison
from f8roof.engine.step.parts import StepSummary
from f8roof.notes import DEFAULT_VIEW, Topic
from f8roof.renderers.cells import aligned, ms, settle_words, wrapped
from f8roof.renderers.notes import (
    layer_note,
    provenance_line,
    provenance_lines,
    sentence,
)
from f8roof.renderers.report import format_recommendation
from f8roof.renderers.table import breakeven_lines, render_table
from f8roof.training.memory import GIB, MemoryPeak, Term
from f8roof.training.torchtitan_names import NVFP4_CONVERTER, NVFP4_SOURCE

WIDTH = 120  # the default view's widest line
BLOCK_PREFIX = "layers.*."  # after `model.`: Hugging Face's and torchtitan's


def render_answer(
    answer: ShapesAnswer | Plan,
    *,
    color: bool = False,
    show_all: bool = False,
    width: int | None = None,
) -> str:
    """The default view (within WIDTH), or with `show_all` every column and note, tables cut
    into blocks and prose wrapped to `width` (the terminal's) where given."""
    if show_all:
        return "\n".join(full_lines(answer, color=color, width=width))
    lines = [provenance_line(answer.resolved.provenance, _recipes(answer))]
    if isinstance(answer, Plan):
        lines.append(aligned(*model_rows(answer), color=color))
        lines += step_lines(answer)
        lines += memory_lines(answer.memory)
        rec = answer.recommendation
        lines += default_notes(rec.setup.assumptions)
        lines += recipe_lines(rec)
        lines += settle_lines(rec.settle, _straddling(rec.rows), "layer types")
        if answer.from_setup:
            lines += ["", *torchtitan_lines(answer.torchtitan)]
    else:
        lines.append(aligned(*shape_rows(answer.rows), color=color))
        if len(answer.rows) > MAX_ROWS:
            lines.append(f"... {len(answer.rows) - MAX_ROWS} more rows (all of them: --out)")
        lines += _decision_breakeven(answer.breakevens)
        lines += unrunnable_lines(answer.rows)
        lines += extrapolated_lines(answer.rows)
        lines += settle_lines(answer.settle, _straddling(answer.rows), "shapes")
    return "\n".join(lines)


# --- the short tables -------------------------------------------------------------------------

MAX_ROWS = 60
SHORT_HEADER = ["bf16 us", "float8 us", "speedup (low-high)", "decision"]


def _columns(frame: Columns) -> tuple[str, str, str]:
    """(bf16 time, float8 time, speedup) columns of the decision: the fitted ones with a
    calibration, else the seed's worst case."""
    if "speedup" in frame:
        return "bf16_s", "fp8_s", "speedup"
    return "bf16_gemm_s", "fp8_s_worst", "speedup_worst"


def _short_cells(row, columns: tuple[str, str, str]) -> list[str]:
    bf16, fp8, speedup = (row[c] for c in columns)
    cell = "-" if _missing(speedup) or not row["fp8_ok"] else f"{speedup:.2f}"
    low, high = row.get("speedup_low"), row.get("speedup_high")
    banded = columns[2] == "speedup" and not (_missing(low) or _missing(high))
    if cell != "-" and banded and not row.get("grouped", False):
        cell += f" ({low:.2f}-{high:.2f})"
    return [
        _us(bf16),
        _us(fp8) if row["fp8_ok"] else "-",
        cell,
        _decision(row.get("decision"), bool(row.get("straddles", False))),
    ]


def _decision(value, straddles: bool) -> str:
    if value is None or _missing(value):
        return "-"
    word = "keep bf16" if str(value).startswith("keep") else str(value)
    return word + (" *" if straddles else "")


def shape_rows(frame: Columns) -> tuple[list[str], list[list[str]]]:
    """The shapes' short table: shape, recipe, then the decision's cells."""
    columns = _columns(frame)
    rows = [
        [f"{r['M']}x{r['K']}x{r['N']}", str(r["recipe"]), *_short_cells(r, columns)]
        for r in frame.head(MAX_ROWS).rows()
    ]
    return ["shape", "recipe", *SHORT_HEADER], rows


def model_rows(answer: Plan) -> tuple[list[str], list[list[str]]]:
    """The layers' short table: layer type, count, (several recipes: the one chosen), then the
    decision's cells."""
    rec = answer.recommendation
    layers = rec.rows
    columns = _columns(layers)
    several = len(rec.recipes) > 1
    header = ["layer", "count", *(["recipe"] if several else []), *SHORT_HEADER]
    rows = []
    for r in layers.rows():
        cells = [_layer_name(str(r["fqn"])), str(r["count"])]
        if several:
            cells.append(str(r["recipe"]))
        rows.append(cells + _short_cells(r, columns))
    return header, rows


def _layer_name(fqn: str) -> str:
    """`model.layers.*.mlp.up_proj` -> `mlp.up_proj` (torchtitan's `layers.*.attention.wo` ->
    `attention.wo`); a row filters split keeps its blocks, `model.layers.0-26.mlp.up_proj` ->
    `layers.0-26.mlp.up_proj`."""
    return fqn.removeprefix("model.").removeprefix(BLOCK_PREFIX)


# --- the step ---------------------------------------------------------------------------------


def _band(summary: StepSummary, digits: int = 2) -> str:
    if summary.speedup_high <= summary.speedup_low:
        return ""
    return f" (band {summary.speedup_low:.{digits}f}-{summary.speedup_high:.{digits}f})"


def step_lines(answer: Plan) -> list[str]:
    """At most five lines: what to convert, the expected step speedup with its band (f8roof's
    choice, torchtitan's all-but-output beside it), where the step's time goes."""
    rec, step = answer.recommendation, answer.step
    names = [_layer_name(str(f)) for f in rec.rows["fqn"]]
    convert = rec.rows["convert"].astype(bool)
    filtered = step.kept_by_setup
    chosen = [n for n, c, f in zip(names, convert, filtered) if c and not f]
    held = [n for n, c, f in zip(names, convert, filtered) if c and f]
    kept = [n for n, c, f in zip(names, convert, filtered) if not c]
    what = (
        f"convert {', '.join(chosen)} ({len(chosen)} of {len(names)} layer types)"
        if chosen
        else f"keep every layer type in bf16 ({len(names)})"
    )
    if chosen and kept:
        what += f"; keep {', '.join(kept)}"
    if held:
        what += f"; the setup's filter_fqns keep {', '.join(held)}, which f8roof would convert"
    if rec.held_by_step:
        what += (
            f"; the step keeps {', '.join(_layer_name(f) for f in rec.held_by_step)} in bf16: "
            "each wins alone, but the recompute and collectives float8 adds beside it cost "
            "the step more"
        )
    if rec.converted_by_step:
        what += (
            f"; the step converts {', '.join(_layer_name(f) for f in rec.converted_by_step)} "
            "too: each loses alone, but the step is shorter with it in float8"
        )
    if answer.adds_float8_all_gather:
        what += "; with FSDP2's float8 all-gather"
    lines = textwrap.wrap(what, WIDTH, subsequent_indent="  ")
    c, t = step.chosen, step.as_run
    lines += textwrap.wrap(
        f"step: x{c.speedup:.3f}{_band(c, 3)} with f8roof's choice; x{t.speedup:.3f}{_band(t, 3)} "
        f"as torchtitan converts ({_as_run_filters(step.as_run_filters)})",
        WIDTH,
        subsequent_indent="  ",
    )
    where = "measured bf16 step" if c.step_measured else "modelled step, no --step-ms"
    if rec.setup.accumulation > 1:
        where = f"{rec.setup.accumulation} passes, {where}"
    lines.append(
        f"  bf16 {ms(c.bf16_s)} ms -> float8 {ms(c.fp8_s)} ms per GPU ({where}); linears "
        f"{c.linear_share:.0%} of it"
    )
    if answer.recipe_plans:
        lines += textwrap.wrap(
            "plans compared (step with f8roof's choice): "
            + ", ".join(f"{_plan_name(p)} x{p.speedup:.3f}" for p in answer.recipe_plans)
            + "; this answer is the first",
            WIDTH,
            subsequent_indent="  ",
        )
    if answer.float8_all_gather is not None:
        gathered = answer.float8_all_gather.summary
        lines += textwrap.wrap(
            f"with FSDP2's float8 all-gather: x{gathered.speedup:.3f}{_band(gathered, 3)} as "
            "torchtitan converts (--float8-all-gather; torchtitan: "
            "enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp)",
            WIDTH,
            subsequent_indent="  ",
        )
    return ["", *lines]


def _plan_name(plan: Candidate) -> str:
    if plan.recipe:
        return plan.recipe
    if plan.one_converter:
        return "each layer its best recipe"
    return "each layer its best recipe (torchao per module, not one torchtitan converter)"


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def memory_lines(memory: MemoryAnswer | None, *, every: bool = False) -> list[str]:
    """The peak per GPU, bf16 -> float8, of the GPU's memory; what float8's savings buy (a
    cheaper recompute mode, a larger local batch) where they buy something, or `every`."""
    if memory is None:
        return []
    found, room = memory.estimate, memory.headroom
    fits = ""
    if not found.bf16_fits:
        fits = ": only float8 fits" if found.fp8_fits else ": neither fits"
    peak = (
        f"  peak memory per GPU: bf16 {_gib(found.bf16.peak_bytes)} -> float8 "
        f"{_gib(found.fp8.peak_bytes)} (of {found.gpu_memory_bytes / GIB:.0f} GiB){fits}"
    )
    lines = [peak]
    if memory.measured and not found.bf16_fits:
        lines.append(
            "  the bf16 step was measured, so the run fits: the memory model overstates it"
        )
    # a run bf16 does not fit: the recompute that would fit it, where one does
    fits_with = not found.bf16_fits and room.bf16_recompute is not None
    if every or room.cheaper_recompute or fits_with:
        bf16 = room.bf16_recompute.value if room.bf16_recompute else "more than full"
        fp8 = room.fp8_recompute.value if room.fp8_recompute else "more than full"
        line = f"  cheapest recompute that fits: bf16 {bf16}, float8 {fp8}"
        fitting = memory.fitting
        if fitting is not None:
            line += (
                f": step x{fitting.speedup:.3f} at those (x{fitting.like_for_like:.3f} like for "
                "like, modelled)"
            )
        lines.append(line)
    if memory.fsdp_fits is not None:
        degree, mode = memory.fsdp_fits
        lines.append(f"  bf16 fits at FSDP {degree} (--fsdp {degree} --recompute {mode.value})")
    elif not found.bf16_fits and room.bf16_recompute is None:
        lines.append("  bf16 fits at no FSDP degree with this TP and these tokens per GPU")
    if every or room.fp8_local_batch > room.bf16_local_batch:
        lines.append(
            f"  largest local batch that fits (x {room.seq_len} tokens): bf16 "
            f"{room.bf16_local_batch}, float8 {room.fp8_local_batch} (this run: {room.local_batch})"
        )
    return lines


def default_notes(notes) -> list[str]:
    """The notes the default view prints (`notes.DEFAULT_VIEW`), each wrapped within WIDTH."""
    return [
        line
        for n in notes
        if n.topic in DEFAULT_VIEW
        for line in textwrap.wrap(f"note: {sentence(n)}", WIDTH, subsequent_indent="  ")
    ]


def _peak_line(label: str, peak: MemoryPeak) -> str:
    """One precision's reserved peak (torchtitan's `memory:`), its allocated peak and the
    moment that falls at, and every term."""
    parts = ", ".join(f"{t.term.value} {_gib(t.bytes)}" for t in peak.terms if t.bytes)
    return (
        f"  {label} {_gib(peak.peak_bytes)} reserved, {_gib(peak.allocated_bytes)} allocated "
        f"at the {peak.phase.value}: {parts}"
    )


def _as_run_filters(filters: tuple[str, ...]) -> str:
    """Which linears the step as torchtitan runs it leaves in bf16: the setup's filter_fqns."""
    return f"all but {', '.join(f or repr(f) for f in filters)}" if filters else "every linear"


def _decision_breakeven(found: dict[str, int | None]) -> list[str]:
    """The breakeven at the level decisions are made on: fitted with a calibration, else the
    seed's worst case."""
    level = "fitted" if "fitted" in found else next((k for k in found if "worst" in k), None)
    return [line for line in breakeven_lines(found) if level and f"({level})" in line]


def unrunnable_lines(frame: Columns) -> list[str]:
    """Shapes float8 gemms cannot run, and why (the first few)."""
    bad = frame.take(~frame["fp8_ok"].astype(bool))
    return [
        f"float8 cannot run {r['M']}x{r['K']}x{r['N']}: {r['fp8_reason']}"
        for r in bad.head(3).rows()
    ] + ([f"... and {len(bad) - 3} more shapes"] if len(bad) > 3 else [])


def extrapolated_lines(frame: Columns) -> list[str]:
    """Shapes whose gemm times a table extrapolates."""
    if "gemm_extrapolated" not in frame:
        return []
    far = frame.take(frame["gemm_extrapolated"].astype(bool))
    shapes = ", ".join(f"{r['M']}x{r['K']}x{r['N']}" for r in far.head(3).rows())
    more = f" and {len(far) - 3} more" if len(far) > 3 else ""
    return [f"gemm time extrapolated beyond the table at {shapes}{more}"] if len(far) else []


def recipe_lines(rec) -> list[str]:
    """What torchao cannot do with the chosen recipes, and recipes the calibration lacks."""
    lines = []
    if rec.reference_recipes:
        names = ", ".join(rec.reference_recipes)
        lines.append(
            f"{names} exists only in f8roof's reference implementation: torchao cannot convert "
            "with it (no delayed or static scaling)"
        )
    if rec.skipped_recipes:
        lines.append(f"not compared (not in the calibration): {', '.join(rec.skipped_recipes)}")
    if rec.te_stack is not None:
        lines += textwrap.wrap(f"note: {sentence(rec.te_stack)}", WIDTH, subsequent_indent="  ")
    return lines


def _straddling(frame: Columns) -> int:
    return int(frame["straddles"].sum()) if "straddles" in frame else 0


def settle_lines(settle: Settle | None, count: int, what: str) -> list[str]:
    """The rows whose band straddles 1, and the command that settles them on a GPU (the first
    SETTLE_SHAPES shapes), wrapped as a shell line."""
    if settle is None:
        return []
    first = f" (the command measures the first {SETTLE_SHAPES})" if count > SETTLE_SHAPES else ""
    # a line breaks before an option or the next command ("&&" opens the validate line)
    pieces: list[str] = []
    for word in settle_words(settle):
        if pieces and pieces[-1] == "&&":
            pieces[-1] = f"&& {word}"
        else:
            pieces.append(word)
    return [
        (
            f"* the band straddles 1 on {count} {what if count > 1 else what[:-1]}{first}: measure "
            "them on a GPU with"
        ),
        *_shell_lines(pieces, indent="  "),
    ]


def torchtitan_lines(config: TorchtitanConfig) -> list[str]:
    """What to put in a torchtitan job config (TOML) to train with f8roof's decisions, then the
    same as command-line overrides, each within WIDTH where a single value allows; what
    filter_fqns cannot say (routed experts, a model torchtitan lacks) as comments first."""
    said = [
        f"# {line}"
        for n in config.notes
        for line in textwrap.wrap(sentence(n), WIDTH - 2, break_on_hyphens=False)
    ]
    return [*said, *_converter_lines(config)]


def _converter_lines(config: TorchtitanConfig) -> list[str]:
    if not config.converts:
        experts = any(
            n.topic is Topic.TORCHTITAN_EXPERTS and n["decision"] == "convert" for n in config.notes
        )
        if experts:  # the routed experts convert by their own converter, as said above
            return ['# f8roof converts no nn.Linear here: "float8" out of [model] converters']
        return [
            '# f8roof converts no linear here: train in bf16 ("float8" out of [model] converters)'
        ]
    if config.recipe is None:
        return [f"# no torchtitan recipe for {config.wanted}"]
    if config.section == NVFP4_CONVERTER:
        return nvfp4_converter_lines(config)
    fqns = list(config.filter_fqns)
    section = config.section
    toml: list[str] = []
    cli: list[str] = []
    for key, value in config.settings:
        table, _, name = key.rpartition(".")
        if not toml or (table == section and f"[{section}]" not in toml):
            toml += ([""] if toml else []) + [f"[{table}]"]
        if name == "filter_fqns":
            toml += _filter_lines(fqns)
        else:
            toml.append(f"{name} = {_toml_value(value)}")
        if value is True:
            cli.append(f"--{key}")
        elif isinstance(value, list):
            cli += [f"--{key} {','.join(value)}"] if value else []
        else:
            cli.append(f"--{key} {value}")
    if not config.filters:  # this torchtitan keeps the output projection alone in bf16
        return [*toml, *_fixed_filter(fqns), "", "# or on the command line:", *_shell_lines(cli)]
    return [*toml, "", "# or on the command line:", *_shell_lines(cli)]


def _toml_value(value: object) -> str:
    if value is True:
        return "true"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return f'"{value}"'


def _filter_lines(fqns: list[str]) -> list[str]:
    """`filter_fqns = [...]` within WIDTH: a TOML array may span lines."""
    listed = ", ".join(f'"{f}"' for f in fqns)
    if len(listed) + len("filter_fqns = []") <= WIDTH:
        return [f"filter_fqns = [{listed}]"]
    wrapped = textwrap.wrap(listed + ",", WIDTH, initial_indent="    ", subsequent_indent="    ")
    return ["filter_fqns = [", *wrapped, "]"]


def _fixed_filter(fqns: list[str]) -> list[str]:
    """What a torchtitan without filter_fqns (before 2025-04-07) cannot keep in bf16: the
    linears f8roof keeps beyond the output projection, as comment lines."""
    rest = [f for f in fqns if f != "output"]
    if not rest:
        return []
    words = textwrap.wrap(
        f"this torchtitan keeps only output in bf16: keeping {', '.join(rest)} too takes "
        "filter_fqns (torchtitan since 2025-04-07)",
        WIDTH - 2,
        break_on_hyphens=False,
    )
    return [f"# {w}" for w in words]


def nvfp4_converter_lines(config: TorchtitanConfig) -> list[str]:
    """torchtitan's NVFP4 converter as its Python configs write it (it has no TOML section):
    the linears to convert (`fqns`, an include list), compile on as its NVFP4 configs set it."""
    listed = ", ".join(f'"{f}"' for f in config.fqns)
    call = f"NVFP4LinearConverter.Config(fqns=[{listed}], model_compile_enabled=True)"
    lines = [
        "# torchtitan's NVFP4 converter is a Python config (no TOML section): in your config",
        "# function, model_registry(..., converters=[...]) with",
        f"# ({NVFP4_SOURCE})",
    ]
    if len(call) <= WIDTH:
        return [*lines, call]
    entries = textwrap.wrap(
        listed + ",", WIDTH - 4, initial_indent="    ", subsequent_indent="    "
    )
    return [*lines, "NVFP4LinearConverter.Config(", "  fqns=[", *entries, "  ],",
            "  model_compile_enabled=True,", ")"]  # fmt: skip


def _shell_lines(words: list[str], *, indent: str = "") -> list[str]:
    """Shell words joined into lines of at most WIDTH (a single longer word stays whole), each
    but the last ending in a backslash."""
    lines = [""]
    for word in words:
        if lines[-1] and len(indent) + len(lines[-1]) + 1 + len(word) > WIDTH - 2:
            lines.append("")
        lines[-1] = f"{lines[-1]} {word}".strip()
    return [f"{indent}{line} \\" for line in lines[:-1]] + [f"{indent}{lines[-1]}"]


# --- --show-all -------------------------------------------------------------------------------


def full_lines(
    answer: ShapesAnswer | Plan, *, color: bool = False, width: int | None = None
) -> list[str]:
    """Every column, every level's breakeven, every note; tables and prose within `width`
    where given (the commands to paste stay whole)."""
    lines = provenance_lines(answer.resolved.provenance)
    if isinstance(answer, Plan):
        rec = answer.recommendation
        lines.append(format_recommendation(rec, color=color, end_to_end=False, width=width))
        lines += full_step_lines("with f8roof's choice", answer.step.chosen)
        lines += full_step_lines("as torchtitan converts it", answer.step.as_run)
        if answer.step.fits_only is not None:
            lines += full_step_lines("per-layer fits alone", answer.step.fits_only)
        if answer.block is not None:
            lines += block_lines(answer.block)
        if answer.memory is not None:
            lines += ["", *memory_lines(answer.memory, every=True)]
            lines += [_peak_line(k, getattr(answer.memory.estimate, k)) for k in ("bf16", "fp8")]
            lines += [f"  assumes: {sentence(n)}" for n in answer.memory.notes]
        lines += settle_lines(rec.settle, _straddling(rec.rows), "layer types")
        if answer.from_setup:
            lines += ["", *torchtitan_lines(answer.torchtitan)]
    else:
        lines.append(render_table(answer.rows, color=color, width=width))
        lines += breakeven_lines(answer.breakevens)
        lines += settle_lines(answer.settle, _straddling(answer.rows), "shapes")
    return [w for text in lines for line in text.split("\n") for w in _fitted(line, width)]


def _fitted(line: str, width: int | None) -> list[str]:
    """Prose wrapped to `width`; a command to paste (`f8roof ...`, continued lines) whole."""
    command = line.lstrip().startswith(("f8roof ", "&& ", "--")) or line.endswith("\\")
    return [line] if command else wrapped(line, width)


def full_step_lines(label: str, summary: StepSummary) -> list[str]:
    """The step, its parts (bf16 -> float8, with the band where a part has one and what it
    rests on), then its notes."""
    where = "measured bf16 step" if summary.step_measured else "modelled step"
    lines = [
        "",
        (
            f"step {label} ({where}): bf16 {ms(summary.bf16_s)} ms, float8 {ms(summary.fp8_s)} ms: "
            f"x{summary.speedup:.3f}{_band(summary, 3)}"
        ),
    ]
    for c in summary.components:
        band = f" ({ms(c.fp8_low_s)}-{ms(c.fp8_high_s)})" if c.fp8_high_s > c.fp8_low_s else ""
        lines.append(
            f"  {c.part.value}: {ms(c.bf16_s)} -> {ms(c.fp8_s)}{band} ms ({c.basis.value})"
        )
    lines += [f"  assumes: {sentence(n)}" for n in summary.notes]
    return lines


def block_lines(block: BlockComparison) -> list[str]:
    """What the sharded block's float8 graph holds that the per-layer rows cannot."""
    casts = len(block.float8.casts_after_all_gather)
    recomputed = len(block.float8.recomputed)
    return [
        (
            f"  float8 block: {casts} float8 casts read an all-gathered tensor (not fused into the "
            f"norm); the backward reruns {recomputed} forward kernels, gemms and collectives"
        )
    ]


# --- --out ------------------------------------------------------------------------------------


def out_rows(answer: ShapesAnswer | Plan) -> Columns:
    """The rows as --out writes them: every column, and a model's layer notes in words."""
    if not isinstance(answer, Plan):
        return answer.rows
    rec = answer.recommendation
    notes = [layer_note(r, rec.criterion) for r in rec.rows.rows()]
    return rec.rows.join(Columns({"note": np.array(notes, dtype=object)}))


def out_summary(answer: Plan) -> dict[str, Any]:
    """The step as --out writes it: torchtitan's conversion (what published runs measure) with
    its notes in words, f8roof's choice beside it, torchtitan's conversion with FSDP2's float8
    all-gather where the run could switch it on (`float8_all_gather`), and the peak memory per
    GPU (`memory`)."""
    step = answer.step
    summary = _summary_dict(step.as_run)
    summary["chosen"] = _summary_dict(step.chosen)
    if step.fits_only is not None:
        summary["fits_only"] = _summary_dict(step.fits_only)
    if answer.float8_all_gather is not None:
        summary["float8_all_gather"] = _summary_dict(answer.float8_all_gather.summary)
    if answer.memory is not None:
        summary["memory"] = memory_dict(answer.memory)
    if answer.recipe_plans:
        summary["plans"] = [{"recipe": p.recipe, "speedup": p.speedup} for p in answer.recipe_plans]
    summary["candidates"] = [
        {
            "arm": c.arm.value,
            "recipe": c.recipe,
            "float8_all_gather": c.float8_all_gather,
            "speedup": c.speedup,
            "converted": list(c.converted),
        }
        for c in answer.candidates
    ]
    summary["chosen_from"] = answer.chosen_from.value
    return summary


def _fitting_dict(fitting: FittingSpeedup) -> dict[str, Any]:
    """The step at each precision's cheapest fitting mode (modelled), and like for like."""
    return {
        "fitting_bf16_s": fitting.bf16_s,
        "fitting_fp8_s": fitting.fp8_s,
        "fitting_speedup": fitting.speedup,
        "like_for_like_speedup": fitting.like_for_like,
    }


def _term_key(term: Term) -> str:
    return term.value.replace(" ", "_")


def memory_dict(memory: MemoryAnswer) -> dict[str, Any]:
    """The peak per GPU in bytes, bf16 and float8, reserved (torchtitan's `memory:`, the
    peak) and allocated, its terms (which add up to the reserved peak; the allocator's reserve
    terms aside, to the allocated), the moment the allocated peak falls at, and what fits."""
    found, room = memory.estimate, memory.headroom
    return {
        "bf16_peak_bytes": found.bf16.peak_bytes,  # reserved: what torchtitan logs
        "fp8_peak_bytes": found.fp8.peak_bytes,
        "bf16_reserved_bytes": found.bf16.peak_bytes,
        "fp8_reserved_bytes": found.fp8.peak_bytes,
        "bf16_allocated_bytes": found.bf16.allocated_bytes,
        "fp8_allocated_bytes": found.fp8.allocated_bytes,
        "gpu_memory_bytes": found.gpu_memory_bytes,
        "runtime_bytes": found.runtime_bytes,
        "bf16_fits": found.bf16_fits,
        "fp8_fits": found.fp8_fits,
        "bf16_step_measured": memory.measured,
        "bf16_phase": found.bf16.phase.value,
        "fp8_phase": found.fp8.phase.value,
        "terms": {
            _term_key(t.term): {"bf16_bytes": t.bytes, "fp8_bytes": found.fp8.bytes_of(t.term)}
            for t in found.bf16.terms
        },
        "fits": {
            "seq_len": room.seq_len,
            "local_batch": room.local_batch,
            "bf16_recompute": room.bf16_recompute.value if room.bf16_recompute else None,
            "fp8_recompute": room.fp8_recompute.value if room.fp8_recompute else None,
            "bf16_local_batch": room.bf16_local_batch,
            "fp8_local_batch": room.fp8_local_batch,
            **(_fitting_dict(memory.fitting) if memory.fitting is not None else {}),
        },
        "assumptions": [sentence(n) for n in memory.notes],
        "notes": [n.to_dict() for n in memory.notes],
    }


def _summary_dict(summary: StepSummary) -> dict[str, Any]:
    out = summary.to_dict()
    out["assumptions"] = [sentence(n) for n in summary.notes]
    return out


def _recipes(answer: ShapesAnswer | Plan) -> str:
    """'tensorwise' (torchao's; 'reference tensorwise' for f8roof's), or the recipes compared
    (their count beyond three, which the table and the plans name), and the context."""
    configs = answer.resolved.configs
    names = ", ".join(
        c.recipe.name
        if c.implementation.value == "torchao"
        else f"{c.implementation.value} {c.recipe.name}"
        for c in configs
    )
    if len(configs) > 3:
        names = f"{len(configs)} recipes"
    context = configs[0].context
    return names + ("" if context.is_standalone else f" after {context.name}")


def _us(seconds) -> str:
    return "-" if _missing(seconds) else f"{seconds * 1e6:.1f}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
