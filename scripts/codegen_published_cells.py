"""Generate the code of every published heatmap cell: the data the public time model is fitted on.

torchao's rowwise heatmap (data/published/linear_rowwise_heatmap_h100.csv) measured LayerNorm ->
Linear -> Sigmoid forward + backward at 144 shapes. Each cell's prediction is timed from the
exact kernels torch.compile generates for that shape (codegen for h100, no GPU): this script
compiles the bf16 graph and the float8 graph of every cell once and keeps each kernel's graph,
kind, class, role, bytes and elements accessed along a strided index (profiler/triton_code.py) in data/codegen/heatmap_h100.jsonl (one line per cell and variant,
sorted). The compiles are checkpointed beside the output, so an interrupted run resumes.
Rerun it when torch or torchao changes; on the same versions it writes the file byte for byte.

    PYTHONPATH=. python scripts/codegen_published_cells.py [--jobs 2] [--cells 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from f8roof.device.calibrate import CalibrateOptions, codegen_tasks
from f8roof.device.runner import Checkpoint, run_tasks
from f8roof.files import write_text_atomic
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.fit import shape_text
from f8roof.traffic.variant import Variant

HEATMAP = Path("data/published/linear_rowwise_heatmap_h100.csv")
OUT = Path("data/codegen/heatmap_h100.jsonl")
VARIANT = "torchao:rowwise@layernorm+sigmoid"


def cells(limit: int | None = None) -> tuple[tuple[int, int, int], ...]:
    frame = pd.read_csv(HEATMAP)
    shapes = sorted({(int(r.M), int(r.K), int(r.N)) for r in frame.itertuples()})
    return tuple(shapes[:limit] if limit else shapes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cells", type=int, default=None, help="only the first N cells (a test)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start = time.monotonic()
    options = CalibrateOptions.defaults(
        "codegen", variants=(Variant.from_key(VARIANT),), gpu=find_gpu("h100"), jobs=args.jobs
    )
    from dataclasses import replace

    options = replace(options, shapes=cells(args.cells))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = Checkpoint(
        args.out.with_name(args.out.name + ".partial"), options.header(), resume=True
    )
    todo = [t for t in codegen_tasks(options) if checkpoint.done(t.key) is None]
    print(f"{len(todo)} compiles to go", flush=True)
    run_tasks(todo, checkpoint, jobs=args.jobs)
    from f8roof.profiler.device import environment

    env = environment("codegen", gpu=options.gpu)
    lines = []
    for shape in options.shapes:
        for variant in options.all_variants:
            record = checkpoint.done(f"code/{variant.key}/{shape_text(shape)}")
            kernels = [
                {
                    "graph": s["graph"],
                    "kind": s["kind"],
                    "class": s.get("class"),
                    "role": s["role"],
                    "bytes": s["bytes"],
                    "scattered_elements": s.get("scattered_elements", 0),
                    "reread_bytes": s.get("reread_bytes", 0),
                    "arithmetic": s.get("arithmetic", 0),
                    "kernel": s["kernel"],
                }
                for s in record["samples"]
            ]
            lines.append(
                {
                    "M": shape[0],
                    "K": shape[1],
                    "N": shape[2],
                    "variant": variant.key,
                    "kernels": kernels,
                }
            )
    header = {"versions": env.versions, "gpu": "h100", "cells": len(options.shapes)}
    text = json.dumps(header) + "\n" + "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines)
    write_text_atomic(args.out, text)
    checkpoint.remove()
    print(f"wrote {args.out}: {len(lines)} graphs in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
