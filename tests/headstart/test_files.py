"""Writes never destroy what the user owns (headstart/files.py): merged targets, links, crashes, modes."""

import json
import os
import stat

import pytest
import torch
import transformers as tr

import headstart as hs
from headstart.files import MARKER, replace_refusal, staged_folder
from headstart.heads.export import ExportError, export
from headstart.heads.merged_target import save_merged_target
from headstart.target import Target
from tests.helpers import adapted_head, tiny_target


def base_target(folder):
    """The tiny target's base weights saved as a model folder, loaded from there (as the CLI does)."""
    tiny_target("llama").model.save_pretrained(folder)
    return Target(tr.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), None, name=str(folder))


def files_and_modes(folder):
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, stat.S_IMODE(p.stat().st_mode))
            for p in sorted(folder.rglob("*"))}


def test_merged_target_never_replaces_what_the_user_owns(tmp_path):
    head = adapted_head(tmp_path / "head")
    base = tmp_path / "base"
    target = base_target(base)
    before = {"head": files_and_modes(head), "base": files_and_modes(base)}
    # The target's own folder and the head's folder: never, even with force.
    with pytest.raises(ExportError, match=r"holds .*base, which would be deleted"):
        save_merged_target(head, target, base, force=True)
    with pytest.raises(ExportError, match=r"holds .*head, which would be deleted"):
        save_merged_target(head, target, head, force=True)
    # A folder of the user's: refused unless forced.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ExportError, match=r"not empty \(notes.txt\).*force=True"):
        save_merged_target(head, target, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert target.adapter is None and {"head": files_and_modes(head), "base": files_and_modes(base)} == before

    # A new folder: the merged model, with the marker; then an earlier merged target is replaced without force.
    old = os.umask(0o022)
    try:
        out = save_merged_target(head, target, tmp_path / "merged")
        marker = json.loads((out / MARKER).read_text())
        assert marker["written_by"] == "headstart export --merged-target" and "model.safetensors" in marker["files"]
        assert stat.S_IMODE(out.stat().st_mode) == 0o755
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in out.iterdir())
        merged = Target(tr.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32), None, name=str(out))
        assert not any("lora" in k for k in merged.model.state_dict())
        assert save_merged_target(head, base_target(tmp_path / "base2"), out) == out
    finally:
        os.umask(old)
    # The Medusa-2 head's own files follow the umask too (the adapter is written by safetensors).
    os.umask(0o022)
    try:
        again = adapted_head(tmp_path / "head2")
        assert {stat.S_IMODE(p.stat().st_mode) for p in again.iterdir()} == {0o644}
    finally:
        os.umask(old)


def test_a_link_is_replaced_not_what_it_points_to(tmp_path):
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=2)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.jsonl").write_text("{}\n")
    (tmp_path / "out").symlink_to(tmp_path / "data")
    with pytest.raises(ExportError, match=r"not empty \(corpus.jsonl\)"):
        export(heads, target, tmp_path / "out")
    export(heads, target, tmp_path / "out", force=True)
    assert not (tmp_path / "out").is_symlink() and (tmp_path / "out" / "config.json").is_file()
    assert (tmp_path / "data" / "corpus.jsonl").read_text() == "{}\n"


def test_an_interrupted_write_leaves_the_old_folder(tmp_path):
    folder = tmp_path / "out"
    with staged_folder(folder, written_by="test") as tmp:
        (tmp / "a.txt").write_text("old")
    with pytest.raises(RuntimeError, match="interrupted"), staged_folder(folder, written_by="test") as tmp:
        (tmp / "a.txt").write_text("new")
        raise RuntimeError("interrupted")
    assert (folder / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left beside it
    assert replace_refusal(folder) is None  # our own, complete: replaceable
    (folder / "b.txt").write_text("the user's")
    assert "not empty" in replace_refusal(folder)


def test_the_current_directory_is_never_replaced(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "x.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "work")
    assert "holds" in replace_refusal(tmp_path, force=True)
    assert "holds" in replace_refusal(".", force=True)


@pytest.mark.embedded
def test_embedded_conversion_replaces_only_its_own_incomplete_folder(tmp_path, monkeypatch):
    from headstart.embedded import FOLDER_NAME, embedded_model_path

    monkeypatch.setenv("HEADSTART_CACHE", str(tmp_path))
    (tmp_path / FOLDER_NAME).mkdir()
    (tmp_path / FOLDER_NAME / "config.json").write_text("{}")  # an interrupted conversion of an older version
    old = os.umask(0o022)
    try:
        folder = embedded_model_path()
    finally:
        os.umask(old)
    assert folder == tmp_path / FOLDER_NAME and (folder / "model.safetensors").is_file()
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llama"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o644}
    assert sorted(p.name for p in tmp_path.iterdir()) == [FOLDER_NAME]  # nothing left beside it
