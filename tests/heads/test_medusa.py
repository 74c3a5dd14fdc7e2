"""Medusa heads (heads/medusa.py): the target's lm_head they borrow is held through `TargetParts`,
never registered, saved or moved with the heads."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from tests.helpers import tiny_target


@pytest.mark.parametrize("shared", [True, False], ids=["shared-lm-head", "own-lm-heads"])
def test_the_targets_lm_head_is_borrowed_not_registered_saved_or_moved(tmp_path, shared):
    target = tiny_target("llama")
    head = hs.heads.build("medusa", target, num_heads=2, shared_lm_head=shared, draft_vocab=torch.tensor([9, 4, 70, 31]))
    parts = head.target_parts
    assert parts.lm_head is target.lm_head
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.lm_head = None
    assert not any(m is target.lm_head for m in head.modules()), "the target's lm_head is registered in the head"
    target_storage = {p.data_ptr() for p in target.model.parameters()}
    assert not any(t.data_ptr() in target_storage for t in head.state_dict().values()), "a target weight in the head"
    assert not any(p.data_ptr() in target_storage for p in head.parameters())
    if not shared:  # the heads' own lm_heads start as copies of the target's rows of the draft vocabulary
        assert torch.equal(head.lm_heads[0].weight, target.lm_head.weight[[9, 4, 70, 31]])
    head.save_pretrained(tmp_path / "h", target)
    names = set(load_file(tmp_path / "h" / "model.safetensors"))
    assert not any(n.startswith(("target", "lm_head.", "model.")) for n in names)
    loaded = hs.load_heads(tmp_path / "h", target=target)
    assert loaded.target_parts.lm_head is target.lm_head
    head.to(torch.float64)
    assert head.dtype == torch.float64 and target.lm_head.weight.dtype == torch.float32  # left where it was
