"""f8roof: should this linear train in float8? Float8 vs bf16 speedups from the code
torch.compile generates, timed by models fitted to public measurements or by your GPU's
calibration.

`f8roof.module_filter(model, tokens, ...)` is the filter for torchao's
`convert_to_float8_training` (see `f8roof.engine.recommend.module_filter`); it is imported on first use,
so `import f8roof` stays light.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "module_filter":
        from f8roof.engine.recommend import module_filter

        return module_filter
    raise AttributeError(f"module 'f8roof' has no attribute {name!r}")
