"""Fit the public time model to the repository's published data and write
f8roof/calibration/data/public_times.json (byte for byte the same on a rebuild: a test checks it).

Prints every parameter with its range over the fits that leave out a fold or a source, the data
behind the fit, the residuals on it, the cross-validated error of the heatmap cells (10 folds,
per N) and of each source left out. See f8roof/calibration/public_fit.py for the model.

    PYTHONPATH=. python scripts/fit_public_times.py [--out PATH] [--quiet]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from f8roof.calibration import public_file, public_fit
from f8roof.calibration.file import Calibration, retimed
from f8roof.calibration.shipped import shipped_calibration
from f8roof.engine.estimate import EstimateConfig, estimate
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import Context, Implementation

VARIANT = {
    "recipe": Recipe.from_name("rowwise"),
    "implementation": Implementation.TORCHAO,
    "context": Context.from_names("layernorm", "sigmoid"),
}


def as_estimated(data: public_fit.Data, report: public_fit.Report) -> list[str]:
    """The cells as `f8roof estimate --gpu h100-meta` answers them: the shipped calibration's
    fitted bytes (12 fit shapes, not each cell's own code), each fold's cells timed by the fit
    that left the fold out."""
    gpu = find_gpu("h100-meta")
    traffic = Calibration.load(shipped_calibration(gpu))
    shapes = data.cells.shape.astype(np.int64)
    fold_of = np.arange(len(shapes)) % public_fit.FOLDS
    predicted = np.empty(len(shapes))
    for f, x in enumerate(report.folds):
        part = public_fit.parts_of(x)["h100-meta"]
        config = EstimateConfig(gpu=gpu, calibration=retimed(traffic, part, gpu), **VARIANT)
        frame = estimate(shapes[fold_of == f], config)
        predicted[fold_of == f] = frame["speedup_context"].to_numpy()
    error = np.abs(predicted / data.cells.measured - 1)
    lines = [
        (
            "the same cells as `f8roof estimate --gpu h100-meta` answers them (the shipped "
            f"calibration's fitted bytes), {public_fit.FOLDS}-fold: median |error| "
            f"{np.median(error):.1%}, max {error.max():.1%}"
        )
    ]
    for value in np.unique(shapes[:, 2]):
        pick = shapes[:, 2] == value
        lines.append(f"  N={value:<6d} median |error| {np.median(error[pick]):.1%}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=public_file.SHIPPED)
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    start = time.monotonic()
    data = public_fit.load(args.root)
    report = public_fit.cross_validate(data)
    times = public_fit.public_times(data, report)
    public_file.save(times, args.out)
    if not args.quiet:
        for line in [*public_fit.summary(data, report, times), *as_estimated(data, report)]:
            print(line)
    print(f"wrote {args.out} in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
