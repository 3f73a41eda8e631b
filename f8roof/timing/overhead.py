"""The calibrated overhead at any shape: a variant's fitted kernel sets (one per set of kernels
Inductor chooses over a range of shapes) evaluated as polynomials in M, K, N, timed by the kernel-time model
(`timing/kernel_time.py`), and the range over the kernel sets of the nearest fit shapes."""

from __future__ import annotations

import numpy as np

from f8roof.timing.kernel_time import KernelTimeModel
from f8roof.traffic.fit import KernelSet
from f8roof.traffic.monomials import MONOMIALS, ShapeArrays


def fitted_kernels(
    kernel_sets: tuple[KernelSet, ...],
    kernel_time: KernelTimeModel,
    variant: str,
    shapes: ShapeArrays,
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and time of a variant's fitted kernel set at every shape, each shape in the kernel set
    of its nearest calibration shape (kernel ids: "variant/kernel-set index/key").

    Each kernel's time is linear in its bytes (floor + bytes / bandwidth, times its factor),
    so a kernel set's bytes and time are each one polynomial in the monomials of M, K, N,
    evaluated once per shape, not once per kernel."""
    bytes_coef = np.zeros((len(kernel_sets), len(MONOMIALS)))
    time_coef = np.zeros((len(kernel_sets), len(MONOMIALS)))
    for index, kernel_set in enumerate(kernel_sets):
        for kernel in kernel_set.kernels:
            model = kernel_time.kind(kernel.kind, kernel.kernel_class)
            factor = kernel_time.factor(f"{variant}/{index}/{kernel.key}")
            coef = np.array([float(c) for c in kernel.nbytes.coefficients()])
            scattered = np.array([float(c) for c in kernel.scattered_elements.coefficients()])
            reread = np.array([float(c) for c in kernel.reread.coefficients()])
            bytes_coef[index] += coef
            # traffic or arithmetic, term by term (both grow with the same tensors)
            time_coef[index] += factor * kernel_time.busy_s(
                model.bandwidth_bytes_per_s,
                coef,
                kernel_time.extra_bytes(scattered, reread),
                coef * kernel.arithmetic_per_byte,
            )
            time_coef[index, -1] += model.floor_s * factor  # the constant: one floor each
    if len(kernel_sets) == 1:
        return shapes.polynomials(bytes_coef)[0], shapes.polynomials(time_coef)[0]
    owner = nearest_kernel_set(kernel_sets, shapes)
    return shapes.polynomials(bytes_coef, owner), shapes.polynomials(time_coef, owner)


def nearest_kernel_set(kernel_sets: tuple[KernelSet, ...], shapes: ShapeArrays) -> np.ndarray:
    """Index of the kernel set whose shapes lie nearest in log2 space, per query shape."""
    if len(kernel_sets) == 1:
        return np.zeros(len(shapes), dtype=np.intp)
    key = ("nearest kernel set", tuple(r.shapes for r in kernel_sets))
    return shapes.cached(key, lambda: _nearest_kernel_set(kernel_sets, shapes))


def _nearest_kernel_set(kernel_sets: tuple[KernelSet, ...], shapes: ShapeArrays) -> np.ndarray:
    points = tuple(sorted(s for r in kernel_sets for s in r.shapes))
    owner = {s: index for index, r in enumerate(kernel_sets) for s in r.shapes}
    distance = shapes.distances(points)
    nearest, best = np.full(len(shapes), owner[points[0]], dtype=np.intp), distance[0].copy()
    for point, row in zip(points[1:], distance[1:]):  # a running minimum: contiguous rows
        closer = row < best
        np.copyto(best, row, where=closer)
        nearest[closer] = owner[point]
    return nearest


# Kernel-set uncertainty: how many calibration shapes around a query shape are consulted.
NEAREST_KERNEL_SETS = 5


def kernel_set_range(
    fp8: tuple[KernelSet, ...], bf16: tuple[KernelSet, ...], shapes: ShapeArrays
) -> tuple[np.ndarray, np.ndarray] | None:
    """Lowest and highest overhead bytes (float8 graph less bf16 graph) over the kernel sets
    Inductor compiled at the `NEAREST_KERNEL_SETS` calibration shapes nearest each query shape.

    The fitted overhead takes the nearest shape's kernel set; Inductor's fusion and reduction
    heuristics switch with size (e.g. a mix-order reduction needs M >= 2K), so where nearby
    calibration shapes disagree the query shape may compile to any of their sets: the range
    says how much that moves the bytes. Equal bounds: every nearby shape compiles to one set;
    None: every calibration shape does (the fit is exact everywhere it was checked).
    The float8 and bf16 sets are taken in pairs, as compiled at the same shape, so a context
    kernel that switches in both graphs cancels out."""
    fp8_of = {s: index for index, r in enumerate(fp8) for s in r.shapes}
    bf16_of = {s: index for index, r in enumerate(bf16) for s in r.shapes}
    points = tuple(sorted(set(fp8_of) & set(bf16_of)))
    by_pair: dict[tuple[int, int], list[int]] = {}  # (float8, bf16) kernel set -> point rows
    for row, point in enumerate(points):
        by_pair.setdefault((fp8_of[point], bf16_of[point]), []).append(row)
    if len(by_pair) <= 1:
        return None
    # each pair's overhead polynomial, all evaluated in one product with the monomials
    coefficients = np.array([_coefficients(fp8[a]) - _coefficients(bf16[b]) for a, b in by_pair])
    values = shapes.polynomials(coefficients)
    distance = shapes.distances(points)
    nearest = min(NEAREST_KERNEL_SETS, len(points))
    near = distance <= np.partition(distance, nearest - 1, axis=0)[nearest - 1]
    unused = np.stack([~near[rows].any(axis=0) for rows in by_pair.values()])
    np.putmask(values, unused, np.inf)
    low = values.min(axis=0)
    np.putmask(values, unused, -np.inf)
    return low, values.max(axis=0)


def _coefficients(kernel_set: KernelSet) -> np.ndarray:
    return np.array([float(c) for c in kernel_set.total.coefficients()])


def rate_key(kernel) -> str:
    """What the band times a fitted kernel by: 'class:<KernelClass value>' where the file
    records its class, else its kind (whose classes' ranges are taken together)."""
    return f"class:{kernel.kernel_class}" if kernel.kernel_class else kernel.kind


def fitted_kind_bytes(
    kernel_sets: tuple[KernelSet, ...],
    shapes: ShapeArrays,
    *,
    kernel_time: KernelTimeModel | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per rate key (`rate_key`: a kernel's class, or its kind in files without classes), the
    fitted kernels' bytes and their count at every shape (each shape in its nearest kernel set):
    what the band times (`timing.band`). With `kernel_time`, the traffic its counted bytes
    leave out (`KernelTimeModel.extra_bytes`) is added to each kernel's."""
    kinds = sorted({rate_key(k) for r in kernel_sets for k in r.kernels})
    owner = nearest_kernel_set(kernel_sets, shapes)
    out = {}
    for kind in kinds:
        coef = np.zeros((len(kernel_sets), len(MONOMIALS)))
        count = np.zeros(len(kernel_sets))
        for index, kernel_set in enumerate(kernel_sets):
            for kernel in (k for k in kernel_set.kernels if rate_key(k) == kind):
                coef[index] += np.array([float(c) for c in kernel.nbytes.coefficients()])
                if kernel_time is not None:
                    coef[index] += kernel_time.extra_bytes(
                        [float(c) for c in kernel.scattered_elements.coefficients()],
                        [float(c) for c in kernel.reread.coefficients()],
                    )
                count[index] += 1
        out[kind] = (shapes.polynomials(coef, owner), count[owner])
    return out
