"""What an answer rests on, as data. Every assumption, caveat or side figure behind an answer
is a `Note`: what it is about (`Topic`), the values it carries, where the fact comes from and
whether it was measured. The library builds no sentences; renderers/notes.py words each topic
(one template per topic), so a table, a --out file and a script read the same records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Topic(str, Enum):
    # how the setup file was read (training/setup_file.py)
    SETUP_DEFAULT = "setup_default"  # key, value: a key left to torchtitan's default
    # section, key, value, read: a list of names given as one comma-separated string
    SETUP_STRING_LIST = "setup_string_list"
    SETUP_EARLIER_LAYOUT = "setup_earlier_layout"  # layout: torchtitan's before 2025-03-18
    NOT_COMPILED = "not_compiled"  # the setup does not compile; f8roof models torch.compile
    # commit, recipes (TE's names): Transformer Engine's linears in the step f8roof models
    TE_STACK = "te_stack"
    CONVERTER_OFF = "converter_off"  # the float8 converter is off in the setup
    FLOAT8_ALL_GATHER_UNUSED = "float8_all_gather_unused"  # section: asked with FSDP off
    # entry: a filter_fqns entry that is a substring of no linear's fqn (keeps nothing in bf16)
    FILTER_MATCHES_NOTHING = "filter_matches_nothing"
    # total: a global_batch_size beside data_parallel_shard_degree -1, its ranks unknown
    ACCUMULATION_UNKNOWN = "accumulation_unknown"
    # warnings on a shapes answer (engine/estimate.py, engine/compare.py)
    IMPLAUSIBLE = "implausible"  # column, value, shape, bound, gpu: no GPU's speedup
    BREAKEVEN_EXTRAPOLATED = "breakeven_extrapolated"  # size, smallest
    VERSIONS_DIFFER = "versions_differ"  # mismatch: the calibration's code came from others
    DEFAULT_IMPLEMENTATION = "default_implementation"  # implementation compare chose
    READ_OFF = "read_off"  # recipe: its kernels read off torchao's code, not compiled
    # a calibration run (device/calibrate.py)
    BYTES_DISAGREE = "bytes_disagree"  # key, detail: code, scheduler and Inductor's counts
    BUDGET_SPENT = "budget_spent"  # budget_s, fitted, shapes, checkpoint: a partial fit
    # what an architecture leaves out (training/catalog.py)
    LEFT_OUT = "left_out"  # modules: what the catalog does not model (routers, MTP)
    CONFIG_DEFAULTS = "config_defaults"  # keys absent from a config.json, config: whose defaults
    NOT_IN_TP_PLAN = "not_in_tp_plan"  # layers: replicated under --tp
    QK_NORM = "qk_norm"  # modules: a per-head RMSNorm on q and k between projection and attention
    # the torchtitan config printed for an answer (training/torchtitan_names.py)
    TORCHTITAN_NO_MODEL = "torchtitan_no_model"  # family: torchtitan has no model of it
    # decision ("convert", "keep", "mixed"), module (torchtitan's, "" without a model),
    # setup_converts: routed experts, 3D parameters the linear converter never converts
    TORCHTITAN_EXPERTS = "torchtitan_experts"
    TORCHTITAN_ROUTER = "torchtitan_router"  # entry: the router's nn.Linear, kept bf16
    # by ("choice": f8roof's decisions convert them, "setup": its grouped-gemm converter does):
    # quantized routed experts at expert parallelism 1, which torchtitan refused for a while
    EXPERTS_AT_EP1 = "experts_at_ep1"
    FILTER_INEXACT = "filter_inexact"  # kept, converted: no substring keeps one without the other
    # what a run config changes in the per-layer rows (training/run_config.py)
    TP_SHARDS = "tp_shards"  # tp
    FSDP_GATHERED = "fsdp_gathered"
    FSDP_OFF = "fsdp_off"
    FULL_RECOMPUTE = "full_recompute"  # every: 1, or n for layer SAC
    SELECTIVE_IN_STEP = "selective_in_step"
    # the step (engine/step/)
    AS_CONVERTED = "as_converted"  # filters, torchtitan_default, auto_recipe, experts, moe
    NO_BLOCK = "no_block"  # why: a NoBlock; the step sums the per-layer rows instead
    BLOCKS_FROM = "blocks_from"  # origin: a BlockOrigin's fields
    GRAPH_PARTS = "graph_parts"  # the block's gemms, kernels and recompute as compiled
    NO_FLOAT8_BLOCK = "no_float8_block"  # no block linear in float8
    KEPT_CORRECTED = "kept_corrected"  # kept block linears corrected from the float8 graph
    FLOAT8_BY_LAYERS = "float8_by_layers"  # bf16 block from graphs, float8 its per-layer change
    # no values: the fused q/k/v layout's blocks are the separate layout's graphs, moved by what
    # fusing changes in the per-layer rows
    FUSED_QKV_MOVED = "fused_qkv_moved"
    # ep, top_k, mb (one all-to-all's bytes), ms, per_layer (all-to-alls), placement
    EP_ALL_TO_ALL = "ep_all_to_all"
    SELECTIVE_SAC = "selective_sac"  # compiled: bool
    ATTENTION = "attention"  # ms, seq_len, heads, head_dim, recomputed
    NO_ATTENTION = "no_attention"
    NO_FABRIC = "no_fabric"  # gpu: no interconnect known, communication not modelled
    TP_FLOAT8_GATHER = "tp_float8_gather"
    TP_COMM = "tp_comm"  # tp, placement, async_tp, from_graphs
    ASYNC_TP_GATHERS = "async_tp_gathers"  # why: "tensorwise" | "one_sequence"
    FSDP_UNKNOWN = "fsdp_unknown"
    FSDP_COMM = "fsdp_comm"  # degree, float8, placement
    OTHER_LINEARS = "other_linears"  # fqns: counted with lm_head
    LM_HEAD_BF16 = "lm_head_bf16"
    MODELLED_STEP = "modelled_step"  # outside_ms: embedding, loss, optimizer as modelled
    RECONCILED = "reconciled"  # measured_ms, modelled_ms, gap (share of the measured step)
    OUTSIDE_BLOCKS = "outside_blocks"  # params_per_gpu, precompute, loss, gathered
    FULL_AC_GRAPHS = "full_ac_graphs"  # share: the blocks whose forward graph reruns
    # per-layer path: q/k/v, gate/up cast one input once; fused_qkv (only when true): q, k and v
    # are one linear
    SHARED_INPUT_CAST = "shared_input_cast"
    # degree, schedule, microbatches, stages_per_rank, tokens, send_ms, placement, per
    PIPELINE = "pipeline"
    ACCUMULATION = "accumulation"  # passes, tokens (per pass)
    CONTEXT_PARALLEL = "context_parallel"  # degree, rotate, seq_len, gather_ms, placement
    FSDP_SCHEDULE = "fsdp_schedule"  # reduce_dtype, reshard, replicate, nics_per_node
    # peak memory per GPU (training/memory.py)
    MEMORY_ASSUMED = "memory_assumed"  # runtime_gib: the allocator simulated; outside it


# The notes the default view prints beside the table (the rest: --show-all and --out): what
# the answer is not, where the run asked for differs from the one answered, or an input that
# changes nothing.
DEFAULT_VIEW = frozenset({Topic.NOT_COMPILED, Topic.CONVERTER_OFF, Topic.FILTER_MATCHES_NOTHING})


@dataclass(frozen=True)
class Note:
    topic: Topic
    values: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # the citation behind it ('' where the model itself is the source)
    measured: bool = False  # True: rests on a measurement, not an assumption

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic.value,
            "values": dict(self.values),
            "source": self.source,
            "measured": self.measured,
        }


def note(topic: Topic, *, source: str = "", measured: bool = False, **values: Any) -> Note:
    """`Note(topic, values)` with the values as keywords."""
    return Note(topic, values, source, measured)
