
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.decode.corpus import FILE_NAME
from headstart.decode.hybrid import HybridSettings, with_lookup
from headstart.decode.plain import greedy_generate
from headstart.train.resume import last_complete_checkpoint
from headstart.train.trainer import train
from tests.helpers import assert_close, recipe


def test_a_step_moves_the_head_and_not_the_target(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_shaped_target
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
    initial = {k: v.clone() for k, v in heads.state_dict().items()}
    summary = train(recipe(tmp_path, "train.max_steps=3", "train.save_steps=100"), target, heads)
    assert summary.steps == 3
    for name, value in heads.state_dict().items():
        if name != "draft_ids":
            assert not torch.equal(value, initial[name]), f"{name} did not move"
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    # The final head reloads and decodes losslessly.
    loaded = hs.load_heads(summary.final, target=target)
    assert len(loaded.held_out.topk) == 2 and "accuracy" not in loaded.options  # one row per depth
    prompt = torch.tensor([target.tokenizer("count from 7").input_ids])
    ref = greedy_generate(target, prompt, 12, eos_token_id=[])
    out = hs.SpeculativeGenerator(target, loaded).generate(prompt, 12, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    # Saved beside it: the n-gram table of the training answers, which hybrid trees draft chains from.
    assert loaded.corpus is not None and loaded.corpus.order == 4 and len(loaded.corpus) > 100
    hybrid = with_lookup(loaded, HybridSettings(prompt_lookup=4, lookup_copy=20, corpus_draft=6))
    out = hs.SpeculativeGenerator(target, hybrid).generate(prompt, 12, eos_token_id=[])
    assert hybrid.uses_corpus and torch.equal(out.sequences, ref.sequences)
    # The summary holds the same head in memory, as loading gives it: same weights, dtype, table and drafts.
    assert summary.head is heads and not any(p.requires_grad for p in heads.parameters())
    for name, value in loaded.state_dict().items():
        assert torch.equal(heads.state_dict()[name], value), name
    assert len(heads.corpus) == len(loaded.corpus) and heads.held_out == loaded.held_out
    in_memory = with_lookup(heads, HybridSettings(prompt_lookup=4, lookup_copy=20, corpus_draft=6))
    again = hs.SpeculativeGenerator(target, in_memory).generate(prompt, 12, eos_token_id=[])
    assert torch.equal(again.sequences, out.sequences) and again.accepted_per_step == out.accepted_per_step
    assert summary.record() == json.loads((summary.output_dir / "train_summary.json").read_text())


def test_resume_skips_a_checkpoint_cut_short_and_ends_as_the_uninterrupted_run(tmp_path, smol_shaped_target, capsys):  # noqa: F811
    target = smol_shaped_target
    r = recipe(tmp_path, "train.max_steps=6", "train.save_steps=2", "train.save_total_limit=5")
    uninterrupted = train(r, target)
    run = tmp_path / "run"
    final = load_file(run / "final" / "model.safetensors")
    assert last_complete_checkpoint(run) == str(run / "checkpoint-6")
    # A checkpoint interrupted mid-write (no trainer state yet) is never taken for a complete one.
    (run / "checkpoint-6" / "trainer_state.json").unlink()
    capsys.readouterr()
    assert last_complete_checkpoint(run) == str(run / "checkpoint-4")
    assert "skipping checkpoint-6" in capsys.readouterr().err
    # Resuming from the last complete checkpoint ends where the uninterrupted run did.
    r2 = recipe(tmp_path, "train.max_steps=6", "train.save_steps=2", "train.save_total_limit=5", "train.resume_from_checkpoint=last")
    resumed = train(r2, target)
    assert resumed.steps == 6
    assert_close(resumed.train_loss, uninterrupted.train_loss, "mean training loss, resumed against uninterrupted")
    assert resumed.heldout == uninterrupted.heldout and resumed.best_checkpoint == uninterrupted.best_checkpoint
    again = load_file(run / "final" / "model.safetensors")
    for name in final:
        assert_close(again[name], final[name], f"resumed {name}")


def test_training_learns_a_predictable_pattern(tmp_path, smol_shaped_target):  # noqa: F811
    r = recipe(tmp_path, "train.max_steps=40", "head.shared_lm_head=false", "head.draft_vocab_size=64", "train.corpus_ngram=0")
    summary = train(r, smol_shaped_target)
    assert not (Path(summary.final) / FILE_NAME).exists()  # train.corpus_ngram = 0: no table
    assert summary.heldout["top5"][0] > 0.2  # counting is predictable two tokens ahead


def test_complementary_training_weighs_the_tokens_head_free_drafting_predicts(tmp_path, smol_shaped_target, capsys):  # noqa: F811
    target = smol_shaped_target
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    torch.manual_seed(0)
    start = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
    trained = {}
    for weight in (1.0, 0.0):
        heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
        heads.load_state_dict(start.state_dict())
        out = tmp_path / f"w{weight}"
        out.mkdir()
        train(recipe(out, "train.max_steps=2", "train.save_steps=100", f"train.free_hit_weight={weight}"), target, heads)
        trained[weight] = {k: v.clone() for k, v in heads.state_dict().items()}
    err = capsys.readouterr().err
    assert "complementary training:" in err and "answer tokens are predicted without a head, weighted 0.0" in err
    # Weight 0 on the predictable tokens trains other heads than weight 1 from the same start.
    assert any(not torch.equal(trained[1.0][k], trained[0.0][k]) for k in trained[1.0] if k != "draft_ids")
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
