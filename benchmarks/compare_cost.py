"""Cost of codegen-only capture (CUDA code generated here, nothing runs): time and memory.

Targets: one variant at one shape in under 20 s (a cold process: imports and Inductor's
warm-up included); a full fit (every shape of `models.fit.FIT_SHAPES` captured, the exact fit
and its check) in under 3 minutes. Run:
    python benchmarks/compare_cost.py [--variant torchao:tensorwise] [--shape 4096,4096,4096]
        [--gpu h100] [--one-shape]
(`--variant` is a calibration key: `reference:delayed`, `torchao:rowwise@layernorm+sigmoid`.)
Peak memory is the process's peak resident set (ru_maxrss), so the second figure covers both.
"""

import argparse
import resource
import time

from f8roof.engine.compare import compare
from f8roof.hardware.presets import find_gpu
from f8roof.profiler.capture import Capture, capture
from f8roof.traffic.fit import FIT_SHAPES
from f8roof.traffic.variant import Variant


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def describe(result: Capture, seconds: float) -> str:
    M, K, N = result.shape
    return (
        f"  {M:>6} x {K:>6} x {N:>6}: {seconds:6.2f} s, {len(result.launches):2} launches, "
        f"non-gemm {result.overhead_bytes / 1e6:10.1f} MB, "
        f"disagreements {len(result.disagreements())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="torchao:tensorwise")
    parser.add_argument("--shape", default="4096,4096,4096", help="M,K,N")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--one-shape", action="store_true", help="skip the full fit")
    args = parser.parse_args()
    variant, gpu = Variant.from_key(args.variant), find_gpu(args.gpu)
    shape = tuple(int(v) for v in args.shape.split(","))

    start = time.perf_counter()
    result = capture(variant, shape, device="codegen", gpu=gpu)
    one = time.perf_counter() - start
    print(
        f"{variant.key} on {gpu.name}, one shape (cold process): {one:.1f} s "
        f"(target < 20 s), peak RSS {peak_rss_mib():.0f} MiB"
    )
    print(describe(result, one))
    if args.one_shape:
        return

    start = time.perf_counter()
    comparison = compare(variant, [], device="codegen", gpu=gpu, fit=True)
    total = time.perf_counter() - start
    for kernel_set in comparison.fit.kernel_sets:
        print(
            f"  actual = {kernel_set.total} (+ workspace <= {kernel_set.workspace_max} B), fitted on "
            f"{len(kernel_set.shapes)} shapes, exact on {len(kernel_set.verified)} more"
        )
    for unfitted in comparison.fit.unfitted:
        print(f"  unfitted {unfitted.shapes}: {unfitted.reason}")
    print(
        f"full fit, {len(FIT_SHAPES)} shapes (capture + exact fit + check): {total:.1f} s "
        f"(target < 180 s), peak RSS {peak_rss_mib():.0f} MiB over both"
    )


if __name__ == "__main__":
    main()
