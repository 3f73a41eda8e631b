"""Fit the public time model to the repository's published data and write
f8roof/calibrations/public_times.json (byte for byte the same on a rebuild: a test checks it).

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
        for line in public_fit.summary(data, report, times):
            print(line)
    print(f"wrote {args.out} in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
