"""Build the shipped sharded block file (f8roof/calibration/data/blocks.json) on CPU.

For each built-in dense architecture, TP degree, checkpointing policy and recipe: one block
compiled as one rank of the sharded run (codegen for h100 on a fake process group, as
`compare --model` does) at two token counts per rank, the exact affine fit through them, and
the fit checked against fresh compiles at two more token counts, users' sizes between them.
Tensorwise is also compiled with FSDP2's float8 all-gather (at FSDP 2: the weights reach the
graph in float8, so their casts leave it). Every compile is checkpointed as it lands, so an
interrupted run resumes (`--resume`).

    PYTHONPATH=. python scripts/build_block_fits.py --jobs 2 [--out FILE] [--resume]
    PYTHONPATH=. python scripts/build_block_fits.py --small --out /tmp/blocks.json  # tests
    PYTHONPATH=. python scripts/build_block_fits.py --add llama3-405b:8 --add llama3-8b:4

`--add MODEL:TP` compiles that model at that TP degree alone (every policy and recipe) and
merges its fits into OUT's, replacing any of the same key: the file grows without the
hundreds of compiles already in it being run again.

`--plain-casts` compiles the rowwise entries (of `--add`, or of every model and TP) without
Inductor's emulate_precision_casts, as torchtitan before 2025-04-16 did (its #1108 set it),
and merges them like `--add`.

`--saved` traces each fit of OUT that lacks them at its first two knots and records what the
partitioned forward hands its backward (profiler/memory/saved.py's `saved_activations`: nothing
computes, a few seconds each) as the fit's `saved_bytes`, checked at a token count between
them; every build runs it last. The memory model's saved-activation term is tested against
these (tests/test_block_saved.py).

`--recount` compiles each fit of OUT once, at its first knot, and scales each kernel group's
arithmetic by the ratio of the counts there (`profiler/triton_code._arithmetic` changed, the
bytes did not): a group's count is its kernels' operations per element times their elements,
and only the first changes, so the ratio holds at every token count while the group holds the
same kernels. A group the compile lacks takes its pass's ratio. One compile per fit instead
of seven; the checks' block times stay those of the build.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from f8roof.calibration.block_file import SHIPPED, BlockFits, BlockKey
from f8roof.device.runner import Checkpoint, Task, run_tasks
from f8roof.errors import F8RoofError
from f8roof.training.block import BlockCapture, BlockSpec, Recompute
from f8roof.training.block_fit import (
    Affine,
    BlockFit,
    KernelGroup,
    _kernel_key,
    fit_checked,
)
from f8roof.training.run_config import RunConfig

MODELS = ("llama3-8b", "llama3-70b")
TP_DEGREES = (1, 2, 8)
# added since with --add
ADDED = (
    ("llama3-405b", 8),
    ("llama3-8b", 4),
    ("llama3-70b", 4),
    ("llama3-405b", 4),
    ("llama3-405b", 2),
)
BUILT = (*itertools.product(MODELS, TP_DEGREES), *ADDED)  # the shipped file's models and TPs
POLICIES = (Recompute.NONE, Recompute.SELECTIVE)
# (recipe, float8 all-gather); torchao all-gathers float8 weights for tensorwise only
RECIPES = ((None, False), ("tensorwise", False), ("rowwise", False), ("tensorwise", True))
# Layouts (sequences per rank, seq_len). One sequence per rank and several compile to
# different graphs: with several, each sequence-parallel all-gather along the sequence is
# followed by a copy that interleaves the ranks' chunks (with one it is free). So each regime
# has its own piecewise fit: knots at users' sizes (issue 18: 2048-16384 tokens per rank),
# checks held out between the knots and far beyond them (torchtitan's published Llama3-8B
# async TP run: 12 sequences of 8192).
LAYOUTS = {
    "one": {
        "knots": ((1, 2048), (1, 4096), (1, 8192), (1, 16384)),
        "checks": ((1, 3072), (1, 6144), (1, 12288)),
    },
    "several": {
        "knots": ((2, 2048), (2, 4096), (2, 8192), (8, 8192)),
        "checks": ((3, 2048), (3, 4096), (12, 8192)),
    },
}
# Where a fit lost every check to Inductor's thresholds (each became a knot), it is checked
# again between its knots at these
SECOND_CHECKS = {"one": ((1, 5120), (1, 10240)), "several": ((3, 8192), (5, 8192))}
SMALL_LAYOUTS = {"one": {"knots": ((1, 256), (1, 1024)), "checks": ((1, 512), (1, 768))}}
CODE_FOR = "h100"


def spec_for(
    model: str,
    *,
    tp: int,
    recompute: str,
    gather: bool,
    batch: int,
    seq_len: int,
    emulate: bool = True,
) -> BlockSpec:
    """The block of one build entry at one layout point (`compile_one`'s and `trace_saved`'s
    keyword arguments, the checkpoint's)."""
    parallel = RunConfig.sharded(
        tp=tp,
        fsdp=2 if gather else 1,
        float8_all_gather=gather,
        recompute=Recompute(recompute),
        emulate_precision_casts=emulate,
    )
    tokens = batch * seq_len
    if model == "small":
        return BlockSpec.small(parallel=parallel, tokens=tokens, seq_len=seq_len)
    from f8roof.engine.sharded import block_spec
    from f8roof.training.catalog import resolve_model

    return block_spec(resolve_model(model), tokens=tokens, seq_len=seq_len, parallel=parallel)


def compile_one(recipe: str | None, **block: Any) -> dict:
    """One block's codegen (`block`: `spec_for`'s arguments), as a checkpoint record (a worker
    process runs it)."""
    from f8roof.hardware.presets import find_gpu
    from f8roof.profiler.block import capture_block

    spec = spec_for(**block)
    start = time.monotonic()
    capture = capture_block(spec, recipe=recipe, device="codegen", gpu=find_gpu(CODE_FOR))
    return {"capture": capture.to_dict(), "seconds": time.monotonic() - start}


def key(
    model: str, tp: int, recompute: str, recipe: str | None, gather: bool, emulate: bool = True
) -> str:
    gathered = "+fp8ag" if gather else ""
    plain = "" if emulate else "-plain-casts"
    return f"{model}/tp{tp}/{recompute}/{recipe or 'bf16'}{gathered}{plain}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--checkpoint", type=Path, help="default: OUT with .jsonl")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument(
        "--small", action="store_true", help="a tiny block, TP 2, selective, bf16 and rowwise"
    )
    parser.add_argument(
        "--add", action="append", default=[], metavar="MODEL:TP", help="merge into OUT's fits"
    )
    parser.add_argument(
        "--plain-casts", action="store_true", help="rowwise without emulate_precision_casts"
    )
    parser.add_argument("--recount", action="store_true", help="recount OUT's arithmetic")
    parser.add_argument("--saved", action="store_true", help="trace OUT's saved activations")
    args = parser.parse_args()
    if args.recount:
        recount(args.out, jobs=args.jobs)
        return
    if args.saved:
        add_saved(args.out)
        return
    if args.small:
        layouts = SMALL_LAYOUTS
        entries = list(itertools.product(("small",), (2,), POLICIES[1:], RECIPES[:3:2]))
    elif args.add:
        layouts = LAYOUTS
        added = [(m, int(t)) for m, _, t in (a.partition(":") for a in args.add)]
        entries = [(m, t, p, r) for (m, t), p, r in itertools.product(added, POLICIES, RECIPES)]
    else:
        layouts = LAYOUTS
        entries = list(itertools.product(MODELS, TP_DEGREES, POLICIES, RECIPES))
    if args.plain_casts:
        if not (args.add or args.small):
            entries = [(m, t, p, r) for m, t in BUILT for p in POLICIES for r in RECIPES]
        entries = [e for e in entries if e[3] == ("rowwise", False)]
    emulate = not args.plain_casts
    points = sorted(
        {p for layout in layouts.values() for points in layout.values() for p in points}
    )
    header = {
        "entries": [key(m, t, p.value, r, g, emulate) for m, t, p, (r, g) in entries],
        "layouts": [list(p) for p in points],
        "gpu": CODE_FOR,
    }
    checkpoint_path = args.checkpoint or args.out.with_suffix(".jsonl")
    start = time.monotonic()
    try:
        checkpoint = Checkpoint(checkpoint_path, header, resume=args.resume)
        compile_all(entries, points, emulate, checkpoint, jobs=args.jobs)
    except F8RoofError as e:
        sys.exit(str(e))
    timer = _timer()
    fits, unchecked = {}, []
    captures = _captures(checkpoint)
    for entry, (regime, layout) in itertools.product(entries, layouts.items()):
        name = _entry_key(entry, emulate)
        knots = [captures[f"{name}/{b}x{s}"] for b, s in layout["knots"]]
        checks = [captures[f"{name}/{b}x{s}"] for b, s in layout["checks"]]
        fits[name, regime] = fit_checked(knots, checks, timer=timer)
        if not fits[name, regime].checks and regime in SECOND_CHECKS:
            unchecked.append((entry, regime))
    if unchecked:
        # every check crossed a threshold and became a knot: check the fit again between them
        second = sorted({p for _, regime in unchecked for p in SECOND_CHECKS[regime]})
        print(f"{len(unchecked)} fits lost every check: compiling {second} for them", flush=True)
        try:
            for entry, regime in unchecked:
                compile_all([entry], SECOND_CHECKS[regime], emulate, checkpoint, jobs=args.jobs)
        except F8RoofError as e:
            sys.exit(str(e))
        captures = _captures(checkpoint)
        for entry, regime in unchecked:
            name = _entry_key(entry, emulate)
            layout = layouts[regime]
            knots = [captures[f"{name}/{b}x{s}"] for b, s in layout["knots"] + layout["checks"]]
            checks = [captures[f"{name}/{b}x{s}"] for b, s in SECOND_CHECKS[regime]]
            fits[name, regime] = fit_checked(knots, checks, timer=timer)
    for (name, regime), fit in fits.items():
        added = sorted(set(fit.tokens) - {b * s for b, s in layouts[regime]["knots"]})
        said = (
            f"bytes within {max(c.worst for c in fit.checks):.1%}, block time within "
            f"{max(c.time_error or 0.0 for c in fit.checks):.2%}"
            if fit.checks
            else "no check left"
        )
        if added:
            said += f"; checks missed by over 1%, made knots: {added} tokens"
        print(f"{name} ({regime} sequence per rank): {said}", flush=True)
    fits = list(fits.values())
    compile_s = sorted(r["seconds"] for r in checkpoint.records)
    from f8roof.training.checkpointing import DEFAULT_POLICY

    command = "python scripts/build_block_fits.py" + (" --small" if args.small else "")
    if args.add or args.plain_casts:
        before = BlockFits.load(args.out)
        mine = {BlockKey.of(f) for f in fits}
        fits = [f for f in before.fits if BlockKey.of(f) not in mine] + fits
        if before.produced_by.get("command"):
            command = before.produced_by["command"]
        flags = [f"--add {a}" for a in args.add] + ["--plain-casts"] * args.plain_casts
        command += f" (then {' '.join(flags)})"
    produced_by = _environment() | {
        "sac_policy": DEFAULT_POLICY,
        "command": command,
        "layouts": {
            regime: {what: [list(p) for p in ps] for what, ps in layout.items()}
            for regime, layout in layouts.items()
        },
        "compile_s_median": compile_s[len(compile_s) // 2],
        "time_checked_with": f"the shipped {CODE_FOR} calibration",
    }
    BlockFits(tuple(fits), produced_by).save(args.out)
    print(
        f"wrote {args.out}: {len(fits)} fits from {len(captures)} compiles "
        f"(median {produced_by['compile_s_median']:.1f} s each) in {time.monotonic() - start:.0f} s"
    )
    add_saved(args.out)


def compile_all(entries, points, emulate: bool, checkpoint: Checkpoint, *, jobs: int) -> None:
    """Compile every entry at every (batch, seq_len) point the checkpoint lacks."""
    todo = []
    for entry, (batch, seq_len) in itertools.product(entries, points):
        model, tp, policy, (recipe, gather) = entry
        name = f"{_entry_key(entry, emulate)}/{batch}x{seq_len}"
        if checkpoint.done(name) is None:
            arguments = {
                "model": model,
                "tp": tp,
                "recompute": policy.value,
                "recipe": recipe,
                "gather": gather,
                "batch": batch,
                "seq_len": seq_len,
                "emulate": emulate,
            }
            todo.append(Task(name, name, compile_one, arguments))
    print(f"{len(todo)} compiles to run ({len(checkpoint.records)} checkpointed)", flush=True)
    run_tasks(todo, checkpoint, jobs=jobs, progress=_progress)


def _entry_key(entry, emulate: bool) -> str:
    model, tp, policy, (recipe, gather) = entry
    return key(model, tp, policy.value, recipe, gather, emulate)


def _captures(checkpoint: Checkpoint) -> dict[str, BlockCapture]:
    return {r["key"]: BlockCapture.from_dict(r["capture"]) for r in checkpoint.records}


def trace_saved(recipe: str | None, **block: Any) -> dict:
    """What one block's partitioned forward saves (`block`: `spec_for`'s arguments), as a
    checkpoint record (a worker process runs it)."""
    from f8roof.profiler.memory.saved import saved_activations

    spec = spec_for(**block)
    start = time.monotonic()
    saved = saved_activations(spec, recipe=recipe)
    total = saved.activation_bytes + saved.from_weights_bytes
    return {"bytes": total, "tokens": spec.tokens, "seconds": time.monotonic() - start}


def add_saved(path: Path) -> None:
    """See the module docstring: each fit's saved bytes, affine through its first two knots
    (activations have a row per token, float8 weight copies none), checked at the layout's
    first check, between them. One trace at a time, each in a process of its own: the traced
    graphs allocate their outputs and the block's weights (a llama3-405b block at TP 2 takes
    over 10 GiB), and a process that ran several keeps what they took."""
    fits = BlockFits.load(path)
    points = {}
    for fit in fits.fits:
        if fit.saved_bytes is not None:
            continue
        block = BlockKey.of(fit)
        regime = "several" if block.several_sequences else "one"
        layout = (SMALL_LAYOUTS if block.architecture == "small" else LAYOUTS)[regime]
        knots = layout["knots"][:2] + layout["checks"][:1]  # the check lies between them
        recipe = None if block.recipe == "bf16" else block.recipe
        emulate = block.emulate_precision_casts or recipe != "rowwise"
        entry = (block.architecture, block.tp, block.recompute, recipe, block.float8_all_gather)
        points[block] = [
            (f"{key(*entry, emulate)}/{b}x{s}", entry, b, s, emulate) for b, s in knots
        ]
    header = {"saved": sorted(n for p in points.values() for n, *_ in p)}
    checkpoint = Checkpoint(path.with_suffix(".saved.jsonl"), header, resume=True)
    names = ("model", "tp", "recompute", "recipe", "gather")
    todo = [
        Task(
            name,
            name,
            trace_saved,
            dict(zip(names, entry)) | {"batch": b, "seq_len": s, "emulate": e},
        )
        for p in points.values()
        for name, entry, b, s, e in p
        if checkpoint.done(name) is None
    ]
    print(f"{len(todo)} traces to run ({len(checkpoint.records)} checkpointed)", flush=True)
    run_tasks(todo, checkpoint, jobs=1, progress=_progress, fresh=True)
    traced = {r["key"]: (r["tokens"], r["bytes"]) for r in checkpoint.records}
    out, worst = [], 0.0
    for fit in fits.fits:
        if fit.saved_bytes is not None:
            out.append(fit)
            continue
        (t1, y1), (t2, y2), (t3, y3) = (traced[name] for name, *_ in points[BlockKey.of(fit)])
        line = Affine.through(t1, y1, t2, y2)
        error = abs(float(line.at(t3)) / y3 - 1)
        if error > 0.01:
            sys.exit(
                f"{BlockKey.of(fit)}: saved bytes not affine in tokens ({error:.1%} off at {t3})"
            )
        worst = max(worst, error)
        out.append(replace(fit, saved_bytes=line))
    produced_by = fits.produced_by | {
        "saved_bytes": "traced by --saved at each fit's first two knots, checked between them "
        f"(within {worst:.2%}: the last pass, over {len(points)} fits)"
    }
    BlockFits(tuple(out), produced_by).save(path)
    checkpoint.remove()
    print(f"wrote {path}: saved bytes of {len(points)} fits traced, affine within {worst:.2%}")


def recount(path: Path, *, jobs: int) -> None:
    """See the module docstring: each fit's arithmetic recounted from one compile."""
    fits = BlockFits.load(path)
    names = {}
    for fit in fits.fits:
        block = BlockKey.of(fit)
        batch, seq_len = LAYOUTS["several" if block.several_sequences else "one"]["knots"][0]
        recipe = None if block.recipe == "bf16" else block.recipe
        emulate = block.emulate_precision_casts or recipe != "rowwise"
        gather = block.float8_all_gather
        entry = (block.architecture, block.tp, block.recompute, recipe, gather, emulate)
        names[block] = (f"{key(*entry)}/{batch}x{seq_len}", entry, batch, seq_len)
    header = {"recount": sorted(n for n, *_ in names.values()), "gpu": CODE_FOR}
    checkpoint = Checkpoint(path.with_suffix(".recount.jsonl"), header, resume=True)
    todo = [
        Task(
            name,
            name,
            compile_one,
            dict(zip(("model", "tp", "recompute", "recipe", "gather", "emulate"), entry))
            | {"batch": batch, "seq_len": seq_len},
        )
        for name, entry, batch, seq_len in names.values()
        if checkpoint.done(name) is None
    ]
    print(f"{len(todo)} compiles to run ({len(checkpoint.records)} checkpointed)", flush=True)
    run_tasks(todo, checkpoint, jobs=jobs, progress=_progress)
    captures = {r["key"]: BlockCapture.from_dict(r["capture"]) for r in checkpoint.records}
    recounted = [recounted_fit(f, captures[names[BlockKey.of(f)][0]]) for f in fits.fits]
    produced_by = fits.produced_by | {
        "arithmetic": "recounted by --recount: one compile per fit at its first knot, each "
        "kernel group scaled by the counts' ratio there (hardware/instruction_costs)"
    }
    BlockFits(tuple(recounted), produced_by).save(path)
    checkpoint.remove()
    print(f"wrote {path}: {len(recounted)} fits recounted from {len(captures)} compiles")


def recounted_fit(fit: BlockFit, capture: BlockCapture) -> BlockFit:
    """`fit` with each kernel group's arithmetic times new / old at `capture`'s tokens."""
    tokens = capture.spec.tokens
    new: dict[tuple, int] = {}
    for k in capture.kernels:
        group = _kernel_key(k)
        new[group] = new.get(group, 0) + k.arithmetic
    at = fit.segment(tokens)
    old = {_kernel_key(g): g.arithmetic.at(tokens) for g in at.kernels}
    ratios = {g: Fraction(new[g]) / old[g] for g in old if g in new and old[g]}
    passes = {}
    for graph in {g[0] for g in old}:
        mine = [g for g in ratios if g[0] == graph]
        total = sum(old[g] for g in mine)
        passes[graph] = sum(new[g] for g in mine) / total if total else Fraction(1)

    def scaled(g: KernelGroup) -> KernelGroup:
        ratio = ratios.get(_kernel_key(g), passes.get(g.graph, Fraction(1)))
        a = g.arithmetic
        return replace(g, arithmetic=Affine(a.const * ratio, a.per_token * ratio))

    segments = tuple(replace(s, kernels=tuple(scaled(g) for g in s.kernels)) for s in fit.segments)
    return replace(fit, segments=segments)


def _timer():
    """A block's time (kernels and gemms) by the shipped h100 calibration: what the checks
    compare besides bytes."""
    from f8roof.engine.resolve import Request, resolve
    from f8roof.engine.sharded import capture_times

    resolved = resolve(Request(gpu=CODE_FOR))

    def seconds(capture: BlockCapture) -> float:
        times = capture_times(
            capture, calibration=resolved.calibration, gemm_model=resolved.config.gemm_model
        )
        return times.total_s

    return seconds


def _environment() -> dict:
    from f8roof.hardware.presets import find_gpu
    from f8roof.profiler.device import environment

    env = environment("codegen", gpu=find_gpu(CODE_FOR))
    return {name: getattr(env, name) for name in ("torch", "triton", "torchao", "gpu")}


def _progress(todo):
    start = time.monotonic()
    for i, task in enumerate(todo):
        if i % 8 == 0:
            print(f"[{i}/{len(todo)} done, {time.monotonic() - start:.0f} s]", flush=True)
        yield task


if __name__ == "__main__":
    main()
