"""Loading a recipe with every part: the core's sections (headstart/config.py), each head kind's options
(a dataclass in the kind's module, `options_class` of its registered class: heads/__init__.py) and
Medusa-2's joint training (train/joint.py).

    recipe = load_recipe("recipes/smollm2-135m/medusa.yaml", ["train.lr=3e-4"])

The core cannot import the layers that own those parts, so the loader (headstart/config.py's) takes
them from here, the top: every command, script and the public API load recipes through this module.
"""

from __future__ import annotations

from pathlib import Path

from headstart import config
from headstart.config import Recipe, RecipeParts


def recipe_parts() -> RecipeParts:
    """The registered head kinds' options and the joint training section, as the loader takes them."""
    from headstart.heads import REGISTRY
    from headstart.train.joint import JointConfig

    return RecipeParts(kinds={kind: cls.options_class for kind, cls in REGISTRY.items()}, joint=JointConfig)


def load_recipe(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """Read a YAML recipe (or start from defaults when `path` is None) and apply dotted overrides; an
    unknown key, a value of the wrong type or out of range, or another head kind's option, is a RecipeError
    naming the key."""
    return config.load_recipe(path, overrides, recipe_parts())

