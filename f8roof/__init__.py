"""f8roof: should this linear train in float8? Measured answers for torch.compile.

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
