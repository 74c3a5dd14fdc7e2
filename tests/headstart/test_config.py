import dataclasses
import typing

import pytest

from headstart.config import (
    Bounds,
    Recipe,
    RecipeError,
    override_keys,
    parse_override,
    section_fields,
    split_overrides,
)
from headstart.recipe import load_recipe, recipe_parts
from tests.helpers import ROOT

RECIPES = sorted(ROOT.glob("recipes/*/*.yaml"))


def test_there_are_recipes():
    names = {f"{p.parent.name}/{p.name}" for p in RECIPES}
    assert {
        "smollm2-135m/medusa.yaml", "smollm2-135m/eagle.yaml", "smollm2-135m/eagle3.yaml", "vicuna-7b-v1.3/medusa.yaml",
        "vicuna-7b-v1.3/eagle.yaml", "llama-3.1-8b-instruct/medusa.yaml", "llama-3.1-8b-instruct/eagle3.yaml",
        "qwen2.5-7b-instruct/eagle3.yaml", "smollm2-135m/medusa2.yaml", "vicuna-7b-v1.3/medusa2.yaml",
    } <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recipe_loads_and_opens_with_its_command(path):
    recipe = load_recipe(path)
    assert isinstance(recipe, Recipe)
    # recipes/<target>/<head kind>.yaml; medusa2.yaml trains Medusa heads jointly with LoRA adapters,
    # eagle3-parallel.yaml EAGLE-3 heads that draft in parallel (P-EAGLE), eagle3-long.yaml the long CPU recipe
    expected = {"medusa2": ("medusa", True, False), "eagle3-parallel": ("eagle3", False, True), "eagle3-long": ("eagle3", False, False)}
    kind, joint, parallel = expected.get(path.stem, (path.stem, False, False))
    assert (recipe.head.kind, recipe.joint.enabled, getattr(recipe.head.options, "parallel_drafting", False)) == (kind, joint, parallel)
    assert path.read_text().startswith(f"# headstart train recipes/{path.parent.name}/{path.name}")


def test_overrides_and_types():
    r = load_recipe(ROOT / "recipes/smollm2-135m/medusa.yaml", ["train.lr=3e-4", "head.num_heads=4", "data.train_files=[a.jsonl, b.jsonl]", "train.max_minutes=null"])
    assert r.train.lr == 3e-4 and r.head.options.num_heads == 4 and r.data.train_files == ["a.jsonl", "b.jsonl"]
    assert r.train.max_minutes is None
    assert parse_override("train.epochs=2") == ("train.epochs", 2)


def test_the_keys_a_command_line_sets_are_data():
    """The CLI records the dotted keys its overrides set (a mapping value key by key); decode's tree
    precedence reads the decode fields among them, never the override text."""
    keys = override_keys(["decode.total_tokens=5", "eval.num_prompts=2", "decode={depth: 3, top_k: 2}", "train={}"])
    assert keys == {"decode.total_tokens", "decode.depth", "decode.top_k", "eval.num_prompts", "train"}
    assert section_fields(keys, "decode") == {"total_tokens", "depth", "top_k"} and section_fields(keys, "head") == set()


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.lrr=1", "unknown recipe key 'train.lrr'"),
        ("trian.lr=1", "unknown recipe key 'trian'"),
        ("train.lr=fast", "train.lr: expected float, got str 'fast'"),
        ("head.num_heads=2.5", "head.num_heads: expected int"),
        ("head.shared_lm_head=3", "head.shared_lm_head: expected bool"),
        ("train.lr", "must look like section.key=value"),
    ],
)
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(None, [override])


def test_scripts_take_dotted_overrides_wherever_they_stand():
    """scripts/*.py: `--kinds eagle3 train.batch_size=4` must not hand the override to --kinds; option
    values holding '=' that are no dotted key (`--out=x`, JSON settings) stay with the options."""
    argv = ["--kinds", "eagle3", "train.batch_size=4", "--out=runs/a=b", "--settings", '{"k": "a=b"}',
            "decode.tree=[[0], [1]]", "r.yaml"]
    rest, overrides = split_overrides(argv)
    assert overrides == ["train.batch_size=4", "decode.tree=[[0], [1]]"]
    assert rest == ["--kinds", "eagle3", "--out=runs/a=b", "--settings", '{"k": "a=b"}', "r.yaml"]
    assert split_overrides(["lr=3"]) == (["lr=3"], [])  # no section: left to argparse (and refused by load_recipe)


def test_typo_in_a_recipe_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  learning_rate: 1e-3\n")
    with pytest.raises(RecipeError, match="unknown recipe key 'train.learning_rate'"):
        load_recipe(bad)
    bad.write_text("train: [1, 2\n")
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe(bad)
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe(tmp_path / "missing.yaml")


def _sections() -> list[type]:
    """Every dataclass a recipe is filled from: the core's sections, each head kind's options, joint training's."""
    hints = typing.get_type_hints(Recipe)
    parts = recipe_parts()
    return [hints[f.name] for f in dataclasses.fields(Recipe) if "part" not in f.metadata] + [*parts.kinds.values(), parts.joint]


def _numeric(tp) -> bool:
    """int or float, alone, optional or in a list (bool is not a number here)."""
    args = typing.get_args(tp)
    if args:
        return any(_numeric(a) for a in args if a is not type(None))
    return tp in (int, float)


def test_every_numeric_field_states_its_range_and_its_default_lies_in_it():
    unbounded = []
    for section in _sections():
        hints = typing.get_type_hints(section)
        for f in dataclasses.fields(section):
            if not _numeric(hints[f.name]):
                continue
            bounds = f.metadata.get("bounds")
            if bounds is None:
                unbounded.append(f"{section.__name__}.{f.name}")
                continue
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            values = default if isinstance(default, list) else [] if default is None else [default]
            assert all(v in bounds for v in values), f"{section.__name__}.{f.name}: default {default!r} is not {bounds}"
    # seeds take any integer; every other number has an obvious range
    assert sorted(unbounded) == ["DataConfig.seed", "DistillConfig.seed", "EvalConfig.seed", "TrainConfig.seed"]


def test_bounds_by_hand():
    top_p = Bounds(gt=0, le=1)
    assert str(top_p) == "> 0 and <= 1" and str(Bounds(ge=-1)) == ">= -1" and str(Bounds(ge=0, lt=1)) == ">= 0 and < 1"
    assert 1 in top_p and 0.5 in top_p and 0 not in top_p and 1.5 not in top_p and float("nan") not in top_p


@pytest.mark.parametrize(
    "override, message",
    [
        ("distill.temperature=-1", r"distill.temperature: expected a value >= 0, got -1.0 \[0 = greedy"),
        ("distill.top_p=1.5", r"distill.top_p: expected a value > 0 and <= 1, got 1.5"),
        ("distill.top_p=0", r"distill.top_p: expected a value > 0 and <= 1, got 0"),
        ("distill.max_new_tokens=-1", r"distill.max_new_tokens: expected a value >= 1 and <= 1048576 \(longer than any target's context window\), got -1"),
        ("head.draft_vocab_size=-5", r"head.draft_vocab_size: expected a value >= 1 and <= 4194304 \(larger than any vocabulary.*\), got -5"),
        ("head.draft_vocab_size=0", r"head.draft_vocab_size: expected a value >= 1 and <= 4194304 \(.*\), got 0"),
        ("eval.temperatures=[0, -0.5]", r"eval.temperatures\[1\]: expected a value >= 0, got -0.5"),
        ("head.feature_layers=[1, -2, 3]", r"head.feature_layers\[1\]: expected a value >= 0, got -2"),
        ("train.max_steps=-2", r"train.max_steps: expected a value >= -1, got -2"),
        ("train.lora_dropout=1", r"train.lora_dropout: expected a value >= 0 and < 1, got 1.0"),
        ("train.max_minutes=0", r"train.max_minutes: expected a value > 0, got 0"),
    ],
)
def test_numbers_out_of_range_name_the_key(override, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(RECIPES[0], [override])


def test_limits_and_empty_values_are_accepted():
    r = load_recipe(None, ["distill.top_p=1", "distill.temperature=0", "head.draft_vocab_size=null", "train.max_steps=-1",
                           "train.lora_dropout=0", "train.max_minutes=null", "eval.temperatures=[0, 0.7]"])
    assert (r.distill.top_p, r.distill.temperature, r.head.draft_vocab_size, r.train.max_steps) == (1.0, 0.0, None, -1)


def test_a_recipe_file_out_of_range_names_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("distill:\n  top_p: 1.5\n")
    with pytest.raises(RecipeError, match=r"bad\.yaml: distill.top_p: expected a value > 0 and <= 1, got 1.5"):
        load_recipe(bad)
