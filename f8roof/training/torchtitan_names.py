"""torchtitan's names for f8roof's layers, its filter rule, and what to tell torchtitan.

torchtitan's llama modules: `layers.N.attention.wq/wk/wv/wo`, `layers.N.feed_forward.w1/w2/w3`
(w1 gate, w3 up, w2 down) and `output` (the lm_head); f8roof's (Hugging Face's):
`model.layers.*.self_attn.q_proj`, ..., `model.layers.*.mlp.gate_proj/up_proj/down_proj`,
`lm_head`. torchtitan matches `filter_fqns` entries as substrings of module fqns, so the leaf
path (`attention.wk`) filters that linear in every block, and `layers.27.` every linear of
block 27 (`filtered`, the one place that rule lives). A row of f8roof's covers a layer type in
`count` blocks (`model.layers.*.`); filters naming some blocks split it into rows over block
ranges (`model.layers.0-26.`, `split_by_filters`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from f8roof.errors import F8RoofError, term
from f8roof.notes import Note, Topic, note
from f8roof.traffic.recipes import MX_RECIPES, NVFP4
from f8roof.training.run_config import AUTO_FILTER

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")


@dataclass(frozen=True)
class ConfigLayout:
    """How a setup's torchtitan spells the float8 converter, so that the lines f8roof prints
    fit the file they go into."""

    quantize: bool = False  # [quantize.linear.float8] (late 2025), else [float8]
    # [float8] enable_float8_linear turns float8 on (torchtitan until 2025-02-15), not
    # [model] converters
    switch: bool = False
    # torchtitan has filter_fqns (since 2025-04-07); before, its module filter kept the output
    # projection, and only it, in bf16
    filters: bool = True
    # the 2025 [mx] section's recipe_name as the file wrote it (None: [quantize.linear.mx], or
    # no MX setup); torchtitan's [mx] took torchao's MXLinearRecipeName values
    mx_recipe: str | None = None


FLOAT8_LAYOUT = ConfigLayout()  # [model] converters and [float8] with filter_fqns (2025-04 on)


def _fail(message: str) -> F8RoofError:
    return F8RoofError(message)


# f8roof (Hugging Face) leaf names <-> torchtitan's, for the dense llama-style block and the
# output projection. torchtitan's FeedForward: w1 = gate, w3 = up, w2 = down.
_LEAVES: tuple[tuple[str, str], ...] = (
    ("self_attn.q_proj", "attention.wq"),
    ("self_attn.k_proj", "attention.wk"),
    ("self_attn.v_proj", "attention.wv"),
    ("self_attn.o_proj", "attention.wo"),
    ("mlp.gate_proj", "feed_forward.w1"),
    ("mlp.up_proj", "feed_forward.w3"),
    ("mlp.down_proj", "feed_forward.w2"),
)
_F8ROOF_BLOCK = re.compile(r"^model\.layers\.(\*|\d+(?:-\d+)?)\.(.+)$")


def to_torchtitan_fqn(fqn: str) -> str:
    """`model.layers.*.self_attn.q_proj` -> `layers.*.attention.wq` (a block index or range
    kept); `lm_head` -> `output`."""
    if fqn == "lm_head":
        return "output"
    m = _F8ROOF_BLOCK.match(fqn)
    if m:
        for ours, theirs in _LEAVES:
            if m.group(2) == ours:
                return f"layers.{m.group(1)}.{theirs}"
    raise _fail(f"no torchtitan name for layer {fqn!r}")


def filter_fqns_for(skipped: Iterable[str]) -> list[str]:
    """torchtitan's `filter_fqns` that keep these f8roof layers in bf16: the leaf path of each
    (`attention.wk`, torchtitan matches filter entries as substrings of module fqns), in block
    order, `output` first (torchtitan's default filter)."""
    leaves = {to_torchtitan_fqn(f) for f in skipped}
    out = ["output"] if "output" in leaves else []
    for _, theirs in _LEAVES:
        if any(leaf.endswith("." + theirs) for leaf in leaves):
            out.append(theirs)
    return out


# The first block index of an fqn: `*` (every block), `27`, or a range `0-26` (a split row).
_BLOCK_INDEX = re.compile(r"(^|\.)(\*|\d+(?:-\d+)?)\.")
# torchtitan's NVFP4 recipe (components/quantization, `nvfp4_bf16_tail_fqns`): the last
# ceil(15%) of the decoder blocks and the output projection stay bf16.
BF16_TAIL = "nvfp4_bf16_tail"
BF16_TAIL_FRACTION = 0.15


def _blocks_of(fqn: str, count: int) -> range | None:
    """The block indices a row covers; None for a linear outside the blocks."""
    m = _BLOCK_INDEX.search(fqn)
    if m is None:
        return None
    index = m.group(2)
    if index == "*":
        return range(count)
    first, _, last = index.partition("-")
    return range(int(first), int(last or first) + 1)


def _with_blocks(fqn: str, blocks: range | int) -> str:
    """The fqn with its block index replaced by one block or a range of them."""
    if isinstance(blocks, range):
        index = str(blocks[0]) if len(blocks) == 1 else f"{blocks[0]}-{blocks[-1]}"
    else:
        index = str(blocks)
    return _BLOCK_INDEX.sub(lambda m: f"{m.group(1)}{index}.", fqn, count=1)


def layer_type(fqn: str) -> str:
    """A split row's layer type: `model.layers.0-26.mlp.up_proj` -> `model.layers.*.mlp.up_proj`."""
    return _BLOCK_INDEX.sub(lambda m: f"{m.group(1)}*.", fqn, count=1)


# the recipes whose torchtitan configs keep the bf16 tail: NVFP4's (nvfp4_bf16_tail_fqns) and
# MXFP8's beside it in torchtitan#3914; float8's converter matches the name against no linear
BF16_TAIL_RECIPES = (NVFP4, *MX_RECIPES)


def expand_filters(
    filters: Iterable[str], *, blocks: int, recipes: Sequence[str] = (NVFP4,)
) -> tuple[str, ...]:
    """Filter entries with torchtitan's NVFP4 bf16 tail (`nvfp4_bf16_tail`) written out for a
    model of `blocks` decoder blocks: `layers.N.` for each of the last ceil(15%) and `output`.
    torchtitan lists the blocks to convert instead; as filters the same linears stay bf16.
    The tail is the NVFP4 and MX recipes' (`recipes`, those asked): refused beside a float8
    one. Every other entry as given (`""` is a substring of every fqn)."""
    out: list[str] = []
    for entry in filters:
        if entry.strip() == BF16_TAIL:
            others = [r for r in recipes if r not in BF16_TAIL_RECIPES]
            if others:
                raise _fail(
                    f"{term('filter_fqns')} {BF16_TAIL} is NVFP4's and MX's bf16 tail, not "
                    f"{term('recipe')} {', '.join(others)}'s (write out its layers.N.)"
                )
            tail = math.ceil(blocks * BF16_TAIL_FRACTION)
            if tail >= blocks:
                raise _fail(f"{BF16_TAIL} keeps all {blocks} blocks in bf16: nothing converts")
            out += [f"layers.{i}." for i in range(blocks - tail, blocks)] + ["output"]
        else:
            out.append(entry)
    return tuple(dict.fromkeys(out))


def unmatched_notes(filters: Iterable[str], fqns: Iterable[tuple[str, int]]) -> tuple[Note, ...]:
    """A note per filter entry that matches no linear (`unmatched_filters`), torchao's auto
    filter flag aside."""
    missed = unmatched_filters(filters, fqns, skip=(AUTO_FILTER,))
    return tuple(note(Topic.FILTER_MATCHES_NOTHING, entry=entry) for entry in missed)


def unmatched_filters(
    filters: Iterable[str], fqns: Iterable[tuple[str, int]], *, skip: Iterable[str] = ()
) -> list[str]:
    """The entries of `filters` that are a substring of no linear's fqn (f8roof's or
    torchtitan's, in any of its blocks): each `(fqn, count)` a layer type over `count` blocks.
    torchtitan keeps nothing in bf16 by them; `skip`: flags that are no fqn (its auto filter)."""
    rows = list(fqns)
    flags = set(skip)
    out = []
    for entry in dict.fromkeys(filters):
        if entry in flags:
            continue
        blocks = ((fqn, _blocks_of(fqn, count)) for fqn, count in rows)
        if not any(
            _one_filtered(fqn if index is None else _with_blocks(fqn, i), [entry])
            for fqn, index in blocks
            for i in (index if index is not None else (0,))
        ):
            out.append(entry)
    return out


def _one_filtered(fqn: str, filters: Sequence[str]) -> bool:
    names = [fqn]
    try:
        names.append(to_torchtitan_fqn(fqn))
    except F8RoofError:
        pass  # no torchtitan name (routed experts, other families): f8roof's name alone
    return any(entry in name for entry in filters for name in names)


def filtered(fqn: str, filters: Iterable[str], *, count: int = 1) -> bool:
    """torchtitan's rule: a linear stays bf16 when an entry of `filters` is a substring of its
    fqn, torchtitan's (`layers.27.attention.wq`, `output`) or f8roof's (`lm_head`). A row over
    several blocks (`count` of them under `*`, or a range) is filtered when each block is."""
    entries = list(filters)  # "" is a substring of every fqn, as torchtitan matches it
    if not entries:
        return False
    blocks = _blocks_of(fqn, count)
    if blocks is None:
        return _one_filtered(fqn, entries)
    return all(_one_filtered(_with_blocks(fqn, i), entries) for i in blocks)


def split_by_filters(fqn: str, count: int, filters: Sequence[str]) -> list[tuple[str, int]]:
    """A layer type over `count` blocks as rows (fqn, count) that `filters` each keep or
    convert whole: the type itself where they treat every block alike, else one row per run of
    blocks (`model.layers.0-26.self_attn.q_proj`, 27; `model.layers.27-31...`, 5)."""
    blocks = _blocks_of(fqn, count)
    if blocks is None or not filters:
        return [(fqn, count)]
    runs: list[list[int]] = []
    last = None
    for i in blocks:
        kept = _one_filtered(_with_blocks(fqn, i), filters)
        if runs and kept == last:
            runs[-1].append(i)
        else:
            runs.append([i])
        last = kept
    if len(runs) == 1:
        return [(fqn, count)]
    return [(_with_blocks(fqn, range(run[0], run[-1] + 1)), len(run)) for run in runs]


# torchtitan's NVFP4 converter (pytorch/torchtitan bcc09297a, 2026-08-05: torchtitan/components/
# quantization/nvfp4.py, on torchao's `nvfp4_mm_triton`): a Python config only, no TOML section,
# `NVFP4LinearConverter.Config(fqns=[...])` converting the linears whose config fqn contains an
# entry (an include list, unlike float8's filter_fqns; an empty one converts every linear, the
# output projection too), as its llama3 configs write it (`fqns=["layers"]`: every block
# linear; `nvfp4_bf16_tail_fqns`: `layers.0.` .. `layers.26.`). Its model configs' fqns are
# 2026's, not the module names above: `layers.N.attention.qkv_linear.wqkv` (q, k and v fused,
# llama3's `fuse_qkv=True`), `layers.N.attention.wo`, `layers.N.feed_forward.w1/w2/w3`,
# `lm_head` (torchtitan/models/common/attention.py, feed_forward.py, decoder.py at bcc09297a).
NVFP4_CONVERTER = "NVFP4LinearConverter"
NVFP4_SOURCE = "pytorch/torchtitan@bcc09297a torchtitan/components/quantization/nvfp4.py"
_NVFP4_LEAVES: dict[str, str] = {
    "self_attn.q_proj": "attention.qkv_linear",
    "self_attn.k_proj": "attention.qkv_linear",
    "self_attn.v_proj": "attention.qkv_linear",
    "self_attn.o_proj": "attention.wo",
    "mlp.gate_proj": "feed_forward.w1",
    "mlp.up_proj": "feed_forward.w3",
    "mlp.down_proj": "feed_forward.w2",
}


def nvfp4_fqns(converted: Iterable[str], kept: Iterable[str], *, blocks: int) -> list[str]:
    """NVFP4LinearConverter's `fqns` for the f8roof layers `converted` (rows of `blocks` decoder
    blocks; `kept` the others): `layers` when every block linear converts, the leaf paths
    (`feed_forward.w1`) when the same ones do in every block, else per block (`layers.27.` for
    a whole block, `layers.27.attention.wo` for one linear of it); `lm_head` when it converts.
    q, k and v are one fused linear there: it converts only where all three do. Rows without
    a torchtitan name (routed experts, other families) raise F8RoofError, as
    `to_torchtitan_fqn` does: the caller leaves them out."""
    per_block: dict[int, dict[str, bool]] = {}
    head = False
    for fqns, convert in ((converted, True), (kept, False)):
        for fqn in fqns:
            if fqn == "lm_head":
                head = head or convert
                continue
            m = _F8ROOF_BLOCK.match(fqn)
            if not m or m.group(2) not in _NVFP4_LEAVES:
                raise _fail(f"no torchtitan name for layer {fqn!r}")
            leaf = _NVFP4_LEAVES[m.group(2)]
            for i in _blocks_of(fqn, blocks) or ():
                row = per_block.setdefault(i, {})
                row[leaf] = row.get(leaf, True) and convert  # fused: all of q, k, v
    ordered = list(dict.fromkeys(_NVFP4_LEAVES.values()))
    leaves = {i: tuple(x for x in ordered if row.get(x)) for i, row in per_block.items()}
    whole = {i for i, row in per_block.items() if all(row.values())}
    out: list[str] = []
    if per_block and whole == set(per_block):
        out.append("layers")
    elif per_block and len(set(leaves.values())) == 1:
        out += next(iter(leaves.values()))
    else:
        for i in sorted(per_block):
            out += [f"layers.{i}."] if i in whole else [f"layers.{i}.{x}" for x in leaves[i]]
    if head:
        out.append("lm_head")
    return out
