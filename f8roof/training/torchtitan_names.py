"""torchtitan's names for f8roof's layers, both ways, and what to tell torchtitan.

torchtitan's llama modules: `layers.N.attention.wq/wk/wv/wo`, `layers.N.feed_forward.w1/w2/w3`
(w1 gate, w3 up, w2 down) and `output` (the lm_head); f8roof's (Hugging Face's):
`model.layers.*.self_attn.q_proj`, ..., `model.layers.*.mlp.gate_proj/up_proj/down_proj`,
`lm_head`. torchtitan matches `filter_fqns` entries as substrings of module fqns, so the leaf
path (`attention.wk`) filters that linear in every block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from f8roof.errors import F8RoofError

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")


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
_F8ROOF_BLOCK = re.compile(r"^model\.layers\.(\*|\d+)\.(.+)$")
_TITAN_BLOCK = re.compile(r"^layers\.(\*|\d+)\.(.+)$")


def to_torchtitan_fqn(fqn: str) -> str:
    """`model.layers.*.self_attn.q_proj` -> `layers.*.attention.wq`; `lm_head` -> `output`."""
    if fqn == "lm_head":
        return "output"
    m = _F8ROOF_BLOCK.match(fqn)
    if m:
        for ours, theirs in _LEAVES:
            if m.group(2) == ours:
                return f"layers.{m.group(1)}.{theirs}"
    raise _fail(f"no torchtitan name for layer {fqn!r}")


def to_f8roof_fqn(name: str) -> str:
    """A torchtitan fqn or filter entry -> f8roof's layer name: `output` -> `lm_head`,
    `layers.3.attention.wq` -> `model.layers.*.self_attn.q_proj`, and the bare leaf
    `attention.wq` (what filter_fqns lists) -> `self_attn.q_proj`, which matches as a substring
    the same layers torchtitan's does. Names already f8roof's come back unchanged."""
    name = name.strip()
    if name == "output":
        return "lm_head"
    m = _TITAN_BLOCK.match(name)
    if m:
        for ours, theirs in _LEAVES:
            if m.group(2) == theirs:
                return f"model.layers.*.{ours}"
        raise _fail(f"no f8roof layer for torchtitan fqn {name!r}")
    for ours, theirs in _LEAVES:
        if name == theirs:
            return ours
    return name


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


def filter_names(filter_fqns: Iterable[str]) -> tuple[str, ...]:
    """Filter entries as given plus their f8roof spelling, so that torchtitan's (`output`,
    `attention.wk`) and f8roof's (`lm_head`, `self_attn.k_proj`) both match f8roof's layer
    names as substrings (torchtitan's rule)."""
    out: list[str] = []
    for entry in filter_fqns:
        entry = entry.strip()
        if not entry:
            continue
        out.append(entry)
        try:
            out.append(to_f8roof_fqn(entry))
        except F8RoofError:
            pass  # a torchtitan module f8roof does not model: matches nothing of ours
    return tuple(dict.fromkeys(out))
