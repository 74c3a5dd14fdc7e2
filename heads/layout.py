"""What an export layout is: the types heads/export.py and every heads/layout_*.py module share.

A layout module defines pure functions (build, required names, import); heads/export.py lists them
in its `LAYOUTS` registry as `Layout` entries and does everything else (checks, file writing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from headstart.errors import HeadstartError
from headstart.heads.checkpoint import WEIGHTS_NAME


class ExportError(HeadstartError):
    """A head that cannot be written in the layout asked for."""


@dataclass
class Exported:
    """A layout's files for one head: config.json's content and the tensors of one weights file
    (`torch_copy`: the same tensors also written with torch.save, for loaders that read only that)."""

    config: dict
    tensors: dict[str, torch.Tensor]
    weights_name: str = WEIGHTS_NAME
    torch_copy: str | None = None


@dataclass(frozen=True)
class Layout:
    """One export layout. `build(config, state, target)` maps our checkpoint to the layout;
    `required(exported config)` lists the tensor names the layout's loader needs (and nothing else);
    `load(folder, target)` imports a folder of the layout back as a headstart head;
    `needs_target(config)` says whether the target's weights (lm_head rows) go into the files."""

    kinds: tuple[str, ...]
    build: Callable[[dict, dict, object], Exported]
    required: Callable[[dict], list[str]]
    load: Callable[[Path, object], torch.nn.Module]
    needs_target: Callable[[dict], bool] = lambda config: False
    config_keys: tuple[str, ...] = ()
    description: str = ""
