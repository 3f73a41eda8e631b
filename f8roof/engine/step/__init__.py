"""A model's recommendation at training scale -> the step: each part in its own module
(`conversion`, `blocks`, `tp`, `fsdp`, `recompute`, `outside`, `fabric`), composed in
`summarize`, summed and reconciled as typed parts in `parts`.

Which linears run in float8: as torchtitan converts them (every nn.Linear but `filter_fqns`,
torchao's auto filter with "auto_filter_small_kn"; the llama configs' ["output"] without a
setup; routed experts, 3D parameters no nn.Linear, only with `moe_fqns_prototype`), the figure
published runs measure; f8roof's own decisions' step is noted beside it.

One transformer block's time parts per precision, then the step. Two sources for the block:
- the sharded block's graphs (`f8roof.engine.sharded`: the shipped fits at these tokens, or
  `--overhead codegen`'s compile): every kernel, gemm, recomputed op and TP collective one rank
  runs, timed by the calibration; block linears kept in bf16 put back by their per-layer
  difference;
- otherwise (no fit: full AC, async TP, MoE, other architectures; said why) the per-layer rows
  `recommend` produced, with communication and recompute modelled around them:
  - communication (timing/comm.py, the GPU's fabric): sequence-parallel TP, per block one
    all-gather of the norm's output before each column-parallel group and one reduce-scatter
    after each row-parallel linear, tokens x hidden bf16, mirrored in the backward; tensorwise
    gathers the forward inputs in float8 (torchao's float8 TP plan);
  - recompute (training/checkpointing.py): full reruns every block linear's forward; selective
    follows torchtitan's per-op SAC: every second matmul reruns its forward gemm in both
    precisions (a float8 linear shows SAC aten.mm), the float8 casts rerun for every float8
    linear, and the forward's all-gathers run again.
TP communication is exposed unless async TP, which pairs each collective with the gemm it
feeds or drains (torch's micro-pipelined TP: all but the local shard's share hides it). FSDP,
in both: each block's weight shards gathered (bf16, or float8 with float8 all-gather) before
forward and backward, gradients reduce-scattered in fp32 (torchtitan's
mixed_precision_reduce), hidden behind the compute the conversion set runs. Context
parallelism's exchange and a pipeline's bubble and sends are modelled (`outside`).
"""
