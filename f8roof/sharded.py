"""An architecture's transformer block as a `BlockSpec`: what `capture_block` compiles for one
rank of a sharded run (issue 18). The verb-level glue between the catalog and the profiler."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from f8roof.architectures.catalog import BUILTIN_CONFIGS, Architecture, resolve_model
from f8roof.errors import F8RoofError
from f8roof.models.block import BlockCapture, BlockSpec, Mlp, MoeSpec, Norm, ParallelSpec, Recompute
from f8roof.models.errors import ModelError
from f8roof.models.hardware import find_gpu
from f8roof.models.variant import Before

__all__ = ["BlockComparison", "block_spec", "compare_block"]

# The head width when neither the catalog's config nor the caller says it: llama's, mistral's
# and qwen's 128 (head_dim in their config.json files, or hidden_size / num_attention_heads).
DEFAULT_HEAD_DIM = 128


def block_spec(
    arch: Architecture,
    *,
    tokens: int,
    seq_len: int | None = None,
    parallel: ParallelSpec | None = None,
    head_dim: int | None = None,
) -> BlockSpec:
    """The block of `arch` (one of its layers) for `tokens` per data-parallel rank.

    Dims come from the linears: q_proj (or c_attn) K = dim; q/k/v widths over the head width
    give the heads; gate_proj (or c_fc) N = the MLP width. The head width: `head_dim`, else the
    built-in config's, else 128. Norm and MLP follow the linears' contexts (layernorm and gelu
    for gpt2-style c_fc/c_proj). `seq_len` defaults to `tokens` (one sequence per rank).
    """
    by_name = {linear.fqn.rsplit(".", 1)[-1]: linear for linear in arch.linears}
    try:
        q = by_name.get("q_proj")
        k = by_name.get("k_proj")
        width = head_dim or _config_head_dim(arch.name) or DEFAULT_HEAD_DIM
        if q is None or k is None:
            raise F8RoofError(
                f"{arch.name}: no q_proj/k_proj linears; sharded blocks know llama-style "
                "attention only"
            )
        gate = by_name.get("gate_proj")
        routed = next((linear for linear in arch.linears if linear.routed is not None), None)
        moe = None
        if routed is not None and routed.routed is not None:
            moe = MoeSpec(routed.routed.experts, routed.routed.top_k, routed.N)
        mlp = Mlp.SWIGLU if gate is not None else Mlp.GELU
        ffn = (gate or by_name.get("c_fc") or by_name.get("up_proj") or routed or q).N
        norm = Norm.LAYERNORM if q.context.before is Before.LAYERNORM else Norm.RMSNORM
        for what, n in (("q_proj", q.N), ("k_proj", k.N)):
            if n % width:
                raise F8RoofError(
                    f"{arch.name}: {what} width {n} is not a multiple of head_dim {width}"
                )
        return BlockSpec(
            dim=q.K,
            n_heads=q.N // width,
            n_kv_heads=k.N // width,
            head_dim=width,
            ffn_dim=ffn,
            tokens=tokens,
            seq_len=seq_len or tokens,
            norm=norm,
            mlp=mlp,
            moe=moe,
            parallel=parallel or ParallelSpec(),
            name=arch.name,
        )
    except ModelError as e:
        raise F8RoofError(f"{arch.name}: {e}") from None


def _config_head_dim(name: str) -> int | None:
    """head_dim of a built-in config or a config.json file: its own, or hidden_size /
    num_attention_heads."""
    entry = BUILTIN_CONFIGS.get(name)
    if entry is not None:
        config = entry[1]
    else:
        path = Path(name)
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            return None
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        config = config.get("text_config") or config
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return hidden // heads if hidden and heads and hidden % heads == 0 else None


@dataclass(frozen=True)
class BlockComparison:
    """One block compiled in bf16 and in a float8 recipe, same sharding and checkpointing."""

    bf16: BlockCapture
    float8: BlockCapture

    @property
    def spec(self) -> BlockSpec:
        return self.float8.spec


def compare_block(
    *,
    model: str,
    tokens: int | None,
    recipe: str,
    tp: int = 1,
    fsdp: int = 1,
    float8_all_gather: bool = False,
    recompute: str = "none",
    device: str | None = None,
    seq_len: int | None = None,
    gpu: str = "h100",
    shapes_given: bool = False,
    **linear_options,
) -> BlockComparison:
    """`f8roof compare --model ... --tp ...`: the model's block compiled for one rank of the
    sharded run, in bf16 and in `recipe` (torchao), on a fake process group (codegen for
    `gpu` unless `device` says cpu). compare's per-linear options (`linear_options`: scaling,
    implementation, context, the seed's flags, a calibration) do not apply: refused if given."""
    from f8roof.profiler.block import capture_block

    if tokens is None:
        raise F8RoofError("--model needs --tokens (tokens per rank per step)")
    if shapes_given:
        raise F8RoofError("--model compiles a block: give it --tokens, not --shape")
    given = sorted(name for name, value in linear_options.items() if value)
    if given:
        options = ", ".join("--" + name.replace("_", "-") for name in given)
        raise F8RoofError(f"{options} apply to one linear, not to compare --model's block")
    try:
        parallel = ParallelSpec(
            tp=tp, fsdp=fsdp, float8_all_gather=float8_all_gather, recompute=Recompute(recompute)
        )
    except ValueError as e:
        raise F8RoofError(str(e)) from None
    device = device or "codegen"

    spec = block_spec(
        resolve_model(model),
        tokens=tokens,
        seq_len=seq_len,
        parallel=parallel,
        head_dim=_config_head_dim(model),
    )
    preset = find_gpu(gpu) if device == "codegen" else None
    # bf16 all-gathers nothing in float8: the flag applies to the float8 compile only
    plain = replace(spec, parallel=replace(parallel, float8_all_gather=False))
    return BlockComparison(
        bf16=capture_block(plain, recipe=None, device=device, gpu=preset),
        float8=capture_block(spec, recipe=recipe, device=device, gpu=preset),
    )


@dataclass(frozen=True)
class CompiledStep:
    """`estimate --model ... --overhead codegen`: the step with every block linear in float8,
    from one block compiled as one rank of the run compiles it (TP, SP, FSDP, checkpointing),
    beside the same from the per-layer fits. The compiled block holds what the per-layer rows
    cannot: casts that lost their fusion after an all-gather, float8 all-gathers, recomputed
    casts. Each graph's non-gemm kernels are timed by the calibration's kernel-time model and
    its gemms by its gemm model; lm_head and everything outside the blocks stay as they are."""

    block_bf16_s: float  # one block, forward and backward, non-gemm kernels and gemms
    block_fp8_s: float
    layers: int
    casts_after_all_gather: int  # float8 casts reading an all-gathered tensor, per block
    step_bf16_s: float  # the step summary's bf16 step (measured or modelled)
    step_fp8_s: float  # with every block linear in float8, from the compiled block
    fits_step_fp8_s: float  # the same from the per-layer fits
    where: str  # what was compiled, in words

    @property
    def speedup(self) -> float:
        return self.step_bf16_s / self.step_fp8_s

    @property
    def fits_speedup(self) -> float:
        return self.step_bf16_s / self.fits_step_fp8_s


def _gemm_dtype(gemm, recipe: str | None) -> str:
    """bf16 for `mm`; the recipe's float8 gemm family for `_scaled_mm` (torchao's rowwise
    backward runs unit-scaled gemms: timed as rowwise, the family's slower end)."""
    if "scaled" not in gemm.op:
        return "bf16"
    return "fp8_rowwise" if recipe and recipe.startswith("rowwise") else "fp8"


def block_time_s(capture: BlockCapture, *, calibration, gemm_model) -> float:
    """One rank's compiled block, forward and backward: every non-gemm kernel by the kernel-time
    model (recomputed ones included), every gemm by the gemm model."""
    from f8roof.models.gemm import GemmRole

    kernels = sum(
        float(calibration.kernel_time.time_s(k.kind, k.bytes_total)) for k in capture.kernels
    )
    gemms = sum(
        float(gemm_model.time_s(_gemm_dtype(g, capture.recipe), GemmRole.OUTPUT, g.m, g.k, g.n)[0])
        for g in capture.gemms
    )
    return kernels + gemms


def compiled_step(model: str, rec, resolved, setup, summary) -> CompiledStep:
    """Compile the model's block for `setup` (codegen for the calibration's GPU) in bf16 and in
    the recommendation's recipe, time both, and put the difference into the step."""
    config = resolved.config
    if resolved.calibration is None:
        raise F8RoofError("--overhead codegen times kernels with a calibration: drop it")
    if len(rec.recipes) != 1:
        raise F8RoofError("--overhead codegen with --model compiles one recipe: give one")
    recipe = rec.recipes[0]
    fsdp = setup.fsdp_degree or 1
    comparison = compare_block(
        model=model,
        tokens=rec.tokens,
        recipe=recipe,
        tp=setup.tp,
        fsdp=fsdp,
        recompute=setup.recompute.value,
        gpu=config.gpu.name,
    )
    timed = {
        name: block_time_s(c, calibration=resolved.calibration, gemm_model=config.gemm_model)
        for name, c in (("bf16", comparison.bf16), ("float8", comparison.float8))
    }
    layers = summary.layers
    block = rec.layers[rec.layers["fqn"] != "lm_head"]
    fits_saved = float((block["count"] * (block["bf16_s"] - block["fp8_s"])).sum())
    where = (
        f"one block of {rec.architecture.name} at {rec.tokens} tokens per rank, TP {setup.tp}, "
        f"FSDP {fsdp}, recompute {setup.recompute.value}, {recipe}, codegen for {config.gpu.name}"
    )
    return CompiledStep(
        block_bf16_s=timed["bf16"],
        block_fp8_s=timed["float8"],
        layers=layers,
        casts_after_all_gather=len(comparison.float8.casts_after_all_gather),
        step_bf16_s=summary.bf16_s,
        step_fp8_s=summary.bf16_s - layers * (timed["bf16"] - timed["float8"]),
        fits_step_fp8_s=summary.bf16_s - fits_saved,
        where=where,
    )
