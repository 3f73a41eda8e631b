"""One training step per GPU, bf16 against float8: the blocks, lm_head, and the rest.

Inputs are one transformer block's time parts per precision (`BlockTimes`): its linears'
gemms, the overhead kernels float8 adds (casts, amax, scales; zero in bf16), the rest of its
compute (attention, norms, activations: the same in both), its exposed TP and FSDP
communication and what its checkpointing recomputes. A step is `layers` blocks, lm_head (kept
in bf16 unless its float8 time is given: torchtitan's default filter is `output`) and
everything else (embedding, loss, optimizer), which float8 does not change.

With a measured bf16 step (`--step-ms`) that step is the bf16 time and float8 changes it by
the modelled difference of the blocks and lm_head: fp8 = step - (modelled bf16 - modelled
fp8). Without it the step is modelled: blocks x layers + lm_head + `rest_s` (the caller's
estimate of embedding, loss and optimizer), and a note says so.

The answer is typed: one `Component` per part of the step (linears, other compute, TP and
FSDP collectives, recompute, the rest), each with bf16 time, float8 time and its band's ends,
and what it rests on (`Basis`); the notes are `f8roof.notes.Note` records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from f8roof.errors import ModelError
from f8roof.notes import Note, Topic, note


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

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_time("BlockTimes", f.name, getattr(self, f.name))

    @property
    def linear_s(self) -> float:
        """The linears' part: gemms and float8 overhead."""
        return self.linear_gemm_s + self.overhead_s

    @property
    def comm_exposed_s(self) -> float:
        return self.tp_comm_s + self.fsdp_comm_s

    @property
    def total_s(self) -> float:
        return self.linear_s + self.other_compute_s + self.comm_exposed_s + self.recompute_s


class Part(str, Enum):
    LINEARS = "linears"  # every linear's gemms and float8 overhead, lm_head included
    OTHER_COMPUTE = "attention and other compute"
    TP_COMM = "TP collectives"
    FSDP_COMM = "FSDP collectives"
    RECOMPUTE = "recompute"
    REST = "embedding, loss, optimizer"


class Basis(str, Enum):
    """What a component's times rest on."""

    PER_LAYER = "per-layer estimates"  # the recommendation's rows
    GRAPHS = "the sharded block's graphs"  # compiled, or the shipped fits of compiles
    ATTENTION = "FlashAttention-2 throughput"  # timing/attention.py
    COLLECTIVES = "nccl-tests bus bandwidth"  # timing/comm.py
    MEASURED_STEP = "the measured step"  # --step-ms minus the model
    NOT_MODELLED = "not modelled"


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


def _flat(part: Part, bf16_s: float, fp8_s: float, basis: Basis, **kw) -> Component:
    return Component(part, bf16_s, fp8_s, fp8_s, fp8_s, basis, **kw)


@dataclass(frozen=True)
class StepSummary:
    """The step speedup and where it comes from; every time in seconds per GPU per step."""

    bf16_s: float
    fp8_s: float
    speedup: float  # bf16_s / fp8_s
    # the speedup with the float8 linears at their band's slow and fast ends (the expected
    # speedup where the rows carry no band)
    speedup_low: float
    speedup_high: float
    step_measured: bool  # True: bf16_s is the measured step (--step-ms)
    layers: int
    components: tuple[Component, ...]
    lm_head_bf16_s: float = 0.0  # within the linears: lm_head (torchtitan's output)
    lm_head_fp8_s: float = 0.0
    notes: tuple[Note, ...] = ()

    def __post_init__(self) -> None:
        for name in ("bf16_s", "fp8_s", "speedup", "speedup_low", "speedup_high"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise StepError(f"StepSummary: {name} must be finite (got {value!r})")

    def part(self, part: Part) -> Component:
        return next(c for c in self.components if c.part is part)

    @property
    def linear_bf16_s(self) -> float:
        return self.part(Part.LINEARS).bf16_s

    @property
    def linear_fp8_s(self) -> float:
        return self.part(Part.LINEARS).fp8_s

    @property
    def linear_share(self) -> float:
        """The linears' share of the bf16 step: the most float8 can act on."""
        return self.linear_bf16_s / self.bf16_s

    @property
    def comm_bf16_s(self) -> float:
        return self.part(Part.TP_COMM).bf16_s + self.part(Part.FSDP_COMM).bf16_s

    @property
    def comm_fp8_s(self) -> float:
        return self.part(Part.TP_COMM).fp8_s + self.part(Part.FSDP_COMM).fp8_s

    @property
    def recompute_bf16_s(self) -> float:
        return self.part(Part.RECOMPUTE).bf16_s

    @property
    def recompute_fp8_s(self) -> float:
        return self.part(Part.RECOMPUTE).fp8_s

    @property
    def rest_s(self) -> float:
        return self.part(Part.REST).bf16_s

    def to_dict(self) -> dict[str, Any]:
        """The --out contract: the step's figures, its components and its notes (as records;
        renderers add their sentences)."""
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
                "linear_bf16_s",
                "linear_fp8_s",
                "linear_share",
                "comm_bf16_s",
                "comm_fp8_s",
                "recompute_bf16_s",
                "recompute_fp8_s",
                "lm_head_bf16_s",
                "lm_head_fp8_s",
                "rest_s",
            )
        }
        out["components"] = [c.to_dict() for c in self.components]
        out["notes"] = [n.to_dict() for n in self.notes]
        return out


def step_summary(
    *,
    bf16: BlockTimes,
    fp8: BlockTimes,
    layers: int,
    lm_head_bf16_s: float,
    lm_head_fp8_s: float | None = None,
    step_s: float | None = None,
    rest_s: float = 0.0,
    notes: tuple[Note, ...] | list[Note] = (),
    fp8_band_s: tuple[float, float] = (0.0, 0.0),
    block_basis: Basis = Basis.PER_LAYER,
) -> StepSummary:
    """The step in both precisions (see the module docstring). `lm_head_fp8_s` None: lm_head
    stays bf16 (torchtitan's llama configs filter "output"). `fp8_band_s`: what the float8
    linears' time moves by, per step, at their band's fast and slow ends. `block_basis`: what
    the block's times rest on (per-layer rows: its other compute is attention alone)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise StepError(f"layers must be an integer >= 1 (got {layers!r})")
    _check_time("step", "lm_head_bf16_s", lm_head_bf16_s)
    _check_time("step", "rest_s", rest_s)
    if bf16.overhead_s:
        raise StepError("bf16 BlockTimes carries float8 overhead; give it to the fp8 side")
    notes = list(notes)
    head_fp8 = lm_head_bf16_s if lm_head_fp8_s is None else lm_head_fp8_s
    _check_time("step", "lm_head_fp8_s", head_fp8)
    if lm_head_fp8_s is None:
        notes.append(note(Topic.LM_HEAD_BF16))
    model_bf16 = layers * bf16.total_s + lm_head_bf16_s
    model_fp8 = layers * fp8.total_s + head_fp8
    if step_s is not None:
        _check_time("step", "step_s", step_s)
        if step_s <= 0:
            raise StepError(f"the measured step must be > 0 s (got {step_s!r})")
        if rest_s:
            raise StepError("rest_s is for a modelled step; a measured step already holds it")
        rest = step_s - model_bf16
        if rest < 0:
            notes.append(
                note(
                    Topic.MODEL_EXCEEDS_STEP,
                    model_ms=model_bf16 * 1e3,
                    step_ms=step_s * 1e3,
                    measured=True,
                )
            )
        bf16_s = step_s
        fp8_s = step_s - (model_bf16 - model_fp8)
    else:
        notes.append(note(Topic.MODELLED_STEP, rest_ms=rest_s * 1e3))
        rest = rest_s
        bf16_s = model_bf16 + rest_s
        fp8_s = model_fp8 + rest_s
    if fp8_s <= 0:
        raise StepError("the modelled float8 step is not positive: the model does not fit")
    fast_s, slow_s = fp8_band_s
    if not (fast_s <= 0 <= slow_s and fp8_s + fast_s > 0):
        raise StepError(f"the float8 band {fp8_band_s} does not bracket the expected step")
    linear_fp8 = layers * fp8.linear_s + head_fp8
    other = block_basis
    if block_basis is Basis.PER_LAYER:
        other = Basis.ATTENTION if bf16.other_compute_s else Basis.NOT_MODELLED
    rest_basis = Basis.MEASURED_STEP if step_s is not None else Basis.NOT_MODELLED
    components = (
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
        _flat(Part.REST, rest, rest, rest_basis, measured=step_s is not None),
    )
    return StepSummary(
        bf16_s=bf16_s,
        fp8_s=fp8_s,
        speedup=bf16_s / fp8_s,
        speedup_low=bf16_s / (fp8_s + slow_s),
        speedup_high=bf16_s / (fp8_s + fast_s),
        step_measured=step_s is not None,
        layers=layers,
        components=components,
        lm_head_bf16_s=lm_head_bf16_s,
        lm_head_fp8_s=head_fp8,
        notes=tuple(notes),
    )
