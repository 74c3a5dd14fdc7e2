"""Head checkpoints: `config.json` + `model.safetensors`, the head's own weights only.

config.json records the kind, the head's options, and the target it was trained for (name,
revision, hidden size, vocab size, layers, max_position_embeddings), so that loading can refuse a
head for another target and serving layouts can be written from the checkpoint alone. Files are
written beside their final names and renamed into place, config.json last: an interrupted save
never looks complete.
Nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
# Medusa-2: the LoRA adapter trained with the heads, beside them, under PEFT's file names
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


class CheckpointError(ValueError):
    """A head checkpoint that is missing, corrupt, or made for another target."""


def save_heads(heads, folder: str | Path, target=None, extra: dict | None = None, state: dict | None = None) -> Path:
    """Write the head (never the target) to `folder` atomically; returns the folder.

    `state` overrides tensors of the head's own state dict (e.g. the consolidated weights of a
    head whose parameters DeepSpeed ZeRO-3 has partitioned across processes).
    """
    folder = Path(folder)
    config = head_config(heads, target, extra)
    state = {**head_state(heads), **{k: v.detach().contiguous().cpu() for k, v in (state or {}).items()}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_NAME).unlink(missing_ok=True)  # the folder is incomplete until the end
    # Each file is written beside its final name and renamed into place; config.json comes last,
    # so a folder with a config.json always has the weights that belong to it.
    weights_tmp = folder / f".{WEIGHTS_NAME}.tmp"
    save_file(state, weights_tmp, metadata={"format": "pt", "kind": heads.kind})
    os.replace(weights_tmp, folder / WEIGHTS_NAME)
    if target is not None and getattr(target, "adapter", None):
        # Medusa-2: the LoRA adapter the heads were trained with goes beside them (PEFT's files);
        # loading the head puts it back on the target, which then verifies as the adapted model.
        from headstart.train.joint import save_adapter

        config["adapter"] = save_adapter(target, folder)
    _write_config(folder, config)
    return folder


def head_config(heads, target=None, extra: dict | None = None) -> dict:
    """What config.json holds for `heads` (exporters start from it too)."""
    config = {
        "format_version": FORMAT_VERSION,
        "kind": heads.kind,
        "head": {k: v for k, v in heads.options.items() if k not in ("hidden_size", "vocab_size")},
        "hidden_size": heads.options["hidden_size"],
        "vocab_size": heads.options["vocab_size"],
        "target": target.describe() if target is not None else heads.target_info,
    }
    if extra:
        config.update(extra)
    return config


def head_state(heads) -> dict:
    """The head's own tensors, detached, contiguous, on the CPU (never the target's)."""
    return {k: v.detach().contiguous().cpu() for k, v in heads.state_dict().items()}


def _write_config(folder: Path, config: dict) -> None:
    """Write config.json beside its final name and rename it into place."""
    tmp = folder / f".{CONFIG_NAME}.tmp"
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    os.replace(tmp, folder / CONFIG_NAME)


def update_config(folder: str | Path, head: dict | None = None, **top: object) -> dict:
    """Merge keys into a saved head's config.json (e.g. the tree chosen for it), atomically."""
    folder = Path(folder)
    config = read_config(folder)
    config["head"].update(head or {})
    config.update(top)
    _write_config(folder, config)
    return config


def read_config(folder: Path) -> dict:
    path = folder / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{folder} is not a headstart head: {CONFIG_NAME} is missing")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    missing = [k for k in ("format_version", "kind", "head", "hidden_size", "vocab_size", "target") if k not in config]
    if missing:
        raise CheckpointError(f"{path} lacks the keys {missing}; it was not written by headstart")
    if config["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format_version {config['format_version']}; this headstart reads up to "
            f"{FORMAT_VERSION}. Upgrade headstart."
        )
    return config


def check_target(config: dict, target, where: str, allow_other_target: bool = False) -> None:
    """Refuse a head whose recorded target differs from `target` in shape (always) or name."""
    problems = []
    if config["hidden_size"] != target.hidden_size:
        problems.append(f"hidden size {config['hidden_size']} (target has {target.hidden_size})")
    if config["vocab_size"] != target.vocab_size:
        problems.append(f"vocabulary of {config['vocab_size']} tokens (target has {target.vocab_size})")
    if problems:
        raise CheckpointError(
            f"the head at {where} was trained for {config['target'].get('name_or_path')!r} and does not fit "
            f"the target {target.name!r}: it has {' and '.join(problems)}."
        )
    recorded = (config.get("target") or {}).get("name_or_path")
    if recorded and recorded != target.name and not allow_other_target:
        raise CheckpointError(
            f"the head at {where} was trained for {recorded!r}, but the target is {target.name!r}. "
            f"Shapes agree, but its proposals would be tuned to another model. Pass "
            f"allow_other_target=True to load it anyway."
        )


def resolve_folder(path_or_repo_id: str | Path, revision: str | None = None) -> Path:
    folder = Path(path_or_repo_id)
    if folder.exists():
        return folder
    if str(path_or_repo_id).count("/") != 1:
        raise CheckpointError(f"{path_or_repo_id} is neither a folder nor a Hub repo id (owner/name)")
    from huggingface_hub import snapshot_download

    patterns = [CONFIG_NAME, WEIGHTS_NAME, ADAPTER_CONFIG, ADAPTER_WEIGHTS]
    return Path(snapshot_download(str(path_or_repo_id), revision=revision, allow_patterns=patterns))


def load_heads(path_or_repo_id: str | Path, target, allow_other_target: bool = False, revision: str | None = None):
    """Load a head of any registered kind and check it against `target`."""
    from headstart.heads import REGISTRY

    folder = resolve_folder(path_or_repo_id, revision)
    config = read_config(folder)
    kind = config["kind"]
    if kind not in REGISTRY:
        raise CheckpointError(f"{folder}: unknown head kind {kind!r}; this headstart knows {sorted(REGISTRY)}")
    check_target(config, target, str(folder), allow_other_target)
    weights = folder / WEIGHTS_NAME
    if not weights.is_file():
        raise CheckpointError(f"{folder}: {WEIGHTS_NAME} is missing")
    try:
        state = load_file(weights)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{weights} is not a readable safetensors file ({e}); the checkpoint is corrupt") from None
    options = dict(config["head"], hidden_size=config["hidden_size"], vocab_size=config["vocab_size"])
    try:
        heads = REGISTRY[kind].from_config(options, target)
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{folder}: the head's config does not fit the target: {e}") from None
    expected = set(heads.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise CheckpointError(f"{weights}: missing weights {missing[:5]}, unexpected weights {unexpected[:5]}")
    for name, tensor in heads.state_dict().items():
        if state[name].shape != tensor.shape:
            raise CheckpointError(f"{weights}: {name} has shape {tuple(state[name].shape)}, expected {tuple(tensor.shape)}")
    heads.load_state_dict(state, strict=True)
    heads.target_info = config["target"]
    if config.get("adapter"):  # Medusa-2: the target verifies as the adapted model from here on
        from headstart.train.joint import AdapterError, load_adapter

        try:
            load_adapter(target, folder)
        except AdapterError as e:
            raise CheckpointError(str(e)) from None
    return heads.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)
