"""Every sentence an answer's records stand for: one template per `Topic` of f8roof.notes, the
provenance line, the run's one-line description and a layer row's note. The library returns
records; this module words them, so a table, a --out file and a script say the same."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from f8roof.engine.resolve import Gemms, Provenance, Times
from f8roof.engine.sharded import NoBlock
from f8roof.notes import Note, Topic
from f8roof.training.run_config import Recompute, RunConfig

# torchtitan's TOML job configs (2024 to 2026-02) left [float8] recipe_name None: torchao's
# Float8LinearConfig(), tensorwise; its Python Float8LinearConverter (6348d93d1, #3127,
# 2026-04-27) defaults to rowwise, the recipe --recipe float8 names
_TOML_RECIPE = (
    "None, torchao's tensorwise, in the TOML layouts; torchtitan's 2026 Python "
    "Float8LinearConverter defaults to rowwise"
)
# a key left out of a setup file -> what torchtitan's default means
SETUP_DEFAULTS = {
    "data_parallel_shard_degree": "FSDP over the rest of the ranks",
    "activation_checkpoint.mode": "per-op or layer SAC, as selective_ac_option says",
    "selective_ac_option": "layer SAC: every 2nd block checkpointed whole",
    "float8.recipe_name": _TOML_RECIPE,
    "quantize.linear.float8.recipe_name": _TOML_RECIPE,
    "float8.filter_fqns": "every nn.Linear in float8, the output projection too",
}


def _nth(n: int) -> str:
    """2 -> '2nd', 3 -> '3rd', 11 -> '11th'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _as_converted(v) -> str:
    if v["torchtitan_default"]:
        kept = (
            f"filter_fqns {v['filters']} (the output projection, as torchtitan's configs keep it)"
        )
    else:
        kept = f"filter_fqns {v['filters']}" if v["filters"] else "filter_fqns [] (none)"
    if v["auto_recipe"]:
        kept += f", with torchao's auto filter for {v['auto_recipe']} on whole weights"
    experts = {
        "none": "",
        "converted": f"; routed experts in float8 rowwise (moe_fqns_prototype {v['moe']})",
        "kept": "; routed experts (3D parameters, no nn.Linear) stay bf16: torchtitan converts "
        "them only where moe_fqns_prototype or a [quantize.grouped_mm] converter names them",
    }[v["experts"]]
    return f"float8 as torchtitan converts it: every nn.Linear but {kept}{experts}"


def _torchtitan_experts(v) -> str:
    """The routed experts under the printed converter config: 3D parameters (torchtitan's
    GroupedExperts), which filter_fqns never reach."""
    if not v["module"]:
        return (
            "routed experts: torchtitan has no model of them, so no converter line places them; "
            f"f8roof would {v['decision']} them"
        )
    where = f"routed experts ({v['module']}: 3D parameters, no nn.Linear): filter_fqns never "
    where += "converts them"
    if v["decision"] == "keep":
        drop = ": drop [quantize.grouped_mm.float8]" if v["setup_converts"] else ""
        return f"{where}; f8roof keeps them bf16{drop}"
    if v["decision"] == "mixed":
        return (
            f"{where}, and the grouped-gemm converter converts a layer's w1, w2 and w3 together, "
            "where f8roof converts only some: no converter line for them here"
        )
    return (
        f'{where}; f8roof converts them: [quantize.grouped_mm.float8] fqns = ["experts"] '
        "(float8 rowwise grouped gemms)"
    )


def block_key(block: dict) -> str:
    """'llama3-8b TP 8, recompute none, tensorwise, one sequence per rank' (a BlockKey's or a
    compiled block's fields)."""
    text = f"{block['architecture']} TP {block['tp']}"
    if "fsdp" in block:
        text += f", FSDP {block['fsdp']}"
    text += f", recompute {block['recompute']}, {block['recipe']}"
    if block.get("float8_all_gather"):
        text += ", float8 all-gather"
    if block["recipe"] == "rowwise" and "emulate_precision_casts" in block:
        with_it = "with" if block["emulate_precision_casts"] else "without"
        text += f", {with_it} emulate_precision_casts"
    if "several_sequences" in block:
        text += ", several sequences" if block["several_sequences"] else ", one sequence"
        text += " per rank"
    return text


NO_BLOCK = {
    NoBlock.NO_FILE: "no shipped sharded block file",
    NoBlock.NOT_BUILTIN: "no shipped sharded block for {model} (they are built-in models')",
    NoBlock.NO_FIT: "no shipped sharded block for {block}",
    NoBlock.FIT_FAILS: "the shipped sharded block for {block} does not hold here: {error}",
    NoBlock.MOE: "MoE blocks are not compiled yet",
    NoBlock.MIXED_RECIPES: "the block mixes recipes ({recipes})",
    NoBlock.NO_CALIBRATION: "timing a block's kernels needs a calibration",
    NoBlock.NOT_TORCHAO: "the sharded block is torchao's Float8Linear, not --impl {implementation}",
    NoBlock.FUSED_QKV: (
        "the sharded blocks run q, k and v as three linears, and the separate layout's rows "
        "do not pair with the fused ones here"
    ),
}


def _no_block(v) -> str:
    values = {k: (", ".join(x) if isinstance(x, list) else x) for k, x in v.items()}
    if "block" in v:
        values["block"] = block_key(v["block"])
    # over the bf16 graphs only the float8 side is per layer (FLOAT8_BY_LAYERS says how)
    what = "no float8 graphs: " if v.get("on_bf16_graphs") else "blocks from the per-layer fits: "
    return what + NO_BLOCK[NoBlock(v["why"])].format(**values)


def _blocks_from(v) -> str:
    layout = f"{v['sequences']} x {v['seq_len']} tokens per rank"
    if not v["seq_len_given"]:
        layout += " (no seq_len given: the longest sequences up to 8192 that divide the tokens)"
    key = block_key(v["block"])
    if v["compiled"]:
        return f"blocks from one block compiled for {key} at {layout}, codegen for {v['gpu']}"
    stack = v["stack"]
    return (
        f"blocks from the shipped sharded block for {key} at {layout} (piecewise affine in "
        f"tokens through compiles at {', '.join(map(str, v['knots']))}; against fresh compiles "
        f"at {', '.join(map(str, v['checked']))}: bytes within {v['bytes_error']:.1%}, block time "
        f"within {v['time_error']:.1%}; compiled with torch {stack.get('torch')}, torchao "
        f"{stack.get('torchao')}, codegen for {stack.get('gpu')})"
    )


def _tp_comm(v) -> str:
    what = (
        "the collectives the compiled graphs hold"
        if v["from_graphs"]
        else "sequence-parallel all-gathers/reduce-scatters of tokens x hidden"
    )
    overlap = (
        "async TP: each beside the gemm it feeds or drains, (TP - 1) / TP of that gemm hiding "
        "it; a fused reduce-scatter then sums its partials (one pass over the output)"
        if v["async_tp"]
        else "exposed (no async TP)"
    )
    return f"TP {v['tp']}: {what}, {v['placement']}-node, {overlap}"


def _async_tp_gathers(v) -> str:
    what, why = (
        ("tensorwise's float8 all-gathers (mid-2025 runs show it)", "a detach before their cat")
        if v["why"] == "tensorwise"
        else ("all-gathers at one sequence per rank", "two reshapes before their gemm")
    )
    return (
        f"async TP: {what} hidden beside their gemms as Inductor's pass is written; torch "
        f"2.13 + torchao 0.18 leave them plain ({why}): a longer step there"
    )


def _full_recompute(v) -> str:
    if v["every"] > 1:
        return (
            f"recompute full on every {_nth(v['every'])} block (torchtitan's layer SAC, "
            f"selective_ac_option = '{v['every']}'): those blocks' linears but the output "
            "projection run their forward gemm and forward float8 overhead again in the "
            "backward, in both precisions (included above as the mean over all blocks); "
            "lm_head is not checkpointed"
        )
    return (
        "recompute full: every block linear but the output projection (no backward reads its "
        "output) runs its forward gemm and forward float8 overhead again in the backward, in "
        "both precisions (included above); lm_head, "
        "outside the blocks, is not checkpointed"
    )


TEMPLATES: dict[Topic, Callable[[dict], str]] = {
    Topic.SETUP_DEFAULT: lambda v: (
        f"setup: {v['key']} not set: torchtitan's default {v['value']!r} "
        f"({SETUP_DEFAULTS.get(v['key'], 'its JobConfig default')})"
    ),
    Topic.SETUP_STRING_LIST: lambda v: (
        f"setup: {v['key']} = {v['value']!r} in [{v['section']}] is a string: read as "
        f"{v['read']!r}, split at commas as torchtitan splits it"
    ),
    Topic.SETUP_EARLIER_LAYOUT: lambda v: (
        f"setup: read in the layout of {v['layout']}: parallel degrees in [training], the rest "
        "in [experimental], pipeline microbatches counted (by default the pipeline degree), "
        "the output projection kept in bf16 as torchtitan then kept it"
    ),
    Topic.TE_STACK: lambda v: (
        f"--impl te: Transformer Engine's float8 linears ({', '.join(v['recipes'])}; kernels "
        f"read off TE@{v['commit'][:8]}: te.LayerNormLinear after a norm, te.Linear elsewhere, "
        "each weight cast once per step, reused by its later microbatches) in the step f8roof "
        "models: the layout, communication, attention and recompute are torchtitan's, not "
        "Megatron's"
    ),
    Topic.NOT_COMPILED: lambda v: (
        "setup: the setup does not compile (training.compile false): its times are the "
        "compiled run's (f8roof models torch.compile's kernels), its memory the eager run's"
    ),
    Topic.CONVERTER_OFF: lambda v: (
        "setup: [model] converters turns no float8 converter on, so this setup converts "
        "nothing: f8roof answers what float8 would give, as torchtitan converts with it on"
    ),
    Topic.FLOAT8_ALL_GATHER_UNUSED: lambda v: (
        f"setup: [{v['section']}] enable_fsdp_float8_all_gather does nothing at "
        "data_parallel_shard_degree 1 (FSDP off): weights are not gathered, so left out"
    ),
    Topic.FILTER_MATCHES_NOTHING: lambda v: (
        f"filter_fqns entry {v['entry']!r} is a substring of no linear's fqn (torchtitan's or "
        "f8roof's): it keeps nothing in bf16"
    ),
    Topic.ACCUMULATION_UNKNOWN: lambda v: (
        f"setup: global_batch_size {v['total']} beside data_parallel_shard_degree -1: the "
        "data-parallel ranks are unknown, so one forward/backward pass per step is assumed "
        "([f8roof] gpus gives torchtitan's gradient accumulation)"
    ),
    Topic.IMPLAUSIBLE: lambda v: (
        f"{v['column']} {v['value']:.2f} at {'x'.join(map(str, v['shape']))} exceeds "
        f"{v['bound']:.2f}, what float8 gemms at the part's peaks allow: the times behind it "
        f"are not a GPU's ({v['gpu']})"
    ),
    Topic.BREAKEVEN_EXTRAPOLATED: lambda v: (
        f"fitted breakeven {v['size']} lies below the smallest calibrated dimension "
        f"({v['smallest']}): extrapolated, not measured"
    ),
    Topic.VERSIONS_DIFFER: lambda v: (
        f"the calibration's code came from other versions: {v['mismatch']}"
    ),
    Topic.DEFAULT_IMPLEMENTATION: lambda v: (
        f"implementation: {v['implementation']} (the default here; --impl)"
    ),
    Topic.READ_OFF: lambda v: f"{v['recipe']}: kernels read off torchao's code, not compiled here",
    Topic.BYTES_DISAGREE: lambda v: f"bytes disagree: {v['key']}: {v['detail']}",
    Topic.BUDGET_SPENT: lambda v: (
        f"budget of {v['budget_s']:.0f} s spent: fitted on {v['fitted']} of {v['shapes']} shapes; "
        f"checkpoint kept at {v['checkpoint']} (--resume)"
    ),
    Topic.LEFT_OUT: lambda v: f"{' and '.join(v['modules'])} left out",
    Topic.CONFIG_DEFAULTS: lambda v: (
        f"{', '.join(v['keys'])} absent: {v['config']} defaults "
        f"({', '.join(map(str, v['values']))})"
    ),
    Topic.QK_NORM: lambda v: (
        f"{' and '.join(v['modules'])}: an RMSNorm per head between the projections and "
        "attention, no linear's input (the linears' contexts are as without them)"
    ),
    Topic.TORCHTITAN_NO_MODEL: lambda v: (
        f"torchtitan has no {v['family'] or 'native'} model: filter_fqns in f8roof's names "
        "(Hugging Face's, the module names torchtitan's transformers_modeling_backend keeps)"
    ),
    Topic.TORCHTITAN_EXPERTS: _torchtitan_experts,
    Topic.TORCHTITAN_ROUTER: lambda v: (
        f"{v['entry']}: the MoE router's nn.Linear, which f8roof does not estimate, kept bf16 "
        "as torchtitan's MoE configs keep it"
    ),
    Topic.EXPERTS_AT_EP1: lambda v: (
        "routed experts in float8 at expert parallelism 1 ("
        + {"choice": "f8roof converts them", "setup": "the setup's converter names them"}[v["by"]]
        + "): torchtitan runs them there since #3935 (2026-07-20), its TorchAOTokenDispatcher "
        "padding each expert's tokens locally; a torchtitan from #3127 (2026-04-27) until then "
        "refuses it (ValueError: 'TorchAOTokenDispatcher requires expert parallelism (ep_mesh "
        "must be set)'): there, set expert_parallel_degree above 1 or keep them bf16"
    ),
    Topic.FILTER_INEXACT: lambda v: (
        f"no filter_fqns entry keeps {', '.join(v['kept'])} in bf16 without "
        f"{', '.join(v['converted'])} (torchtitan matches entries as substrings): kept too"
    ),
    Topic.NOT_IN_TP_PLAN: lambda v: (
        "not in the TP plan, replicated under --tp (pass tp_plan to say): " + ", ".join(v["layers"])
    ),
    Topic.TP_SHARDS: lambda v: (
        f"TP {v['tp']}: each GPU runs its shard (column-parallel: N / {v['tp']}, row-parallel: "
        f"K / {v['tp']}, replicated: whole) at M = all the tokens (sequence parallel all-gathers "
        "them); TP communication is not in these times (the step summary models it)"
    ),
    Topic.FSDP_GATHERED: lambda v: (
        "FSDP: weights are all-gathered before use, so gemm shapes are the ones above; "
        "all-gather and reduce-scatter time are not in these times (the step summary models "
        "them when the FSDP degree is known: --fsdp N or --setup)"
    ),
    Topic.FSDP_OFF: lambda v: (
        "FSDP 1: one rank holds every weight, so FSDP is off (torchtitan's "
        "data_parallel_shard_degree = 1); nothing is all-gathered or reduce-scattered"
    ),
    Topic.FULL_RECOMPUTE: _full_recompute,
    Topic.SELECTIVE_IN_STEP: lambda v: (
        "recompute selective: torchtitan's per-op SAC is not in these times; the step summary "
        "adds what it reruns (every second linear's forward gemm, float8 casts)"
    ),
    Topic.AS_CONVERTED: _as_converted,
    Topic.NO_BLOCK: _no_block,
    Topic.BLOCKS_FROM: _blocks_from,
    Topic.GRAPH_PARTS: lambda v: (
        "each block's gemms, kernels and recompute as its graphs hold them (attention, an extern "
        "kernel there, timed by its FLOPs)"
    ),
    Topic.NO_FLOAT8_BLOCK: lambda v: "no block linear in float8: the float8 block is the bf16 one",
    Topic.KEPT_CORRECTED: lambda v: (
        "block linears kept in bf16 corrected from the all-float8 graph by their per-layer "
        f"difference; of its extra TP collectives the converted ones own {v['linears']:.0%} "
        f"(by linears: each adds its own scale all-reduces), of its extra recompute "
        f"{v['casts']:.0%} (by per-layer float8 overhead: SAC reruns their casts)"
    ),
    Topic.FLOAT8_BY_LAYERS: lambda v: (
        "bf16 blocks from the shipped bf16 graphs (one bf16 step for every recipe); with no "
        "float8 graphs, float8 blocks are those graphs plus each linear's per-layer difference"
    ),
    Topic.FUSED_QKV_MOVED: lambda v: (
        "q, k and v fused (torchtitan's wqkv): the sharded block's graphs run them as three "
        "linears, so each part is the separate layout's, converted alike, moved by what one "
        "wqkv changes in the per-layer rows (one input cast, one gemm of their width, per-op "
        "SAC's every-second-mm rule over one mm fewer)"
    ),
    Topic.EP_ALL_TO_ALL: lambda v: (
        f"EP {v['ep']}: each MoE layer's token dispatch and combine, all-to-alls of "
        f"{v['mb']:.1f} MB (tokens x top {v['top_k']} x hidden, bf16) at {v['ms']:.2f} ms each "
        f"({v['placement']}), {v['per_layer']:g} a MoE layer (forward and backward, and what "
        "full AC reruns), exposed and the same in both precisions (torchtitan's float8 and MXFP8 "
        "experts dispatch bf16: torchao's MXFP8 all-to-all is not wired in)"
    ),
    Topic.SELECTIVE_SAC: lambda v: (
        "selective: torchtitan's per-op SAC compiled into the block (its 2025-05 and 0.3.0 "
        "lists decide a dense llama block alike, float8 gemms reaching SAC as aten.mm)"
        if v["compiled"]
        else "selective: torchtitan's per-op SAC; float8 casts rerun in the backward (not in "
        "the save list)"
    ),
    Topic.ATTENTION: lambda v: (
        f"attention: {v['ms']:.2f} ms per block (FlashAttention-2's causal efficiency on H100 at "
        f"S = {v['seq_len']} relative to this part's bf16 gemms, {v['heads']} heads of "
        f"{v['head_dim']}), the same in both precisions"
        + ("; full AC reruns its forward" if v["recomputed"] else "")
    ),
    Topic.NO_ATTENTION: lambda v: "attention: no output projection with heads known, not timed",
    Topic.NO_FABRIC: lambda v: (
        f"communication not modelled: {v['gpu']} has no GPU-to-GPU fabric f8roof knows (a PCIe "
        "card, or a GPU without a preset)"
    ),
    Topic.TP_FLOAT8_GATHER: lambda v: (
        "tensorwise TP: forward inputs all-gathered in float8 (torchao's TP plan)"
    ),
    Topic.TP_COMM: _tp_comm,
    Topic.ASYNC_TP_GATHERS: _async_tp_gathers,
    Topic.FSDP_UNKNOWN: lambda v: "FSDP degree unknown (--fsdp): its communication is not modelled",
    Topic.FSDP_COMM: lambda v: (
        f"FSDP {v['degree']}: weights all-gathered "
        + ("in float8 (tensorwise) " if v["float8"] else "in bf16 ")
        + f"and gradients reduce-scattered, {v['placement']}-node, overlapped with the "
        "block's compute; first gather and last reduce-scatter exposed, and each gather's "
        "copy into the unsharded parameters (on the compute stream)"
    ),
    Topic.OTHER_LINEARS: lambda v: (
        "linears outside the blocks other than lm_head counted with lm_head: "
        + ", ".join(v["fqns"])
    ),
    Topic.LM_HEAD_BF16: lambda v: "lm_head (torchtitan's output) stays bf16 in this step",
    Topic.MODELLED_STEP: lambda v: (
        "modelled step (no measured step; pass --step-ms): every part modelled, "
        f"{v['outside_ms']:.1f} ms of it outside the blocks (embedding, loss, optimizer)"
    ),
    Topic.RECONCILED: lambda v: (
        f"the measured bf16 step ({v['measured_ms']:.1f} ms) is {abs(v['gap']):.0%} "
        f"{'longer' if v['gap'] >= 0 else 'shorter'} than the modelled one "
        f"({v['modelled_ms']:.1f} ms): the gap is spread over every part in proportion; the "
        "band spans it all on the linears or all on what float8 leaves alone"
    ),
    Topic.OUTSIDE_BLOCKS: lambda v: (
        f"outside the blocks: embedding, final norm and {v['loss']}"
        + (" over logits gathered from the TP ranks" if v["gathered"] else "")
        + " at their bytes; fused "
        f"AdamW and gradient clipping over {v['params_per_gpu'] / 1e9:.3g}B parameters per GPU"
        + (", float8 scales precomputed once per step" if v["precompute"] else "")
    ),
    Topic.SHARED_INPUT_CAST: lambda v: (
        (
            "per-layer fits: gate and up (q, k and v are one fused wqkv) cast their shared input "
            "once"
            if v.get("fused_qkv")
            else "per-layer fits: q, k and v (and gate and up) cast their shared input once"
        )
        + ", as a compiled block does; the others' overhead less the input's share of the "
        "seed's passes"
    ),
    Topic.FULL_AC_GRAPHS: lambda v: (
        "full AC: the block's graphs without checkpointing, its forward graph (kernels, "
        "gemms, TP collectives, attention; not the output projection's gemm and "
        f"reduce-scatter) run again in the backward for {v['share']:.0%} of the blocks"
    ),
    Topic.PIPELINE: lambda v: (
        f"pipeline: {v['degree']} ranks, {v['schedule']} with {v['stages_per_rank']} stage(s) "
        f"each, {v['microbatches']} microbatches of {v['tokens']} tokens; each rank idles "
        f"{v['bubble']:.3g} microbatch times (p - 1 over the stages per rank, Narayanan et al. "
        f"2021) and waits on {v['sends']} sends of {v['send_ms']:.3g} ms ({v['placement']}-node) "
        "while the pipeline fills and drains; stages balanced as torchtitan splits them; FSDP "
        f"gathers and reduce-scatters once per {v['per']}; peak memory the larger of the "
        "first rank's (the embedding, the schedule's microbatches in flight) and the last's "
        "(lm_head and the loss)"
    ),
    Topic.ACCUMULATION: lambda v: (
        f"gradient accumulation: {v['passes']} forward/backward passes of {v['tokens']} tokens "
        "and one optimizer step per step; FSDP gathers and reduce-scatters in every pass "
        "(torchtitan leaves FSDP2's gradient sync on), and the sharded fp32 gradients stay "
        "allocated from the first pass on"
    ),
    Topic.CONTEXT_PARALLEL: lambda v: (
        f"context parallel {v['degree']}: each sequence of {v['seq_len']} tokens in "
        f"load-balanced causal chunks over {v['degree']} ranks (the linears run a rank's "
        f"share, attention its queries against every key); keys and values exchanged by "
        f"{v['rotate']} ({v['gather_ms']:.3g} ms exposed a block forward, "
        f"{v['placement']}-node), their gradients reduce-scattered, gathered again where a "
        "checkpoint reruns; FSDP shards over the CP ranks too"
    ),
    Topic.FSDP_SCHEDULE: lambda v: (
        f"FSDP2 schedule: gradients reduce-scattered in {v['reduce_dtype']}, "
        f"reshard after forward {v['reshard']}"
        + (f", HSDP all-reduce over {v['replicate']} replicas" if v["replicate"] > 1 else "")
        + f"; inter-node collectives on {v['nics_per_node']} NIC(s) per group per node"
        + f" at {v['nic_gbps']:g} Gb/s each; backward compute includes its recompute"
    ),
    Topic.MEMORY_ASSUMED: lambda v: (
        "peak memory: the caching allocator's reserved peak (torchtitan's memory line), its "
        "rules (expandable segments, blocks kept per stream) run over one step's allocations "
        "at the size torchtitan's llama blocks, FSDP2 and the loss allocate them; "
        f"{v['runtime_gib']:.0f} GiB kept free for the CUDA context and NCCL's buffers"
    ),
}


def sentence(note: Note) -> str:
    """The note in words."""
    return TEMPLATES[note.topic](dict(note.values))


# --- the provenance line --------------------------------------------------------------------


def provenance_line(p: Provenance, what: str = "") -> str:
    """One line: what the numbers rest on (`what`: the recipes they are for), short enough
    for a terminal."""
    times = {
        Times.MEASURED: f"measured on {p.measured_on}",
        Times.PUBLIC: _public_times(p),
        Times.DATASHEET: "datasheet times (band unchecked: assumed ranges)",
        Times.DATASHEET_ONLY: "datasheet timing, no calibration (worst and ideal overheads)",
        Times.ROOFLINE: "the seed's rooflines, no calibration",
    }[p.times]
    where = f"{p.gpu} {what}".rstrip()
    if p.calibration:
        where += f" ({'shipped ' if p.shipped else ''}{p.calibration})"
    gemms = ""
    if p.gemms is Gemms.TABLE:
        gemms = f"; gemms from {p.gemm_table}"
    elif p.gemms is Gemms.EFFICIENCY:
        gemms = f"; gemms at {p.gemm_efficiency:.0%} of peak"
    elif p.gemms is Gemms.BORROWED:
        gemms = "; gemms at H100 SXM's fractions (none published for this part)"
    elif p.carried:
        gemms = f"; {', '.join(p.carried)} gemms at H100 SXM's fractions (carried over)"
    if p.assumed:
        taken = ", ".join(f"{family} from {like}" for family, like in p.assumed)
        gemms += f"; {taken} (no public sweep)"
    missing = f"; {', '.join(p.missing)} not in the shipped file" if p.missing else ""
    return f"{where}: {times}{gemms}{missing}"


def _public_times(p: Provenance) -> str:
    """What public times rest on for this part: the part the fit's float8 linears ran on, and
    the cross-validated error where it applies."""
    if p.gpu == p.fitted_on or not p.fitted_on:
        return (
            f"times fitted to public data (CV error {p.cv_median:.1%}, "
            f"{p.band_coverage:.0%} of held-out cells in its band)"
        )
    if p.transferred:
        return (
            f"times fitted on {p.fitted_on}, transferred to {p.gpu} by its datasheet "
            "(not cross-validated on this architecture; --show-all)"
        )
    return f"times fitted on {p.fitted_on}, scaled to {p.gpu} by its datasheet (unchecked here)"


def provenance_lines(p: Provenance) -> list[str]:
    """Every fact behind the provenance line (--show-all)."""
    lines = [f"gpu: {p.gpu}", f"times: {p.times.value}", f"gemms: {p.gemms.value}"]
    if p.calibration:
        lines.append(f"calibration: {'shipped ' if p.shipped else ''}{p.calibration}")
    if p.stack:
        versions = ", ".join(f"{k} {v}" for k, v in p.stack.items())
        lines.append(f"traffic from generated code: {versions}, codegen for {p.codegen_gpu}")
    if p.measured_on:
        lines.append(f"measured on {p.measured_on}")
    if not math.isnan(p.cv_median):
        lines.append(
            f"public time model: heatmap cross-validated median error {p.cv_median:.1%}, "
            f"{p.band_coverage:.1%} of held-out cells inside the band"
        )
    elif p.fitted_on:
        lines.append(
            f"public time model: fitted on {p.fitted_on}, scaled to {p.gpu} by its datasheet; "
            f"no cross-validated error on {p.gpu}"
        )
        if p.transferred:
            lines.append(
                f"public time model on {p.gpu}: Hopper's kernel model transferred by the "
                "datasheet; the one published kernel of Inductor's code on this architecture "
                f"(torchao's MXFP8 cast) runs up to {p.transfer_check:.2f}x as fast as it says"
            )
    if not math.isnan(p.memory_efficiency):
        lines.append(f"bytes at {p.memory_efficiency:.0%} of the HBM bandwidth")
    if p.missing:
        lines.append(f"not in the shipped calibration: {', '.join(p.missing)}")
    return lines


# --- the run and a layer row ------------------------------------------------------------------


def criterion_text(rec) -> str:
    """What the decisions rest on and the policy that makes them."""
    if rec.criterion == "speedup_worst":
        return (
            "speedup_worst (the seed's worst-case bytes at datasheet rooflines; not a bound: "
            "torch.compile moves more than it for tensorwise)"
        )
    label = (
        "calibrated speedup (measured; fitted overhead, device time)"
        if rec.calibration is not None and rec.calibration.is_measured
        else (
            "speedup (bytes of Transformer Engine's kernels, read off its source)"
            if rec.te_stack
            else "speedup (exact bytes of the generated code)"
        )
    )
    if "speedup_low" not in rec.rows:
        return label
    end = {
        "conservative": "band's low end",
        "expected": "estimate",
        "optimistic": "band's high end",
    }
    label += f", policy {rec.policy.value}: convert where the {end[rec.policy.value]} wins"
    label += f" by {rec.margin:.0%}" if rec.margin else ""
    if rec.policy.value == "expected":
        return label + " (a band straddling 1 is marked *)"
    return label + ", keep where its high end loses, else uncertain (kept in bf16)"


def run_text(run: RunConfig) -> str:
    """'TP 2 (column-parallel shard N, row-parallel shard K), EP 8, FSDP, recompute full'."""
    parts = []
    if run.tp > 1:
        parts.append(f"TP {run.tp} (column-parallel linears shard N, row-parallel shard K)")
    if run.ep > 1:
        parts.append(f"EP {run.ep}")
    if run.fsdp_on:
        parts.append(f"FSDP {run.fsdp_degree}" if run.fsdp_degree else "FSDP")
    elif run.fsdp_degree == 1:
        parts.append("FSDP 1 (off)")
    if run.cp > 1:
        parts.append(f"CP {run.cp}")
    if run.pipeline is not None:
        pipe = run.pipeline
        parts.append(f"PP {pipe.degree} ({pipe.schedule}, {pipe.microbatches} microbatches)")
    if run.recompute_every > 1:
        parts.append(f"recompute full every {_nth(run.recompute_every)} block (layer SAC)")
    elif run.recompute is not Recompute.NONE:
        parts.append(f"recompute {run.recompute.value}")
    return ", ".join(parts) or "one GPU, no parallelism"


# Relative spread of the fitted overhead over nearby kernel sets worth a note on a row.
KERNEL_SET_SPREAD = 0.02


def kernel_set_note(fitted: float, low: float, high: float) -> str:
    """A row's note where the kernel sets compiled around its shape disagree on its overhead by
    more than KERNEL_SET_SPREAD of it (see `timing.overhead.kernel_set_range`); else ''."""
    if not np.isfinite(high - low) or high - low <= KERNEL_SET_SPREAD * max(abs(fitted), 1.0):
        return ""
    return (
        f"kernel set uncertain: overhead {low / 1e6:.4g}-{high / 1e6:.4g} MB at nearby fit "
        f"shapes (fitted {fitted / 1e6:.4g}); --overhead codegen compiles this shape"
    )


def layer_note(row, criterion: str) -> str:
    """Why a layer's decision needs a second look: float8 cannot run it, or only a calibration
    can tell; how a routed expert's row is estimated; a padded shape; a context the
    calibration lacks."""
    notes = []
    grouped = bool(row.get("grouped", False))
    if grouped:
        notes.append(
            f"grouped gemm, {row['recipe']}; overhead: torchao's MoE kernels, read off their code"
        )
        if row["M"] > math.ceil(row["tokens_per_expert"]):
            notes.append(f"M padded from {row['tokens_per_expert']:.4g} to {row['M']}")
    asked = row.get("context_asked")
    if asked and asked != row.get("context"):
        notes.append(f"{asked} not in the calibration: standalone")
    if not grouped and "overhead_bytes_fitted_low" in row:
        notes.append(
            kernel_set_note(
                row["overhead_bytes_fitted"],
                row["overhead_bytes_fitted_low"],
                row["overhead_bytes_fitted_high"],
            )
        )
    if not row["fp8_ok"]:
        notes.append(str(row["fp8_reason"]))
    else:
        value, ideal = row[criterion], row["speedup_ideal"]
        if (criterion == "speedup_worst" or grouped) and value <= 1.0 < ideal:
            notes.append(
                f"wins with ideal overhead (x{ideal:.2f}): "
                + ("decided on the worst case" if grouped else "calibrate to decide")
            )
    if row.get("straddles", False):
        notes.append(
            f"band {row['speedup_low']:.2f}-{row['speedup_high']:.2f} straddles 1: settle it on "
            "a GPU (the command under the table)"
        )
    if row.get("held_by_step", False):
        notes.append("kept by the step: its recompute and collectives cost more than it saves")
    if row.get("converted_by_step", False):
        notes.append("converted by the step: it loses alone, but the step is shorter with it")
    return "; ".join(n for n in notes if n)
