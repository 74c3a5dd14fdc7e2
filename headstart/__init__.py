"""headstart: train draft heads for lossless speculative decoding of Hugging Face causal LMs.

The public names are imported lazily, so `import headstart` and `headstart --help` stay fast.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "Target": "headstart.target",
    "embedded_target": "headstart.embedded",
    "load_heads": "headstart.heads.checkpoint",
    "SpeculativeGenerator": "headstart.decode.generate",
    "load_recipe": "headstart.recipe",
    "Recipe": "headstart.config",
}

__all__ = [*_LAZY, "heads"]


def __getattr__(name: str):
    if name == "heads":
        return importlib.import_module("headstart.heads")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'headstart' has no attribute {name!r}")
