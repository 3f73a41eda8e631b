"""`f8roof gpus`: every preset's ceilings, the scaled gemms it runs, and where each number comes
from (its datasheet sources, the public sweeps behind its datasheet timing, what it assumes)."""

from __future__ import annotations

from f8roof.hardware.presets import GPU, PRESETS
from f8roof.hardware.support import ScaledGemm, unsupported_reason
from f8roof.timing.datasheet import preset_efficiency

TERA = 1e12
# The gemms a training recipe needs, in the order the column lists them.
GEMMS = (ScaledGemm.TENSORWISE, ScaledGemm.ROWWISE, ScaledGemm.BLOCKWISE, ScaledGemm.MXFP8)
HEADER = (
    f"{'name':10} {'arch':7} {'bf16':>7} {'fp8':>7} {'mxfp8':>7} {'HBM':>5} {'copy':>5} "
    f"{'power':>6}  {'float8':6} {'scaled gemms':34} matches"
)
UNITS = f"{'':10} {'':7} {'TFLOP/s':>7} {'TFLOP/s':>7} {'TFLOP/s':>7} {'TB/s':>5} {'':>5} {'W':>6}"


def gpus_text(*, sources: bool = True) -> str:
    """The presets as a table; with `sources`, each preset's citations and assumptions."""
    gpus = list(PRESETS.values())
    lines = [HEADER, UNITS, *(_row(gpu) for gpu in gpus)]
    lines.append("custom GPU: --gpu custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12")
    lines.append("copy: fraction of HBM bandwidth a generated elementwise kernel reaches")
    if sources:
        for gpu in gpus:
            lines.extend(["", *_provenance(gpu)])
    return "\n".join(lines)


def _row(gpu: GPU) -> str:
    mx = f"{gpu.mx_flops / TERA:7.0f}" if gpu.mx_flops else f"{'-':>7}"
    power = f"{gpu.power_w:6d}" if gpu.power_w else f"{'?':>6}"
    runs = ",".join(g.value for g in GEMMS if unsupported_reason(gpu, g) is None)
    copy = preset_efficiency(gpu).memory_efficiency
    return (
        f"{gpu.name:10} {gpu.arch_label:7} {gpu.bf16_flops / TERA:7.0f} "
        f"{gpu.fp8_flops / TERA:7.0f} {mx} {gpu.memory_bandwidth_bytes_per_s / TERA:5.2f} "
        f"{copy:5.2f} {power}  {gpu.fp8_dtype_family.value:6} {runs:34} "
        f"{', '.join(gpu.device_prefixes) or '(by name only)'}"
    )


def _provenance(gpu: GPU) -> list[str]:
    chosen = preset_efficiency(gpu)
    lines = [f"{gpu.name}:"]
    lines += [f"  datasheet: {s}" for s in gpu.sources]
    lines += [f"  note: {n}" for n in gpu.notes]
    lines += [f"  timing: {s}" for s in chosen.sources]
    lines += [f"  assumes: {a}" for a in chosen.assumptions]
    return lines
