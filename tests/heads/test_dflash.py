"""The DFlash block drafter (heads/dflash.py) and its vLLM layout (heads/layout_dflash.py): the training
mask and anchors by hand, the loss from the blocks' outputs by hand, drafting against training, lossless
decoding on every architecture, training through the trainer, the layout's names, and the errors a user
can act on. vLLM loading and decoding the export: tests/end_to_end/test_vllm.py."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.config import RecipeError
from headstart.decode.contract import DraftState
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.errors import HeadstartError
from headstart.heads.dflash import (
    DFlashOptions,
    block_attention_mask,
    default_target_layers,
    dflash_loss,
    sample_anchors,
)
from headstart.heads.export import detect_layout, export, import_heads
from headstart.heads.layout_dflash import dflash_names
from headstart.heads.options import HeadOptionsError
from headstart.recipe import load_recipe
from headstart.train.features import batch_features
from headstart.train.trainer import build_head, train
from tests.helpers import (
    VOCAB,
    assert_close,
    assert_learns_one_draft_forward_per_step,
    assert_reloads_and_decodes_losslessly,
    batch_of,
    perturbed,
    smol_target,
    tiny_target,
    write_conversations,
)


def dflash_head(target, block_size: int = 4, seed: int = 0, **options):
    """A DFlash head with random (as if trained) weights."""
    return perturbed(hs.heads.build("dflash", target, block_size=block_size, **options), seed)


def fused(head, target, ids: torch.Tensor):
    """(features (B, T, F·D), target logits (B, T, V)) of `ids` for `head`."""
    out = batch_features(target, batch_of(ids), head.feature_layers)
    return torch.cat([out.features[i] for i in head.feature_layers], dim=-1), target.logits(out.hidden)


def test_block_mask_and_anchors_by_hand():
    # Anchors 0 and 2 of a T = 4 row, blocks of S = 2: each block sees the context up to its anchor and itself.
    allowed = block_attention_mask(torch.tensor([[0, 2]]), 4, 2)[0, 0]
    expected = torch.tensor([
        [1, 0, 0, 0, 1, 1, 0, 0],
        [1, 0, 0, 0, 1, 1, 0, 0],
        [1, 1, 1, 0, 0, 0, 1, 1],
        [1, 1, 1, 0, 0, 0, 1, 1],
    ], dtype=torch.bool)
    assert torch.equal(allowed, expected)
    # Anchors t need x_{t+2} to be an answer token: here t in {3, 4, 5} of a row of 8.
    loss_mask = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1]])
    anchors, valid = sample_anchors(loss_mask, 2, torch.Generator().manual_seed(0))
    assert valid.all() and set(anchors[0].tolist()) <= {3, 4, 5} and anchors.shape == (1, 2)
    anchors, valid = sample_anchors(loss_mask, 5, torch.Generator().manual_seed(1))  # fewer than asked: all of them
    assert anchors[0][valid[0]].tolist() == [3, 4, 5] and int(valid.sum()) == 3
    assert default_target_layers(36, 5) == [1, 9, 17, 25, 33]  # 5 draft layers on a 36-layer target: 1 .. n - 3
    assert default_target_layers(3, 2) == [1]


def test_loss_is_the_weighted_cross_entropy_of_each_position():
    target = tiny_target("llama")
    head = dflash_head(target, block_size=3, seed=2, feature_layers=[0, 2])
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(5))
    loss_mask = torch.ones_like(ids)
    loss_mask[0, :5] = 0  # a prompt: its tokens are not predicted
    feats, logits = fused(head, target, ids)
    anchors, valid = sample_anchors(loss_mask, 9)
    total, metrics = dflash_loss(head, feats, logits, ids, loss_mask, anchors, valid, decay=0.5)
    out = head.train_blocks(feats, ids, anchors)  # (B, M, S, D)
    expected = torch.zeros((), dtype=torch.float64)
    for i in range(2):
        ces = []
        for b in range(2):
            for m, t in enumerate(anchors[b].tolist()):
                if valid[b, m] and t + 2 + i < 9 and loss_mask[b, t + 2 + i]:
                    logq = head.draft_logits(out[b, m, i + 1]).double().log_softmax(-1)
                    ces.append(-(logits[b, t + 1 + i].double().softmax(-1) * logq).sum())
        ce = torch.stack(ces).mean()
        assert_close(torch.tensor(metrics[f"step{i}_ce"]), ce, f"position {i}'s cross-entropy", dtype=torch.float32)
        expected += 0.5**i * ce
    assert_close(total.double(), expected, "the loss", dtype=torch.float32)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_drafting_computes_what_training_computes(arch):
    """The drafter's block after a prefill, then after a committed path (its cache kept between the two calls),
    is the training forward's block at those anchors: the same logits, the same chain."""
    target = tiny_target(arch)
    head = dflash_head(target, block_size=4, seed=3, feature_layers=[0, 1, 2])
    ids = torch.randint(0, VOCAB, (1, 14), generator=torch.Generator().manual_seed(7))
    feats, _ = fused(head, target, ids)
    train_out = head.train_blocks(feats, ids, torch.tensor([[5, 8]]))  # anchors: the last committed positions
    chain = DynamicTreeSpec(depth=3, top_k=1, total_tokens=3)
    drafter = head.drafter()
    for m, (start, end) in enumerate([(0, 6), (6, 9)]):  # the prompt x_0..x_5, then a committed path x_6..x_8
        state = DraftState(hidden=None, root=ids[0, end : end + 1], features=feats[:, start:end],
                           committed=ids[:, start:end], start=start)
        proposal = drafter.propose(state, chain)
        logits = head.draft_logits(train_out[0, m, 1:])  # (K, V)
        assert proposal.tokens[0].tolist() == logits.argmax(-1).tolist(), (start, end)
        assert drafter.cache.get_seq_length() == end  # the block's keys were never cached
        context = head.context_kv(feats[:, :end], torch.arange(end)[None])
        tokens = torch.tensor([[int(ids[0, end])] + [head.options["mask_token_id"]] * 3])
        alone = head.draft_logits(head.blocks(tokens, torch.arange(end, end + 4)[None], context, None)[0, 1:])
        assert_close(alone, logits, "a block alone vs. in the training forward", dtype=torch.float32)


def test_greedy_speculative_equals_plain_on_every_arch(arch):
    target = tiny_target(arch)
    head = dflash_head(target, block_size=5, seed=1, feature_layers=[0, 2])
    prompts = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    ref = greedy_generate(target, prompts, 24, eos_token_id=[])
    for depth, top_k, total in [(4, 1, 4), (3, 3, 8)]:  # a chain, a tree
        out = SpeculativeGenerator(target, head, depth=depth, top_k=top_k, total_tokens=total).generate(
            prompts, 24, eos_token_id=[]
        )
        assert torch.equal(out.sequences, ref.sequences), (arch, depth, top_k, total)


def test_learns_to_draft_a_block_per_forward():
    """Trained on the target's own continuations it drafts well; decoding stays exact, and each step costs one
    block forward of the draft layers (the newly committed positions' context included)."""
    target = tiny_target("llama", seed=1)
    head = hs.heads.build("dflash", target, block_size=4, feature_layers=[0, 2])
    assert_learns_one_draft_forward_per_step(target, head, head.layers[0].self_attn.q_proj, DFlashOptions(dflash_blocks=32))


def test_one_step_moves_the_head_not_the_target_and_reloads(tmp_path, smol_shaped_target):
    target = smol_target(smol_shaped_target.tokenizer, layers=3)
    write_conversations(tmp_path / "conv.jsonl")
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}", "head.kind=dflash",
        "head.block_size=4", "head.draft_layers=2", "head.feature_layers=[0,2]", "train.dflash_blocks=8",
        "data.eval_size=8", "data.max_length=64", "train.batch_size=4", "train.bf16=false", "train.lr=1e-2",
        "train.max_steps=2", "train.save_steps=100", "train.logging_steps=1",
        "decode.depth=3", "decode.top_k=2", "decode.total_tokens=5",
    ])
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    head = build_head(recipe, target, [])
    assert head.block_size == 4 and len(head.layers) == 2 and head.feature_layers == (0, 2)
    assert head.default_tree == DynamicTreeSpec(depth=3, top_k=2, total_tokens=5)
    initial = {k: v.clone() for k, v in head.state_dict().items()}
    summary = train(recipe, target, head)
    for name, _ in head.named_parameters():
        assert not torch.equal(head.state_dict()[name], initial[name]), f"{name} did not move"
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    assert not any(k.startswith(("embed", "lm_head")) for k in head.state_dict())  # the target's, never saved
    assert len(summary.heldout["top1"]) == 3 and summary.heldout["sim_accept_length"] >= 1.0  # per position
    loaded = assert_reloads_and_decodes_losslessly(summary, target)
    assert loaded.block_size == 4 and loaded.options["mask_token_id"] == head.options["mask_token_id"]


def test_layout_names_config_and_import_back(tmp_path):
    """The dflash layout holds exactly the tensors vLLM's qwen3_dflash loader reads, under its names, and the
    config fields it reads; importing it (ours, or without our block) gives the same head."""
    target = tiny_target("qwen3")
    head = dflash_head(target, block_size=4, seed=4, feature_layers=[0, 2], draft_layers=2)
    folder = export(head, target, tmp_path / "serve", "dflash")
    config = json.loads((folder / "config.json").read_text())
    tensors = load_file(folder / "model.safetensors")
    assert sorted(tensors) == sorted(dflash_names(config))
    assert {"fc.weight", "hidden_norm.weight", "norm.weight", "layers.1.self_attn.k_norm.weight",
            "layers.0.mlp.gate_proj.weight"} <= set(tensors)
    assert not any(k.startswith(("embed_tokens", "lm_head", "mask")) for k in tensors)  # shared with the target
    assert config["architectures"] == ["DFlashDraftModel"] and config["model_type"] == "qwen3"
    assert config["dflash_config"] == {"target_layer_ids": [0, 2], "mask_token_id": VOCAB - 1}
    assert config["block_size"] == 4 and config["num_hidden_layers"] == 2 and config["target_hidden_size"] == 32
    assert config["layer_types"] == ["full_attention"] * 2 and config["torch_dtype"] == "float32"
    assert (config["head_dim"], config["num_key_value_heads"], config["hidden_act"]) == (8, 2, "silu")
    assert tensors["fc.weight"].shape == (32, 64) and torch.equal(tensors["fc.weight"], head.fc.weight)
    assert detect_layout(folder) == "dflash"
    del config["headstart"]  # a DFlash draft from elsewhere: options from the layout's own fields
    (folder / "config.json").write_text(json.dumps(config))
    for back in (import_heads(folder, target), import_heads(export(head, target, tmp_path / "ours", "dflash"), target)):
        assert back.block_size == 4 and back.feature_layers == (0, 2) and len(back.layers) == 2
        assert back.default_tree == head.default_tree == DynamicTreeSpec(depth=3)
        for name, value in head.state_dict().items():
            assert torch.equal(back.state_dict()[name], value), name
    bf16 = load_file(export(head, target, tmp_path / "bf16", "dflash", dtype=torch.bfloat16) / "model.safetensors")
    assert bf16["fc.weight"].dtype == torch.bfloat16


def test_bad_options_give_clear_errors():
    target = tiny_target("llama")
    head = hs.heads.build("dflash", target)
    assert head.block_size == 8 and len(head.layers) == 2 and head.default_tree == DynamicTreeSpec(depth=5)
    assert hs.heads.build("dflash", target, block_size=3).default_tree.depth == 2  # the default tree: K deep at most
    with pytest.raises(RecipeError, match=r"head.block_size: expected a value >= 2"):
        load_recipe(None, ["head.kind=dflash", "head.block_size=1"])
    with pytest.raises(RecipeError, match="head.block_size is an option of dflash heads, but head.kind is 'eagle3'"):
        load_recipe(None, ["head.kind=eagle3", "head.block_size=4"])  # as the recipe loads
    cases = [
        (lambda: hs.heads.build("dflash", target, draft_vocab=torch.arange(10)), "whole vocabulary"),
        (lambda: hs.heads.build("dflash", target, block_size=1), "block_size=1"),
        (lambda: hs.heads.build("dflash", target, draft_layers=0), "draft_layers=0"),
        (lambda: hs.heads.build("dflash", target, mask_token_id=VOCAB), f"mask_token_id={VOCAB}"),
        (lambda: hs.heads.build("dflash", target, feature_layers=[2, 0]), "ascending"),
        (lambda: hs.heads.build("dflash", target, feature_layers=[3]), r"in \[0, 3\)"),
        (lambda: hs.heads.build("dflash", target, block_size=3, tree={"depth": 5}), "a tree 5 deep cannot be filled: decode with depth <= 2"),
        (lambda: hs.heads.build("dflash", target, init_from_target=True), "init_from_target"),
        (lambda: SpeculativeGenerator(target, head, depth=8, top_k=1, total_tokens=8).generate(torch.tensor([[1, 2, 3]]), 4),
         "decode with depth <= 7"),
    ]
    for call, message in cases:
        with pytest.raises(HeadOptionsError, match=message) as info:
            call()
        assert isinstance(info.value, HeadstartError)
