"""Published float8 training runs beside f8roof's step summary (the README's table).

Each run is written as the short f8roof setup of its published configuration (model, tokens per
rank, parallel degrees, checkpointing, recipe, the measured bf16 step) and answered by
`f8roof estimate --setup`; nothing here is tuned to the measured speedups. The measured bf16
step comes from the published bf16 throughput: torchtitan logs tokens per second per GPU, so
one step is local_batch x seq_len / (tps x TP degree).

Sources:
- pytorch/torchtitan#1207: Llama3-8B, 4 H100, FSDP 2 x TP 2, per-op SAC, compile, local batch
  1 x 8192; bf16 5378, rowwise 5189 tokens/s/GPU (tests/data/torchtitan_llama3_8b_tp2_fsdp2.toml).
- torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md: Grand Teton H100s at 500 W
  (f8roof's h100-meta), 8 per node on NVLink; Llama3 8B on 64 GPUs, FSDP 8 x TP 8, per-op SAC,
  local batch 12; Llama3 70B on 256 GPUs, FSDP 32 x TP 8, full AC, local batch 16; seq_len 8192
  (torchtitan's llama3 configs). Vanilla TP and async TP tokens/s/GPU per recipe.

    PYTHONPATH=. python scripts/published_runs.py [--overhead codegen]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from f8roof.cli import main as cli

SEQ_LEN = 8192


@dataclass(frozen=True)
class Run:
    name: str
    model: str
    local_batch: int
    fsdp: int
    tp: int
    ac: str  # torchtitan activation_checkpoint.mode
    recipe: str
    async_tp: bool
    gpu: str
    bf16_tps: float  # published tokens/s/GPU
    fp8_tps: float

    @property
    def tokens(self) -> int:
        return self.local_batch * SEQ_LEN

    @property
    def step_ms(self) -> float:
        return self.tokens / (self.bf16_tps * self.tp) * 1e3

    @property
    def measured(self) -> float:
        return self.fp8_tps / self.bf16_tps

    def toml(self) -> str:
        selective = '\nselective_ac_option = "op"' if self.ac == "selective" else ""
        return f"""[model]
name = "{self.model}"
[training]
local_batch_size = {self.local_batch}
seq_len = {SEQ_LEN}
[parallelism]
data_parallel_shard_degree = {self.fsdp}
tensor_parallel_degree = {self.tp}
enable_async_tensor_parallel = {str(self.async_tp).lower()}
[activation_checkpoint]
mode = "{self.ac}"{selective}
[float8]
recipe_name = "{self.recipe}"
filter_fqns = ["output"]
[f8roof]
gpu = "{self.gpu}"
step_ms = {self.step_ms:.1f}
"""


def _async_tp_runs() -> list[Run]:
    # (model, local batch, fsdp, ac, {recipe: (vanilla, async)}, bf16 (vanilla, async))
    table = [
        (
            "llama3-8b",
            12,
            8,
            "selective",
            {"tensorwise": (5078.1, 5570.1), "rowwise": (3708.5, 3914.9)},
            (4378.0, 4809.4),
        ),
        (
            "llama3-70b",
            16,
            32,
            "full",
            {"tensorwise": (809.8, 942.4), "rowwise": (599.6, 624.8)},
            (597.3, 652.4),
        ),
    ]
    runs = []
    for model, batch, fsdp, ac, recipes, bf16 in table:
        for async_tp in (False, True):
            for recipe, tps in recipes.items():
                name = f"asyncTP bench {model} FSDP {fsdp} x TP 8, {ac} AC, {recipe}"
                name += ", async TP" if async_tp else ""
                runs.append(
                    Run(
                        name,
                        model,
                        batch,
                        fsdp,
                        8,
                        ac,
                        recipe,
                        async_tp,
                        "h100-meta",
                        bf16[async_tp],
                        tps[async_tp],
                    )
                )
    return runs


RUNS = [
    Run(
        "torchtitan#1207 llama3-8b FSDP 2 x TP 2, selective AC, rowwise",
        "llama3-8b",
        1,
        2,
        2,
        "selective",
        "rowwise",
        False,
        "h100",
        5378.0,
        5189.0,
    ),
    *_async_tp_runs(),
]


def predict(run: Run, *, overhead: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        setup = Path(tmp) / "setup.toml"
        setup.write_text(run.toml())
        out = Path(tmp) / "answer.json"
        args = ["estimate", "--setup", str(setup), "--overhead", overhead, "--out", str(out)]
        result = CliRunner().invoke(cli, args)
        if result.exit_code != 0:
            raise SystemExit(f"{run.name}: {result.output.strip()}")
        return json.loads(out.read_text())["summary"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overhead", default="fitted", choices=("fitted", "codegen"))
    args = parser.parse_args()
    print("| run | tokens/rank | predicted | per-layer fits alone | measured | blocks from |")
    print("|---|---|---|---|---|---|")
    for run in RUNS:
        summary = predict(run, overhead=args.overhead)
        notes = summary["assumptions"]
        fits = next((n.split("x")[-1] for n in notes if n.startswith("per-layer fits alone")), "")
        source = next((n for n in notes if n.startswith("blocks from")), "per-layer fits")
        source = source.removeprefix("blocks from ")
        if source.startswith(("the shipped", "one block compiled")):
            source = "shipped sharded block" if "shipped" in source else "compiled block"
        print(
            f"| {run.name} | {run.tokens} | {summary['speedup']:.3f}x | "
            f"{fits + 'x' if fits else '-'} | {run.measured:.3f}x | {source} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
