"""An architecture's transformer block as a `BlockSpec`: what `capture_block` compiles for one
rank of a sharded run (issue 18). The verb-level glue between the catalog and the profiler."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from f8roof.errors import F8RoofError, ModelError, term
from f8roof.files import write_text_atomic
from f8roof.hardware import instruction_costs
from f8roof.hardware.presets import find_gpu
from f8roof.notes import Note, Topic, note
from f8roof.traffic.variant import Before
from f8roof.training import checkpointing
from f8roof.training.block import (
    BlockCapture,
    BlockGemm,
    BlockKernel,
    BlockSpec,
    Mlp,
    MoeSpec,
    Norm,
    PipelinedCollective,
    Recompute,
)
from f8roof.training.catalog import BUILTIN_CONFIGS, Architecture, builtin, resolve_model
from f8roof.training.run_config import RunConfig, assumed_seq_len

if TYPE_CHECKING:
    from f8roof.calibration.file import Calibration
    from f8roof.timing.gemm import GemmModel

__all__ = [
    "BlockComparison",
    "BlockOrigin",
    "CaptureTimes",
    "NoBlock",
    "block_spec",
    "capture_times",
    "compare_block",
    "compiled_block",
    "shipped_block",
]

# The head width when neither the catalog's config nor the caller says it: llama's, mistral's
# and qwen's 128 (head_dim in their config.json files, or hidden_size / num_attention_heads).
DEFAULT_HEAD_DIM = 128


def block_spec(
    arch: Architecture,
    *,
    tokens: int,
    seq_len: int | None = None,
    parallel: RunConfig | None = None,
    head_dim: int | None = None,
) -> BlockSpec:
    """The block of `arch` (one of its layers) for `tokens` per data-parallel rank.

    Dims come from the linears: q_proj (or c_attn, torchtitan's wq) K = dim; q/k/v widths over
    the head width give the heads; gate_proj (or c_fc, torchtitan's w1) N = the MLP width. The
    head width: `head_dim`, else the built-in config's, else 128. Norm and MLP follow the linears' contexts (layernorm and gelu
    for gpt2-style c_fc/c_proj). `seq_len` defaults to `tokens` (one sequence per rank).
    """
    by_name = {linear.fqn.rsplit(".", 1)[-1]: linear for linear in arch.linears}
    try:
        # Hugging Face's names, or torchtitan's (the catalog's qwen3: wq, wk, feed_forward.w1)
        q = by_name.get("q_proj") or by_name.get("wq")
        k = by_name.get("k_proj") or by_name.get("wk")
        width = head_dim or _config_head_dim(arch.name) or DEFAULT_HEAD_DIM
        if q is None or k is None:
            raise F8RoofError(
                f"{arch.name}: no q_proj/k_proj linears; sharded blocks know llama-style "
                "attention only"
            )
        gate = by_name.get("gate_proj") or next(
            (x for x in arch.linears if x.fqn.endswith(("feed_forward.w1", "experts.w1"))), None
        )
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
            parallel=parallel or RunConfig.sharded(),
            name=arch.name,
        )
    except ModelError as e:
        raise F8RoofError(f"{arch.name}: {e.marked}") from None


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


class NoBlock(str, Enum):
    """Why no sharded block times a step (the step then sums the per-layer rows)."""

    NO_FILE = "no shipped sharded block file"
    NOT_BUILTIN = "not a built-in model's block"
    NO_FIT = "no shipped fit for this block"
    FIT_FAILS = "the shipped fit does not hold here"
    MOE = "MoE blocks are not compiled yet"
    MIXED_RECIPES = "the block mixes recipes"
    NO_CALIBRATION = "timing a block's kernels needs a calibration"
    NOT_TORCHAO = "the sharded block is torchao's Float8Linear"
    FUSED_QKV = "the blocks' q, k and v do not pair with the fused rows"


def no_block(why: NoBlock, **values: Any) -> Note:
    return note(Topic.NO_BLOCK, why=why, **values)


@dataclass(frozen=True)
class BlockOrigin:
    """Where a sharded block's graphs come from: compiled now (`compiled`) or the shipped
    fits, at which layout, and (shipped) the compiles its fit passes through and was checked
    against, with the largest errors found there."""

    compiled: bool
    block: dict[str, object]  # what was compiled: model, TP, FSDP, recompute, recipe, ...
    tokens: int
    sequences: int
    seq_len: int
    seq_len_given: bool
    gpu: str = ""  # codegen target
    knots: tuple[int, ...] = ()
    checked: tuple[int, ...] = ()
    bytes_error: float = math.nan
    time_error: float = math.nan
    # torch, torchao, gpu of the shipped compiles
    stack: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BlockComparison:
    """One block in bf16 and in a float8 recipe, same sharding and checkpointing: compiled, or
    rebuilt from the shipped fit (`origin` says which)."""

    bf16: BlockCapture
    float8: BlockCapture
    origin: BlockOrigin | None = None
    # under async TP: each precision's TP collectives as Inductor's pass left them
    pipelined: tuple[tuple[PipelinedCollective, ...], tuple[PipelinedCollective, ...]] | None = None

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
    async_tp: bool = False,
    device: str | None = None,
    seq_len: int | None = None,
    gpu: str = "h100",
    shapes_given: bool = False,
    sac_policy: str | None = None,
    emulate_precision_casts: bool = True,
    **linear_options: object,
) -> BlockComparison:
    """`f8roof compare --model ... --tp ...`: the model's block compiled for one rank of the
    sharded run, in bf16 and in `recipe` (torchao), on a fake process group (codegen for
    `gpu` unless `device` says cpu); with `async_tp`, also compiled with Inductor's
    micro-pipeline pass for which TP collectives it fuses (the kernels are the same);
    `emulate_precision_casts` False: rowwise as a torchtitan before 2025-04-16 compiled it.
    compare's per-linear options (`linear_options`: scaling, implementation, context, the
    seed's flags, a calibration) do not apply: refused if given."""
    from f8roof.profiler.block import capture_block, pipelined_collectives

    if tokens is None:
        raise F8RoofError(f"{term('model')} needs {term('tokens')} (tokens per rank per step)")
    if shapes_given:
        raise F8RoofError(
            f"{term('model')} compiles a block: give it {term('tokens')}, not {term('shapes')}"
        )
    given = sorted(name for name, value in linear_options.items() if value)
    if given:
        options = ", ".join(term(name) for name in given)
        raise F8RoofError(f"{options} apply to one linear, not to compare {term('model')}'s block")
    # the degrees and token splits estimate takes, refused alike
    RunConfig(tp=tp, fsdp=fsdp)
    for name, value in (("tokens", tokens), ("seq_len", seq_len or tokens)):
        if tp > 1 and value % tp:
            raise F8RoofError(
                f"{term(name)} {value}: sequence parallelism splits each sequence over its TP "
                f"ranks, and {term('tp')} {tp} does not divide it"
            )
    if async_tp and tp < 2:
        raise F8RoofError(
            f"{term('async_tp')} pipelines TP collectives: give {term('tp')} 2 or more"
        )
    if async_tp and device not in (None, "codegen"):
        raise F8RoofError(
            f"{term('async_tp')} compiles for codegen only (its fused collectives run on "
            "symmetric memory, which a CPU has none of)"
        )
    if float8_all_gather and fsdp < 2:
        # torchtitan turns it on only with FSDP (parallel_dims.dp_shard_enabled)
        raise F8RoofError(
            f"{term('float8_all_gather')} gathers FSDP's weight shards in float8: give "
            f"{term('fsdp')} 2 or more (got {term('fsdp')} {fsdp})"
        )
    try:
        parallel = RunConfig.sharded(
            tp=tp,
            fsdp=fsdp,
            float8_all_gather=float8_all_gather,
            recompute=Recompute(recompute),
            emulate_precision_casts=emulate_precision_casts,
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
    sac = checkpointing.sac_policy(sac_policy) if sac_policy else None
    # bf16 all-gathers nothing in float8: the flag applies to the float8 compile only
    plain = replace(spec, parallel=replace(parallel, float8_all_gather=False))
    pipelined = None
    if async_tp:

        def fused(s: BlockSpec, r: str | None) -> tuple[PipelinedCollective, ...]:
            s = replace(s, parallel=replace(s.parallel, async_tp=True))
            return pipelined_collectives(s, recipe=r, gpu=preset, sac=sac)

        pipelined = (fused(plain, None), fused(spec, recipe))
    return BlockComparison(
        bf16=capture_block(plain, recipe=None, device=device, gpu=preset, sac=sac),
        float8=capture_block(spec, recipe=recipe, device=device, gpu=preset, sac=sac),
        pipelined=pipelined,
    )


def _gemm_dtype(gemm: BlockGemm, recipe: str | None) -> str:
    """bf16 for `mm`; the recipe's float8 gemm family for `_scaled_mm` (torchao's rowwise
    backward runs unit-scaled gemms: timed as rowwise, the family's slower end)."""
    if "scaled" not in gemm.op:
        return "bf16"
    return "fp8_rowwise" if recipe and recipe.startswith("rowwise") else "fp8"


@dataclass(frozen=True)
class CaptureTimes:
    """One rank's block in one precision, timed: non-gemm kernels by the calibration's
    kernel-time model, gemms by its gemm model (attention, an extern kernel, is neither)."""

    gemm_s: float  # gemms the passes run once
    kernel_s: float  # non-gemm kernels the passes run once
    recompute_s: float  # forward kernels and gemms the backward runs again
    fwd_s: float  # the forward graph, everything in it
    bwd_s: float
    # the forward's last gemm, the block's output projection (w2): nothing in the backward
    # reads its output, so a backward that reruns the forward (full AC) leaves it out
    output_gemm_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.kernel_s + self.recompute_s


def capture_times(
    capture: BlockCapture, *, calibration: Calibration, gemm_model: GemmModel
) -> CaptureTimes:
    """Time every kernel and gemm of a compiled (or fitted) block: see CaptureTimes."""
    from f8roof.timing.gemm import GemmRole

    parts = {"gemm": 0.0, "kernel": 0.0, "recompute": 0.0, "fwd": 0.0, "bwd": 0.0}

    def add(what: str, item: BlockKernel | BlockGemm, seconds: float) -> None:
        parts["recompute" if item.recomputed else what] += seconds
        parts[item.graph] += seconds

    model = calibration.kernel_time
    output_gemm_s = 0.0
    for k in capture.kernels:
        seconds = model.time_s(
            k.kind,
            k.bytes_total,
            kernel_class=k.kernel_class,
            scattered_elements=k.scattered_elements,
            reread_bytes=k.bytes_reread,
            arithmetic=k.arithmetic,
        )
        add("kernel", k, float(seconds))
    for g in capture.gemms:
        dtype = _gemm_dtype(g, capture.recipe)
        # the compiled call says whether it accumulates fast (blocks fitted before it did not)
        slow = None if g.kernel_class is None else g.kernel_class.endswith("_slow")
        time_s, _ = gemm_model.time_s(dtype, GemmRole.OUTPUT, g.m, g.k, g.n, slow_accum=slow)
        add("gemm", g, float(time_s))
        if g.graph == "fwd":
            output_gemm_s = float(time_s)  # the forward graph's gemms run in launch order
    return CaptureTimes(
        gemm_s=parts["gemm"],
        kernel_s=parts["kernel"],
        recompute_s=parts["recompute"],
        fwd_s=parts["fwd"],
        bwd_s=parts["bwd"],
        output_gemm_s=output_gemm_s,
    )


def graph_recompute(run: RunConfig) -> Recompute:
    """The checkpointing the block's graphs are compiled (or fitted) with. Full AC (layer SAC
    too) wraps the whole block in torch.utils.checkpoint: its backward reruns the block's
    forward graph as it is, so the graphs are the block without checkpointing and the step
    adds that forward again (`engine.step.blocks`); async TP runs the same kernels with its TP
    collectives split against their gemms, an overlap the step applies."""
    return Recompute.NONE if run.recompute is Recompute.FULL else run.recompute


def compiled_block(
    model: str, *, tokens: int, recipe: str, run: RunConfig, gpu: str
) -> BlockComparison:
    """`--overhead codegen`: the exact case compiled (codegen for `gpu`), bf16 and `recipe`;
    kept in the block cache (`block_cache_path`), so the same case asked again is read back
    instead of compiled."""
    fsdp = run.fsdp_degree or 1
    seq_len = run.local_seq_len or assumed_seq_len(tokens, run.tp)
    case: dict[str, Any] = {
        "tokens": tokens,
        "seq_len": seq_len,
        "recipe": recipe,
        "tp": run.tp,
        "fsdp": fsdp,
        "float8_all_gather": run.float8_all_gather and fsdp > 1,
        "recompute": graph_recompute(run).value,
        "gpu": gpu,
        "sac_policy": run.sac_policy,
        "emulate_precision_casts": run.emulate_precision_casts,
    }
    cache = block_cache_path(model, case)
    comparison = _cached(cache)
    if comparison is None:
        comparison = compare_block(model=model, **case)
        _keep(cache, comparison)
    origin = BlockOrigin(
        compiled=True,
        block={
            "architecture": model,
            "tp": run.tp,
            "fsdp": fsdp,
            "recompute": graph_recompute(run).value,
            "recipe": recipe,
            "emulate_precision_casts": run.emulates_precision_casts(recipe),
        },
        tokens=tokens,
        sequences=tokens // seq_len,
        seq_len=seq_len,
        seq_len_given=run.seq_len is not None,
        gpu=gpu,
    )
    return replace(comparison, origin=origin)


def block_cache_path(model: str, case: dict[str, Any]) -> Path | None:
    """Where a compiled block of `model` (its architecture, whatever the config is named) for
    `case` is kept: $F8ROOF_CACHE (default ~/.cache/f8roof; "off": no cache), keyed by the
    case, the architecture, the packages that generated the code and how its kernels are
    counted: the counting code's own text, so a block counted by other rules (a checkout
    between releases included) is compiled again, not read back."""
    root = os.environ.get("F8ROOF_CACHE", str(Path.home() / ".cache" / "f8roof"))
    if root.strip().lower() in ("", "off", "0"):
        return None
    key = {
        "case": case,
        "architecture": repr(resolve_model(model)),
        "packages": {p: _version(p) for p in ("torch", "triton", "torchao", "f8roof")},
        "counting": _counting_digest(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return Path(root) / "blocks" / f"{digest[:24]}.json"


def _counting_digest() -> str:
    """A digest of the code that counts a kernel's bytes and arithmetic."""
    from f8roof.profiler import triton_code

    digest = hashlib.sha256()
    for module in (triton_code, instruction_costs):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def _version(package: str) -> str:
    from importlib import metadata  # 20 ms of a fresh process: only a compiled block needs it

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _cached(path: Path | None) -> BlockComparison | None:
    """A kept block, or None (none kept, or one this code cannot read: compiled again)."""
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return BlockComparison(
            BlockCapture.from_dict(data["bf16"]), BlockCapture.from_dict(data["float8"])
        )
    except (OSError, ValueError, KeyError, TypeError, F8RoofError):
        return None


def _keep(path: Path | None, comparison: BlockComparison) -> None:
    """Keep a compiled block; a cache that cannot be written only costs the next compile."""
    if path is None:
        return
    text = json.dumps({"bf16": comparison.bf16.to_dict(), "float8": comparison.float8.to_dict()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    except OSError:
        pass


def shipped_block(
    model: str, *, tokens: int, recipe: str, run: RunConfig
) -> tuple[BlockComparison | None, Note | None]:
    """The block from the shipped sharded fits (calibration/data/blocks.json), or None and
    the note saying why."""
    from f8roof.calibration.block_file import SHIPPED, BlockKey, shipped_fit, shipped_stack

    if not SHIPPED.is_file():
        return None, no_block(NoBlock.NO_FILE)
    gather = run.float8_all_gather and (run.fsdp_degree or 1) > 1
    seq_len = run.local_seq_len or assumed_seq_len(tokens, run.tp)
    name = _builtin_block(model)
    if name is None:
        return None, no_block(NoBlock.NOT_BUILTIN, model=resolve_model(model).name)
    want = BlockKey(
        name,
        run.tp,
        graph_recompute(run).value,
        recipe,
        gather,
        tokens > seq_len,
        emulate_precision_casts=run.emulates_precision_casts(recipe),
    )
    fit8 = shipped_fit(want)
    plain = replace(want, recipe="bf16", float8_all_gather=False, emulate_precision_casts=False)
    fit16 = shipped_fit(plain)
    if fit8 is None or fit16 is None:
        return None, no_block(NoBlock.NO_FIT, block=asdict(want))
    try:
        bf16, float8 = (f.at(tokens, seq_len=seq_len) for f in (fit16, fit8))
    except ModelError as e:
        return None, no_block(NoBlock.FIT_FAILS, block=asdict(want), error=str(e))
    checks = [c for f in (fit8, fit16) for c in f.checks]
    origin = BlockOrigin(
        compiled=False,
        block=asdict(want),
        tokens=tokens,
        sequences=tokens // seq_len,
        seq_len=seq_len,
        seq_len_given=run.seq_len is not None,
        knots=tuple(fit8.tokens),
        checked=tuple(c.tokens for c in fit8.checks),
        bytes_error=max((c.worst for c in checks), default=math.nan),
        time_error=max((c.time_error or 0.0 for c in checks), default=math.nan),
        stack=shipped_stack(),
    )
    return BlockComparison(bf16, float8, origin), None


def shipped_bf16_block(model: str, *, tokens: int, run: RunConfig) -> BlockCapture | None:
    """The bf16 block from the shipped fits, whatever float8 recipe is asked: the bf16 step
    of a setup is one, so it rests on these graphs wherever they exist (None: they do not)."""
    from f8roof.calibration.block_file import SHIPPED, BlockKey, shipped_fit

    name = _builtin_block(model) if SHIPPED.is_file() else None
    if name is None:
        return None
    seq_len = run.local_seq_len or assumed_seq_len(tokens, run.tp)
    key = BlockKey(name, run.tp, graph_recompute(run).value, "bf16", False, tokens > seq_len)
    fit = shipped_fit(key)
    try:
        return None if fit is None else fit.at(tokens, seq_len=seq_len)
    except ModelError:
        return None


def _builtin_block(model: str) -> str | None:
    """The built-in model whose block the shipped fits hold for `model`: the one whose
    linears these are, whatever a config is named."""
    arch = resolve_model(model)
    return next((n for n in BUILTIN_CONFIGS if builtin(n).linears == arch.linears), None)
