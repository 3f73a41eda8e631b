"""One training step per GPU, bf16 against float8: the blocks, lm_head, and what runs outside
them, each part modelled; a measured bf16 step reconciled with the model, never replaced by it.

Inputs are one transformer block's time parts per precision (`BlockTimes`): its linears'
gemms, the overhead kernels float8 adds (casts, amax, scales; zero in bf16), the rest of its
compute (attention, norms, activations: the same in both), its exposed TP and FSDP
communication and what its checkpointing recomputes; lm_head (kept in bf16 unless its float8
time is given: torchtitan's default filter is `output`); and `OutsideBlocks`: the embedding,
the final norm and the loss, the optimizer step and gradient clipping, at their bytes.

Under pipeline parallelism (`training/run_config.py`) the parts come per microbatch for the whole
model and the step is one rank's: m microbatches through 1/p of every per-token part, FSDP and
the optimizer once per step over the rank's share, and the schedule's idle time and fill/drain
sends as a part of its own (`pipelined`), which float8 shortens as it shortens a microbatch.
Under gradient accumulation the step is that many forward/backward passes (each a whole
schedule under a pipeline) and one optimizer step (`accumulated`). A weight cast cached across
the step's microbatches (Transformer Engine's, `BlockTimes.weight_cast_once_s`) is paid once
per step over the rank's share of the blocks (`with_weight_casts`), not per microbatch.

The modelled step is the sum of its parts. A measured bf16 step (`--step-ms`) is the bf16
step; the model is reconciled with it (`Reconciliation`): the gap between them is spread over
every part in proportion to its bf16 time (the model's relative error taken as the same
everywhere), so float8's step is measured x modelled float8 / modelled bf16; the band spans
the two extreme attributions (the whole gap on the linears float8 speeds up, or on what it
does not change) and the linears' own band. Only an impossible step is refused: one shorter
than its bf16 gemms' FLOPs at the GPU's peak.

The answer is typed: one `Component` per part of the step, each with bf16 time, float8 time
and its band's ends, and what it rests on (`Basis`); the notes are `f8roof.notes.Note` records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from f8roof.errors import ModelError
from f8roof.notes import Note, Topic, note
from f8roof.training.run_config import Pipeline


class StepError(ModelError):
    pass


def _check_time(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StepError(f"{owner}: {name} must be a number of seconds (got {value!r})")
    if not (math.isfinite(value) and value >= 0):
        raise StepError(f"{owner}: {name} must be finite and >= 0 (got {value!r})")


@dataclass(frozen=True)
class BlockTimes:
    """One transformer block's forward + backward on one GPU, in seconds, one precision."""

    linear_gemm_s: float  # the linears' gemms (forward and both backward gemms)
    overhead_s: float = 0.0  # float8's casts, amax, scales, transposes (0 for bf16)
    other_compute_s: float = 0.0  # attention, norms, activations, residuals
    tp_comm_s: float = 0.0  # TP collectives that do not hide behind compute
    fsdp_comm_s: float = 0.0  # FSDP collectives that do not hide behind compute
    recompute_s: float = 0.0  # what checkpointing runs again in the backward
    cp_comm_s: float = 0.0  # context parallelism's key/value exchange that shows
    ep_comm_s: float = 0.0  # expert parallelism's token dispatch and combine (all-to-alls)
    # of overhead_s, the weights' casts a step pays once however many microbatches it runs:
    # Transformer Engine caches them with is_first_microbatch (traffic/te.py); torchao recasts
    weight_cast_once_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_time("BlockTimes", f.name, getattr(self, f.name))
        if self.weight_cast_once_s > self.overhead_s:
            raise StepError("BlockTimes: weight_cast_once_s is part of overhead_s, not above it")

    @property
    def linear_s(self) -> float:
        """The linears' part: gemms and float8 overhead."""
        return self.linear_gemm_s + self.overhead_s

    @property
    def compute_s(self) -> float:
        """What the block computes, its recompute included: what FSDP's collectives hide
        behind."""
        return self.linear_s + self.other_compute_s + self.recompute_s

    @property
    def comm_exposed_s(self) -> float:
        return self.tp_comm_s + self.fsdp_comm_s + self.cp_comm_s + self.ep_comm_s

    @property
    def total_s(self) -> float:
        return self.linear_s + self.other_compute_s + self.comm_exposed_s + self.recompute_s


class Part(str, Enum):
    LINEARS = "linears"  # every linear's gemms and float8 overhead, lm_head included
    OTHER_COMPUTE = "attention and other compute"
    TP_COMM = "TP collectives"
    FSDP_COMM = "FSDP collectives"
    RECOMPUTE = "recompute"
    OUTSIDE = "embedding, final norm and loss"
    OPTIMIZER = "optimizer step and gradient clipping"
    PIPELINE = "pipeline bubble and sends"
    CP_COMM = "CP collectives"
    EP_COMM = "EP all-to-alls"


class Basis(str, Enum):
    """What a component's times rest on."""

    PER_LAYER = "per-layer estimates"  # the recommendation's rows
    GRAPHS = "the sharded block's graphs"  # compiled, or the shipped fits of compiles
    ATTENTION = "FlashAttention-2 throughput"  # timing/attention.py
    COLLECTIVES = "nccl-tests bus bandwidth"  # timing/comm.py
    BYTES = "bytes at the calibration's streaming bandwidth"  # OutsideBlocks
    SCHEDULE = "the pipeline schedule's idle time"  # training/run_config.py (Pipeline)
    NOT_MODELLED = "not modelled"


# Bytes per element of what runs outside the blocks (derivations in `outside_blocks`).
EMBEDDING_BYTES_PER_ELEMENT = 10  # gather 2+2, grad read 2, scatter-add read+write 4
NORM_BYTES_PER_ELEMENT = 12  # forward read 2 + write 2; backward x, grad read 4, write 2, +2
LOSS_BYTES_PER_LOGIT = 40  # eager fp32 cross entropy over the logits, forward and backward
COMPILED_LOSS_BYTES_PER_LOGIT = 8  # the same compiled: two reads forward, read + write back
ADAMW_BYTES_PER_PARAM = 28  # fused AdamW: param, grad, exp_avg, exp_avg_sq read, 3 written
CLIP_BYTES_PER_PARAM = 12  # the norm reads each fp32 grad, the clip reads and writes it
AMAX_BYTES_PER_PARAM = 4  # precomputed float8 scales: one fp32 read of each float8 weight


@dataclass(frozen=True)
class OutsideBlocks:
    """What one step runs outside its blocks and lm_head's gemms, per GPU, in seconds."""

    embedding_loss_s: float  # embedding forward/backward, the final norm, the loss
    optimizer_s: float  # AdamW over the parameter shard, gradient clipping (norm, all-reduce)
    fp8_extra_s: float = 0.0  # float8 only: precomputed FSDP scales (amax pass, all-reduce)

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_time("OutsideBlocks", f.name, getattr(self, f.name))


def outside_blocks(
    *,
    tokens: int,
    dim: int,
    vocab: int,
    tp: int,
    params_per_gpu: float,
    fp8_params_per_gpu: float,
    stream_s_per_byte: float,
    launch_s: float,
    grad_norm_all_reduce_s: float,
    scales_all_reduce_s: float | None,
    loss_compiled: bool = False,
    loss_parallel: bool = True,
    gather_logits_s: float = 0.0,
) -> OutsideBlocks:
    """The step's parts outside the blocks, from their bytes at a streaming kernel's rate
    (`stream_s_per_byte`, plus `launch_s` per pass), for `tokens` per data-parallel rank:
    - the embedding (torchtitan shards its rows over TP): a gather of tokens x dim bf16
      (read and write), its backward's grad read and scatter-add into the (zeroed) shard;
    - the final RMSNorm on a sequence shard (tokens / tp x dim), forward and backward;
    - the loss over the logits (tokens x vocab / tp with loss parallel): torchtitan's
      `cross_entropy(pred.float(), labels)` runs eager, outside the compiled blocks: the fp32
      upcast (read 2, write 4), log_softmax (read 8 over its passes, write 4), nll, and their
      backward (fill 4, log_softmax backward read 8 write 4, downcast read 4 write 2): 40
      bytes per logit; compiled without TP (`loss_compiled`, torchtitan since 2025-04-02),
      the forward's reduction reads the bf16 logits twice (max, then the sum of
      exponentials) and the fused backward reads them and writes their gradient: 8 bytes
      (under TP, DTensor's loss-parallel decomposition keeps eager's count). Without loss
      parallel (`loss_parallel` False under TP) the logits are all-gathered first
      (`gather_logits_s`, exposed) and every TP rank runs the whole loss, a plain tensor's;
    - the optimizer: torchtitan's default AdamW (`implementation = "fused"`) over this GPU's
      fp32 parameter shard, 28 bytes per parameter; gradient clipping (`max_norm`): the norm
      reads each fp32 gradient, one all-reduce of the total norm across the mesh, then every
      gradient is scaled in place (read and write): 12 bytes per parameter;
    - float8 with FSDP's precomputed scales (`scales_all_reduce_s` not None): one amax pass
      over every float8 weight's fp32 shard and one all-reduce of all the amaxes per step.
    """
    shard = tokens / max(tp, 1)
    embedding = tokens * dim * EMBEDDING_BYTES_PER_ELEMENT + vocab / max(tp, 1) * dim * 2
    norm = shard * dim * NORM_BYTES_PER_ELEMENT
    sharded = loss_parallel and tp > 1
    per_logit = (
        LOSS_BYTES_PER_LOGIT if sharded or not loss_compiled else COMPILED_LOSS_BYTES_PER_LOGIT
    )
    loss = tokens * vocab / (tp if sharded else 1) * per_logit
    embedding_loss = (embedding + norm + loss) * stream_s_per_byte + 10 * launch_s
    embedding_loss += gather_logits_s
    optimizer = (
        params_per_gpu * (ADAMW_BYTES_PER_PARAM + CLIP_BYTES_PER_PARAM) * stream_s_per_byte
        + 3 * launch_s
        + grad_norm_all_reduce_s
    )
    extra = 0.0
    if scales_all_reduce_s is not None and fp8_params_per_gpu:
        extra = fp8_params_per_gpu * AMAX_BYTES_PER_PARAM * stream_s_per_byte
        extra += launch_s + scales_all_reduce_s
    return OutsideBlocks(embedding_loss, optimizer, extra)


@dataclass(frozen=True)
class Component:
    """One part of the step, per GPU, in seconds: bf16, float8 expected, and float8 at its
    band's fast (`fp8_low_s`) and slow (`fp8_high_s`) ends (equal to `fp8_s` where the part has
    no band)."""

    part: Part
    bf16_s: float
    fp8_s: float
    fp8_low_s: float
    fp8_high_s: float
    basis: Basis
    measured: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["part"], out["basis"] = self.part.value, self.basis.value
        return out


def _flat(part: Part, bf16_s: float, fp8_s: float, basis: Basis, **kw: Any) -> Component:
    return Component(part, bf16_s, fp8_s, fp8_s, fp8_s, basis, **kw)


def _scaled(c: Component, factor: float) -> Component:
    return Component(
        c.part,
        c.bf16_s * factor,
        c.fp8_s * factor,
        c.fp8_low_s * factor,
        c.fp8_high_s * factor,
        c.basis,
        c.measured,
    )


COMM_PARTS = (Part.TP_COMM, Part.FSDP_COMM, Part.CP_COMM, Part.EP_COMM)
OUTSIDE_PARTS = (Part.OUTSIDE, Part.OPTIMIZER)
# parts that run once per step over the rank's share, not once per microbatch
ONCE_PER_STEP = (Part.FSDP_COMM, Part.OPTIMIZER)


def pipelined(
    components: tuple[Component, ...], pipeline: Pipeline, send_s: float
) -> tuple[Component, ...]:
    """One rank's step from one microbatch's parts for the whole model: every per-token part
    m / p times (the rank's 1/p of the blocks, balanced stages, for m microbatches), FSDP and
    the optimizer 1 / p times (their rank's share, once per step), and the pipeline's idle time
    (`Pipeline.bubble_share` microbatch times of the rank) with the fill/drain sends."""
    _check_time("pipelined", "send_s", send_s)
    m, p = pipeline.microbatches, pipeline.degree
    out = [_scaled(c, (1 if c.part in ONCE_PER_STEP else m) / p) for c in components]
    one = [_scaled(c, pipeline.bubble_share / p) for c in components if c.part not in ONCE_PER_STEP]
    sends = pipeline.fill_drain_sends * send_s
    bubble = Component(
        Part.PIPELINE,
        sum(c.bf16_s for c in one) + sends,
        sum(c.fp8_s for c in one) + sends,
        sum(c.fp8_low_s for c in one) + sends,
        sum(c.fp8_high_s for c in one) + sends,
        Basis.SCHEDULE,
    )
    return (*out, bubble)


def with_weight_casts(components: tuple[Component, ...], seconds: float) -> tuple[Component, ...]:
    """The linears with the float8 weight casts a step pays once (`seconds`, the rank's) added
    to their float8 time and its band's ends."""
    out = []
    for c in components:
        if c.part is Part.LINEARS:
            c = Component(
                c.part,
                c.bf16_s,
                c.fp8_s + seconds,
                c.fp8_low_s + seconds,
                c.fp8_high_s + seconds,
                c.basis,
                c.measured,
            )
        out.append(c)
    return tuple(out)


def accumulated(components: tuple[Component, ...], passes: int) -> tuple[Component, ...]:
    """A step of `passes` forward/backward passes from one pass's parts: every part `passes`
    times but the optimizer step (and gradient clipping), which runs once. FSDP's collectives
    repeat with the passes: torchtitan's accumulation loop (train.py since 8570415c3) leaves
    FSDP2's gradient sync on, so each backward reduce-scatters into the sharded gradients and
    each forward gathers the resharded weights again."""
    return tuple(c if c.part is Part.OPTIMIZER else _scaled(c, passes) for c in components)


@dataclass(frozen=True)
class Reconciliation:
    """A measured bf16 step beside the modelled one. `speedup_gap_on_linears`: the whole gap
    on the linears (float8 speeds it up as it does them); `speedup_gap_unchanged`: the whole
    gap on what float8 does not change. The expected step spreads it over every part."""

    measured_s: float
    modelled_s: float
    speedup_proportional: float
    speedup_gap_on_linears: float
    speedup_gap_unchanged: float

    @property
    def gap_s(self) -> float:
        """What the measured step holds beyond the model (negative: the model over-counts)."""
        return self.measured_s - self.modelled_s

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["gap_s"] = self.gap_s
        return out


@dataclass(frozen=True)
class StepSummary:
    """The step speedup and where it comes from; every time in seconds per GPU per step.
    `components` are the model's parts and add up to `modelled_bf16_s` and `modelled_fp8_s`;
    with a measured step, `bf16_s` is it and `reconciliation` says how the model meets it."""

    bf16_s: float
    fp8_s: float
    speedup: float  # bf16_s / fp8_s
    # the speedup at the band's slow and fast ends (the linears' bands and, with a measured
    # step, the attributions of its gap)
    speedup_low: float
    speedup_high: float
    step_measured: bool  # True: bf16_s is the measured step (--step-ms)
    layers: int
    components: tuple[Component, ...]
    lm_head_bf16_s: float = 0.0  # within the linears: lm_head (torchtitan's output)
    lm_head_fp8_s: float = 0.0
    reconciliation: Reconciliation | None = None
    notes: tuple[Note, ...] = ()

    def __post_init__(self) -> None:
        for name in ("bf16_s", "fp8_s", "speedup", "speedup_low", "speedup_high"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise StepError(f"StepSummary: {name} must be finite (got {value!r})")

    def part(self, part: Part) -> Component:
        return next(c for c in self.components if c.part is part)

    @property
    def modelled_bf16_s(self) -> float:
        return sum(c.bf16_s for c in self.components)

    @property
    def modelled_fp8_s(self) -> float:
        return sum(c.fp8_s for c in self.components)

    @property
    def linear_bf16_s(self) -> float:
        return self.part(Part.LINEARS).bf16_s

    @property
    def linear_fp8_s(self) -> float:
        return self.part(Part.LINEARS).fp8_s

    @property
    def linear_share(self) -> float:
        """The linears' share of the modelled bf16 step: the most float8 can act on."""
        return self.linear_bf16_s / self.modelled_bf16_s

    @property
    def comm_bf16_s(self) -> float:
        return sum(c.bf16_s for c in self.components if c.part in COMM_PARTS)

    @property
    def comm_fp8_s(self) -> float:
        return sum(c.fp8_s for c in self.components if c.part in COMM_PARTS)

    @property
    def recompute_bf16_s(self) -> float:
        return self.part(Part.RECOMPUTE).bf16_s

    @property
    def recompute_fp8_s(self) -> float:
        return self.part(Part.RECOMPUTE).fp8_s

    @property
    def outside_bf16_s(self) -> float:
        return self.part(Part.OUTSIDE).bf16_s + self.part(Part.OPTIMIZER).bf16_s

    def to_dict(self) -> dict[str, Any]:
        """The --out contract: the step's figures, its components, the reconciliation with a
        measured step and the notes (as records; renderers add their sentences)."""
        out: dict[str, Any] = {
            name: getattr(self, name)
            for name in (
                "bf16_s",
                "fp8_s",
                "speedup",
                "speedup_low",
                "speedup_high",
                "step_measured",
                "layers",
                "modelled_bf16_s",
                "modelled_fp8_s",
                "linear_bf16_s",
                "linear_fp8_s",
                "linear_share",
                "comm_bf16_s",
                "comm_fp8_s",
                "recompute_bf16_s",
                "recompute_fp8_s",
                "lm_head_bf16_s",
                "lm_head_fp8_s",
                "outside_bf16_s",
            )
        }
        out["components"] = [c.to_dict() for c in self.components]
        rec = self.reconciliation
        out["reconciliation"] = None if rec is None else rec.to_dict()
        out["notes"] = [n.to_dict() for n in self.notes]
        return out


def check_measured_step(step_s: float, gemm_floor_s: float) -> None:
    """A measured bf16 step is refused only where physics rules it out: shorter than its bf16
    gemms' FLOPs at the GPU's peak (`gemm_floor_s`)."""
    _check_time("step", "step_s", step_s)
    if step_s < gemm_floor_s:
        raise StepError(
            f"a measured step of {step_s * 1e3:.4g} ms is shorter than its bf16 gemms at the "
            f"GPU's peak ({gemm_floor_s * 1e3:.4g} ms): check it"
        )


def step_summary(
    *,
    bf16: BlockTimes,
    fp8: BlockTimes,
    layers: int,
    lm_head_bf16_s: float,
    outside: OutsideBlocks,
    gemm_floor_s: float,
    lm_head_fp8_s: float | None = None,
    step_s: float | None = None,
    notes: tuple[Note, ...] | list[Note] = (),
    fp8_band_s: tuple[float, float] = (0.0, 0.0),
    block_basis: Basis = Basis.PER_LAYER,
    pipeline: Pipeline | None = None,
    send_s: float = 0.0,
    context_parallel: bool = False,
    accumulation: int = 1,
) -> StepSummary:
    """The step in both precisions (see the module docstring). `lm_head_fp8_s` None: lm_head
    stays bf16 (torchtitan's llama configs filter "output"). `gemm_floor_s`: the step's bf16
    gemms' FLOPs at the GPU's peak, the shortest step physics allows. `fp8_band_s`: what the
    float8 linears' time moves by, per step, at their band's fast and slow ends.
    `block_basis`: what the block's times rest on (per-layer rows: its other compute is
    attention alone). `pipeline`: the parts above are one microbatch's for the whole model
    (`gemm_floor_s` too), the step one rank's (`pipelined`; `send_s`: one send between
    stages). `context_parallel`: the blocks' key/value exchange is a part of its own.
    `accumulation`: the parts above are one forward/backward pass's, the step that many of
    them and one optimizer step (`accumulated`)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise StepError(f"layers must be an integer >= 1 (got {layers!r})")
    if isinstance(accumulation, bool) or not isinstance(accumulation, int) or accumulation < 1:
        raise StepError(f"accumulation must be an integer >= 1 (got {accumulation!r})")
    _check_time("step", "lm_head_bf16_s", lm_head_bf16_s)
    _check_time("step", "gemm_floor_s", gemm_floor_s)
    if bf16.overhead_s:
        raise StepError("bf16 BlockTimes carries float8 overhead; give it to the fp8 side")
    notes = list(notes)
    head_fp8 = lm_head_bf16_s if lm_head_fp8_s is None else lm_head_fp8_s
    _check_time("step", "lm_head_fp8_s", head_fp8)
    if lm_head_fp8_s is None:
        notes.append(note(Topic.LM_HEAD_BF16))
    fast_s, slow_s = fp8_band_s
    other = block_basis
    if block_basis is Basis.PER_LAYER:
        other = Basis.ATTENTION if bf16.other_compute_s else Basis.NOT_MODELLED
    # in a step of several microbatches the cached weight casts leave the per-microbatch
    # linears, added back once per step below
    several = accumulation > 1 or (pipeline is not None and pipeline.microbatches > 1)
    once_s = layers * fp8.weight_cast_once_s if several else 0.0
    linear_fp8 = layers * fp8.linear_s + head_fp8 - once_s
    components: tuple[Component, ...] = (
        Component(
            Part.LINEARS,
            layers * bf16.linear_s + lm_head_bf16_s,
            linear_fp8,
            linear_fp8 + fast_s,
            linear_fp8 + slow_s,
            block_basis,
        ),
        _flat(
            Part.OTHER_COMPUTE, layers * bf16.other_compute_s, layers * fp8.other_compute_s, other
        ),
        _flat(Part.TP_COMM, layers * bf16.tp_comm_s, layers * fp8.tp_comm_s, Basis.COLLECTIVES),
        _flat(
            Part.FSDP_COMM, layers * bf16.fsdp_comm_s, layers * fp8.fsdp_comm_s, Basis.COLLECTIVES
        ),
        _flat(Part.RECOMPUTE, layers * bf16.recompute_s, layers * fp8.recompute_s, block_basis),
        _flat(Part.OUTSIDE, outside.embedding_loss_s, outside.embedding_loss_s, Basis.BYTES),
        _flat(
            Part.OPTIMIZER,
            outside.optimizer_s,
            outside.optimizer_s + outside.fp8_extra_s,
            Basis.BYTES,
        ),
    )
    if context_parallel:
        cp = _flat(Part.CP_COMM, layers * bf16.cp_comm_s, layers * fp8.cp_comm_s, Basis.COLLECTIVES)
        components = (*components, cp)
    if bf16.ep_comm_s or fp8.ep_comm_s:
        ep = _flat(Part.EP_COMM, layers * bf16.ep_comm_s, layers * fp8.ep_comm_s, Basis.COLLECTIVES)
        components = (*components, ep)
    if pipeline is not None:
        components = pipelined(components, pipeline, send_s)
        gemm_floor_s *= pipeline.rank_share
        # the linears' band moves them in every microbatch and in the idle time alike
        per_step = (pipeline.microbatches + pipeline.bubble_share) / pipeline.degree
        fast_s, slow_s = fast_s * per_step, slow_s * per_step
        lm_head_bf16_s *= pipeline.rank_share
        head_fp8 *= pipeline.rank_share
    if accumulation > 1:
        components = accumulated(components, accumulation)
        gemm_floor_s *= accumulation
        fast_s, slow_s = fast_s * accumulation, slow_s * accumulation
        lm_head_bf16_s *= accumulation
        head_fp8 *= accumulation
    if once_s:
        components = with_weight_casts(
            components, once_s / (1 if pipeline is None else pipeline.degree)
        )
    model_bf16 = sum(c.bf16_s for c in components)
    model_fp8 = sum(c.fp8_s for c in components)
    if not (fast_s <= 0 <= slow_s and model_fp8 + fast_s > 0):
        raise StepError(f"the float8 band {fp8_band_s} does not bracket the expected step")
    rec = None
    if step_s is None:
        notes.append(
            note(
                Topic.MODELLED_STEP,
                outside_ms=sum(c.bf16_s for c in components if c.part in OUTSIDE_PARTS) * 1e3,
            )
        )
        bf16_s, fp8_s = model_bf16, model_fp8
        slow_end, fast_end = model_fp8 + slow_s, model_fp8 + fast_s
    else:
        check_measured_step(step_s, gemm_floor_s)
        rec = reconcile(
            step_s=step_s,
            modelled_bf16_s=model_bf16,
            modelled_fp8_s=model_fp8,
            linear_bf16_s=components[0].bf16_s,
            linear_fp8_s=components[0].fp8_s,
        )
        notes.append(
            note(
                Topic.RECONCILED,
                measured_ms=step_s * 1e3,
                modelled_ms=model_bf16 * 1e3,
                gap=rec.gap_s / step_s,
                measured=True,
            )
        )
        scale = step_s / model_bf16
        bf16_s, fp8_s = step_s, step_s / rec.speedup_proportional
        ends = (step_s / rec.speedup_gap_on_linears, step_s / rec.speedup_gap_unchanged, fp8_s)
        slow_end, fast_end = max(ends) + slow_s * scale, min(ends) + fast_s * scale
    return StepSummary(
        bf16_s=bf16_s,
        fp8_s=fp8_s,
        speedup=bf16_s / fp8_s,
        speedup_low=bf16_s / slow_end,
        speedup_high=bf16_s / fast_end,
        step_measured=rec is not None,
        layers=layers,
        components=components,
        lm_head_bf16_s=lm_head_bf16_s,
        lm_head_fp8_s=head_fp8,
        reconciliation=rec,
        notes=tuple(notes),
    )


def reconcile(
    *,
    step_s: float,
    modelled_bf16_s: float,
    modelled_fp8_s: float,
    linear_bf16_s: float,
    linear_fp8_s: float,
) -> Reconciliation:
    """A measured bf16 step against the model: the float8 step when the gap between them is
    spread over every part in proportion to its modelled bf16 time, put wholly on the linears
    (scaled by their float8/bf16 ratio; where a negative gap exceeds them, proportionally),
    or wholly on what float8 leaves alone."""
    gap = step_s - modelled_bf16_s
    proportional = modelled_bf16_s / modelled_fp8_s
    on_linears = proportional
    if linear_bf16_s + gap > 0:
        on_linears = step_s / (modelled_fp8_s + gap * linear_fp8_s / linear_bf16_s)
    unchanged = proportional
    if modelled_fp8_s + gap > 0:
        unchanged = step_s / (modelled_fp8_s + gap)
    return Reconciliation(step_s, modelled_bf16_s, proportional, on_linears, unchanged)
