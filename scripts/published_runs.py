"""Published float8 training runs beside f8roof's step summary (the README's table).

Each run is written as the short f8roof setup of its published configuration (model, tokens per
rank, parallel degrees, checkpointing, recipe, the measured bf16 step) and answered by
`f8roof estimate --setup`; nothing here is tuned to the measured speedups. The measured bf16
step comes from the published bf16 throughput: torchtitan logs tokens per second per GPU, so
one step is local_batch x seq_len / (tps x TP degree).

The runs and their measured tokens/s are data/published/runs_h100_dev.csv's and
runs_blackwell_dev.csv's (each row names its source). On H100s: torchtitan#1207 (Llama3-8B, 4 H100, FSDP 2 x TP 2, per-op SAC, one 8192-token sequence
per rank), pytorch/pytorch#149990, torchao's training.md and torchtitan's async TP benchmark (all
on Meta's Grand Teton H100s at 500 W, f8roof's h100-meta: `META_SOURCES` says why;
Llama3 8B FSDP 8 x TP 8 per-op SAC local batch 12, Llama3 70B FSDP 32 x TP 8 full AC local
batch 16; seq_len 8192, torchtitan's llama3 configs; vanilla and async TP). On B200s
(`blackwell_runs`): torchtitan's Qwen3-14B search on 8 B200s (FSDP 8, never resharded after
forward, per-op SAC, the model compiled per block, rowwise with lm_head and the k/v projection
in bf16) and torchao's MXFP8 table's cuBLAS arm (Llama3-8B on 8 B200s limited to 750 W, f8roof's
b200-750w). Each run is answered on the part it ran on; the H100 table and its classes come
first, then the Blackwell runs and every part's median.

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
from f8roof.hardware.presets import find_gpu

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
    # torchao's FSDP2 float8 weight all-gather, with torchtitan's documented companion
    # precompute_float8_dynamic_scale_for_fsdp (torchtitan docs/float8.md's tensorwise command)
    float8_all_gather: bool = False
    compiled: bool = False  # torch.compile, where the source says so (async TP needs it)
    # torchtitan's rowwise emulate_precision_casts, set since 2025-04-16 (`BEFORE_CASTS`)
    emulate_precision_casts: bool = True
    # torchtitan compiles the loss with the model since 2025-04-02 (`BEFORE_COMPILED_LOSS`)
    loss_compiled: bool = True
    seq_len: int = SEQ_LEN
    filter_fqns: tuple[str, ...] = ("output",)
    # torchtitan's [parallelism] fsdp_reshard_after_forward, where the source sets it
    reshard_after_forward: str | None = None
    # torchtitan's ChunkedCELoss slices (its [loss] num_chunks; 1: the whole loss at once)
    loss_chunks: int = 1

    @property
    def gpus(self) -> int:
        return self.fsdp * self.tp

    @property
    def tokens(self) -> int:
        return self.local_batch * self.seq_len

    @property
    def step_ms(self) -> float:
        return self.tokens / (self.bf16_tps * self.tp) * 1e3

    @property
    def measured(self) -> float:
        return self.fp8_tps / self.bf16_tps

    def toml(self) -> str:
        # the TOML layout's tensorwise is no recipe_name (torchtitan refuses float8 all-gather
        # beside one)
        recipe = "" if self.recipe == "tensorwise" else f'recipe_name = "{self.recipe}"\n'
        filters = ", ".join(f'"{f}"' for f in self.filter_fqns)
        mx = self.recipe in MX_RECIPE_NAMES
        converter = (
            f'[mx]\nrecipe_name = "{self.recipe}"\nfilter_fqns = [{filters}]\n'
            if mx
            else f"""[float8]
{recipe}filter_fqns = [{filters}]
enable_fsdp_float8_all_gather = {str(self.float8_all_gather).lower()}
precompute_float8_dynamic_scale_for_fsdp = {str(self.float8_all_gather).lower()}
"""
        )
        converters = 'converters = ["mx"]\n' if mx else ""
        reshard = (
            ""
            if self.reshard_after_forward is None
            else f'fsdp_reshard_after_forward = "{self.reshard_after_forward}"\n'
        )
        selective = '\nselective_ac_option = "op"' if self.ac == "selective" else ""
        loss = f"[loss]\nnum_chunks = {self.loss_chunks}\n" if self.loss_chunks > 1 else ""
        # the model compiled, the loss eager: torchtitan's [compile] section says it so
        compiled = (
            f"compile = {str(self.compiled).lower()}"
            if self.loss_compiled or not self.compiled
            else '[compile]\nenable = true\ncomponents = ["model"]'
        )
        return f"""[model]
name = "{self.model}"
{converters}[training]
local_batch_size = {self.local_batch}
seq_len = {self.seq_len}
{compiled}
[parallelism]
data_parallel_shard_degree = {self.fsdp}
tensor_parallel_degree = {self.tp}
enable_async_tensor_parallel = {str(self.async_tp).lower()}
{reshard}[activation_checkpoint]
mode = "{self.ac}"{selective}
{loss}{converter}[f8roof]
gpu = "{self.gpu}"
step_ms = {self.step_ms:.1f}
emulate_precision_casts = {str(self.emulate_precision_casts).lower()}
"""


PUBLISHED = Path(__file__).resolve().parent.parent / "data" / "published"
RUNS_CSV = PUBLISHED / "runs_h100_dev.csv"
BLACKWELL_CSV = PUBLISHED / "runs_blackwell_dev.csv"
# torchtitan's [mx] recipe names (the converter section an MX row is written in)
MX_RECIPE_NAMES = ("mxfp8_cublas", "mxfp8_cublas_rceil")
SETUP = re.compile(r"FSDP(?:=|2 \()(\d+)\)?(?: TP=(\d+))?")
# pytorch/pytorch#149990 states no local batch: torchtitan's llama3_70b.toml of that time
# trained `batch_size = 8` at `seq_len = 8192` (train_configs/llama3_70b.toml, 2024-2025)
TORCHTITAN_70B_BATCH = 8


def runs(path: Path = RUNS_CSV) -> list[Run]:
    """The published runs (data/published/runs_h100_dev.csv), their setup read off each row's
    `setup` text: parallel degrees, checkpointing, local batch (1 where the row names none:
    torchtitan#1207 ran one sequence per rank), vanilla or async TP; the part from `gpu`
    (Meta's 500 W H100s for every dev run: `_part`)."""
    out = []
    for row in pd.read_csv(path).itertuples():
        found = SETUP.search(row.setup)
        if found is None:
            raise SystemExit(f"{row.source}: no FSDP=.. TP=.. in {row.setup!r}")
        fsdp, tp = int(found.group(1)), int(found.group(2) or 1)
        batch = re.search(r"(?:local )?bs (\d+)", row.setup)
        if batch is None and "#149990" in row.source:
            local_batch = TORCHTITAN_70B_BATCH
        else:
            local_batch = int(batch.group(1)) if batch else 1
        ac = "full" if "full AC" in row.setup else "selective"
        async_tp = "async TP" in row.setup
        model = row.model.lower()
        name = f"{_short(row.source)} {model} FSDP {fsdp} TP {tp} {ac} AC {row.recipe}"
        out.append(
            Run(
                name + (", async TP" if async_tp else ""),
                model,
                local_batch,
                fsdp,
                tp,
                ac,
                row.recipe,
                async_tp,
                _part(row.source, row.gpu),
                float(row.tokens_per_s_bf16),
                float(row.tokens_per_s_fp8),
                # a table that does not state it ran torchtitan's default: bf16 all-gather
                "float8 all-gather" in row.setup and "all-gather not stated" not in row.setup,
                "torch.compile" in row.setup or async_tp or any(k in row.source for k in COMPILED),
                not any(key in row.source for key in BEFORE_CASTS),
                not any(key in row.source for key in BEFORE_COMPILED_LOSS),
            )
        )
    return out


# Which H100 each run ran on. torchtitan's benchmark names its part: "H100 (96GB HBM2e, 500W)",
# Meta's Grand Teton variant (f8roof's h100-meta). The other dev runs name only "H100", and each
# was published by Meta's PyTorch engineers from their own clusters:
# - pytorch/pytorch#149990 and torchtitan#1207: danielvegamyhre, the benchmark's author, in the
#   three months before it. #149990's Llama3-70B at FSDP x TP 8 under full AC runs the
#   benchmark's 70B at the same bf16 cost per token and GPU (598 against 597 tokens/s).
# - torchao's training.md: the torchao float8 team, whose roofline utility
#   (torchao/testing/training/roofline_utils.py) takes Meta's H100 variant as its H100.
# The same team's logs show the 96 GB part: torchtitan prints reserved memory as a share of the
# device's, "47.65GiB(50.16%)" in vkuzo's pytorch/torchtitan#808 (8 H100s), 95.0 GiB in all.
# - pytorch/ao#1793: the same team's first float8 table (training.md's came with it); its bf16
#   peak is that log's 47.65 GiB.
META_SOURCES = ("#1207", "#149990", "training.md", "#1793")


# Runs that state no torch.compile but ran it: torchtitan#1207 (float8 rowwise under TP, its
# author's float8 runs all compiled: torchtitan#808's and pytorch/ao#1793's commands pass
# --training.compile, and torchtitan's docs/float8.md runs float8 with it). Its memory is
# answered compiled (scripts/published_memory.py); its step's speedup is the same either way.
COMPILED = ("#1207",)


# Runs published before torchtitan set Inductor's emulate_precision_casts for rowwise
# (pytorch/torchtitan#1108, 2025-04-16): their rowwise blocks compiled without it.
# - pytorch/pytorch#149990: filed 2025-03-25;
# - torchao's training.md: its table came with pytorch/ao#1793, merged 2025-03-12 (torch
#   2.7.0a0, torchao 0.10.0).
# torchtitan#1207 ran torchtitan@441a63ca4 (2025-05-20) and the async TP benchmark torch of
# 2025-06-14: both after.
BEFORE_CASTS = ("#149990", "training.md", "#1793")
# ... and before torchtitan compiled its loss with the model (bbb1b616e, 2025-04-02): the same
# two runs, written as torchtitan's [compile] section that leaves the loss out
BEFORE_COMPILED_LOSS = ("#149990", "training.md", "#1793")


def blackwell_runs(path: Path = BLACKWELL_CSV) -> list[Run]:
    """The Blackwell runs (data/published/runs_blackwell_dev.csv), their setup read off each
    row's `setup` text as it words it: 'FSDP 8' or 'FSDP2 (8)', 'local batch 4, seq 4096' or
    'bs 1, seq 8192', the filter_fqns it names ('filter_fqns A and B'; torchao's MX default
    ['output'] where none), 'fsdp_reshard_after_forward never', the model compiled per block
    ('torch.compile components model': the loss eager); the part from `gpu` (a power limit in
    it, '750 W', is that limit's preset: b200-750w). Every row names all of these or fails."""
    out = []
    for row in pd.read_csv(path).itertuples():
        setup = str(row.setup)
        fsdp = re.search(r"FSDP(?: |2 \()(\d+)", setup)
        batch = re.search(r"(?:local batch|bs) (\d+), seq (\d+)", setup)
        if fsdp is None or batch is None or "per-op" not in setup:
            raise SystemExit(f"{row.source}: FSDP, batch, seq or per-op AC not in {setup!r}")
        tp = re.search(r"TP (\d+)", setup)
        filters = re.search(r"filter_fqns ([\w.]+) and ([\w.]+)", setup)
        watts = re.search(r"(\d+) W", str(row.gpu))
        gpu = str(row.gpu).split()[0].lower() + (f"@{watts.group(1)}w" if watts else "")
        part = find_gpu(gpu).name
        model = str(row.model).lower()
        recipe = str(row.recipe)
        out.append(
            Run(
                f"{_blackwell_short(str(row.source))} {model} FSDP {fsdp.group(1)} selective AC "
                f"{recipe}",
                model,
                int(batch.group(1)),
                int(fsdp.group(1)),
                int(tp.group(1)) if tp else 1,
                "selective",
                recipe,
                False,
                part,
                float(row.tokens_per_s_bf16),
                float(row.tokens_per_s_fp8),
                compiled="compile" in setup,
                loss_compiled="components model" not in setup,
                seq_len=int(batch.group(2)),
                filter_fqns=filters.groups() if filters else ("output",),
                reshard_after_forward="never" if "reshard_after_forward never" in setup else None,
                loss_chunks=LOSS_CHUNKS.get(_blackwell_short(str(row.source)), 1),
            )
        )
    return out


# The loss a run's torchtitan config trains with, where the CSV's setup text does not say it:
# the Qwen3-14B search's qwen3_14b config (torchtitan@0cd3d24ef torchtitan/models/qwen3/
# config_registry.py) sets `loss=ChunkedCELoss.Config()`, 8 slices of the sequence
# (scripts/published_memory.py answers the run's peak from the same setup).
LOSS_CHUNKS = {"titan-qwen3": 8}


def _blackwell_short(source: str) -> str:
    return "ao#2777" if "#2777" in source else "titan-qwen3"


def _part(source: str, gpu: str) -> str:
    if "500W" in gpu or any(key in source for key in META_SOURCES):
        return "h100-meta"
    return "h100"


def _short(source: str) -> str:
    names = (
        ("#1207", "#1207"),
        ("#149990", "#149990"),
        ("training.md", "ao"),
        ("#1793", "ao#1793"),
    )
    for key, name in names:
        if key in source:
            return name
    return "bench"


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


def linears_needed(summary: dict, measured: float) -> tuple[float, float]:
    """The float8 linears' modelled time (gemms and casts, ms per step in the model's units)
    and what it would have to be for the step to meet the measured speedup, all else as
    modelled: the term a miss sits in when the rest of the step is right."""
    linears = next(c for c in summary["components"] if c["part"] == "linears")
    scale = summary["bf16_s"] / summary["modelled_bf16_s"]
    missing = (summary["fp8_s"] - summary["bf16_s"] / measured) / scale
    return linears["fp8_s"] * 1e3, (linears["fp8_s"] - missing) * 1e3


def classes(run: Run) -> list[str]:
    """The classes issue #32 judges the runs by (a run may be in two)."""
    out = ["FSDP only" if run.tp == 1 else f"{run.recipe} TP"]
    if run.ac == "full" and run.gpus >= 128:
        out.append("full AC at 128+ GPUs")
    return out


BLACKWELL_LEGEND = (
    "titan-qwen3: torchtitan's autoresearch-parallelize/may15-qwen3-14b-8xb200 branch (local "
    "batch 4 x 4096, FSDP never resharded after forward, the model compiled per block, lm_head "
    "and attention.qkv_linear.wkv in bf16; torch 2.13); ao#2777: torchao's MXFP8 training table "
    "(cuBLAS arm; torch 2.9) on B200s limited to 750 W. Each answered as the H100 runs are."
)


def _answer(run: Run, args, parts: dict, inside: dict) -> tuple[dict, float]:
    """The run answered, its table row printed (not with --summary), its error kept per part
    and whether the measured speedup lies inside the step's band."""
    summary = predict(run, overhead=args.overhead)
    error = summary["speedup"] / run.measured - 1
    parts.setdefault(run.gpu, []).append((error, 1 / run.measured - 1))
    held = summary["speedup_low"] <= run.measured <= summary["speedup_high"]
    inside.setdefault(run.gpu, []).append(held)
    power = find_gpu(run.gpu).power_w
    band = f"{summary['speedup_low']:.2f}-{summary['speedup_high']:.2f}"
    if not args.summary:
        print(
            f"| {run.name} | {run.gpu} ({power} W) | {summary['speedup']:.3f}x ({band}) | "
            f"{run.measured:.3f}x | {error:+.1%} |",
            flush=True,
        )
    return summary, error


def _errors_line(key: str, pairs: list[tuple[float, float]]) -> str:
    signed = np.array([e for e, _ in pairs])
    one = np.array([abs(o) for _, o in pairs])
    return (
        f"{key}: median |error| {np.median(np.abs(signed)):.1%}, mean signed "
        f"{np.mean(signed):+.1%} (predicting 1.0: median {np.median(one):.1%}), "
        f"{len(pairs)} runs"
    )


def _per_part_line(parts: dict[str, list[tuple[float, float]]]) -> str:
    """Every part's median |error|, its mean signed error and run count, on one line."""
    each = []
    for part, pairs in parts.items():
        signed = np.array([e for e, _ in pairs])
        each.append(
            f"{part} {np.median(np.abs(signed)):.1%} ({np.mean(signed):+.1%}, {len(pairs)})"
        )
    return "per part |error| (signed mean, runs): " + ", ".join(each)


def _band_line(inside: dict[str, list[bool]]) -> str:
    """How many measured speedups the step's band holds, per part and in all: the band's
    coverage on whole runs, beside the heatmap cells' it was fitted to."""
    every = [held for runs in inside.values() for held in runs]
    each = ", ".join(f"{part} {sum(runs)} of {len(runs)}" for part, runs in inside.items())
    return f"measured inside the step's band: {sum(every)} of {len(every)} ({each})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overhead", default="fitted", choices=("fitted", "codegen"))
    parser.add_argument(
        "--terms", action="store_true", help="each step's parts beside the measurement"
    )
    parser.add_argument("--summary", action="store_true", help="the errors per class alone")
    args = parser.parse_args()
    table = (
        []
        if args.summary
        else ["| run | GPU | predicted (band) | measured | error |", "|---|---|---|---|---|"]
    )
    print(*table, sep="\n", end="\n" if table else "")
    errors: dict[str, list[tuple[float, float]]] = {}
    parts: dict[str, list[tuple[float, float]]] = {}
    inside: dict[str, list[bool]] = {}
    terms = []
    for run in runs():
        summary, error = _answer(run, args, parts, inside)
        for key in ["all", *classes(run)]:
            errors.setdefault(key, []).append((error, 1 / run.measured - 1))
        terms.append((run, summary))
    legend = (
        "bench: torchtitan's async TP float8 benchmark; #1207: "
        "pytorch/torchtitan#1207; #149990: pytorch/pytorch#149990 (local batch 8, torchtitan's "
        "70B config); ao: torchao's training.md; all on Meta's 500 W H100s. Each answered from its configuration, on the "
        "part it ran on, its measured bf16 step reconciled with the model; nothing tuned to it."
    )
    if not args.summary:
        print("", textwrap.fill(legend, 100), "", sep="\n")
    for key, pairs in errors.items():
        print(_errors_line(key, pairs))
    if not args.summary:
        print("", *table, sep="\n")
    for run in blackwell_runs():
        terms.append((run, _answer(run, args, parts, inside)[0]))
    if not args.summary:
        print("", textwrap.fill(BLACKWELL_LEGEND, 100), "", sep="\n")
    print(_per_part_line(parts))
    print(_errors_line("every dev run", [e for pairs in parts.values() for e in pairs]))
    print(_band_line(inside))
    if not args.terms:
        return
    print("\nasync TP against vanilla TP, step time ratio (vanilla / async), modelled vs measured:")
    by_name = {run.name: (run, summary) for run, summary in terms}
    for name, (run, summary) in by_name.items():
        if not run.async_tp or name.removesuffix(", async TP") not in by_name:
            continue
        plain, base = by_name[name.removesuffix(", async TP")]
        bf16 = base["modelled_bf16_s"] / summary["modelled_bf16_s"]
        fp8 = base["modelled_fp8_s"] / summary["modelled_fp8_s"]
        print(
            f"  {name}: bf16 {bf16:.3f} (measured {run.bf16_tps / plain.bf16_tps:.3f}), "
            f"float8 {fp8:.3f} (measured {run.fp8_tps / plain.fp8_tps:.3f})"
        )
    for run, summary in terms:
        rec = summary["reconciliation"]
        print(
            f"\n{run.name}: measured bf16 step {rec['measured_s'] * 1e3:.0f} ms, modelled "
            f"{rec['modelled_s'] * 1e3:.0f} ms (gap {rec['gap_s'] / rec['measured_s']:+.0%}); "
            f"x{rec['speedup_gap_unchanged']:.3f} with the gap all on what float8 leaves alone, "
            f"x{rec['speedup_gap_on_linears']:.3f} all on the linears"
        )
        for c in summary["components"]:
            print(f"  {c['part']}: {c['bf16_s'] * 1e3:.0f} -> {c['fp8_s'] * 1e3:.0f} ms")
        modelled, needed = linears_needed(summary, run.measured)
        print(
            f"  to meet x{run.measured:.3f}: float8 linears {needed:.0f} ms, not {modelled:.0f} "
            f"({needed / modelled - 1:+.0%})"
        )


if __name__ == "__main__":
    main()
