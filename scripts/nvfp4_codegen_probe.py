"""What stands between torchao 0.18's NVFP4 linear and f8roof's codegen on a CPU, shown.

Generates Inductor's CUDA code for the forward and backward of torchao's `nvfp4_mm_triton`
(torchao.prototype.moe_training.nvfp4_training, the linear torchtitan's NVFP4 converter runs)
for a Blackwell preset on a CPU-only torch, and prints per graph the Triton kernels Inductor
writes and the ops it calls as extern kernels. Three things block it, each met here:

1. torchao registers the NVFP4 custom ops (`torchao::triton_rht_amax`,
   `triton_rht_quantize_row_col`, `triton_weight_quantize_2d`) only when `has_triton()` holds
   at import; on a CPU build it does not, and stubs raise "requires torch 2.10.0+ and triton
   installed". The codegen stand-ins must be active while `nvfp4_training` is imported.
2. With `has_triton()` true, importing `torchao.prototype.moe_training` itself fails:
   its float8 grouped kernels (kernels/float8_rowwise.py) autotune on a key,
   `num_elements`, that is no argument of the kernel (triton's ValueError). So the package is
   imported first without the stand-ins, and only its `nvfp4_training` modules again within.
3. Inductor 2.13's `_scaled_mm_v2` lowering refuses NVFP4's swizzled block scales
   ("does not yet support non-trivial swizzles", SWIZZLE_32_4_4): registered as a fallback
   here, the gemm becomes an extern call, as cuBLAS runs it.

What comes out: Inductor generates only the glue (the weight's amax reduction, scale
divisions, the backward's seed xor); the casts, the random Hadamard transform and stochastic
rounding are torchao's hand-written Triton kernels behind opaque custom ops, so their bytes
are read off their sources, as MXFP8's are: f8roof/traffic/nvfp4.py, whose glue kernels are
the launches printed here. Run:

    PYTHONPATH=. python scripts/nvfp4_codegen_probe.py [--gpu b200] [--size 256]
"""

from __future__ import annotations

import argparse
import re
import sys


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="b200")
    parser.add_argument("--size", type=int, default=256, help="M = K = N, a multiple of 128")
    args = parser.parse_args(argv)

    import torch
    import torchao.prototype.moe_training  # noqa: F401  (2.: before the stand-ins)
    from functorch.compile import aot_function
    from torch._inductor import lowering
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    from f8roof.hardware.presets import find_gpu
    from f8roof.profiler.codegen_only import cuda_stand_ins, generate_cuda_code

    gpu = find_gpu(args.gpu)
    for name in [m for m in sys.modules if ".nvfp4_training" in m]:
        del sys.modules[name]
    with cuda_stand_ins(gpu):  # 1.: the custom ops register
        from torchao.prototype.moe_training.nvfp4_training.nvfp4_linear import nvfp4_mm_triton

    sign = (1, -1) * 8  # a 16-wide Hadamard sign vector

    def linear(x, w, seed):
        return nvfp4_mm_triton.apply(x, w, None, seed, sign)

    graphs = []

    def keep(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm

    size = args.size
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(size, size, dtype=torch.bfloat16, requires_grad=True)
        w = torch.empty(size, size, dtype=torch.bfloat16, requires_grad=True)
        seed = torch.zeros(1, dtype=torch.int64)
        step = aot_function(
            linear, fw_compiler=keep, bw_compiler=keep, decompositions=select_decomp_table()
        )
        step(x, w, seed).sum().backward()

    lowering.lowerings.pop(torch.ops.aten._scaled_mm_v2.default, None)  # 3.
    lowering.make_fallback(torch.ops.aten._scaled_mm_v2.default, warn=False)
    found = {}
    for name, (gm, example_inputs) in zip(("forward", "backward"), graphs):
        code = generate_cuda_code(gm, example_inputs, {}, gpu=gpu)
        found[name] = {
            "triton kernels": sorted(set(re.findall(r"def (triton_\w+)\(", code))),
            "extern ops": sorted(set(re.findall(r"torch\.ops\.(\w+\.\w+)\.default\(", code))),
            # every launch, in order (a kernel may run twice): what traffic/nvfp4.py counts
            "triton launches": re.findall(r"\b(triton_\w+)\.run\(", code),
        }
        print(f"{name} on {gpu.name}:")
        for what, names in found[name].items():
            print(f"  {what}: {', '.join(names)}")
    return found


if __name__ == "__main__":
    main()
