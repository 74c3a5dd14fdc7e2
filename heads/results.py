"""What a head holds besides its architecture options: what was measured or chosen for it after it
was built. Each is a typed field on the head, written in one place, and saved in config.json's
`head` section under the key earlier versions used, so heads saved before load unchanged and the
serving exports (which start from config.json) read what they always read:

- `head.held_out` (a HeldOutAccuracy; static heads, None until measured): the held-out per-depth top-k
  accuracy that 'auto' trees are built from. Written by the trainer's measuring step. Saved as head.accuracy.
- `head.default_tree` (a StaticTreeSpec for a static head, a DynamicTreeSpec for a dynamic one; None:
  the recipe's tree): the tree the head decodes with unless the command line says otherwise. Written
  through `set_default_tree` only: by build (the EAGLE kinds' default budget), the trainer (the recipe's
  decode budget), tune-tree and the demo (the tuned tree). Saved as head.tree.
- `head.layer_copy` (a TargetLayerCopy; None unless the head started from the target's layer): which
  target layer init_from_target copied into the draft layer, parameter by parameter. Written by
  `copy_target_layer` (heads/init_from_target.py). Saved as head.init_from_target.

`head.options` keeps only what `build` / `from_config` take (sizes, layers, draft vocabulary size,
...): what the head is. Loading splits a saved `head` section into the two (`architecture_options`,
then `restore_fields`). The tree specs and the held-out accuracy are types of headstart/decode (the
decoding loop reads them, and may not import heads); they are re-exported here for train/, which may
not import decode.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from headstart.decode.contract import TreeSpec, trait
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.tree import HeldOutAccuracy, StaticTreeSpec
from headstart.heads.init_from_target import TargetLayerCopy
from headstart.heads.options import HeadOptionsError
from headstart.heads.reading import CheckpointError

#: config.json's `head` key of each field (the keys earlier versions wrote into the options)
SAVED_AS = {"held_out": "accuracy", "default_tree": "tree", "layer_copy": "init_from_target"}


def architecture_options(saved_head: dict) -> dict:
    """A saved `head` section without the fields' keys: the options `build` / `from_config` take."""
    return {k: v for k, v in saved_head.items() if k not in SAVED_AS.values()}


def saved_fields(head) -> dict:
    """The fields that are set, as config.json's `head` section holds them."""
    saved = {}
    for field, key in SAVED_AS.items():
        value = getattr(head, field, None)
        if value is not None:
            saved[key] = value.to_json()
    return saved


def restore_fields(head, saved_head: dict, where: str) -> None:
    """Set the fields from a saved `head` section (config.json, or an export's own block), all read
    before any is set; a malformed value is a CheckpointError naming `where`."""
    held_out = _read(saved_head, SAVED_AS["held_out"], HeldOutAccuracy, where)
    tree = _read(saved_head, SAVED_AS["default_tree"], lambda saved: _tree_spec(head, saved), where)
    layer_copy = _read(saved_head, SAVED_AS["layer_copy"], lambda saved: TargetLayerCopy(**saved), where)
    if held_out is not None:
        head.held_out = held_out
    if tree is not None:
        set_default_tree(head, tree)
    if layer_copy is not None:
        head.layer_copy = layer_copy


def _read(saved_head: dict, key: str, reader: Callable[[object], object], where: str):
    """`reader` of saved_head[key] (None when the key is absent or null)."""
    if saved_head.get(key) is None:
        return None
    try:
        return reader(saved_head[key])
    except (TypeError, ValueError) as e:  # TreeError and HeadOptionsError are ValueErrors
        raise CheckpointError(
            f"{where}: head.{key} = {saved_head[key]!r} cannot be read: {e}. Fix or remove that entry (what was "
            f"measured or chosen for the head, not its weights)"
        ) from None


def _tree_spec(head, saved) -> TreeSpec:
    """A saved head.tree as the spec of the head's kind: a dynamic head's {depth, top_k, total_tokens}
    (a missing field takes DynamicTreeSpec's default), a static head's list of paths."""
    return dynamic_tree(saved) if trait(head, "dynamic") else StaticTreeSpec(saved)


def dynamic_tree(tree: DynamicTreeSpec | dict | None) -> DynamicTreeSpec:
    """A dynamic tree's budget from a spec, a dict of its fields (a missing one takes DynamicTreeSpec's
    default; an unknown one is refused) or None (the defaults)."""
    if tree is None or isinstance(tree, DynamicTreeSpec):
        return tree or DynamicTreeSpec()
    unknown = sorted(set(tree) - set(DynamicTreeSpec().to_json()))
    if unknown:
        raise HeadOptionsError(f"a dynamic tree has the fields depth, top_k and total_tokens; got {unknown[0]!r} in {tree!r}")
    return DynamicTreeSpec(**tree)


def set_default_tree(head, tree: TreeSpec, folder: str | Path | None = None, tuning: dict | None = None) -> None:
    """Make `tree` the one `head` decodes with unless told otherwise (head.default_tree). With `folder`
    (where the head is saved), also write it into that config.json (head.tree), with `tuning`, the
    table it was chosen from, as tree_tuning. The tree must be of the head's kind: a DynamicTreeSpec
    for a dynamic head, a StaticTreeSpec for a static one."""
    expected = DynamicTreeSpec if trait(head, "dynamic") else StaticTreeSpec
    if not isinstance(tree, expected):
        raise HeadOptionsError(f"{head.kind} heads decode with a {expected.__name__} as their own tree; got {tree!r}")
    if folder is not None:
        from headstart.heads.checkpoint import update_config  # checkpoint.py imports this module

        update_config(folder, head={SAVED_AS["default_tree"]: tree.to_json()}, **({"tree_tuning": tuning} if tuning else {}))
    head.default_tree = tree


__all__ = [
    "SAVED_AS", "DynamicTreeSpec", "HeldOutAccuracy", "StaticTreeSpec", "TargetLayerCopy", "architecture_options",
    "dynamic_tree", "restore_fields", "saved_fields", "set_default_tree",
]
