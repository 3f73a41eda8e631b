"""Generate the code of torchao's torch.compile'd MXFP8 dim0 cast for B200: what the public time
model is checked against on Blackwell.

torchao's mx_formats README publishes one Blackwell kernel throughput of Inductor-generated
code: `to_mx` along dim0 compiled with torch.compile reaches up to 5.5 TB/s on B200 at
16384 x 16384 bf16 (benchmarks/mx_formats/cast_bench.py --mode dim0_mx, which counts the bf16
read and the float8 data and e8m0 scales written). This script compiles the same function
(torchao's `to_mx`, block 32, e4m3) for b200 without a GPU and keeps each forward kernel's
class, bytes and arithmetic (profiler/triton_code.py) in data/codegen/mx_cast_b200.json;
`scripts/fit_public_times.py` times them by the Blackwell parts and prints the check (nothing
is fitted to it). Rerun it when torch or torchao changes.

    PYTHONPATH=. python scripts/codegen_mx_cast.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch import nn

from f8roof.files import write_text_atomic
from f8roof.hardware.presets import find_gpu
from f8roof.profiler.capture import GraphKind, capture_step
from f8roof.profiler.device import environment
from f8roof.profiler.graphs import Step

OUT = Path("data/codegen/mx_cast_b200.json")
SIZE = 16384  # cast_bench.py's default M and K
GPU = "b200"


class _DimZeroCast(torch.autograd.Function):
    """torchao's `to_mx` along dim0; its backward passes the gradient on (a step needs one)."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        from torchao.prototype.mx_formats.mx_tensor import to_mx

        _, data = to_mx(x, torch.float8_e4m3fn, 32)
        return data

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return grad.to(torch.bfloat16)


class _Cast(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _DimZeroCast.apply(x)


def _step(*, device: str, initialize: bool) -> Step:
    x = torch.empty(SIZE, SIZE, dtype=torch.bfloat16, device=device, requires_grad=True)
    grad = torch.empty(SIZE, SIZE, dtype=torch.float8_e4m3fn, device=device)
    return Step(_Cast(), (x,), grad)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    gpu = find_gpu(GPU)
    captured, _ = capture_step(_step, (SIZE, SIZE, 1), device="codegen", key="to_mx_dim0", gpu=gpu)
    kernels = [
        {
            "class": k.kernel_class.value,
            "bytes": k.bytes_code,
            "scattered_elements": k.scattered_elements,
            "reread_bytes": k.bytes_reread,
            "arithmetic": k.arithmetic,
            "kernel": k.name,
        }
        for k in captured.launches
        if k.graph is GraphKind.FWD and k.kernel_class is not None
    ]
    record = {
        "versions": environment("codegen", gpu=gpu).versions,
        "gpu": GPU,
        "M": SIZE,
        "K": SIZE,
        "what": "torchao to_mx(x, float8_e4m3fn, 32) along dim0, torch.compile, forward kernels",
        "kernels": kernels,
    }
    write_text_atomic(args.out, json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(kernels)} kernel(s)")


if __name__ == "__main__":
    main()
