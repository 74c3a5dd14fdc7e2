"""EAGLE-1/2 and EAGLE-3 heads: training moves the head only, drafting matches training, decoding is lossless."""

from __future__ import annotations

import pytest
import torch

import headstart as hs
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.heads.checkpoint import CheckpointError
from headstart.heads.eagle3 import Eagle3Options, ttt_mask
from headstart.heads.feature_head import ArchitectureMismatch
from headstart.recipe import load_recipe
from headstart.target import float_mask
from headstart.train.features import batch_features
from headstart.train.trainer import build_head, train
from tests.helpers import VOCAB, assert_close, batch_of, perturbed, smol_target, tiny_target, write_conversations

KINDS = ["eagle", "eagle3"]


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_speculative_equals_plain_on_every_arch(arch, kind):
    target = tiny_target(arch)
    draft_vocab = torch.arange(0, VOCAB, 2) if kind == "eagle3" else None
    head = perturbed(hs.heads.build(kind, target, draft_vocab=draft_vocab))
    prompts = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    for depth, top_k, total in [(1, 1, 1), (4, 1, 4), (4, 3, 10), (6, 4, 24)]:
        out = SpeculativeGenerator(target, head, depth=depth, top_k=top_k, total_tokens=total).generate(
            prompts, 40, eos_token_id=[]
        )
        assert torch.equal(out.sequences, ref.sequences), (arch, kind, depth, top_k, total)


def test_ttt_mask_attends_exactly_the_right_keys():
    # T = 3, step 2: keys are step-0 entries 0..2, then step-1 and step-2 entries 0..2.
    allowed = ttt_mask(3, 2, torch.float32, "cpu")[0, 0] == 0
    expected = torch.tensor([
        [1, 0, 0, 1, 0, 0, 1, 0, 0],
        [1, 1, 0, 0, 1, 0, 0, 1, 0],
        [1, 1, 1, 0, 0, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(allowed, expected)
    assert torch.equal(ttt_mask(2, 0, torch.float32, "cpu")[0, 0] == 0, torch.tensor([[True, False], [True, True]]))


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_eagle3_unrolled_training_equals_drafting(arch):
    """Training-time-test step i at index t computes what drafting computes for the depth-i node
    after the last true position t: same keys, same positions, same outputs."""
    from transformers import DynamicCache

    target = tiny_target(arch)
    head = perturbed(hs.heads.build("eagle3", target), seed=2)
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(5))
    out = batch_features(target, batch_of(ids), head.feature_layers)
    feats = torch.cat([out.features[i] for i in head.feature_layers], dim=-1)
    # Training: three unrolled steps over the whole sequence.
    cache, hidden, t = DynamicCache(), head.input_features(feats), ids.shape[1]
    steps = []
    for i in range(3):
        nxt = torch.nn.functional.pad(ids[:, 1 + i :], (0, 1 + i))
        hidden = head.step(hidden, nxt, torch.arange(t)[None] + i, ttt_mask(t, i, head.dtype, "cpu"), cache)
        steps.append(hidden)
    # Drafting after the last true position p: the prefix with true features, then a chain of the
    # data's own tokens fed with the head's own predicted features.
    p = 6
    cache = DynamicCache()
    prefix = head.step(head.input_features(feats[:, : p + 1]), ids[:, 1 : p + 2], torch.arange(p + 1)[None],
                       float_mask(torch.ones(p + 1, p + 1, dtype=torch.bool).tril(), head.dtype), cache)
    assert_close(prefix[0, p], steps[0][0, p], "drafting step 0 against training")
    h = prefix[:, p:]
    for i in (1, 2):
        n = cache.get_seq_length()
        h = head.step(h, ids[:, p + 1 + i : p + 2 + i], torch.tensor([[p + i]]),
                      float_mask(torch.ones(1, n + 1, dtype=torch.bool), head.dtype), cache)
        assert_close(h[0, 0], steps[i][0, p], f"drafting step {i} against training")


def test_eagle3_draft_vocabulary_maps_exactly():
    target = tiny_target("llama")
    vocab = torch.tensor([90, 3, 17, 64, 5])  # most frequent first, as frequent_tokens returns
    head = hs.heads.build("eagle3", target, draft_vocab=vocab)
    ids = vocab.sort().values
    assert head.draft_ids.tolist() == ids.tolist()  # draft id -> target id: draft id + d2t
    assert torch.equal(head.d2t, ids - torch.arange(5))
    assert head.t2d.sum() == 5 and head.t2d[ids].all()
    assert head.draft_index(ids).tolist() == [0, 1, 2, 3, 4]  # and back
    assert head.draft_index(torch.tensor([0, 4, 127])).tolist() == [-1, -1, -1]
    # The draft lm_head starts from the target's own rows of those tokens.
    assert torch.equal(head.lm_head.weight, target.lm_head.weight[ids])


@pytest.mark.parametrize("kind", KINDS)
def test_one_step_moves_the_head_not_the_target_and_reloads(tmp_path, smol_shaped_target, kind):  # noqa: F811
    # EAGLE-3 fuses three distinct layers: for it, the same tiny model with three layers instead of two.
    target = smol_shaped_target if kind == "eagle" else smol_target(smol_shaped_target.tokenizer, layers=3)
    write_conversations(tmp_path / "conv.jsonl")
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}", f"head.kind={kind}",
        "data.eval_size=8", "data.max_length=64", "train.batch_size=4", "train.bf16=false", "train.lr=1e-2",
        "train.max_steps=2", "train.save_steps=1", "train.logging_steps=1", "train.ttt_steps=3", "head.draft_vocab_size=300",
        "decode.depth=3", "decode.top_k=2", "decode.total_tokens=5",
    ])
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    head = hs.heads.build(kind, target, draft_vocab=torch.arange(300), tree={"depth": 3, "top_k": 2, "total_tokens": 5})
    initial = {k: v.clone() for k, v in head.state_dict().items()}
    summary = train(recipe, target, head)
    loaded = hs.load_heads(summary.final, target=target)
    assert loaded.kind == kind and loaded.default_tree == DynamicTreeSpec(3, 2, 5)
    for name, _ in head.named_parameters():
        assert not torch.equal(head.state_dict()[name], initial[name]), f"{name} did not move"
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    assert not any(k.startswith(("embed", "model.")) for k in loaded.state_dict()), "no target weight in the head"
    assert summary.heldout["top1"] and "sim_accept_length" in summary.heldout
    # The best checkpoint by the training window's simulated τ is kept beside the last one.
    best = summary.best_checkpoint
    assert best["step"] in (1, 2) and best["sim_accept_length"] >= 1.0
    assert hs.load_heads(best["path"], target=target).kind == kind
    # It reloads identically and decodes losslessly with its stored tree settings.
    again = hs.load_heads(summary.final, target=target)
    for (n, a), (_, b) in zip(loaded.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), n
    prompt = torch.tensor([target.tokenizer("count from 7").input_ids])
    ref = greedy_generate(target, prompt, 16, eos_token_id=[])
    assert torch.equal(SpeculativeGenerator(target, loaded).generate(prompt, 16, eos_token_id=[]).sequences, ref.sequences)


def test_eagle3_learns_to_draft_what_the_target_writes():
    """A few hundred steps on the target's own greedy continuations give a τ well above 1."""
    target = tiny_target("llama", seed=1)
    head = hs.heads.build("eagle3", target)
    prompts = torch.randint(0, VOCAB, (16, 4), generator=torch.Generator().manual_seed(0))
    data = greedy_generate(target, prompts, 28, eos_token_id=[]).sequences  # (16, 32)
    batch = batch_of(data)
    out = batch_features(target, batch, head.feature_layers)
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
    options = Eagle3Options(ttt_steps=3)
    head.train()
    for _ in range(150):
        loss, metrics = head.training_loss(out, batch, target, options)
        opt.zero_grad()
        loss.backward()
        opt.step()
    head.eval()
    assert metrics["step0_top1"] > 0.6
    gen = SpeculativeGenerator(target, head, depth=3, top_k=2, total_tokens=6)
    res = gen.generate(prompts[:4], 28, eos_token_id=[])
    assert torch.equal(res.sequences, data[:4])
    assert res.acceptance_length > 1.8, res.acceptance_length


@pytest.mark.parametrize("parallel", [False, True])
def test_eagle3_token_weights_act_as_a_softer_loss_mask(parallel):
    """Complementary training's weights (heads/complement.py) weigh each token wherever a training-time-test
    step predicts it: weight 0 on a token is the loss with that token out of the loss mask, weight 1 the
    unweighted loss; the metrics stay over every token."""
    target = tiny_target("llama", seed=1)
    options = {"parallel_drafting": True, "parallel_tokens": 3} if parallel else {}
    head = perturbed(hs.heads.build("eagle3", target, draft_vocab=torch.arange(0, VOCAB, 2), **options), seed=2)
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))
    batch = batch_of(ids)
    batch["loss_mask"][0, :3] = 0  # a prompt
    out = batch_features(target, batch, head.feature_layers)
    settings = Eagle3Options(ttt_steps=3)
    plain, plain_metrics = head.training_loss(out, batch, target, settings)
    ones, _ = head.training_loss(out, {**batch, "draft_weight": torch.ones(ids.shape)}, target, settings)
    assert_close(ones, plain, "weights of 1", dtype=torch.float32)
    dropped = batch["loss_mask"].clone()
    dropped[0, 5] = dropped[1, 7] = dropped[1, 8] = 0
    weighted, metrics = head.training_loss(out, {**batch, "draft_weight": dropped.float()}, target, settings)
    masked, _ = head.training_loss(out, {**batch, "loss_mask": dropped}, target, settings)
    assert_close(weighted, masked, "weight 0 = out of the loss mask", dtype=torch.float32)
    assert not torch.equal(weighted, plain)
    assert metrics["step0_ce"] == plain_metrics["step0_ce"]  # the metrics stay unweighted


def test_bad_input_gives_clear_errors(tmp_path):
    target = tiny_target("llama")
    with pytest.raises(ValueError, match="three target layers"):
        hs.heads.build("eagle3", target, feature_layers=[0, 1, 3])
    with pytest.raises(ValueError, match="larger than the target"):
        hs.heads.build("eagle3", target, draft_vocab=torch.arange(VOCAB + 1) % VOCAB)
    recipe = load_recipe(None, ["head.kind=eagle3", f"head.draft_vocab_size={VOCAB + 1}"])
    with pytest.raises(ValueError, match="draft_vocab_size"):
        build_head(recipe, target, [])
    # A head trained on one architecture, loaded on another of the same shapes.
    hs.heads.build("eagle", target).save_pretrained(tmp_path / "h", target)
    other = tiny_target("qwen2")
    with pytest.raises(CheckpointError, match="trained for 'tiny-llama'"):
        hs.load_heads(tmp_path / "h", target=other)
    with pytest.raises(CheckpointError, match="'llama' target"):
        hs.load_heads(tmp_path / "h", target=other, allow_other_target=True)
    with pytest.raises(ArchitectureMismatch):
        hs.heads.REGISTRY["eagle"]({**hs.load_heads(tmp_path / "h", target=target).options}, other)
