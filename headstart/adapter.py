"""The target's LoRA adapter (Medusa-2, Cai et al., 2024, §2.3.2): adding, saving, loading, merging
and disabling it, and its file names.

The adapter belongs to the target: PEFT LoRA layers injected into the target's own linear layers,
recorded in `target.adapter`. It is saved beside a head as PEFT's `adapter_config.json` +
`adapter_model.safetensors` (so `PeftModel.from_pretrained` reads the files too), and loading such a
head puts it back on the target: **the model that decodes and verifies is then the adapted one**,
and speculative decoding is lossless with respect to it, not to the base model. `merge_adapter`
folds it into the weights for serving. Training it (the joint loss) is `headstart.train.joint`.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from headstart.errors import HeadstartError
from headstart.files import write_json, write_safetensors

ADAPTER_NAME = "medusa2"
PEFT_PREFIX = "base_model.model."  # PEFT's key prefix, so `PeftModel.from_pretrained` reads our files too
# the adapter's files beside the head it was trained with, under PEFT's names
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


class AdapterError(HeadstartError):
    """An adapter that is missing, corrupt, or does not fit the target."""


def add_adapter(target, config, source: str = "new") -> None:
    """Inject LoRA layers (B initialised to zero: the adapted model starts equal to the base)."""
    from peft import inject_adapter_in_model

    if target.adapter is not None:
        raise AdapterError(f"the target already carries an adapter ({target.adapter['source']}); load a fresh target")
    inject_adapter_in_model(config, target.model, adapter_name=ADAPTER_NAME)
    for name, p in target.model.named_parameters():
        p.requires_grad_("lora_" in name)
    target.adapter = {"source": source, "config": config}


def lora_layers(target) -> list:
    """The target's LoRA layers (PEFT tuner layers), empty when it carries no adapter."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in target.model.modules() if isinstance(m, BaseTunerLayer)]


def adapter_parameters(target) -> list[torch.nn.Parameter]:
    """The adapter's trainable tensors (LoRA A and B of every wrapped layer)."""
    return [p for name, p in target.model.named_parameters() if "lora_" in name]


@contextmanager
def adapters_disabled(target):
    """Run the base model: every LoRA layer off for the duration (their trainability is restored)."""
    layers = lora_layers(target)
    trainable = {id(p): p.requires_grad for p in adapter_parameters(target)}
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for p in adapter_parameters(target):
            p.requires_grad_(trainable.get(id(p), False))


def adapter_state(target) -> dict[str, torch.Tensor]:
    """The adapter's tensors under PEFT's names (`base_model.model.<module>.lora_A.weight`)."""
    from peft import get_peft_model_state_dict

    sd = get_peft_model_state_dict(target.model, adapter_name=ADAPTER_NAME, save_embedding_layers=False)
    return {PEFT_PREFIX + k: v.detach().contiguous().cpu() for k, v in sd.items()}


def save_adapter(target, folder: Path) -> tuple[dict, str]:
    """Write adapter_config.json + adapter_model.safetensors into `folder` (renamed into place).

    Returns the head config's `adapter` entry and the SHA-256 of the weights file (for its checksums).
    """
    if not lora_layers(target):
        raise AdapterError("the target carries no adapter to save")
    peft_config = target.adapter["config"]
    digest = write_safetensors(folder / ADAPTER_WEIGHTS, adapter_state(target), {"format": "pt"})
    cfg = peft_config.to_dict()
    cfg["target_modules"] = sorted(cfg["target_modules"]) if isinstance(cfg["target_modules"], set) else cfg["target_modules"]
    write_json(folder / ADAPTER_CONFIG, cfg)
    entry = {"config": ADAPTER_CONFIG, "weights": ADAPTER_WEIGHTS, "r": peft_config.r, "lora_alpha": peft_config.lora_alpha}
    return entry, digest


def load_adapter(target, folder: str | Path) -> None:
    """Put the adapter saved in `folder` on `target` (which must not carry another one)."""
    from peft import LoraConfig

    folder = Path(folder)
    source = str(folder.resolve())
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (folder / name).is_file():
            raise AdapterError(f"{folder}: the head was trained with LoRA adapters (Medusa-2) but {name} is missing")
    try:
        raw = json.loads((folder / ADAPTER_CONFIG).read_text())
        state = load_file(folder / ADAPTER_WEIGHTS)
    except (json.JSONDecodeError, SafetensorError, OSError, ValueError) as e:
        raise AdapterError(f"{folder}: the adapter files are not readable ({e}); the checkpoint is corrupt") from None
    if target.adapter is not None:
        if _same_tensors(adapter_state(target), state):
            _merge_for_decoding(target)  # this very adapter is on already (trained here, or loaded twice)
            return
        raise AdapterError(
            f"the target already carries another adapter ({target.adapter['source']}) than the head at {folder}: "
            "load a fresh target for it"
        )
    known = set(LoraConfig.__dataclass_fields__)
    config = LoraConfig(**{k: v for k, v in raw.items() if k in known and k not in ("peft_type", "task_type")})
    add_adapter(target, config, source=source)
    expected = {k for k, _ in target.model.named_parameters() if "lora_" in k}
    result = set_adapter_weights(target, state)
    missing = sorted(k for k in result.missing_keys if "lora_" in k and k in expected)
    if missing or len(state) != len(expected):
        remove_adapter(target)
        raise AdapterError(
            f"{folder}: the adapter does not fit the target ({len(state)} tensors for {len(expected)} LoRA weights; "
            f"missing {missing[:3]})"
        )
    target.model.to(target.device)
    target.model.eval()
    target.model.requires_grad_(False)
    _merge_for_decoding(target)


def _merge_for_decoding(target) -> None:
    """Fold the adapter into the weights it wraps (PEFT's merge): decoding then costs what the base
    model costs (unmerged LoRA layers made plain decoding slower: docs/results.md#medusa-2-at-the-cpu-budget).
    The LoRA tensors stay, so the adapter can still be saved or compared."""
    for layer in lora_layers(target):
        if not layer.merged:
            layer.merge()


def set_adapter_weights(target, state: dict[str, torch.Tensor]):
    """Copy adapter tensors saved under PEFT's names into the target's LoRA layers (PEFT's load result)."""
    from peft import set_peft_model_state_dict

    state = {k.removeprefix(PEFT_PREFIX): v for k, v in state.items()}
    return set_peft_model_state_dict(target.model, state, adapter_name=ADAPTER_NAME)


def _same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k].to(a[k].dtype)) for k in a)


def remove_adapter(target) -> None:
    """Undo `add_adapter` (used when a load fails half-way): the base layers go back in place."""
    _unload(target, merge=False)


def merge_adapter(target) -> None:
    """Fold the adapter into the target's weights and drop the LoRA layers (for serving)."""
    if not lora_layers(target):
        raise AdapterError("the target carries no adapter to merge")
    _unload(target, merge=True)


def _unload(target, merge: bool) -> None:
    lora = {id(m) for m in lora_layers(target)}
    for name, module in list(target.model.named_modules()):
        if id(module) in lora:
            if merge and not module.merged:
                module.merge()
            elif not merge and module.merged:
                module.unmerge()  # back to the base weights
            parent_name, _, child = name.rpartition(".")
            parent = target.model.get_submodule(parent_name) if parent_name else target.model
            setattr(parent, child, module.get_base_layer())
    target.model.requires_grad_(False)
    target.adapter = None
