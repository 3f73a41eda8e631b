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

`--model qwen3-30b-a3b`: the same for an MoE block (profiler/moe.py: hidden 2048, 32 heads of
128, 4 kv heads, 128 routed experts of width 768, top 8, no shared experts), at one sequence
of 4096 tokens, TP 1 only (MoE blocks compile without TP and EP). float8 converts the
attention's linears with the recipe and the routed experts' grouped gemms with torchao's
rowwise float8 (torchtitan's grouped-gemm converter, `moe_fqns_prototype = ["experts"]`).

    PYTHONPATH=. python scripts/saved_activations.py              # the table
    PYTHONPATH=. python scripts/saved_activations.py --tensors    # and every saved tensor
    PYTHONPATH=. python scripts/saved_activations.py --model qwen3-30b-a3b
"""

from __future__ import annotations

import argparse
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from f8roof.profiler.capture import CaptureError
from f8roof.profiler.memory.saved import SavedActivations, saved_activations
from f8roof.training.block import BlockSpec, MoeSpec
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import DEFAULT_POLICY, Recompute, is_block_fqn, sac_policy
from f8roof.training.memory import PerBlock, per_block
from f8roof.training.run_config import RunConfig


@dataclass(frozen=True)
class Model:
    """A catalog model's block dims, the sequence its rows run at, the TP degrees it reads."""

    dims: dict[str, int]
    seq_len: int
    tp: str
    moe: MoeSpec | None = None


MODELS = {
    "llama3-8b": Model(
        {"dim": 4096, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336},
        8192,
        "1,2",
    ),
    "qwen3-30b-a3b": Model(
        {"dim": 2048, "n_heads": 32, "n_kv_heads": 4, "head_dim": 128, "ffn_dim": 768},
        4096,
        "1",
        MoeSpec(experts=128, top_k=8, expert_ffn_dim=768),
    ),
}
PRECISIONS = (None, "tensorwise", "rowwise")
MODES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
MIB = 2**20
SAVED = operator.attrgetter("saved")


def run_config(tp: int, mode: Recompute) -> RunConfig:
    """The block's run: TP with sequence parallel, torchtitan's current per-op SAC policy (the
    one `capture_block` applies by default), the blocks compiled."""
    return RunConfig(tp=tp, recompute=mode, sac_policy=DEFAULT_POLICY, blocks_compiled=True)


def modelled(
    name: str,
    run: RunConfig,
    recipe: str | None,
    term: Callable[[PerBlock], tuple[float, float]],
) -> float:
    """memory.py's per-block `term` (bf16 where `recipe` is None)."""
    arch = builtin(name)
    converted = [lin.fqn for lin in arch.linears if is_block_fqn(lin.fqn)]
    terms = per_block(
        arch, tokens=MODELS[name].seq_len, run=run, recipe=recipe or "tensorwise",
        converted=converted,
    )  # fmt: skip
    bf16, fp8 = term(terms)
    return bf16 if recipe is None else fp8


def captured(name: str, run: RunConfig, recipe: str | None, reader: Callable[..., Any]) -> Any:
    """What `reader` reads off the compiled block (saved tensors, buffers), or why the block
    does not compile."""
    model = MODELS[name]
    if model.moe is not None and recipe is not None:  # torchtitan's float8 grouped gemms too
        run = replace(run, moe_fqns=("experts",))
    spec = BlockSpec(
        **model.dims, tokens=model.seq_len, seq_len=model.seq_len, moe=model.moe, parallel=run,
        name=name,
    )  # fmt: skip
    try:
        return reader(spec, recipe=recipe, sac=sac_policy(run.sac_policy))
    except CaptureError as e:
        return str(e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", action="store_true", help="list every saved tensor")
    parser.add_argument("--tp", help="TP degrees, comma-separated (default: the model's)")
    parser.add_argument("--model", default="llama3-8b", choices=sorted(MODELS))
    args = parser.parse_args()
    name = args.model
    print(
        "| TP | recompute | precision | graph: activations (B/token) | graph: from weights "
        "(MiB) | graph (MiB/block) | memory.py (MiB/block) | memory.py / graph | eager count "
        "(MiB/block) |\n|---|---|---|---|---|---|---|---|---|"
    )
    listed: list[str] = []
    for tp in (int(t) for t in (args.tp or MODELS[name].tp).split(",")):
        for mode in MODES:
            for recipe in PRECISIONS:
                run = run_config(tp, mode)
                model = modelled(name, run, recipe, SAVED) / MIB
                eager = modelled(name, replace(run, blocks_compiled=False), recipe, SAVED) / MIB
                found: SavedActivations | str = captured(name, run, recipe, saved_activations)
                label = recipe or "bf16"
                if isinstance(found, str):
                    cells = ("-", "-", "-", f"{model:,.1f}", "-", f"{eager:,.1f}")
                    # torch's message runs on with every saved value's type
                    why = found.partition(", got types")[0]
                    listed.append(f"TP {tp} {mode.value} {label}: {why}")
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
                        listed.append(f"TP {tp} {mode.value} {label}:")
                        listed += [
                            f"  {t.name}: {t.op} {list(t.shape)} {t.dtype} {t.bytes:,} B"
                            f"{'' if t.activation else ' (weights)'}"
                            for t in found.tensors
                            if t.bytes
                        ]
                print(f"| {tp} | {mode.value} | {label} | " + " | ".join(cells) + " |")
    if listed:
        print()
        print("\n".join(listed))


if __name__ == "__main__":
    main()
