"""The EAGLE-3 draft layer's lean drafting forward (heads/lean_layer.py) computes what the module's own
forward computes, over a committed block and tree frontiers, packed or not, and follows weight changes."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

import headstart as hs
from headstart.decode.dynamic import frontier_attention
from headstart.heads.drafting import block_attention
from headstart.heads.lean_layer import DraftKV
from headstart.packed import can_pack, pack_linears
from headstart.target import float_mask
from tests.helpers import VOCAB, assert_close, perturbed, tiny_target


def _feed(head, cache, dtype):
    """A block of 6 committed positions, then two tree frontiers (3 children of the root, then 2 grandchildren);
    the masks as the drafter gives them (bool to the lean forward, additive to the module's)."""
    def mask(allowed):
        return allowed if isinstance(cache, DraftKV) else float_mask(allowed, dtype)

    g = torch.Generator().manual_seed(7)
    d = head.options["hidden_size"]
    outs = []
    allowed, positions = block_attention(0, 6, "cpu")
    hidden = torch.randn(1, 6, d, generator=g).to(dtype)
    tokens = torch.randint(0, VOCAB, (1, 6), generator=g)
    outs.append(head.step(hidden, tokens, positions, mask(allowed), cache))
    parents, entry = [-1, -1, -1, 0, 0], {}
    for frontier in ([0, 1, 2], [3, 4]):
        base = cache.get_seq_length()
        allowed = frontier_attention(frontier, parents, entry, 6, base)
        for row, c in enumerate(frontier):
            entry[c] = base + row
        depth = 1 if frontier[0] < 3 else 2
        pos = torch.full((1, len(frontier)), 5 + depth)
        hid = torch.randn(1, len(frontier), d, generator=g).to(dtype)
        tok = torch.randint(0, VOCAB, (1, len(frontier)), generator=g)
        outs.append(head.step(hid, tok, pos, mask(allowed), cache))
    return outs


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_lean_step_equals_the_module_forward(arch):
    target = tiny_target(arch)
    head = perturbed(hs.heads.build("eagle3", target), seed=3)
    with torch.no_grad():
        ref = _feed(head, DynamicCache(), head.dtype)  # the module's own forward
        cache = head.new_cache()
        lean = _feed(head, cache, head.dtype)
    assert isinstance(cache, DraftKV) and cache.get_seq_length() == 11
    for i, (a, b) in enumerate(zip(lean, ref)):
        assert_close(a, b, f"{arch}: forward {i}")
    # Cut back to the committed block and fed again: the same outputs (the tree entries are forgotten).
    cache.crop(-5)
    with torch.no_grad():
        again = _feed(head, DraftKV(), head.dtype)
    assert cache.get_seq_length() == 6 and all(torch.equal(a, b) for a, b in zip(again, lean))


def test_lean_step_packed_in_bf16_and_after_a_weight_changes():
    target = tiny_target("llama")
    head = perturbed(hs.heads.build("eagle3", target), seed=4).to(torch.bfloat16)
    with torch.no_grad():
        ref = _feed(head, DynamicCache(), torch.bfloat16)
        if can_pack(head):
            assert pack_linears(head) > 0
        lean = _feed(head, head.new_cache(), torch.bfloat16)
        for i, (a, b) in enumerate(zip(lean, ref)):
            assert_close(a.float(), b.float(), f"bf16 forward {i}", dtype=torch.bfloat16, ulps=8)
        head.midlayer.mlp.up_proj.weight.mul_(2)  # changed in place: the fused copy must follow
        ref2 = _feed(head, DynamicCache(), torch.bfloat16)
        lean2 = _feed(head, head.new_cache(), torch.bfloat16)
    assert not torch.equal(ref2[0], ref[0])
    for i, (a, b) in enumerate(zip(lean2, ref2)):
        assert_close(a.float(), b.float(), f"bf16 forward {i} after the change", dtype=torch.bfloat16, ulps=8)


def test_draft_kv_grows_and_keeps_what_it_held():
    cache = DraftKV()
    g = torch.Generator().manual_seed(0)
    blocks = [torch.randn(1, 2, n, 4, generator=g) for n in (200, 100, 300)]
    for b in blocks:
        keys, values = cache.update(b, -b)
    assert cache.get_seq_length() == 600 and keys.shape == (1, 2, 600, 4)
    assert torch.equal(keys, torch.cat(blocks, dim=2)) and torch.equal(values, -keys)
    cache.crop(-250)
    assert cache.get_seq_length() == 350
    cache.crop(1000)  # a positive length longer than held keeps everything (HF's convention)
    assert cache.get_seq_length() == 350
    keys, _ = cache.update(blocks[0][:, :, :1], blocks[0][:, :, :1])
    assert torch.equal(keys[:, :, :350], torch.cat(blocks, dim=2)[:, :, :350]) and torch.equal(keys[:, :, 350], blocks[0][:, :, 0])
