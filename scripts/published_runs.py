"""Published float8 training runs beside f8roof's step summary (the README's table).

Each run is written as the short f8roof setup of its published configuration (model, tokens per
rank, parallel degrees, checkpointing, recipe, the measured bf16 step) and answered by
`f8roof estimate --setup`; nothing here is tuned to the measured speedups. The measured bf16
step comes from the published bf16 throughput: torchtitan logs tokens per second per GPU, so
one step is local_batch x seq_len / (tps x TP degree).

The runs and their measured tokens/s are data/published/runs_h100_dev.csv's (each row names its
source): torchtitan#1207 (Llama3-8B, 4 H100, FSDP 2 x TP 2, per-op SAC, one 8192-token sequence
per rank) and torchtitan's async TP benchmark (Grand Teton H100s at 500 W, f8roof's h100-meta;
Llama3 8B FSDP 8 x TP 8 per-op SAC local batch 12, Llama3 70B FSDP 32 x TP 8 full AC local
batch 16; seq_len 8192, torchtitan's llama3 configs; vanilla and async TP).

    PYTHONPATH=. python scripts/published_runs.py [--overhead codegen]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
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


RUNS_CSV = Path(__file__).resolve().parent.parent / "data" / "published" / "runs_h100_dev.csv"
SETUP = re.compile(r"FSDP=(\d+) TP=(\d+)")


def runs(path: Path = RUNS_CSV) -> list[Run]:
    """torchtitan's published runs (data/published/runs_h100_dev.csv's pytorch/torchtitan
    rows), their setup read off each row's `setup` text: parallel degrees, checkpointing, local batch (1 where the row names none:
    torchtitan#1207 ran one sequence per rank), vanilla or async TP; the part from `gpu`
    (torchtitan's 500 W H100s: h100-meta)."""
    out = []
    for row in pd.read_csv(path).itertuples():
        if not row.source.startswith("pytorch/torchtitan"):
            continue  # the README's table quotes torchtitan's runs; the rest: published_memory
        found = SETUP.search(row.setup)
        if found is None:
            raise SystemExit(f"{row.source}: no FSDP=.. TP=.. in {row.setup!r}")
        fsdp, tp = (int(x) for x in found.groups())
        batch = re.search(r"local bs (\d+)", row.setup)
        ac = "full" if "full AC" in row.setup else "selective"
        async_tp = "async TP" in row.setup
        model = row.model.lower()
        name = f"{_short(row.source)} {model} FSDP {fsdp} TP {tp} {ac} AC {row.recipe}"
        out.append(
            Run(
                name + (", async TP" if async_tp else ""),
                model,
                int(batch.group(1)) if batch else 1,
                fsdp,
                tp,
                ac,
                row.recipe,
                async_tp,
                "h100-meta" if "500W" in row.gpu else "h100",
                float(row.tokens_per_s_bf16),
                float(row.tokens_per_s_fp8),
            )
        )
    return out


def _short(source: str) -> str:
    return "#1207" if "#1207" in source else "bench"


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
    print("| run | predicted | measured | error | layers alone | blocks from |")
    print("|---|---|---|---|---|---|")
    errors: dict[str, list[tuple[float, float]]] = {}
    for run in runs():
        summary = predict(run, overhead=args.overhead)
        fits = summary["fits_only"]["speedup"] if "fits_only" in summary else None
        origin = next((n["values"] for n in summary["notes"] if n["topic"] == "blocks_from"), None)
        source = "layers" if origin is None else "compiled" if origin["compiled"] else "shipped"
        error = summary["speedup"] / run.measured - 1
        key = f"{run.recipe}, TP {run.tp}"
        errors.setdefault(key, []).append((abs(error), abs(1 / run.measured - 1)))
        print(
            f"| {run.name} | {summary['speedup']:.3f}x | {run.measured:.3f}x | "
            f"{error:+.1%} | {'-' if fits is None else f'{fits:.3f}x'} | {source} |",
            flush=True,
        )
    print()
    legend = (
        "bench: torchtitan's async TP float8 benchmark; #1207: pytorch/torchtitan#1207. Blocks "
        "from the shipped sharded blocks, a compile, or the per-layer fits (layers); layers "
        "alone: the per-layer fits' answer beside a block's."
    )
    print(textwrap.fill(legend, 100), end="\n\n")
    for key, pairs in errors.items():
        model, one = (float(np.mean(v)) for v in zip(*pairs))
        print(f"{key}: mean |error| {model:.1%} (predicting 1.0: {one:.1%}), {len(pairs)} runs")


if __name__ == "__main__":
    main()
