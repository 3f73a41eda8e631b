"""Read a measured gemm table from CSV (the seed's `--gemm_benchmarks_file` idea).

Two layouts are accepted:
- wide, as the seed wrote it: columns M, K, N and a bf16 and an fp8 time per row
  (`bf16_time_s`/`ref_time_s`/`bf16_s`, `fp8_time_s`/`fp8_s`); one gemm of (M, K) @ (K, N),
  standing for all three gemms of the linear (M, K, N): each role's record is put at that
  role's gemm dims (`gemm_dims`), so the linear finds all three as measured;
- long: columns dtype, gemm, M, K, N, time_s (what calibration measures).

A time faster than the GPU's peak FLOP/s (or, with no GPU named, twice the fastest preset's)
is refused: such a table is in other units, or of another shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from f8roof.errors import F8RoofError
from f8roof.hardware.presets import GPU, PRESETS
from f8roof.timing.gemm import GEMM_ROLES, GemmTableError, TableGemm, gemm_dims

if TYPE_CHECKING:
    import pandas as pd

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
        (dtype, role.value, *gemm_dims(role, M, K, N), t)
        for M, K, N, t_bf16, t_fp8 in frame[["M", "K", "N", bf16, fp8]].itertuples(index=False)
        for role in GEMM_ROLES
        for dtype, t in (("bf16", t_bf16), ("fp8", t_fp8))
    ]


def check_speeds(records, path: Path, gpu: GPU | None) -> None:
    """Refuse a gemm faster than the GPU can run: its peak FLOP/s (5% margin for clocks above
    the datasheet's), or twice the fastest preset's when no GPU is named."""
    for dtype, role, m, k, n, t in records:
        try:
            flops = 2.0 * float(m) * float(k) * float(n) / float(t)
        except (TypeError, ValueError, ZeroDivisionError):
            continue  # a bad value is TableGemm's to name
        if gpu is not None:
            limit, whose = gpu.peak_flops(str(dtype)) * PEAK_MARGIN, f"the {gpu.name}'s peak"
        else:
            fastest = max(g.peak_flops(str(dtype)) for g in PRESETS.values())
            limit, whose = 2 * fastest, "twice any preset's peak"
        if flops > limit:
            raise F8RoofError(
                f"gemm table {path}: {m}x{k}x{n} {dtype} at {flops / 1e12:.4g} TFLOP/s is "
                f"above {whose}: times are seconds"
            )


PEAK_MARGIN = 1.05


def load_gemm_table(path: str | Path, *, gpu: GPU | None = None) -> TableGemm:
    """`gpu`: the GPU the table is for (its peak bounds the times), None when not named."""
    import pandas as pd  # a table given is read by pandas; an estimate without one needs none

    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise F8RoofError(f"cannot read gemm table {path}: {e}") from None
    try:
        records = records_from_frame(frame, path)
        check_speeds(records, path, gpu)
        return TableGemm.from_records(records, label=str(path))
    except (GemmTableError, ValueError, TypeError) as e:
        raise F8RoofError(f"bad gemm table {path}: {e}") from None
