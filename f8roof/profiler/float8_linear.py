"""The float8 training linear: one `torch.autograd.Function` per recipe family.

Written to be measured, not to train models: every recipe runs its three gemms through
`torch._scaled_mm` with the operand layouts CUDA requires, so that the graphs torch.compile
builds here (and re-traced on fake CUDA tensors) are the graphs a GPU runs.

Two constraints shape the code (DESIGN.md):
- no `Tensor.contiguous()` and no autograd on fake CUDA tensors: column-major copies are made
  with `clone(memory_format=torch.contiguous_format)` on a transposed view;
- on CPU `torch._scaled_mm` is an fp32 emulation that skips the layout and divisible-by-16
  checks, so nothing on CPU catches a wrong layout: the layouts below follow the CUDA rules
  (first operand row-major, second column-major) by construction.

Scale convention: `float8 = saturate(x * scale)`; `_scaled_mm` takes the inverse scales
(dequantization factors), so `output = (a_fp8 / scale_a) @ (b_fp8 / scale_b)`.
"""

from __future__ import annotations

import torch
from torch import nn

from f8roof.traffic.recipes import Recipe, Role, ScalingType

E4M3 = torch.float8_e4m3fn  # input and weight: 3 mantissa bits, range +-448
E5M2 = torch.float8_e5m2  # grad_output: 2 mantissa bits, range +-57344 for gradients' spread
ROLE_FLOAT8_DTYPES: dict[Role, torch.dtype] = {
    Role.INPUT: E4M3,
    Role.WEIGHT: E4M3,
    Role.GRAD_OUTPUT: E5M2,
}
OUTPUT_DTYPE = torch.bfloat16
AMAX_EPS = 1e-12  # keeps the scale finite for an all-zero tensor
DEFAULT_AMAX_HISTORY_LEN = 16

# Fast accumulation (periodic promotion of the fp8 tensor-core accumulator skipped) for the
# forward gemm only, as torchao does: gradients are kept on the more accurate path.
USE_FAST_ACCUM: dict[str, bool] = {"output": True, "grad_input": False, "grad_weight": False}


def amax_to_scale(amax: torch.Tensor, float8_dtype: torch.dtype) -> torch.Tensor:
    """fp32 scale mapping `amax` onto the largest finite value of `float8_dtype`."""
    return torch.finfo(float8_dtype).max / amax.float().clamp(min=AMAX_EPS)


def cast_to_float8(x: torch.Tensor, scale: torch.Tensor, float8_dtype: torch.dtype) -> torch.Tensor:
    """Saturating cast of `x * scale`.

    Delayed and static scales come from other data than `x`, so `x * scale` can leave the
    float8 range; e4m3fn has no infinity and an unclamped cast would turn overflow into NaN.
    """
    limit = torch.finfo(float8_dtype).max
    return (x.float() * scale).clamp(min=-limit, max=limit).to(float8_dtype)


def column_major(x: torch.Tensor) -> torch.Tensor:
    """A column-major copy of a 2-D tensor, the layout `_scaled_mm` wants for its 2nd operand."""
    # Not `.contiguous()`: it aborts on fake CUDA tensors in a CPU build (DESIGN.md).
    return x.t().clone(memory_format=torch.contiguous_format).t()


def cast_axiswise(
    x: torch.Tensor, float8_dtype: torch.dtype, *, dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast with one scale per slice along `dim` (dim=1: per row, dim=0: per column).

    Returns the float8 tensor (row-major) and the inverse scales with `dim` kept as size 1:
    (R, 1) per row, (1, C) per column, both contiguous as CUDA rowwise `_scaled_mm` requires.
    """
    scale = amax_to_scale(x.abs().amax(dim=dim, keepdim=True), float8_dtype)
    return cast_to_float8(x, scale, float8_dtype), scale.reciprocal()


def _scaled_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    inv_scale_a: torch.Tensor,
    inv_scale_b: torch.Tensor,
    *,
    gemm: str,
) -> torch.Tensor:
    # bf16 out for every gemm: CUDA rowwise `_scaled_mm` supports no other output dtype.
    return torch._scaled_mm(
        a,
        b,
        scale_a=inv_scale_a,
        scale_b=inv_scale_b,
        out_dtype=OUTPUT_DTYPE,
        use_fast_accum=USE_FAST_ACCUM[gemm],
    )


def _record_amax(
    history: torch.Tensor, scale: torch.Tensor, amax: torch.Tensor, float8_dtype: torch.dtype
) -> None:
    """Delayed scaling bookkeeping, in place: push this step's amax, refresh the next scale."""
    history.copy_(torch.cat([amax.float().reshape(1), history[:-1]]))
    scale.copy_(amax_to_scale(history.amax(), float8_dtype))


class _TensorwiseFloat8Matmul(torch.autograd.Function):
    """`input @ weight.T` with one scale per tensor.

    The forward casts input and weight once each and writes both a row-major and a
    column-major float8 copy; backward only casts grad_output and reuses the column-major
    copies, so no bf16 tensor is saved.
    """

    @staticmethod
    def forward(
        ctx,
        input: torch.Tensor,
        weight: torch.Tensor,
        input_scale: torch.Tensor,
        weight_scale: torch.Tensor,
        grad_output_scale: torch.Tensor | None,
        grad_output_amax_history: torch.Tensor | None,
    ) -> torch.Tensor:
        input_fp8 = cast_to_float8(input, input_scale, E4M3)
        weight_fp8 = cast_to_float8(weight, weight_scale, E4M3)
        # Inverse scales are new tensors: the caller may update a delayed scale buffer in
        # place right after this call, which must not change what backward dequantizes with.
        input_inv_scale = input_scale.reciprocal()
        weight_inv_scale = weight_scale.reciprocal()
        # (M,K) row-major @ (K,N) column-major: weight_fp8 (N,K) row-major transposed.
        output = _scaled_mm(
            input_fp8, weight_fp8.t(), input_inv_scale, weight_inv_scale, gemm="output"
        )
        ctx.save_for_backward(
            column_major(input_fp8),
            column_major(weight_fp8),
            input_inv_scale,
            weight_inv_scale,
            grad_output_scale,
            grad_output_amax_history,
        )
        ctx.dtypes = (input.dtype, weight.dtype)
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (
            input_col,
            weight_col,
            input_inv_scale,
            weight_inv_scale,
            grad_output_scale,
            grad_output_amax_history,
        ) = ctx.saved_tensors
        input_dtype, weight_dtype = ctx.dtypes
        grad_output_amax = grad_output.abs().amax()
        delayed = grad_output_amax_history is not None
        scale = grad_output_scale if delayed else amax_to_scale(grad_output_amax, E5M2)
        grad_output_fp8 = cast_to_float8(grad_output, scale, E5M2)
        grad_output_inv_scale = scale.reciprocal()
        # grad_input: (M,N) row-major @ (N,K) column-major.
        grad_input = _scaled_mm(
            grad_output_fp8, weight_col, grad_output_inv_scale, weight_inv_scale, gemm="grad_input"
        )
        # grad_weight: grad_output.T (N,M) row-major, i.e. grad_output column-major, @ (M,K)
        # column-major input.
        grad_weight = _scaled_mm(
            column_major(grad_output_fp8).t(),
            input_col,
            grad_output_inv_scale,
            input_inv_scale,
            gemm="grad_weight",
        )
        if delayed:
            # After the cast: this step used the scale from earlier steps (that is what lets
            # the amax and the cast share one pass over grad_output).
            _record_amax(grad_output_amax_history, grad_output_scale, grad_output_amax, E5M2)
        return grad_input.to(input_dtype), grad_weight.to(weight_dtype), None, None, None, None


class _RowwiseFloat8Matmul(torch.autograd.Function):
    """`input @ weight.T` with one scale per row (dynamic).

    Each gemm needs its scales along its own non-contracted dims, so every tensor is cast
    twice: per row and per column (a scale per column of X is a scale per row of X.T):
    output uses input per row, weight per row; grad_input uses grad_output per row, weight
    per column; grad_weight uses grad_output per column, input per column. Forward makes the
    column-wise input and weight copies and saves them in float8. With `grad_weight_in_bf16`
    the grad_weight gemm is a bf16 matmul and input is saved in bf16 instead.
    """

    @staticmethod
    def forward(
        ctx, input: torch.Tensor, weight: torch.Tensor, grad_weight_in_bf16: bool
    ) -> torch.Tensor:
        input_fp8, input_inv_scale = cast_axiswise(input, E4M3, dim=1)  # (M,1)
        weight_fp8, weight_inv_scale = cast_axiswise(weight, E4M3, dim=1)  # (N,1)
        output = _scaled_mm(
            input_fp8,
            weight_fp8.t(),
            input_inv_scale,
            weight_inv_scale.reshape(1, -1),
            gemm="output",
        )
        weight_colwise_fp8, weight_colwise_inv_scale = cast_axiswise(weight, E4M3, dim=0)  # (1,K)
        if grad_weight_in_bf16:
            input_saved, input_saved_inv_scale = input, None
        else:
            input_colwise_fp8, input_saved_inv_scale = cast_axiswise(input, E4M3, dim=0)  # (1,K)
            input_saved = column_major(input_colwise_fp8)
        ctx.save_for_backward(
            column_major(weight_colwise_fp8),
            weight_colwise_inv_scale,
            input_saved,
            input_saved_inv_scale,
        )
        ctx.grad_weight_in_bf16 = grad_weight_in_bf16
        ctx.dtypes = (input.dtype, weight.dtype)
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        weight_col, weight_inv_scale, input_saved, input_inv_scale = ctx.saved_tensors
        input_dtype, weight_dtype = ctx.dtypes
        grad_output_fp8, grad_output_inv_scale = cast_axiswise(grad_output, E5M2, dim=1)  # (M,1)
        grad_input = _scaled_mm(
            grad_output_fp8, weight_col, grad_output_inv_scale, weight_inv_scale, gemm="grad_input"
        )
        if ctx.grad_weight_in_bf16:
            grad_weight = grad_output.t().to(OUTPUT_DTYPE) @ input_saved.to(OUTPUT_DTYPE)
        else:
            grad_output_colwise_fp8, grad_output_colwise_inv_scale = cast_axiswise(
                grad_output, E5M2, dim=0
            )  # (1,N)
            grad_weight = _scaled_mm(
                column_major(grad_output_colwise_fp8).t(),
                input_saved,
                grad_output_colwise_inv_scale.reshape(-1, 1),
                input_inv_scale,
                gemm="grad_weight",
            )
        return grad_input.to(input_dtype), grad_weight.to(weight_dtype), None


class Float8Linear(nn.Linear):
    """A bias-free linear whose three gemms run in float8 as `recipe` says.

    An nn.Linear (nn.Linear's init), as torchao's Float8Linear is, so that whatever finds the
    linear of a graph by type (capture's roles and float8-work attribution) treats both alike.
    Scaling state lives in buffers so a training step updates it in place, as in real
    training: per delayed role `{role}_amax_history` (fp32, newest first) and `{role}_scale`;
    per static role a fixed `{role}_scale`.
    """

    def __init__(
        self,
        recipe: Recipe,
        *,
        in_features: int,
        out_features: int,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.bfloat16,
        amax_history_len: int = DEFAULT_AMAX_HISTORY_LEN,
    ) -> None:
        super().__init__(in_features, out_features, bias=False, device=device, dtype=dtype)
        self.recipe = recipe
        if recipe.is_rowwise:
            return
        for role, scaling in ((r, recipe.scaling(r)) for r in ROLE_FLOAT8_DTYPES):
            if scaling is ScalingType.DELAYED:
                self.register_buffer(
                    f"{role.value}_amax_history",
                    torch.zeros(amax_history_len, device=device, dtype=torch.float32),
                )
            if scaling is not ScalingType.DYNAMIC:
                self.register_buffer(
                    f"{role.value}_scale", self._initial_scale(role, device=device)
                )

    def _initial_scale(self, role: Role, *, device: str | torch.device | None) -> torch.Tensor:
        # A static weight is calibrated once from the weight itself. Otherwise there is no data
        # yet: 1.0 keeps values within +-448 (e4m3) or +-57344 (e5m2) on the first step, after
        # which delayed scales come from the amax history.
        if role is Role.WEIGHT and self.recipe.scaling(role) is ScalingType.STATIC:
            return amax_to_scale(self.weight.detach().abs().amax(), E4M3)
        return torch.ones((), device=device, dtype=torch.float32)

    def _forward_scale(self, role: Role, tensor: torch.Tensor) -> torch.Tensor:
        if self.recipe.scaling(role) is ScalingType.DYNAMIC:
            return amax_to_scale(tensor.detach().abs().amax(), ROLE_FLOAT8_DTYPES[role])
        return getattr(self, f"{role.value}_scale")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dim() != 2:
            raise ValueError(f"Float8Linear takes a 2-D (M, K) input, got {tuple(input.shape)}")
        if self.recipe.is_rowwise:
            return _RowwiseFloat8Matmul.apply(input, self.weight, self.recipe.grad_weight_in_bf16)
        go_delayed = self.recipe.grad_output is ScalingType.DELAYED
        output = _TensorwiseFloat8Matmul.apply(
            input,
            self.weight,
            self._forward_scale(Role.INPUT, input),
            self._forward_scale(Role.WEIGHT, self.weight),
            self.grad_output_scale if go_delayed else None,
            self.grad_output_amax_history if go_delayed else None,
        )
        # Input and weight histories are updated here, outside the autograd.Function: buffer
        # mutation in a module's forward is what torch.compile supports best. grad_output's can
        # only be updated in backward (see _TensorwiseFloat8Matmul.backward).
        with torch.no_grad():
            for role, tensor in ((Role.INPUT, input), (Role.WEIGHT, self.weight)):
                if self.recipe.scaling(role) is ScalingType.DELAYED:
                    _record_amax(
                        getattr(self, f"{role.value}_amax_history"),
                        getattr(self, f"{role.value}_scale"),
                        tensor.abs().amax(),
                        ROLE_FLOAT8_DTYPES[role],
                    )
        return output

    def extra_repr(self) -> str:
        return (
            f"recipe={self.recipe.name}, in_features={self.in_features}, "
            f"out_features={self.out_features}"
        )


def make_linear(
    recipe: Recipe | None,
    *,
    in_features: int,
    out_features: int,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.bfloat16,
) -> nn.Module:
    """`Float8Linear` for a recipe, a plain bf16 `nn.Linear` for None; on `device`, else on
    the current default device."""
    if recipe is None:
        # nn.Linear's kaiming-uniform init: random, never zeros.
        return nn.Linear(in_features, out_features, bias=False, device=device, dtype=dtype)
    return Float8Linear(
        recipe, in_features=in_features, out_features=out_features, device=device, dtype=dtype
    )
