"""Numerics and mechanics of the float8 training linear, eager and under torch.compile (CPU).

Error bounds. All three gemms are compared with a float64 reference computed from the very
same bf16 input, weight and grad_output, so only the float8 casts (and the bf16 output) err.
Round-to-nearest into a float8 format with p mantissa bits makes a per-element relative error
|d| <= 2^-(p+1): 2^-4 for e4m3 (p=3), 2^-3 for e5m2 (p=2). For random data the errors are
roughly uniform, RMS(d) ~ 0.6 * 2^-(p+1) (uniform in +-2^-(p+1) relative to the binade, which
the value exceeds by 1.44x on average): ~0.026 for e4m3, ~0.052 for e5m2. A product of two cast
operands errs by d_a + d_b; summed over random-sign terms, the errors add like the terms do, so
the Frobenius relative error of a gemm is about RMS(d_a + d_b):
  output      e4m3 x e4m3: sqrt(2) * 0.026           ~ 0.037  -> bound 0.075 (2x)
  grad_input  e5m2 x e4m3: sqrt(0.052^2 + 0.026^2)   ~ 0.058  -> bound 0.12  (2x)
  grad_weight e5m2 x e4m3: same                                -> bound 0.12
  bf16 (baseline, rowwise_gw_hp grad_weight): only the bf16 output rounding, 2^-9 ~ 0.002
                                                               -> bound 0.01
The 2x margin covers the finite sample (a few thousand terms) and saturation of the largest
values under delayed scaling, whose scale comes from the previous step's amax.
"""

from __future__ import annotations

import pytest
import requires
import torch

from f8roof.profiler import float8_linear
from f8roof.profiler.float8_linear import Float8Linear, make_linear
from f8roof.traffic.recipes import RECIPE_NAMES, Recipe

M, K, N = 32, 48, 64
FP8_OUTPUT_BOUND = 0.075
FP8_GRAD_BOUND = 0.12
BF16_BOUND = 0.01
NAMES = (None, *RECIPE_NAMES)


def runnable(names) -> list:
    """Recipe names as parameters; rowwise ones skipped where CPU `_scaled_mm` refuses them."""
    return [
        pytest.param(n, marks=requires.cpu_rowwise) if n and "rowwise" in n else n for n in names
    ]


def _bounds(name: str | None) -> tuple[float, float, float]:
    if name is None:
        return BF16_BOUND, BF16_BOUND, BF16_BOUND
    grad_weight = BF16_BOUND if name == "rowwise_gw_hp" else FP8_GRAD_BOUND
    return FP8_OUTPUT_BOUND, FP8_GRAD_BOUND, grad_weight


def _relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    return ((actual.double() - reference).norm() / reference.norm()).item()


def _step(fn: torch.nn.Module, *, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One forward+backward on fresh random data; returns input, grad_output and output."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=gen).to(torch.bfloat16).requires_grad_()
    grad_output = torch.randn(M, N, generator=gen).to(torch.bfloat16)
    output = fn(x)
    output.backward(grad_output)
    return x, grad_output, output


def _check_numerics(name: str | None, *, compiled: bool) -> None:
    torch.manual_seed(0)
    module = make_linear(Recipe.from_name(name) if name else None, in_features=K, out_features=N)
    fn = torch.compile(module, fullgraph=True) if compiled else module
    # Two steps: the second is the steady state of delayed scaling (history filled by step 1).
    for seed in (1, 2):
        module.weight.grad = None
        x, grad_output, output = _step(fn, seed=seed)
    x64 = x.detach().double().requires_grad_()
    w64 = module.weight.detach().double().requires_grad_()
    ref = x64 @ w64.t()
    ref.backward(grad_output.double())
    errors = (
        _relative_error(output, ref),
        _relative_error(x.grad, x64.grad),
        _relative_error(module.weight.grad, w64.grad),
    )
    assert output.dtype == torch.bfloat16
    assert x.grad.dtype == module.weight.grad.dtype == torch.bfloat16
    for what, error, bound in zip(
        ("output", "grad_input", "grad_weight"), errors, _bounds(name), strict=True
    ):
        assert error < bound, f"{name} {what}: relative error {error:.4f} >= {bound}"


@pytest.mark.parametrize("name", runnable(NAMES))
def test_numerics_eager(name: str | None) -> None:
    _check_numerics(name, compiled=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", runnable(NAMES))
def test_numerics_compiled(name: str | None) -> None:
    _check_numerics(name, compiled=True)


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


@pytest.mark.parametrize("name", runnable(RECIPE_NAMES))
def test_scaled_mm_calls_follow_cuda_rules(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU `_scaled_mm` checks nothing, so replay every call on meta tensors (same shapes,
    strides, dtypes): the meta kernel applies the CUDA checks (row-major first operand,
    column-major second, dims divisible by 16, tensorwise or (m,1)/(1,n) rowwise scales)."""
    real = torch._scaled_mm
    calls: list[tuple[int, int, int]] = []

    def checked(a, b, *, scale_a, scale_b, out_dtype, use_fast_accum):
        real(
            _meta(a),
            _meta(b),
            scale_a=_meta(scale_a),
            scale_b=_meta(scale_b),
            out_dtype=out_dtype,
            use_fast_accum=use_fast_accum,
        )
        # CUTLASS rowwise (and cuBLAS) take e5m2 only as the first operand.
        assert b.dtype == torch.float8_e4m3fn
        assert a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
        assert out_dtype == torch.bfloat16  # the only rowwise output dtype on CUDA
        calls.append((a.size(0), a.size(1), b.size(1)))
        return real(
            a,
            b,
            scale_a=scale_a,
            scale_b=scale_b,
            out_dtype=out_dtype,
            use_fast_accum=use_fast_accum,
        )

    monkeypatch.setattr(torch, "_scaled_mm", checked)
    module = make_linear(Recipe.from_name(name), in_features=K, out_features=N)
    _step(module, seed=0)
    expected = [(M, K, N), (M, N, K)] + ([] if name == "rowwise_gw_hp" else [(N, M, K)])
    assert calls == expected


def test_meta_replay_catches_a_wrong_layout() -> None:
    """The replay above is a real check: a row-major second operand fails it."""
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn, device="meta")
    b = torch.empty(K, N, dtype=torch.float8_e4m3fn, device="meta")
    one = torch.ones((), device="meta")
    with pytest.raises(RuntimeError, match="col_major"):
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def _delayed_step_checks(*, compiled: bool) -> None:
    module = make_linear(Recipe.from_name("tensorwise_delayed"), in_features=K, out_features=N)
    fn = torch.compile(module, fullgraph=True) if compiled else module
    buffers = dict(module.named_buffers())
    assert set(buffers) == {
        f"{r}_{b}" for r in ("input", "weight", "grad_output") for b in ("amax_history", "scale")
    }
    pointers = {k: v.data_ptr() for k, v in buffers.items()}
    assert all(v.item() == 1.0 for k, v in buffers.items() if k.endswith("_scale"))

    amaxes = []
    for seed in (1, 2):
        x, grad_output, _ = _step(fn, seed=seed)
        amaxes.append(
            {
                "input": x.detach().abs().amax(),
                "weight": module.weight.detach().abs().amax(),
                "grad_output": grad_output.abs().amax(),
            }
        )

    for role, e_max in (("input", 448.0), ("weight", 448.0), ("grad_output", 57344.0)):
        history = buffers[f"{role}_amax_history"]
        newest, previous = (a[role].float().item() for a in reversed(amaxes))
        assert history[:2].tolist() == pytest.approx([newest, previous])
        assert not history[2:].any()
        assert buffers[f"{role}_scale"].item() == pytest.approx(e_max / max(newest, previous))
    # In place: the module's own buffers moved, no new tensors were bound.
    assert {k: v.data_ptr() for k, v in module.named_buffers()} == pointers


def test_delayed_buffers_update_in_place_eager() -> None:
    _delayed_step_checks(compiled=False)


@pytest.mark.slow
def test_delayed_buffers_update_in_place_compiled() -> None:
    """grad_output's history is written in backward: this is the compiled backward doing it."""
    _delayed_step_checks(compiled=True)


def test_static_weight_scale_is_fixed() -> None:
    module = make_linear(
        Recipe.from_name("tensorwise_static_weight"), in_features=K, out_features=N
    )
    assert dict(module.named_buffers()).keys() == {"weight_scale"}
    scale = module.weight_scale.item()
    assert scale == pytest.approx(448.0 / module.weight.detach().abs().amax().float().item())
    _step(module, seed=0)
    assert module.weight_scale.item() == scale


def test_make_linear_modules() -> None:
    baseline = make_linear(None, in_features=K, out_features=N)
    assert isinstance(baseline, torch.nn.Linear) and baseline.bias is None
    modules = [
        make_linear(Recipe.from_name(name), in_features=K, out_features=N) for name in RECIPE_NAMES
    ]
    for name, module in zip(RECIPE_NAMES, modules, strict=True):
        assert isinstance(module, Float8Linear) and name in repr(module)
    for module in (baseline, *modules):
        assert module.weight.shape == (N, K) and module.weight.dtype == torch.bfloat16
        assert module.weight.std() > 0  # random init, never zeros


def test_rejects_non_2d_input() -> None:
    module = make_linear(Recipe.from_name("tensorwise"), in_features=K, out_features=N)
    with pytest.raises(ValueError, match="2-D"):
        module(torch.randn(2, M, K, dtype=torch.bfloat16))


def test_saturating_cast() -> None:
    x = torch.tensor([1000.0, -1000.0, 1.0])
    out = float8_linear.cast_to_float8(x, torch.tensor(1.0), torch.float8_e4m3fn).float()
    assert out.tolist() == [448.0, -448.0, 1.0]
