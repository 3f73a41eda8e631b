"""One transformer block as each GPU of a sharded, checkpointed run compiles it, and what its
compiled graphs hold (kernels, gemms, collectives, recomputed work).

Pure data: `BlockSpec` says what to compile (dims, parallel degrees, checkpointing, tokens);
`BlockCapture` is what `f8roof.profiler.block.capture_block` read off the compiled code, so the
estimate side reads sharded graphs without importing torch or the profiler.

Tokens: `tokens` counts the tokens of one data-parallel rank per step (torchtitan's
`local_batch_size x seq_len`); its TP group shares them, and with sequence parallelism each TP
rank holds `seq_len / tp` of every sequence outside attention and the MLP.

Collective bytes follow nccl-tests' "size" (the full, unsharded tensor: an all-gather's output,
a reduce-scatter's input, an all-reduce's buffer): a ring moves `(n-1)/n` of it per rank for an
all-gather or reduce-scatter and twice that for an all-reduce
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from f8roof.errors import ModelError, term
from f8roof.training.checkpointing import Recompute
from f8roof.training.run_config import RunConfig

__all__ = [
    "BlockCapture",
    "BlockGemm",
    "BlockKernel",
    "BlockSpec",
    "Collective",
    "CollectiveKind",
    "Mlp",
    "MoeSpec",
    "Norm",
    "PassTotals",
    "PipelinedCollective",
    "Recompute",
    "Score",
]


class Norm(str, Enum):
    RMSNORM = "rmsnorm"
    LAYERNORM = "layernorm"


class Mlp(str, Enum):
    SWIGLU = "swiglu"  # w2(silu(w1 x) * w3 x): llama
    GELU = "gelu"  # c_proj(gelu(c_fc x)): gpt2


def _positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"{name} must be a positive integer (got {value!r})")


def _member(enum: type[Enum], **values: object) -> None:
    """Enum fields take members (`Recompute("full")` from a name), so they compare by identity."""
    for name, value in values.items():
        if not isinstance(value, enum):
            known = ", ".join(m.value for m in enum)
            raise ModelError(f"{name} must be one of {known} (got {value!r})")


class Score(str, Enum):
    """An MoE router's score function (torchtitan's `score_func`)."""

    SOFTMAX = "softmax"  # qwen3
    SIGMOID = "sigmoid"  # deepseek-v3


@dataclass(frozen=True)
class MoeSpec:
    """Routed experts replacing the dense MLP; `shared_ffn_dim`: the hidden width of the
    shared experts every token passes through (0: none, qwen3's case)."""

    experts: int
    top_k: int
    expert_ffn_dim: int
    shared_ffn_dim: int = 0
    score: Score = Score.SOFTMAX

    def __post_init__(self) -> None:
        _positive(experts=self.experts, top_k=self.top_k, expert_ffn_dim=self.expert_ffn_dim)
        if self.shared_ffn_dim:
            _positive(shared_ffn_dim=self.shared_ffn_dim)
        _member(Score, score=self.score)
        if self.top_k > self.experts:
            raise ModelError(f"top_k {self.top_k} exceeds experts {self.experts}")


@dataclass(frozen=True)
class BlockSpec:
    """One transformer block to compile for one rank (see the module docstring for tokens)."""

    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    tokens: int
    seq_len: int
    norm: Norm = Norm.RMSNORM
    mlp: Mlp = Mlp.SWIGLU
    moe: MoeSpec | None = None
    parallel: RunConfig = field(default_factory=RunConfig)  # its TP, FSDP, SAC, float8 switches
    name: str = ""

    def __post_init__(self) -> None:
        _positive(
            dim=self.dim,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.head_dim,
            ffn_dim=self.ffn_dim,
            tokens=self.tokens,
            seq_len=self.seq_len,
        )
        _member(Norm, norm=self.norm)
        _member(Mlp, mlp=self.mlp)
        if self.n_heads % self.n_kv_heads:
            raise ModelError(f"n_kv_heads {self.n_kv_heads} does not divide n_heads {self.n_heads}")
        if self.tokens % self.seq_len:
            raise ModelError(f"seq_len {self.seq_len} does not divide tokens {self.tokens}")
        tp = self.parallel.tp
        ffn = self.moe.expert_ffn_dim if self.moe else self.ffn_dim
        # TP shards heads (q/k/v columns, o rows), the MLP's hidden dim, and (sequence
        # parallel) each sequence between the blocks. FSDP2 needs no divisor: it pads each
        # parameter's dim 0 to a multiple of its degree.
        for what, size in (
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("ffn_dim", ffn),
            ("seq_len", self.seq_len),
        ):
            if size % tp:
                raise ModelError(f"{term('tp')} {tp} does not divide {what} {size}")

    @classmethod
    def small(cls, *, parallel: RunConfig | None = None, **dims: int) -> BlockSpec:
        """A llama-shaped block small enough to compile in seconds (tests)."""
        base: dict[str, Any] = {
            "dim": 128,
            "n_heads": 4,
            "n_kv_heads": 2,
            "head_dim": 32,
            "ffn_dim": 256,
        }
        base |= {"tokens": 64, "seq_len": 64}
        return cls(**(base | dims), parallel=parallel or RunConfig(), name="small")

    @property
    def batch(self) -> int:
        return self.tokens // self.seq_len

    @property
    def local_seq_len(self) -> int:
        """Sequence positions one TP rank holds between the blocks (sequence parallel)."""
        return self.seq_len // self.parallel.tp

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim


class CollectiveKind(str, Enum):
    ALL_GATHER = "all_gather_into_tensor"
    REDUCE_SCATTER = "reduce_scatter_tensor"
    ALL_REDUCE = "all_reduce"
    ALL_TO_ALL = "all_to_all_single"


@dataclass(frozen=True)
class PipelinedCollective:
    """One TP all-gather or reduce-scatter of a block compiled with async TP, as Inductor's
    micro-pipeline pass left it: `gemms`, the (M, K, N) of the matmuls it now runs beside
    (decomposed shard by shard), or () where the pass left it a plain collective.
    `bytes`: the gathered (or reduce-scattered) tensor's full size."""

    kind: CollectiveKind
    graph: str  # "fwd" | "bwd"
    bytes: int
    gemms: tuple[tuple[int, int, int], ...] = ()

    @property
    def fused(self) -> bool:
        return bool(self.gemms)


@dataclass(frozen=True)
class Collective:
    """One collective one rank issues in a step.

    `bytes` is nccl-tests' size (module docstring). `compiled`: in Inductor's graph (TP,
    sequence parallel, float8 amax reductions) or issued by FSDP2's hooks around it (weight
    all-gathers, gradient reduce-scatters), as torchtitan compiles per block with FSDP2 outside.
    `feeds_cast`: a float8 cast consumes the all-gathered tensor, so that cast cannot fuse into
    the op before the all-gather (the norm); for FSDP2's bf16 weight all-gathers under a float8
    recipe, the linears cast the gathered weights in the graph. `recomputed`: a forward collective checkpointing
    repeats in backward.
    """

    kind: CollectiveKind
    bytes: int
    dtype: str
    group_size: int
    graph: str  # "fwd" | "bwd"
    feeds_cast: bool = False
    mesh: str = "tp"  # "tp" | "dp_shard"
    compiled: bool = True
    recomputed: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        _member(CollectiveKind, kind=self.kind)
        if self.graph not in ("fwd", "bwd"):
            raise ModelError(f"collective graph must be fwd or bwd (got {self.graph!r})")
        if self.bytes < 0 or self.group_size < 1:
            raise ModelError(f"{self.name}: bytes {self.bytes}, group size {self.group_size}")

    @property
    def ring_bytes_per_rank(self) -> float:
        """Bytes each rank sends in a ring: (n-1)/n of the size, twice for an all-reduce."""
        share = (self.group_size - 1) / self.group_size
        return self.bytes * share * (2 if self.kind is CollectiveKind.ALL_REDUCE else 1)


@dataclass(frozen=True)
class BlockKernel:
    """One non-gemm kernel launch: its bytes and what it computes (see profiler.capture.Work)."""

    name: str
    graph: str
    kind: str
    bytes_read: int
    bytes_written: int
    work: str  # "float8" | "context" | "fused"
    float8_steps: tuple[str, ...] = ()
    # Forward ops in the backward graph: checkpointing's, or Inductor's own choice (its min-cut
    # partitioner recomputes cheap pointwise ops such as silu or a norm's scale rather than
    # saving them, with or without checkpointing).
    recomputed: bool = False
    after_all_gather: bool = False  # reads an all-gathered tensor (a cast that lost its fusion)
    kernel_class: str | None = None  # timing.kernel_classes.KernelClass value, from its code
    scattered_elements: int = 0  # elements it walks along a strided index: a sector each
    bytes_reread: int = 0  # what its later loops over a row load again, beyond its bytes
    arithmetic: int = 0  # operations it evaluates (profiler.triton_code._arithmetic)

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True)
class BlockGemm:
    """One gemm launch: `out (m, n) = a (m, k) @ b (k, n)` in the operands' dtype."""

    name: str
    graph: str
    op: str  # "mm" | "_scaled_mm" | ...
    m: int
    k: int
    n: int
    dtype: str
    bytes: int
    recomputed: bool = False
    kernel_class: str | None = None  # the gemm's mode (KernelClass value: accumulation, scales)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n


@dataclass(frozen=True)
class PassTotals:
    """One pass of one block: bytes of non-gemm kernels (all, those doing float8 work, those
    recomputing forward work), gemm FLOPs (all, recomputed), and collective bytes per
    (kind, dtype, mesh)."""

    graph: str
    kernel_bytes: int
    float8_kernel_bytes: int
    recomputed_kernel_bytes: int
    gemm_flops: int
    recomputed_gemm_flops: int
    collective_bytes: tuple[tuple[str, str, str, int], ...]


@dataclass(frozen=True)
class BlockCapture:
    """What one rank's compiled forward+backward of a block holds."""

    spec: BlockSpec
    recipe: str | None  # None: bf16
    device: str  # "cpu" | "codegen" | "cuda"
    kernels: tuple[BlockKernel, ...]
    gemms: tuple[BlockGemm, ...]
    collectives: tuple[Collective, ...]
    gpu: str | None = None  # the codegen target
    # Launches whose byte counts (code, scheduler, Inductor's) differ: profiler.capture's rules
    disagreements: tuple[str, ...] = ()

    @property
    def recomputed(self) -> tuple[str, ...]:
        """What the backward recomputes: 'bwd <name>' per kernel, gemm and collective."""
        parts: tuple[Any, ...] = (*self.kernels, *self.gemms, *self.collectives)
        return tuple(f"{x.graph} {x.name}" for x in parts if x.recomputed)

    def collectives_of(
        self, kind: CollectiveKind, *, graph: str | None = None, mesh: str | None = None
    ) -> tuple[Collective, ...]:
        return tuple(
            c
            for c in self.collectives
            if c.kind is kind
            and (graph is None or c.graph == graph)
            and (mesh is None or c.mesh == mesh)
        )

    @property
    def casts_after_all_gather(self) -> tuple[BlockKernel, ...]:
        """Float8 casts that read an all-gathered tensor: standalone, not fused into the norm."""
        return tuple(
            k
            for k in self.kernels
            if k.after_all_gather and any(s.startswith("cast") for s in k.float8_steps)
        )

    def totals(self, graph: str) -> PassTotals:
        """One pass in numbers: what an estimate times (see PassTotals)."""
        kernels = [k for k in self.kernels if k.graph == graph]
        gemms = [g for g in self.gemms if g.graph == graph]
        collectives: dict[tuple[str, str, str], int] = {}
        for c in self.collectives:
            if c.graph == graph:
                key = (c.kind.value, c.dtype, c.mesh)
                collectives[key] = collectives.get(key, 0) + c.bytes
        return PassTotals(
            graph=graph,
            kernel_bytes=_total(k.bytes_total for k in kernels),
            float8_kernel_bytes=_total(k.bytes_total for k in kernels if k.work != "context"),
            recomputed_kernel_bytes=_total(k.bytes_total for k in kernels if k.recomputed),
            gemm_flops=_total(g.flops for g in gemms),
            recomputed_gemm_flops=_total(g.flops for g in gemms if g.recomputed),
            collective_bytes=tuple(sorted((*key, n) for key, n in collectives.items())),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; `from_dict` reads it back."""
        return {
            "spec": {
                **{f.name: getattr(self.spec, f.name) for f in fields(self.spec)},
                "norm": self.spec.norm.value,
                "mlp": self.spec.mlp.value,
                "moe": (
                    {**asdict(self.spec.moe), "score": self.spec.moe.score.value}
                    if self.spec.moe
                    else None
                ),
                "parallel": {  # the run's switches a block's graphs depend on
                    "tp": self.spec.parallel.tp,
                    "fsdp": self.spec.parallel.fsdp_ranks,
                    "float8_all_gather": self.spec.parallel.float8_all_gather,
                    "async_tp": self.spec.parallel.async_tp,
                    "recompute": self.spec.parallel.recompute.value,
                    "emulate_precision_casts": self.spec.parallel.emulate_precision_casts,
                },
            },
            "recipe": self.recipe,
            "device": self.device,
            "gpu": self.gpu,
            "kernels": [asdict(k) for k in self.kernels],
            "gemms": [asdict(g) for g in self.gemms],
            "collectives": [{**asdict(c), "kind": c.kind.value} for c in self.collectives],
            "disagreements": list(self.disagreements),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BlockCapture:
        try:
            spec = dict(data["spec"])
            parallel = dict(spec.pop("parallel"))
            parallel["recompute"] = Recompute(parallel["recompute"])
            moe = spec.pop("moe")
            block = BlockSpec(
                **{**spec, "norm": Norm(spec["norm"]), "mlp": Mlp(spec["mlp"])},
                moe=MoeSpec(**{**moe, "score": Score(moe["score"])}) if moe else None,
                parallel=RunConfig.sharded(**parallel),
            )
            return cls(
                spec=block,
                recipe=data["recipe"],
                device=data["device"],
                gpu=data.get("gpu"),
                kernels=tuple(
                    BlockKernel(**{**k, "float8_steps": tuple(k["float8_steps"])})
                    for k in data["kernels"]
                ),
                gemms=tuple(BlockGemm(**g) for g in data["gemms"]),
                collectives=tuple(
                    Collective(**{**c, "kind": CollectiveKind(c["kind"])})
                    for c in data["collectives"]
                ),
                disagreements=tuple(data.get("disagreements", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"not a block capture: {type(e).__name__}: {e}") from None

    def kernel_bytes(self, *, graph: str | None = None) -> int:
        return _total(k.bytes_total for k in self.kernels if graph in (None, k.graph))

    def collective_bytes(self, *, graph: str | None = None) -> int:
        return _total(c.bytes for c in self.collectives if graph in (None, c.graph))


def _total(values: Iterable[int]) -> int:
    return sum(values, 0)
