"""push_to_hub against recorded HfApi calls (only the network is replaced)."""

import json

import pytest
import torch
from huggingface_hub import HfApi

import headstart as hs
from headstart.config import recipe_to_dict
from headstart.decode.corpus import FILE_NAME as CORPUS_FILE
from headstart.decode.corpus import CorpusNgram
from headstart.heads.export import export
from headstart.heads.hub import HubError, push_to_hub
from headstart.recipe import load_recipe
from tests.helpers import flip_tensor_bytes, tiny_target


@pytest.fixture
def hub(monkeypatch):
    """Replace HfApi's network calls with recorders; returns the list of calls."""
    calls = []

    def record(name):
        def fn(self, repo_id, *args, **kwargs):
            if name == "create_commit":  # read the files now, as the real upload does
                ops = args[0] if args else kwargs["operations"]
                kwargs["files"] = {
                    op.path_in_repo: op.path_or_fileobj if isinstance(op.path_or_fileobj, bytes) else open(op.path_or_fileobj, "rb").read()
                    for op in ops
                }
            calls.append((name, repo_id, args, kwargs))
            if name == "create_commit":
                return type("CommitInfo", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/abc"})()
            return None

        return fn

    for name in ("create_repo", "create_branch", "create_commit", "upload_folder", "upload_file"):
        monkeypatch.setattr(HfApi, name, record(name))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return calls


def uploaded(calls):
    (commit,) = [c for c in calls if c[0] == "create_commit"]
    return commit, commit[3]["files"]


def trained_head(tmp_path):
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(20))
    recipe = load_recipe(None, ["data.train_files=[data/distilled/x.jsonl]", "train.deepspeed=scripts/ds_zero2.json"])
    training = {
        "steps": 120, "train_seconds": 61.5, "train_loss": 3.21, "data": {"conversations": 400, "truncated": 3},
        "train_examples": 380, "heldout_examples": 20,
        "heldout": {"top1": [0.41, 0.22], "top5": [0.63, 0.4], "sim_accept_length": 1.5, "tokens": 999},
    }
    folder = heads.save_pretrained(tmp_path / "run" / "final", target, extra={"training": training, "recipe": recipe_to_dict(recipe)})
    # What a training run leaves beside the head must never go up.
    (folder / "optimizer.pt").write_bytes(b"x" * 10)
    (folder / "trainer_state.json").write_text("{}")
    (folder / "pytorch_model.bin").write_bytes(b"target weights")
    return target, heads, folder


def test_push_uploads_exactly_the_head_files_and_a_card(tmp_path, hub):
    target, heads, folder = trained_head(tmp_path)
    url = push_to_hub(folder, "me/tiny-medusa", private=True, revision="v1", token="t", card_extra="Extra words.")
    assert url == "https://huggingface.co/me/tiny-medusa/commit/abc"
    assert [c[0] for c in hub] == ["create_repo", "create_branch", "create_commit"]
    assert hub[0][3]["private"] is True and hub[0][3]["exist_ok"] is True
    assert hub[1][3]["branch"] == "v1"
    commit, files = uploaded(hub)
    assert commit[3]["revision"] == "v1"
    assert sorted(files) == ["README.md", "config.json", "model.safetensors"]
    assert files["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    CorpusNgram.build([[1, 2, 3, 1, 2]], order=2).save(folder)  # a table saved by training goes up with the head
    push_to_hub(folder, "me/tiny-medusa", token="t")
    last = [c for c in hub if c[0] == "create_commit"][-1]
    assert sorted(last[3]["files"]) == ["README.md", "config.json", CORPUS_FILE, "model.safetensors"]
    assert files["config.json"] == (folder / "config.json").read_bytes()
    card = files["README.md"].decode()
    assert card.startswith("---\n") and "library_name: headstart" in card
    assert "**medusa** draft head" in card and "tiny-llama" in card
    assert "The target's weights are not included" in card
    assert "| num_heads | 2 |" in card and "| draft_vocab_size | 20 |" in card
    assert "120 optimizer steps in 61.5 s" in card and "data/distilled/x.jsonl" in card
    assert "| 1 | 0.41 | 0.63 |" in card and "DeepSpeed scripts/ds_zero2.json" in card
    assert card.rstrip().endswith("Extra words.")


def test_push_an_export_and_a_module(tmp_path, hub):
    target, heads, folder = trained_head(tmp_path)
    out = export(folder, target, tmp_path / "vllm", "vllm-medusa")
    push_to_hub(out, "me/tiny-medusa-vllm")
    _, files = uploaded(hub)
    assert sorted(files) == ["README.md", "config.json", "model.safetensors"]
    card = files["README.md"].decode()
    assert "Layout: `vllm-medusa`" in card and "lm_head rows" in card and '"method": "medusa"' in card
    assert "| 2 | 0.22 | 0.4 |" in card  # the training record travels inside the export's config
    hub.clear()
    push_to_hub(heads, "me/from-module", target=target)
    _, files = uploaded(hub)
    assert sorted(files) == ["README.md", "config.json", "model.safetensors"]
    assert json.loads(files["config.json"])["kind"] == "medusa"


def test_offline_fails_before_anything_is_created(tmp_path, hub, monkeypatch):
    _, heads, folder = trained_head(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="offline mode"):
        push_to_hub(folder, "me/tiny-medusa")
    assert hub == []


def test_not_a_head_folder(tmp_path, hub):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "pytorch_model.bin").write_bytes(b"target")
    with pytest.raises(HubError, match="not a head folder"):
        push_to_hub(tmp_path / "x", "me/x")
    assert hub == []


def test_cli_push(tmp_path, hub, monkeypatch, capsys):
    from headstart.cli import main

    _, _, folder = trained_head(tmp_path)
    assert main(["export", "--head", str(folder), "--push-to-hub", "me/cli", "--private", "--revision", "r1"]) == 0
    commit, files = uploaded(hub)
    assert sorted(files) == ["README.md", "config.json", "model.safetensors"] and commit[3]["revision"] == "r1"
    hub.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["export", "--head", str(folder), "--push-to-hub", "me/cli"]) == 2
    assert "offline mode" in capsys.readouterr().err and hub == []


def test_a_corrupt_head_is_not_published(tmp_path, hub):
    from headstart.heads.checkpoint import CheckpointError

    _, _, folder = trained_head(tmp_path)
    flip_tensor_bytes(folder / "model.safetensors", n=100)
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match the SHA-256"):
        push_to_hub(folder, "me/tiny-medusa")
    assert hub == []  # refused before the repo is created
