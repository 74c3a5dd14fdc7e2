"""Medusa-2: heads trained jointly with LoRA adapters on the target (train.joint)."""

import copy
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.adapter import add_adapter
from headstart.cli import main
from headstart.config import RecipeError
from headstart.decode.plain import greedy_generate
from headstart.heads.checkpoint import CheckpointError
from headstart.heads.export import ExportError, export
from headstart.heads.hub import head_files, model_card
from headstart.target import Target
from headstart.train.joint import lora_config
from headstart.train.trainer import train
from tests.helpers import assert_close, recipe


def fresh_copy(target: Target) -> Target:
    """The same base weights in a new Target (no adapter), as loading the target again would give."""
    return Target(copy.deepcopy(target.model), target.tokenizer, name=target.name)


def prompts(target, n=6):
    return [torch.tensor([target.tokenizer(f"count from {7 + 13 * i}").input_ids]) for i in range(n)]


def joint_recipe(tmp_path, *extra):
    return recipe(tmp_path, "train.joint=true", "train.lora_r=4", "train.lora_alpha=8", "train.lora_dropout=0.0", *extra)


def test_joint_steps_move_adapters_and_heads_not_the_base_weights(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_shaped_target
    base = {k: v.clone() for k, v in target.model.state_dict().items()}
    heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
    initial = {k: v.clone() for k, v in heads.state_dict().items()}
    summary = train(joint_recipe(tmp_path, "train.max_steps=3", "train.save_steps=100", "train.head_loss_warmup=0"), target, heads)
    assert summary.steps == 3 and target.adapter is not None
    for name, value in heads.state_dict().items():
        if name != "draft_ids":
            assert not torch.equal(value, initial[name]), f"head weight {name} did not move"
    now = target.model.state_dict()
    lora = {k: v for k, v in now.items() if "lora_" in k}
    assert lora and all(v.abs().sum() > 0 for k, v in lora.items() if "lora_B" in k), "the adapters did not move"
    for name, value in base.items():  # every base weight, under its LoRA-wrapped name where wrapped
        wrapped = name.replace(".weight", ".base_layer.weight").replace(".bias", ".base_layer.bias")
        assert torch.equal(now.get(name, now.get(wrapped)), value), f"base weight {name} changed"
    # Only head and adapter go to disk: PEFT's adapter files beside the head, no base weight.
    final = tmp_path / "run" / "final"
    config = json.loads((final / "config.json").read_text())
    assert config["adapter"]["weights"] == "adapter_model.safetensors"
    adapter = load_file(final / "adapter_model.safetensors")
    assert adapter and all("lora_" in k and k.startswith("base_model.model.") for k in adapter)
    assert not any(k.startswith(("model.", "lm_head")) for k in load_file(final / "model.safetensors"))


def heldout_kl(adapted: Target, base: Target) -> float:
    """Mean KL(base || adapted) of the next-token distributions over held-out prompt positions."""
    total, n = 0.0, 0
    for ids in prompts(adapted):
        a = adapted.logits(adapted(ids).hidden)[0].float().log_softmax(-1)
        b = base.logits(base(ids).hidden)[0].float().log_softmax(-1)
        total += torch.nn.functional.kl_div(a, b, log_target=True, reduction="sum").item()
        n += ids.shape[1]
    return total / n


def test_kl_bounds_the_divergence_and_reload_is_identical(tmp_path, smol_shaped_target):  # noqa: F811
    # A random tiny model's greedy output flips on any change (its next-token distributions are nearly
    # flat), so here the divergence is measured as the KL the loss controls; the share of changed greedy
    # outputs is measured on the real embedded model (test_embedded.py and scripts/bench_medusa2.py).
    target = smol_shaped_target
    base_target = fresh_copy(target)
    summary = train(joint_recipe(tmp_path, "train.max_steps=12", "train.lr=2e-3"), target)
    kl = heldout_kl(target, base_target)
    assert 0 < kl < 1e-2, kl  # measured 2.2e-4 nats per token

    # Reload on a fresh copy of the base target: the adapter comes back with the head, identically.
    reloaded_target = fresh_copy(base_target)
    heads = hs.load_heads(summary.final, target=reloaded_target)
    assert reloaded_target.adapter is not None
    ids = prompts(target)[0]
    # (Loading merges the adapter into the weights for speed: equal up to float32 rounding.)
    assert_close(reloaded_target(ids).hidden, target(ids).hidden, "merged adapter against the adapter layers")
    for name, value in hs.load_heads(summary.final, target=target).state_dict().items():
        assert torch.equal(heads.state_dict()[name], value)
    # Speculative decoding verifies with the adapted target: equal to its plain greedy output.
    out = hs.SpeculativeGenerator(reloaded_target, heads).generate(ids, 16, eos_token_id=[])
    assert torch.equal(out.sequences, greedy_generate(reloaded_target, ids, 16, eos_token_id=[]).sequences)


def test_merge_export_and_bad_input(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_shaped_target
    pristine = fresh_copy(target)
    summary = train(joint_recipe(tmp_path, "train.max_steps=2", "train.head_loss_warmup=0", "train.lr=1e-2"), target)
    final = str(summary.final)
    ids = prompts(target)[1]
    adapted_hidden = target(ids).hidden

    # Merged for serving (the command line's export --merged-target): the merged model computes what
    # the adapted one does, and the exported head names it as its target.
    pristine.model.save_pretrained(tmp_path / "base")
    pristine.tokenizer.save_pretrained(tmp_path / "base")
    merged_dir = tmp_path / "merged"
    assert main(["export", "--head", final, "--layout", "headstart", "--out", str(tmp_path / "for-merged"),
                 "--merged-target", str(merged_dir), f"target.name_or_path={tmp_path / 'base'}", "target.dtype=float32"]) == 0
    exported = json.loads((tmp_path / "for-merged" / "config.json").read_text())
    assert "adapter" not in exported and exported["target"]["name_or_path"] == str(merged_dir)
    merged = Target.from_pretrained(merged_dir, dtype=torch.float32)
    assert not any("lora" in k for k in merged.model.state_dict())
    assert_close(merged(ids).hidden, adapted_hidden, "exported merged target against the adapter layers")
    # A serving layout needs the merged target; our layout carries the adapter files along.
    with pytest.raises(ExportError, match="merged"):
        export(final, pristine, tmp_path / "vllm", "vllm-medusa")
    served = export(final, pristine, tmp_path / "vllm", "vllm-medusa", merged_target=str(merged_dir))
    assert (served / "config.json").is_file()
    ours = export(final, None, tmp_path / "ours", "headstart")
    assert (ours / "adapter_model.safetensors").is_file() and (ours / "adapter_config.json").is_file()
    # The Hub upload takes the adapter along, and the card says which model verifies.
    assert {f.name for f in head_files(Path(final))} >= {"adapter_config.json", "adapter_model.safetensors"}
    card = model_card(json.loads((Path(final) / "config.json").read_text()), "me/medusa2-head", [])
    assert "**adapted** target" in card

    # A target that already carries another adapter is refused, not silently double-adapted.
    other = fresh_copy(pristine)
    add_adapter(other, lora_config(joint_recipe(tmp_path).joint, other))
    with pytest.raises(CheckpointError, match="another adapter"):
        hs.load_heads(final, target=other)
    # A corrupt or missing adapter file is a clear error, and the target is left without half an adapter.
    broken = tmp_path / "broken"
    export(final, None, broken, "headstart")
    (broken / "adapter_model.safetensors").write_bytes(b"not a safetensors file")
    clean = fresh_copy(pristine)
    with pytest.raises(CheckpointError, match="corrupt"):
        hs.load_heads(broken, target=clean)
    assert clean.adapter is None
    (broken / "adapter_model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        hs.load_heads(broken, target=clean)
    # Recipes that cannot work are refused before anything runs.
    with pytest.raises(RecipeError, match="Medusa heads"):
        train(joint_recipe(tmp_path, "head.kind=eagle"), fresh_copy(pristine))
    with pytest.raises(RecipeError, match="features_dir"):
        train(joint_recipe(tmp_path, f"data.features_dir={tmp_path / 'cache'}"), fresh_copy(pristine))
    with pytest.raises(RecipeError, match="backbone_loss"):
        train(joint_recipe(tmp_path, "train.backbone_loss=mse"), fresh_copy(pristine))


def test_resume_restores_heads_and_adapter(tmp_path, smol_shaped_target):  # noqa: F811
    pristine = fresh_copy(smol_shaped_target)
    train(joint_recipe(tmp_path, "train.max_steps=4", "train.save_steps=2", "train.save_total_limit=5"), smol_shaped_target)
    run = tmp_path / "run"
    uninterrupted = load_file(run / "final" / "adapter_model.safetensors")
    # Resume from step 2 on a fresh target: the adapter of step 2 is restored, and the run ends where
    # the uninterrupted one did.
    resumed_target = fresh_copy(pristine)
    r = joint_recipe(tmp_path, "train.max_steps=4", "train.save_steps=2", f"train.resume_from_checkpoint={run / 'checkpoint-2'}",
                     f"train.output_dir={tmp_path / 'resumed'}")
    assert train(r, resumed_target).steps == 4
    resumed = load_file(tmp_path / "resumed" / "final" / "adapter_model.safetensors")
    assert sorted(resumed) == sorted(uninterrupted)
    for name in resumed:
        assert_close(resumed[name], uninterrupted[name], f"resumed {name}")
