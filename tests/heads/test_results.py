"""What a head holds besides its options (heads/results.py): held-out accuracy, its own tree and
init_from_target's record are typed fields, saved in config.json under the keys earlier versions
wrote into the options, and read back typed from heads saved either way."""

from __future__ import annotations

import json

import pytest

import headstart as hs
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.tree import HeldOutAccuracy, StaticTreeSpec
from headstart.errors import HeadstartError
from headstart.heads.init_from_target import TargetLayerCopy
from headstart.heads.reading import CheckpointError
from headstart.heads.results import restore_fields, set_default_tree
from tests.helpers import perturbed_heads, tiny_target

ACCURACY = [[0.6, 0.2], [0.4, 0.1], [0.3, 0.1]]


def _config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def _rewrite(folder, **head: object) -> None:
    """config.json's head section with `head` merged in, as another headstart version wrote it."""
    config = _config(folder)
    config["head"].update(head)
    (folder / "config.json").write_text(json.dumps(config))


def test_a_head_saved_with_the_old_keys_loads_with_typed_fields(tmp_path):
    """Heads saved before the fields existed kept accuracy, tree and init_from_target among their
    options; their config.json holds the same keys, which load into the typed fields (not the options)."""
    target = tiny_target("llama")
    medusa = perturbed_heads(target)
    medusa.save_pretrained(tmp_path / "medusa", target)
    _rewrite(tmp_path / "medusa", accuracy=ACCURACY, tree=[[1], [0], [0, 0]])  # unsorted, as a file may hold it
    loaded = hs.load_heads(tmp_path / "medusa", target=target)
    assert loaded.held_out == HeldOutAccuracy(ACCURACY) and loaded.held_out.topk[0] == (0.6, 0.2)
    assert loaded.default_tree == StaticTreeSpec([[0], [1], [0, 0]]) and loaded.default_tree.paths == ((0,), (1,), (0, 0))
    assert not {"accuracy", "tree"} & set(loaded.options)
    assert hs.SpeculativeGenerator(target, loaded).tree.paths == ((0,), (1,), (0, 0))  # 'auto' takes the head's own

    eagle = hs.heads.build("eagle3", target, init_from_target=True)
    record = eagle.layer_copy.to_json()
    eagle.save_pretrained(tmp_path / "eagle3", target)
    _rewrite(tmp_path / "eagle3", tree={"depth": 3, "top_k": 2, "total_tokens": 5}, init_from_target=record)
    loaded = hs.load_heads(tmp_path / "eagle3", target=target)
    assert loaded.default_tree == DynamicTreeSpec(3, 2, 5) and loaded.held_out is None
    assert isinstance(loaded.layer_copy, TargetLayerCopy) and loaded.layer_copy == eagle.layer_copy
    assert not {"tree", "init_from_target"} & set(loaded.options)
    assert hs.SpeculativeGenerator(target, loaded).tree_spec == DynamicTreeSpec(3, 2, 5)


def test_saved_then_loaded_fields_stay_typed_and_equal(tmp_path):
    target = tiny_target("llama")
    medusa = perturbed_heads(target)
    medusa.held_out = HeldOutAccuracy(ACCURACY)
    set_default_tree(medusa, StaticTreeSpec([[0], [0, 0], [1]]))
    medusa.save_pretrained(tmp_path / "medusa", target)
    head = _config(tmp_path / "medusa")["head"]  # on disk: the keys and JSON forms serving exports read
    assert head["accuracy"] == ACCURACY and head["tree"] == [[0], [1], [0, 0]]
    back = hs.load_heads(tmp_path / "medusa", target=target)
    assert (back.held_out, back.default_tree) == (medusa.held_out, medusa.default_tree)
    assert type(back.held_out) is HeldOutAccuracy and type(back.default_tree) is StaticTreeSpec
    assert back.options == medusa.options

    eagle = hs.heads.build("eagle", target, tree=DynamicTreeSpec(4, 3, 9), init_from_target=True)
    eagle.save_pretrained(tmp_path / "eagle", target)
    head = _config(tmp_path / "eagle")["head"]
    assert head["tree"] == {"depth": 4, "top_k": 3, "total_tokens": 9} and head["init_from_target"]["layer"] == 2
    assert "accuracy" not in head  # a dynamic head keeps no accuracy table
    back = hs.load_heads(tmp_path / "eagle", target=target)
    assert back.default_tree == DynamicTreeSpec(4, 3, 9) and back.layer_copy == eagle.layer_copy
    assert type(back.default_tree) is DynamicTreeSpec and type(back.layer_copy) is TargetLayerCopy
    assert back.options == eagle.options


def test_set_default_tree_writes_the_saved_config_and_takes_only_the_head_kinds_tree(tmp_path):
    target = tiny_target("llama")
    medusa = hs.heads.build("medusa", target, num_heads=2)
    medusa.save_pretrained(tmp_path / "h", target)
    set_default_tree(medusa, StaticTreeSpec([[0], [0, 0]]), folder=tmp_path / "h", tuning={"kind": "static"})
    config = _config(tmp_path / "h")
    assert config["head"]["tree"] == [[0], [0, 0]] and config["tree_tuning"] == {"kind": "static"}
    assert hs.load_heads(tmp_path / "h", target=target).default_tree == medusa.default_tree
    with pytest.raises(HeadstartError, match="medusa heads decode with a StaticTreeSpec"):
        set_default_tree(medusa, DynamicTreeSpec())
    eagle = hs.heads.build("eagle", target)
    assert eagle.default_tree == DynamicTreeSpec()  # build's default budget
    with pytest.raises(HeadstartError, match="eagle heads decode with a DynamicTreeSpec"):
        set_default_tree(eagle, StaticTreeSpec([[0]]))
    with pytest.raises(HeadstartError, match="got 'width'"):
        hs.heads.build("eagle", target, tree={"depth": 2, "width": 3})


@pytest.mark.parametrize("key, value, message", [
    ("tree", [[0], [1, 0]], "path \\[1, 0\\] has no parent"),
    ("accuracy", [[0.5, 1.5]], "shares in \\[0, 1\\]"),
    ("init_from_target", {"layer": 2}, "missing"),
])
def test_a_malformed_saved_field_is_one_clear_error(tmp_path, key, value, message):
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "h", target)
    _rewrite(tmp_path / "h", **{key: value})
    with pytest.raises(CheckpointError, match=f"config.json: head.{key} = .*cannot be read: .*{message}") as e:
        hs.load_heads(tmp_path / "h", target=target)
    assert "\n" not in str(e.value) and "Fix or remove that entry" in str(e.value)
    with pytest.raises(CheckpointError):
        restore_fields(hs.heads.build("medusa", target, num_heads=2), {key: value}, "here")
