"""What a compiled llama3-8b block holds while it runs, beside training/memory.py's count.

For the configurations of scripts/saved_activations.py (TP 1 and 2 with sequence parallel,
recompute none / torchtitan's per-op SAC / full, bf16 and torchao's tensorwise and rowwise with
every block linear converted, one sequence of 8192 tokens), profiler/block.py's block at
llama3-8b's dims is compiled as torchtitan compiles it, Inductor generates the CUDA code of its
forward and backward graphs for an H100 on CPU (codegen only), and the buffers each graph's
wrapper allocates are followed in order (profiler/memory/buffers.py's `block_buffers`). Printed:
the backward's peak of live buffers beside memory.py's one-block backward transient without
FSDP's fp32 reduce-scatter copy (`backward_per_block`), their ratio, what the backward returns
(the gradients), and the forward's peak beyond what it returns (what it holds for a moment on
top of the saved tensors and the block's output). Full recompute does not compile on torch
2.13 (profiler/block.py's `capture_block` says why): its rows have memory.py's counts only.

    PYTHONPATH=. python scripts/block_buffers.py                # the table
    PYTHONPATH=. python scripts/block_buffers.py --at-peak      # and what is live at each peak
"""

from __future__ import annotations

import argparse

from saved_activations import DIMS, MODEL, MODES, PRECISIONS, SEQ_LEN, run_config

from f8roof.profiler.capture import CaptureError
from f8roof.profiler.memory.buffers import BlockBuffers, block_buffers
from f8roof.training.block import BlockSpec
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import is_block_fqn, sac_policy
from f8roof.training.memory import backward_per_block
from f8roof.training.run_config import RunConfig

MIB = 2**20


def modelled(run: RunConfig, recipe: str | None) -> float:
    """memory.py's one-block backward, the graph's share (bf16 where `recipe` is None)."""
    arch = builtin(MODEL)
    converted = [lin.fqn for lin in arch.linears if is_block_fqn(lin.fqn)]
    bf16, fp8 = backward_per_block(
        arch, tokens=SEQ_LEN, run=run, recipe=recipe or "tensorwise", converted=converted
    )
    return bf16 if recipe is None else fp8


def captured(run: RunConfig, recipe: str | None) -> BlockBuffers | str:
    """The compiled block's buffers, or why it does not compile."""
    spec = BlockSpec(**DIMS, tokens=SEQ_LEN, seq_len=SEQ_LEN, parallel=run, name=MODEL)
    try:
        return block_buffers(spec, recipe=recipe, sac=sac_policy(run.sac_policy))
    except CaptureError as e:
        return str(e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at-peak", action="store_true", help="list what is live at each peak")
    parser.add_argument("--tp", default="1,2", help="TP degrees, comma-separated")
    args = parser.parse_args()
    print(
        "| TP | recompute | precision | graph: backward peak (MiB) | memory.py backward "
        "(MiB) | memory.py / graph | graph: gradients returned (MiB) | graph: forward beyond "
        "what it returns (MiB) |\n|---|---|---|---|---|---|---|---|"
    )
    listed: list[str] = []
    for tp in (int(t) for t in args.tp.split(",")):
        for mode in MODES:
            for recipe in PRECISIONS:
                run = run_config(tp, mode)
                model = modelled(run, recipe) / MIB
                found = captured(run, recipe)
                name = recipe or "bf16"
                if isinstance(found, str):
                    cells = ("-", f"{model:,.1f}", "-", "-", "-")
                    why = found.partition(", got types")[0]
                    listed.append(f"TP {tp} {mode.value} {name}: {why}")
                else:
                    graph = found.backward.peak_bytes / MIB
                    cells = (
                        f"{graph:,.1f}",
                        f"{model:,.1f}",
                        f"{model / graph:.3f}",
                        f"{found.backward.returned_bytes / MIB:,.1f}",
                        f"{found.forward.beyond_returned_bytes / MIB:,.1f}",
                    )
                    if args.at_peak:
                        for kind, read in (
                            ("forward", found.forward),
                            ("backward", found.backward),
                        ):
                            listed.append(f"TP {tp} {mode.value} {name} {kind} at its peak:")
                            listed += [
                                f"  {b.name}: {b.bytes / MIB:,.2f} MiB ({b.written_by})"
                                for b in read.at_peak
                                if b.bytes >= MIB
                            ]
                print(f"| {tp} | {mode.value} | {name} | " + " | ".join(cells) + " |", flush=True)
    if listed:
        print()
        print("\n".join(listed))


if __name__ == "__main__":
    main()
