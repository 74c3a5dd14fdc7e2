"""P-EAGLE parallel drafting (heads/parallel.py): the block mask and the tree by hand, the batched loss
against one anchor at a time, drafting against training, lossless decoding on every architecture,
training, save/load, recipe fields and the errors a user can act on."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.config import RecipeError
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.errors import HeadstartError
from headstart.heads.eagle3 import Eagle3Options
from headstart.heads.export import ExportError, export, import_heads
from headstart.heads.options import HeadOptionsError
from headstart.heads.parallel import block_mask, mask_feature, parallel_loss, parallel_tree
from headstart.recipe import load_recipe
from headstart.target import float_mask
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


def parallel_head(target, k: int = 3, seed: int = 0, draft_vocab=None):
    """A parallel head with random (as if trained) weights, mask_hidden included."""
    return perturbed(hs.heads.build("eagle3", target, draft_vocab=draft_vocab, parallel_drafting=True, parallel_tokens=k), seed)


def fused(head, target, ids: torch.Tensor):
    """(features (B, T, 3D), target logits (B, T, V)) of `ids` for `head`."""
    out = batch_features(target, batch_of(ids), head.feature_layers)
    return torch.cat([out.features[i] for i in head.feature_layers], dim=-1), target.logits(out.hidden)


def one_anchor(head, feats: torch.Tensor, ids: torch.Tensor, t: int) -> torch.Tensor:
    """(K, N) draft logits after anchor t of one row, computed alone: the true slots 0..t, then K - 1
    placeholder slots at positions t + 1.., causal (what vLLM's drafter runs)."""
    k, d = head.parallel_tokens, head.options["hidden_size"]
    hidden = torch.cat([head.input_features(feats[None, : t + 1]), mask_feature(head).expand(1, k - 1, d)], dim=1)
    tokens = torch.cat([ids[1 : t + 2], ids.new_full((k - 1,), head.options["ptd_token_id"])])[None]  # x_1..x_{t+1}, ptd
    n = t + k
    out = head.step(hidden, tokens, torch.arange(n)[None], float_mask(torch.ones(n, n, dtype=torch.bool).tril(), head.dtype))
    return head.draft_logits(out[0, t:])


def test_block_mask_attends_exactly_the_right_keys():
    # T = 3 anchors, K = 3: true slots 0..2, then depth-1 placeholders of anchors 0..2, then depth-2 ones.
    allowed = block_mask(3, 3, torch.float32, "cpu")[0, 0] == 0
    expected = torch.tensor([
        [1, 0, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 1, 0, 0, 0],
        [1, 0, 0, 1, 0, 0, 1, 0, 0],
        [1, 1, 0, 0, 1, 0, 0, 1, 0],
        [1, 1, 1, 0, 0, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(allowed, expected)


def test_the_tree_keeps_the_most_probable_paths():
    # Position 1: tokens 2 (0.6), 0 (0.3); position 2: token 1 (0.5), 3 (0.4); position 3: token 0 (0.9).
    probs = torch.tensor([[0.3, 0.05, 0.6, 0.05], [0.05, 0.5, 0.05, 0.4], [0.9, 0.04, 0.03, 0.03]])
    ids = torch.tensor([10, 11, 12, 13])  # draft id -> target id
    tokens, tree = parallel_tree(probs.log(), DynamicTreeSpec(depth=3, top_k=1, total_tokens=3), ids)
    assert tree.paths == ((0,), (0, 0), (0, 0, 0)) and tokens.tolist() == [12, 11, 10]  # the chain
    tokens, tree = parallel_tree(probs.log(), DynamicTreeSpec(depth=3, top_k=2, total_tokens=4), ids)
    # Values: (0,) .6, (1,) .3, (0,0) .3, (0,1) .24, (0,0,0) .27: the best four, closed under ancestors.
    assert tree.paths == ((0,), (1,), (0, 0), (0, 0, 0)) and tokens.tolist() == [12, 10, 11, 10]
    tokens, tree = parallel_tree(probs.log(), DynamicTreeSpec(depth=2, top_k=2, total_tokens=9), ids)
    assert tree.size == 6 and tree.max_depth == 2  # the whole 2 + 4 product, two positions deep


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_batched_loss_equals_one_anchor_at_a_time(arch):
    target = tiny_target(arch)
    head = parallel_head(target, k=3, seed=2, draft_vocab=torch.arange(0, VOCAB, 2))
    ids = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(5))
    loss_mask = torch.ones_like(ids)
    loss_mask[0, :4] = 0  # a prompt: its tokens are not predicted
    feats, logits = fused(head, target, ids)
    rows = head.draft_ids
    total, metrics = parallel_loss(head, feats, logits[..., rows], ids, loss_mask, decay=0.8)
    expected = torch.zeros((), dtype=torch.float64)
    for j in range(3):
        ces = []
        for b in range(2):
            for t in range(10 - 2 - j):
                if loss_mask[b, t + 2 + j]:
                    logq = one_anchor(head, feats[b], ids[b], t)[j].double().log_softmax(-1)
                    p = logits[b, t + 1 + j, rows].double().softmax(-1)
                    ces.append(-(p * logq).sum())
        ce = torch.stack(ces).mean()
        assert_close(torch.tensor(metrics[f"step{j}_ce"]), ce, f"position {j}'s cross-entropy", dtype=torch.float32)
        expected += 0.8**j * ce
    assert_close(total.double(), expected, "the loss, every anchor in one forward", dtype=torch.float32)


def test_drafting_computes_what_training_computes():
    """The drafter's chain after a prefill, then after a committed path (its cache kept between the two
    calls), is the argmax of the training forward's outputs at those anchors."""
    from headstart.decode.contract import DraftState

    target = tiny_target("llama")
    head = parallel_head(target, k=3, seed=3)
    ids = torch.randint(0, VOCAB, (1, 14), generator=torch.Generator().manual_seed(7))
    feats, logits = fused(head, target, ids)
    chain = DynamicTreeSpec(depth=3, top_k=1, total_tokens=3)
    drafter = head.drafter()
    for start, end in [(0, 6), (6, 9)]:  # the prompt x_0..x_5, then a committed path x_6..x_8
        state = DraftState(hidden=None, root=ids[0, end : end + 1], features=feats[:, start:end],
                           committed=ids[:, start:end], start=start)
        proposal = drafter.propose(state, chain)
        expected = one_anchor(head, feats[0], ids[0], end - 1).argmax(-1)  # anchor: the last committed position
        assert proposal.tokens[0].tolist() == head.draft_ids[expected].tolist(), (start, end)
        assert drafter.cache.get_seq_length() == end  # the placeholders' entries were dropped


def test_greedy_speculative_equals_plain_on_every_arch(arch):
    target = tiny_target(arch)
    head = parallel_head(target, k=4, seed=1, draft_vocab=torch.arange(0, VOCAB, 2))
    prompts = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    ref = greedy_generate(target, prompts, 24, eos_token_id=[])
    for depth, top_k, total in [(4, 1, 4), (3, 3, 8)]:
        out = SpeculativeGenerator(target, head, depth=depth, top_k=top_k, total_tokens=total).generate(
            prompts, 24, eos_token_id=[]
        )
        assert torch.equal(out.sequences, ref.sequences), (arch, depth, top_k, total)


def test_learns_to_draft_in_one_forward_per_step():
    """Trained on the target's own continuations it drafts well; decoding stays exact, and each step
    costs one forward of the draft layer, the newly committed positions included."""
    target = tiny_target("llama", seed=1)
    head = hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=3)
    assert_learns_one_draft_forward_per_step(target, head, head.midlayer.self_attn.o_proj, Eagle3Options())


def test_one_step_moves_the_head_not_the_target_and_reloads(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_target(smol_shaped_target.tokenizer, layers=3)
    write_conversations(tmp_path / "conv.jsonl")
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}", "head.kind=eagle3",
        "head.parallel_drafting=true", "head.parallel_tokens=3", "head.draft_vocab_size=300",
        "data.eval_size=8", "data.max_length=64", "train.batch_size=4", "train.bf16=false", "train.lr=1e-2",
        "train.max_steps=2", "train.save_steps=100", "train.logging_steps=1",
        "decode.depth=3", "decode.top_k=2", "decode.total_tokens=5",
    ])
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    head = build_head(recipe, target, [])
    assert head.parallel_tokens == 3 and head.default_tree == DynamicTreeSpec(3, 2, 5)
    initial = {k: v.clone() for k, v in head.state_dict().items()}
    summary = train(recipe, target, head)
    for name, _ in head.named_parameters():
        assert not torch.equal(head.state_dict()[name], initial[name]), f"{name} did not move"
    assert "mask_hidden" in dict(head.named_parameters())
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    assert len(summary.heldout["top1"]) == 3 and summary.heldout["sim_accept_length"] >= 1.0  # per position
    loaded = assert_reloads_and_decodes_losslessly(summary, target)
    assert loaded.parallel_tokens == 3 and loaded.options["ptd_token_id"] == head.options["ptd_token_id"]


def test_export_for_vllm_and_import_back(tmp_path):
    """The eagle3 layout carries mask_hidden and the placeholder token where vLLM reads them; importing
    gives the same head (K from our own block; without it, the default K and the same first drafts)."""
    target = tiny_target("llama")
    head = parallel_head(target, k=3, seed=4, draft_vocab=torch.arange(0, VOCAB, 2))
    folder = export(head, target, tmp_path / "serve", "eagle3")
    config = json.loads((folder / "config.json").read_text())
    assert config["parallel_drafting"] is True and config["ptd_token_id"] == head.options["ptd_token_id"]
    assert torch.equal(load_file(folder / "model.safetensors")["mask_hidden"], head.mask_hidden)
    back = import_heads(folder, target, "eagle3")
    assert back.parallel_tokens == 3 and back.options["ptd_token_id"] == head.options["ptd_token_id"]
    for name, value in head.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name
    prompts = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(2))
    chain = {"depth": 3, "top_k": 1, "total_tokens": 3}
    ours = SpeculativeGenerator(target, head, **chain).generate(prompts, 16, eos_token_id=[], record_steps=True)
    del config["headstart"]  # a P-EAGLE draft in the eagle3 layout from elsewhere: K is not recorded
    (folder / "config.json").write_text(json.dumps(config))
    other = import_heads(folder, target, "eagle3")
    assert other.parallel_tokens == 4 and torch.equal(other.mask_hidden, head.mask_hidden)
    theirs = SpeculativeGenerator(target, other, **chain).generate(prompts, 16, eos_token_id=[], record_steps=True)
    assert theirs.steps == ours.steps  # the first K drafts do not depend on the placeholders after them
    with pytest.raises(ExportError, match="--layout eagle3"):
        export(head, target, tmp_path / "spec", "speculators")


def test_an_ordinary_eagle3_head_is_unchanged():
    head = hs.heads.build("eagle3", tiny_target("llama"))
    assert "mask_hidden" not in head.state_dict() and head.parallel_tokens is None
    assert not {"parallel_drafting", "parallel_tokens", "ptd_token_id"} & set(head.options)


def test_recipe_fields_and_bad_values_give_clear_errors():
    target = tiny_target("llama")
    recipe = load_recipe(None, ["head.kind=eagle3", "head.parallel_drafting=true", "decode.depth=4"])
    head = build_head(recipe, target, [])
    assert head.parallel_tokens == 4 and head.default_tree.depth == 4  # K = 4 by default
    assert hs.heads.build("eagle3", target, parallel_drafting=True).default_tree.depth == 4  # the default tree: K deep
    with pytest.raises(RecipeError, match=r"head.parallel_tokens: expected a value >= 2"):
        load_recipe(None, ["head.kind=eagle3", "head.parallel_drafting=true", "head.parallel_tokens=1"])
    with pytest.raises(RecipeError, match="head.parallel_drafting is an option of eagle3 heads, but head.kind is 'medusa'"):
        load_recipe(None, ["head.kind=medusa", "head.parallel_drafting=true"])  # as the recipe loads
    cases = [
        (lambda: build_head(load_recipe(None, ["head.kind=eagle3", "head.parallel_drafting=true"]), target, []),
         r"a tree 5 deep cannot be filled: decode with depth <= 4 \(decode.depth\)"),
        (lambda: hs.heads.build("medusa", target, parallel_drafting=True), "a medusa head takes no option 'parallel_drafting'"),
        (lambda: hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=1), "K >= 2"),
        (lambda: hs.heads.build("eagle3", target, parallel_tokens=3), "parallel_tokens set on a head without parallel drafting"),
        (lambda: hs.heads.build("eagle3", target, parallel_drafting=True, ptd_token_id=VOCAB), r"ptd_token_id=128"),
        (lambda: hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=3, tree={"depth": 4, "top_k": 1, "total_tokens": 4}),
         "a tree 4 deep cannot be filled"),
        (lambda: SpeculativeGenerator(target, head, depth=5, top_k=1, total_tokens=5).generate(torch.tensor([[1, 2, 3]]), 4),
         "decode with depth <= 4"),
    ]
    for call, message in cases:
        with pytest.raises(HeadOptionsError, match=message) as info:
            call()
        assert isinstance(info.value, HeadstartError)
