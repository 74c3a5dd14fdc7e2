import json

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.decode.tree import DraftState, load_tree
from headstart.heads.checkpoint import CheckpointError
from tests.conftest import tiny_target
from tests.test_decode import perturbed_heads


def proposals(heads, target):
    state = DraftState(hidden=torch.randn(1, 32, generator=torch.Generator().manual_seed(0)), root=torch.tensor([1]))
    return heads.propose(state, load_tree("tree16")).tokens


@pytest.mark.parametrize("shared", [True, False])
def test_save_reload_identical_and_head_only(tmp_path, shared):
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=3, shared_lm_head=shared)
    with torch.no_grad():
        for p in heads.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    heads.save_pretrained(tmp_path / "h", target)
    loaded = hs.load_heads(tmp_path / "h", target=target)
    for (n1, p1), (n2, p2) in zip(heads.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    assert torch.equal(proposals(heads.eval(), target), proposals(loaded, target))
    # The file holds the head only: no tensor of the target's (its lm_head is 128 x 32).
    names = set(load_file(tmp_path / "h" / "model.safetensors"))
    assert not any(n.startswith(("model.", "lm_head.")) for n in names)
    if shared:
        assert all(n.startswith("blocks.") or n == "draft_ids" for n in names)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    assert config["kind"] == "medusa" and config["hidden_size"] == 32 and config["vocab_size"] == 128
    assert config["target"]["name_or_path"] == "tiny-llama"
    assert config["target"]["max_position_embeddings"] == 256


def test_draft_vocab_roundtrip(tmp_path):
    target = tiny_target("llama")
    vocab = torch.tensor([5, 9, 1, 77, 3, 100, 64, 2])
    heads = perturbed_heads(target)
    heads = hs.heads.build("medusa", target, num_heads=3, draft_vocab=vocab)
    assert heads.draft_index(torch.tensor([9, 4, 2])).tolist() == [1, -1, 7]
    tokens = proposals(heads.eval(), target)
    assert set(tokens.flatten().tolist()) <= set(vocab.tolist())
    heads.save_pretrained(tmp_path / "h", target)
    loaded = hs.load_heads(tmp_path / "h", target=target)
    assert torch.equal(loaded.draft_ids, vocab) and torch.equal(proposals(loaded, target), tokens)


def test_head_for_another_target_is_refused(tmp_path):
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    other = tiny_target("qwen2")  # same shapes, another model
    with pytest.raises(CheckpointError, match="trained for 'tiny-llama', but the target is 'tiny-qwen2'"):
        hs.load_heads(tmp_path / "h", target=other)
    assert hs.load_heads(tmp_path / "h", target=other, allow_other_target=True).num_heads == 2
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    config["hidden_size"], config["vocab_size"] = 64, 1000
    (tmp_path / "h" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"hidden size 64 \(target has 32\) and vocabulary of 1000 tokens"):
        hs.load_heads(tmp_path / "h", target=target, allow_other_target=True)


def test_corrupt_or_incomplete_checkpoints_are_clear_errors(tmp_path):
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    weights = tmp_path / "h" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])  # truncated download
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        hs.load_heads(tmp_path / "h", target=target)
    weights.write_bytes(b"\x80\x04pickle-not-safetensors")
    with pytest.raises(CheckpointError, match="corrupt"):
        hs.load_heads(tmp_path / "h", target=target)
    (tmp_path / "h" / "config.json").write_text('{"kind": "medusa"')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        hs.load_heads(tmp_path / "h", target=target)
    (tmp_path / "h" / "config.json").write_text('{"kind": "medusa"}')
    with pytest.raises(CheckpointError, match="lacks the keys"):
        hs.load_heads(tmp_path / "h", target=target)
    (tmp_path / "h" / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json is missing"):
        hs.load_heads(tmp_path / "h", target=target)


def test_missing_weights_are_an_error_not_silently_dropped(tmp_path):
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    config["head"]["num_heads"] = 3  # the file has weights for two heads only
    (tmp_path / "h" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="missing weights"):
        hs.load_heads(tmp_path / "h", target=target)
