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
  changes no gemm shape; its collectives are the step summary's (f8roof.engine.step_summary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from f8roof.training.catalog import (
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
    - `selective`: torchtitan's op-level SAC, which saves the outputs of a list of ops and
      recomputes the rest, of the matmuls only every second one. The per-layer rows leave it
      out; the step summary (f8roof.engine.step_summary, training/checkpointing.py: torchtitan's save
      lists as data) adds what it reruns: every second linear's forward gemm, in both
      precisions, and the float8 casts.
    Only the transformer blocks are checkpointed: lm_head (torchtitan's `output`) never is.
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


# The most ranks one parallel degree may have: more GPUs than any training run has used (the
# largest published ones are tens of thousands). A degree beyond is a typo, not a setup.
MAX_DEGREE = 2**18
# The longest measured step --step-ms takes: a day, in ms. Longer is no step.
MAX_STEP_MS = 86_400_000.0


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParallelismError(f"{name} must be a positive integer (got {value!r})")
    if value > MAX_DEGREE:
        raise ParallelismError(
            f"{name} {value} exceeds {MAX_DEGREE} ranks, more GPUs than any training run has used"
        )
    return value


def check_step_ms(step_ms) -> float:
    """A measured bf16 step in milliseconds: positive, finite, at most a day."""
    if (
        isinstance(step_ms, bool)
        or not isinstance(step_ms, (int, float))
        or not math.isfinite(step_ms)
        or not 0 < step_ms <= MAX_STEP_MS
    ):
        raise ParallelismError(
            f"--step-ms must be a positive number of milliseconds up to {MAX_STEP_MS:.0f} (a day) "
            f"(got {step_ms!r})"
        )
    return float(step_ms)


@dataclass(frozen=True)
class TrainingSetup:
    """How the model trains: parallel degrees, checkpointing, and the measured bf16 step."""

    tp: int = 1
    ep: int = 1
    fsdp: bool = False
    recompute: Recompute = Recompute.NONE
    step_s: float | None = None  # measured bf16 step time, for the end-to-end speedup
    # when known (--fsdp N): the step summary models its comm; 1 (FSDP off) when given as 1
    fsdp_degree: int | None = None
    # full recompute of every n-th block only (torchtitan's layer SAC, selective_ac_option n)
    recompute_every: int = 1

    def __post_init__(self) -> None:
        _positive_int("--tp", self.tp)
        _positive_int("--ep", self.ep)
        if not isinstance(self.fsdp, bool):
            raise ParallelismError(f"fsdp must be True or False (got {self.fsdp!r})")
        if self.fsdp_degree is not None:
            _positive_int("--fsdp", self.fsdp_degree)
            if self.fsdp != (self.fsdp_degree > 1):
                raise ParallelismError(
                    f"an FSDP degree ({self.fsdp_degree}) needs FSDP on and at least 2 ranks "
                    "(1: FSDP off)"
                )
            if self.tp * self.fsdp_degree > MAX_DEGREE:
                raise ParallelismError(
                    f"--tp {self.tp} x --fsdp {self.fsdp_degree} ranks exceed {MAX_DEGREE}, more "
                    "GPUs than any training run has used"
                )
        if not isinstance(self.recompute, Recompute):
            raise ParallelismError(f"recompute must be a Recompute (got {self.recompute!r})")
        _positive_int("recompute_every", self.recompute_every)
        if self.recompute_every > 1 and self.recompute is not Recompute.FULL:
            raise ParallelismError("checkpointing every n-th block is full recompute of those")
        if self.step_s is not None:
            check_step_ms(self.step_s * 1e3)

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
    ) -> TrainingSetup:
        """From user-facing values (the CLI's and module_filter's): recompute by name, the
        step in milliseconds, FSDP as a flag or a degree (`--fsdp` alone: -1, on with its
        degree unknown, as torchtitan's data_parallel_shard_degree = -1; `--fsdp 1`: off, as
        torchtitan's 1, and said so; 0 is no degree)."""
        degree = None
        if fsdp is None:
            fsdp = False
        elif not isinstance(fsdp, bool):
            if not isinstance(fsdp, int) or fsdp == 0 or fsdp < -1:
                raise ParallelismError(
                    f"--fsdp takes a degree >= 1, or nothing for FSDP of unknown degree "
                    f"(got {fsdp!r})"
                )
            degree = None if fsdp == -1 else fsdp
            fsdp = fsdp != 1
        if step_ms is not None:
            check_step_ms(step_ms)
        return cls(
            tp=tp,
            ep=ep,
            fsdp=fsdp,
            recompute=Recompute.from_name(recompute),
            step_s=None if step_ms is None else step_ms / 1e3,
            fsdp_degree=degree,
            recompute_every=recompute_every,
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
            parts.append(f"FSDP {self.fsdp_degree}" if self.fsdp_degree else "FSDP")
        elif self.fsdp_degree == 1:
            parts.append("FSDP 1 (off)")
        if self.recompute_every > 1:
            parts.append(f"recompute full every {_nth(self.recompute_every)} block (layer SAC)")
        elif self.recompute is not Recompute.NONE:
            parts.append(f"recompute {self.recompute.value}")
        return ", ".join(parts) or "one GPU, no parallelism"

    def recompute_share(self, blocks: int) -> float:
        """The share of `blocks` transformer blocks full recompute reruns: all of them, or
        with layer SAC every n-th (torchtitan counts blocks from 1 and checkpoints those whose
        count divides by n: blocks // n of them); 0 without full recompute."""
        if self.recompute is not Recompute.FULL:
            return 0.0
        return (blocks // self.recompute_every) / blocks if blocks else 1.0

    def notes(self) -> list[str]:
        """What the setup changes and what it does not model, one line each."""
        lines = []
        if self.tp > 1:
            lines.append(
                f"TP {self.tp}: each GPU runs its shard (column-parallel: N / {self.tp}, "
                f"row-parallel: K / {self.tp}, replicated: whole) at M = all the tokens "
                f"(sequence parallel all-gathers them); TP communication is not in these times "
                f"(the step summary models it)"
            )
        if self.fsdp:
            lines.append(
                "FSDP: weights are all-gathered before use, so gemm shapes are the ones above; "
                "all-gather and reduce-scatter time are not in these times (the step summary "
                "models them when the FSDP degree is known: --fsdp N or --setup)"
            )
        if self.fsdp_degree == 1:
            lines.append(
                "FSDP 1: one rank holds every weight, so FSDP is off (torchtitan's "
                "data_parallel_shard_degree = 1); nothing is all-gathered or reduce-scattered"
            )
        if self.recompute is Recompute.FULL and self.recompute_every > 1:
            lines.append(
                f"recompute full on every {_nth(self.recompute_every)} block (torchtitan's layer "
                f"SAC, selective_ac_option = '{self.recompute_every}'): those blocks' linears "
                "run their forward gemm and forward float8 overhead again in the backward, in "
                "both precisions (included above as the mean over all blocks); lm_head is not "
                "checkpointed"
            )
        elif self.recompute is Recompute.FULL:
            lines.append(
                "recompute full: every block's linears run their forward gemm and forward "
                "float8 overhead again in the backward, in both precisions (included above); "
                "lm_head, outside the blocks, is not checkpointed"
            )
        elif self.recompute is Recompute.SELECTIVE:
            lines.append(
                "recompute selective: torchtitan's per-op SAC is not in these times; the step "
                "summary adds what it reruns (every second linear's forward gemm, float8 casts)"
            )
        return lines


ONE_GPU = TrainingSetup()  # the default: no parallelism, no recompute, no measured step


def _nth(n: int) -> str:
    """2 -> '2nd', 3 -> '3rd', 11 -> '11th'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


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

    @property
    def in_block(self) -> bool:
        """Inside the repeated transformer blocks (its name has a layer index). Activation
        checkpointing wraps the blocks only: torchtitan's `apply_ac` wraps each of
        `model.layers`, never the final norm and the output projection (lm_head)."""
        return "*" in self.linear.fqn.split(".")


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
    style = linear.tp.value
    if size % tp:
        raise ParallelismError(
            f"--tp {tp} does not divide {dim} = {size} of {linear.fqn} ({style}-parallel)"
        )
    if linear.heads and linear.heads % tp:
        # TP gives each rank whole heads (torchtitan: n_heads // tp, n_kv_heads // tp per rank)
        raise ParallelismError(
            f"--tp {tp} does not divide the {linear.heads} heads of {linear.fqn} "
            f"({dim} = {size}, {style}-parallel): each GPU must hold whole heads"
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
    if tp > 1 and tokens % tp:
        # sequence parallelism (torchtitan's TP plan) shards the sequence dim over the TP ranks
        raise ParallelismError(
            f"--tokens {tokens}: sequence parallelism splits each rank's tokens over its TP "
            f"ranks, and --tp {tp} does not divide them"
        )
    return out
