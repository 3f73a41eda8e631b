"""`f8roof compare --model ... --tp ...`: one sharded block, bf16 beside float8, per pass: the
kernels with their bytes, the gemms, the collectives with bytes and dtype, the float8 casts
that read an all-gathered tensor (so could not fuse into the norm), what backward recomputes;
with --async-tp, which TP collectives Inductor's micro-pipeline pass runs beside which gemms."""

from __future__ import annotations

import json
from dataclasses import asdict

from f8roof.engine.sharded import BlockComparison
from f8roof.training.block import BlockCapture, Collective, PipelinedCollective

PASSES = ("fwd", "bwd")


def _kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def _title(c: BlockComparison) -> str:
    s, p = c.spec, c.spec.parallel
    where = c.float8.device + (f" for {c.float8.gpu}" if c.float8.gpu else "")
    return (
        f"{s.name or 'block'}: one block, dim {s.dim}, {s.n_heads} heads ({s.n_kv_heads} kv), "
        f"ffn {s.ffn_dim}; {s.tokens} tokens per rank (seq {s.seq_len}); tp {p.tp}, fsdp "
        f"{p.fsdp}{', float8 all-gather' if p.float8_all_gather else ''}, recompute "
        f"{p.recompute.value}; {c.float8.recipe} vs bf16, {where}"
    )


def _collective_line(x: Collective) -> str:
    where = "graph" if x.compiled else "FSDP hook"
    notes = [n for n, on in (("cast after it", x.feeds_cast), ("recomputed", x.recomputed)) if on]
    return (
        f"    {x.kind.value:<24} {x.mesh:<8} x{x.group_size} {x.dtype:<14} "
        f"{_kib(x.bytes):>14}  ({where}{'; ' + ', '.join(notes) if notes else ''})"
    )


def _pass_lines(capture: BlockCapture, graph: str) -> list[str]:
    label = capture.recipe or "bf16"
    kernels = [k for k in capture.kernels if k.graph == graph]
    gemms = [g for g in capture.gemms if g.graph == graph]
    collectives = [x for x in capture.collectives if x.graph == graph]
    lines = [
        (
            f"  {label}: {len(kernels)} kernels {_kib(sum(k.bytes_total for k in kernels))}, "
            f"{len(gemms)} gemms {_kib(sum(g.bytes for g in gemms))}, {len(collectives)} "
            f"collectives {_kib(sum(x.bytes for x in collectives))}"
        )
    ]
    for k in kernels:
        notes = [
            n
            for n, on in (("recomputed", k.recomputed), ("reads an all-gather", k.after_all_gather))
            if on
        ]
        steps = ", ".join(k.float8_steps)
        lines.append(
            f"    {k.name[:60]:<60} {k.work:<7} {_kib(k.bytes_total):>12}"
            f"{'  ' + steps if steps else ''}{'  [' + ', '.join(notes) + ']' if notes else ''}"
        )
    for g in gemms:
        again = "  [recomputed]" if g.recomputed else ""
        lines.append(f"    {g.op:<12} {g.m}x{g.k}x{g.n} {g.dtype:<14} {_kib(g.bytes):>12}{again}")
    lines += [_collective_line(x) for x in collectives]
    return lines


def _pipelined_lines(label: str, found: tuple[PipelinedCollective, ...]) -> list[str]:
    fused = sum(x.fused for x in found)
    lines = [f"  {label}: {fused} of {len(found)} TP collectives run beside gemms"]
    for x in found:
        beside = ", ".join("x".join(map(str, g)) for g in x.gemms) or "plain"
        lines.append(f"    {x.graph} {x.kind.value:<24} {_kib(x.bytes):>14}  {beside}")
    return lines


def render_block_text(c: BlockComparison) -> str:
    lines = [_title(c)]
    for graph in PASSES:
        lines.append(f"{'forward' if graph == 'fwd' else 'backward'}:")
        for capture in (c.bf16, c.float8):
            lines += _pass_lines(capture, graph)
    casts = c.float8.casts_after_all_gather
    lines.append(
        f"float8 casts reading an all-gathered tensor (not fused into the norm): {len(casts)}"
    )
    lines += [f"  {k.graph} {k.name} {', '.join(k.float8_steps)}" for k in casts]
    for capture in (c.bf16, c.float8):
        again = capture.recomputed
        lines.append(f"recomputed in backward ({capture.recipe or 'bf16'}): {len(again)}")
        lines += [f"  {name}" for name in again]
    if c.pipelined is not None:
        lines.append("async TP (Inductor's micro-pipeline pass; gemms beside each, M x K x N):")
        for label, found in zip(("bf16", c.float8.recipe or "float8"), c.pipelined):
            lines += _pipelined_lines(label, found)
    return "\n".join(lines) + "\n"


def block_to_json(c: BlockComparison) -> str:
    """Both captures (`BlockCapture.to_dict`, readable back with `from_dict`) and their
    per-pass totals."""

    def capture_json(capture: BlockCapture) -> dict:
        totals = {graph: asdict(capture.totals(graph)) for graph in PASSES}
        return {**capture.to_dict(), "recomputed": list(capture.recomputed), "totals": totals}

    data: dict = {"bf16": capture_json(c.bf16), "float8": capture_json(c.float8)}
    if c.pipelined is not None:
        data["async_tp"] = {
            label: [{**asdict(x), "kind": x.kind.value} for x in found]
            for label, found in zip(("bf16", "float8"), c.pipelined)
        }
    return json.dumps(data, indent=1) + "\n"
