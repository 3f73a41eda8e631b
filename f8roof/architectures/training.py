"""A model at training scale: the local (M, K, N) each GPU runs, and what the step does with it.

`TrainingSetup` is how the model is trained: tensor parallel degree (`tp`), expert parallel
degree (`ep`), FSDP, activation checkpointing (`recompute`) and, when known, the measured bf16
step time. `local_layers` turns an `Architecture` and the tokens each GPU processes per step
into one `LocalLayer` per layer type: the shape its gemms run at on one GPU.

Conventions (torchtitan's, the framework torchao's float8 training is developed against):
- tokens: the tokens of one data-parallel rank per step (local batch x sequence length). Every
  rank of a TP group runs all of them through its shard (sequence parallelism all-gathers the
  sequence before a column-parallel linear), so M is the tokens for every dense linear.
- TP: column-parallel linears run N / tp, row-parallel ones K / tp, replicated ones the full
  shape (`architectures.TPStyle`). A degree that does not divide a sharded dim is an error.
- routed experts (MoE): each GPU holds experts / ep of a layer's experts and runs them as one
  grouped gemm per projection. With ep = 1 the experts are tensor-parallel like a dense MLP
  (torchtitan's TensorParallel on GroupedExperts) and each GPU routes tokens x top_k rows. With
  ep > 1 they are whole (torchtitan refuses expert-tensor-parallelism for float8 grouped gemms)
  and, with tp > 1 too, TP is borrowed for EP: each GPU routes tokens / tp of the tokens
  (torchtitan's ReordererSequenceParallel). After the all-to-all, a GPU's experts see the rows
  its EP group routed to them; with balanced routing that is, per expert,
      tokens per expert = (tokens / tp if ep > 1 else tokens) x top_k / (experts / ep)
  (with ep = 1, tokens x top_k / experts). Float8 grouped gemms need every group's row count a
  multiple of 16 (torchao 0.18, torchao/prototype/moe_training/fp8_grouped_mm.py:
  `pad_token_groups(A, offs, alignment_size=16)`, "Group sizes must be divisible by 16"), and
  an empty expert is padded to one alignment unit (moe_training/ep/kernels.py
  `generate_permute_indices`: `clamp_min(tokens, alignment)`), so M = max(16, ceil16(tokens per
  expert)). Balanced routing is the simplification: real routers are imbalanced, the sum of the
  rows is what it is, but the per-expert shapes spread around the mean.
- FSDP shards weights between uses; each layer's gemms run the all-gathered full weight, so it
  changes no gemm shape. It is noted in the output (float8 all-gather is not modelled).

Public measurements this reproduces the shape of: Llama3-8B with TP2 on 4 H100s ran rowwise
float8 slower than bf16 (5189 vs 5378 tokens/s) because the sharded wk/wv became too small
(pytorch/torchtitan#1207); float8 rowwise grouped gemms gave 1.54x on Llama4 expert shapes but
+10.4% end to end at 2 experts per device and +1.1% at 16 (pytorch/ao#2756, pytorch/ao#2864);
a DeepSeek-V3-16B MoE layer ran 0.95x on B200 (pytorch/torchtitan#2086).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from f8roof.architectures.catalog import (
    Architecture,
    ArchitectureError,
    NamedLinear,
    TPStyle,
    check_tokens,
)

# torchao 0.18 torchao/prototype/moe_training/fp8_grouped_mm.py pads token groups with
# `alignment_size=16`; `Float8TrainingOpConfig.pad_token_groups_for_grouped_mm` ("pad the
# token group sizes to multiples of 16"). MXFP8 uses 32; not modelled here.
GROUPED_M_ALIGNMENT = 16


class ParallelismError(ArchitectureError):
    """A parallel degree that does not fit the model (does not divide a dim, too many experts
    per device). One line, exit code 2."""


class Recompute(str, Enum):
    """Activation checkpointing of the transformer blocks.

    - `none`: nothing recomputed.
    - `full`: the backward reruns every block's forward (torchtitan's `mode = "full"`): each
      linear's forward gemm and its forward float8 overhead (casts of input and weight) run
      twice, in both precisions.
    - `selective`: torchtitan's op-level SAC, which saves the outputs of matmuls (and
      attention, reductions) and recomputes the cheap ops around them. f8roof assumes it saves
      every linear's output in both precisions, so linears are not recomputed and nothing
      changes. Caveat: torchtitan's policy recomputes every second `aten.mm` (a bf16 linear) to
      save memory, and whether float8's `_scaled_mm` is saved depends on its save list; neither
      is modelled.
    """

    NONE = "none"
    FULL = "full"
    SELECTIVE = "selective"

    @classmethod
    def from_name(cls, name: str | Recompute) -> Recompute:
        try:
            return cls(name)
        except ValueError:
            raise ParallelismError(
                f"unknown recompute {name!r}; use none, full or selective"
            ) from None


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParallelismError(f"{name} must be a positive integer (got {value!r})")
    return value


@dataclass(frozen=True)
class TrainingSetup:
    """How the model trains: parallel degrees, checkpointing, and the measured bf16 step."""

    tp: int = 1
    ep: int = 1
    fsdp: bool = False
    recompute: Recompute = Recompute.NONE
    step_s: float | None = None  # measured bf16 step time, for the end-to-end speedup

    def __post_init__(self) -> None:
        _positive_int("--tp", self.tp)
        _positive_int("--ep", self.ep)
        if not isinstance(self.recompute, Recompute):
            raise ParallelismError(f"recompute must be a Recompute (got {self.recompute!r})")
        if not isinstance(self.fsdp, bool):
            raise ParallelismError(f"fsdp must be True or False (got {self.fsdp!r})")
        if self.step_s is not None and not (
            isinstance(self.step_s, (int, float)) and math.isfinite(self.step_s) and self.step_s > 0
        ):
            raise ParallelismError(f"--step-ms must be a positive number (got {self.step_s!r})")

    @classmethod
    def from_options(
        cls,
        *,
        tp: int = 1,
        ep: int = 1,
        fsdp: bool = False,
        recompute: str | Recompute = "none",
        step_ms: float | None = None,
    ) -> TrainingSetup:
        """From user-facing values (the CLI's and module_filter's): recompute by name, the
        step in milliseconds."""
        if step_ms is not None and not (
            isinstance(step_ms, (int, float))
            and not isinstance(step_ms, bool)
            and math.isfinite(step_ms)
            and step_ms > 0
        ):
            raise ParallelismError(f"--step-ms must be a positive number (got {step_ms!r})")
        return cls(
            tp=tp,
            ep=ep,
            fsdp=fsdp,
            recompute=Recompute.from_name(recompute),
            step_s=None if step_ms is None else step_ms / 1e3,
        )

    @property
    def is_default(self) -> bool:
        return self == TrainingSetup()

    def replace_step(self, step_s: float | None) -> TrainingSetup:
        return replace(self, step_s=step_s)

    @property
    def is_parallel(self) -> bool:
        return self.tp > 1 or self.ep > 1 or self.fsdp

    def describe(self) -> str:
        """'TP 2 (column-parallel shard N, row-parallel shard K), EP 8, FSDP, recompute full'."""
        parts = []
        if self.tp > 1:
            parts.append(f"TP {self.tp} (column-parallel linears shard N, row-parallel shard K)")
        if self.ep > 1:
            parts.append(f"EP {self.ep}")
        if self.fsdp:
            parts.append("FSDP")
        if self.recompute is not Recompute.NONE:
            parts.append(f"recompute {self.recompute.value}")
        return ", ".join(parts) or "one GPU, no parallelism"

    def notes(self) -> list[str]:
        """What the setup changes and what it does not model, one line each."""
        lines = []
        if self.tp > 1:
            lines.append(
                f"TP {self.tp}: each GPU runs its shard (column-parallel: N / {self.tp}, "
                f"row-parallel: K / {self.tp}, replicated: whole) at M = all the tokens "
                f"(sequence parallel all-gathers them); TP communication is not in the times"
            )
        if self.fsdp:
            lines.append(
                "FSDP: weights are all-gathered before use, so gemm shapes are the ones above; "
                "all-gather and reduce-scatter time (and float8 all-gather) are not modelled"
            )
        if self.recompute is Recompute.FULL:
            lines.append(
                "recompute full: every linear's forward gemm and forward float8 overhead run "
                "again in the backward, in both precisions (included above)"
            )
        elif self.recompute is Recompute.SELECTIVE:
            lines.append(
                "recompute selective: op-level SAC assumed to save every linear's output, so "
                "linears are not recomputed (torchtitan recomputes every second bf16 mm; not "
                "modelled)"
            )
        return lines


ONE_GPU = TrainingSetup()  # the default: no parallelism, no recompute, no measured step


@dataclass(frozen=True)
class LocalLayer:
    """One layer type as one GPU runs it: its gemms' (M, K, N) and how it got there."""

    linear: NamedLinear
    M: int
    K: int
    N: int
    experts_per_device: int = 0  # routed experts this GPU runs per layer (0: a dense linear)
    tokens_per_expert: float = math.nan  # before padding; nan for dense linears
    notes: tuple[str, ...] = field(default=())

    @property
    def grouped(self) -> bool:
        return self.experts_per_device > 0

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.M, self.K, self.N)


def padded_group_rows(rows: float, alignment: int = GROUPED_M_ALIGNMENT) -> int:
    """Rows of one group of a float8 grouped gemm: the expert's tokens rounded up to the
    alignment, and at least one alignment unit (an empty expert is padded too)."""
    whole = max(1, math.ceil(rows))
    return max(alignment, -(-whole // alignment) * alignment)


def tokens_per_expert(
    tokens: int, *, experts: int, top_k: int, tp: int = 1, ep: int = 1
) -> tuple[float, int]:
    """(mean tokens each local expert receives, experts per device) under balanced routing."""
    if experts % ep:
        raise ParallelismError(f"--ep {ep} does not divide the {experts} routed experts of a layer")
    routed_by_device = tokens / tp if ep > 1 else tokens
    per_device = experts // ep
    return routed_by_device * top_k / per_device, per_device


def _shard(linear: NamedLinear, tp: int, dim: str) -> int:
    size = getattr(linear, dim)
    if size % tp:
        style = linear.tp.value
        raise ParallelismError(
            f"--tp {tp} does not divide {dim} = {size} of {linear.fqn} ({style}-parallel)"
        )
    return size // tp


def local_layers(
    architecture: Architecture, tokens: int, setup: TrainingSetup = ONE_GPU
) -> list[LocalLayer]:
    """One `LocalLayer` per layer type: the (M, K, N) each GPU's gemms run (see the module
    docstring for the conventions). Raises ParallelismError for a degree that does not fit."""
    tokens = check_tokens(tokens)
    tp, ep = setup.tp, setup.ep
    if ep > 1 and not architecture.is_moe:
        raise ParallelismError(f"--ep {ep}: {architecture.name} has no routed experts")
    if ep > 1 and tp > 1 and tokens % tp:
        raise ParallelismError(
            f"--tokens {tokens}: with --ep, TP ranks split the tokens routed to experts, and "
            f"--tp {tp} does not divide them"
        )
    out = []
    for linear in architecture.linears:
        K, N, notes = linear.K, linear.N, []
        # routed experts under EP are whole: torchtitan does not combine float8 grouped gemms
        # with expert tensor parallelism
        sharded = tp > 1 and not (linear.grouped and ep > 1)
        if sharded and linear.tp is TPStyle.COLUMN:
            N = _shard(linear, tp, "N")
        elif sharded and linear.tp is TPStyle.ROW:
            K = _shard(linear, tp, "K")
        if not linear.grouped:
            out.append(LocalLayer(linear, tokens, K, N))
            continue
        routed = linear.routed
        assert routed is not None
        rows, per_device = tokens_per_expert(
            tokens, experts=routed.experts, top_k=routed.top_k, tp=tp, ep=ep
        )
        M = padded_group_rows(rows)
        if M > math.ceil(rows):
            notes.append(f"M padded from {rows:.4g} to {M}")
        out.append(LocalLayer(linear, M, K, N, per_device, rows, tuple(notes)))
    return out
