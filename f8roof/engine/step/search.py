"""The best run of each precision on N GPUs: the torchtitan layouts a model can train with
(TP within a node, FSDP over the rest, a pipeline only where nothing else fits, the recompute
mode, the local batch, the float8 recipe), each answered by the one plan per run, those that do
not fit dropped per precision, the rest ranked by tokens/s per GPU.

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
PP_DEGREES = (2, 4)  # asked only when no layout without a pipeline fits
RECOMPUTE_ORDER = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)  # cheapest first
MAX_LOCAL_BATCH = 1024  # sequences per rank: beyond any published run's


class Arm(str, Enum):
    BF16 = "bf16"
    FLOAT8 = "float8"


@dataclass(frozen=True, order=True)
class Layout:
    """One torchtitan run of the search: its parallel degrees, recompute mode, local batch
    (sequences of the search's seq_len per data-parallel rank) and float8 recipe. Async TP is
    on wherever TP is 2 or more (torchtitan's float8 runs pair it with TP)."""

    recipe: str
    pp: int
    tp: int
    fsdp: int
    recompute: Recompute
    local_batch: int

    @property
    def async_tp(self) -> bool:
        return self.tp >= 2


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

    @property
    def tokens_per_gpu(self) -> float:
        """Tokens each GPU trains per step: a data-parallel rank's, over its TP and PP ranks."""
        lay = self.layout
        return lay.local_batch * self.seq_len / (lay.tp * lay.pp)

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

    def ranked(self, arm: Arm) -> list[Point]:
        """The layouts that fit in `arm`, fastest (tokens/s per GPU) first; ties by layout."""
        fit = [p for p in self.points if p.fits(arm)]
        return sorted(fit, key=lambda p: (-p.tokens_per_s(arm), p.layout))

    def best(self, arm: Arm) -> Point:
        return self.ranked(arm)[0]

    def like_for_like(self) -> Point | None:
        """float8 at the bf16 best's layout (its fastest recipe there that fits), or None where
        float8 fits no recipe at it."""
        at = self.best(Arm.BF16).layout
        same = [
            p
            for p in self.points
            if p.fp8_fits and _same_run(p.layout, at) and p.layout.local_batch == at.local_batch
        ]
        return max(same, key=lambda p: p.tokens_per_s(Arm.FLOAT8), default=None)

    @property
    def retuned_speedup(self) -> float:
        """The float8 best's tokens/s per GPU over the bf16 best's."""
        return self.best(Arm.FLOAT8).tokens_per_s(Arm.FLOAT8) / self.best(Arm.BF16).tokens_per_s(
            Arm.BF16
        )

    @property
    def like_for_like_speedup(self) -> float | None:
        """float8 over bf16 at the bf16 best's layout (None: float8 does not fit there)."""
        same = self.like_for_like()
        if same is None:
            return None
        return same.tokens_per_s(Arm.FLOAT8) / self.best(Arm.BF16).tokens_per_s(Arm.BF16)


def _same_run(a: Layout, b: Layout) -> bool:
    """The same parallelism and recompute (any recipe)."""
    return (a.pp, a.tp, a.fsdp, a.recompute) == (b.pp, b.tp, b.fsdp, b.recompute)


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


def check_gpus(gpus: object) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise F8RoofError(f"{term('gpus')} must be a positive number of GPUs (got {gpus!r})")
    return gpus


def search(
    evaluate: Evaluate,
    *,
    model: str,
    gpu: str,
    gpus: int,
    gpus_per_node: int,
    seq_len: int,
    recipes: Sequence[str],
) -> Search:
    """The layouts torchtitan can run `model` with on `gpus` GPUs, answered by `evaluate`,
    pruned by the module's two rules; a pipeline (PP 2, then 4) only where no layout without
    one fits either precision. Refuses, in one line, a model that fits nowhere."""
    check_gpus(gpus)
    start = time.perf_counter()
    asked = _Asked(evaluate)
    for pp in (1, *PP_DEGREES):
        if pp > 1 and (gpus % pp or any(p.bf16_fits or p.fp8_fits for p in asked.points.values())):
            continue
        for recipe in recipes:
            for tp in tp_degrees(gpus, gpus_per_node, pp):
                _recompute_modes(
                    asked, Layout(recipe, pp, tp, gpus // (tp * pp), Recompute.NONE, 1)
                )
    found = Search(
        model,
        gpu,
        gpus,
        seq_len,
        tuple(asked.points.values()),
        tuple(asked.refused.items()),
        time.perf_counter() - start,
    )
    if not any(p.bf16_fits or p.fp8_fits for p in found.points):
        tried = len(found.points) + len(found.refused)
        raise F8RoofError(
            f"{model} fits no layout of {term('gpus')} {gpus} {gpu} ({tried} tried, PP up to "
            f"{PP_DEGREES[-1]})"
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
    if lay.pp > 1:
        keys.append(("parallelism.pipeline_parallel_degree", lay.pp))
    keys.append(("activation_checkpoint.mode", lay.recompute.value))
    # the step was answered compiled, the model and the loss: torchtitan's [compile] says so
    keys += [("compile.enable", True), ("compile.components", ["model", "loss"])]
    if arm is Arm.FLOAT8:
        keys += point.converter.settings  # the plan's converter, by its one rule
    return tuple(keys)
