from pathlib import Path

import pytest

from headstart.config import Recipe, RecipeError, load_recipe, parse_override

RECIPES = sorted(Path(__file__).resolve().parents[1].glob("recipes/*/*.yaml"))


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
    # recipes/<target>/<head kind>.yaml; medusa2.yaml trains Medusa heads jointly with LoRA adapters
    assert (recipe.head.kind, recipe.train.joint) == (("medusa", True) if path.stem == "medusa2" else (path.stem, False))
    assert path.read_text().startswith(f"# headstart train recipes/{path.parent.name}/{path.name}")


def test_overrides_and_types():
    r = load_recipe(RECIPES[0], ["train.lr=3e-4", "head.num_heads=4", "data.train_files=[a.jsonl, b.jsonl]", "train.max_minutes=null"])
    assert r.train.lr == 3e-4 and r.head.num_heads == 4 and r.data.train_files == ["a.jsonl", "b.jsonl"]
    assert r.train.max_minutes is None
    assert parse_override("train.epochs=2") == ("train.epochs", 2)


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
