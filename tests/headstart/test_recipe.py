"""Recipes with every part: each head kind's options checked by the kind's own dataclass, Medusa-2's joint
training by train/joint.py's, under the keys recipes have always used."""

import dataclasses
import re

import pytest
import yaml

from headstart.cli import main
from headstart.config import RecipeError, recipe_to_dict
from headstart.heads import REGISTRY
from headstart.recipe import load_recipe, recipe_parts
from headstart.train.joint import JointConfig
from tests.helpers import ROOT

#: the keys of the head and train sections before each kind owned its options (every one still a key)
HEAD_KEYS = ("block_size, draft_layers, draft_vocab_size, feature_layers, init_from, init_from_target, kind, num_heads, "
             "num_layers, parallel_drafting, parallel_tokens, shared_lm_head")
TRAIN_KEYS = ("backbone_loss, backbone_loss_weight, batch_size, bf16, ce_loss_weight, corpus_ngram, corpus_ngram_to"
              "kens, dataloader_workers, deepspeed, dflash_blocks, epochs, feature_loss_weight, feature_noise, free"
              "_hit_weight, grad_accum, head_loss_warmup, head_loss_weight, head_lr_multiplier, joint, logging_step"
              "s, lora_alpha, lora_dropout, lora_r, lora_targets, loss, loss_decay, loss_mix, lr, max_grad_norm, ma"
              "x_minutes, max_steps, output_dir, overwrite_output_dir, report_to, resume_from_checkpoint, save_step"
              "s, save_total_limit, scheduler, seed, ttt_steps, warmup_ratio, weight_decay")


def test_each_kind_owns_its_options_in_its_own_module():
    parts = recipe_parts()
    assert set(parts.kinds) == set(REGISTRY) and parts.joint is JointConfig
    for kind, cls in REGISTRY.items():
        assert cls.options_class.__module__ == cls.__module__, kind  # the dataclass beside the head it configures
    medusa = load_recipe(None, ["head.num_heads=4", "train.loss_decay=0.5"])
    assert medusa.head.options == REGISTRY["medusa"].options_class(num_heads=4)
    eagle3 = load_recipe(None, ["head.kind=eagle3", "head.parallel_drafting=true", "train.ttt_steps=2"])
    assert (eagle3.head.options.parallel_drafting, eagle3.head.options.ttt_steps, eagle3.train.loss_decay) == (True, 2, 0.8)
    assert not hasattr(eagle3.head.options, "num_heads") and not hasattr(eagle3.train, "ttt_steps")


@pytest.mark.parametrize("overrides, message", [
    (["head.kind=medusa", "head.parallel_drafting=true"],
     "head.parallel_drafting is an option of eagle3 heads, but head.kind is 'medusa': remove head.parallel_drafting, or set head.kind=eagle3"),
    (["head.kind=eagle3", "head.block_size=4"], "head.block_size is an option of dflash heads, but head.kind is 'eagle3'"),
    (["head.kind=eagle", "head.feature_layers=[1, 2, 3]"], "head.feature_layers is an option of dflash and eagle3 heads, but head.kind is 'eagle'"),
    (["head.num_head=4"], f"unknown recipe key 'head.num_head'; the keys of 'head' are: {HEAD_KEYS}"),
    (["train.ttt_step=4"], f"unknown recipe key 'train.ttt_step'; the keys of 'train' are: {TRAIN_KEYS}"),
    (["head.kind=medusa2"], "head.kind: unknown kind 'medusa2'; known: dflash, eagle, eagle3, medusa"),
    (["head.kind=eagle", "head.num_heads=2.5"], "head.num_heads: expected int"),  # another kind's key, checked as its kind does
    (["train.lora_r=0"], "train.lora_r: expected a value >= 1"),
])
def test_options_of_another_kind_or_of_none_are_refused_in_one_line(overrides, message):
    with pytest.raises(RecipeError, match="^recipe: " + re.escape(message)):
        load_recipe(None, overrides)


def test_a_field_of_another_kind_at_its_default_kind_is_left_out_as_before():
    """A train field of another kind (not opt-in) was accepted and unused: it still is, and not recorded."""
    recipe = load_recipe(None, ["head.kind=medusa", "train.ttt_steps=3", "head.num_heads=2"])
    assert "ttt_steps" not in recipe_to_dict(recipe)["train"]
    eagle = load_recipe(None, ["head.kind=eagle", "head.num_heads=2"])  # tests and recipes switch kind over a Medusa base
    assert "num_heads" not in recipe_to_dict(eagle)["head"]


def test_old_recipes_load_unchanged_and_round_trip(tmp_path):
    """Recipes written with the flat keys (train.joint, train.lora_r, train.ttt_steps, ...) load into their owners'
    dataclasses, and the recipe as data is laid out as its YAML."""
    medusa2 = load_recipe(ROOT / "recipes/smollm2-135m/medusa2.yaml")
    assert medusa2.joint == JointConfig(joint=True, lora_r=16, lora_alpha=32, lora_dropout=0.0, head_loss_weight=0.2,
                                        head_loss_warmup=0.1, head_lr_multiplier=60.0)
    assert medusa2.head.options.num_heads == 3 and medusa2.head.draft_vocab_size == 8192
    eagle = load_recipe(ROOT / "recipes/vicuna-7b-v1.3/eagle.yaml")
    assert (eagle.head.options.feature_noise, eagle.head.options.ce_loss_weight) == (0.2, 0.1)
    assert load_recipe(ROOT / "recipes/smollm2-135m/eagle3-parallel.yaml").head.options.ttt_steps == 4
    for path in sorted(ROOT.glob("recipes/*/*.yaml")):
        recipe = load_recipe(path)
        data = recipe_to_dict(recipe)
        assert "options" not in data["head"] and "joint" not in data and data["train"]["joint"] == recipe.joint.enabled
        again = tmp_path / path.name
        again.write_text(yaml.safe_dump(data))
        assert load_recipe(again) == recipe, path
        assert dataclasses.asdict(load_recipe(again).head.options) == dataclasses.asdict(recipe.head.options)


def test_the_cli_says_a_wrong_kind_option_in_one_line(capsys):
    assert main(["train", "recipes/smollm2-135m/eagle.yaml", "head.parallel_tokens=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "head.parallel_tokens is an option of eagle3 heads, but head.kind is 'eagle'" in err
