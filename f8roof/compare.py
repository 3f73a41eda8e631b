"""The worst-case and ideal models beside what torch.compile actually generates.

Per shape: overhead bytes at the three levels and each actual kernel; then the exact fit of
the actual bytes in M, K, N (per regime of kernel sets) beside the model expressions, and
their differences. Actual above the seed's "worst" case means the seed's model is wrong there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from f8roof.models.fit import (
    CPU_FIT_SHAPES,
    FIT_SHAPES,
    Polynomial,
    Regime,
    Shape,
    ShapeSample,
    TrafficFit,
    fit_traffic,
    from_sympy,
)
from f8roof.models.hardware import GPU
from f8roof.models.recipes import Recipe, Role
from f8roof.models.traffic import ideal_traffic, worst_traffic


@dataclass(frozen=True)
class ShapeComparison:
    shape: Shape
    bytes_worst: int
    bytes_ideal: int
    capture: object  # profiler.capture.Capture (kept untyped: models stay torch-free here)

    @property
    def bytes_actual(self) -> int:
        return self.capture.overhead_bytes


@dataclass(frozen=True)
class Comparison:
    recipe: Recipe
    device: str
    gpu: str | None
    worst: Polynomial
    ideal: Polynomial
    shapes: tuple[ShapeComparison, ...]
    fit: TrafficFit | None  # None when not asked for

    def exceeds_worst(self) -> list[ShapeComparison]:
        return [s for s in self.shapes if s.bytes_actual > s.bytes_worst]


def samples_of(captures) -> list[ShapeSample]:
    return [ShapeSample(c.shape, tuple(c.samples())) for c in captures]


def compare(
    recipe: Recipe,
    shapes: list[Shape],
    *,
    device: str,
    gpu: GPU | None,
    fit: bool,
    fused: frozenset[Role] = frozenset(),
    limited: frozenset[Role] = frozenset(),
    progress=None,
) -> Comparison:
    from f8roof.profiler.capture import capture
    from f8roof.profiler.cpu_rowwise import require_cpu_rowwise

    require_cpu_rowwise([recipe], device=device)
    worst = from_sympy(worst_traffic(recipe, fused=fused, limited=limited).total)
    ideal = from_sympy(ideal_traffic(recipe, fused=fused).total)
    fit_shapes = (CPU_FIT_SHAPES if device == "cpu" else FIT_SHAPES) if fit else ()
    work = list(dict.fromkeys([*shapes, *fit_shapes]))
    captured = {}
    for shape in progress(work) if progress else work:
        captured[shape] = capture(recipe, shape, device=device, gpu=gpu)
    rows = tuple(
        ShapeComparison(s, int(worst.exact(s)), int(ideal.exact(s)), captured[s]) for s in shapes
    )
    traffic = fit_traffic(samples_of([captured[s] for s in fit_shapes])) if fit else None
    return Comparison(
        recipe,
        device,
        gpu.name if gpu and device == "codegen" else None,
        worst,
        ideal,
        rows,
        traffic,
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _diff_words(diff: Polynomial, against: str) -> str:
    if not diff.terms:
        return f"actual equals {against} exactly"
    return f"actual - {against} = {diff}"


def render_text(c: Comparison) -> str:
    where = f"{c.device}" + (f" ({c.gpu})" if c.gpu else "")
    lines = [f"recipe {c.recipe.name}, kernels compiled on {where}", ""]
    for s in c.shapes:
        M, K, N = s.shape
        lines.append(f"shape M={M} K={K} N={N}: overhead bytes")
        for label, value in (
            ("worst", s.bytes_worst),
            ("ideal", s.bytes_ideal),
            ("actual", s.bytes_actual),
        ):
            ratio = f"  actual/{label} {s.bytes_actual / value:.3f}" if label != "actual" else ""
            lines.append(f"  {label:7} {value:>16,} B  {_mib(value):>14}{ratio}")
        if s.bytes_actual > s.bytes_worst:
            lines.append(
                f"  !!! ACTUAL EXCEEDS THE SEED'S WORST CASE by {s.bytes_actual - s.bytes_worst:,} B "
                f"({s.bytes_actual / s.bytes_worst - 1:+.1%}): the worst-case model is wrong here"
            )
        lines.append(
            f"  {'graph':5} {'kernel':58} {'kind':20} {'role':20} {'read B':>14} {'written B':>14}"
        )
        for k in s.capture.launches:
            tag = "  (gemm)" if k.is_gemm else ""
            lines.append(
                f"  {k.graph.value:5} {k.name[:58]:58} {k.kind.value:20} {k.role or '-'!s:20} "
                f"{k.bytes_read:>14,} {k.bytes_written:>14,}{tag}"
            )
        for line in s.capture.disagreements():
            lines.append(f"  byte counts disagree: {line}")
        lines.append("")
    lines.append(f"worst = {c.worst}")
    lines.append(f"ideal = {c.ideal}")
    if c.fit is not None:
        for i, regime in enumerate(c.fit.regimes):
            lines.append(_regime_text(c, i, regime))
        for u in c.fit.unfitted:
            lines.append(f"unfitted shapes {', '.join(map(str, u.shapes))}: {u.reason}")
    return "\n".join(lines) + "\n"


def _regime_text(c: Comparison, index: int, regime: Regime) -> str:
    over_worst = regime.total - c.worst
    solved = (
        f"; solved independently on {len(regime.shapes) - len(regime.verified)} shapes, "
        f"exact on {len(regime.verified)} more"
        if regime.verified
        else ""
    )
    lines = [
        f"actual (regime {index + 1}: {len(regime.kernels)} kernels, read off the buffers, exact at "
        f"{len(regime.shapes)} shape{'s' * (len(regime.shapes) > 1)}{solved}) = {regime.total}"
        + (
            f"  + split-reduction workspace <= {regime.workspace_max:,} B"
            if regime.workspace_max
            else ""
        ),
        f"  {_diff_words(regime.total - c.ideal, 'ideal')}  (what torch.compile moves beyond the minimum)",
        f"  {_diff_words(over_worst, 'worst')}",
    ]
    worse = [f"{c}*{m}" if m != "1" else f"{c} (constant)" for m, c in over_worst.terms if c > 0]
    if worse:
        lines.append(
            f"  !!! actual exceeds the seed's worst case in {', '.join(worse)}: "
            "the worst-case model undercounts what torch.compile does"
        )
    for k in regime.kernels:
        lines.append(f"    {k.key:6} {k.name[:58]:58} {k.role or '-'!s:20} {k.nbytes}")
    shapes = regime.shapes
    lo = [min(s[i] for s in shapes) for i in range(3)]
    hi = [max(s[i] for s in shapes) for i in range(3)]
    lines.append(
        f"  shapes in this regime: M {lo[0]}..{hi[0]}, K {lo[1]}..{hi[1]}, N {lo[2]}..{hi[2]}"
    )
    return "\n".join(lines)


def _poly_json(p: Polynomial) -> dict:
    return {"expression": str(p), "coefficients": {m: str(c) for m, c in p.terms}}


def to_json(c: Comparison) -> str:
    data = {
        "recipe": c.recipe.name,
        "device": c.device,
        "gpu": c.gpu,
        "worst": _poly_json(c.worst),
        "ideal": _poly_json(c.ideal),
        "shapes": [
            {
                "M": s.shape[0],
                "K": s.shape[1],
                "N": s.shape[2],
                "bytes_worst": s.bytes_worst,
                "bytes_ideal": s.bytes_ideal,
                "bytes_actual": s.bytes_actual,
                "kernels": [
                    {
                        "name": k.name,
                        "graph": k.graph.value,
                        "kind": k.kind.value,
                        "role": k.role,
                        "gemm": k.is_gemm,
                        "bytes_read": k.bytes_read,
                        "bytes_written": k.bytes_written,
                        "workspace_bytes": s.capture.workspace_bytes(k),
                        "bytes_code": k.bytes_code,
                        "bytes_scheduler": k.bytes_scheduler,
                        "bytes_inductor": k.bytes_inductor,
                    }
                    for k in s.capture.launches
                ],
                "disagreements": list(s.capture.disagreements()),
            }
            for s in c.shapes
        ],
        "fitted": None
        if c.fit is None
        else {
            "regimes": [
                {
                    "actual": _poly_json(r.total),
                    "actual_minus_worst": _poly_json(r.total - c.worst),
                    "actual_minus_ideal": _poly_json(r.total - c.ideal),
                    "workspace_max_bytes": r.workspace_max,
                    "shapes": [list(s) for s in r.shapes],
                    "verified": [list(s) for s in r.verified],
                    "kernels": [
                        {
                            "key": k.key,
                            "name": k.name,
                            "graph": k.graph,
                            "kind": k.kind,
                            "role": k.role,
                            "bytes": _poly_json(k.nbytes),
                        }
                        for k in r.kernels
                    ],
                }
                for r in c.fit.regimes
            ],
            "unfitted": [
                {"shapes": [list(s) for s in u.shapes], "reason": u.reason} for u in c.fit.unfitted
            ],
        },
    }
    return json.dumps(data, indent=1) + "\n"


def capture_differences(expected, actual) -> list[str]:
    """How two captures of one recipe and shape differ (e.g. codegen-only vs compiled on the
    GPU): kernels present in one and not the other, matched as an order-free set by graph,
    kind, role and bytes; names are ignored (codegen names follow decomposed ops)."""

    def kernel_set(c):
        return sorted((s.graph, s.kind, s.role or "-", s.nbytes) for s in c.samples())

    left, right = kernel_set(expected), kernel_set(actual)
    lines = []
    for item in left:
        if item in right:
            right.remove(item)
        else:
            lines.append(f"only in {expected.device.value}: {' '.join(map(str, item))}")
    lines += [f"only in {actual.device.value}: {' '.join(map(str, item))}" for item in right]
    return lines
