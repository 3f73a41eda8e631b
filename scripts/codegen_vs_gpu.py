"""Does codegen-only (no GPU) generate what the GPU compiles? Run on the GPU machine.

For two shapes per variant (recipe, implementation, context), capture the kernels both ways (`device="codegen"`
for the H200 preset, and `device="cuda"`) and list the kernels that differ (order-free, by
graph, kind, role and bytes). Differences are findings, not failures. A capture that fails is
printed with its reason (exception type and the first line of its message) and the other
recipes and shapes still run; a summary ends the output. Exit code 1 only if a capture failed.
    PYTHONPATH=. python3 scripts/codegen_vs_gpu.py [--gpu h200] [--device cuda]
--device cpu compares codegen with the C++ kernels instead (they differ: a CI smoke test).
"""

import argparse
import sys

from f8roof.device.calibrate import CALIBRATION_VARIANTS
from f8roof.engine.compare import capture_differences
from f8roof.errors import reason
from f8roof.hardware.presets import find_gpu
from f8roof.profiler.capture import Capture, capture
from f8roof.traffic.variant import Variant

SHAPES = ((1024, 2048, 4096), (4096, 1536, 768))
# What calibration measures by default, and torchao's benchmark context.
VARIANTS = (*CALIBRATION_VARIANTS, "torchao:tensorwise@layernorm+sigmoid")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="variant keys")
    parser.add_argument("--shape", action="append", default=None, help="M,K,N (repeatable)")
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    gpu = find_gpu(args.gpu)
    same, differing, failures = 0, 0, []
    for name in args.variants.split(","):
        for shape in shapes:
            captured: list[Capture] = []
            for device, target in (("codegen", gpu), (args.device, None)):
                try:
                    captured.append(
                        capture(Variant.from_key(name), shape, device=device, gpu=target)
                    )
                except Exception as e:  # noqa: BLE001 - report every failure, keep going
                    failures.append(f"{name} {shape}: {device} capture failed: {reason(e)}")
                    print(failures[-1])
            if len(captured) < 2:
                continue
            generated, compiled = captured
            try:
                lines = capture_differences(generated, compiled)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name} {shape}: comparing the kernels failed: {reason(e)}")
                print(failures[-1])
                continue
            same += not lines
            differing += bool(lines)
            print(
                f"{name} {shape}: {len(generated.overhead_launches)} vs "
                f"{len(compiled.overhead_launches)} overhead kernels, overhead bytes "
                f"{generated.overhead_bytes} vs {compiled.overhead_bytes}: "
                + ("same kernels" if not lines else f"{len(lines)} differences")
            )
            for device, kernel in lines:
                print(f"    only in {device}:", *kernel)
    print(
        f"{same + differing} recipe/shape pair(s) compared: {same} same, {differing} differ; "
        f"{len(failures)} capture(s) failed" + (":" if failures else "")
    )
    for line in failures:
        print("   ", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
