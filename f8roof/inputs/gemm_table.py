"""Read a measured gemm table from CSV (the seed's `--gemm_benchmarks_file` idea).

Two layouts are accepted:
- wide, as the seed wrote it: columns M, K, N and a bf16 and an fp8 time per row
  (`bf16_time_s`/`ref_time_s`/`bf16_s`, `fp8_time_s`/`fp8_s`); one gemm of (M, K) @ (K, N),
  used for all three gemm roles of a linear;
- long: columns dtype, gemm, M, K, N, time_s (what calibration measures).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from f8roof.errors import F8RoofError
from f8roof.models.gemm import GEMM_ROLES, GemmTableError, TableGemm

BF16_COLUMNS = ("bf16_time_s", "ref_time_s", "bf16_s")
FP8_COLUMNS = ("fp8_time_s", "fp8_s")


def _pick(frame: pd.DataFrame, names: tuple[str, ...], path: Path) -> str:
    for name in names:
        if name in frame.columns:
            return name
    raise F8RoofError(f"gemm table {path} lacks a time column: one of {', '.join(names)}")


def records_from_frame(frame: pd.DataFrame, path: Path) -> list[tuple]:
    missing = [c for c in ("M", "K", "N") if c not in frame.columns]
    if missing:
        raise F8RoofError(f"gemm table {path} lacks column(s) {', '.join(missing)}")
    if {"dtype", "gemm", "time_s"} <= set(frame.columns):
        return list(frame[["dtype", "gemm", "M", "K", "N", "time_s"]].itertuples(index=False))
    bf16, fp8 = _pick(frame, BF16_COLUMNS, path), _pick(frame, FP8_COLUMNS, path)
    return [
        (dtype, role.value, m, k, n, t)
        for m, k, n, t_bf16, t_fp8 in frame[["M", "K", "N", bf16, fp8]].itertuples(index=False)
        for role in GEMM_ROLES
        for dtype, t in (("bf16", t_bf16), ("fp8", t_fp8))
    ]


def load_gemm_table(path: str | Path) -> TableGemm:
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise F8RoofError(f"cannot read gemm table {path}: {e}") from None
    try:
        return TableGemm.from_records(records_from_frame(frame, path), label=str(path))
    except (GemmTableError, ValueError, TypeError) as e:
        raise F8RoofError(f"bad gemm table {path}: {e}") from None
