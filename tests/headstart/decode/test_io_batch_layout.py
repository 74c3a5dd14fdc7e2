"""A left-padded batch comes back in HF generate's layout: the input exactly as given, then each row's
new tokens right-padded with the pad id, so that HF's idiom `sequences[:, T:]` gives the new tokens."""

from __future__ import annotations

import pytest
import torch

import headstart as hs
from headstart.decode.plain import plain_generate
from tests.helpers import VOCAB, tiny_target

PAD = VOCAB - 1  # the target's pad id; not 0, so that a padded slot is not a zeroed one
NEW = 16
NO_EOS = -1  # no token has this id: HF generate runs to NEW tokens


def own_greedy(target, prompt: torch.Tensor, eos: int) -> list[int]:
    """One row decoded alone (batch 1, no padding) by the target's own HF generate: its new tokens."""
    out = target.model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW, do_sample=False,
                                eos_token_id=eos, pad_token_id=PAD)  # (1, T_b + n_b)
    return out[0, prompt.shape[1] :].tolist()


def left_padded(prompts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask (B, T) as a tokenizer pads prompts for generation: on the left."""
    width = max(p.shape[1] for p in prompts)
    ids = torch.full((len(prompts), width), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, width - p.shape[1] :], mask[b, width - p.shape[1] :] = p[0], 1
    return ids, mask


def decoder(kind: str, target):
    """generate(ids, attention_mask, eos) of plain decoding, Medusa, or an EAGLE-3 head with random weights."""
    if kind == "plain":
        return lambda ids, mask, eos: plain_generate(target, ids, NEW, eos_token_id=eos, attention_mask=mask)
    if kind == "medusa":
        gen = hs.SpeculativeGenerator(target, hs.heads.build("medusa", target, num_heads=3), tree="tree8")
    else:
        head = hs.heads.build("eagle3", target, draft_vocab=torch.arange(0, VOCAB, 2))
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():  # as if trained: drafts neither all right nor all wrong
            for p in head.parameters():
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
        gen = hs.SpeculativeGenerator(target, head.eval(), depth=4, top_k=3, total_tokens=10)
    return lambda ids, mask, eos: gen.generate(ids, NEW, eos_token_id=eos, attention_mask=mask)


@pytest.mark.parametrize("kind", ["plain", "medusa", "eagle3"])
def test_left_padded_batch_comes_back_in_hf_layout(kind):
    target = tiny_target("llama")
    target.model.generation_config.pad_token_id = PAD
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, VOCAB - 1, (1, n), generator=g) for n in (4, 11, 7)]
    # An EOS that ends the second row early, so that the rows' outputs differ in length.
    eos = own_greedy(target, prompts[1], NO_EOS)[3]
    want = [own_greedy(target, p, eos) for p in prompts]
    assert len({len(w) for w in want}) > 1
    ids, mask = left_padded(prompts)
    t = ids.shape[1]

    out = decoder(kind, target)(ids, mask, eos)

    assert out.sequences.shape == (3, t + max(len(w) for w in want))
    assert torch.equal(out.sequences[:, :t], ids)  # the input exactly as given, left padding kept
    for b, w in enumerate(want):
        assert out.sequences[b, t : t + len(w)].tolist() == w, (kind, b)
        assert (out.sequences[b, t + len(w) :] == PAD).all() and out.new_lengths[b] == len(w)
    # HF's own batched generate lays the same batch out alike.
    hf = target.model.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False, eos_token_id=eos,
                               pad_token_id=PAD)
    assert hf.shape == out.sequences.shape and torch.equal(hf[:, :t], out.sequences[:, :t])
