"""Draft heads: one file per kind, a registry, and checkpoint I/O.

    heads = hs.heads.build("medusa", target, num_heads=4)
"""

from __future__ import annotations

from headstart.heads.eagle import EagleHead
from headstart.heads.eagle3 import Eagle3Head
from headstart.heads.medusa import MedusaHeads
from headstart.heads.options import HeadOptionsError

#: kind name -> head class. Each class has `kind`, `build(target, **options)` (a new head),
#: `from_config(options, target)` (the shell a checkpoint's weights are loaded into) and
#: `recipe_fields` (the `head.*` recipe fields its build takes).
REGISTRY: dict[str, type] = {"medusa": MedusaHeads, "eagle": EagleHead, "eagle3": Eagle3Head}


def build(kind: str, target, **options):
    """A new, untrained head of `kind` for `target`."""
    if kind not in REGISTRY:
        raise HeadOptionsError(f"unknown head kind {kind!r}; known kinds: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[kind].build(target, **options)


def load_heads(path_or_repo_id, target, **kwargs):
    """Load any head kind from a folder or Hub repo, checked against `target` (kwargs:
    allow_other_target, revision; see `headstart.heads.checkpoint.load_heads`)."""
    from headstart.heads.checkpoint import load_heads as _load

    return _load(path_or_repo_id, target, **kwargs)


__all__ = ["REGISTRY", "build", "load_heads", "MedusaHeads", "EagleHead", "Eagle3Head"]
