"""Every development peak (issue #56) beside f8roof's: measured, f8roof's allocated and reserved
peaks, the error, and each term in bf16 and float8 (float8's difference term by term).

The runs are scripts/published_runs.py's, each answered from the setup that script writes for
it (`f8roof estimate --setup`, the memory part of its --out JSON): one reading of each source
for its step and its memory. The 8B and 70B ones ran on Meta's 96 GB H100 (h100-meta;
published_runs.py's `META_SOURCES`):

- pytorch/pytorch#149990 (2025-03-25, data/published/runs_h100_dev.csv): Llama3-70B on 128
  H100s, FSDP 16 x TP 8, full AC, torch.compile, float8 tensorwise; bf16 71.51 / float8 55.26
  with vanilla TP, bf16 71.08 / float8 55.91 with async TP. torchtitan printed
  `memory: {max_reserved_gib:5.2f}GiB` (torchtitan@fcdbe91c1 components/metrics.py:
  `reserved_bytes.all.peak` / 2**30), so the issue's "GB" are GiB. The local batch is not
  stated: torchtitan's llama3_70b.toml at that commit says batch_size = 8, seq_len = 8192, and
  that is the prediction; the batch of 16 the same author ran 70B with in torchtitan's 2025-06
  async TP benchmark is printed beside it, not chosen by the error.
- pytorch/torchtitan#1207 and pytorch/ao#1793 (Llama3-8B).
- torchtitan's Qwen3-14B search on 8 B200s (data/published/runs_blackwell_dev.csv), whose
  config trains with ChunkedCELoss.

#149990 is still missed: the script prints, beside it, the two sizes its float8 saving (15.2-
16.3 GiB) matches, every block's TP-local bf16 weights and the whole vocabulary's bf16 logits at
8 x 8192 tokens; neither is a tensor found in the run's source (docs/memory.md).

    PYTHONPATH=. python scripts/published_memory.py            # tables and terms
    PYTHONPATH=. python scripts/published_memory.py --table    # the dev peaks' table alone
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pandas as pd
from click.testing import CliRunner

from f8roof.cli import main as cli
from f8roof.training.catalog import builtin
from f8roof.training.checkpointing import is_block_fqn

GIB = 2**30
BENCH_BATCH = 16  # torchtitan's 2025-06 async TP benchmark, Llama3 70B (local bs 16)
TP = 8


def _published_runs() -> ModuleType:
    """scripts/published_runs.py: its runs are the setups these peaks are answered at, one
    reading of each source for its step and its memory."""
    path = Path(__file__).resolve().with_name("published_runs.py")
    spec = importlib.util.spec_from_file_location("published_runs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


RUNS = _published_runs()


def published() -> list[tuple[str, bool, float, float]]:
    """(arm, async TP, bf16 GiB, float8 GiB) of #149990's rows that state peak memory."""
    out = []
    for row in pd.read_csv(RUNS.RUNS_CSV).itertuples():
        if "#149990" not in row.source:
            continue
        found = re.search(r"peak memory bf16 ([\d.]+)(?: GB)?, float8 ([\d.]+) GB", row.setup)
        if found:
            async_tp = "async TP" in row.setup
            name = "async TP" if async_tp else "vanilla TP"
            out.append((name, async_tp, float(found.group(1)), float(found.group(2))))
    return out


def _run(prefix: str, recipe: str | None = None):
    """The published run named `prefix`, or whose name goes on from it after a space (and of
    `recipe`)."""
    every = [*RUNS.runs(), *RUNS.blackwell_runs()]
    found = [
        r
        for r in every
        if (r.name == prefix or r.name.startswith(prefix + " ")) and recipe in (None, r.recipe)
    ]
    if len(found) != 1:
        raise SystemExit(f"{len(found)} published runs named {prefix!r} {recipe or ''}")
    return found[0]


def run_149990(*, async_tp: bool):
    """#149990's tensorwise arm as published_runs.py reads it: compiled blocks, the loss eager
    (2025-03-25), the batch of torchtitan's 70B config then."""
    suffix = ", async TP" if async_tp else ""
    return _run(f"#149990 llama3-70b FSDP 16 TP 8 full AC tensorwise{suffix}")


# pytorch/torchtitan#1207 (2025-05-20, the same author and memory line): Llama3-8B on 4 H100s,
# FSDP 2 x TP 2, per-op SAC, rowwise, local batch 1 x 8192: bf16 45.68 GiB, float8 45.67 GiB
PUBLISHED_1207 = (45.68, 45.67)
# The same search's bf16 rows at other settings (results.tsv @0cd3d24ef, peak_memory_gb: the
# `memory:` line, reserved GiB), each the Qwen3 setup above without the converter and with these
# keys changed (`qwen_at`): a check of the terms across recompute modes, resharding and batch,
# not a fit.
QWEN_SEARCH = (
    ("full AC, default reshard, eager", 50.1, {"reshard": None, "ac": "full", "compile": False}),
    ("full AC, never reshard, eager", 72.2, {"ac": "full", "compile": False}),
    ("per-op SAC, never reshard, eager", 113.7, {"compile": False}),
    ("per-op SAC, never reshard, eager, batch 6", 141.9, {"compile": False, "batch": 6}),
    ("per-op SAC, never reshard, compiled, batch 5", 119.9, {"batch": 5}),
)

# f8roof's reserved peaks before the compiled blocks' saved tensors were read off their graphs
# (main at 6d433b1: every block's saved activations counted as eager autograd keeps them)
BEFORE = {
    "#149990 vanilla TP": (38.20, 38.20),
    "#149990 async TP": (38.20, 38.20),
    "#1207": (46.39, 46.39),
    "ao#1793 tensorwise": (48.91, 48.91),
    "ao#1793 rowwise": (48.91, 48.91),
    "Qwen3-14B B200": (112.03, 113.23),
}


def published_1793() -> dict[str, tuple[float, float]]:
    """recipe -> (bf16, float8) GB of ao#1793's table (torchtitan's reserved GiB)."""
    out = {}
    for row in pd.read_csv(RUNS.RUNS_CSV).itertuples():
        found = re.search(r"Peak Memory \(GB\) bf16 ([\d.]+), (\w+) ([\d.]+)", str(row.notes))
        if "#1793" in row.source and found:
            out[found.group(2)] = (float(found.group(1)), float(found.group(3)))
    return out


def published_qwen() -> float:
    for row in pd.read_csv(RUNS.BLACKWELL_CSV).itertuples():
        found = re.search(r"peak memory ([\d.]+) GiB in both arms", row.setup)
        if found:
            return float(found.group(1))
    raise SystemExit(f"{RUNS.BLACKWELL_CSV}: no Qwen3-14B peak")


def predict(run) -> dict:
    """`run`'s memory, answered from the setup published_runs.py writes for it."""
    with tempfile.TemporaryDirectory() as tmp:
        setup = Path(tmp) / "setup.toml"
        setup.write_text(run.toml())
        out = Path(tmp) / "answer.json"
        args = ["estimate", "--setup", str(setup), "--out", str(out)]
        result = CliRunner().invoke(cli, args)
        if result.exit_code != 0:
            raise SystemExit(result.output.strip())
        return json.loads(out.read_text())["summary"]["memory"]


def block_weights_gib() -> float:
    """Every block's linear weights on one GPU after TP, bf16: what FSDP2 gathers per block."""
    linears = [lin for lin in builtin("llama3-70b").linears if is_block_fqn(lin.fqn)]
    return sum(lin.K * lin.N * lin.count for lin in linears) / TP * 2 / GIB


def row(name: str, memory: dict, bf16: float, fp8: float) -> str:
    b, f = memory["bf16_reserved_bytes"] / GIB, memory["fp8_reserved_bytes"] / GIB
    ba, fa = memory["bf16_allocated_bytes"] / GIB, memory["fp8_allocated_bytes"] / GIB
    was = BEFORE.get(name, (float("nan"),) * 2)
    return (
        f"| {name} | {was[0]:.2f} / {was[1]:.2f} | {ba:.2f} / {fa:.2f} | {b:.2f} / {f:.2f} | "
        f"{bf16:.2f} / {fp8:.2f} | {b / bf16 - 1:+.1%} / {f / fp8 - 1:+.1%} |"
    )


def terms(name: str, memory: dict, bf16: float, fp8: float) -> list[str]:
    """Each term beside the measurement, and float8's difference from bf16 term by term."""
    head = (
        f"{name}: bf16 at the {memory['bf16_phase']}, float8 at the {memory['fp8_phase']}; "
        f"published bf16 {bf16:.2f}, float8 {fp8:.2f} (difference {bf16 - fp8:+.2f})"
    )
    out = [head]
    for term, both in memory["terms"].items():
        b, f = both["bf16_bytes"] / GIB, both["fp8_bytes"] / GIB
        if b or f:
            out.append(f"  {term}: bf16 {b:.2f}, float8 {f:.2f} (float8 saves {b - f:+.2f})")
    return out


def qwen_at(
    *, reshard: str | None = "never", ac: str = "selective", compile: bool = True, batch: int = 4
):
    """The Qwen3-14B run at its search's other settings (`QWEN_SEARCH`; its bf16 peak)."""
    run = _run("titan-qwen3")
    return replace(run, reshard_after_forward=reshard, ac=ac, compiled=compile, local_batch=batch)


def dev_peaks() -> list[tuple[str, dict, float, float]]:
    """Every development peak: (run, f8roof's `summary.memory`, published bf16 and float8 GiB)."""
    rows: list[tuple[str, dict, float, float]] = []
    for name, async_tp, bf16, fp8 in published():
        rows.append((f"#149990 {name}", predict(run_149990(async_tp=async_tp)), bf16, fp8))
    rows.append(("#1207", predict(_run("#1207")), *PUBLISHED_1207))
    for recipe, (bf16, fp8) in published_1793().items():
        rows.append((f"ao#1793 {recipe}", predict(_run("ao#1793", recipe)), bf16, fp8))
    qwen = published_qwen()
    rows.append(("Qwen3-14B B200", predict(_run("titan-qwen3")), qwen, qwen))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="the dev peaks' table alone")
    args = parser.parse_args()
    print(
        "| run | before (reserved, main 6d433b1) | allocated | reserved | published | error |\n"
        "|---|---|---|---|---|---|"
    )
    rows = dev_peaks()
    for name, memory, bf16, fp8 in rows:
        print(row(name, memory, bf16, fp8))
    if args.table:
        return
    for name, memory, bf16, fp8 in rows:
        print()
        print("\n".join(terms(name, memory, bf16, fp8)))
    print()
    print(
        f"#149990 at batch {BENCH_BATCH} (the 2025-06 benchmark's): "
        + row(
            "",
            predict(replace(run_149990(async_tp=False), local_batch=BENCH_BATCH)),
            *published()[0][2:],
        )
    )
    print(f"every block's TP-local bf16 weights (70B, TP 8): {block_weights_gib():.2f} GiB")
    vocab = next(lin.N for lin in builtin("llama3-70b").linears if not is_block_fqn(lin.fqn))
    run = run_149990(async_tp=False)
    logits = run.local_batch * run.seq_len * vocab * 2 / GIB
    print(
        f"the whole vocabulary's bf16 logits at {run.local_batch} x {run.seq_len}: {logits:.2f} GiB"
    )
    print()
    print(
        "| Qwen3-14B search, bf16 | allocated | reserved | published | error |\n|---|---|---|---|---|"
    )
    for name, measured, keys in QWEN_SEARCH:
        memory = predict(qwen_at(**keys))
        b, a = memory["bf16_reserved_bytes"] / GIB, memory["bf16_allocated_bytes"] / GIB
        print(f"| {name} | {a:.2f} | {b:.2f} | {measured:.1f} | {b / measured - 1:+.1%} |")


if __name__ == "__main__":
    main()
