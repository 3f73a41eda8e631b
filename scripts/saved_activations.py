"""What a compiled llama3-8b block saves for the backward, beside training/memory.py's count.

For each TP degree (1 and 2, sequence parallel), recompute mode (none, torchtitan's per-op SAC,
full) and precision (bf16, torchao's tensorwise and rowwise, every block linear converted),
profiler/block.py's block at llama3-8b's dims (hidden 4096, 32 heads of 128, 8 kv heads, MLP
14336) is compiled as torchtitan compiles it and its partitioned graphs are read
(profiler/memory/saved.py's `saved_activations`: the forward's outputs its backward takes,
traced on CPU without computing), at one sequence of 8192 tokens (torchtitan's llama3-8b
seq_len). Printed: the activations the graph saves per token of the data-parallel rank, what
it saves computed from weights alone (float8 weight copies and scales; the weights themselves
are FSDP's), its total per block, memory.py's per-block saved-activation term for the same run
(`per_block`'s saved term, the blocks compiled), their ratio, and memory.py's eager count (what it
counted before it read the graphs). Full recompute under TP does not compile on torch 2.13
(profiler/block.py's `capture_block` says why): its row has memory.py's counts only.

    PYTHONPATH=. python scripts/saved_activations.py              # the table
    PYTHONPATH=. python scripts/saved_activations.py --tensors    # and every saved tensor
"""

from __future__ import annotations

import argparse
import operator
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from f8roof.profiler.capture import CaptureError
from f8roof.profiler.memory.saved import SavedActivations, saved_activations
from f8roof.training.block import BlockSpec
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import DEFAULT_POLICY, Recompute, is_block_fqn, sac_policy
from f8roof.training.memory import PerBlock, per_block
from f8roof.training.run_config import RunConfig

MODEL = "llama3-8b"
SEQ_LEN = 8192
DIMS = {"dim": 4096, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336}
PRECISIONS = (None, "tensorwise", "rowwise")
MODES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
MIB = 2**20
SAVED = operator.attrgetter("saved")


def run_config(tp: int, mode: Recompute) -> RunConfig:
    """The block's run: TP with sequence parallel, torchtitan's current per-op SAC policy (the
    one `capture_block` applies by default), the blocks compiled."""
    return RunConfig(tp=tp, recompute=mode, sac_policy=DEFAULT_POLICY, blocks_compiled=True)


def modelled(
    run: RunConfig, recipe: str | None, term: Callable[[PerBlock], tuple[float, float]]
) -> float:
    """memory.py's per-block `term` (bf16 where `recipe` is None)."""
    arch = builtin(MODEL)
    converted = [lin.fqn for lin in arch.linears if is_block_fqn(lin.fqn)]
    terms = per_block(
        arch, tokens=SEQ_LEN, run=run, recipe=recipe or "tensorwise", converted=converted
    )
    bf16, fp8 = term(terms)
    return bf16 if recipe is None else fp8


def captured(run: RunConfig, recipe: str | None, reader: Callable[..., Any]) -> Any:
    """What `reader` reads off the compiled block (saved tensors, buffers), or why the block
    does not compile."""
    spec = BlockSpec(**DIMS, tokens=SEQ_LEN, seq_len=SEQ_LEN, parallel=run, name=MODEL)
    try:
        return reader(spec, recipe=recipe, sac=sac_policy(run.sac_policy))
    except CaptureError as e:
        return str(e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", action="store_true", help="list every saved tensor")
    parser.add_argument("--tp", default="1,2", help="TP degrees, comma-separated")
    args = parser.parse_args()
    print(
        "| TP | recompute | precision | graph: activations (B/token) | graph: from weights "
        "(MiB) | graph (MiB/block) | memory.py (MiB/block) | memory.py / graph | eager count "
        "(MiB/block) |\n|---|---|---|---|---|---|---|---|---|"
    )
    listed: list[str] = []
    for tp in (int(t) for t in args.tp.split(",")):
        for mode in MODES:
            for recipe in PRECISIONS:
                run = run_config(tp, mode)
                model = modelled(run, recipe, SAVED) / MIB
                eager = modelled(replace(run, blocks_compiled=False), recipe, SAVED) / MIB
                found: SavedActivations | str = captured(run, recipe, saved_activations)
                name = recipe or "bf16"
                if isinstance(found, str):
                    cells = ("-", "-", "-", f"{model:,.1f}", "-", f"{eager:,.1f}")
                    # torch's message runs on with every saved value's type
                    why = found.partition(", got types")[0]
                    listed.append(f"TP {tp} {mode.value} {name}: {why}")
                else:
                    graph = (found.activation_bytes + found.from_weights_bytes) / MIB
                    cells = (
                        f"{found.bytes_per_token:,.0f}",
                        f"{found.from_weights_bytes / MIB:.1f}",
                        f"{graph:,.1f}",
                        f"{model:,.1f}",
                        f"{model / graph:.3f}",
                        f"{eager:,.1f}",
                    )
                    if args.tensors:
                        listed.append(f"TP {tp} {mode.value} {name}:")
                        listed += [
                            f"  {t.name}: {t.op} {list(t.shape)} {t.dtype} {t.bytes:,} B"
                            f"{'' if t.activation else ' (weights)'}"
                            for t in found.tensors
                            if t.bytes
                        ]
                print(f"| {tp} | {mode.value} | {name} | " + " | ".join(cells) + " |")
    if listed:
        print()
        print("\n".join(listed))


if __name__ == "__main__":
    main()
