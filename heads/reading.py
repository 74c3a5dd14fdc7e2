"""Reading the files of head folders, ours and other projects', checked as they are read.

The writing side (renamed into place, folders staged whole) is headstart/files.py; this is its
reading side for heads: every helper raises `CheckpointError` (a missing, corrupt or foreign file)
with the path and what to do, which is why it lives here and not in the core. checkpoint.py,
hub.py, export.py and the layout_* modules all read through it.

Nothing is ever unpickled: `.pt`/`.bin` files are read with `torch.load(weights_only=True)` only.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from headstart.errors import HeadstartError


class CheckpointError(HeadstartError):
    """A head checkpoint that is missing, corrupt, or made for another target."""


def read_json(path: Path, required: tuple[str, ...] = ()) -> dict:
    """The JSON object in `path`, which must exist, parse and hold every key in `required`."""
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    missing = [k for k in required if k not in config]
    if missing:
        raise CheckpointError(f"{path} lacks the keys {missing}; it is not a complete checkpoint of this layout")
    return config


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, on the CPU."""
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({e}); it is corrupt, truncated, or another "
            f"format under a .safetensors name"
        ) from None


def read_torch(path: Path) -> dict[str, torch.Tensor]:
    """A `.pt` state dict, loaded with weights_only=True (tensors and plain containers only)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError, RuntimeError (zip), EOFError...: all mean "not loadable safely"
        raise CheckpointError(
            f"{path} cannot be loaded with torch.load(weights_only=True): {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}. headstart never unpickles arbitrary objects; "
            f"convert the file to safetensors where it was made, or check that it is complete."
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} holds {type(state).__name__}, not a state dict of tensors")
    return state


def checked_tensor(state: dict, name: str, shape: tuple[int, ...], where: Path) -> torch.Tensor:
    """`state[name]`, which must exist and have `shape` (`where`: the file, for the message)."""
    if name not in state:
        raise CheckpointError(f"{where}: the tensor {name!r} is missing")
    t = state[name]
    if tuple(t.shape) != shape:
        raise CheckpointError(f"{where}: {name} has shape {tuple(t.shape)}, expected {shape}")
    return t


def check_shapes(hidden: int, vocab: int, target, folder: Path) -> None:
    """Refuse a folder in another project's layout made for another hidden size or vocabulary."""
    if hidden != target.hidden_size or vocab != target.vocab_size:
        raise CheckpointError(
            f"{folder} was made for hidden size {hidden} and {vocab} tokens; the target {target.name!r} "
            f"has {target.hidden_size} and {target.vocab_size}"
        )
