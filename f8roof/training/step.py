"""One training step per GPU, bf16 against float8: the blocks, lm_head, and the rest.

Inputs are one transformer block's time parts per precision (`BlockTimes`): its linears'
gemms, the overhead kernels float8 adds (casts, amax, scales; zero in bf16), the rest of its
compute (attention, norms, activations: the same in both), its exposed communication and what
its checkpointing recomputes. A step is `layers` blocks, lm_head (kept in bf16 unless its
float8 time is given: torchtitan's default filter is `output`) and everything else
(embedding, loss, optimizer), which float8 does not change.

With a measured bf16 step (`--step-ms`) that step is the bf16 time and float8 changes it by
the modelled difference of the blocks and lm_head: fp8 = step - (modelled bf16 - modelled
fp8). Without it the step is modelled: blocks x layers + lm_head + `rest_s` (the caller's
estimate of embedding, loss and optimizer), and says so in `assumptions`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from f8roof.errors import ModelError


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
    comm_exposed_s: float = 0.0  # collectives that do not hide behind compute
    recompute_s: float = 0.0  # what checkpointing runs again in the backward

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_time("BlockTimes", f.name, getattr(self, f.name))

    @property
    def linear_s(self) -> float:
        """The linears' part: gemms and float8 overhead."""
        return self.linear_gemm_s + self.overhead_s

    @property
    def total_s(self) -> float:
        return (
            self.linear_gemm_s
            + self.overhead_s
            + self.other_compute_s
            + self.comm_exposed_s
            + self.recompute_s
        )


@dataclass(frozen=True)
class StepSummary:
    """The step speedup and where it comes from; every time in seconds per GPU per step."""

    bf16_s: float
    fp8_s: float
    speedup: float  # bf16_s / fp8_s
    step_measured: bool  # True: bf16_s is the measured step (--step-ms)
    layers: int
    linear_bf16_s: float  # all blocks' linears (gemms + overhead) and lm_head
    linear_fp8_s: float
    linear_share: float  # linear_bf16_s / bf16_s: the most float8 can act on
    comm_bf16_s: float  # exposed communication, all blocks
    comm_fp8_s: float
    recompute_bf16_s: float
    recompute_fp8_s: float
    lm_head_bf16_s: float
    lm_head_fp8_s: float
    rest_s: float  # embedding, loss, optimizer: measured step minus the model, or modelled
    assumptions: tuple[str, ...] = ()
    # the speedup with the float8 linears at their band's slow and fast ends (the expected
    # speedup where the rows carry no band)
    speedup_low: float = 0.0
    speedup_high: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("step_measured", "layers", "assumptions"):
                continue
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise StepError(f"StepSummary: {f.name} must be finite (got {value!r})")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["assumptions"] = list(self.assumptions)
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
    assumptions: tuple[str, ...] | list[str] = (),
    fp8_band_s: tuple[float, float] = (0.0, 0.0),
) -> StepSummary:
    """The step in both precisions (see the module docstring). `lm_head_fp8_s` None: lm_head
    stays bf16 (torchtitan's llama configs filter "output"). `fp8_band_s`: what the float8
    linears' time moves by, per step, at their band's fast and slow ends."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise StepError(f"layers must be an integer >= 1 (got {layers!r})")
    _check_time("step", "lm_head_bf16_s", lm_head_bf16_s)
    _check_time("step", "rest_s", rest_s)
    if bf16.overhead_s:
        raise StepError("bf16 BlockTimes carries float8 overhead; give it to the fp8 side")
    notes = list(assumptions)
    head_fp8 = lm_head_bf16_s if lm_head_fp8_s is None else lm_head_fp8_s
    _check_time("step", "lm_head_fp8_s", head_fp8)
    if lm_head_fp8_s is None:
        notes.append("lm_head (torchtitan's output) stays bf16")
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
                f"the modelled blocks and lm_head ({model_bf16 * 1e3:.1f} ms) exceed the "
                f"measured step ({step_s * 1e3:.1f} ms): the model over-counts bf16 time"
            )
        bf16_s = step_s
        fp8_s = step_s - (model_bf16 - model_fp8)
    else:
        notes.append(
            f"modelled step (no measured step; pass --step-ms): blocks x layers + lm_head + "
            f"{rest_s * 1e3:.1f} ms for embedding, loss and optimizer"
        )
        rest = rest_s
        bf16_s = model_bf16 + rest_s
        fp8_s = model_fp8 + rest_s
    if fp8_s <= 0:
        raise StepError("the modelled float8 step is not positive: the model does not fit")
    linear_bf16 = layers * bf16.linear_s + lm_head_bf16_s
    fast_s, slow_s = fp8_band_s
    if not (fast_s <= 0 <= slow_s and fp8_s + fast_s > 0):
        raise StepError(f"the float8 band {fp8_band_s} does not bracket the expected step")
    return StepSummary(
        bf16_s=bf16_s,
        fp8_s=fp8_s,
        speedup=bf16_s / fp8_s,
        step_measured=step_s is not None,
        layers=layers,
        linear_bf16_s=linear_bf16,
        linear_fp8_s=layers * fp8.linear_s + head_fp8,
        linear_share=linear_bf16 / bf16_s,
        comm_bf16_s=layers * bf16.comm_exposed_s,
        comm_fp8_s=layers * fp8.comm_exposed_s,
        recompute_bf16_s=layers * bf16.recompute_s,
        recompute_fp8_s=layers * fp8.recompute_s,
        lm_head_bf16_s=lm_head_bf16_s,
        lm_head_fp8_s=head_fp8,
        rest_s=rest,
        assumptions=tuple(notes),
        speedup_low=bf16_s / (fp8_s + slow_s),
        speedup_high=bf16_s / (fp8_s + fast_s),
    )
