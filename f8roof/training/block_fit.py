"""A sharded block's compiled graphs as exact functions of tokens per rank (issue 18).

Compiling a block takes seconds; an estimate must answer in milliseconds. For a fixed
architecture, TP degree, checkpointing policy and recipe, what one rank's compiled block moves
is affine in its tokens T: every activation tensor has T (or T / tp) rows, weights and their
casts do not depend on T. So two compiles, at T1 and T2, give every term exactly:
`value(T) = const + per_token * T`, with rational coefficients (as the calibration's
polynomials), and `BlockFit.at(T)` rebuilds the capture at any T without compiling.

While Inductor's choices hold. They do not always: at 2048 tokens it may split a backward
reduction that it runs persistent at 8192, or save what it recomputes at another size. So a fit
is piecewise: compiles at several token counts (knots), one affine segment between each
neighbouring pair, exact at every knot; below the first and above the last the end segments
extend. Between knots whose graphs differ a segment interpolates the two graphs' bytes.

Kernels are grouped by what the estimate and `compare` read of them (pass, kind, the work they
do, recomputed, after an all-gather, their float8 steps): each group keeps a count and its bytes
read and written, both affine. Grouping makes the fit robust to Inductor splitting a reduction
in two at one size and not the other; the kernel-time model is affine per kind
(floor + bytes / bandwidth), so a group's time is exact from its count and bytes. Gemms are
kept one by one (their time is not affine in M, K, N), paired in graph order between the two
compiles. Collectives are grouped like kernels.

Bytes are affine only while Inductor's choices hold: a fit is checked against fresh compiles
at other token counts (`check`), and its file records those checks. A check the fit misses by
more than 1% (Inductor changed its choice inside the segment) becomes a knot itself
(`fit_checked`): the fit is then exact on both sides of the change it found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import pairwise
from typing import Any

from f8roof.errors import ModelError
from f8roof.training.block import (
    BlockCapture,
    BlockGemm,
    BlockKernel,
    Collective,
    CollectiveKind,
)

__all__ = [
    "FIT_TOLERANCE",
    "Affine",
    "BlockFit",
    "FitCheck",
    "Segment",
    "check",
    "fit_block",
    "fit_checked",
]


@dataclass(frozen=True)
class Affine:
    """`const + per_token * T`, exactly."""

    const: Fraction
    per_token: Fraction

    @classmethod
    def through(cls, t1: int, y1: int, t2: int, y2: int) -> Affine:
        slope = Fraction(y2) - Fraction(y1)
        slope /= t2 - t1
        return cls(Fraction(y1) - slope * t1, slope)

    def at(self, tokens: int) -> Fraction:
        return self.const + self.per_token * tokens

    def to_json(self) -> list[str]:
        return [str(self.const), str(self.per_token)]

    @classmethod
    def from_json(cls, value: Any) -> Affine:
        if not (isinstance(value, list) and len(value) == 2):
            raise ModelError(f"an affine term is [const, per_token] (got {value!r})")
        try:
            return cls(*(Fraction(str(v)) for v in value))
        except (ValueError, ZeroDivisionError):
            raise ModelError(f"an affine term holds numbers or 'p/q' (got {value!r})") from None


@dataclass(frozen=True)
class KernelGroup:
    graph: str
    kind: str
    work: str
    recomputed: bool
    after_all_gather: bool
    float8_steps: tuple[str, ...]
    count: Affine
    bytes_read: Affine
    bytes_written: Affine
    kernel_class: str | None = None
    scattered_elements: Affine = Affine(Fraction(0), Fraction(0))
    bytes_reread: Affine = Affine(Fraction(0), Fraction(0))
    arithmetic: Affine = Affine(Fraction(0), Fraction(0))


@dataclass(frozen=True)
class GemmTerm:
    graph: str
    op: str
    dtype: str
    recomputed: bool
    m: Affine
    k: Affine
    n: Affine
    bytes: Affine  # operands, scales and output: one dim of each scales with the tokens
    kernel_class: str | None = None


@dataclass(frozen=True)
class CollectiveGroup:
    kind: str
    dtype: str
    mesh: str
    graph: str
    group_size: int
    compiled: bool
    recomputed: bool
    feeds_cast: bool
    count: Affine
    bytes: Affine


@dataclass(frozen=True)
class FitCheck:
    """A fit against a fresh compile at `tokens`: the largest relative error per pass of the
    kernel bytes, gemm FLOPs and collective bytes, the kernel counts, and (given a timer) the
    error of the block's time, kernels and gemms: what an estimate reads."""

    tokens: int
    kernel_bytes_error: float
    gemm_flops_error: float
    collective_bytes_error: float
    kernels_fit: int
    kernels_compiled: int
    time_error: float | None = None

    @property
    def worst(self) -> float:
        return max(self.kernel_bytes_error, self.gemm_flops_error, self.collective_bytes_error)


@dataclass(frozen=True)
class Segment:
    """The block between two neighbouring compiles, affine in tokens."""

    tokens: tuple[int, int]
    kernels: tuple[KernelGroup, ...]
    gemms: tuple[GemmTerm, ...]
    collectives: tuple[CollectiveGroup, ...]


@dataclass(frozen=True)
class BlockFit:
    """One block (architecture, parallelism, policy, recipe) over tokens per rank."""

    capture: BlockCapture  # spec, recipe, device, target GPU (its lists empty)
    segments: tuple[Segment, ...]  # in token order, neighbours sharing a knot
    checks: tuple[FitCheck, ...] = ()
    # what the partitioned forward hands its backward, bytes: per token its activations, the
    # constant float8 weight copies (profiler/memory/saved.py; the memory model's check)
    saved_bytes: Affine | None = None

    @property
    def recipe(self) -> str | None:
        return self.capture.recipe

    @property
    def tokens(self) -> tuple[int, ...]:
        """The knots: the token counts compiled."""
        return (self.segments[0].tokens[0], *(s.tokens[1] for s in self.segments))

    def segment(self, tokens: int) -> Segment:
        return next((s for s in self.segments if tokens <= s.tokens[1]), self.segments[-1])

    def at(self, tokens: int, *, seq_len: int | None = None) -> BlockCapture:
        """The capture a compile at `tokens` would give (one kernel per counted launch).
        `seq_len` (default: one sequence of `tokens`) is the spec's only: attention is an
        extern kernel, not among the fitted ones."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ModelError(f"tokens must be a positive integer (got {tokens!r})")
        spec = self.capture.spec
        spec = replace(spec, tokens=tokens, seq_len=seq_len or tokens)
        piece = self.segment(tokens)
        kernels: list[BlockKernel] = []
        for i, g in enumerate(piece.kernels):
            count = max(round(g.count.at(tokens)), 0)
            for j in range(count):
                kernels.append(
                    BlockKernel(
                        name=f"{g.graph}-{g.kind}-{i}.{j}",
                        graph=g.graph,
                        kind=g.kind,
                        bytes_read=_share(g.bytes_read.at(tokens), count),
                        bytes_written=_share(g.bytes_written.at(tokens), count),
                        work=g.work,
                        float8_steps=g.float8_steps,
                        recomputed=g.recomputed,
                        after_all_gather=g.after_all_gather,
                        kernel_class=g.kernel_class,
                        scattered_elements=_share(g.scattered_elements.at(tokens), count),
                        bytes_reread=_share(g.bytes_reread.at(tokens), count),
                        arithmetic=_share(g.arithmetic.at(tokens), count),
                    )
                )
        gemms = []
        for i, t in enumerate(piece.gemms):
            m, k, n = (_whole(d.at(tokens), "gemm dim") for d in (t.m, t.k, t.n))
            gemms.append(
                BlockGemm(
                    name=f"{t.graph}-{t.op}-{i}",
                    graph=t.graph,
                    op=t.op,
                    m=m,
                    k=k,
                    n=n,
                    dtype=t.dtype,
                    bytes=round(t.bytes.at(tokens)),
                    recomputed=t.recomputed,
                    kernel_class=t.kernel_class,
                )
            )
        collectives = []
        for i, c in enumerate(piece.collectives):
            count = max(round(c.count.at(tokens)), 0)
            for j in range(count):
                collectives.append(
                    Collective(
                        kind=CollectiveKind(c.kind),
                        bytes=_share(c.bytes.at(tokens), count),
                        dtype=c.dtype,
                        group_size=c.group_size,
                        graph=c.graph,
                        feeds_cast=c.feeds_cast,
                        mesh=c.mesh,
                        compiled=c.compiled,
                        recomputed=c.recomputed,
                        name=f"{c.kind}-{i}.{j}",
                    )
                )
        return replace(
            self.capture,
            spec=spec,
            kernels=tuple(kernels),
            gemms=tuple(gemms),
            collectives=tuple(collectives),
            disagreements=(),
        )

    def with_checks(self, checks: Iterable[FitCheck]) -> BlockFit:
        return replace(self, checks=tuple(checks))

    def to_dict(self) -> dict[str, Any]:
        def affine(obj: Any) -> dict[str, Any]:
            return {
                name: value.to_json() if isinstance(value, Affine) else value
                for name, value in obj.__dict__.items()
            }

        return {
            "capture": {**self.capture.to_dict(), "kernels": [], "gemms": [], "collectives": []},
            "segments": [
                {
                    "tokens": list(s.tokens),
                    "kernels": [affine(g) for g in s.kernels],
                    "gemms": [affine(t) for t in s.gemms],
                    "collectives": [affine(c) for c in s.collectives],
                }
                for s in self.segments
            ],
            "checks": [c.__dict__ for c in self.checks],
            **({} if self.saved_bytes is None else {"saved_bytes": self.saved_bytes.to_json()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BlockFit:
        def read(kind: type, row: Mapping[str, Any]) -> Any:
            values = dict(row)
            for name in (
                "count",
                "bytes",
                "bytes_read",
                "bytes_written",
                "scattered_elements",
                "bytes_reread",
                "arithmetic",
                "m",
                "k",
                "n",
            ):
                if name in values:
                    values[name] = Affine.from_json(values[name])
            if "float8_steps" in values:
                values["float8_steps"] = tuple(values["float8_steps"])
            return kind(**values)

        try:
            segments = []
            for s in data["segments"]:
                t1, t2 = (int(t) for t in s["tokens"])
                segments.append(
                    Segment(
                        tokens=(t1, t2),
                        kernels=tuple(read(KernelGroup, k) for k in s["kernels"]),
                        gemms=tuple(read(GemmTerm, g) for g in s["gemms"]),
                        collectives=tuple(read(CollectiveGroup, c) for c in s["collectives"]),
                    )
                )
            if not segments or any(a.tokens[1] != b.tokens[0] for a, b in pairwise(segments)):
                raise ValueError("segments must be neighbours in token order")
            return cls(
                capture=BlockCapture.from_dict(data["capture"]),
                segments=tuple(segments),
                checks=tuple(FitCheck(**c) for c in data.get("checks", ())),
                saved_bytes=(
                    Affine.from_json(data["saved_bytes"]) if "saved_bytes" in data else None
                ),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"not a block fit: {type(e).__name__}: {e}") from None


def _share(total: Fraction, count: int) -> int:
    return round(total / count) if count else 0


def _whole(value: Fraction, what: str) -> int:
    if value.denominator != 1 or value < 1:
        raise ModelError(f"the fit gives a {what} of {value} here: outside what it holds")
    return int(value)


def _kernel_key(k: BlockKernel) -> tuple[Any, ...]:
    return (
        k.graph,
        k.kind,
        k.work,
        k.recomputed,
        k.after_all_gather,
        k.float8_steps,
        k.kernel_class,
    )


def _collective_key(c: Collective) -> tuple[Any, ...]:
    return (
        c.kind.value,
        c.dtype,
        c.mesh,
        c.graph,
        c.group_size,
        c.compiled,
        c.recomputed,
        c.feeds_cast,
    )


def _grouped(items: Iterable[Any], key: Any, sizes: Any) -> dict[tuple[Any, ...], list[int]]:
    """key -> [count, *summed sizes], in first-seen order."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for item in items:
        values = sizes(item)
        totals = out.setdefault(key(item), [0] * (1 + len(values)))
        totals[0] += 1
        for i, v in enumerate(values, 1):
            totals[i] += v
    return out


def _gemm_key(g: BlockGemm) -> tuple[Any, ...]:
    """What pairs a gemm across sizes. Not its dtype: the code may hand the gemm its float8
    operands in an order the reads list differently at another size."""
    return (g.graph, g.op, g.recomputed)


def fit_block(captures: Sequence[BlockCapture]) -> BlockFit:
    """The piecewise fit through compiles of the same block at different tokens per rank."""
    ordered = sorted(captures, key=lambda c: c.spec.tokens)
    knots = [c.spec.tokens for c in ordered]
    if len(ordered) < 2 or len(set(knots)) != len(knots):
        raise ModelError("a block fit needs compiles at two or more different token counts")
    first = ordered[0]
    for other in ordered[1:]:
        same: dict[str, Any] = {"tokens": other.spec.tokens, "seq_len": other.spec.seq_len}
        if replace(first.spec, **same) != other.spec or (
            first.recipe,
            first.device,
            first.gpu,
        ) != (other.recipe, other.device, other.gpu):
            raise ModelError("a block fit's compiles must differ in tokens only")
    base = replace(first, kernels=(), gemms=(), collectives=(), disagreements=())
    segments = tuple(_segment(a, b) for a, b in pairwise(ordered))
    return BlockFit(capture=base, segments=segments)


FIT_TOLERANCE = 0.01  # a check missing by more than this becomes a knot (fit_checked)


def fit_checked(
    knots: Sequence[BlockCapture],
    checks: Sequence[BlockCapture],
    *,
    timer: Callable[[BlockCapture], float] | None = None,
) -> BlockFit:
    """`fit_block` through `knots`, checked against `checks`. A check the fit misses by more
    than FIT_TOLERANCE (bytes, FLOPs or collectives) crossed one of Inductor's thresholds: it
    joins the knots, the smallest such first, and the fit is redone; the rest stay checks."""
    knots, pending = list(knots), sorted(checks, key=lambda c: c.spec.tokens)
    while True:
        fit = fit_block(knots)
        results = [check(fit, c, timer=timer) for c in pending]
        missed = [c for c, r in zip(pending, results) if r.worst > FIT_TOLERANCE]
        if not missed:
            return fit.with_checks(results)
        knots.append(missed[0])
        pending.remove(missed[0])


def _segment(low: BlockCapture, high: BlockCapture) -> Segment:
    t1, t2 = low.spec.tokens, high.spec.tokens

    def through(a: int, b: int) -> Affine:
        return Affine.through(t1, a, t2, b)

    def groups(key: Any, sizes: Any, width: int, a: Iterable[Any], b: Iterable[Any]) -> list[Any]:
        ga, gb = _grouped(a, key, sizes), _grouped(b, key, sizes)
        zero = [0] * (1 + width)  # a group one compile lacks: none of it there
        return [
            (k, [through(x, y) for x, y in zip(ga.get(k, zero), gb.get(k, zero))])
            for k in dict.fromkeys([*ga, *gb])
        ]

    kernels = tuple(
        KernelGroup(
            key[0],
            key[1],
            key[2],
            key[3],
            key[4],
            key[5],
            terms[0],
            terms[1],
            terms[2],
            kernel_class=key[6],
            scattered_elements=terms[3],
            bytes_reread=terms[4],
            arithmetic=terms[5],
        )
        for key, terms in groups(
            _kernel_key,
            lambda k: (
                k.bytes_read,
                k.bytes_written,
                k.scattered_elements,
                k.bytes_reread,
                k.arithmetic,
            ),
            5,
            low.kernels,
            high.kernels,
        )
    )
    collectives = tuple(
        CollectiveGroup(*key, *terms)
        for key, terms in groups(
            _collective_key, lambda c: (c.bytes,), 1, low.collectives, high.collectives
        )
    )
    gemms = tuple(
        GemmTerm(
            a.graph,
            a.op,
            a.dtype,
            a.recomputed,
            m=through(a.m, b.m),
            k=through(a.k, b.k),
            n=through(a.n, b.n),
            bytes=through(a.bytes, b.bytes),
            kernel_class=a.kernel_class,
        )
        for a, b in _paired(low.gemms, high.gemms, t1, t2)
    )
    return Segment(tokens=(t1, t2), kernels=kernels, gemms=gemms, collectives=collectives)


def _paired(
    low: Sequence[BlockGemm], high: Sequence[BlockGemm], t1: int, t2: int
) -> list[tuple[BlockGemm, BlockGemm]]:
    """Each gemm of one compile with its counterpart in the other. Inductor may order the
    backward's gemms differently at another size, so gemms pair by what they are: same pass,
    op and recompute, and each dim either equal (a weight's) or scaled by t2 / t1 (a
    token dim). A perfect matching under that rule (Kuhn's augmenting paths); none: the
    graph changed shape between the two sizes."""

    def fits(a: BlockGemm, b: BlockGemm) -> bool:
        return _gemm_key(a) == _gemm_key(b) and all(
            y == x or y * t1 == x * t2 for x, y in ((a.m, b.m), (a.k, b.k), (a.n, b.n))
        )

    options = [[j for j, b in enumerate(high) if fits(a, b)] for a in low]
    owner: dict[int, int] = {}  # high index -> low index

    def place(i: int, seen: set[int]) -> bool:
        for j in options[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    if len(low) != len(high) or not all(place(i, set()) for i in range(len(low))):
        raise ModelError(
            f"the gemms differ between {t1} and {t2} tokens: the block's graph changed shape"
        )
    pairs = sorted((i, j) for j, i in owner.items())
    return [(low[i], high[j]) for i, j in pairs]


def check(
    fit: BlockFit, fresh: BlockCapture, *, timer: Callable[[BlockCapture], float] | None = None
) -> FitCheck:
    """The fit at a fresh compile's tokens against that compile (see FitCheck); `timer`
    gives a capture's time."""
    fitted = fit.at(fresh.spec.tokens, seq_len=fresh.spec.seq_len)

    def error(a: float, b: float) -> float:
        return abs(a - b) / b if b else float(a != b)

    worst = [0.0, 0.0, 0.0]
    for graph in ("fwd", "bwd"):
        f, c = fitted.totals(graph), fresh.totals(graph)
        worst[0] = max(worst[0], error(f.kernel_bytes, c.kernel_bytes))
        worst[1] = max(worst[1], error(f.gemm_flops, c.gemm_flops))
        worst[2] = max(
            worst[2],
            error(fitted.collective_bytes(graph=graph), fresh.collective_bytes(graph=graph)),
        )
    return FitCheck(
        tokens=fresh.spec.tokens,
        kernel_bytes_error=worst[0],
        gemm_flops_error=worst[1],
        collective_bytes_error=worst[2],
        kernels_fit=len(fitted.kernels),
        kernels_compiled=len(fresh.kernels),
        time_error=None if timer is None else error(timer(fitted), timer(fresh)),
    )
