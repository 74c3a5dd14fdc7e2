"""The base of EAGLE and EAGLE-3 heads (heads/feature_head.py): the target's parts it borrows are
named and never part of the head, and the target's logits it computes are the target's own."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import headstart as hs
from tests.helpers import assert_close, tiny_target

KINDS = ["eagle", "eagle3"]


@pytest.mark.parametrize("kind", KINDS)
def test_borrowed_target_parts_are_named_not_saved_and_not_moved(kind):
    target = tiny_target("gemma3")  # a target with final-logit softcapping
    head = hs.heads.build(kind, target, draft_vocab=torch.tensor([9, 4, 70, 31]))
    parts = head.target_parts
    assert parts.embed_tokens is target.embed_tokens and parts.lm_head is target.lm_head
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.lm_head = None
    target_storage = {p.data_ptr() for p in target.model.parameters()}
    assert not any(t.data_ptr() in target_storage for t in head.state_dict().values()), "a target weight in the head"
    assert not any(p.data_ptr() in target_storage for p in head.parameters())
    head.to(torch.float64)
    assert head.dtype == torch.float64
    assert target.embed_tokens.weight.dtype == target.lm_head.weight.dtype == torch.float32  # left where they were


@pytest.mark.parametrize("kind", KINDS)
def test_target_logits_are_the_targets_own_over_the_draft_vocabulary(kind):
    target = tiny_target("gemma3")
    h = torch.randn(2, 5, target.hidden_size)  # (B, T, D)
    full = target.logits(h)  # (B, T, V) softcapped
    whole = hs.heads.build(kind, target)
    torch.testing.assert_close(whole.target_logits(h), full, rtol=0, atol=0)  # the same module call
    draft = hs.heads.build(kind, target, draft_vocab=torch.tensor([9, 4, 70, 31]))
    assert_close(draft.target_logits(h), full[..., draft.draft_ids], "logits over the draft vocabulary")
