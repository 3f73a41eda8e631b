"""One transformer block compiled as a rank of a sharded run: the specs, the
collective parser, and small-dim compiles on a fake process group (TP 2, FSDP 2, CPU and
codegen for h100).

Collective bytes are nccl-tests' size (training/block.py): the full tensor, i.e. an all-gather's
output, a reduce-scatter's input. With sequence parallel, the norm output all-gathered before
q/k/v (and before w1/w3) is the (batch, seq_len, dim) activation DTensor says, in bf16 (or
float8 for torchao's float8 TP); each rank sends (tp-1)/tp of it in a ring.
"""

from __future__ import annotations

import re

import pytest
import requires

from f8roof.errors import F8RoofError, ModelError
from f8roof.training.block import (
    BlockCapture,
    BlockSpec,
    Collective,
    CollectiveKind,
    Recompute,
)
from f8roof.training.run_config import RunConfig

AG, RS, AR = CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_REDUCE
SMALL = {
    "dim": 64,
    "n_heads": 2,
    "n_kv_heads": 2,
    "head_dim": 32,
    "ffn_dim": 128,
    "tokens": 32,
    "seq_len": 32,
}


def small(**parallel: object) -> BlockSpec:
    return BlockSpec.small(parallel=RunConfig.sharded(**parallel), **SMALL)  # type: ignore[arg-type]


def linear_weight_numel(spec: BlockSpec) -> int:
    """Elements of one TP rank's linear weights: q/k/v/o and the three MLP matrices."""
    attention = 2 * spec.q_dim + 2 * spec.kv_dim
    return spec.dim * (attention + 3 * spec.ffn_dim) // spec.parallel.tp


# ---- specs (no torch) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallel", "message"),
    [
        ({"tp": 4}, "^tp 4 does not divide n_heads 2"),
        ({"tp": 0}, "tp must be a positive integer"),
    ],
)
def test_bad_degrees_raise_one_line(parallel: dict, message: str) -> None:
    with pytest.raises(ModelError, match=message) as error:
        small(**parallel)
    assert "\n" not in str(error.value)


def test_tp_must_divide_kv_heads() -> None:
    with pytest.raises(ModelError, match=r"^tp 16 does not divide n_kv_heads 8$"):
        BlockSpec(
            dim=4096, n_heads=32, n_kv_heads=8, head_dim=128, ffn_dim=14336,
            tokens=8192, seq_len=8192, parallel=RunConfig.sharded(tp=16),
        )  # fmt: skip


def test_recompute_takes_members_only() -> None:
    with pytest.raises(ModelError, match="recompute must be one of none, full, selective"):
        RunConfig.sharded(recompute="sometimes")  # type: ignore[arg-type]


def test_llama3_8b_block_from_the_catalog() -> None:
    from f8roof.engine.sharded import block_spec
    from f8roof.training.catalog import builtin

    spec = block_spec(builtin("llama3-8b"), tokens=8192, parallel=RunConfig.sharded(tp=2))
    assert (spec.dim, spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.ffn_dim) == (
        4096, 32, 8, 128, 14336,
    )  # fmt: skip
    assert spec.local_seq_len == 4096
    with pytest.raises(F8RoofError, match="^llama3-8b: tp 16 does not divide n_kv_heads 8"):
        block_spec(builtin("llama3-8b"), tokens=8192, parallel=RunConfig.sharded(tp=16))


def test_ring_bytes() -> None:
    gather = Collective(AG, bytes=1000, dtype="bfloat16", group_size=4, graph="fwd")
    reduce = Collective(AR, bytes=1000, dtype="float32", group_size=4, graph="bwd")
    assert gather.ring_bytes_per_rank == pytest.approx(750)
    assert reduce.ring_bytes_per_rank == pytest.approx(1500)


def synthetic_capture() -> BlockCapture:
    from f8roof.training.block import BlockGemm, BlockKernel

    spec = small(tp=2, recompute=Recompute.SELECTIVE)
    return BlockCapture(
        spec=spec,
        recipe="rowwise",
        device="codegen",
        gpu="h100",
        kernels=(
            BlockKernel("k0", "fwd", "reduction", 100, 50, "fused", ("amax",)),
            BlockKernel("k1", "bwd", "pointwise", 10, 20, "context", recomputed=True),
        ),
        gemms=(
            BlockGemm("g0", "fwd", "_scaled_mm", 8, 16, 32, "float8_e4m3fn", 900),
            BlockGemm("g1", "bwd", "_scaled_mm", 8, 16, 32, "float8_e4m3fn", 900, True),
        ),
        collectives=(
            Collective(AG, 64, "bfloat16", 2, "fwd", feeds_cast=True),
            Collective(AG, 64, "bfloat16", 2, "fwd"),
            Collective(RS, 256, "float32", 2, "bwd", mesh="dp_shard", compiled=False),
        ),
    )


def test_capture_times_keeps_the_forwards_output_gemm_apart() -> None:
    # full AC reruns the forward graph but its last gemm (the block's output projection)
    from dataclasses import replace

    from f8roof.engine.resolve import Request, resolve
    from f8roof.engine.sharded import capture_times
    from f8roof.timing.gemm import GemmRole
    from f8roof.training.block import BlockGemm

    resolved = resolve(Request(gpu="h100", recipes="rowwise"))
    gemm_model = resolved.config.gemm_model
    capture = synthetic_capture()
    last = BlockGemm("w2", "fwd", "_scaled_mm", 64, 128, 32, "float8_e4m3fn", 900)
    longer = replace(capture, gemms=(*capture.gemms, last))
    assert resolved.calibration is not None
    times = capture_times(longer, calibration=resolved.calibration, gemm_model=gemm_model)
    expected, _ = gemm_model.time_s("fp8_rowwise", GemmRole.OUTPUT, 64, 128, 32, slow_accum=None)
    assert times.output_gemm_s == pytest.approx(float(expected)) and times.output_gemm_s > 0
    assert times.output_gemm_s < times.fwd_s


def test_capture_round_trips_and_totals() -> None:
    import json

    got = synthetic_capture()
    assert BlockCapture.from_dict(json.loads(json.dumps(got.to_dict()))) == got
    fwd, bwd = got.totals("fwd"), got.totals("bwd")
    assert (fwd.kernel_bytes, fwd.float8_kernel_bytes, fwd.gemm_flops) == (150, 150, 8192)
    assert fwd.collective_bytes == (("all_gather_into_tensor", "bfloat16", "tp", 128),)
    assert (bwd.recomputed_kernel_bytes, bwd.recomputed_gemm_flops) == (30, 8192)
    assert got.recomputed == ("bwd k1", "bwd g1")
    with pytest.raises(ModelError, match="not a block capture"):
        BlockCapture.from_dict({"spec": {}})


# ---- the parser (no compile) ----------------------------------------------------------------

WRAPPER = """
class Runner:
    def call(self, args):
        primals_1, primals_2 = args
        args.clear()
        buf0 = torch.ops._c10d_functional.all_gather_into_tensor.default(primals_1, 2, '3')
        assert_size_stride(buf0, (2, 32, 128), (4096, 128, 1), 'x')
        torch.ops._c10d_functional.wait_tensor.default(buf0)
        buf1 = empty_strided_cpu((64, 64), (64, 1), torch.bfloat16)
        extern_kernels.mm(reinterpret_tensor(buf0, (64, 128), (128, 1), 0), primals_2, out=buf1)
        buf2 = torch.ops._c10d_functional.reduce_scatter_tensor.default(buf1, 'sum', 2, '3')
        torch.ops._c10d_functional.all_reduce_.default(buf2, 'max', '3')
        return (buf2, )

def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((1, 32, 128), (4096, 128, 1), device='cpu', dtype=torch.bfloat16)
    primals_2 = rand_strided((128, 64), (64, 1), device='cpu', dtype=torch.bfloat16)
    return [primals_1, primals_2]
"""


def test_parser_keeps_collectives_apart_from_launches() -> None:
    from f8roof.profiler.triton_code import parse_output_code

    code = parse_output_code(WRAPPER)
    assert [launch.name for launch in code.launches] == ["extern_kernels.mm"]
    assert code.launches[0].reads[0].name == "buf0"  # the gathered tensor counts as data
    ops = [(c.op, c.output.shape, c.group_size, c.after) for c in code.collectives]
    assert ops == [
        ("all_gather_into_tensor", (2, 32, 128), 2, 0),
        ("reduce_scatter_tensor", (32, 64), 2, 1),
        ("all_reduce", (32, 64), None, 1),
    ]


# ---- compiles (fake process group, small dims) ----------------------------------------------


def capture(spec: BlockSpec, recipe: str | None, device: str = "cpu") -> BlockCapture:
    from f8roof.profiler.block import capture_block

    return capture_block(spec, recipe=recipe, device=device)


def activation_bytes(spec: BlockSpec, itemsize: int) -> int:
    """The SP activation as DTensor sees it: a (batch, seq_len / tp, dim) shard per rank of a
    (batch, seq_len, dim) tensor, whose full size the all-gather returns."""
    import torch
    from torch.distributed.tensor import DTensor, Shard

    from f8roof.profiler.block import MESH_DIMS, fake_world

    with fake_world(spec.parallel.world_size):
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(
            "cpu", (spec.parallel.fsdp_ranks, spec.parallel.tp), mesh_dim_names=MESH_DIMS
        )
        local = torch.empty(spec.batch, spec.local_seq_len, spec.dim)
        full = DTensor.from_local(local, mesh["tp"], [Shard(1)]).shape
    return full.numel() * itemsize


@pytest.mark.slow
def test_bf16_tp_sequence_parallel_collectives() -> None:
    spec = small(tp=2)
    got = capture(spec, None)
    expected = activation_bytes(spec, 2)
    assert expected == spec.tokens * spec.dim * 2
    for graph in ("fwd", "bwd"):
        # attention and MLP: one all-gather in, one reduce-scatter out, per pass
        gathers = got.collectives_of(AG, graph=graph, mesh="tp")
        scatters = got.collectives_of(RS, graph=graph, mesh="tp")
        assert [c.bytes for c in gathers] == [expected, expected]
        assert [c.bytes for c in scatters] == [expected, expected]
        assert {c.dtype for c in (*gathers, *scatters)} == {"bfloat16"}
        assert all(c.group_size == 2 and c.compiled for c in (*gathers, *scatters))
    assert {g.op for g in got.gemms} == {"mm"}
    assert len(got.gemms) == 7 * 3  # seven linears, three gemms each
    assert not any(g.recomputed for g in got.gemms)


@pytest.mark.slow
@requires.torchao
def test_tensorwise_float8_all_gather_moves_float8_weights() -> None:
    spec = small(tp=2, fsdp=2, float8_all_gather=True)
    got = capture(spec, "tensorwise")
    assert {g.op for g in got.gemms} == {"_scaled_mm"}
    # torchao's float8 TP all-gathers the norm output already cast (e4m3) in forward
    tp_gathers = got.collectives_of(AG, graph="fwd", mesh="tp")
    assert [c.dtype for c in tp_gathers] == ["float8_e4m3fn"] * 2
    assert not any(c.feeds_cast for c in tp_gathers)  # cast before, on the shard
    assert [c.bytes for c in tp_gathers] == [activation_bytes(spec, 1)] * 2
    # FSDP2: weights in float8 (1 byte each), norms' weights in bf16, forward and backward
    weights = linear_weight_numel(spec)
    for graph in ("fwd", "bwd"):
        fsdp = got.collectives_of(AG, graph=graph, mesh="dp_shard")
        by_dtype = {c.dtype: c.bytes for c in fsdp}
        assert not any(c.feeds_cast for c in fsdp)  # cast before the all-gather, on the shard
        assert by_dtype == {"float8_e4m3fn": weights, "bfloat16": 2 * spec.dim * 2}
    # gradients reduce-scattered in fp32 (torchtitan's reduce dtype), every parameter
    (grads,) = got.collectives_of(RS, mesh="dp_shard")
    assert grads.bytes == (weights + 2 * spec.dim) * 4
    # the float8 scales' amax reduction of each all-gathered weight
    assert got.collectives_of(AR, mesh="dp_shard")


@pytest.mark.slow
def test_selective_recompute_shows_in_backward() -> None:
    got = capture(small(tp=2, recompute=Recompute.SELECTIVE), None)
    recomputed = [g for g in got.gemms if g.recomputed]
    assert recomputed and all(g.graph == "bwd" for g in recomputed)
    # every second gemm is recomputed: fewer than the seven forward gemms, at least one
    assert 1 <= len(recomputed) < 7
    # the all-gathers before q/k/v and w1/w3 are not saved: gathered again in backward
    assert [c.recomputed for c in got.collectives_of(AG, graph="bwd")].count(True) == 2
    assert any(name.startswith("bwd ") for name in got.recomputed)


@pytest.mark.slow
@requires.torchao
def test_codegen_rowwise_cast_after_all_gather() -> None:
    spec = small(tp=2)
    got = capture(spec, "rowwise", device="codegen")
    assert got.gpu is not None and got.gpu.startswith("h100")
    assert any(k.kind.startswith(("pointwise", "reduction", "persistent")) for k in got.kernels)
    gathers = got.collectives_of(AG, graph="fwd", mesh="tp")
    # rowwise all-gathers bf16 and casts afterwards: the cast cannot fuse into the norm
    assert [c.dtype for c in gathers] == ["bfloat16", "bfloat16"]
    assert all(c.feeds_cast for c in gathers)
    assert got.casts_after_all_gather
    assert {g.op for g in got.gemms} == {"_scaled_mm"}
    # Every Triton kernel's bytes: the code's count and the scheduler's agree.
    counts = [re.search(r"code (\d+), scheduler (\d+)", line) for line in got.disagreements]
    triton = [m for m, line in zip(counts, got.disagreements) if m and " triton_" in line]
    assert all(m.group(1) == m.group(2) for m in triton)


@pytest.mark.slow
@requires.torchao
def test_rowwise_without_emulated_casts_runs_fewer_conversions() -> None:
    """torchtitan's rowwise blocks since 2025-04-16 round every bf16 intermediate as eager
    does (emulate_precision_casts); one from before leaves them in float32. The same gemms and
    collectives, less arithmetic, no more bytes; the flag survives the capture's JSON."""
    from f8roof.training.block import BlockCapture

    emulated = capture(small(tp=2), "rowwise", device="codegen")
    plain = capture(small(tp=2, emulate_precision_casts=False), "rowwise", device="codegen")
    assert sorted(map(repr, plain.gemms)) == sorted(map(repr, emulated.gemms))  # order may differ
    assert plain.collectives == emulated.collectives
    arithmetic = [sum(k.arithmetic for k in c.kernels) for c in (plain, emulated)]
    assert arithmetic[0] < arithmetic[1]
    assert sum(k.bytes_total for k in plain.kernels) <= sum(k.bytes_total for k in emulated.kernels)
    again = BlockCapture.from_dict(plain.to_dict())
    assert not again.spec.parallel.emulates_precision_casts("rowwise")


# ---- the command line -----------------------------------------------------------------------


def tiny_config(tmp_path) -> str:
    """A llama config.json of the small block's dims (one layer)."""
    import json

    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 256,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_cli_block_bad_degree_is_one_line(cli, tmp_path) -> None:

    args = ["compare", "--model", tiny_config(tmp_path), "--tokens", "32", "--tp", "4"]
    result = cli(*args)
    assert result.exit_code == 2
    assert "--tp 4 does not divide n_heads 2" in result.output
    assert "Traceback" not in result.output


def test_cli_block_needs_tokens(cli, tmp_path) -> None:

    result = cli("compare", "--model", tiny_config(tmp_path))
    assert result.exit_code == 2
    assert "--model needs --tokens" in result.output


@pytest.mark.slow
@requires.torchao
def test_cli_block_codegen_lists_passes_and_collectives(cli, tmp_path) -> None:

    args = ["compare", "--model", tiny_config(tmp_path), "--tokens", "32", "--tp", "2"]
    args += ["--recipe", "rowwise", "--device", "codegen", "--recompute", "selective"]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "forward:" in text and "backward:" in text
    assert "all_gather_into_tensor" in text and "reduce_scatter_tensor" in text
    assert "_scaled_mm" in text and "mm " in text  # float8 beside bf16
    assert "cast after it" in text  # rowwise all-gathers bf16, casts afterwards
    assert "not fused into the norm): 0" not in text
    assert "[recomputed]" in text


@pytest.mark.parametrize(
    ("parallel", "recipe", "message"),
    [
        ({"tp": 2, "recompute": Recompute.FULL}, None, "^recompute full does not compile"),
        ({"tp": 2, "async_tp": True}, None, "async TP blocks are not compiled yet"),
        (
            {"fsdp": 2, "float8_all_gather": True},
            "rowwise",
            "^float8_all_gather needs recipe tensorwise",
        ),
        ({"tp": 2}, "nonsense", "nonsense"),
    ],
)
def test_what_does_not_compile_says_so_in_one_line(parallel, recipe, message) -> None:
    from f8roof.profiler.capture import CaptureError

    with pytest.raises(CaptureError, match=message) as error:
        capture(small(**parallel), recipe)
    assert "\n" not in str(error.value)


def test_renderer_lists_per_pass_and_json_reads_back() -> None:
    import json
    from dataclasses import replace

    from f8roof.engine.sharded import BlockComparison
    from f8roof.renderers.block import block_to_json, render_block_text

    float8 = synthetic_capture()
    bf16 = replace(float8, recipe=None, kernels=(), gemms=())
    text = render_block_text(BlockComparison(bf16, float8))
    forward, backward = text.split("backward:")
    assert "bf16: 0 kernels" in forward and "rowwise: 1 kernels" in forward
    assert "(graph; cast after it)" in forward
    assert "reduce_scatter_tensor    dp_shard x2 float32" in backward
    assert "(FSDP hook)" in backward and "[recomputed]" in backward
    data = json.loads(block_to_json(BlockComparison(bf16, float8)))
    assert BlockCapture.from_dict(data["float8"]) == float8
    assert data["float8"]["totals"]["bwd"]["recomputed_gemm_flops"] == 8192
    assert "async_tp" not in data and "async TP" not in text


def test_renderer_lists_async_tp_collectives_fused_or_plain() -> None:
    import json
    from dataclasses import replace

    from f8roof.engine.sharded import BlockComparison
    from f8roof.renderers.block import block_to_json, render_block_text
    from f8roof.training.block import PipelinedCollective

    float8 = synthetic_capture()
    bf16 = replace(float8, recipe=None)
    fused = PipelinedCollective(AG, "fwd", 4096, ((64, 32, 16), (64, 32, 8)))
    plain = PipelinedCollective(RS, "bwd", 4096)
    compared = BlockComparison(bf16, float8, pipelined=((fused, plain), (plain,)))
    text = render_block_text(compared).split("async TP")[1]
    assert "bf16: 1 of 2 TP collectives run beside gemms" in text
    assert "fwd all_gather_into_tensor" in text and "64x32x16, 64x32x8" in text
    assert "rowwise: 0 of 1" in text and text.rstrip().endswith("plain")
    data = json.loads(block_to_json(compared))["async_tp"]
    assert data["bf16"][0] == {
        "kind": "all_gather_into_tensor",
        "graph": "fwd",
        "bytes": 4096,
        "gemms": [[64, 32, 16], [64, 32, 8]],
    }
    assert data["float8"][0]["gemms"] == []


@pytest.mark.slow
@requires.torchao
def test_estimate_model_codegen_compiles_the_block(cli, tmp_path):
    """estimate --model --overhead codegen: the step's blocks timed from the block compiled as
    one rank (TP 2 x FSDP 2, selective), the per-layer fits' answer beside it."""

    config = tiny_config(tmp_path)
    args = [
        "estimate",
        "--model",
        config,
        "--tokens",
        "64",
        "--tp",
        "2",
        "--fsdp",
        "2",
        "--show-all",
    ]
    result = cli(*args, "--recompute", "selective", "--recipe", "rowwise", "--overhead", "codegen")
    assert result.exit_code == 0, result.output
    assert re.search(
        r"blocks from one block compiled for .* TP 2, FSDP 2, recompute selective, rowwise, "
        r"with emulate_precision_casts at "
        r"1 x 64 tokens per rank .*codegen for h100",
        result.output,
    )
    casts = int(
        re.search(r"float8 block: (\d+) float8 casts read an all-gathered", result.output)[1]
    )
    assert casts > 0  # sequence parallelism: the casts sit after the all-gather
    # the step converts every linear as torchtitan does, timed from the graphs; f8roof keeps
    # them all in bf16 at 64 tokens, so its decisions' step is the bf16 block's: x1.000
    step = re.search(r"step as torchtitan converts it .*: x(\d\.\d{3})", result.output)[1]
    fits = re.search(r"step per-layer fits alone .*: x(\d\.\d{3})", result.output)[1]
    assert step != fits
    assert re.search(r"step with f8roof's choice .*: x1\.000", result.output)


@pytest.mark.slow
@requires.torchao
def test_both_torchtitan_policies_decide_a_llama_block_alike():
    """Under compile a float8 linear reaches SAC as aten.mm, so torchtitan's 2025-05 list
    (no _scaled_mm) and 0.3.0's (with it) save and recompute the same ops of a llama block."""
    from f8roof.profiler.block import capture_block
    from f8roof.training.checkpointing import SAC_POLICIES

    spec = BlockSpec.small(
        parallel=RunConfig.sharded(tp=2, recompute=Recompute.SELECTIVE), tokens=256, seq_len=256
    )
    old, new = (
        capture_block(spec, recipe="rowwise", device="codegen", sac=SAC_POLICIES[name])
        for name in ("torchtitan-2025-05", "torchtitan-0.3.0")
    )
    assert old == new and old.recomputed


@pytest.mark.slow
def test_full_ac_under_compile_reruns_every_forward_gemm_but_the_output_projection() -> None:
    # the fact the step's full AC rests on (engine/step/recompute `block_output`, recommend's
    # `_by_context`): torch.compile of a checkpointed llama-style block (torchtitan's
    # non-reentrant checkpoint_wrapper under torch.compile) puts in the backward graph every
    # forward matmul but w2's, whose output no backward reads
    import torch
    import torch.nn.functional as F
    from functorch.compile import min_cut_rematerialization_partition
    from torch import nn
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch.utils.checkpoint import checkpoint

    dim, hidden, heads = 64, 256, 2

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norms = nn.ModuleList([nn.RMSNorm(dim), nn.RMSNorm(dim)])
            self.attn = nn.ModuleDict({n: nn.Linear(dim, dim, bias=False) for n in "qkvo"})
            self.w1, self.w3 = (
                nn.Linear(dim, hidden, bias=False),
                nn.Linear(dim, hidden, bias=False),
            )
            self.w2 = nn.Linear(hidden, dim, bias=False)

        def inner(self, x: torch.Tensor) -> torch.Tensor:
            h = self.norms[0](x)
            q, k, v = (
                self.attn[n](h).view(1, 32, heads, dim // heads).transpose(1, 2) for n in "qkv"
            )
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
            x = x + self.attn["o"](a.reshape(1, 32, dim))
            g = self.norms[1](x)
            return x + self.w2(F.silu(self.w1(g)) * self.w3(g))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return checkpoint(self.inner, x, use_reentrant=False)

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, _: object) -> object:
        graphs.append(gm)
        return gm.forward

    def backend(gm: torch.fx.GraphModule, inputs: list) -> object:
        partition = min_cut_rematerialization_partition
        return aot_module_simplified(
            gm, inputs, fw_compiler=keep, bw_compiler=keep, partition_fn=partition
        )

    torch._dynamo.reset()
    block = torch.compile(Block(), backend=backend, fullgraph=True)
    block(torch.randn(1, 32, dim, requires_grad=True)).sum().backward()
    forward, backward = (
        [n for n in g.graph.nodes if n.op == "call_function" and "mm" in str(n.target)]
        for g in graphs
    )
    assert len(forward) == 7
    # 2 per linear (input and weight gradients) and the forward again, but for w2's
    assert len(backward) == 2 * 7 + 6
    rerun_outputs = {tuple(n.meta["val"].shape) for n in backward[:6]}
    assert (32, dim) in rerun_outputs and (32, hidden) in rerun_outputs
