"""GPU presets: datasheet ceilings, matched by the device name torch reports.

Numbers are dense (no 2:4 sparsity) peak FLOP/s and HBM bandwidth from the vendors' datasheets:
NVIDIA H100 and H200 datasheets (SXM and PCIe/NVL columns), the NVIDIA DGX B200 / HGX B200
spec page (per GPU, dense = half the sparse figure), and AMD's Instinct MI300X datasheet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from f8roof.models.errors import ModelError

TERA = 1e12


class UnknownGPUError(ModelError):
    pass


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_flops: float  # dense peak, FLOP/s
    fp8_flops: float  # dense peak, FLOP/s
    memory_bandwidth_bytes_per_s: float
    device_prefixes: tuple[str, ...] = ()
    sm_count: int = 132
    compute_capability: tuple[int, int] = (9, 0)
    memory_bytes: int = 80 * 2**30

    def __post_init__(self) -> None:
        for field in ("bf16_flops", "fp8_flops", "memory_bandwidth_bytes_per_s"):
            value = getattr(self, field)
            if not (0 < value < math.inf):
                raise UnknownGPUError(
                    f"GPU {self.name!r}: {field} must be a positive finite number, got {value}"
                )

    def peak_flops(self, dtype: str) -> float:
        return self.fp8_flops if dtype.startswith("fp8") else self.bf16_flops


PRESETS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU(
            "h100",
            989.4 * TERA,
            1978.9 * TERA,
            3.35 * TERA,
            ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", "NVIDIA H100"),
            132,
            (9, 0),
            80 * 2**30,
        ),
        # The H100 torchao's float8 roofline script models: "2.4 TB per second, custom to Meta's
        # H100 variant" (torchao/testing/training/roofline_utils.py). No device name is known
        # for it, so it is chosen by name only.
        GPU("h100-meta", 989.4 * TERA, 1978.9 * TERA, 2.4 * TERA, (), 132, (9, 0), 80 * 2**30),
        GPU(
            "h100-pcie",
            756.0 * TERA,
            1513.0 * TERA,
            2.0 * TERA,
            ("NVIDIA H100 PCIe",),
            114,
            (9, 0),
            80 * 2**30,
        ),
        GPU(
            "h100-nvl",
            835.0 * TERA,
            1671.0 * TERA,
            3.9 * TERA,
            ("NVIDIA H100 NVL",),
            132,
            (9, 0),
            94 * 2**30,
        ),
        GPU(
            "h200",
            989.4 * TERA,
            1978.9 * TERA,
            4.8 * TERA,
            ("NVIDIA H200",),
            132,
            (9, 0),
            141 * 2**30,
        ),
        GPU(
            "h200-nvl",
            835.0 * TERA,
            1671.0 * TERA,
            4.8 * TERA,
            ("NVIDIA H200 NVL",),
            132,
            (9, 0),
            141 * 2**30,
        ),
        GPU(
            "b200",
            2250.0 * TERA,
            4500.0 * TERA,
            8.0 * TERA,
            ("NVIDIA B200",),
            148,
            (10, 0),
            180 * 2**30,
        ),
        GPU(
            "mi300x",
            1307.4 * TERA,
            2614.9 * TERA,
            5.3 * TERA,
            ("AMD Instinct MI300X",),
            304,
            (9, 4),
            192 * 2**30,
        ),
    )
}

ALIASES = {"h100-sxm": "h100", "h200-sxm": "h200"}


def find_gpu(name: str) -> GPU:
    """A preset by name, alias, or device name (longest matching prefix wins)."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key in PRESETS:
        return PRESETS[key]
    matches = [
        (len(prefix), gpu)
        for gpu in PRESETS.values()
        for prefix in gpu.device_prefixes
        if name.strip().lower().startswith(prefix.lower())
    ]
    if matches:
        return max(matches, key=lambda m: m[0])[1]
    raise UnknownGPUError(
        f"unknown GPU {name!r}; known: {', '.join(PRESETS)} (or custom:bf16=..,fp8=..,bandwidth=..)"
    )


CUSTOM_KEYS = frozenset({"bf16", "fp8", "bandwidth"})


def custom_gpu(spec: str) -> GPU:
    """'custom:bf16=989e12,fp8=1979e12,bandwidth=3.35e12' -> GPU (FLOP/s, bytes/s)."""
    _, _, body = spec.partition(":")
    values: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, sep, value = item.partition("=")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise UnknownGPUError(f"bad custom GPU item {item!r}; expected key=number") from None
        if not sep:
            raise UnknownGPUError(f"bad custom GPU item {item!r}; expected key=number")
    unknown = set(values) - CUSTOM_KEYS
    if unknown:
        raise UnknownGPUError(
            f"unknown custom GPU item(s) {', '.join(sorted(unknown))}; "
            "custom takes bf16, fp8 (FLOP/s) and bandwidth (bytes/s)"
        )
    missing = CUSTOM_KEYS - set(values)
    if missing:
        raise UnknownGPUError(f"custom GPU needs {', '.join(sorted(missing))} (FLOP/s, bytes/s)")
    return GPU("custom", values["bf16"], values["fp8"], values["bandwidth"])


def resolve_gpu(spec: str) -> GPU:
    return custom_gpu(spec) if spec.lower().startswith("custom:") else find_gpu(spec)
