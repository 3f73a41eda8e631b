"""What one compiled graph is: a recipe (or bf16), whose float8 linear, and the ops around it.

A `Variant` names everything that changes the kernels torch.compile generates for one linear's
forward+backward: the recipe (None for the bf16 baseline), the implementation (torchao's
Float8Linear or f8roof's reference autograd.Function) and the context (the op producing the
linear's input and the op consuming its output). Its `key` is the name calibration files and
checkpoints use: `bf16`, `torchao:rowwise`, `reference:tensorwise_delayed@layernorm+sigmoid`.

Also here: the one float8 alignment rule (which dims `_scaled_mm` needs divisible by 16, or by
the block for MX and blockwise recipes), used by estimate, capture and recommend alike, and which
GPUs run a recipe's gemms at all (`gpu_support_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from f8roof.errors import term
from f8roof.hardware.presets import GPU
from f8roof.hardware.support import unsupported_reason
from f8roof.traffic.recipes import Granularity, Recipe, RecipeError, Role


class Level(str, Enum):
    """The seed's two bounds on a float8 linear's overhead bytes (`traffic.worst_ideal`)."""

    WORST = "worst"
    IDEAL = "ideal"


class Implementation(str, Enum):
    """Whose float8 linear is compiled."""

    TORCHAO = "torchao"  # torchao.float8.convert_to_float8_training: what users train with
    REFERENCE = "reference"  # f8roof's own autograd.Function per recipe (the seed's recipes)
    # Transformer Engine's te.Linear / te.LayerNormLinear as NeMo and Megatron run them: never
    # compiled here, its kernels' bytes read off TE's source (traffic/te.py)
    TE = "te"


def parse_implementation(text: str) -> Implementation:
    return _member(Implementation, text, term("implementation"))


class Before(str, Enum):
    """The op producing the linear's input inside the compiled graph."""

    NONE = "none"
    LAYERNORM = "layernorm"  # torchao's float8 benchmark: LayerNorm without affine weights
    RMSNORM = "rmsnorm"  # llama-style q/k/v and gate/up inputs
    SILU_MUL = "silu_mul"  # llama-style down_proj input: silu(gate) * up
    GELU = "gelu"  # GPT-2's MLP c_proj input


class After(str, Enum):
    """The op consuming the linear's output inside the compiled graph."""

    NONE = "none"
    SIGMOID = "sigmoid"  # torchao's float8 benchmark
    SILU = "silu"
    GELU = "gelu"


class ContextError(RecipeError):
    """An unknown context op, or a variant that cannot exist (a recipe torchao lacks)."""


def require_torchao(recipe: str, implementation: Implementation) -> None:
    """Block-scaled and NVFP4 recipes are torchao's (or, those in `TE_RECIPES`, Transformer
    Engine's): f8roof's reference linear has none."""
    if implementation is Implementation.TE and recipe in TE_RECIPES:
        return
    if implementation is not Implementation.TORCHAO:
        raise ContextError(
            f"f8roof's reference float8 linear has no {recipe} recipe: use "
            f"{term('implementation')} torchao"
        )


@dataclass(frozen=True)
class Context:
    before: Before = Before.NONE
    after: After = After.NONE

    @property
    def name(self) -> str:
        """'none' for a standalone linear, else 'before+after' (e.g. 'layernorm+sigmoid')."""
        if self.is_standalone:
            return "none"
        return f"{self.before.value}+{self.after.value}"

    @property
    def is_standalone(self) -> bool:
        return self.before is Before.NONE and self.after is After.NONE

    @classmethod
    def from_names(cls, before: str | None = None, after: str | None = None) -> Context:
        return cls(
            _member(Before, before or "none", f"{term('before')} op"),
            _member(After, after or "none", f"{term('after')} op"),
        )

    @classmethod
    def from_name(cls, name: str) -> Context:
        """Inverse of `name`."""
        if name == "none":
            return cls()
        before, sep, after = name.partition("+")
        if not sep:
            raise ContextError(f"bad context {name!r}: expected 'none' or 'before+after'")
        return cls.from_names(before, after)


def _member(enum: type[Enum], value: str, what: str):
    try:
        return enum(value.strip().lower())
    except ValueError:
        known = ", ".join(m.value for m in enum)
        raise ContextError(f"unknown {what} {value!r}; known: {known}") from None


# f8roof recipe name -> torchao's Float8LinearRecipeName value (torchao 0.18).
FLOAT8_LINEAR_RECIPES = {
    "tensorwise": "tensorwise",
    "rowwise": "rowwise",
    "rowwise_gw_hp": "rowwise_with_gw_hp",
}
# Block-scaled recipes, torchao 0.18 prototypes: MXTrainingRecipe values for
# `MXFP8TrainingOpConfig.from_recipe` (prototype/moe_training/config.py); blockwise has no recipe
# enum, its module is `Float8BlockwiseLinear` (prototype/blockwise_fp8_training/linear.py).
BLOCK_SCALED_RECIPES = {
    "mxfp8_rceil": "mxfp8_rceil",
    "mxfp8_rceil_wgrad_with_hp": "mxfp8_rceil_wgrad_with_hp",
    "mxfp8_emulated_rceil": "mxfp8_emulated_rceil",
    "blockwise": "Float8BlockwiseLinear",
    # prototype/moe_training/nvfp4_training/nvfp4_training.py: quantize_ with it swaps each
    # nn.Linear for NVFP4Linear (nvfp4_linear.py's `nvfp4_mm_triton`)
    "nvfp4": "NVFP4TrainingConfig",
}
# Every recipe torchao has, by f8roof name.
TORCHAO_RECIPES = {**FLOAT8_LINEAR_RECIPES, **BLOCK_SCALED_RECIPES}


def torchao_recipe_name(recipe: Recipe) -> str:
    """torchao's name for a recipe; delayed and static scaling exist only in the reference."""
    name = TORCHAO_RECIPES.get(recipe.name)
    if name is None:
        raise ContextError(
            f"torchao has no recipe {recipe.name!r} (it removed delayed and static scaling in "
            f"2025; it has {', '.join(TORCHAO_RECIPES)}): use {term('implementation')} reference"
        )
    return name


# f8roof recipe name -> Transformer Engine's recipe class (transformer_engine/common/recipe,
# TE 2.x): its two tensorwise recipes, its 1x128/128x128 blocks (Hopper) and MXFP8 (Blackwell).
TE_RECIPES = {
    "tensorwise": "Float8CurrentScaling",
    "tensorwise_delayed": "DelayedScaling",
    "blockwise": "Float8BlockScaling",
    "mxfp8_rceil": "MXFP8BlockScaling",
}


def te_recipe_name(recipe: Recipe) -> str:
    """Transformer Engine's recipe for an f8roof recipe; the others are refused."""
    name = TE_RECIPES.get(recipe.name)
    if name is None:
        raise ContextError(
            f"{term('implementation')} te models Transformer Engine's recipes "
            f"({', '.join(TE_RECIPES)}), not {recipe.name}"
        )
    return name


NORMS = (Before.LAYERNORM, Before.RMSNORM)


@dataclass(frozen=True)
class Variant:
    """One compiled graph. `recipe` None is the bf16 baseline: plain nn.Linear, which has no
    float8 implementation (`implementation` None); every recipe names its implementation."""

    recipe: Recipe | None
    implementation: Implementation | None
    context: Context = Context()

    def __post_init__(self) -> None:
        if (self.recipe is None) != (self.implementation is None):
            raise ContextError("a float8 variant names its implementation; bf16 has none")
        if self.recipe is None:
            return
        if self.implementation is Implementation.TORCHAO:
            torchao_recipe_name(self.recipe)
        if self.implementation is Implementation.TE:
            te_recipe_name(self.recipe)
        if self.implementation is Implementation.REFERENCE and self.recipe.is_block_scaled:
            raise ContextError(
                f"f8roof's reference linear has no {self.recipe.name} (MX and blockwise are "
                f"torchao's): use {term('implementation')} torchao"
            )

    @classmethod
    def of(
        cls, recipe: Recipe | None, implementation: Implementation, context: Context = Context()
    ) -> Variant:
        """The variant of a recipe, or the bf16 baseline when `recipe` is None."""
        return cls(recipe, None if recipe is None else implementation, context)

    @property
    def is_bf16(self) -> bool:
        return self.recipe is None

    @property
    def baseline(self) -> Variant:
        """The bf16 graph of the same context."""
        return Variant(None, None, self.context)

    @property
    def recipe_name(self) -> str:
        return "bf16" if self.recipe is None else self.recipe.name

    @property
    def implementation_name(self) -> str:
        """Whose float8 linear; bf16 has none ('-')."""
        return "-" if self.implementation is None else self.implementation.value

    @property
    def key(self) -> str:
        if self.recipe is None or self.implementation is None:
            head = "bf16"
        else:
            head = f"{self.implementation.value}:{self.recipe.name}"
        return head if self.context.is_standalone else f"{head}@{self.context.name}"

    @property
    def slug(self) -> str:
        """The key in file-name characters: `torchao-rowwise.layernorm-sigmoid`."""
        return self.key.replace(":", "-").replace("@", ".").replace("+", "-")

    @classmethod
    def from_key(cls, key: str) -> Variant:
        """Inverse of `key`."""
        head, _, context = key.partition("@")
        ctx = Context.from_name(context) if context else Context()
        if head == "bf16":
            return cls(None, None, ctx)
        impl, sep, recipe = head.partition(":")
        if not sep:
            raise ContextError(f"bad variant {key!r}: expected bf16 or implementation:recipe")
        try:
            implementation = Implementation(impl)
        except ValueError:
            raise ContextError(f"bad variant {key!r}: unknown implementation {impl!r}") from None
        return cls(Recipe.from_name(recipe), implementation, ctx)


# --- float8 alignment: the one rule ------------------------------------------------------------

FP8_DIM_MULTIPLE = 16  # cuBLASLt float8 gemms need these dims divisible by 16
DIM_NAMES = ("M", "K", "N")
# What the block-scaled recipes' dims must be multiples of (see `dim_multiple`).
BLOCK_DIM_MULTIPLES = {Granularity.MX: 32, Granularity.BLOCKWISE: 128, Granularity.NVFP4: 128}


def dim_multiple(recipe: Recipe) -> int:
    """What the checked dims must be multiples of. MX: 32, the scale block; torchao 0.18's casts
    assert it (`to_mx`: the last dim; `mxfp8_quantize_cuda`: rows and columns). Blockwise:
    128; its Triton casts assert it on both dims of the weight and on M for grad_output's
    transposed cast (`triton_fp8_blockwise_*`), `Float8BlockwiseLinear.from_float` on K, N.
    NVFP4: 128, not its 16-element scale block (nor cuBLAS's 16/32): torchao 0.18's
    `nvfp4_mm_triton` raises unless M, K and N are all multiples of 128
    (nvfp4_training/nvfp4_linear.py:94), as its casts do for their swizzled scale tiles
    (hadamard_quantize_row_col_triton.py:304-311, quantize_2d_triton.py:243-246)."""
    return BLOCK_DIM_MULTIPLES.get(recipe.granularity, FP8_DIM_MULTIPLE)


def fp8_checked_dims(recipe: Recipe) -> tuple[bool, bool, bool]:
    """Which of M, K, N must be multiples of `dim_multiple`. `_scaled_mm` needs its contraction
    dim and its second operand's dims divisible by 16: K and N (output, grad_input), and M
    where the grad_weight gemm (contracting over M) runs in float8. MX and blockwise cast every
    role along both dims (M too, unless grad_weight stays in bf16: then only the weight is cast
    along both, N x K); blockwise has no bf16 grad_weight option."""
    return (not recipe.grad_weight_in_bf16, True, True)


def fp8_shape_reason(recipe: Recipe, M: int, K: int, N: int) -> str | None:
    """Why float8 gemms cannot run this shape, or None when they can."""
    multiple = dim_multiple(recipe)
    bad = [
        f"{name}={value}"
        for name, value, check in zip(DIM_NAMES, (M, K, N), fp8_checked_dims(recipe))
        if check and value % multiple
    ]
    if not bad:
        return None
    if multiple == FP8_DIM_MULTIPLE:
        what = "float8 gemms"
    else:  # NVFP4's 128 is its kernels' scale tiles, not its 16-element blocks
        what = f"{recipe.name}'s {'scale tiles' if recipe.is_nvfp4 else 'scale blocks'}"
    return f"{', '.join(bad)} not a multiple of {multiple} ({what} need it)"


def fp8_reason_codes(
    recipe: Recipe, M: np.ndarray, K: np.ndarray, N: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """`fp8_shape_reason` over arrays, as codes into a table of eight messages ('' where float8
    can run, else which dims are misaligned): a million shapes need no million strings."""
    multiple = dim_multiple(recipe)
    code = np.zeros(np.shape(K), dtype=np.intp)
    for bit, (values, check) in enumerate(zip((M, K, N), fp8_checked_dims(recipe))):
        if check:
            code |= (np.asarray(values) % multiple != 0).astype(np.intp) << bit
    table = [""]
    for c in range(1, 8):  # one message per combination of failing dims, looked up per shape
        bad = [name for bit, name in enumerate(DIM_NAMES) if c >> bit & 1]
        plural = (
            f" not a multiple of {multiple}" if len(bad) == 1 else f" not multiples of {multiple}"
        )
        table.append(" and ".join(bad) + plural)
    return code, table


# --- which GPUs run a recipe's gemms -----------------------------------------------------------


class UnsupportedOnGPU(ContextError):
    """A recipe whose gemms the GPU has no kernel for."""


def gpu_support_reason(recipe: Recipe | None, gpu: GPU) -> str | None:
    """Why `gpu` cannot run `recipe`'s gemms as torchao 0.18 runs them, or None when it can:
    `hardware.support` holds torch's rules per gemm kind. mxfp8_emulated_rceil runs its gemms in
    bf16, anywhere."""
    if recipe is None or recipe.emulated:
        return None
    return unsupported_reason(gpu, recipe.name)


def check_gpu_support(recipe: Recipe | None, gpu: GPU) -> None:
    """Raise UnsupportedOnGPU with `gpu_support_reason`'s one line, if any."""
    reason = gpu_support_reason(recipe, gpu)
    if reason is not None:
        raise UnsupportedOnGPU(reason)


def context_fused_roles(
    context: Context, implementation: Implementation | None = None
) -> frozenset[Role]:
    """The roles whose producer a context puts in the compiled graph, i.e. the seed's F:
    input when an op comes before (its output is the input), grad_output when one comes
    after (its backward, elementwise, produces grad_output). The weight's producer (the
    optimizer) is never in the graph. This is the seed's guess at what fuses; the compiled
    graph of the context (`codegen`, `fitted`) is the measurement. Transformer Engine fuses
    only a norm with its input cast (te.LayerNormLinear, as Megatron builds q/k/v and fc1;
    the activation and fc2 are separate modules)."""
    if implementation is Implementation.TE:
        return frozenset({Role.INPUT}) if context.before in NORMS else frozenset()
    roles = set()
    if context.before is not Before.NONE:
        roles.add(Role.INPUT)
    if context.after is not After.NONE:
        roles.add(Role.GRAD_OUTPUT)
    return frozenset(roles)
