"""Compile one transformer block as each rank of a sharded, checkpointed torchtitan run does.

On one CPU process: a fake process group of `tp x fsdp` ranks
(`init_process_group("fake", store=FakeStore())`), a ("dp_shard", "tp") device mesh, and the
block parallelized as torchtitan parallelizes llama (torchtitan 0.2.0 on PyPI,
torchtitan/models/llama3/infra/parallelize.py, `apply_tp`, `apply_compile`, `apply_fsdp`):
- float8: torchao's `convert_to_float8_training` before TP (torchtitan's converters run at
  model build);
- TP with sequence parallel: `SequenceParallel` on both norms, `PrepareModuleInput` taking the
  attention's and the MLP's input from Shard(1) to Replicate (the all-gather), column-parallel
  wq/wk/wv and w1/w3, row-parallel wo/w2 to Shard(1) (the reduce-scatter); for tensorwise,
  torchao's `Float8ColwiseParallel`, `Float8RowwiseParallel`, `PrepareFloat8ModuleInput`
  (torchtitan picks them whenever float8 is tensorwise: the all-gather moves float8);
- checkpointing of the block: none, full (`torch.utils.checkpoint`), or selective per op
  (`create_selective_checkpoint_contexts` with a torchtitan policy from
  training/checkpointing.py: its save list's outputs saved, every second matmul recomputed).
  Under compile the policy sees a torchao float8 linear's gemm as `aten.mm` (checked on torch
  2.13: the tensor subclass is unwrapped below it), so float8 gemms follow the mm rule;
- `torch.compile(block, fullgraph=True)`, then FSDP2 `fully_shard` around the compiled block
  (fp32 master weights, bf16 compute, fp32 gradient reduction: torchtitan's defaults;
  torchao's float8 all-gather where asked). FSDP2's all-gathers and reduce-scatters run in its
  hooks outside the compiled graph, as in torchtitan; they are recorded as they are issued.
Then forward+backward runs once (cpu), or its graphs are captured on CPU without computing and
Inductor generates CUDA code for a GPU preset (codegen; see `codegen_only`).

An MoE block (`BlockSpec.moe`) runs profiler/moe.py's MoE (torchtitan's router, local
dispatch, grouped gemms, shared experts) in place of the MLP, without TP and EP (`_build`
refuses them), its float8 recipe converting the dense linears (the attention's, the shared
experts') but the router's gate, and the routed experts' grouped gemms with torchao's rowwise
float8 where the run's `moe_fqns` name them (torchtitan's grouped-gemm converter); its saved
tensors and buffers are read (profiler/memory/), its kernels are not (`capture_block`).

Left out of the block: rotary embeddings (elementwise on q and k, the same in bf16 and
float8), q/k norms, dropout, biases.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn

from f8roof.errors import ModelError, term
from f8roof.hardware.presets import GPU, Float8Family, find_gpu
from f8roof.profiler import codegen_only, torchao_float8
from f8roof.profiler.capture import (
    GEMM_TARGETS,
    CaptureDevice,
    CaptureError,
    GraphKind,
    KernelLaunch,
    Work,
    _Recorder,
    compiling,
    recording,
)
from f8roof.profiler.graphs import Step
from f8roof.profiler.moe import MoE
from f8roof.profiler.triton_code import ParsedCollective, parse_output_code
from f8roof.traffic.recipes import Recipe
from f8roof.traffic.variant import torchao_recipe_name
from f8roof.training.block import (
    BlockCapture,
    BlockGemm,
    BlockKernel,
    BlockSpec,
    Collective,
    CollectiveKind,
    Mlp,
    Norm,
    PipelinedCollective,
    Recompute,
)
from f8roof.training.checkpointing import LINEAR, Decision, SacPolicy, sac_policy
from f8roof.training.run_config import RunConfig, check_float8_all_gather

__all__ = ["BlockModule", "capture_block", "fake_world", "pipelined_collectives"]

DTYPE = torch.bfloat16
MESH_DIMS = ("dp_shard", "tp")
# A codegen capture traces on CPU tensors, where SDPA dispatches to the CPU flash op; the
# policies name the CUDA ops it stands for.
CPU_STAND_INS = {
    "aten._scaled_dot_product_flash_attention_for_cpu.default": (
        "aten._scaled_dot_product_flash_attention.default"
    ),
}


# ---- the block ------------------------------------------------------------------------------


class Attention(nn.Module):
    """Grouped-query attention through SDPA (causal), torchtitan's module names."""

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        self.head_dim = spec.head_dim
        self.wq = nn.Linear(spec.dim, spec.q_dim, bias=False)
        self.wk = nn.Linear(spec.dim, spec.kv_dim, bias=False)
        self.wv = nn.Linear(spec.dim, spec.kv_dim, bias=False)
        self.wo = nn.Linear(spec.q_dim, spec.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        # -1 heads: under TP each rank holds n_heads / tp of them
        q, k, v = (
            w(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    """swiglu `w2(silu(w1 x) * w3 x)` (llama) or gelu `w2(gelu(w1 x))` (gpt2)."""

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        self.mlp = spec.mlp
        self.w1 = nn.Linear(spec.dim, spec.ffn_dim, bias=False)
        self.w2 = nn.Linear(spec.ffn_dim, spec.dim, bias=False)
        if spec.mlp is Mlp.SWIGLU:
            self.w3 = nn.Linear(spec.dim, spec.ffn_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mlp is Mlp.SWIGLU:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x)))


class BlockModule(nn.Module):
    """Pre-norm transformer block: `h = x + attention(norm(x)); h + feed_forward(norm(h))`,
    the feed-forward an MoE (`moe`, profiler/moe.py) where the spec routes experts."""

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        norm = nn.RMSNorm if spec.norm is Norm.RMSNORM else nn.LayerNorm
        self.attention_norm = norm(spec.dim)
        self.attention = Attention(spec)
        self.ffn_norm = norm(spec.dim)
        self.routed = spec.moe is not None
        if self.routed:
            self.moe = MoE(spec)  # torchtitan's name
        else:
            self.feed_forward = FeedForward(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + (self.moe if self.routed else self.feed_forward)(self.ffn_norm(h))


class _Root(nn.Module):
    """The model around one block, so the block is a non-root FSDP unit."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Checkpointed(nn.Module):
    """The block under torch.utils.checkpoint: full, or selective with a policy."""

    def __init__(self, block: nn.Module, *, context_fn: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.block = block
        self.context_fn = context_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        # No RNG state to keep: the block has no dropout (keeping it would call the CUDA RNG
        # while generating code without a GPU).
        kwargs = {"use_reentrant": False, "preserve_rng_state": False}
        if self.context_fn is None:  # dynamo takes no context_fn it cannot trace: none at all
            return checkpoint(self.block, x, **kwargs)
        return checkpoint(self.block, x, context_fn=self.context_fn, **kwargs)


def _converts_experts(moe_fqns: Sequence[str]) -> bool:
    """Whether torchtitan's grouped-gemm converter takes the routed experts: its
    `moe_fqns_prototype` names a part of `moe.experts`."""
    return any(fqn and fqn in "moe.experts" for fqn in moe_fqns)


def sac_context(policy: SacPolicy, gate: tuple[int, int] | None = None) -> Callable[[], Any]:
    """A torchtitan per-op policy as a `context_fn`: each op saved or recomputed as
    `policy.decide` says, its matmuls counted apart in the forward and the recompute.
    `gate`: an MoE router gate's weight shape (in, out), whose matmuls the policy may always
    recompute, uncounted (`SacPolicy.recompute_router_gate`)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    forced = gate if policy.recompute_router_gate else None

    def context() -> Any:
        counts = {True: 0, False: 0}

        def choose(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            name = CPU_STAND_INS.get(str(func), str(func))
            if name in policy.mm_ops:
                weight = tuple(args[1].shape)
                if name == LINEAR:  # a linear's weight is (out, in)
                    weight = weight[::-1]
                if weight == forced:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                counts[ctx.is_recompute] += 1
            decision = policy.decide(name, mm_count=counts[ctx.is_recompute])
            if decision is Decision.SAVE:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(choose)

    return context


# ---- the fake world -------------------------------------------------------------------------


@contextlib.contextmanager
def fake_world(world_size: int) -> Iterator[Any]:
    """A fake process group of `world_size` ranks (this process is rank 0), and its mesh
    dims ("dp_shard", "tp") built by the caller; destroyed on exit."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise CaptureError("a process group is already initialized in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield dist
    finally:
        dist.destroy_process_group()


def _mesh(spec: BlockSpec) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(
        "cpu", (spec.parallel.fsdp_ranks, spec.parallel.tp), mesh_dim_names=MESH_DIMS
    )


def _tp_plan(*, float8_tp: bool, mlp: Mlp) -> dict[str, Any]:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    colwise, rowwise, prepare = ColwiseParallel, RowwiseParallel, PrepareModuleInput
    if float8_tp:
        from torchao.float8.float8_tensor_parallel import (
            Float8ColwiseParallel,
            Float8RowwiseParallel,
            PrepareFloat8ModuleInput,
        )

        colwise, rowwise, prepare = (
            Float8ColwiseParallel,
            Float8RowwiseParallel,
            PrepareFloat8ModuleInput,
        )
    gather = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
    plan = {
        "attention_norm": SequenceParallel(),
        "attention": prepare(**gather),
        "attention.wq": colwise(),
        "attention.wk": colwise(),
        "attention.wv": colwise(),
        "attention.wo": rowwise(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": prepare(**gather),
        "feed_forward.w1": colwise(),
        "feed_forward.w2": rowwise(output_layouts=Shard(1)),
    }
    if mlp is Mlp.SWIGLU:
        plan["feed_forward.w3"] = colwise()
    return plan


@dataclass
class _Built:
    module: nn.Module  # what runs: compiled, FSDP-wrapped where FSDP has ranks
    block: nn.Module  # the block inside (for roles)
    x: torch.Tensor
    grad: torch.Tensor
    tp_group: str
    dp_group: str


def _build(
    spec: BlockSpec,
    recipe: Recipe | None,
    *,
    backend: Callable[[Step], Any],
    initialize: bool,
    sac: SacPolicy,
) -> _Built:
    par = spec.parallel
    if spec.moe is not None and (par.tp > 1 or par.ep > 1):
        # torchtitan's expert parallelism (all-to-all dispatch) and the experts' TP plan
        raise CaptureError(
            f"{spec.name or 'block'}: MoE blocks compile without TP and EP here "
            f"({term('tp')} 1, {term('ep')} 1)"
        )
    mesh = _mesh(spec)
    with torch.device("meta"):
        block: nn.Module = BlockModule(spec)
    if recipe is not None:
        float8 = torchao_float8.import_float8()
        config = float8.Float8LinearConfig.from_recipe_name(torchao_recipe_name(recipe))
        if par.float8_all_gather:
            import dataclasses

            config = dataclasses.replace(config, enable_fsdp_float8_all_gather=True)
        # the router's gate stays bf16 (torchtitan's MoE configs filter "router.gate":
        # deepseek_v3/config_registry.py, components/quantization/float8.md); the routed
        # experts are no nn.Linear
        float8.convert_to_float8_training(
            block, config=config, module_filter_fn=lambda _, fqn: not fqn.endswith("router.gate")
        )
        if spec.moe is not None and _converts_experts(par.moe_fqns):
            torchao_float8.convert_grouped_experts(block.get_submodule("moe.experts"))
    if par.tp > 1:
        from torch.distributed.tensor.parallel import parallelize_module

        float8_tp = recipe is not None and recipe.name == "tensorwise"
        parallelize_module(block, mesh["tp"], _tp_plan(float8_tp=float8_tp, mlp=spec.mlp))
    inner = block
    if par.recompute is Recompute.FULL:
        block = Checkpointed(block)
    elif par.recompute is Recompute.SELECTIVE:
        gate = (spec.dim, spec.moe.experts) if spec.moe is not None else None
        block = Checkpointed(block, context_fn=sac_context(sac, gate))
    # fp32 master weights under FSDP (its mixed precision casts to bf16); bf16 without.
    block = block.to_empty(device="cpu").to(torch.float32 if par.fsdp_ranks > 1 else DTYPE)
    if initialize:
        with torch.no_grad():
            for p in block.parameters():
                local = p.to_local() if hasattr(p, "to_local") else p
                local.normal_(0.0, 0.02) if local.dim() > 1 else local.fill_(1.0)
            for buffer in block.buffers():  # an MoE's expert bias starts at zero
                buffer.zero_()
    shape = (spec.batch, spec.local_seq_len, spec.dim)
    make = torch.randn if initialize else torch.empty
    x = make(shape, dtype=DTYPE).requires_grad_()
    grad = make(shape, dtype=DTYPE)
    step = Step(inner, (x,), grad)
    module: nn.Module = torch.compile(block, fullgraph=True, dynamic=False, backend=backend(step))
    if par.fsdp_ranks > 1:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=DTYPE, reduce_dtype=torch.float32)
        dp = mesh["dp_shard"]
        fully_shard(module, mesh=dp, mp_policy=policy, reshard_after_forward=True)
        # A block is no FSDP root in torchtitan (the model is): as a non-root unit it frees
        # its weights after forward and all-gathers them again for backward.
        module = fully_shard(_Root(module), mesh=dp, mp_policy=policy)
    return _Built(
        module,
        inner,
        x,
        grad,
        mesh["tp"].get_group().group_name,
        mesh["dp_shard"].get_group().group_name,
    )


@contextlib.contextmanager
def built_block(
    spec: BlockSpec,
    recipe: str | None,
    recorder: _Recorder,
    where: str,
    *,
    inner: Callable[..., Any],
    initialize: bool,
    sac: SacPolicy | None = None,
    inductor_pass: contextlib.AbstractContextManager[Any] | None = None,
) -> Iterator[_Built]:
    """One rank's block built as torchtitan builds it, inside all its compile needs: the
    compile's error wording (`where`), torchao's Inductor patch and torchtitan's Inductor
    settings, an optional Inductor pass, the recorder, a fake world of the run's ranks. Every
    reader of a block enters it: `capture_block`, the async TP reader, memory/saved.py's saved tensors."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(compiling(where))
        # torchao's conversion patches Inductor's min/max codegen process-wide: undone on exit
        stack.enter_context(torchao_float8.inductor_patch_scope())
        stack.enter_context(
            torch._inductor.config.patch(torchtitan_inductor_settings(recipe, spec.parallel))
        )
        if inductor_pass is not None:
            stack.enter_context(inductor_pass)
        stack.enter_context(recording(recorder))
        stack.enter_context(fake_world(spec.parallel.world_size))
        yield _build(
            spec,
            _float8_recipe(recipe),
            backend=functools.partial(recorder.backend, inner=inner),
            initialize=initialize,
            sac=sac or sac_policy(),
        )


# ---- FSDP2's collectives, outside the graph ------------------------------------------------


@dataclass
class _EagerCollectives:
    """Collectives FSDP2 (and torchao's float8 all-gather) issue in eager hooks, per pass."""

    graph: str = "fwd"
    found: list[Collective] = field(default_factory=list)
    dtypes: list[tuple[tuple[torch.dtype, ...], tuple[int, ...]]] = field(default_factory=list)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        import torch.distributed as dist
        from torch.distributed.fsdp._fully_shard import _fsdp_collectives

        # FSDP2 calls all_gather_single / reduce_scatter_single from torch 2.13 on, the
        # *_into_tensor / *_tensor forms before (torch 2.11, the GPU machine's): patch the one
        # it calls, so each collective is recorded once.
        gather_name = _first_of(dist, "all_gather_single", "all_gather_into_tensor")
        scatter_name = _first_of(dist, "reduce_scatter_single", "reduce_scatter_tensor")
        all_gather, reduce_scatter = getattr(dist, gather_name), getattr(dist, scatter_name)
        metadatas = _fsdp_collectives._get_all_gather_input_metadatas

        def gather(output: torch.Tensor, input: torch.Tensor, **kw: Any) -> Any:
            self._all_gather(output, kw["group"])
            return all_gather(output, input, **kw)

        def scatter(output: torch.Tensor, input: torch.Tensor, **kw: Any) -> Any:
            name = "fsdp reduce-scatter"
            self._add(CollectiveKind.REDUCE_SCATTER, input, kw["group"], name)
            return reduce_scatter(output, input, **kw)

        def record_metadatas(inputs: Any) -> Any:
            dtypes, numels, dtype = metadatas(inputs)
            flat = [(t.dtype, t.numel()) for ts in inputs for t in ts]
            self.dtypes.append((tuple(d for d, _ in flat), tuple(n for _, n in flat)))
            return dtypes, numels, dtype

        def amax_reduce(tensor: torch.Tensor, op: str, group: Any) -> Any:
            # torchao's amax all-reduce of a float8 all-gather's scale (fsdp_pre_all_gather)
            self._add(CollectiveKind.ALL_REDUCE, tensor, _group_of(group), "fsdp amax")
            return all_reduce(tensor, op, group)

        patches = [
            (dist, gather_name, _positional(gather, "output_tensor", "input_tensor")),
            (dist, scatter_name, _positional(scatter, "output", "input")),
            (_fsdp_collectives, "_get_all_gather_input_metadatas", record_metadatas),
        ]
        if torchao_float8.available():  # bf16 blocks need no torchao
            float8_utils = importlib.import_module("torchao.float8.float8_utils")
            all_reduce = float8_utils.all_reduce
            patches.append((float8_utils, "all_reduce", amax_reduce))
        with contextlib.ExitStack() as stack:
            for target, name, value in patches:
                stack.enter_context(mock.patch.object(target, name, value))
            yield

    def _all_gather(self, output: torch.Tensor, group: Any) -> None:
        """One FSDP all-gather, split per dtype of the parameters it carries (float8 weights
        beside bf16 norm weights travel as one uint8 buffer)."""
        size = group.size()
        dtypes, numels = (
            self.dtypes.pop(0) if self.dtypes else ((output.dtype,), (output.numel() // size,))
        )
        by_dtype: dict[torch.dtype, int] = {}
        for dtype, numel in zip(dtypes, numels):
            by_dtype[dtype] = by_dtype.get(dtype, 0) + numel * dtype.itemsize * size
        for dtype, nbytes in by_dtype.items():
            self.found.append(
                Collective(
                    CollectiveKind.ALL_GATHER,
                    nbytes,
                    _dtype_name(dtype),
                    size,
                    self.graph,
                    mesh="dp_shard",
                    compiled=False,
                    name="fsdp all-gather",
                )
            )

    def _add(self, kind: CollectiveKind, full: torch.Tensor, group: Any, name: str) -> None:
        self.found.append(
            Collective(
                kind,
                full.numel() * full.element_size(),
                _dtype_name(full.dtype),
                group.size(),
                self.graph,
                mesh="dp_shard",
                compiled=False,
                name=name,
            )
        )


def _first_of(module: Any, *names: str) -> str:
    return next(name for name in names if hasattr(module, name))


def _positional(fn: Callable[..., Any], *names: str) -> Callable[..., Any]:
    """`fn(output, input, **rest)` however the caller names the first two (torch's own
    `all_gather_single(output_tensor, input_tensor)`, `reduce_scatter_single(output, input)`,
    and torch 2.11's `all_gather_into_tensor` and `reduce_scatter_tensor` alike)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        given = list(args) + [kwargs.pop(n) for n in names[len(args) :]]
        return fn(*given, **kwargs)

    return call


def _group_of(group: Any) -> Any:
    """A ProcessGroup from what torchao passes its functional all_reduce (a group or mesh)."""
    if hasattr(group, "get_group"):
        return group.get_group()
    if isinstance(group, str):
        from torch.distributed.distributed_c10d import _resolve_process_group

        return _resolve_process_group(group)
    return group


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- capture --------------------------------------------------------------------------------


def capture_block(
    spec: BlockSpec,
    *,
    recipe: str | None,
    device: str,
    gpu: GPU | None = None,
    sac: SacPolicy | None = None,
) -> BlockCapture:
    """Compile one rank's forward+backward of the block and read off its kernels, gemms and
    collectives. `recipe` None is bf16; otherwise tensorwise, rowwise or rowwise_gw_hp
    (torchao). `device`: "cpu" compiles and runs here, "codegen" generates the CUDA code for
    `gpu` (default h100) without running it. `sac`: the per-op policy of a selective
    block (default: torchtitan's current one)."""
    target = CaptureDevice(device)
    if target is CaptureDevice.CUDA:
        raise CaptureError("sharded blocks compile on a fake process group: use cpu or codegen")
    if spec.parallel.async_tp:
        # async TP runs the same kernels with its TP collectives decomposed beside their gemms:
        # the step prices that overlap; `pipelined_collectives` reads which ones fuse
        raise CaptureError(
            "async TP blocks are not compiled yet: their kernels are those without it "
            f"({term('async_tp')} lists its fused collectives)"
        )
    if spec.parallel.recompute is Recompute.FULL:
        # Tried on torch 2.13 (torch.utils.checkpoint of the whole block, and a selective
        # policy recomputing every op): with TP, AOTAutograd refuses to save the device mesh
        # the recomputed block needs ("expected all tensors_saved_with_vc_check to be
        # Tensors"); without TP, codegen meets the CUDA RNG state AOTAutograd functionalizes for
        # the checkpointed region, and a CPU compile under FSDP fails on a symbolic size.
        raise CaptureError(
            f"{term('recompute')} full does not compile here yet (torch 2.13 checkpointing a "
            "sharded block): use selective"
        )
    if spec.moe is not None:
        # what its graphs save and allocate is read (profiler/memory/); its kernels, grouped
        # gemms and collectives are not
        raise CaptureError(f"{spec.name or 'block'}: MoE blocks are not compiled yet")
    if (
        recipe is not None
        and target is CaptureDevice.CODEGEN
        and (gpu or find_gpu("h100")).fp8_dtype_family is Float8Family.FNUZ
    ):
        # torchao's float8 TP plan casts to its module-level e4m3fn, whatever the config says
        raise CaptureError(
            f"{(gpu or find_gpu('h100')).name} runs fnuz float8; sharded blocks compile OCP "
            f"float8 only (compare one linear: {term('shapes')})"
        )
    float8 = _float8_recipe(recipe)
    try:
        check_float8_all_gather(
            spec.parallel.float8_all_gather, [float8.name if float8 is not None else "bf16"]
        )
    except ModelError as e:
        raise CaptureError(e.marked) from None
    gpu = gpu or (find_gpu("h100") if target is CaptureDevice.CODEGEN else None)
    recorder = _Recorder()
    eager = _EagerCollectives()
    where = f"{spec.name or 'block'} {recipe or 'bf16'} on {target.value}"
    inner = (
        codegen_only.no_compute_inner if target is CaptureDevice.CODEGEN else _compile_fx_inner()
    )
    with built_block(
        spec, recipe, recorder, where, inner=inner, initialize=target is CaptureDevice.CPU, sac=sac
    ) as built:
        with eager.recording():
            _run(built, recorder, eager, codegen=target is CaptureDevice.CODEGEN, gpu=gpu)
        groups = {built.tp_group: ("tp", spec.parallel.tp)}
        groups[built.dp_group] = ("dp_shard", spec.parallel.fsdp_ranks)
    shape = (spec.tokens, spec.dim, spec.ffn_dim)
    capture = recorder.build(key=where, shape=shape, device=target)
    kernels, gemms, collectives = [], [], []
    for kind in (GraphKind.FWD, GraphKind.BWD):
        if kind not in recorder.code:
            continue
        parsed = parse_output_code(recorder.code[kind])
        launches = [k for k in capture.launches if k.graph is kind]
        forward_collectives = _recomputed_collectives(recorder, kind)
        recomputed_gemms = _recomputed_gemms(recorder, kind)
        gathered = _gathered_storage(parsed.collectives, parsed.storage)
        for launch in launches:
            if launch.is_gemm:
                gemm = _gemm(launch, recomputed=False)
                dims = (gemm.m, gemm.k, gemm.n)
                again = recomputed_gemms[dims] > 0
                recomputed_gemms[dims] -= again
                gemms.append(replace(gemm, recomputed=again))
            else:
                kernels.append(_kernel(launch, gathered, parsed.storage, float8=float8 is not None))
        # The k-th collective of an op in the code is the k-th of that op in the fx graph
        # (Inductor keeps collectives in graph order unless asked to reorder them).
        seen: dict[str, int] = {}
        for c in parsed.collectives:
            nth = seen[c.op] = seen.get(c.op, -1) + 1
            flags = [forward for op, forward in forward_collectives if op == c.op]
            recomputed = nth < len(flags) and flags[nth]
            collectives.append(
                _collective(c, kind, groups, launches, parsed.storage, recomputed=recomputed)
            )
    # FSDP2 all-gathers the weights in bf16 unless torchao's float8 all-gather is on: then each
    # float8 linear casts its gathered weight in the compiled graph.
    weights_cast = float8 is not None and not spec.parallel.float8_all_gather
    collectives += [
        replace(c, feeds_cast=True) if weights_cast and c.kind is CollectiveKind.ALL_GATHER else c
        for c in eager.found
    ]
    return BlockCapture(
        spec=spec,
        recipe=recipe,
        device=target.value,
        kernels=tuple(kernels),
        gemms=tuple(gemms),
        collectives=tuple(collectives),
        gpu=gpu.name if gpu else None,
        disagreements=capture.disagreements(),
    )


def _float8_recipe(recipe: str | None) -> Recipe | None:
    """The torchao recipe to convert the block with (None: bf16), or one CaptureError line."""
    try:
        float8 = Recipe.from_name(recipe) if recipe is not None else None
        if float8 is not None:
            torchao_recipe_name(float8)
    except ModelError as e:
        raise CaptureError(e.marked) from None
    return float8


def pipelined_collectives(
    spec: BlockSpec,
    *,
    recipe: str | None,
    gpu: GPU | None = None,
    sac: SacPolicy | None = None,
) -> tuple[PipelinedCollective, ...]:
    """Compile one rank's forward+backward of the block with async TP (codegen for `gpu`,
    default h100) and read off which TP collectives Inductor's micro-pipeline pass fused with
    which gemms (torch/_inductor/fx_passes/micro_pipeline_tp.py): every all-gather and
    reduce-scatter of the graphs after the pass, fused or left plain, in graph order.

    torchtitan's async TP turns the pass on and enables symmetric memory on the TP group; a
    fake process group has none, so here the group is declared enabled and the pass's
    restride of a shard keeps its layout (`_same_layout`, `_restride`): codegen only,
    nothing runs."""
    if spec.parallel.tp < 2:
        raise CaptureError(f"async TP needs {term('tp')} 2 or more")
    if spec.parallel.recompute is Recompute.FULL:
        raise CaptureError(
            f"{term('recompute')} full does not compile here yet (torch 2.13 checkpointing a "
            "sharded block): use selective"
        )
    gpu = gpu or find_gpu("h100")
    recorder = _Recorder()
    found: list[PipelinedCollective] = []
    read = functools.partial(_read_pipelined, recorder=recorder, tp=spec.parallel.tp, found=found)
    with built_block(
        spec,
        recipe,
        recorder,
        f"{spec.name or 'block'} {recipe or 'bf16'} async TP on codegen",
        inner=codegen_only.no_compute_inner,
        initialize=False,
        sac=sac,
        inductor_pass=_micro_pipeline_tp(read),
    ) as built:
        eager = _EagerCollectives()
        with eager.recording():
            _run(built, recorder, eager, codegen=True, gpu=gpu)
    return tuple(found)


@torch.library.custom_op("f8roof::restride", mutates_args=())
def _restride(x: torch.Tensor, stride: Sequence[int]) -> torch.Tensor:
    """Stands in for the pass's `force_stride_order` of a shard: that prim finds its output's
    shape by copying the tensor, which a fake CUDA tensor cannot be on a CPU build; this op
    has a shape-only fake."""
    return torch.empty_strided(x.shape, tuple(stride), dtype=x.dtype, device=x.device).copy_(x)


@_restride.register_fake
def _(x: torch.Tensor, stride: Sequence[int]) -> torch.Tensor:
    return x.new_empty_strided(x.shape, tuple(stride))


@contextlib.contextmanager
def _micro_pipeline_tp(read: Callable[[torch.fx.Graph], None]) -> Iterator[None]:
    from types import SimpleNamespace

    import torch.distributed._symmetric_memory as symm_mem
    from torch._inductor.fx_passes import micro_pipeline_tp

    prims = SimpleNamespace(force_stride_order=torch.ops.f8roof.restride.default)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch("torch.distributed.is_nccl_available", return_value=True))
        stack.enter_context(
            mock.patch.object(symm_mem, "is_symm_mem_enabled_for_group", return_value=True)
        )
        stack.enter_context(mock.patch.object(micro_pipeline_tp, "inductor_prims", prims))
        for name in (
            "restride_A_shard_for_fused_all_gather_matmul",
            "restride_A_for_fused_matmul_reduce_scatter",
        ):
            stack.enter_context(mock.patch.object(symm_mem, name, _same_layout))
        stack.enter_context(
            torch._inductor.config.patch(_micro_pipeline_tp=True, post_grad_custom_post_pass=read)
        )
        yield


def _same_layout(shard: torch.Tensor, dim: int) -> torch.Tensor:
    """The pass's layout for a decomposed shard, kept as it is: torch computes it by copying
    the shard (not possible here, as for `_restride`), and no fusion depends on it."""
    return shard


_FUSED_GATHERS = ("fused_all_gather_matmul", "fused_all_gather_scaled_matmul")
_FUSED_SCATTERS = ("fused_matmul_reduce_scatter", "fused_scaled_matmul_reduce_scatter")


def _read_pipelined(
    graph: torch.fx.Graph, *, recorder: _Recorder, tp: int, found: list[PipelinedCollective]
) -> None:
    """Each TP all-gather and reduce-scatter of a post-grad graph after the pass, appended to
    `found` (FSDP2's collectives run outside the compiled graph; all-reduces are amaxes)."""
    where = recorder.current.kind.value if recorder.current is not None else "fwd"

    def val(node: Any) -> torch.Tensor:
        # the pass's own nodes (the restride before a fused op) get values after the passes
        return node.meta["val"] if "val" in node.meta else val(node.args[0])

    for node in graph.nodes:
        op = str(getattr(node.target, "_opname", ""))
        if op in _FUSED_GATHERS:
            shard, dim = val(node.args[0]), int(node.args[2])
            shape = list(shard.shape)
            shape[dim] *= tp
            m = math.prod(shape[:-1])
            gemms = tuple((m, shape[-1], int(val(w).shape[-1])) for w in node.args[1])
            nbytes = math.prod(shape) * shard.element_size()
            found.append(PipelinedCollective(CollectiveKind.ALL_GATHER, where, nbytes, gemms))
        elif op in _FUSED_SCATTERS:
            a, b = val(node.args[0]), val(node.args[1])
            gemm = (math.prod(a.shape[:-1]), int(a.shape[-1]), int(b.shape[-1]))
            # the gemm's output, reduce-scattered: bf16 (a float8 gemm's out_dtype too)
            nbytes = gemm[0] * gemm[2] * max(a.element_size(), 2)
            found.append(PipelinedCollective(CollectiveKind.REDUCE_SCATTER, where, nbytes, (gemm,)))
        elif op == CollectiveKind.ALL_GATHER.value:
            nbytes = val(node.args[0]).nbytes * int(node.args[1])
            found.append(PipelinedCollective(CollectiveKind.ALL_GATHER, where, nbytes))
        elif op == CollectiveKind.REDUCE_SCATTER.value:
            nbytes = val(node.args[0]).nbytes
            found.append(PipelinedCollective(CollectiveKind.REDUCE_SCATTER, where, nbytes))


def torchtitan_inductor_settings(recipe: str | None, run: RunConfig) -> dict[str, Any]:
    """What torchtitan's float8 converter sets in Inductor for `recipe`: emulate_precision_casts
    for rowwise (`RunConfig.emulate_precision_casts`). It rounds each bf16 intermediate of a
    fused kernel (a conversion pair per element) and adds a full-size buffer to the backward
    kernel that casts the norm's output (+4MK bytes rowwise): the training runs' blocks are
    compiled with it, the per-layer linears (torchao's benchmark) without."""
    return {"emulate_precision_casts": True} if run.emulates_precision_casts(recipe) else {}


def _compile_fx_inner() -> Callable[..., Any]:
    from torch._inductor.compile_fx import compile_fx_inner

    return compile_fx_inner


def _run(
    built: _Built,
    recorder: _Recorder,
    eager: _EagerCollectives,
    *,
    codegen: bool,
    gpu: GPU | None,
) -> None:
    def step() -> None:
        eager.graph = "fwd"
        out = built.module(built.x)
        eager.graph = "bwd"
        out.backward(built.grad)

    if codegen:
        step()
        for graph in recorder.graphs:
            with recorder.compiling(graph):
                recorder.code[graph.kind] = codegen_only.generate_cuda_code(
                    graph.module, graph.example_inputs, graph.compile_kwargs, gpu=gpu
                )
        return
    from torch._inductor.utils import run_and_get_code

    _, sources = run_and_get_code(step)
    if len(sources) != len(recorder.graphs):
        raise CaptureError(f"got {len(sources)} output codes for {len(recorder.graphs)} graphs")
    for graph, source in zip(recorder.graphs, sources):
        recorder.code[graph.kind] = source


def _recomputed_collectives(recorder: _Recorder, kind: GraphKind) -> list[tuple[str, bool]]:
    """Per functional collective of the graph's fx nodes, in order: (op, a forward op)."""
    if kind is not GraphKind.BWD:
        return []
    graph = next(g for g in recorder.graphs if g.kind is kind)
    out = []
    for node in graph.module.graph.nodes:
        target = str(getattr(node.target, "overloadpacket", ""))
        if target.startswith("_c10d_functional.") and not target.endswith("wait_tensor"):
            op = target.split(".", 1)[1].removesuffix("_")
            out.append((op, node.meta.get("partitioner_tag") == "is_forward"))
    return out


def _recomputed_gemms(recorder: _Recorder, kind: GraphKind) -> Counter[tuple[Any, ...]]:
    """(M, K, N) of the forward gemms a backward graph holds (recomputed), counted.

    By dims, not by the launch's own ops: Inductor credits an extern gemm's launch with the
    ops it realized around it (a layout copy), not always with the gemm node; and not by the
    launch's operands, which may not list a view of an all-gathered input."""
    found: Counter[tuple[Any, ...]] = Counter()
    if kind is not GraphKind.BWD:
        return found
    graph = next(g for g in recorder.graphs if g.kind is kind)
    for node in graph.module.graph.nodes:
        target = str(getattr(node.target, "overloadpacket", ""))
        if target in GEMM_TARGETS and node.meta.get("partitioner_tag") == "is_forward":
            a, b = (n.meta["val"] for n in node.args[:2])
            found[(int(torch.Size(a.shape[:-1]).numel()), int(a.shape[-1]), int(b.shape[-1]))] += 1
    return found


def _gathered_storage(
    collectives: Sequence[ParsedCollective], storage: dict[str, str] | Any
) -> set[str]:
    return {
        storage.get(c.output.name, c.output.name)
        for c in collectives
        if c.op == CollectiveKind.ALL_GATHER.value
    }


def _reads_storage(launch: KernelLaunch, storages: set[str], storage: Any) -> bool:
    return any(storage.get(b.name, b.name) in storages for b in launch.reads)


# Ops a linear's module runs around a collective that are no float8 work: the concat/split of
# a row-parallel output before its reduce-scatter (DTensor's redistribute).
_MOVEMENT = frozenset({"aten.cat", "aten.split", "aten.split_with_sizes", "aten.clone"})


def _work(launch: KernelLaunch, *, float8: bool) -> Work:
    """float8 (only the linears' own ops), fused (theirs and the block's), or context. Unlike
    a standalone linear's capture, a kernel of ops of no known module is the block's; bf16
    has no float8 work, and moving a row-parallel output for its reduce-scatter is none."""
    work = [o for o in launch.ops if o.is_work]
    linear = float8 and any(o.linear and o.op not in _MOVEMENT for o in work)
    if any(not o.linear for o in work):
        return Work.FUSED if linear else Work.CONTEXT
    return Work.FLOAT8 if linear else Work.CONTEXT


def _kernel(launch: KernelLaunch, gathered: set[str], storage: Any, *, float8: bool) -> BlockKernel:
    work = _work(launch, float8=float8)
    return BlockKernel(
        name=launch.name,
        graph=launch.graph.value,
        kind=launch.kind.value,
        bytes_read=launch.bytes_read,
        bytes_written=launch.bytes_written,
        work=work.value,
        float8_steps=launch.float8_steps if work is not Work.CONTEXT else (),
        recomputed=launch.recomputed,
        after_all_gather=_reads_storage(launch, gathered, storage),
        kernel_class=None if launch.kernel_class is None else launch.kernel_class.value,
        scattered_elements=launch.scattered_elements,
        bytes_reread=launch.bytes_reread,
        arithmetic=launch.arithmetic,
    )


def _gemm(launch: KernelLaunch, *, recomputed: bool) -> BlockGemm:
    """M and N from the output (batch dims folded into M); K from the operand a (M, K), or
    from b (K, N) alone where the code hands a in a form the reads do not list (a view of an
    all-gathered float8 tensor): then b is the read matrix whose last dim is N."""
    out = launch.writes[0].shape
    m, n = int(torch.Size(out[:-1]).numel()), out[-1]
    matrices = [r for r in launch.reads if len(r.shape) >= 2]
    if not matrices:
        raise CaptureError(f"{launch.name}: a gemm without matrix operands in the code")
    first = matrices[0]
    if len(matrices) > 1 or first.shape[-1] != n:
        k = first.shape[-1]
    else:
        k = first.shape[-2]
    op = launch.name.split(".")[-2] if launch.name.startswith("torch.ops") else launch.name
    return BlockGemm(
        name=launch.name,
        graph=launch.graph.value,
        op=op.removeprefix("extern_kernels."),
        m=m,
        k=k,
        n=n,
        dtype=first.dtype,
        bytes=launch.bytes_total,
        recomputed=recomputed,
        kernel_class=None if launch.kernel_class is None else launch.kernel_class.value,
    )


def _collective(
    parsed: ParsedCollective,
    kind: GraphKind,
    groups: dict[str, tuple[str, int]],
    launches: Sequence[KernelLaunch],
    storage: Any,
    *,
    recomputed: bool,
) -> Collective:
    mesh, size = groups.get(parsed.group, ("?", parsed.group_size or 1))
    op = CollectiveKind(parsed.op)
    full = parsed.input if op is CollectiveKind.REDUCE_SCATTER else parsed.output
    # A float8 cast reading a high-precision all-gathered tensor. An all-gather of float8
    # (torchao's float8 TP) was cast before it, on the shard, where the cast can fuse into the
    # norm; what reads it afterwards is a layout copy.
    out = storage.get(parsed.output.name, parsed.output.name)
    consumers = [k for k in launches[parsed.after :] if _reads_storage(k, {out}, storage)]
    high_precision = not parsed.output.dtype.startswith("float8")
    feeds_cast = (
        op is CollectiveKind.ALL_GATHER
        and high_precision
        and any(any(s.startswith("cast") for s in k.float8_steps) for k in consumers)
    )
    return Collective(
        kind=op,
        bytes=full.nbytes,
        dtype=parsed.output.dtype,
        group_size=size,
        graph=kind.value,
        feeds_cast=feeds_cast,
        mesh=mesh,
        compiled=True,
        recomputed=recomputed,
        name=parsed.op,
    )
