"""scripts/nvfp4_codegen_probe.py: torchao 0.18's NVFP4 linear generates CUDA code on a CPU
once its three blockers are met (the script's docstring), in a process of its own (it
registers torchao's custom ops and an Inductor fallback for good)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requires

ROOT = Path(__file__).parent.parent


@pytest.mark.slow
@requires.torch_213_torchao_018
def test_nvfp4_forward_and_backward_generate_with_torchaos_ops_as_externs():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "nvfp4_codegen_probe.py"), "--gpu", "b200"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    forward, backward = done.stdout.split("backward on b200:")
    assert "torchao.triton_rht_quantize_row_col" in forward
    assert "torchao.triton_weight_quantize_2d" in forward
    assert "aten._scaled_mm_v2" in forward and "aten._scaled_mm_v2" in backward
    assert "triton_red_fused_abs" in forward  # the weight's amax: Inductor's own kernel
    # the glue Inductor launches is the glue traffic/nvfp4.py counts: its kernels (numbered
    # and named after their consumers here) and how often each runs
    from f8roof.traffic.nvfp4 import KERNELS

    launched = [
        name
        for line in done.stdout.splitlines()
        if line.strip().startswith("triton launches:")
        for name in line.split(":", 1)[1].replace(",", " ").split()
    ]
    modelled = [
        k for k, *_ in KERNELS if k.startswith("triton_") and k != "triton_quantize_2d_weight"
    ]
    assert len(launched) == len(modelled) == 7
    assert sorted(next(m for m in modelled if name.startswith(m)) for name in launched) == sorted(
        modelled
    )
