"""init_from_target: an EAGLE / EAGLE-3 draft layer that starts from the target's own last decoder layer
(heads/init_from_target.py), on every tiny architecture."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import headstart as hs
from headstart.config import RecipeError
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.heads.init_from_target import DRAFT_LAYER, TargetLayerCopy
from headstart.heads.options import HeadOptionsError
from headstart.heads.reading import read_safetensors
from headstart.recipe import load_recipe
from headstart.train.trainer import build_head, train
from tests.helpers import VOCAB, assert_close, smol_target, tiny_target, write_conversations

KINDS = ["eagle", "eagle3"]
ATTENTION = [f"self_attn.{p}_proj.weight" for p in "qkv"]
MLP = [f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
#: target-layer parameters that EAGLE-3's Llama-shaped layer has no place for, by architecture
EAGLE3_UNUSED = {
    "llama": set(),
    "mistral": set(),
    "qwen2": {f"self_attn.{p}_proj.bias" for p in "qkv"},
    "qwen3": {"self_attn.q_norm.weight", "self_attn.k_norm.weight"},
    "gemma3": {"self_attn.q_norm.weight", "self_attn.k_norm.weight", "post_attention_layernorm.weight",
               "post_feedforward_layernorm.weight"},
}


def randomised(target, seed=3):
    """`target` with noise on every weight, norms included (they start at ones or zeros), so that each copy shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in target.model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return target


def built(kind, target, **options):
    """A head built from a fixed seed: two builds differ only by what the options change."""
    torch.manual_seed(7)
    return hs.heads.build(kind, target, **options)


def target_state(target) -> dict:
    return {k: v.clone() for k, v in target.model.state_dict().items()}


def expected_record(kind, arch, source) -> dict:
    """The record the rule gives, written out by hand per kind (EAGLE's layer is the target's own class)."""
    names = [n for n, _ in source.named_parameters()]
    if kind == "eagle":  # every parameter by name, but the input norm EAGLE removes
        copied = {f"layer.{n}": n for n in names if n != "input_layernorm.weight"}
        return {"copied": copied, "features_slice": {}, "kept": [], "unused": {"input_layernorm.weight"}}
    pre_mlp = "pre_feedforward_layernorm.weight" if arch == "gemma3" else "post_attention_layernorm.weight"
    copied = {f"midlayer.{n}": n for n in ["self_attn.o_proj.weight", *MLP]}
    copied |= {"midlayer.hidden_norm.weight": "input_layernorm.weight", "midlayer.post_attention_layernorm.weight": pre_mlp}
    return {"copied": copied, "features_slice": {f"midlayer.{n}": n for n in ATTENTION},
            "kept": ["midlayer.input_layernorm.weight"], "unused": EAGLE3_UNUSED[arch]}


@pytest.mark.parametrize("kind", KINDS)
def test_the_draft_layer_starts_from_the_target_last_layer(arch, kind):
    target = randomised(tiny_target(arch))
    plain, head = built(kind, target), built(kind, target, init_from_target=True)
    source, d = target.layers[-1], target.hidden_size
    assert isinstance(head.layer_copy, TargetLayerCopy) and "init_from_target" not in head.options
    record = head.layer_copy.to_json()
    expected = expected_record(kind, arch, source)
    assert record["layer"] == target.num_layers - 1
    assert record["copied"] == expected["copied"] and record["features_slice"] == expected["features_slice"]
    assert record["kept"] == expected["kept"] and set(record["unused"]) == expected["unused"]
    state, initial = head.state_dict(), plain.state_dict()
    for dest, src in record["copied"].items():
        want = source.get_parameter(src)
        if kind == "eagle3" and dest.endswith("norm.weight"):
            # Gemma's norms scale by 1 + weight, the Llama-shaped draft's by weight: the same gain.
            want = want + 1.0 if arch == "gemma3" else want
            norm, theirs = head.get_submodule(dest.removesuffix(".weight")), source.get_submodule(src.removesuffix(".weight"))
            x = torch.randn(5, d, generator=torch.Generator().manual_seed(1))
            assert_close(norm(x), theirs(x), f"{dest} applies {src}'s gain")
        assert torch.equal(state[dest], want), f"{dest} is not {src}"
    for dest, src in record["features_slice"].items():
        assert torch.equal(state[dest][:, d:], source.get_parameter(src)), f"{dest}: the features half is {src}"
        assert torch.equal(state[dest][:, :d], initial[dest][:, :d]), f"{dest}: the embedding half keeps its init"
    touched = set(record["copied"]) | set(record["features_slice"])
    for name, value in initial.items():
        if name not in touched:
            assert torch.equal(state[name], value), f"{name} is not the draft layer's copy and must not change"


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_option_nothing_changes(kind):
    target = randomised(tiny_target("llama"))
    plain, unset = built(kind, target), built(kind, target, init_from_target=False)
    assert plain.options == unset.options and plain.layer_copy is None and unset.layer_copy is None
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), unset.state_dict().values()))
    recipe = load_recipe(None, [f"head.kind={kind}"])
    assert recipe.head.init_from_target is False
    assert build_head(recipe, target, []).layer_copy is None


@pytest.mark.parametrize("kind", KINDS)
def test_the_target_is_untouched_and_shares_no_storage(arch, kind):
    target = randomised(tiny_target(arch))
    before = target_state(target)
    head = built(kind, target, init_from_target=True)
    ours = {p.untyped_storage().data_ptr() for p in head.parameters()}
    theirs = {p.untyped_storage().data_ptr() for p in target.model.parameters()}
    assert not ours & theirs, "a head parameter shares storage with the target"
    with torch.no_grad():
        for p in head.parameters():
            p.add_(1.0)
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"


@pytest.mark.parametrize("kind", KINDS)
def test_training_moves_the_head_not_the_target_and_the_record_round_trips(tmp_path, smol_tokenizer, kind):
    target = randomised(smol_target(smol_tokenizer, layers=3))
    write_conversations(tmp_path / "conv.jsonl")
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}", f"head.kind={kind}",
        "head.init_from_target=true", "head.draft_vocab_size=300", "data.eval_size=8", "data.max_length=64",
        "train.batch_size=4", "train.bf16=false", "train.lr=1e-2", "train.max_steps=2", "train.save_steps=100",
        "train.logging_steps=1", "train.ttt_steps=2", "decode.depth=3", "decode.top_k=2", "decode.total_tokens=5",
    ])
    head = build_head(recipe, target, [])  # the recipe's path: head.init_from_target reaches hs.heads.build
    record = head.layer_copy.to_json()
    assert record["copied"] and record["layer"] == 2
    before, initial = target_state(target), {k: v.clone() for k, v in head.state_dict().items()}
    summary = train(recipe, target, head)
    for name, _ in head.named_parameters():
        assert not torch.equal(head.state_dict()[name], initial[name]), f"{name} did not move"
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    final = tmp_path / "run" / "final"
    config = json.loads((final / "config.json").read_text())
    assert config["head"]["init_from_target"] == record and config["recipe"]["head"]["init_from_target"] is True
    saved = read_safetensors(final / "model.safetensors")
    assert set(saved) == set(head.state_dict()), "the head saves its own tensors and no target weight"
    loaded = hs.load_heads(summary.final, target=target)
    assert loaded.layer_copy == head.layer_copy and loaded.layer_copy.to_json() == record
    for name, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value.to(loaded.state_dict()[name].dtype)), name


def test_a_parallel_drafting_head_starts_from_the_target_and_stays_lossless():
    target = randomised(tiny_target("llama"))
    plain = built("eagle3", target, parallel_drafting=True)
    head = built("eagle3", target, parallel_drafting=True, init_from_target=True)
    sequential = built("eagle3", target, init_from_target=True)
    assert head.layer_copy == sequential.layer_copy
    for name in head.layer_copy.copied:
        assert torch.equal(head.state_dict()[name], sequential.state_dict()[name]), name
    assert torch.equal(head.mask_hidden, plain.mask_hidden)  # not part of the draft layer: as initialised
    prompts = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    ref = greedy_generate(target, prompts, 20, eos_token_id=[])
    out = SpeculativeGenerator(target, head.eval(), depth=3, top_k=2, total_tokens=5).generate(prompts, 20, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)


@pytest.mark.parametrize("kind", KINDS)
def test_the_nearest_fitting_layer_is_used_and_none_is_refused(kind):
    target = randomised(tiny_target("llama"))
    d = target.hidden_size
    target.layers[-1].self_attn.q_proj = nn.Linear(d, 24, bias=False)  # a last layer of another attention shape
    head = built(kind, target, init_from_target=True)
    assert head.layer_copy.layer == target.num_layers - 2
    prefix = DRAFT_LAYER[kind]
    assert torch.equal(head.state_dict()[f"{prefix}.self_attn.o_proj.weight"], target.layers[-2].self_attn.o_proj.weight)
    for layer in target.layers:
        layer.self_attn.q_proj = nn.Linear(d, 24, bias=False)
    with pytest.raises(HeadOptionsError, match="no decoder layer of 'tiny-llama' has attention projections that fit"):
        built(kind, target, init_from_target=True)


def test_heads_without_a_draft_layer_and_conflicting_options_are_refused(tmp_path, smol_tokenizer):
    target = tiny_target("llama")
    message = "init_from_target: a medusa head has no decoder layer"
    with pytest.raises(HeadOptionsError, match=message):
        hs.heads.build("medusa", target, init_from_target=True)
    with pytest.raises(HeadOptionsError, match=message):
        build_head(load_recipe(None, ["head.kind=medusa", "head.init_from_target=true"]), target, [])
    write_conversations(tmp_path / "conv.jsonl")
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}", "head.kind=eagle3",
        "head.init_from_target=true", f"head.init_from={tmp_path / 'trained'}", "data.eval_size=8",
    ])
    with pytest.raises(RecipeError, match="head.init_from .* head.init_from_target starts a new one"):
        train(recipe, smol_target(smol_tokenizer, layers=3))
