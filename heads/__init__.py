"""Draft heads: one file per kind, a registry, and checkpoint I/O.

    heads = hs.heads.build("medusa", target, num_heads=4)
"""

from __future__ import annotations

import inspect

from headstart.config import part_fields
from headstart.heads.dflash import DFlashHead
from headstart.heads.eagle import EagleHead
from headstart.heads.eagle3 import Eagle3Head
from headstart.heads.init_from_target import copy_target_layer
from headstart.heads.medusa import MedusaHeads
from headstart.heads.options import HeadOptionsError

#: kind name -> head class. Each class has `kind`, `build(target, **options)` (a new head),
#: `from_config(options, target)` (the shell a checkpoint's weights are loaded into),
#: `layers_for(target, **options)` (the target layers such a head reads, known without building it)
#: and `options_class`, the dataclass of its recipe options in its own module (the `head.*` fields its
#: build takes, and its training fields written under `train:`), which the recipe loader checks.
#: Adding a kind: its module, with that dataclass, and a line here.
REGISTRY: dict[str, type] = {"medusa": MedusaHeads, "eagle": EagleHead, "eagle3": Eagle3Head, "dflash": DFlashHead}


def head_class(kind: str) -> type:
    """The registered class of head kind `kind`."""
    if kind not in REGISTRY:
        raise HeadOptionsError(f"unknown head kind {kind!r}; known kinds: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[kind]


def build(kind: str, target, init_from_target: bool = False, **options):
    """A new, untrained head of `kind` for `target`; an option the kind does not take is a HeadOptionsError.
    init_from_target (EAGLE, EAGLE-3): its draft layer starts as a copy of the target's last decoder layer
    (heads/init_from_target.py)."""
    cls = head_class(kind)
    takes = [name for name in inspect.signature(cls.build).parameters if name != "target"]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise HeadOptionsError(f"a {kind} head takes no option {unknown[0]!r}; its options are: {', '.join(takes)}")
    head = cls.build(target, **options)
    if init_from_target:
        copy_target_layer(head, target)
    return head


def recipe_options(head_config) -> dict:
    """The build options a recipe's head section sets for its kind: its options written under `head:`,
    those left at None left out (the recipe loader refused the options of other kinds)."""
    options = head_config.options
    return {name: getattr(options, name) for section, name in part_fields(type(options), "head")
            if section == "head" and getattr(options, name) is not None}


def feature_layers(kind: str, target, **options) -> tuple[int, ...]:
    """The target layers a new head of `kind` built with `options` reads besides the last hidden
    state (its `feature_layers`), from the options alone: no head is built."""
    return head_class(kind).layers_for(target, **options)


def load_heads(path_or_repo_id, target, **kwargs):
    """Load any head kind from a folder or Hub repo, checked against `target` (kwargs:
    allow_other_target, revision; see `headstart.heads.checkpoint.load_heads`)."""
    from headstart.heads.checkpoint import load_heads as _load

    return _load(path_or_repo_id, target, **kwargs)


__all__ = ["REGISTRY", "build", "feature_layers", "head_class", "load_heads", "recipe_options", "MedusaHeads", "EagleHead", "Eagle3Head", "DFlashHead"]
