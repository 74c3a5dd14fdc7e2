import json

import pytest
import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.decode.contract import DraftState
from headstart.decode.tree import load_tree
from headstart.heads.checkpoint import CheckpointError
from tests.helpers import adapted_head, flip_tensor_bytes, perturbed_heads, tiny_target


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
    with pytest.raises(CheckpointError, match="does not match the SHA-256.*corrupt"):
        hs.load_heads(tmp_path / "h", target=target)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    del config["sha256"]  # a head saved before checksums: safetensors itself notices the cut
    (tmp_path / "h" / "config.json").write_text(json.dumps(config))
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


# ---- corruption: the weights files are checked against their recorded SHA-256 -------------------


def test_flipped_tensor_bytes_are_refused_and_old_configs_still_load(tmp_path):
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=2, shared_lm_head=False)
    heads.save_pretrained(tmp_path / "h", target)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    assert len(config["sha256"]["model.safetensors"]) == 64
    flip_tensor_bytes(tmp_path / "h" / "model.safetensors")
    load_file(tmp_path / "h" / "model.safetensors")  # still parses: only the checksum can tell
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match the SHA-256.*corrupt"):
        hs.load_heads(tmp_path / "h", target=target)
    # A head saved before checksums were recorded loads as it did (nothing to check against).
    heads.save_pretrained(tmp_path / "old", target)
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["sha256"]
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = hs.load_heads(tmp_path / "old", target=target)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in heads.state_dict().items())


def test_flipped_adapter_bytes_are_refused(tmp_path):
    """Medusa-2: the adapter weights file saved beside the head is checked too."""
    adapted_head(tmp_path / "h")
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    assert sorted(config["sha256"]) == ["adapter_config.json", "adapter_model.safetensors", "model.safetensors"]
    assert hs.load_heads(tmp_path / "h", target=tiny_target("llama")).num_heads == 2
    flip_tensor_bytes(tmp_path / "h" / "adapter_model.safetensors", n=200)
    fresh = tiny_target("llama")
    with pytest.raises(CheckpointError, match=r"adapter_model\.safetensors does not match the SHA-256"):
        hs.load_heads(tmp_path / "h", target=fresh)
    assert fresh.adapter is None


# ---- the target's identity: its fingerprint, not how its path is spelled ------------------------


def saved_target(folder, tokenizer, seed=0):
    tiny_target("llama", seed=seed).model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_same_target_under_another_spelling_or_place_loads(tmp_path, monkeypatch, smol_tokenizer):
    from headstart.target import Target

    folder = saved_target(tmp_path / "models" / "tiny", smol_tokenizer)
    target = Target.from_pretrained(folder, dtype=torch.float32)
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    recorded = json.loads((tmp_path / "h" / "config.json").read_text())["target"]
    assert recorded["name_or_path"] == str(folder)
    assert recorded["fingerprint"]["architecture"] == "LlamaForCausalLM"
    assert len(recorded["fingerprint"]["embedding_sha256"]) == 64
    # A relative spelling, loaded in another dtype: the same fingerprint.
    monkeypatch.chdir(tmp_path / "models")
    relative = Target.from_pretrained("tiny", dtype=torch.bfloat16)
    assert relative.name == "tiny" and relative.describe()["fingerprint"] == recorded["fingerprint"]
    assert hs.load_heads(tmp_path / "h", target=relative).num_heads == 2
    # The folder moved elsewhere.
    (tmp_path / "models" / "tiny").rename(tmp_path / "moved")
    assert hs.load_heads(tmp_path / "h", target=Target.from_pretrained(tmp_path / "moved", dtype=torch.float32))
    # Another model of the same architecture and shapes, at the very path the head names: refused.
    saved_target(tmp_path / "models" / "tiny", smol_tokenizer, seed=1)
    other = Target.from_pretrained(folder, dtype=torch.float32)
    with pytest.raises(CheckpointError, match="embedding weights differ.*allow_other_target=True"):
        hs.load_heads(tmp_path / "h", target=other)
    assert hs.load_heads(tmp_path / "h", target=other, allow_other_target=True).num_heads == 2


def test_old_configs_compare_names_but_not_spellings(tmp_path, monkeypatch, smol_tokenizer):
    from headstart.target import Target

    folder = saved_target(tmp_path / "models" / "tiny", smol_tokenizer)
    target = Target.from_pretrained(folder, dtype=torch.float32)
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    del config["target"]["fingerprint"]  # as an older headstart wrote it
    (tmp_path / "h" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    assert hs.load_heads(tmp_path / "h", target=Target.from_pretrained("models/tiny", dtype=torch.float32))
    other = saved_target(tmp_path / "other", smol_tokenizer)
    with pytest.raises(CheckpointError, match="records only the target's name"):
        hs.load_heads(tmp_path / "h", target=Target.from_pretrained(other, dtype=torch.float32))


def test_fingerprint_without_an_embedding_hash_compares_the_rest(tmp_path):
    """Under ZeRO-3 the saving process holds a slice of the embedding: no hash is recorded."""
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    config["target"]["fingerprint"]["embedding_sha256"] = None
    (tmp_path / "h" / "config.json").write_text(json.dumps(config))
    assert hs.load_heads(tmp_path / "h", target=tiny_target("llama", seed=5)).num_heads == 2  # shapes agree
    with pytest.raises(CheckpointError, match="architecture 'LlamaForCausalLM' recorded, 'Qwen2ForCausalLM'"):
        hs.load_heads(tmp_path / "h", target=tiny_target("qwen2"))


# ---- a path that names nothing --------------------------------------------------------------------


def test_missing_folder_and_unreachable_hub_are_one_line_errors(tmp_path, monkeypatch):
    target = tiny_target("llama")
    with pytest.raises(CheckpointError, match=r"the folder .*runs/x/final does not exist") as e:
        hs.load_heads(tmp_path / "runs" / "x" / "final", target=target)
    assert e.value.__context__ is None  # no chained traceback
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match=r"no folder owner/head, .*the Hub could not be reached \(HF_HUB_OFFLINE is set\)") as e:
        hs.load_heads("owner/head", target=target)
    assert e.value.__context__ is None
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="is a file"):
        hs.load_heads("file", target=target)


def test_unreachable_hub_from_the_command_line(tmp_path, smol_tokenizer):
    """No network here (and a closed port for the Hub endpoint): one error line, no traceback."""
    import subprocess
    import sys

    target = tiny_target("llama")
    target.model.save_pretrained(tmp_path / "target")
    smol_tokenizer.save_pretrained(tmp_path / "target")
    env = {k: v for k, v in __import__("os").environ.items() if k != "HF_HUB_OFFLINE"}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    code = (
        "import sys, torch, headstart as hs\n"
        "from headstart.errors import HeadstartError\n"
        f"t = hs.Target.from_pretrained({str(tmp_path / 'target')!r}, dtype=torch.float32)\n"
        "try:\n    hs.load_heads('nobody/no-such-head', target=t)\n"
        "except HeadstartError as e:\n    print('ERROR', type(e).__name__, e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ERROR CheckpointError there is no folder nobody/no-such-head" in proc.stdout
    assert "the Hub could not be reached (no connection)" in proc.stdout and "Traceback" not in proc.stderr


# ---- options no head can be built from -----------------------------------------------------------


def test_bad_draft_vocabularies_are_refused_at_build_and_load(tmp_path):
    from headstart.heads.options import HeadOptionsError
    from headstart.recipe import load_recipe
    from headstart.train.trainer import build_head

    target = tiny_target("llama")
    for kind in ("medusa", "eagle", "eagle3"):
        with pytest.raises(HeadOptionsError, match="larger than the target's 128"):
            hs.heads.build(kind, target, draft_vocab=torch.arange(129) % 128)
        with pytest.raises(HeadOptionsError, match="between 1 and 128"):
            hs.heads.build(kind, target, draft_vocab=torch.arange(0))
        with pytest.raises(HeadOptionsError, match="twice"):
            hs.heads.build(kind, target, draft_vocab=torch.tensor([3, 5, 3]))
        with pytest.raises(HeadOptionsError, match=r"lie in \[0, 128\)"):
            hs.heads.build(kind, target, draft_vocab=torch.tensor([3, -5]))
    # The recipe's size: None is the whole vocabulary; 0, negative or above V are refused.
    recipe = load_recipe(None, ["head.kind=medusa"])
    assert build_head(recipe, target, []).draft_ids.numel() == 128
    for n in (0, -5, 129):
        recipe.head.draft_vocab_size = n
        with pytest.raises(HeadOptionsError, match=f"head.draft_vocab_size={n}: a draft vocabulary holds between 1 and 128"):
            build_head(recipe, target, [])
    # A saved config with an impossible size (0 once meant "the whole vocabulary" by accident).
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    for n in (0, -5, 500):
        config = json.loads((tmp_path / "h" / "config.json").read_text())
        config["head"]["draft_vocab_size"] = n
        (tmp_path / "h" / "config.json").write_text(json.dumps(config))
        with pytest.raises(HeadOptionsError, match=rf"h/config.json: draft_vocab_size={n}"):
            hs.load_heads(tmp_path / "h", target=target)


def test_saving_a_head_over_a_model_folder_is_refused(tmp_path):
    target = tiny_target("llama")
    target.model.save_pretrained(tmp_path / "model")
    before = {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()}
    with pytest.raises(CheckpointError, match="not a headstart head's.*would overwrite it"):
        hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "model", target)
    assert {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()} == before
