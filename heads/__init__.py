"""Draft heads: one file per kind, a registry, and checkpoint I/O.

    heads = hs.heads.build("medusa", target, num_heads=4)
"""

from __future__ import annotations

from headstart.heads.eagle import EagleHead
from headstart.heads.eagle3 import Eagle3Head
from headstart.heads.medusa import MedusaHeads
from headstart.heads.options import HeadOptionsError

#: kind name -> head class. Each class has `kind`, `build(target, **options)` (a new head),
#: `from_config(options, target)` (the shell a checkpoint's weights are loaded into),
#: `layers_for(target, **options)` (the target layers such a head reads, known without building it)
#: and `recipe_fields` (the `head.*` recipe fields its build takes).
REGISTRY: dict[str, type] = {"medusa": MedusaHeads, "eagle": EagleHead, "eagle3": Eagle3Head}


def head_class(kind: str) -> type:
    """The registered class of head kind `kind`."""
    if kind not in REGISTRY:
        raise HeadOptionsError(f"unknown head kind {kind!r}; known kinds: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[kind]


def build(kind: str, target, **options):
    """A new, untrained head of `kind` for `target`."""
    return head_class(kind).build(target, **options)


def recipe_options(head_config) -> dict:
    """The build options a recipe's `head` section sets for its kind (fields left at None are left out)."""
    cls = head_class(head_config.kind)
    return {k: getattr(head_config, k) for k in cls.recipe_fields if getattr(head_config, k) is not None}


def feature_layers(kind: str, target, **options) -> tuple[int, ...]:
    """The target layers a new head of `kind` built with `options` reads besides the last hidden
    state (its `feature_layers`), from the options alone: no head is built."""
    return head_class(kind).layers_for(target, **options)


def load_heads(path_or_repo_id, target, **kwargs):
    """Load any head kind from a folder or Hub repo, checked against `target` (kwargs:
    allow_other_target, revision; see `headstart.heads.checkpoint.load_heads`)."""
    from headstart.heads.checkpoint import load_heads as _load

    return _load(path_or_repo_id, target, **kwargs)


__all__ = ["REGISTRY", "build", "feature_layers", "head_class", "load_heads", "recipe_options", "MedusaHeads", "EagleHead", "Eagle3Head"]
