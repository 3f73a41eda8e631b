"""torchtitan's names for f8roof's layers, its filter rule, and what to tell torchtitan.

f8roof names layers as Hugging Face does (`model.layers.*.self_attn.q_proj`, `lm_head`), but
qwen3's by torchtitan's own 2026 modules (`layers.*.attention.qkv_linear.wq`); torchtitan names its own modules per model (`TorchtitanModel`, one per architecture family:
`layers.N.attention.wq`, `layers.N.moe.experts`, `output`), and the catalog's family (the
config.json's model_type, `Architecture.family`) says which. torchtitan matches `filter_fqns`
entries as substrings of module fqns, so the leaf path (`attention.wk`) filters that linear in
every block, and `layers.27.` every linear of block 27 (`filtered`, the one place that rule
lives). A row of f8roof's covers a layer type in `count` blocks (`model.layers.*.`); filters
naming some blocks split it into rows over block ranges (`model.layers.0-26.`,
`split_by_filters`). `printed_filters` turns an answer's decisions back into entries that keep
exactly its bf16 rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from f8roof.errors import F8RoofError, term
from f8roof.notes import Note, Topic, note
from f8roof.traffic.recipes import MX_RECIPES, NVFP4
from f8roof.training.catalog import FUSED_QKV
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


@dataclass(frozen=True)
class TorchtitanModel:
    """One of torchtitan's models: its [model] name, the source its module names were read
    from, and f8roof's path inside a block -> torchtitan's (`layers.N.` prefixes both in
    torchtitan: its blocks are a ModuleDict keyed by the block index). A routed expert's path
    is a 3D parameter of torchtitan's GroupedExperts (`moe.experts.w1`), no nn.Linear: the
    linear converter never converts it, whatever filter_fqns says. `router`: the MoE router's
    nn.Linear, which f8roof does not estimate and torchtitan's MoE configs filter."""

    name: str
    source: str
    leaves: tuple[tuple[str, str], ...]
    router: str = ""
    head: str = "output"  # the output projection's name (2026's models: `lm_head`)
    # f8roof's path -> the name an earlier torchtitan gave the same linear, which a setup
    # written for that torchtitan filters by (qwen3's before 2026-04: `attention.wq`, `output`)
    earlier: tuple[tuple[str, str], ...] = ()


# Read at pytorch/torchtitan 238fa9953 (2026-02-23), the last commit with TOML job configs
# (the next, 9810191bb #2386, moved them to Python), the module names f8roof's setup files
# meet. FeedForward is w1 = gate, w3 = up, w2 = down (silu(w1(x)) * w3(x) into w2) in every
# model; models/moe/moe.py's MoE holds `experts` (GroupedExperts: w1, w2, w3 as
# (experts, out, in) parameters), `router.gate` (nn.Linear) and `shared_experts` (that
# FeedForward, num_shared_experts x the expert width); the output projection is `output`.
TORCHTITAN_COMMIT = "pytorch/torchtitan@238fa9953"
_ATTENTION = (
    ("self_attn.q_proj", "attention.wq"),
    ("self_attn.k_proj", "attention.wk"),
    ("self_attn.v_proj", "attention.wv"),
    ("self_attn.o_proj", "attention.wo"),
)


def _swiglu(ours: str, theirs: str, names=("gate_proj", "up_proj", "down_proj")):
    gate, up, down = names
    return (
        (f"{ours}.{gate}", f"{theirs}.w1"),
        (f"{ours}.{up}", f"{theirs}.w3"),
        (f"{ours}.{down}", f"{theirs}.w2"),
    )


# torchtitan's fused q/k/v (#3714 on, training/catalog.py's FUSED_QKV): f8roof's fused row
# carries torchtitan's own name, in llama3 and qwen3 alike
_FUSED = ((FUSED_QKV, FUSED_QKV),)
LLAMA3 = TorchtitanModel(
    "llama3",
    f"{TORCHTITAN_COMMIT} torchtitan/models/llama3/model/model.py",
    _ATTENTION + _swiglu("mlp", "feed_forward") + _FUSED,
)
# Qwen3: the catalog names its rows by torchtitan's 2026-05 modules (training/catalog.py's
# `_TORCHTITAN_QWEN3`, read at pytorch/torchtitan@b64292ba1). torchtitan's float8 converter
# there swaps configs, not modules (torchtitan/components/quantization/float8.py's
# Float8LinearConverter.convert: `model_config.traverse(Linear.Config)` with the config's fqn,
# utils.py's module_filter_fn: `filter_fqn in fqn`): k and v are built from QKVLinear's one
# `wkv` config, so `attention.qkv_linear.wkv` keeps both and nothing keeps one alone. Every
# other row's config fqn is its module's; the output projection is `lm_head`. Before 2026-04
# (#2878 and #2969) qwen3 had llama3's names (`attention.wq`, `output`, at 238fa9953), which
# a setup written for it filters by. MoE blocks: models/common/moe.py's MoE, no shared experts
# in any qwen3 flavor; the router's gate is an nn.Linear (config) its MoE configs filter.
QWEN3_SOURCE = (
    "pytorch/torchtitan@b64292ba1 torchtitan/models/qwen3/__init__.py, "
    "models/common/attention.py, components/quantization/float8.py"
)
_QWEN3_LEAVES = (
    ("attention.qkv_linear.wq", "attention.qkv_linear.wq"),
    ("attention.qkv_linear.wk", "attention.qkv_linear.wkv"),
    ("attention.qkv_linear.wv", "attention.qkv_linear.wkv"),
    ("attention.wo", "attention.wo"),
    *_FUSED,
    *(
        (f"{b}.{w}", f"{b}.{w}")
        for b in ("feed_forward", "moe.experts", "moe.shared_experts")
        for w in ("w1", "w3", "w2")
    ),
)
QWEN3 = TorchtitanModel(
    "qwen3",
    QWEN3_SOURCE,
    _QWEN3_LEAVES,
    router="router.gate",
    head="lm_head",
    earlier=(
        ("attention.qkv_linear.wq", "attention.wq"),
        ("attention.qkv_linear.wk", "attention.wk"),
        ("attention.qkv_linear.wv", "attention.wv"),
        ("lm_head", "output"),
    ),
)
# Llama 4: MoE every interleave_moe_layer_step-th block (moe.*, one shared expert), the
# others FeedForward; transformers fuses the experts' gate and up (gate_up_proj: w1 and w3)
LLAMA4 = TorchtitanModel(
    "llama4",
    f"{TORCHTITAN_COMMIT} torchtitan/models/llama4/model/model.py, models/moe/moe.py",
    _ATTENTION
    + _swiglu("feed_forward", "feed_forward")
    + (
        ("feed_forward.experts.gate_up_proj", "moe.experts.w1"),
        ("feed_forward.experts.down_proj", "moe.experts.w2"),
    )
    + _swiglu("feed_forward.shared_expert", "moe.shared_experts"),
    router="router.gate",
)
# DeepSeek-V3 (and its "16B", DeepSeek-V2-Lite's dimensions): MLA's wq (q_lora_rank 0) or
# wq_a/wq_b, wkv_a (the kv latent and the rope key), wkv_b, wo; FeedForward in the first
# n_dense_layers blocks, MoE after
DEEPSEEK_V3 = TorchtitanModel(
    "deepseek_v3",
    f"{TORCHTITAN_COMMIT} torchtitan/models/deepseek_v3/model/model.py, models/moe/moe.py",
    (
        ("self_attn.q_proj", "attention.wq"),
        ("self_attn.q_a_proj", "attention.wq_a"),
        ("self_attn.q_b_proj", "attention.wq_b"),
        ("self_attn.kv_a_proj_with_mqa", "attention.wkv_a"),
        ("self_attn.kv_b_proj", "attention.wkv_b"),
        ("self_attn.o_proj", "attention.wo"),
    )
    + _swiglu("mlp", "feed_forward")
    + _swiglu("mlp.experts.*", "moe.experts")
    + _swiglu("mlp.shared_experts", "moe.shared_experts"),
    router="router.gate",
)
# Hugging Face model_type -> torchtitan's model (torchtitan/models/__init__.py at 238fa9953:
# deepseek_v3, flux, gpt_oss, llama3, llama3_ft, llama4, qwen3). None for the rest: no
# Mistral, Qwen2, Mixtral or GPT-2 model there (its experiments/transformers_modeling_backend
# trains Hugging Face's modules under their own names; dense models only at that commit).
TORCHTITAN_FAMILIES: dict[str, TorchtitanModel] = {
    "llama": LLAMA3,
    "qwen3": QWEN3,
    "qwen3_moe": QWEN3,
    "llama4": LLAMA4,
    "llama4_text": LLAMA4,
    "deepseek_v2": DEEPSEEK_V3,
    "deepseek_v3": DEEPSEEK_V3,
}


def torchtitan_model(family: str) -> TorchtitanModel | None:
    """torchtitan's model for a catalog family (a config.json's model_type); None: none."""
    return TORCHTITAN_FAMILIES.get(family)


def _every_leaf() -> dict[str, str]:
    """f8roof's path -> torchtitan's over every model: one name per path (a path means the same
    module in every family torchtitan has), so the filter rule needs no family."""
    out: dict[str, str] = {}
    for model in TORCHTITAN_FAMILIES.values():
        for ours, theirs in model.leaves:
            if out.setdefault(ours, theirs) != theirs:
                raise AssertionError(f"{ours} has two torchtitan names")
    return out


_ANY_FAMILY = _every_leaf()
# every model's names from an earlier torchtitan (one per path, as `_every_leaf`)
_EARLIER = {ours: theirs for m in TORCHTITAN_FAMILIES.values() for ours, theirs in m.earlier}
# a block's linear: f8roof's Hugging Face names (`model.layers.*.`) or torchtitan's (`layers.*.`)
_F8ROOF_BLOCK = re.compile(r"^(?:model\.)?layers\.(\*|\d+(?:-\d+)?)\.(.+)$")


def to_torchtitan_fqn(fqn: str, family: str | None = None) -> str:
    """`model.layers.*.self_attn.q_proj` -> `layers.*.attention.wq` (a block index or range
    kept), qwen3's `layers.*.attention.qkv_linear.wk` -> the `wkv` config its converter
    matches; `lm_head` -> `output` (2026's models: `lm_head`). `family`: the catalog's (None:
    any model torchtitan has, the paths agree); a family torchtitan has no model for names
    nothing."""
    model = None if family is None else torchtitan_model(family)
    if family is not None and model is None:
        raise _fail(f"torchtitan has no model for {family or 'these'} layers ({fqn!r})")
    leaves = _ANY_FAMILY if model is None else dict(model.leaves)
    if fqn == "lm_head":
        return "output" if model is None else model.head
    m = _F8ROOF_BLOCK.match(fqn)
    if m and m.group(2) in leaves:
        return f"layers.{m.group(1)}.{leaves[m.group(2)]}"
    raise _fail(f"no torchtitan name for layer {fqn!r}")


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


# torchtitan's 2026 module layout (torchtitan/models/common/attention.py, decoder.py: the
# Python model registry its qwen3 and llama3 configs build): the attention's projections under
# `attention.qkv_linear`, as `wq` and `wkv` (QKVLinear: q apart, k and v from one config) or
# `wqkv` (FusedQKVLinear), and the output projection `lm_head`. A filter entry written for it
# (the public Qwen3-14B run on 8 B200s, torchtitan's autoresearch-parallelize/
# may15-qwen3-14b-8xb200 branch: filter_fqns ["lm_head", "attention.qkv_linear.wkv"]) keeps
# the linears it names: k and v together under `wkv`, each of q, k, v under `wqkv`.
# qwen3's rows carry these names already (their `wkv` config in QWEN3's leaves); after #3714
# (2026-06-24) torchtitan fuses q, k and v of qwen3 and llama3 into `wqkv` by default.
_WQKV = FUSED_QKV
_LEAVES_2026: dict[str, tuple[str, ...]] = {
    "self_attn.q_proj": ("attention.qkv_linear.wq", _WQKV),
    "self_attn.k_proj": ("attention.qkv_linear.wkv", _WQKV),
    "self_attn.v_proj": ("attention.qkv_linear.wkv", _WQKV),
    "attention.qkv_linear.wq": (_WQKV,),
    "attention.qkv_linear.wk": (_WQKV,),
    "attention.qkv_linear.wv": (_WQKV,),
}


def _names_2026(fqn: str) -> list[str]:
    """A linear's other names: torchtitan's 2026 layout (`_LEAVES_2026`) and an earlier
    torchtitan's (`TorchtitanModel.earlier`); none for the others."""
    m = _F8ROOF_BLOCK.match(fqn)
    if m is None:
        return [_EARLIER[fqn]] if fqn in _EARLIER else []
    leaves = [*_LEAVES_2026.get(m.group(2), ()), *filter(None, [_EARLIER.get(m.group(2))])]
    return [f"layers.{m.group(1)}.{leaf}" for leaf in leaves]


def _one_filtered(
    fqn: str, filters: Sequence[str], family: str | None = None, *, every_layout: bool = True
) -> bool:
    """The rule on one linear's names: f8roof's, torchtitan's for `family` (None: any model
    torchtitan has; a family it has none for: f8roof's alone) and, with `every_layout` (a
    setup's filters, written for whichever torchtitan), torchtitan's 2026 layout's
    (`_LEAVES_2026`) and an earlier torchtitan's. Without it, the names f8roof prints."""
    names = [fqn]
    try:
        names.append(to_torchtitan_fqn(fqn, family))
        names += _names_2026(fqn) if every_layout else []
    except F8RoofError:
        pass  # no torchtitan name (a family torchtitan does not have): f8roof's name alone
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


@dataclass(frozen=True)
class PrintedFilters:
    """An answer's decisions as torchtitan's filter_fqns: the entries, the linears (f8roof's
    fqns) they keep in bf16 and those they leave to convert, by torchtitan's rule, and notes on
    what filter_fqns cannot say (routed experts, a model torchtitan does not have, a linear no
    substring keeps alone)."""

    filter_fqns: tuple[str, ...]
    kept: tuple[str, ...]
    converted: tuple[str, ...]
    notes: tuple[Note, ...] = ()


def _entry(
    fqn: str, leaves: dict[str, str] | None, block: int | None = None, head: str = "output"
) -> str:
    """The entry naming this row: its path inside the block (`attention.wk`, every block) or
    with the block (`layers.27.attention.wk`), torchtitan's where it has the model, else
    f8roof's; `head` (`lm_head` without a model) and a linear outside the blocks whole."""
    if fqn == "lm_head":
        return head if leaves is not None else fqn
    m = _BLOCK_INDEX.search(fqn)
    if m is None:
        return fqn
    if leaves is None:
        return fqn[m.end() :] if block is None else _with_blocks(fqn, block)
    rest = fqn[m.end() :]
    if rest not in leaves:
        raise _fail(f"no torchtitan name for layer {fqn!r}")
    return leaves[rest] if block is None else f"layers.{block}.{leaves[rest]}"


def _per_block(fqn: str, count: int) -> list[str]:
    """A row as one fqn per block (itself outside the blocks)."""
    blocks = _blocks_of(fqn, count)
    return [fqn] if blocks is None else [_with_blocks(fqn, i) for i in blocks]


def _kept(fqn: str, count: int, entries: Sequence[str], family: str) -> bool:
    """`filtered` in `family`'s names as f8roof prints them: every block of the row."""
    return all(
        _one_filtered(name, entries, family, every_layout=False) for name in _per_block(fqn, count)
    )


def _hits(rows: Sequence[tuple[str, int]], entries: Sequence[str], family: str) -> list[str]:
    """The rows of which `entries` filter at least one block, in `family`'s printed names."""
    return [
        fqn
        for fqn, count in rows
        if any(
            _one_filtered(name, entries, family, every_layout=False)
            for name in _per_block(fqn, count)
        )
    ]


def printed_filters(
    fqns: Iterable[str],
    counts: Iterable[int],
    converts: Iterable[bool],
    grouped: Iterable[bool],
    *,
    family: str,
    setup_filters: Sequence[str] | None = None,
    moe_fqns: Sequence[str] = (),
) -> PrintedFilters:
    """torchtitan's filter_fqns keeping in bf16 exactly the linears an answer keeps (`converts`
    False per row; rows as the answer's, `count` blocks each), after the setup's own entries:
    each kept linear's path in the block where it filters no converted one, else per block;
    the output projection first, then in the rows' order. Routed experts (`grouped`) are 3D
    parameters the linear converter never converts: a note says what torchtitan does with them
    (`moe_fqns`: the setup's grouped-gemm converter entries). For an MoE model torchtitan has,
    its router's nn.Linear (not estimated) is filtered as torchtitan's MoE configs do."""
    model = torchtitan_model(family)
    leaves = dict(model.leaves) if model is not None else None
    rows = list(zip(fqns, (int(c) for c in counts), map(bool, converts), map(bool, grouped)))
    linears = [(f, c) for f, c, _, g in rows if not g]
    wanted = [(f, c) for f, c, v, g in rows if not g and v]
    entries = list(setup_filters or ())
    notes: list[Note] = []
    if model is None and family:
        notes.append(note(Topic.TORCHTITAN_NO_MODEL, family=family))
    kept = sorted((r for r in rows if not r[3] and not r[2]), key=lambda r: r[0] != "lm_head")
    inexact: dict[str, list[str]] = {}
    for fqn, count, _, _ in kept:
        if _kept(fqn, count, entries, family):
            continue  # the setup's own entries keep it, in this model's names
        head = model.head if model is not None else "output"
        whole = _entry(fqn, leaves, head=head)
        if not _hits(wanted, [whole], family):
            entries.append(whole)
            continue
        each = [_entry(fqn, leaves, i, head) for i in _blocks_of(fqn, count) or ()] or [whole]
        entries += each
        caught = _hits(wanted, each, family)
        if caught:
            inexact[fqn] = caught
    experts = [(f, v) for f, _, v, g in rows if g]
    if model is not None and model.router and experts and model.router not in entries:
        entries.append(model.router)
        notes.append(note(Topic.TORCHTITAN_ROUTER, entry=model.router, source=model.source))
    if experts:
        decisions = {v for _, v in experts}
        decision = "mixed" if len(decisions) > 1 else ("convert" if True in decisions else "keep")
        converting = any(any(m in f for m in moe_fqns) for f, _ in experts)
        notes.append(
            note(
                Topic.TORCHTITAN_EXPERTS,
                decision=decision,
                module="moe.experts" if model is not None else "",
                setup_converts=converting,
                source=model.source if model is not None else "",
            )
        )
    if inexact:
        notes.append(
            note(
                Topic.FILTER_INEXACT,
                kept=list(inexact),
                converted=sorted({f for caught in inexact.values() for f in caught}),
            )
        )
    entries = list(dict.fromkeys(entries))
    held = [_kept(f, c, entries, family) for f, c in linears]
    return PrintedFilters(
        tuple(entries),
        kept=tuple(f for (f, _), k in zip(linears, held) if k),
        converted=tuple(f for (f, _), k in zip(linears, held) if not k),
        notes=tuple(notes),
    )


# Quantized routed experts at expert parallelism 1 (issue #55). torchtitan's grouped-gemm
# converters (components/quantization/float8.py, mx.py) swap the experts' token dispatcher for
# TorchAOTokenDispatcher (`swap_token_dispatcher`, components/quantization/utils.py), which pads
# each expert's token group to the quantized grouped gemm's multiple (16 float8, 32 MXFP8):
# - from #3127 (6348d93d1, 2026-04-27, quantization on the config) an EP 1 run's
#   LocalTokenDispatcher is refused there ("MoE quantization requires a token dispatcher that
#   handles padding ... Enable expert parallelism or use a compatible comm backend");
# - from #3125 (20628f4e9, 2026-04-28) every MoE model takes AllToAllTokenDispatcher, local at
#   EP 1, but TorchAOTokenDispatcher.dispatch raises ValueError when `ep_mesh is None`:
#   "TorchAOTokenDispatcher requires expert parallelism (ep_mesh must be set). Quantized
#   grouped GEMMs need padded token groups, which requires EP>1.";
# - from #3935 (c95b211bc, 2026-07-20, "mxfp8 moe: enable ep=1", for float8 and MX alike) it
#   pads locally at EP 1 (`permute_and_pad` at ep_degree 1), as torchtitan still does at
#   b5bcd76c6 (2026-08-21).
# f8roof answers for today's torchtitan (NVFP4's converter above is 2026-08's), so converted
# experts at EP 1 stay converted; a setup file cannot say which torchtitan wrote it (the
# window's configs and today's share one layout), so the answer says when torchtitan refused.
EP1_EXPERTS_SOURCE = (
    "pytorch/torchtitan#3127 (6348d93d1) and #3125 (20628f4e9): refused at EP 1 from "
    "2026-04-27; #3935 (c95b211bc, 2026-07-20): TorchAOTokenDispatcher pads locally at EP 1 "
    "(torchtitan/models/common/token_dispatcher.py, components/quantization/utils.py)"
)


def experts_at_ep1(ep: int, *, choice: bool, setup: bool) -> Note | None:
    """The note for routed experts converted at expert parallelism 1 (`choice`: f8roof's
    decisions convert them; `setup`: the setup's grouped-gemm converter names them), which
    torchtitan refused from 2026-04-27 until 2026-07-20; None at EP above 1 or with none
    converted."""
    if ep != 1 or not (choice or setup):
        return None
    return note(Topic.EXPERTS_AT_EP1, by="choice" if choice else "setup", source=EP1_EXPERTS_SOURCE)


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
    # qwen3's rows, named by torchtitan's modules (QWEN3)
    "attention.qkv_linear.wq": "attention.qkv_linear",
    "attention.qkv_linear.wk": "attention.qkv_linear",
    "attention.qkv_linear.wv": "attention.qkv_linear",
    FUSED_QKV: "attention.qkv_linear",
    "attention.wo": "attention.wo",
    "feed_forward.w1": "feed_forward.w1",
    "feed_forward.w3": "feed_forward.w3",
    "feed_forward.w2": "feed_forward.w2",
}


def nvfp4_fqns(converted: Iterable[str], kept: Iterable[str], *, blocks: int) -> list[str]:
    """NVFP4LinearConverter's `fqns` for the f8roof layers `converted` (rows of `blocks` decoder
    blocks; `kept` the others): `layers` when every block linear converts, the leaf paths
    (`feed_forward.w1`) when the same ones do in every block, else per block (`layers.27.` for
    a whole block, `layers.27.attention.wo` for one linear of it); `lm_head` when it converts.
    q, k and v are one fused linear there: it converts only where all three do. Rows it has
    no name for (other families' linears) are left out."""
    per_block: dict[int, dict[str, bool]] = {}
    head = False
    for fqns, convert in ((converted, True), (kept, False)):
        for fqn in fqns:
            if fqn == "lm_head":
                head = head or convert
                continue
            m = _F8ROOF_BLOCK.match(fqn)
            if not m or m.group(2) not in _NVFP4_LEAVES:
                continue
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
