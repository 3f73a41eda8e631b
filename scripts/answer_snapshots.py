"""Record (or check) the `--out` files of a fixed set of answers: what a refactor must not change.

Each case is one `f8roof estimate` command line; its `--out` JSON (every column of the
contract, the step summary with it) is written to tests/data/answers/<name>.json. The test
(`tests/test_answer_snapshots.py`) runs the same commands and compares every number. Record
again, on purpose, when a model or a shipped file changes the numbers (say so in the commit).

    PYTHONPATH=. python scripts/answer_snapshots.py [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from f8roof.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "data" / "answers"

CASES = {
    "shapes_h100_tensorwise": [
        "--gpu",
        "h100",
        "--shape",
        "4096,4096,4096",
        "--shape",
        "16384,8192,1024",
    ],
    "shapes_h100meta_rowwise_ln_sigmoid": [
        "--gpu",
        "h100-meta",
        "--recipe",
        "rowwise",
        "--before",
        "layernorm",
        "--after",
        "sigmoid",
        "--shape",
        "8192,4096,1024",
        "--shape",
        "32768,8192,8192",
    ],
    "shapes_h200_datasheet": ["--gpu", "h200", "--times", "datasheet", "--shape", "8192,8192,8192"],
    "shapes_b200_mxfp8": ["--gpu", "b200", "--recipe", "mxfp8_rceil", "--shape", "8192,8192,8192"],
    "shapes_seed_roofline": ["--no-calibration", "--shape", "4096,4096,4096"],
    "model_llama3_8b": ["--model", "llama3-8b", "--tokens", "8192"],
    "model_llama3_8b_rowwise_tp8": [
        "--model",
        "llama3-8b",
        "--tokens",
        "98304",
        "--recipe",
        "rowwise",
        "--tp",
        "8",
        "--fsdp",
        "8",
        "--recompute",
        "selective",
        "--step-ms",
        "2806.8",
    ],
    # torchtitan's fused q/k/v (#3714 on): the separate layout's shipped graphs moved by the rows
    "model_llama3_8b_fused_qkv": [
        "--model",
        "llama3-8b",
        "--tokens",
        "8192",
        "--recipe",
        "rowwise",
        "--fsdp",
        "8",
        "--recompute",
        "selective",
        "--fuse-qkv",
    ],
    "model_llama3_70b_full_ac": [
        "--model",
        "llama3-70b",
        "--tokens",
        "131072",
        "--tp",
        "8",
        "--fsdp",
        "32",
        "--recompute",
        "full",
    ],
    "model_all_recipes": ["--model", "llama3-8b", "--tokens", "16384", "--recipe", "all"],
}


def answer(args: list[str]) -> dict:
    """The `--out` JSON of one estimate."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "answer.json"
        result = CliRunner().invoke(cli, ["estimate", *args, "--out", str(out)])
        if result.exit_code != 0:
            raise SystemExit(f"{' '.join(args)}: {result.output.strip()}")
        return json.loads(out.read_text())


def differences(expected, found, where: str = "") -> list[str]:
    """Every number that moved beyond 1e-9 relative, every key or length that changed."""
    if isinstance(expected, dict) and isinstance(found, dict):
        out = (
            [f"{where}: keys {sorted(set(expected) ^ set(found))}"]
            if set(expected) ^ set(found)
            else []
        )
        for key in expected.keys() & found.keys():
            out += differences(expected[key], found[key], f"{where}.{key}")
        return out
    if isinstance(expected, list) and isinstance(found, list):
        if len(expected) != len(found):
            return [f"{where}: {len(expected)} items, now {len(found)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(expected, found))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    if isinstance(expected, float) and isinstance(found, (int, float)):
        if math.isnan(expected) and math.isnan(found):
            return []
        if not math.isclose(expected, found, rel_tol=1e-9, abs_tol=1e-15):
            return [f"{where}: {expected!r} -> {found!r}"]
        return []
    return [] if expected == found else [f"{where}: {expected!r} -> {found!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of record")
    args = parser.parse_args()
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    failed = False
    for name, command in CASES.items():
        found = answer(command)
        path = SNAPSHOTS / f"{name}.json"
        if args.check:
            moved = differences(json.loads(path.read_text()), found)
            failed |= bool(moved)
            print(f"{name}: {'same' if not moved else f'{len(moved)} differences'}")
            for line in moved[:10]:
                print("  " + line)
        else:
            path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
            print(f"wrote {path}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
