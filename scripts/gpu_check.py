"""The first short call on a lent GPU (under 2 minutes): is this machine ready for calibration?

Checks, printing one line each: torch/triton versions and the device; every gemm dtype and role
`_scaled_mm`/`mm` takes with the layouts calibration uses; bf16 and float8 gemms on randn
against zeros (the public fit's #940 rows ran float8 on zeros); for each recipe, the float8 linear
compiled forward+backward at one shape, its kernels counted three ways without disagreement,
and every one of them found in the profiler trace. A problem line says what failed and why
(exception type and the first line of its message); one failing gemm or recipe never stops the
others. The problems are listed again at the end; exit code 1 if there was any.
    PYTHONPATH=. python3 scripts/gpu_check.py [--device cuda] [--shape 1024,2048,4096]
"""

import argparse
import sys
import time

import torch

from f8roof.device.calibrate import CALIBRATION_VARIANTS
from f8roof.errors import reason
from f8roof.profiler.capture import Capture, capture_and_measure
from f8roof.profiler.measure import launch_durations
from f8roof.profiler.timing import StepTimes, gemm_fn, gemm_operands, measure_step, time_fn
from f8roof.timing.gemm import GEMM_ROLES
from f8roof.traffic.variant import Variant

# What calibration measures by default, and torchao's benchmark context.
VARIANTS = (*CALIBRATION_VARIANTS, "torchao:tensorwise@layernorm+sigmoid")


def report(problems: list[str]) -> list[str]:
    for line in problems:
        print(line)
    return problems


def check_gemms(device: str) -> list[str]:
    failures = []
    for dtype in ("bf16", "fp8", "fp8_rowwise"):
        for gemm in (role.value for role in GEMM_ROLES):
            try:
                out = gemm_fn(dtype, gemm, 256, 512, 768, device=device)()
                if not torch.isfinite(out.float()).all():
                    raise ValueError("non-finite output")
                print(f"gemm {dtype:12} {gemm:12} ok {tuple(out.shape)}")
            except Exception as e:  # noqa: BLE001 - report every failure, keep checking
                failures += report([f"gemm {dtype} {gemm}: failed: {reason(e)}"])
    return failures


def check_zero_data(device: str, size: int = 8192) -> list[str]:
    """The public fit's Meta H100 float8 gemm rows (pytorch/ao#940's sweep) ran `_scaled_mm` on
    zeros and bf16 on randn; a part at its power limit clocks higher on zeros. One line per
    dtype: a size^3 gemm on randn and on the same operands zeroed, the factor those rows may
    carry."""
    failures = []
    for dtype in ("bf16", "fp8"):
        try:
            a, b = gemm_operands(dtype, "output", size, size, size, device=device)
            one = torch.ones((), device=device)

            def gemm(a=a, b=b, dtype=dtype, one=one):
                if dtype == "bf16":
                    return torch.mm(a, b)
                return torch._scaled_mm(
                    a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
                )

            randn = time_fn(gemm, warmup=10, iters=50, device=device).median_s
            a.zero_()
            b.zero_()
            zeros = time_fn(gemm, warmup=10, iters=50, device=device).median_s
            tflops = 2 * size**3 / 1e12
            print(
                f"gemm {dtype:4} {size}^3: randn {randn * 1e6:.0f} us ({tflops / randn:.0f} "
                f"TFLOP/s), zeros {zeros * 1e6:.0f} us ({tflops / zeros:.0f}): x{randn / zeros:.3f}"
            )
        except Exception as e:  # noqa: BLE001 - report every failure, keep checking
            failures += report([f"gemm {dtype} on zeros: failed: {reason(e)}"])
    return failures


def check_recipe(name: str, shape: tuple[int, int, int], device: str) -> list[str]:
    start = time.perf_counter()
    try:
        captured, times = capture_and_measure(
            Variant.from_key(name),
            shape,
            device=device,
            measure=lambda step: measure_step(step, device=device, warmup=2, iters=3),
        )
    except Exception as e:  # noqa: BLE001 - report every failure, keep checking
        return report([f"{name}: compile and measure failed: {reason(e)}"])
    try:
        return report(_recipe_problems(name, captured, times, time.perf_counter() - start))
    except Exception as e:  # noqa: BLE001
        return report([f"{name}: reading its kernels and trace failed: {reason(e)}"])


def _recipe_problems(name: str, captured: Capture, times: StepTimes, elapsed_s: float) -> list[str]:
    overhead = captured.overhead_launches
    found = launch_durations(times.events, [k.name for k in overhead])
    missing = [k.name for k, d in zip(overhead, found) if d is None]
    unreadable = [s.name for s in captured.samples() if s.polynomial is None]
    print(
        f"{name:20} {elapsed_s:5.1f} s: {len(captured.launches)} launches, "
        f"overhead {captured.overhead_bytes / 2**20:.1f} MiB, device {times.device_s * 1e6:.0f} us "
        f"(gemms {times.gemm_s * 1e6:.0f}), wall {times.wall_s * 1e6:.0f} us, "
        f"{len(times.events)} trace events"
    )
    problems = [f"{name}: bytes disagree: {line}" for line in captured.disagreements()]
    problems += [f"{name}: not in the trace: {n}" for n in missing]
    problems += [f"{name}: bytes not readable off buffers: {n}" for n in unreadable]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", default="1024,2048,4096")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="variant keys")
    args = parser.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split(","))
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    print(f"torch {torch.__version__}, triton {triton_version}, cuda {torch.version.cuda}")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("no CUDA device")
            return 1
        props = torch.cuda.get_device_properties(0)
        print(
            f"device {props.name}, {props.multi_processor_count} SMs, "
            f"{props.total_memory / 2**30:.0f} GiB"
        )
    failures = check_gemms(args.device)
    if args.device == "cuda":
        failures += check_zero_data(args.device)
    for name in ("bf16", *args.variants.split(",")):
        failures += check_recipe(name, shape, args.device)
    print(f"{len(failures)} problem(s)" + (":" if failures else ""))
    for line in failures:
        print("   ", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
