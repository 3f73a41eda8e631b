"""compare's output: the worst and ideal models beside the generated kernels, per shape and as
exact expressions in M, K, N, as text and as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping

from f8roof.calibration.file import kernel_set_to_dict
from f8roof.engine.compare import CalibrationCheck, Comparison, ReadOffComparison, ShapeComparison
from f8roof.traffic.fit import KernelSet, Polynomial


def _levels(s, *, actual: str) -> list[str]:
    """A shape's overhead bytes at the seed's worst case, the ideal and what the code moves
    (`actual`: generated, or read off torchao's kernels), with their ratios."""
    M, K, N = s.shape
    width = len(actual)
    lines = [f"shape M={M} K={K} N={N}: overhead bytes"]
    for label, value in (
        ("worst", s.bytes_worst),
        ("ideal", s.bytes_ideal),
        (actual, s.bytes_actual),
    ):
        ratio = f"  {actual}/{label} {s.bytes_actual / value:.3f}" if label != actual else ""
        lines.append(f"  {label:{width}} {value:>16,} B  {_mib(value):>14}{ratio}")
    return lines


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _diff_words(diff: Polynomial, against: str) -> str:
    if not diff.terms:
        return f"actual equals {against} exactly"
    return f"actual - {against} = {diff}"


def versions_text(versions: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {value}" for name, value in versions.items())


def computes(launch) -> str:
    """What a launch computes, in words: 'gemm', its float8 steps, its neighbours, or both."""
    if launch.work.value == "gemm":
        return "gemm"
    steps = ", ".join(launch.float8_steps)
    neighbours = "+".join(launch.context_modules)
    if launch.work.value == "fused":
        return f"{neighbours} + {steps}"
    return neighbours if launch.work.value == "context" else steps


def _time_range(c: Comparison, launch) -> str:
    """'low-high us' at the kernel class's range on the target GPU; '-' where none applies."""
    found = c.kernel_time_s(launch)
    if found is None:
        return "-"
    low, _, high = found
    return f"{low * 1e6:.1f}-{high * 1e6:.1f}"


def _kernel_lines(c: Comparison, capture) -> list[str]:
    header = (
        f"  {'graph':5} {'kernel':50} {'kind':20} {'class':26} {'us (range)':>17} "
        f"{'work':7} {'role':20} {'read B':>14} {'written B':>14}  computes"
    )
    lines = [header]
    for k in capture.launches:
        kernel_class = k.kernel_class.value if k.kernel_class is not None else "-"
        lines.append(
            f"  {k.graph.value:5} {k.name[:50]:50} {k.kind.value:20} {kernel_class:26} "
            f"{_time_range(c, k):>17} {k.work.value:7} {k.role or '-'!s:20} "
            f"{k.bytes_read:>14,} {k.bytes_written:>14,}  {computes(k)}"
        )
    lines += [f"  byte counts disagree: {line}" for line in capture.disagreements()]
    return lines


def read_off_text(c: ReadOffComparison) -> str:
    """The read-off kernels per shape beside worst and ideal, saying they were read, not
    compiled."""
    target = f" for {c.gpu}" if c.gpu else ""
    lines = [
        (
            f"{c.variant.key}: recipe {c.variant.recipe_name}, implementation "
            f"{c.variant.implementation_name}, context {c.variant.context.name}; kernels READ "
            f"OFF torchao's code{target}, not compiled: {c.reason}"
        ),
        f"versions: {versions_text(c.versions)}",
        "",
    ]
    for s in c.shapes:
        lines += _levels(s, actual="read-off")
        inductor = (
            "triton_red_*, triton_poi_*: Inductor's"
            if c.variant.recipe_name == "nvfp4"
            else "to_blocked: Inductor's"
        )
        lines.append(f"  {len(s.kernels)} read-off kernels (torchao's casts; {inductor})")
        lines.append(
            f"  {'kernel':50} {'pass':26} {'timed as':20} {'read B':>14} {'written B':>14}"
        )
        for k in s.kernels:
            lines.append(
                f"  {k.kernel:50} {k.name:26} {k.kind:20} {k.bytes_read:>14,} {k.bytes_written:>14,}"
            )
        lines.append("")
    lines.append(f"worst = {c.worst}")
    lines.append(f"ideal = {c.ideal}")
    return "\n".join(lines) + "\n"


def read_off_json(c: ReadOffComparison) -> str:
    data = {
        "variant": c.variant.key,
        "recipe": c.variant.recipe_name,
        "implementation": c.variant.implementation_name,
        "context": c.variant.context.name,
        "versions": dict(c.versions),
        "device": "read-off",
        "gpu": c.gpu,
        "bytes_source": "read-off",
        "reason": c.reason,
        "worst": _poly_json(c.worst),
        "ideal": _poly_json(c.ideal),
        "shapes": [
            {
                "M": s.shape[0],
                "K": s.shape[1],
                "N": s.shape[2],
                "bytes_worst": s.bytes_worst,
                "bytes_ideal": s.bytes_ideal,
                "bytes_read_off": s.bytes_actual,
                "kernels": [
                    {
                        "kernel": k.kernel,
                        "pass": k.name,
                        "kind": k.kind,
                        "bytes_read": k.bytes_read,
                        "bytes_written": k.bytes_written,
                    }
                    for k in s.kernels
                ],
            }
            for s in c.shapes
        ],
        "fitted": None,
        "calibration": None,
    }
    return json.dumps(data, indent=1) + "\n"


def render_text(c: Comparison | ReadOffComparison, check: CalibrationCheck | None = None) -> str:
    if isinstance(c, ReadOffComparison):
        return read_off_text(c)
    where = f"{c.device}" + (f" ({c.gpu})" if c.gpu else "")
    title = (
        f"{c.variant.key}: recipe {c.variant.recipe_name}, implementation "
        f"{c.variant.implementation_name}, context {c.variant.context.name}; "
        f"kernels compiled on {where}"
    )
    lines = [title, f"versions: {versions_text(c.versions)}", ""]
    for s in c.shapes:
        lines += _levels(s, actual="actual")
        if s.baseline is not None:
            lines.append(
                f"  actual = float8 graph's non-gemm {s.capture.overhead_bytes:,} B - bf16 "
                f"graph's {s.baseline.overhead_bytes:,} B (the context's kernels in bf16)"
            )
        if s.bytes_actual > s.bytes_worst:
            lines.append(
                f"  !!! ACTUAL EXCEEDS THE SEED'S WORST CASE by {s.bytes_actual - s.bytes_worst:,} B "
                f"({s.bytes_actual / s.bytes_worst - 1:+.1%}): the worst-case model is wrong here"
            )
        lines.append(f"  float8 graph ({s.capture.variant}): {len(s.capture.launches)} kernels")
        lines += _kernel_lines(c, s.capture)
        if s.baseline is not None:
            lines.append(f"  bf16 graph ({s.baseline.variant}): {len(s.baseline.launches)} kernels")
            lines += _kernel_lines(c, s.baseline)
            fused = s.fused_into_neighbours()
            lines.append(
                "  fused into the neighbours: "
                + ("nothing" if not fused else f"{len(fused)} kernels")
            )
            for k in fused:
                lines.append(
                    f"    {k.graph.value} {k.name}: {', '.join(k.float8_steps)} "
                    f"({k.role or 'no role'}) in {'+'.join(k.context_modules)}'s kernel"
                )
        lines.append("")
    lines.append(f"worst (the seed's model) = {c.worst}")
    lines.append(f"ideal = {c.ideal}")
    if c.fit is not None:
        for i, kernel_set in enumerate(c.fit.kernel_sets):
            lines.append(_kernel_set_text(c, i, kernel_set))
        for u in c.fit.unfitted:
            lines.append(f"unfitted shapes {', '.join(map(str, u.shapes))}: {u.reason}")
    if check is not None:
        lines += ["", *calibration_check_lines(check)]
    return "\n".join(lines) + "\n"


def _kernel_set_text(c: Comparison, index: int, kernel_set: KernelSet) -> str:
    base = c.baseline_total(kernel_set)
    total = kernel_set.total if base is None else kernel_set.total - base
    over_worst = total - c.worst
    solved = (
        f"; solved independently on {len(kernel_set.shapes) - len(kernel_set.verified)} shapes, "
        f"exact on {len(kernel_set.verified)} more"
        if kernel_set.verified
        else ""
    )
    lines = [
        f"actual (kernel set {index + 1}: {len(kernel_set.kernels)} kernels, read off the buffers, exact at "
        f"{len(kernel_set.shapes)} shape{'s' * (len(kernel_set.shapes) > 1)}{solved}) = {total}"
        + (
            f"  + split-reduction workspace <= {kernel_set.workspace_max:,} B"
            if kernel_set.workspace_max
            else ""
        ),
    ]
    if base is not None:
        lines.append(f"  = float8 graph {kernel_set.total} - bf16 graph {base}")
    elif c.baseline_fit is not None:
        lines.append(
            "  (no bf16 kernel set holds these shapes: the float8 graph's bytes, unsubtracted)"
        )
    lines += [
        f"  {_diff_words(total - c.ideal, 'ideal')}  (what torch.compile moves beyond the minimum)",
        f"  {_diff_words(over_worst, 'worst')}",
    ]
    worse = [f"{c}*{m}" if m != "1" else f"{c} (constant)" for m, c in over_worst.terms if c > 0]
    if worse:
        lines.append(
            f"  !!! actual exceeds the seed's worst case in {', '.join(worse)}: "
            "the worst-case model undercounts what torch.compile does"
        )
    for k in kernel_set.kernels:
        lines.append(f"    {k.key:6} {k.name[:58]:58} {k.role or '-'!s:20} {k.nbytes}")
    shapes = kernel_set.shapes
    lo = [min(s[i] for s in shapes) for i in range(3)]
    hi = [max(s[i] for s in shapes) for i in range(3)]
    lines.append(
        f"  shapes in this kernel set: M {lo[0]}..{hi[0]}, K {lo[1]}..{hi[1]}, N {lo[2]}..{hi[2]}"
    )
    return "\n".join(lines)


def _poly_json(p: Polynomial) -> dict:
    return {"expression": str(p), "coefficients": {m: str(c) for m, c in p.terms}}


def _kernels_json(c: Comparison, capture) -> list[dict]:
    return [
        {
            "name": k.name,
            "graph": k.graph.value,
            "kind": k.kind.value,
            "class": None if k.kernel_class is None else k.kernel_class.value,
            "time_s_range": c.kernel_time_s(k),
            "role": k.role,
            "gemm": k.is_gemm,
            "work": k.work.value,
            "float8_steps": list(k.float8_steps),
            "context_modules": list(k.context_modules),
            "ops": [f"{o.module or '?'}:{o.op}" for o in k.ops if o.is_work],
            "bytes_read": k.bytes_read,
            "bytes_written": k.bytes_written,
            "workspace_bytes": capture.workspace_bytes(k),
            "bytes_code": k.bytes_code,
            "bytes_scheduler": k.bytes_scheduler,
            "bytes_inductor": k.bytes_inductor,
        }
        for k in capture.launches
    ]


def _shape_json(c: Comparison, s: ShapeComparison) -> dict:
    data = {
        "M": s.shape[0],
        "K": s.shape[1],
        "N": s.shape[2],
        "bytes_worst": s.bytes_worst,
        "bytes_ideal": s.bytes_ideal,
        "bytes_actual": s.bytes_actual,
        "kernels": _kernels_json(c, s.capture),
        "disagreements": list(s.capture.disagreements()),
    }
    if s.baseline is not None:
        data |= {
            "bytes_float8_graph": s.capture.overhead_bytes,
            "bytes_bf16_graph": s.baseline.overhead_bytes,
            "bf16_kernels": _kernels_json(c, s.baseline),
            "bf16_disagreements": list(s.baseline.disagreements()),
            "fused_into_neighbours": [
                {
                    "graph": k.graph.value,
                    "name": k.name,
                    "role": k.role,
                    "float8_steps": list(k.float8_steps),
                    "context_modules": list(k.context_modules),
                }
                for k in s.fused_into_neighbours()
            ],
        }
    return data


def _kernel_set_json(c: Comparison, r: KernelSet) -> dict:
    base = c.baseline_total(r)
    total = r.total if base is None else r.total - base
    fitted = kernel_set_to_dict(r, polynomial=_poly_json)
    return {
        "actual": _poly_json(total),
        "float8_graph": fitted.pop("total"),
        "bf16_graph": None if base is None else _poly_json(base),
        "actual_minus_worst": _poly_json(total - c.worst),
        "actual_minus_ideal": _poly_json(total - c.ideal),
        **fitted,
    }


def to_json(c: Comparison | ReadOffComparison, check: CalibrationCheck | None = None) -> str:
    if isinstance(c, ReadOffComparison):
        return read_off_json(c)
    data = {
        "variant": c.variant.key,
        "recipe": c.variant.recipe_name,
        "implementation": c.variant.implementation_name,
        "context": c.variant.context.name,
        "versions": dict(c.versions),
        "device": c.device,
        "gpu": c.gpu,
        "worst": _poly_json(c.worst),
        "ideal": _poly_json(c.ideal),
        "shapes": [_shape_json(c, s) for s in c.shapes],
        "fitted": None
        if c.fit is None
        else {
            "kernel_sets": [_kernel_set_json(c, r) for r in c.fit.kernel_sets],
            "unfitted": [
                {"shapes": [list(s) for s in u.shapes], "reason": u.reason} for u in c.fit.unfitted
            ],
        },
        "calibration": None if check is None else check.to_dict(),
    }
    return json.dumps(data, indent=1) + "\n"


def calibration_check_lines(check: CalibrationCheck) -> list[str]:
    note = "its fits leave out split-reduction workspace, which Inductor sizes per shape"
    out = [
        f"calibration {check.source}",
        f"  its fitted overhead beside this compile's ({note})",
    ]
    for (M, K, N), fitted, generated in zip(check.shapes, check.fitted, check.generated):
        diff = generated - fitted
        said = "equal" if diff == 0 else f"{diff:+,} B ({diff / max(fitted, 1):+.2%})"
        out.append(
            f"  M={M} K={K} N={N}: calibration {fitted:,} B, generated here {generated:,} B: {said}"
        )
    return out
