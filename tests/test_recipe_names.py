"""Recipe names as users and torchtitan write them, and what `--recipe all` means per part."""

import pytest
from conftest import invoke_cli

from f8roof.engine.resolve import Request, all_recipes, resolve
from f8roof.hardware.presets import find_gpu
from f8roof.traffic.recipes import (
    ALL_RECIPE_NAMES,
    RECIPE_ALIASES,
    RECIPE_FAMILIES,
    Recipe,
    RecipeError,
    canonical_name,
)


@pytest.mark.parametrize(
    "written, name",
    [
        ("mxfp8", "mxfp8_rceil"),  # torchao 0.18's MXFP8TrainingOpConfig() default
        ("mx", "mxfp8_rceil"),  # torchtitan's MX converter
        ("MXFP8_CUBLAS", "mxfp8_rceil"),
        ("float8", "rowwise"),  # torchtitan 2026's Float8LinearConverter default
        ("rowwise_with_gw_hp", "rowwise_gw_hp"),
        ("tensorwise", "tensorwise"),
        ("tensorwise:weight=delayed", "tensorwise:weight=delayed"),
    ],
)
def test_a_recipe_as_users_write_it_is_f8roofs(written, name):
    assert canonical_name(written) == name
    assert Recipe.from_name(written) == Recipe.from_name(name)


def test_every_alias_names_a_modelled_recipe_and_every_name_has_a_family():
    assert set(RECIPE_ALIASES.values()) <= set(ALL_RECIPE_NAMES)
    listed = {n for names in RECIPE_FAMILIES.values() for n in names}
    assert set(ALL_RECIPE_NAMES) | set(RECIPE_ALIASES) | {"nvfp4"} == listed


def test_nvfp4_is_a_recipe_of_its_own_granularity():
    recipe = Recipe.from_name("nvfp4")
    assert recipe.name == "nvfp4" and recipe.is_nvfp4 and recipe.is_block_scaled
    with pytest.raises(RecipeError, match="dynamic only"):
        Recipe.from_name("nvfp4", {"weight": "delayed"})


def test_all_on_an_mx_part_adds_the_mxfp8_recipes_and_not_on_hopper():
    hopper = all_recipes(gpu=find_gpu("h100"))
    blackwell = all_recipes(gpu=find_gpu("b200"))
    assert not any(n.startswith(("mx", "nv")) for n in hopper)
    assert blackwell == (*hopper, "mxfp8_rceil", "mxfp8_rceil_wgrad_with_hp", "nvfp4")
    # MI355X runs MX gemms, not NVFP4's
    assert all_recipes(gpu=find_gpu("mi355x")) == (
        *hopper,
        "mxfp8_rceil",
        "mxfp8_rceil_wgrad_with_hp",
    )


def test_all_on_b200_resolves_the_mx_recipes_from_the_shipped_file():
    resolved = resolve(Request(gpu="b200", recipes="all"))
    assert "mxfp8_rceil" in [c.recipe.name for c in resolved.configs]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu", "h100", "--recipe", "nvfp4"], "h100 (sm_90) has no NVFP4 gemms"),
        (["--gpu", "h100", "--recipe", "mx"], "h100 (sm_90) has no MXFP8 gemms"),
        (["--gpu", "mi355x", "--recipe", "nvfp4"], "mi355x (gfx950) has no NVFP4 gemms"),
        (["--gpu", "b200", "--recipe", "mxfp9"], "unknown recipe 'mxfp9'; known: tensorwise"),
    ],
)
def test_a_recipe_refused_is_one_short_line(args, message):
    result = invoke_cli("estimate", *args, "--shape", "8192,8192,8192")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and len(lines[0]) <= 120 + len("Error: ")


def test_mxfp8_answers_as_mxfp8_rceil_on_b200():
    result = invoke_cli(
        "estimate", "--gpu", "b200", "--recipe", "mxfp8", "--shape", "8192,8192,8192"
    )
    assert result.exit_code == 0, result.output
    assert "mxfp8_rceil" in result.output.splitlines()[2]


def test_help_lists_every_recipe_per_family():
    text = " ".join(invoke_cli("estimate", "--help").output.split())
    for family, names in RECIPE_FAMILIES.items():
        assert f"{family}: {', '.join(names)}" in text
