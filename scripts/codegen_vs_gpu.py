"""Does codegen-only (no GPU) generate what the GPU compiles? Run on the GPU machine.

For two shapes per recipe, capture the float8 linear's kernels both ways (`device="codegen"`
for the H200 preset, and `device="cuda"`) and list the kernels that differ (order-free, by
graph, kind, role and bytes). Exit code 1 if any differ.
    PYTHONPATH=. python3 scripts/codegen_vs_gpu.py [--gpu h200] [--device cuda]
--device cpu compares codegen with the C++ kernels instead (they differ: a CI smoke test).
"""

import argparse
import sys

from f8roof.calibrate import DEFAULT_RECIPES
from f8roof.compare import capture_differences
from f8roof.models.hardware import find_gpu
from f8roof.models.recipes import Recipe
from f8roof.models.variant import Implementation, Variant
from f8roof.profiler.capture import capture

SHAPES = ((1024, 2048, 4096), (4096, 1536, 768))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--recipes", default=",".join(DEFAULT_RECIPES))
    parser.add_argument("--shape", action="append", default=None, help="M,K,N (repeatable)")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    differing = 0
    for name in args.recipes.split(","):
        for shape in shapes:
            variant = Variant.of(Recipe.from_name(name), Implementation.REFERENCE)
            generated = capture(variant, shape, device="codegen", gpu=find_gpu(args.gpu))
            compiled = capture(variant, shape, device=args.device)
            lines = capture_differences(generated, compiled)
            differing += bool(lines)
            print(
                f"{name} {shape}: {len(generated.overhead_launches)} vs "
                f"{len(compiled.overhead_launches)} overhead kernels, overhead bytes "
                f"{generated.overhead_bytes} vs {compiled.overhead_bytes}: "
                + ("same kernels" if not lines else f"{len(lines)} differences")
            )
            for line in lines:
                print("   ", line)
    print(f"{differing} recipe/shape pair(s) differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
