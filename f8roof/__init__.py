"""f8roof: should this linear train in float8? Float8 vs bf16 speedups from the code
torch.compile generates, timed by models fitted to public measurements or by your GPU's
calibration.

The Python API (docs/api.md), what `f8roof estimate` answers:

- `estimate_shapes(shapes, gpu=, recipe=, ...)`: one linear per (M, K, N) -> a DataFrame of
  times (seconds), speedups with their band, and the decision;
- `answer_model(model, tokens, gpu=, tp=, ep=, fsdp=, recompute=, recipe=, pp=, cp=, ...)`: a model's
  linears at training scale -> the answer record (per-layer rows, the step, memory);
- `answer_setup(setup, gpu=, step_ms=, overrides=, ...)`: a torchtitan job config (TOML or a
  named config) -> the same answer record;
- `module_filter(model, tokens, ...)`: the filter for torchao's `convert_to_float8_training`;
- `best_runs(model, gpus, gpu=, seq_len=, recipe=)`: torchtitan's layouts on N GPUs searched
  -> the best bf16 and the best float8 run, re-tuned beside like-for-like (`f8roof plan`).

A refused value raises `ParameterError` naming the parameter; every refusal is an
`F8RoofError`. The functions are imported on first use, so `import f8roof` stays light.
"""

from f8roof.errors import F8RoofError, ParameterError

__version__ = "0.1.0"
__all__ = [
    "F8RoofError",
    "ParameterError",
    "answer_model",
    "answer_setup",
    "best_runs",
    "estimate_shapes",
    "module_filter",
]
_API = ("answer_model", "answer_setup", "best_runs", "estimate_shapes", "module_filter")


def __getattr__(name: str):
    if name in _API:
        from f8roof.engine import api

        return getattr(api, name)
    raise AttributeError(f"module 'f8roof' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
