"""The best run of each precision on N GPUs: the torchtitan layouts a model can train with
(TP within a node, FSDP over the rest, HSDP from 64 GPUs, EP for an MoE model, CP for long
sequences or where nothing else fits, a pipeline only after that, the recompute mode, the
local batch, the float8 recipe), each answered by the one plan per run, those that do not fit
dropped per precision, the rest ranked by tokens/s per GPU.

Pure: the answer for one layout comes from `evaluate` (engine/api.py hands in `answer()`), so
that this module decides what to ask and what wins, never how a step is modelled. Two rules
keep the search small, both as a step's parts behave (engine/step/recompute.py: recompute
only adds work; training/memory.py: saved activations grow with the local batch):
- the local batch: its largest that fits, per precision, as the first answer's memory
  headroom names it (else by doubling), confirmed, bisected where it does not fit (memory
  grows with it, and so do the tokens each step's fixed costs are spread over);
- the recompute mode: a costlier mode is asked only at local batches the cheaper ones did not
  fit for either precision (at a batch a cheaper mode fits, the costlier one reruns more work
  for the same tokens).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from f8roof.engine.plan import TorchtitanConfig
from f8roof.errors import F8RoofError, ModelError, term
from f8roof.training.checkpointing import Recompute

TP_DEGREES = (1, 2, 4, 8)  # torchtitan's TP within a node (NVLink), as its published runs
CP_DEGREES = (2, 4, 8)  # torchtitan's context_parallel_degree, asked as LONG_SEQ_LEN says
# CP from the start at this seq_len and longer (torchtitan's long-context runs, Llama 3's
# 128K continued pretraining: arXiv 2407.21783 section 3.4.2); shorter, only where no
# layout without it fits
LONG_SEQ_LEN = 32768
HSDP_MIN_GPUS = 64  # from 8 nodes of 8: replicas across nodes, each sharded within one
PP_DEGREES = (2, 4)  # asked only when no layout without a pipeline fits
RECOMPUTE_ORDER = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)  # cheapest first
MAX_LOCAL_BATCH = 1024  # sequences per rank: beyond any published run's


class Arm(str, Enum):
    BF16 = "bf16"
    FLOAT8 = "float8"


@dataclass(frozen=True, order=True)
class Layout:
    """One torchtitan run of the search: its parallel degrees, recompute mode, local batch
    (sequences of the search's seq_len per data-parallel rank) and float8 recipe. The GPUs
    are replicate x fsdp x cp x tp x pp; EP borrows its ranks from fsdp
    (data_parallel_shard), as torchtitan's expert_parallel_degree does. Async TP is on
    wherever TP is 2 or more (torchtitan's float8 runs pair it with TP)."""

    recipe: str
    pp: int
    tp: int
    fsdp: int
    recompute: Recompute
    local_batch: int
    cp: int = 1
    ep: int = 1
    replicate: int = 1  # HSDP: data_parallel_replicate_degree

    @property
    def async_tp(self) -> bool:
        return self.tp >= 2

    @property
    def gpus(self) -> int:
        return self.replicate * self.fsdp * self.cp * self.tp * self.pp


@dataclass(frozen=True)
class Point:
    """One layout answered: each precision's step per GPU, reserved peak and fit, and what the
    float8 arm's plan converts (its recipe's torchtitan section, filters, float8 all-gather)."""

    layout: Layout
    seq_len: int
    bf16_s: float
    fp8_s: float
    bf16_peak_bytes: int
    fp8_peak_bytes: int
    bf16_fits: bool
    fp8_fits: bool
    float8_all_gather: bool  # the plan found FSDP2's float8 all-gather faster (tensorwise)
    converter: TorchtitanConfig  # what torchtitan is told for the float8 arm's choice
    # the largest local batch that fits under this layout's recompute mode (bf16, float8), as
    # the answer's memory knows it (None: unknown, searched by doubling)
    largest: tuple[int, int] | None = None
    usable_bytes: int | None = None  # the GPU memory a peak is held against (None: unknown)

    @property
    def tokens_per_gpu(self) -> float:
        """Tokens each GPU trains per step: a data-parallel rank's, over its TP, CP and PP
        ranks."""
        lay = self.layout
        return lay.local_batch * self.seq_len / (lay.tp * lay.cp * lay.pp)

    def seconds(self, arm: Arm) -> float:
        return self.bf16_s if arm is Arm.BF16 else self.fp8_s

    def fits(self, arm: Arm) -> bool:
        return self.bf16_fits if arm is Arm.BF16 else self.fp8_fits

    def peak_bytes(self, arm: Arm) -> int:
        return self.bf16_peak_bytes if arm is Arm.BF16 else self.fp8_peak_bytes

    def tokens_per_s(self, arm: Arm) -> float:
        """Tokens/s per GPU in `arm`."""
        return self.tokens_per_gpu / self.seconds(arm)


Evaluate = Callable[[Layout], Point]


@dataclass(frozen=True)
class Search:
    """Every layout evaluated (in the order asked), the refused ones with torchtitan's or
    f8roof's reason, and the wall time the search took."""

    model: str
    gpu: str
    gpus: int
    seq_len: int
    points: tuple[Point, ...]
    refused: tuple[tuple[Layout, str], ...] = ()
    wall_s: float = 0.0
    fuse_qkv: bool = False  # every layout with torchtitan's fused q/k/v (the model's build)

    def ranked(self, arm: Arm) -> list[Point]:
        """The layouts that fit in `arm`, fastest (tokens/s per GPU) first; ties by layout."""
        fit = [p for p in self.points if p.fits(arm)]
        return sorted(fit, key=lambda p: (-p.tokens_per_s(arm), p.layout))

    def fits(self, arm: Arm) -> bool:
        """Some layout fits in `arm` (a model may fit only in float8's smaller memory)."""
        return any(p.fits(arm) for p in self.points)

    def best(self, arm: Arm) -> Point:
        """The fastest layout that fits in `arm` (ask `fits(arm)` first)."""
        return self.ranked(arm)[0]

    def like_for_like(self) -> Point | None:
        """float8 at the bf16 best's layout (its fastest recipe there that fits), or None where
        float8 fits no recipe at it or bf16 fits nowhere."""
        if not self.fits(Arm.BF16):
            return None
        at = self.best(Arm.BF16).layout
        same = [
            p
            for p in self.points
            if p.fp8_fits and _same_run(p.layout, at) and p.layout.local_batch == at.local_batch
        ]
        return max(same, key=lambda p: p.tokens_per_s(Arm.FLOAT8), default=None)

    @property
    def retuned_speedup(self) -> float | None:
        """The float8 best's tokens/s per GPU over the bf16 best's (None: either precision
        fits no layout)."""
        if not (self.fits(Arm.BF16) and self.fits(Arm.FLOAT8)):
            return None
        fp8, bf16 = self.best(Arm.FLOAT8), self.best(Arm.BF16)
        return fp8.tokens_per_s(Arm.FLOAT8) / bf16.tokens_per_s(Arm.BF16)

    @property
    def like_for_like_speedup(self) -> float | None:
        """float8 over bf16 at the bf16 best's layout (None: float8 does not fit there)."""
        same = self.like_for_like()
        if same is None:
            return None
        return same.tokens_per_s(Arm.FLOAT8) / self.best(Arm.BF16).tokens_per_s(Arm.BF16)


def _same_run(a: Layout, b: Layout) -> bool:
    """The same parallelism and recompute (any recipe)."""
    return replace(a, recipe="", local_batch=0) == replace(b, recipe="", local_batch=0)


@dataclass
class _Asked:
    """The answers so far, each layout asked once."""

    evaluate: Evaluate
    points: dict[Layout, Point] = field(default_factory=dict)
    refused: dict[Layout, str] = field(default_factory=dict)

    def get(self, layout: Layout) -> Point | None:
        if layout in self.points:
            return self.points[layout]
        if layout in self.refused:
            return None
        try:
            found = self.evaluate(layout)
        except ModelError as e:  # torchtitan's or f8roof's refusal of this layout
            self.refused[layout] = str(e)
            return None
        self.points[layout] = found
        return found


def tp_degrees(gpus: int, gpus_per_node: int, pp: int) -> list[int]:
    """TP degrees within a node that divide the GPUs left after the pipeline."""
    return [t for t in TP_DEGREES if t <= gpus_per_node and gpus % (t * pp) == 0]


def ep_degrees(fsdp: int, experts: int, gpus_per_node: int) -> list[int]:
    """EP degrees for a model with `experts` routed experts a layer (0: dense, no EP): none,
    and each power of two up to a node that divides both the experts and the
    data_parallel_shard ranks it borrows (torchtitan's ParallelDims: dp_shard x cp divisible
    by ep; whole experts a rank). Beyond a node the all-to-alls ride the NICs: searched
    without this bound, qwen3-30b-a3b on 64 and 512 H100s found EP 16 to 128 slower than EP 8
    on every TP layout (docs/plan.md), and each degree costs a run's search."""
    degrees = [1]
    ep = 2
    while experts and ep <= min(fsdp, experts, gpus_per_node):
        if fsdp % ep == 0 and experts % ep == 0:
            degrees.append(ep)
        ep *= 2
    return degrees


def replicate_degrees(shard: int, inner: int, gpus: int, gpus_per_node: int) -> list[int]:
    """Data-parallel replicas of `shard` ranks (each `inner` = TP x CP GPUs wide): none, and
    from HSDP_MIN_GPUS GPUs HSDP's usual layout, FSDP within a node and replicas across the
    nodes (2 or more shards a replica: one shard is DDP, not searched)."""
    within = gpus_per_node // inner if gpus_per_node % inner == 0 else 0
    if gpus < HSDP_MIN_GPUS or within < 2 or shard % within or shard == within:
        return [1]
    return [1, shard // within]


def check_gpus(gpus: object) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise F8RoofError(f"{term('gpus')} must be a positive number of GPUs (got {gpus!r})")
    return gpus


@dataclass(frozen=True)
class Space:
    """What the search may vary for one model on `gpus` GPUs of one kind: the node's size
    (TP stays within it; HSDP shards within it), the seq_len (CP's chunks), the recipes, and
    the model's routed experts a layer (0: dense, never EP)."""

    gpus: int
    gpus_per_node: int
    seq_len: int
    recipes: tuple[str, ...]
    experts: int = 0

    def runs(self, *, pp: int, cps: Sequence[int]) -> list[Layout]:
        """Every parallel layout of pipeline degree `pp` and CP among `cps`, at recompute none
        and local batch 1 (where each run's search starts)."""
        found = []
        for recipe in self.recipes:
            for tp in tp_degrees(self.gpus, self.gpus_per_node, pp):
                for cp in cps:
                    if self.gpus % (tp * pp * cp):
                        continue
                    shard = self.gpus // (tp * pp * cp)
                    for replicate in replicate_degrees(
                        shard, tp * cp, self.gpus, self.gpus_per_node
                    ):
                        fsdp = shard // replicate
                        found += [
                            Layout(recipe, pp, tp, fsdp, Recompute.NONE, 1, cp, ep, replicate)
                            for ep in ep_degrees(fsdp, self.experts, self.gpus_per_node)
                        ]
        return found

    def stages(self) -> list[list[Layout]]:
        """The runs in the order asked, each stage only where no earlier one fits either
        precision: without a pipeline (CP too where sequences are long), CP, pipelines."""
        long = self.seq_len >= LONG_SEQ_LEN
        first = self.runs(pp=1, cps=(1, *CP_DEGREES) if long else (1,))
        later = [] if long else [self.runs(pp=1, cps=CP_DEGREES)]
        return [first, *later, *(self.runs(pp=pp, cps=(1,)) for pp in PP_DEGREES)]


Progress = Callable[[int, int], None]  # (runs searched, runs planned so far)


def search(
    evaluate: Evaluate,
    *,
    model: str,
    gpu: str,
    gpus: int,
    gpus_per_node: int,
    seq_len: int,
    recipes: Sequence[str],
    experts: int = 0,
    progress: Progress | None = None,
    fuse_qkv: bool = False,
) -> Search:
    """The layouts torchtitan can run `model` with on `gpus` GPUs, answered by `evaluate`,
    pruned by the module's two rules; CP (where sequences are shorter than LONG_SEQ_LEN),
    then a pipeline (PP 2, then 4), only where no layout before fits either precision; EP
    only for an MoE model (`experts` routed experts a layer). `progress` is told each run
    searched; `fuse_qkv` is recorded (the model's build `evaluate` answers, not searched).
    Refuses, in one line, a model that fits nowhere."""
    check_gpus(gpus)
    start = time.perf_counter()
    asked = _Asked(evaluate)
    space = Space(gpus, gpus_per_node, seq_len, tuple(recipes), experts)
    done = planned = 0
    for stage in space.stages():
        if any(p.bf16_fits or p.fp8_fits for p in asked.points.values()):
            break
        planned += len(stage)
        for base in stage:
            _recompute_modes(asked, base)
            done += 1
            if progress is not None:
                progress(done, planned)
    found = Search(
        model,
        gpu,
        gpus,
        seq_len,
        tuple(asked.points.values()),
        tuple(asked.refused.items()),
        time.perf_counter() - start,
        fuse_qkv,
    )
    if not any(p.bf16_fits or p.fp8_fits for p in found.points):
        tried = len(found.points) + len(found.refused)
        raise F8RoofError(
            f"{model} fits no layout of {term('gpus')} {gpus} {gpu} ({tried} tried, CP up to "
            f"{CP_DEGREES[-1]}, PP up to {PP_DEGREES[-1]})"
        )
    return found


def _recompute_modes(asked: _Asked, base: Layout) -> None:
    """Each recompute mode's local batches, cheapest mode first; a costlier mode from the
    first batch no cheaper mode fitted in either precision."""
    first = 1
    for mode in RECOMPUTE_ORDER:
        if first > MAX_LOCAL_BATCH:
            return
        largest = _largest_batches(asked, replace(base, recompute=mode, local_batch=first))
        if largest is None:
            continue
        first = max(first, min(largest) + 1)


def _largest_batches(asked: _Asked, base: Layout) -> tuple[int, int] | None:
    """The largest local batch from `base.local_batch` on that fits, per precision (bf16,
    float8; one below the first asked where it fits none): where the first answer knows it
    (`Point.largest`, the plan's memory headroom), that batch asked; else by doubling. Then
    bisecting where the bounds are apart. None where the layout is refused or fits neither
    precision at its first batch."""

    def at(batch: int) -> Point | None:
        found = asked.get(replace(base, local_batch=batch))
        fits[batch] = (False, False) if found is None else (found.bf16_fits, found.fp8_fits)
        return found

    fits: dict[int, tuple[bool, bool]] = {}
    first = batch = base.local_batch
    point = at(first)
    if point is None or not any(fits[first]):
        return None
    bound = [MAX_LOCAL_BATCH + 1] * 2  # per precision: a batch known not to fit
    if point.largest is not None:
        for arm, largest in enumerate(point.largest):
            batch = min(largest, MAX_LOCAL_BATCH)
            if batch > first and batch not in fits:
                at(batch)
            bound[arm] = max(batch + 1, first)
    else:
        while any(fits[batch]) and batch * 2 <= MAX_LOCAL_BATCH:
            batch *= 2
            at(batch)
    found = []
    for arm in (0, 1):
        lo = max((b for b, f in fits.items() if f[arm]), default=first - 1)
        above = [b for b, f in fits.items() if b > lo and not f[arm]]
        hi = min([*above, *(b for b in (bound[arm],) if b > lo)], default=lo + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            at(mid)
            lo, hi = (mid, hi) if fits[mid][arm] else (lo, mid)
        found.append(lo)
    return found[0], found[1]


def torchtitan_overrides(point: Point, arm: Arm) -> tuple[tuple[str, object], ...]:
    """torchtitan's job config keys (dotted, as `--set` and torchtitan's command line take
    them) and values for a point's run in `arm`: the batch, the parallelism, the recompute
    mode and, for float8, the converter its plan chose (recipe, filters, float8 all-gather)."""
    lay = point.layout
    keys: list[tuple[str, object]] = [
        ("training.local_batch_size", lay.local_batch),
        ("training.seq_len", point.seq_len),
        ("parallelism.data_parallel_shard_degree", lay.fsdp),
        ("parallelism.tensor_parallel_degree", lay.tp),
    ]
    if lay.async_tp:
        keys.append(("parallelism.enable_async_tensor_parallel", True))
    for key, degree in (
        ("data_parallel_replicate_degree", lay.replicate),
        ("context_parallel_degree", lay.cp),
        ("expert_parallel_degree", lay.ep),
        ("pipeline_parallel_degree", lay.pp),
    ):
        if degree > 1:
            keys.append((f"parallelism.{key}", degree))
    keys.append(("activation_checkpoint.mode", lay.recompute.value))
    if lay.recompute is Recompute.SELECTIVE:
        # per-op SAC, as answered (a TOML job config's default, "2", is every second block)
        keys.append(("activation_checkpoint.selective_ac_option", "op"))
    # the step was answered compiled, the model and the loss: torchtitan's [compile] says so
    keys += [("compile.enable", True), ("compile.components", ["model", "loss"])]
    if arm is Arm.FLOAT8:
        keys += point.converter.settings  # the plan's converter, by its one rule
    return tuple(keys)
