"""Draw the pictures docs/estimate.md shows, one small PNG per kind, into docs/img/.

Each is what the command beside it draws (the shipped h100 calibration, public times), saved
again at a low resolution so that the repository stays small:

    PYTHONPATH=. python scripts/docs_images.py            # rewrite docs/img/*.png
    PYTHONPATH=. python scripts/docs_images.py --list     # the pictures and their commands

The validation scatter is not among them: it draws a GPU run's validation report, and none is
shipped (nothing shipped is measured). `tests/test_plot.py` checks that every picture listed
here is in docs/img/ and shown by docs/estimate.md; run this after a change to a picture.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "img"
DPI = 70  # the docs' copies: small files, still legible


@dataclass(frozen=True)
class Picture:
    name: str  # docs/img/<name>.png
    command: str  # the command line that draws it, as docs/estimate.md shows it
    draw: Callable[[Path], object]  # the renderer's call, drawing to a path: returns its Plot


def _step(out: Path):
    import f8roof
    from f8roof.renderers.plot import step_memory

    plan = f8roof.answer_model("llama3-8b", 8192, gpu="h100", fsdp=8, recompute="selective")
    return step_memory(plan, out=out)


def _layers(out: Path):
    import f8roof
    from f8roof.renderers.plot import layer_speedups

    plan = f8roof.answer_model("llama3-8b", 2048, gpu="h100", fsdp=8, recompute="selective")
    return layer_speedups(plan.recommendation, out=out, provenance=plan.resolved.provenance)


def _grid(kind: str) -> Callable[[Path], object]:
    def draw(out: Path):
        from f8roof.engine.grid import plot_data
        from f8roof.engine.resolve import Request
        from f8roof.renderers.plot import draw as draw_grid

        data, provenance = plot_data(kind, Request(gpu="h100"))
        return draw_grid(data, out=out, provenance=provenance)

    return draw


PICTURES = (
    Picture(
        "step",
        "f8roof estimate --model llama3-8b --tokens 8192 --fsdp 8 --recompute selective "
        "--plot step.png",
        _step,
    ),
    Picture(
        "layers",
        "f8roof report --model llama3-8b --tokens 2048 --fsdp 8 --recompute selective "
        "--out r.md  # r_layers.png",
        _layers,
    ),
    Picture("heatmap", "f8roof plot --gpu h100 --out heat.png", _grid("heatmap")),
    Picture(
        "overhead", "f8roof plot --gpu h100 --kind overhead --out overhead.png", _grid("overhead")
    ),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="the pictures and their commands")
    args = parser.parse_args(argv)
    if args.list:
        for picture in PICTURES:
            print(f"docs/img/{picture.name}.png: {picture.command}")
        return 0
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for picture in PICTURES:
            plot = picture.draw(Path(tmp) / f"{picture.name}.png")
            target = IMAGES / f"{picture.name}.png"
            plot.figure.savefig(target, dpi=DPI)  # type: ignore[attr-defined]
            print(f"wrote {target.relative_to(ROOT)} ({target.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
