"""How a model runs: one frozen `RunConfig` (model, tokens, sequence layout, TP/EP/FSDP, its
`Pipeline`, checkpointing, torchao's and torchtitan's float8 switches, the GPU, the measured
bf16 step) and the one `Recompute` enum, shared by the per-layer rows, the step summary, the sharded
block and setup files."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from f8roof.errors import ModelError, term
from f8roof.notes import Note, Topic, note
from f8roof.training.catalog import ArchitectureError
from f8roof.training.checkpointing import TOML_LAYOUT_POLICY, Recompute

AUTO_FILTER = "auto_filter_small_kn"  # torchtitan's flag for torchao's _auto_filter_for_recipe


class ParallelismError(ArchitectureError, ModelError):
    """A parallel degree that does not fit the model (does not divide a dim, too many experts
    per device). One line, exit code 2."""


# The most ranks one parallel degree may have: more GPUs than any training run has used (the
# largest published ones are tens of thousands). A degree beyond is a typo, not a setup.
MAX_DEGREE = 2**18
# The most tokens one optimizer step may take over every data-parallel rank and accumulation
# pass: 2^32, some 60 times the largest published (DeepSeek-V3's 15360 x 4096, arXiv
# 2412.19437; Llama 3 405B's 16M, arXiv 2407.21783). --accumulation and a setup's
# global_batch_size meet the same bound.
MAX_GLOBAL_TOKENS = 2**32
# The shortest stretch of a sequence one context-parallel rank may hold: torch's context
# parallelism splits FlexAttention's queries in 128-token blocks per rank (torch 2.13,
# distributed/tensor/experimental/_context_parallel/_attention.py create_cp_block_mask: Q_LEN
# divisible by CP x _DEFAULT_SPARSE_BLOCK_SIZE, 128), and FlashAttention tiles queries by 128
# rows: a shorter shard leaves the tile idle and the linears too few tokens to time.
CP_MIN_SHARD = 128
# The longest measured step --step-ms takes: a day, in ms. Longer is no step.
MAX_STEP_MS = 86_400_000.0
# llama3's training sequence (torchtitan's llama3 configs: seq_len 8192): the layout a run
# assumes when only the tokens per rank are given
LLAMA3_SEQ_LEN = 8192


def assumed_seq_len(tokens: int, tp: int = 1) -> int:
    """One sequence up to llama3's 8192 tokens; above, the longest sequence up to 8192 that
    divides the tokens into whole sequences, each split evenly over the `tp` ranks (sequence
    parallelism): 16384 -> 2 x 8192, 100000 -> 16 x 6250 (not 3125 x 32)."""
    for length in range(min(tokens, LLAMA3_SEQ_LEN), 0, -1):
        if tokens % length == 0 and length % tp == 0:
            return length
    return tokens


REDUCE_DTYPES = ("float32", "bfloat16")
RESHARD = ("default", "always", "never")
CP_ROTATE = ("allgather", "alltoall")  # torchtitan's context_parallel_rotate_method
MAX_NETWORK_GBPS = 1e5  # 100 Tb/s per GPU: beyond any NIC


def _positive_int(name: str, value) -> int:
    """A parallel degree: a positive whole number, at most MAX_DEGREE ranks."""
    _count(name, value)
    if value > MAX_DEGREE:
        raise ParallelismError(
            f"{name} {value} exceeds {MAX_DEGREE} ranks, more GPUs than any training run has used"
        )
    return value


def _count(name: str, value) -> int:
    """A positive whole number (a length, a batch), named in the refusal."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParallelismError(f"{name} must be a positive integer (got {value!r})")
    return value


def token_layout(
    tokens: int | None, seq_len: int | None, local_batch_size: int | None
) -> tuple[int | None, int | None]:
    """(tokens per data-parallel rank, sequence length) from any two of them and the local
    batch, as torchtitan lays out a rank's step (local_batch_size sequences of seq_len
    tokens): tokens = local_batch_size x seq_len; one rule for the CLI, the API and a setup
    file. seq_len None: unknown (whole sequences up to 8192 tokens are assumed)."""
    if tokens is not None:
        _count(f"{term('tokens')} per step", tokens)
    if seq_len is not None:
        _count(term("seq_len"), seq_len)
    if local_batch_size is not None:
        _count(term("local_batch_size"), local_batch_size)
    if seq_len is None and local_batch_size is None:
        return tokens, None
    if tokens is None:
        if seq_len is None or local_batch_size is None:
            raise ParallelismError(
                f"{term('seq_len')} and {term('local_batch_size')} give the tokens together: "
                f"give both, or {term('tokens')}"
            )
        return local_batch_size * seq_len, seq_len
    if seq_len is None:
        assert local_batch_size is not None
        if tokens % local_batch_size:
            raise ParallelismError(
                f"{term('tokens')} {tokens} are no whole {term('local_batch_size')} "
                f"{local_batch_size} sequences"
            )
        return tokens, tokens // local_batch_size
    if local_batch_size is not None and tokens != local_batch_size * seq_len:
        raise ParallelismError(
            f"{term('tokens')} {tokens} is not {term('local_batch_size')} {local_batch_size} "
            f"x {term('seq_len')} {seq_len} ({local_batch_size * seq_len})"
        )
    if tokens % seq_len:
        raise ParallelismError(
            f"{term('tokens')} {tokens} are no whole sequences of {term('seq_len')} {seq_len}"
        )
    return tokens, seq_len


# torchao gathers float8 weights under FSDP2 for tensorwise scaling only (torchao's
# Float8LinearConfig.enable_fsdp_float8_all_gather; torchtitan asserts against it beside any
# recipe_name, components/quantization/float8.py at 441a63ca4)
FLOAT8_ALL_GATHER_RECIPES = ("tensorwise",)


def check_float8_all_gather(
    float8_all_gather: bool, recipes, implementation: str = "torchao"
) -> None:
    """The float8 all-gather beside the recipes asked: tensorwise only, one line otherwise;
    torchao's (Transformer Engine's linears, `implementation` te, are not torchao's)."""
    if float8_all_gather and implementation == "te":
        raise ParallelismError(
            f"{term('float8_all_gather')} is torchao's FSDP2 all-gather, not Transformer "
            f"Engine's: drop it with {term('implementation')} te"
        )
    others = [r for r in recipes if r not in FLOAT8_ALL_GATHER_RECIPES]
    if float8_all_gather and others:
        raise ParallelismError(
            f"{term('float8_all_gather')} needs {term('recipe')} tensorwise: torchao gathers "
            f"float8 weights for it only, not {', '.join(others)}"
        )


def check_step_ms(step_ms) -> float:
    """A measured bf16 step in milliseconds: positive, finite, at most a day."""
    if (
        isinstance(step_ms, bool)
        or not isinstance(step_ms, (int, float))
        or not math.isfinite(step_ms)
        or not 0 < step_ms <= MAX_STEP_MS
    ):
        raise ParallelismError(
            f"{term('step_ms')} must be a positive number of milliseconds up to "
            f"{MAX_STEP_MS:.0f} (a day) (got {step_ms!r})"
        )
    return float(step_ms)


# schedule name (torch's `get_schedule_class` spelling) -> looped (several stages per rank)
SCHEDULES = {"GPipe": False, "1F1B": False, "Interleaved1F1B": True}
# schedules torch has that split the backward; named so that the refusal says why
SPLIT_BACKWARD = ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV", "LoopedBFS")
LOOPED_DEFAULT_STAGES = 2  # torchtitan's stages per rank for a looped schedule


class PipelineError(ModelError):
    pass


def schedule_name(name: str) -> str:
    """torch's schedule name, matched case-insensitively, or one line naming the known ones."""
    for known in SCHEDULES:
        if name.lower() == known.lower():
            return known
    if any(name.lower() == s.lower() for s in SPLIT_BACKWARD):
        raise PipelineError(
            f"pipeline schedule {name}: it splits the backward to fill the bubble, not modelled "
            f"(modelled: {', '.join(SCHEDULES)})"
        )
    raise PipelineError(f"unknown pipeline schedule {name!r} (one of {', '.join(SCHEDULES)})")


@dataclass(frozen=True)
class Pipeline:
    """Pipeline parallelism: `degree` ranks, `microbatches` per step, `stages_per_rank` (v).

    As torchtitan runs it: the model's blocks split into stages over `degree` ranks, each
    step's local batch run as `microbatches` through a schedule of torch's
    `torch.distributed.pipelining`. Pure: the schedule's idle time from per-microbatch times.

    What torchtitan does (torchtitan@441a63ca4 and HEAD, `distributed/pipeline*.py`,
    `config_manager.py`; the published 2024-25 runs' layout):
    - microbatches: the local batch over `pipeline_parallel_microbatch_size` (default 1: one
      sequence each);
    - stages per rank: 1 for the single-stage schedules (GPipe, 1F1B), 2 by default for the
      looped ones (Interleaved1F1B), or `pipeline_parallel_layers_per_stage` / the split points
      when given; the embedding and the output head weigh as a layer each when the blocks are split
      (`pipeline_parallel_first/last_stage_less_layers` = 1), so the stages are balanced;
    - FSDP under PP (`fsdp_reshard_after_forward = "default"`): weights stay gathered from the
      first microbatch's forward to the last one's backward, and gradients are reduce-scattered
      once, in the last microbatch's backward (torch's `PipelineStage` syncs gradients on the
      last backward only): FSDP's collectives run once per step, not per microbatch.

    The idle time (the "bubble", Narayanan et al. 2021, "Efficient Large-Scale Language Model
    Training on GPU Clusters Using Megatron-LM", section 2.2): with p ranks and m microbatches,
    each rank idles (p - 1) x (one microbatch's forward and backward on its stages) in GPipe and
    1F1B, and (p - 1) / v of that with v interleaved stages per rank. The sends between stages
    ride the critical path only while the pipeline fills and drains: the first microbatch's
    activations cross every stage boundary forward, the last one's gradients backward
    (2 (p v - 1) sends); in the steady state each send overlaps the next microbatch's compute.

    Zero-bubble and DualPipe schedules split the backward into its input and weight gradients
    and fill the bubble with the latter: not modelled (refused in one line).
    """

    degree: int
    microbatches: int
    schedule: str = "1F1B"
    stages_per_rank: int = 1
    # torchtitan's pipeline_parallel_layers_per_stage: the stages per rank then follow from
    # the model's blocks (`for_layers`)
    layers_per_stage: int | None = None

    def __post_init__(self) -> None:
        for name, value in (
            ("degree", self.degree),
            ("microbatches", self.microbatches),
            ("stages_per_rank", self.stages_per_rank),
            ("layers_per_stage", self.layers_per_stage or 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipelineError(f"pipeline {name} must be a positive integer (got {value!r})")
        if self.schedule not in SCHEDULES:
            schedule_name(self.schedule)  # raises, naming the known ones
        if self.layers_per_stage is not None:
            return  # the stages are the model's to say
        looped = SCHEDULES[self.schedule]
        if looped and self.stages_per_rank < 2:
            raise PipelineError(
                f"{self.schedule} runs at least 2 stages per rank (got {self.stages_per_rank})"
            )
        if not looped and self.stages_per_rank != 1:
            raise PipelineError(
                f"{self.schedule} runs 1 stage per rank (got {self.stages_per_rank})"
            )

    @classmethod
    def torchtitan(
        cls,
        *,
        degree: int,
        sequences: int,
        microbatch_size: int = 1,
        schedule: str = "1F1B",
        stages_per_rank: int | None = None,
        layers_per_stage: int | None = None,
    ) -> Pipeline:
        """As torchtitan builds it from a job config: the local batch of `sequences` in
        microbatches of `microbatch_size` sequences, its default stages per rank (or the ones
        `layers_per_stage` makes of the model's blocks)."""
        name = schedule_name(schedule)
        if isinstance(microbatch_size, bool) or not isinstance(microbatch_size, int):
            raise PipelineError(f"{term('microbatch_size')} must be an integer")
        if microbatch_size < 1 or sequences % microbatch_size:
            raise PipelineError(
                f"{term('microbatch_size')} {microbatch_size} does not divide the local batch "
                f"of {sequences} sequences"
            )
        if stages_per_rank is None:
            stages_per_rank = LOOPED_DEFAULT_STAGES if SCHEDULES[name] else 1
        return cls(degree, sequences // microbatch_size, name, stages_per_rank, layers_per_stage)

    @property
    def stages(self) -> int:
        return self.degree * self.stages_per_rank

    @property
    def rank_share(self) -> float:
        """One rank's share of a step's per-microbatch work for the whole model: m / p."""
        return self.microbatches / self.degree

    @property
    def bubble_share(self) -> float:
        """Idle time per step in units of one microbatch's forward and backward on a rank."""
        return (self.degree - 1) / self.stages_per_rank

    @property
    def fill_drain_sends(self) -> int:
        """Sends on the critical path: the first microbatch forward and the last backward
        through every stage boundary."""
        return 2 * (self.stages - 1)

    def for_layers(self, layers: int) -> Pipeline:
        """The pipeline of a model of `layers` blocks: with `layers_per_stage`, torchtitan's
        stages of that many, the embedding and the output weighing a layer each
        (ceil((layers + 2) / layers_per_stage) over the ranks); every stage holds a block
        (torchtitan refuses an empty one)."""
        pipeline = self
        if self.layers_per_stage is not None:
            stages = math.ceil((layers + 2) / self.layers_per_stage)
            if stages % self.degree:
                raise PipelineError(
                    f"{stages} pipeline stages of {self.layers_per_stage} layers do not divide "
                    f"over {self.degree} ranks"
                )
            pipeline = replace(self, stages_per_rank=stages // self.degree, layers_per_stage=None)
        if pipeline.stages > layers:
            raise PipelineError(
                f"{pipeline.stages} pipeline stages for {layers} blocks: a stage would be empty"
            )
        return pipeline


@dataclass(frozen=True)
class RunConfig:
    """How a model runs: what, on how many tokens, parallelized, checkpointed and converted
    how, on which GPU, and the measured bf16 step when known. One frozen value, built from the
    command line's options (`from_options`), a setup file (`training.setup_file`) or Python.
    The per-layer rows read its degrees and checkpointing; the step summary and the sharded
    block the rest (FSDP's degree, torchao's float8 switches, torchtitan's filters)."""

    tp: int = 1
    ep: int = 1
    # FSDP as torchtitan's data_parallel_shard_degree is given: None (not given: off), 1 (off,
    # said so), -1 (on, its degree unknown: the step leaves its communication out), N >= 2
    fsdp: int | None = None
    recompute: Recompute = Recompute.NONE
    step_s: float | None = None  # measured bf16 step time, for the end-to-end speedup
    # full recompute of every n-th block only (torchtitan's layer SAC, selective_ac_option n)
    recompute_every: int = 1
    model: str | None = None  # a built-in architecture or a config.json (None: shapes only)
    tokens: int | None = None  # per data-parallel rank per step (M of the dense linears)
    seq_len: int | None = None  # None: unknown (one sequence up to 8192 tokens is assumed)
    gpu: str | None = None  # the GPU preset asked for, when one is
    async_tp: bool = False  # torch's micro-pipeline TP (torchtitan's enable_async_tensor_parallel)
    float8_all_gather: bool = False  # torchao's float8 all-gather of FSDP2 weights (tensorwise)
    precompute_scales: bool = False  # torchao's precompute_float8_dynamic_scale_for_fsdp
    sac_policy: str = TOML_LAYOUT_POLICY  # whose per-op SAC list (training/checkpointing.py)
    # torchtitan sets Inductor's emulate_precision_casts for rowwise since #1108 (2025-04-16,
    # "short-term solution for pytorch/pytorch#150859"; torchtitan 0.3.0 still does, in
    # components/quantization/float8.py): every bf16 intermediate of a fused kernel is rounded
    # as eager rounds it. False: a torchtitan from before, which left Inductor's default.
    emulate_precision_casts: bool = True
    # torchtitan compiles its cross-entropy with the model (training.compile since bbb1b616e,
    # 2025-04-02; [compile] components, "loss" by default, since 2025-08-20). False: the loss
    # runs eager, as in torchtitan before it or with compile off.
    loss_compiled: bool = True
    # torchtitan compiles each transformer block (training.compile; [compile] components
    # "model"): AOTAutograd's partition decides what a block saves for the backward
    # (training/memory.py). False: the blocks run eager, autograd's own saved tensors.
    blocks_compiled: bool = True
    # torchtitan's loss parallel under TP: the output projection's logits stay sharded over the
    # vocabulary into the loss. False (disable_loss_parallel): they are all-gathered, and every
    # TP rank runs the whole loss.
    loss_parallel: bool = True
    # torchtitan's ChunkedCELoss (components/loss.py since 786e26f8e, 2026-04-27, pytorch/
    # torchtitan#2937; the qwen3 configs' loss, num_chunks 8): the output projection and the loss
    # run on one slice of the sequence at a time, each slice's backward at once. 1: the whole
    # logits at once (CrossEntropyLoss).
    loss_chunks: int = 1
    # torchtitan's fused q/k/v projection (its model builders' fuse_qkv, the default of its
    # llama3 and qwen3 models since #3714, pytorch/torchtitan@3396a4b37, 2026-06-24): one
    # `attention.qkv_linear.wqkv` linear per block (training/catalog.py's `fuse_qkv`). False:
    # q, k and v apart, as every torchtitan before it builds them (the 2025 TOML era's wq, wk,
    # wv; 2026's QKVLinear wq and wkv's wk, wv).
    fuse_qkv: bool = False
    # None: no setup, torchtitan's llama configs' ["output"]; a setup's list as given (empty:
    # no filter; "auto_filter_small_kn": torchao's auto filter on top of the others)
    filter_fqns: tuple[str, ...] | None = None
    moe_fqns: tuple[str, ...] = ()  # torchtitan's moe_fqns_prototype: routed experts in float8
    gpus_per_node: int = 8
    # torchtitan's mixed_precision_reduce: the gradients' reduce-scatter dtype ("float32", its
    # only value at HEAD; the TOML era also took "bfloat16")
    reduce_dtype: str = "float32"
    # torchtitan's fsdp_reshard_after_forward: "default" (reshard but the last block, without
    # pipeline parallelism), "always", "never" (the backward gathers nothing again)
    reshard_after_forward: str = "default"
    dp_replicate: int = 1  # HSDP: data_parallel_replicate_degree replicas of each FSDP shard
    network_gbps: float | None = None  # per-GPU NIC line rate (None: the GPU preset's fabric)
    # pipeline parallelism (torchtitan's pipeline_parallel_*; None: off): `tokens` is then the
    # microbatch's, the local batch runs as `pipeline.microbatches` of them
    pipeline: Pipeline | None = None
    # gradient accumulation (torchtitan's global_batch_size over local batch x data-parallel
    # ranks, since 8570415c3, 2025-06-05): forward/backward passes per optimizer step, each of
    # `tokens` (under a pipeline, each pass one whole schedule)
    accumulation: int = 1
    # context parallelism (torchtitan's context_parallel_degree): each sequence split over `cp`
    # ranks (load-balanced causal chunks), keys and values exchanged by `cp_rotate`
    cp: int = 1
    cp_rotate: str = "allgather"  # torchtitan's context_parallel_rotate_method
    assumptions: tuple[Note, ...] = ()  # what a setup file left to torchtitan's defaults

    def __post_init__(self) -> None:
        _positive_int(term("tp"), self.tp)
        _positive_int(term("ep"), self.ep)
        if self.fsdp is not None and self.fsdp != -1:
            _positive_int(term("fsdp"), self.fsdp)
        _positive_int(term("dp_replicate"), self.dp_replicate)
        if self.float8_all_gather and not self.fsdp_on:
            raise ParallelismError(
                f"a float8 all-gather is FSDP's: {term('float8_all_gather')} needs {term('fsdp')}"
            )
        if self.reduce_dtype not in REDUCE_DTYPES:
            raise ParallelismError(
                f"reduce dtype must be one of {', '.join(REDUCE_DTYPES)} (got {self.reduce_dtype!r})"
            )
        if self.reshard_after_forward not in RESHARD:
            raise ParallelismError(
                f"reshard after forward must be one of {', '.join(RESHARD)} "
                f"(got {self.reshard_after_forward!r})"
            )
        if self.network_gbps is not None and (
            isinstance(self.network_gbps, bool)
            or not isinstance(self.network_gbps, (int, float))
            or not 0 < self.network_gbps <= MAX_NETWORK_GBPS
        ):
            raise ParallelismError(
                f"{term('network_gbps')} takes a NIC's line rate in Gb/s, in "
                f"(0, {MAX_NETWORK_GBPS:g}] (got {self.network_gbps!r})"
            )
        _positive_int(term("cp"), self.cp)
        _count(term("loss_chunks"), self.loss_chunks)
        if not isinstance(self.fuse_qkv, bool):
            raise ParallelismError(f"{term('fuse_qkv')} is true or false (got {self.fuse_qkv!r})")
        if (
            isinstance(self.accumulation, bool)
            or not isinstance(self.accumulation, int)
            or self.accumulation < 1
        ):
            raise ParallelismError(
                f"{term('accumulation')} takes a whole number of passes >= 1 "
                f"(got {self.accumulation!r})"
            )
        if self.cp_rotate not in CP_ROTATE:
            raise ParallelismError(
                f"context-parallel rotate method must be one of {', '.join(CP_ROTATE)} "
                f"(got {self.cp_rotate!r})"
            )
        if self.cp > 1:
            if self.seq_len is None:
                raise ParallelismError(
                    f"{term('cp')} {self.cp} splits sequences: give their length"
                )
            if self.seq_len % (2 * self.cp) or (self.seq_len // self.cp) % self.tp:
                # torch's load balancer cuts each sequence into 2 x cp chunks; SP splits a chunk
                raise ParallelismError(
                    f"{term('seq_len')} {self.seq_len} does not split into 2 x {term('cp')} "
                    f"{self.cp} chunks of whole {term('tp')} {self.tp} shards"
                )
            if self.seq_len // self.cp < CP_MIN_SHARD:
                raise ParallelismError(
                    f"{term('cp')} {self.cp} leaves {self.seq_len // self.cp} of "
                    f"{self.seq_len} tokens per rank: torch's CP splits {CP_MIN_SHARD} or more"
                )
        if self.pipeline is not None and not isinstance(self.pipeline, Pipeline):
            raise ParallelismError(f"pipeline must be a Pipeline (got {self.pipeline!r})")
        if not isinstance(self.recompute, Recompute):
            raise ParallelismError(f"recompute must be a Recompute (got {self.recompute!r})")
        _positive_int("recompute_every", self.recompute_every)
        if self.recompute_every > 1 and self.recompute is not Recompute.FULL:
            raise ParallelismError("checkpointing every n-th block is full recompute of those")
        if self.step_s is not None:
            check_step_ms(self.step_s * 1e3)
        if self.tokens is not None:
            _count(f"{term('tokens')} per step", self.tokens)
        if self.seq_len is not None:
            _count("seq_len", self.seq_len)
        if self.seq_len is not None and self.cp == 1 and self.seq_len % self.tp:
            # torchtitan's sequence parallelism shards each sequence over the TP ranks
            # (ParallelDims.seq_len_divisor: TP x 2 CP)
            raise ParallelismError(
                f"{term('seq_len')} {self.seq_len} does not split over {term('tp')} {self.tp} "
                "(sequence parallelism shards each sequence)"
            )
        self._check_scale()

    def _check_scale(self) -> None:
        """One bound per quantity, whichever front end set it: the GPUs the degrees multiply
        to (replicate x FSDP x CP x TP x PP) at most MAX_DEGREE, and the tokens an accumulated
        optimizer step takes (tokens x data-parallel ranks x passes) at most
        MAX_GLOBAL_TOKENS (the tokens per rank have their own bound, catalog.check_tokens)."""
        pp = self.pipeline.degree if self.pipeline is not None else 1
        world = self.dp_replicate * self.fsdp_ranks * self.cp * self.tp * pp
        if world > MAX_DEGREE:
            named = [
                f"{term(name)} {value}"
                for name, value in (
                    ("dp_replicate", self.dp_replicate),
                    ("fsdp", self.fsdp_ranks),
                    ("cp", self.cp),
                    ("tp", self.tp),
                    ("pp", pp),
                )
                if value > 1
            ]
            raise ParallelismError(f"{' x '.join(named)} ranks exceed {MAX_DEGREE} GPUs")
        ranks = self.dp_replicate * self.fsdp_ranks
        total = (self.tokens or 1) * ranks * self.accumulation
        if self.accumulation > 1 and total > MAX_GLOBAL_TOKENS:
            raise ParallelismError(
                f"{term('accumulation')} makes {total:.3g} tokens per optimizer step "
                f"({self.accumulation} passes), more than 2^32"
            )

    @classmethod
    def from_options(
        cls,
        *,
        tp: int = 1,
        ep: int = 1,
        fsdp: bool | int | None = False,
        recompute: str | Recompute = "none",
        step_ms: float | None = None,
        recompute_every: int = 1,
        float8_all_gather: bool = False,
        network_gbps: float | None = None,
        filter_fqns: tuple[str, ...] | None = None,
        async_tp: bool = False,
        pp: int = 1,
        pp_schedule: str | None = None,
        microbatches: int | None = None,
        cp: int = 1,
        accumulation: int = 1,
        tokens: int | None = None,
        seq_len: int | None = None,
        local_batch_size: int | None = None,
        fuse_qkv: bool = False,
        setup_given: bool = False,
    ) -> RunConfig:
        """From user-facing values (the CLI's and the Python API's): recompute by name, the
        step in milliseconds, FSDP as a flag or a degree (`--fsdp` alone: -1, on with its
        degree unknown, as torchtitan's data_parallel_shard_degree = -1; `--fsdp 1`: off, as
        torchtitan's 1, and said so; 0 is no degree). `tokens` per rank, or `seq_len` x
        `local_batch_size` (`token_layout`). The pipeline, context parallelism and
        accumulation split the tokens: the pipeline's microbatches one sequence each by
        default (its schedule and microbatches only with a pipeline, `pp` 2 or more); CP's
        sequences `seq_len`, else the longest up to 8192 tokens that split into 2 x cp chunks
        of whole TP shards (torch's load balancer). `setup_given`: a setup file sets the
        tokens and TP, and says itself what it refuses beside it."""
        for name, value in (("tp", tp), ("ep", ep), ("pp", pp), ("cp", cp)):
            _positive_int(term(name), value)
        if microbatches is not None:
            _count(term("microbatches"), microbatches)
        if pp == 1 and (microbatches is not None or pp_schedule is not None):
            given = "microbatches" if microbatches is not None else "pp_schedule"
            raise PipelineError(
                f"{term(given)} shapes a pipeline: give {term('pp')} 2 or more (1: no pipeline)"
            )
        tokens, seq_len = token_layout(tokens, seq_len, local_batch_size)
        if fsdp is True:
            fsdp = -1
        elif fsdp is False:
            fsdp = None
        elif fsdp is not None and (not isinstance(fsdp, int) or fsdp == 0 or fsdp < -1):
            raise ParallelismError(
                f"{term('fsdp')} takes a degree >= 1, or nothing for FSDP of unknown degree "
                f"(got {fsdp!r})"
            )
        if step_ms is not None:
            check_step_ms(step_ms)
        if async_tp and tp < 2 and not setup_given:
            raise ParallelismError(
                f"{term('async_tp')} pipelines TP's collectives: give {term('tp')} 2 or more"
            )
        config = cls(
            tp=tp,
            ep=ep,
            fsdp=fsdp,
            recompute=Recompute.from_name(recompute),
            step_s=None if step_ms is None else step_ms / 1e3,
            recompute_every=recompute_every,
            float8_all_gather=float8_all_gather,
            precompute_scales=float8_all_gather,
            network_gbps=network_gbps,
            filter_fqns=filter_fqns,
            async_tp=async_tp,
            tokens=tokens,
            seq_len=seq_len if cp == 1 else None,
            fuse_qkv=fuse_qkv,
        )
        if pp != 1:
            if tokens is None:
                raise ParallelismError(
                    f"{term('pp')} and {term('microbatches')} go with {term('model')} and "
                    f"{term('tokens')}"
                )
            if microbatches is None:
                microbatches = tokens // (seq_len or assumed_seq_len(tokens, tp * cp))
            pipeline = Pipeline.torchtitan(
                degree=pp,
                sequences=microbatches,
                schedule=pp_schedule or "1F1B",
                microbatch_size=1,
            )
            config = replace(config, pipeline=pipeline)
        if cp != 1:
            if tokens is None:
                raise ParallelismError(
                    f"{term('cp')} goes with {term('model')} and {term('tokens')}"
                )
            sequence = seq_len or assumed_seq_len(tokens, 2 * cp * tp)
            config = replace(config, cp=cp, seq_len=sequence)
        if accumulation != 1:
            if tokens is None and not setup_given:
                raise ParallelismError(
                    f"{term('accumulation')} goes with {term('model')} and {term('tokens')}"
                )
            config = replace(config, accumulation=accumulation)
        return config

    @classmethod
    def sharded(
        cls,
        *,
        tp: int = 1,
        fsdp: int = 1,
        float8_all_gather: bool = False,
        async_tp: bool = False,
        recompute: Recompute | str = Recompute.NONE,
        emulate_precision_casts: bool = True,
    ) -> RunConfig:
        """One rank of a sharded block's run (training/block.py): FSDP by its ranks (1: off)."""
        if not isinstance(recompute, Recompute):
            known = ", ".join(r.value for r in Recompute)
            raise ParallelismError(f"recompute must be one of {known} (got {recompute!r})")
        _positive_int("fsdp", fsdp)
        return cls(
            tp=tp,
            fsdp=fsdp if fsdp > 1 else None,
            float8_all_gather=float8_all_gather,
            async_tp=async_tp,
            recompute=recompute,
            emulate_precision_casts=emulate_precision_casts,
        )

    def emulates_precision_casts(self, recipe: str | None) -> bool:
        """Whether `recipe`'s graphs compile with emulate_precision_casts (torchtitan: rowwise
        only, the recipe its #1108 names)."""
        return self.emulate_precision_casts and recipe == "rowwise"

    @property
    def world_size(self) -> int:
        """The ranks of a sharded block's mesh: TP x FSDP."""
        return self.tp * self.fsdp_ranks

    @property
    def fsdp_on(self) -> bool:
        """FSDP shards the weights (its degree known or not)."""
        return self.fsdp is not None and self.fsdp != 1

    @property
    def fsdp_degree(self) -> int | None:
        """FSDP's degree as given: N, or 1 (off, given so); None when not given or unknown."""
        return self.fsdp if self.fsdp is not None and self.fsdp >= 1 else None

    @property
    def fsdp_ranks(self) -> int:
        """The ranks a weight is sharded over: the FSDP degree, 1 when off or unknown."""
        return self.fsdp if self.fsdp is not None and self.fsdp > 1 else 1

    @property
    def pp(self) -> int:
        """The pipeline-parallel degree (1: no pipeline)."""
        return self.pipeline.degree if self.pipeline is not None else 1

    def local_tokens(self, tokens: int) -> int:
        """The tokens every linear of one GPU runs at once: the step's per data-parallel rank,
        over the pipeline's microbatches and the context-parallel ranks each sequence is split
        over (rows, block and step are then timed for those)."""
        microbatches = self.pipeline.microbatches if self.pipeline is not None else 1
        if tokens % (microbatches * self.cp):
            raise ParallelismError(
                f"{term('tokens')} {tokens} do not split into {microbatches} pipeline "
                f"microbatch(es) over {term('cp')} {self.cp}"
            )
        return tokens // microbatches // self.cp

    @property
    def local_seq_len(self) -> int | None:
        """The stretch of each sequence one GPU holds: the sequence over the CP ranks."""
        return None if self.seq_len is None else self.seq_len // self.cp

    @property
    def reshards_after_forward(self) -> bool:
        """FSDP2's reshard_after_forward for the blocks, torchtitan's policy: "default"
        reshards (the last block aside, one of many) but under pipeline parallelism, where a
        gathered stage serves every microbatch."""
        if self.reshard_after_forward == "default":
            return self.pipeline is None
        return self.reshard_after_forward == "always"

    @property
    def auto_filter(self) -> bool:
        return AUTO_FILTER in (self.filter_fqns or ())

    @property
    def is_default(self) -> bool:
        """One GPU as the defaults run it; the tokens per rank are the question's, not a
        setup's."""
        return replace(self, tokens=None) == RunConfig()

    def replace_step(self, step_s: float | None) -> RunConfig:
        return replace(self, step_s=step_s)

    @property
    def is_parallel(self) -> bool:
        return (
            self.tp > 1 or self.ep > 1 or self.fsdp_on or self.cp > 1 or self.pipeline is not None
        )

    def recompute_share(self, blocks: int) -> float:
        """The share of `blocks` transformer blocks full recompute reruns: all of them, or
        with layer SAC every n-th (torchtitan counts blocks from 1 and checkpoints those whose
        count divides by n: blocks // n of them); 0 without full recompute."""
        if self.recompute is not Recompute.FULL:
            return 0.0
        return (blocks // self.recompute_every) / blocks if blocks else 1.0

    def notes(self) -> list[Note]:
        """What the setup changes in the per-layer rows and what they leave to the step."""
        out = []
        if self.tp > 1:
            out.append(note(Topic.TP_SHARDS, tp=self.tp))
        if self.fsdp_on:
            out.append(note(Topic.FSDP_GATHERED))
        if self.fsdp_degree == 1:
            out.append(note(Topic.FSDP_OFF))
        if self.recompute is Recompute.FULL:
            out.append(note(Topic.FULL_RECOMPUTE, every=self.recompute_every))
        elif self.recompute is Recompute.SELECTIVE:
            out.append(note(Topic.SELECTIVE_IN_STEP))
        return out


ONE_GPU = RunConfig()  # the default: no parallelism, no recompute, no measured step
