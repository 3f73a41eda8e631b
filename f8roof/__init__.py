"""f8roof: should this linear train in float8? Measured answers for torch.compile."""

__version__ = "0.1.0"


def module_filter(
    model,
    tokens: int,
    *,
    calibration=None,
    gpu: str | None = None,
    recipe: str = "tensorwise",
    implementation: str | None = None,
    no_calibration: bool = False,
    tp: int = 1,
    ep: int = 1,
    fsdp: bool = False,
    recompute: str = "none",
    tp_plan=None,
):
    """`(module, fqn) -> bool` for torchao's `convert_to_float8_training(model,
    module_filter_fn=...)`: True for the nn.Linear modules of `model` that train faster in
    float8 at `tokens` tokens per GPU per step. `calibration`: a calibration file or a loaded
    `Calibration`; None decides on the shipped one for `gpu` (h100 by default). `tp`: decide
    each linear at the shard one GPU runs (column-parallel N / tp, row-parallel K / tp). See
    `f8roof.recommend.module_filter`; imported here lazily so `import f8roof` stays light."""
    from f8roof.recommend import module_filter as _module_filter

    return _module_filter(
        model,
        tokens,
        calibration=calibration,
        gpu=gpu,
        recipe=recipe,
        implementation=implementation,
        no_calibration=no_calibration,
        tp=tp,
        ep=ep,
        fsdp=fsdp,
        recompute=recompute,
        tp_plan=tp_plan,
    )
