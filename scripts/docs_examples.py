"""Regenerate (or check) every example output in README.md and docs/*.md.

Each example below is one command (an `f8roof` command line run through click's CliRunner, a
repository script, or a Python snippet) and the file its output belongs in. In that file the
output sits between two markers, and this script owns everything between them:

    <!-- example: NAME -->
    ...generated: the command, any input file it reads, its output...
    <!-- /example -->

Commands run in an empty temporary directory (input files an example names are written there
first), with the shipped calibrations; paths are shown relative to it. Trailing spaces are
stripped. Only stdout is shown, and from stderr the lines f8roof itself writes there (its
`warning:` lines, and the error of an example that exits non-zero): torch's and torchao's
import messages depend on what was imported before and are left out.

    PYTHONPATH=. python scripts/docs_examples.py                 # rewrite every block
    PYTHONPATH=. python scripts/docs_examples.py --check         # exit 1 naming each drifted one
    PYTHONPATH=. python scripts/docs_examples.py --only NAME,..  # just these
    PYTHONPATH=. python scripts/docs_examples.py --list          # names, files, commands

`tests/test_docs_examples.py` runs the check, one test per example (those that compile or fit
are marked slow). After a change to an answer's numbers or layout, run the first command and
commit the rewritten docs with the change.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(
    r"<!-- example: (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /example -->", re.DOTALL
)
OWN_STDERR = re.compile(r"^(warning|Error|error): ")


@dataclass(frozen=True)
class Example:
    """One generated block. `command`: the f8roof arguments (kind "cli"), a script and its
    arguments (kind "script", `{tmp}` stands for the temporary directory), or Python source
    (kind "python", shown above its output). `files`: (name, text) written to the directory
    first and shown above the command. `fence`: False puts the output in as markdown (a
    table a script prints). `slow`: it compiles or fits (tens of seconds)."""

    name: str
    path: str
    command: tuple[str, ...] | str
    kind: str = "cli"
    files: tuple[tuple[str, str], ...] = ()
    exit_code: int = 0
    fence: bool = True
    slow: bool = False
    shown: str | None = None  # the command line as the reader types it, where it differs
    head: int = 0  # show only the output's first lines, then "[...]" (0: all of it)

    def key(self) -> tuple:
        return (self.kind, self.command, self.files, self.exit_code)


QUANTIZE_FP4 = """\
[model]
name = "llama3"
flavor = "8B"
converters = ["quantize.linear.float8"]
[training]
local_batch_size = 1
seq_len = 8192
[quantize.linear.fp4]
recipe_name = "nvfp4"
"""

TORCHTITAN_1207 = """\
# pytorch/torchtitan#1207: Llama3 8B on 4 H100s, FSDP 2 x TP 2, per-op SAC, float8 rowwise
[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]
[training]
batch_size = 1
seq_len = 8192
compile = true
[parallelism]
data_parallel_shard_degree = 2
tensor_parallel_degree = 2
[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
[float8]
recipe_name = "rowwise"
filter_fqns = ["output"]
"""

MODULE_FILTER = """\
from torch import nn
import f8roof


class LM(nn.Module):
    def __init__(self, dim=2048, layers=24, vocab=50257):
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, nhead=16, dim_feedforward=4 * dim, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=layers)
        self.lm_head = nn.Linear(dim, vocab)


keep = f8roof.module_filter(LM, tokens=4096)  # or calibration="h200.json", gpu="h200"
layers = keep.recommendation.layers
print(layers[["fqn", "count", "K", "N", "context", "speedup", "decision"]].to_string(index=False))
speedup = round(keep.recommendation.totals.speedup, 3)
print(len(keep.converted), "linears in float8; linear part", speedup, "x")
"""

API = """\
import f8roof

frame = f8roof.estimate_shapes([(4096, 4096, 4096), (8192, 1024, 1024)], gpu="h200")
print(frame[["M", "K", "N", "bf16_s", "fp8_s", "speedup", "decision"]].to_string(index=False))

found = f8roof.answer_model("llama3-8b", 8192, tp=2, fsdp=2, recompute="selective")
step = found.step.chosen
print(f"step per GPU: bf16 {step.bf16_s * 1e3:.1f} ms, float8 {step.fp8_s * 1e3:.1f} ms")
print("convert:", ", ".join(found.recommendation.converted_fqns))

try:
    f8roof.answer_model("llama3-8b", 8192, fsdp=True)
except f8roof.ParameterError as e:
    print(f"{type(e).__name__} ({e.parameter}): {e}")
"""

PUBLIC_FILE = """\
from f8roof.calibration import public_file
from scripts.public_fit import PARAMETERS

times = public_file.load(public_file.SHIPPED)
ranges = {r.name: r for r in times.ranges}
print("parameter                 value  unit       range over the other fits  bounds")
for p in PARAMETERS:
    r = ranges[p.name]
    span = f"{r.low:.4g} .. {r.high:.4g}"
    print(f"{p.name:20s} {r.value:10.4g}  {p.unit:10s} {span:26s} [{p.low:g}, {p.high:g}]")
print(f"heatmap cells, 10-fold cross-validated median |speedup error|: {times.cv_median:.1%}")
for n, error in times.cv_by_n:
    print(f"  N={n:<6d} {error:.1%}")
low, high = (f"{x:.3f}" for x in (times.residual_low, times.residual_high))
print(f"band widened by log(measured/predicted) quantiles {low} .. {high}")
print(f"band's coverage of held-out cells: {times.coverage:.1%}")
for part, how in times.derived:
    print(f"{part}: {how}")
"""

LN_ROWWISE = ("--recipe", "rowwise", "--before", "layernorm", "--after", "sigmoid")
SQUARES = ("--shape", "2048,2048,2048", "--shape", "4096,4096,4096")

# Qwen3-14B on 8 B200s as the B200 dev run trains it (separate and fused q/k/v)
QWEN3 = (
    "estimate", "--model", "qwen3-14b", "--gpu", "b200", "--fsdp", "8", "--tokens", "16384",
    "--recipe", "rowwise",
)  # fmt: skip

EXAMPLES: tuple[Example, ...] = (
    # README.md: the front door
    Example(
        "readme-shape",
        "README.md",
        ("estimate", "--gpu", "h200", "--shape", "4096,4096,4096", "--shape", "16384,8192,8192"),
    ),
    Example(
        "readme-model",
        "README.md",
        (
            "estimate",
            "--gpu",
            "h100",
            "--model",
            "llama3-8b",
            "--seq-len",
            "8192",
            "--local-batch-size",
            "2",
            "--fsdp",
            "8",
            "--recompute",
            "selective",
            "--float8-all-gather",
        ),
        shown=(
            "f8roof estimate --gpu h100 --model llama3-8b --seq-len 8192 --local-batch-size 2 \\\n"
            "    --fsdp 8 --recompute selective --float8-all-gather"
        ),
    ),
    Example(
        "readme-setup",
        "README.md",
        ("estimate", "--setup", "llama3-8b-tp2.toml", "--step-ms", "761.6"),
        files=(("llama3-8b-tp2.toml", TORCHTITAN_1207),),
    ),
    Example(
        "readme-runs",
        "README.md",
        ("scripts/published_runs.py", "--summary"),
        kind="script",
        fence=False,
    ),
    # docs/estimate.md
    Example(
        "estimate-context",
        "docs/estimate.md",
        (
            "estimate",
            "--show-all",
            "--gpu",
            "h100",
            "--before",
            "layernorm",
            "--after",
            "sigmoid",
            "--shape",
            "4096,4096,4096",
            "--shape",
            "16384,8192,8192",
        ),
    ),
    # docs/band.md
    Example(
        "band-rowwise",
        "docs/band.md",
        ("estimate", "--gpu", "h100", "--recipe", "rowwise", *SQUARES),
    ),
    Example(
        "band-torchao-h100-meta",
        "docs/band.md",
        ("estimate", "--show-all", "--gpu", "h100-meta", *LN_ROWWISE, *SQUARES),
    ),
    Example(
        "readme-plan",
        "README.md",
        ("plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "64", "--top", "3"),
        head=7,
    ),
    # docs/plan.md
    Example(
        "plan-llama3-8b",
        "docs/plan.md",
        ("plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "64", "--top", "3"),
    ),
    # docs/models.md
    Example("models", "docs/models.md", ("models",)),
    Example(
        "memory-fits",
        "docs/memory.md",
        (
            "estimate",
            "--gpu",
            "h100",
            "--model",
            "llama3-8b",
            "--tokens",
            "65536",
            "--tp",
            "8",
            "--fsdp",
            "8",
            "--recompute",
            "selective",
        ),
    ),
    Example(
        "dev-peaks",
        "docs/memory.md",
        ("scripts/published_memory.py", "--table"),
        kind="script",
        fence=False,
    ),
    Example(
        "saved-activations",
        "docs/memory.md",
        ("scripts/saved_activations.py",),
        kind="script",
        fence=False,
        slow=True,
    ),
    Example(
        "block-buffers",
        "docs/memory.md",
        ("scripts/block_buffers.py",),
        kind="script",
        fence=False,
        slow=True,
    ),
    Example(
        "saved-activations-moe",
        "docs/memory.md",
        ("scripts/saved_activations.py", "--model", "qwen3-30b-a3b"),
        kind="script",
        fence=False,
        slow=True,
    ),
    Example(
        "block-buffers-moe",
        "docs/memory.md",
        ("scripts/block_buffers.py", "--model", "qwen3-30b-a3b"),
        kind="script",
        fence=False,
        slow=True,
    ),
    Example(
        "model-70b", "docs/models.md", ("estimate", "--model", "llama3-70b", "--tokens", "8192")
    ),
    Example("model-qwen3", "docs/models.md", QWEN3),
    Example("model-qwen3-fused", "docs/models.md", (*QWEN3, "--fuse-qkv")),
    Example(
        "model-recipes",
        "docs/models.md",
        (
            "estimate",
            "--show-all",
            "--model",
            "qwen2.5-7b",
            "--tokens",
            "2048",
            "--recipe",
            "tensorwise,rowwise",
        ),
    ),
    Example(
        "filter-compare",
        "docs/models.md",
        (
            "filter-compare",
            "--model",
            "llama3-8b",
            "--tokens",
            "2048,8192",
            "--tp",
            "1,8",
            "--recipe",
            "rowwise",
        ),
    ),
    Example("module-filter", "docs/models.md", MODULE_FILTER, kind="python"),
    Example("api", "docs/api.md", API, kind="python"),
    # docs/sharded.md
    Example(
        "setup-unknown-layout",
        "docs/sharded.md",
        ("estimate", "--setup", "run.toml"),
        files=(("run.toml", QUANTIZE_FP4),),
        exit_code=2,
    ),
    Example(
        "filter-fqns-tail",
        "docs/sharded.md",
        (
            "estimate",
            "--model",
            "llama3-8b",
            "--tokens",
            "8192",
            "--gpu",
            "b200",
            "--recipe",
            "mxfp8",
            "--filter-fqns",
            "nvfp4_bf16_tail",
        ),
    ),
    Example(
        "sharded-setup",
        "docs/sharded.md",
        ("estimate", "--show-all", "--setup", "llama3-8b-tp2.toml", "--step-ms", "761.6"),
        files=(("llama3-8b-tp2.toml", TORCHTITAN_1207),),
    ),
    Example(
        "sharded-runs",
        "docs/sharded.md",
        ("scripts/published_runs.py",),
        kind="script",
        fence=False,
    ),
    # docs/codegen.md
    Example(
        "compare-context",
        "docs/codegen.md",
        (
            "compare",
            "--before",
            "layernorm",
            "--after",
            "sigmoid",
            "--recipe",
            "tensorwise",
            "--shape",
            "4096,4096,4096",
            "--no-fit",
        ),
        slow=True,
    ),
    # docs/mx.md
    Example("gpus", "docs/mx.md", ("gpus", "--no-sources")),
    Example(
        "mx-b200",
        "docs/mx.md",
        (
            "estimate",
            "--gpu",
            "b200",
            "--recipe",
            "mxfp8_rceil",
            "--shape",
            "4096,4096,4096",
            "--shape",
            "8192,8192,8192",
        ),
    ),
    Example(
        "mx-refused",
        "docs/mx.md",
        ("estimate", "--gpu", "h100", "--recipe", "mxfp8_rceil", "--shape", "8192,8192,8192"),
        exit_code=2,
    ),
    Example(
        "nvfp4-refused",
        "docs/mx.md",
        ("estimate", "--gpu", "h100", "--recipe", "nvfp4", "--shape", "8192,8192,8192"),
        exit_code=2,
    ),
    # docs/time_model.md
    Example("public-file", "docs/time_model.md", PUBLIC_FILE, kind="python"),
    Example(
        "public-fit",
        "docs/time_model.md",
        ("scripts/fit_public_times.py", "--out", "{tmp}/public_times.json"),
        kind="script",
        slow=True,
        shown="PYTHONPATH=. python scripts/fit_public_times.py --out /tmp/public_times.json",
    ),
    Example(
        "times-public",
        "docs/time_model.md",
        ("estimate", "--show-all", "--gpu", "h100-meta", *LN_ROWWISE, *SQUARES),
    ),
    Example(
        "times-datasheet",
        "docs/time_model.md",
        (
            "estimate",
            "--show-all",
            "--gpu",
            "h100-meta",
            "--times",
            "datasheet",
            *LN_ROWWISE,
            *SQUARES,
        ),
    ),
)

# Lines a command prints that change from run to run (the fit script's, plan's wall time).
VOLATILE = re.compile(r"^(wrote .* in \d+ s|search took [\d.]+ s)$")


def _clean(text: str, tmp: str) -> list[str]:
    text = text.replace(tmp + os.sep, "").replace(tmp, ".").replace(str(ROOT) + os.sep, "")
    lines = [line.rstrip() for line in text.splitlines()]
    lines = [line for line in lines if not VOLATILE.match(line)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _own_stderr(text: str, *, failed: bool) -> str:
    if failed:
        return text
    return "".join(line for line in text.splitlines(True) if OWN_STDERR.match(line))


def run(example: Example) -> list[str]:
    """The example's output lines (what goes under its command); a command that several
    examples share runs once per process."""
    return list(_run(example.key()))


@functools.cache
def _run(key: tuple) -> tuple[str, ...]:
    return tuple(_execute(next(e for e in EXAMPLES if e.key() == key)))


def _execute(example: Example) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="f8roof-docs-") as tmp:
        tmp = os.path.realpath(tmp)
        for name, text in example.files:
            Path(tmp, name).write_text(text)
        if example.kind == "cli":
            from click.testing import CliRunner

            from f8roof.cli import main

            here = os.getcwd()
            os.chdir(tmp)
            try:
                try:  # click 8.1 mixes stderr into stdout unless told not to; 8.2 keeps both
                    runner = CliRunner(mix_stderr=False)
                except TypeError:
                    runner = CliRunner()
                result = runner.invoke(
                    main, list(example.command), catch_exceptions=False, env={"COLUMNS": None}
                )
            finally:
                os.chdir(here)
            code, out = result.exit_code, result.stdout
            err = _own_stderr(result.stderr, failed=code != 0)
        elif example.kind == "script":
            script, *args = example.command
            done = subprocess.run(
                [sys.executable, str(ROOT / script), *(a.replace("{tmp}", tmp) for a in args)],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True,
                text=True,
                check=False,
            )
            code, out = done.returncode, done.stdout
            err = _own_stderr(done.stderr, failed=code != 0)
        elif example.kind == "python":
            done = subprocess.run(
                [sys.executable, "-c", str(example.command)],
                cwd=tmp,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True,
                text=True,
                check=False,
            )
            code, out = done.returncode, done.stdout
            err = _own_stderr(done.stderr, failed=code != 0)
        else:
            raise ValueError(f"{example.name}: unknown kind {example.kind!r}")
        if code != example.exit_code:
            raise RuntimeError(
                f"{example.name}: exit {code}, expected {example.exit_code}\n{out}{err}"
            )
        return _clean(out + err, tmp)


def render(example: Example, output: list[str]) -> str:
    """The text between the example's markers."""
    if example.head and len(output) > example.head:
        output = [*output[: example.head], "[...]"]
    parts = []
    for name, text in example.files:
        lang = Path(name).suffix.lstrip(".")
        parts.append(f"```{lang}\n# {name}\n{text.rstrip()}\n```")
    if example.kind == "python":
        parts.append(f"```python\n{str(example.command).rstrip()}\n```")
        parts.append("```\n" + "\n".join(output) + "\n```")
    elif not example.fence:
        parts.append("\n".join(output))
    else:
        if example.shown is not None:
            typed = example.shown
        elif example.kind == "script":
            typed = "PYTHONPATH=. python " + shlex.join(example.command)
        else:
            typed = "f8roof " + shlex.join(example.command)
        parts.append("```\n$ " + typed + "\n" + "\n".join(output) + "\n```")
    return "\n".join(parts) + "\n"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def markers(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for m in MARKER.finditer(path.read_text()):
        if m["name"] in found:
            raise SystemExit(f"{path.relative_to(ROOT)}: example {m['name']} marked twice")
        found[m["name"]] = m["body"]
    return found


def problems() -> list[str]:
    """Markers without an example and examples without their marker."""
    out = []
    names = {e.name for e in EXAMPLES}
    if len(names) != len(EXAMPLES):
        out.append("two examples share a name")
    for path in doc_files():
        rel = str(path.relative_to(ROOT))
        for name in markers(path):
            example = next((e for e in EXAMPLES if e.name == name), None)
            if example is None:
                out.append(f"{rel}: marker {name} has no example in scripts/docs_examples.py")
            elif example.path != rel:
                out.append(f"{rel}: marker {name} belongs in {example.path}")
    for example in EXAMPLES:
        path = ROOT / example.path
        if not path.exists() or example.name not in markers(path):
            out.append(f"{example.path}: no <!-- example: {example.name} --> marker")
    return out


def generate(examples: Iterable[Example]) -> dict[str, str]:
    """Each example's block."""
    return {example.name: render(example, run(example)) for example in examples}


def rewrite(blocks: dict[str, str]) -> list[str]:
    """Put the blocks in their files; the files changed."""
    changed = []
    for path in doc_files():
        text = path.read_text()

        def put(m: re.Match) -> str:
            body = blocks.get(m["name"], m["body"])
            return f"<!-- example: {m['name']} -->\n{body}<!-- /example -->"

        new = MARKER.sub(put, text)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(ROOT)))
    return changed


def drifted(blocks: dict[str, str]) -> list[tuple[str, str]]:
    """(name, diff) of each example whose block in its file differs from its output now."""
    out = []
    for example in EXAMPLES:
        if example.name not in blocks:
            continue
        have = markers(ROOT / example.path).get(example.name, "")
        want = blocks[example.name]
        if have != want:
            diff = difflib.unified_diff(
                have.splitlines(), want.splitlines(), "in the file", "generated now", lineterm=""
            )
            out.append((example.name, "\n".join(list(diff)[:40])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    parser.add_argument("--only", default="", help="comma-separated example names")
    parser.add_argument("--skip-slow", action="store_true", help="leave out compiles and fits")
    parser.add_argument("--list", action="store_true", help="list the examples and exit")
    args = parser.parse_args()
    if args.list:
        for e in EXAMPLES:
            what = e.kind if e.kind == "python" else shlex.join(e.command)
            print(f"{e.name:24s} {e.path:20s} {'slow ' if e.slow else ''}{what}")
        return
    found = problems()
    if found:
        raise SystemExit("\n".join(found))
    chosen = [e for e in EXAMPLES if not args.skip_slow or not e.slow]
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {e.name for e in EXAMPLES}
        if unknown:
            raise SystemExit(f"no example named {', '.join(sorted(unknown))}")
        chosen = [e for e in chosen if e.name in names]
    blocks = generate(chosen)
    if args.check:
        bad = drifted(blocks)
        for name, diff in bad:
            example = next(e for e in EXAMPLES if e.name == name)
            print(f"drifted: {name} ({example.path})\n{diff}\n", file=sys.stderr)
        if bad:
            print(
                "regenerate with: PYTHONPATH=. python scripts/docs_examples.py --only "
                + ",".join(name for name, _ in bad),
                file=sys.stderr,
            )
            raise SystemExit(1)
        print(f"{len(blocks)} examples up to date")
        return
    changed = rewrite(blocks)
    print(f"{len(blocks)} examples generated; rewrote {', '.join(changed) or 'nothing'}")


if __name__ == "__main__":
    main()
