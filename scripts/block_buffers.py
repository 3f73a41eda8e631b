"""What a compiled llama3-8b block holds while it runs, beside training/memory.py's count.

For the configurations of scripts/saved_activations.py (TP 1 and 2 with sequence parallel,
recompute none / torchtitan's per-op SAC / full, bf16 and torchao's tensorwise and rowwise with
every block linear converted, one sequence of 8192 tokens), profiler/block.py's block at
llama3-8b's dims is compiled as torchtitan compiles it, Inductor generates the CUDA code of its
forward and backward graphs for an H100 on CPU (codegen only), and the buffers each graph's
wrapper allocates are followed in order (profiler/memory/buffers.py's `block_buffers`). Printed:
the backward's peak of live buffers beside memory.py's one-block backward transient without
FSDP's fp32 reduce-scatter copy (`per_block`'s backward), their ratio, what the backward returns
(the gradients), and the forward's peak beyond what it returns (what it holds for a moment on
top of the saved tensors and the block's output). Full recompute does not compile on torch
2.13 (profiler/block.py's `capture_block` says why): its rows have memory.py's counts only.

`--model qwen3-30b-a3b`: an MoE block, as scripts/saved_activations.py reads it (TP 1; float8
converts the routed experts' grouped gemms too).

    PYTHONPATH=. python scripts/block_buffers.py                # the table
    PYTHONPATH=. python scripts/block_buffers.py --at-peak      # and what is live at each peak
"""

from __future__ import annotations

import argparse
import operator

from saved_activations import MODELS, MODES, PRECISIONS, captured, modelled, run_config

from f8roof.profiler.memory.buffers import BlockBuffers, block_buffers

MIB = 2**20
BACKWARD = operator.attrgetter("backward")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at-peak", action="store_true", help="list what is live at each peak")
    parser.add_argument("--tp", help="TP degrees, comma-separated (default: the model's)")
    parser.add_argument("--model", default="llama3-8b", choices=sorted(MODELS))
    args = parser.parse_args()
    name = args.model
    print(
        "| TP | recompute | precision | graph: backward peak (MiB) | memory.py backward "
        "(MiB) | memory.py / graph | graph: gradients returned (MiB) | graph: forward beyond "
        "what it returns (MiB) |\n|---|---|---|---|---|---|---|---|"
    )
    listed: list[str] = []
    for tp in (int(t) for t in (args.tp or MODELS[name].tp).split(",")):
        for mode in MODES:
            for recipe in PRECISIONS:
                run = run_config(tp, mode)
                model = modelled(name, run, recipe, BACKWARD) / MIB
                found: BlockBuffers | str = captured(name, run, recipe, block_buffers)
                label = recipe or "bf16"
                if isinstance(found, str):
                    cells = ("-", f"{model:,.1f}", "-", "-", "-")
                    why = found.partition(", got types")[0]
                    listed.append(f"TP {tp} {mode.value} {label}: {why}")
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
                            listed.append(f"TP {tp} {mode.value} {label} {kind} at its peak:")
                            listed += [
                                f"  {b.name}: {b.bytes / MIB:,.2f} MiB ({b.written_by})"
                                for b in read.at_peak
                                if b.bytes >= MIB
                            ]
                print(f"| {tp} | {mode.value} | {label} | " + " | ".join(cells) + " |", flush=True)
    if listed:
        print()
        print("\n".join(listed))


if __name__ == "__main__":
    main()
