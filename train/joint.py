"""Medusa-2: the heads trained jointly with LoRA adapters on the target (Cai et al., 2024, §2.3.2).

The backbone learns to serve its heads, so it must keep its own behaviour or speculative decoding
stops being lossless *for the original model*. The loss is

    backbone_loss_weight · L_backbone  +  w(step) · Σ_k loss_decay^k · CE_k (the heads, as Medusa-1)

with L_backbone either `kl`: KL(p_base ‖ p_adapted) on every assistant position, p_base from the
same forward with the adapters switched off (self-distillation: the adapters are pulled back to
the model's own distribution), or `lm`: plain next-token cross-entropy on the (self-distilled)
data. w(step) rises linearly from 0 to `head_loss_weight` over the first `head_loss_warmup` of
the steps, and the heads learn `head_lr_multiplier` times faster than the adapters.

Adapters are PEFT LoRA layers injected into the target's own linear layers (`all-linear` by
default: every linear layer but the lm_head, which stays frozen because the heads share it). They
are saved beside the heads as PEFT's `adapter_config.json` + `adapter_model.safetensors`, and
loading such a head puts them back on the target: **the model that decodes and verifies is then
the adapted one**, and speculative decoding is lossless with respect to it, not to the base model.
`merge_adapter` folds them into the weights for serving.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file

from headstart.config import RecipeError
from headstart.errors import HeadstartError
from headstart.files import replace_refusal, staged_folder, write_json, write_safetensors
from headstart.heads.checkpoint import ADAPTER_CONFIG, ADAPTER_WEIGHTS

ADAPTER_NAME = "medusa2"
PEFT_PREFIX = "base_model.model."  # PEFT's key prefix, so `PeftModel.from_pretrained` reads our files too
BACKBONE_LOSSES = ("kl", "lm")


class AdapterError(HeadstartError):
    """An adapter that is missing, corrupt, or does not fit the target."""


def lora_config(cfg, target):
    """The PEFT LoraConfig of a recipe's train section."""
    from peft import LoraConfig

    targets = cfg.lora_targets
    if targets != "all-linear":
        targets = [t.strip() for t in str(targets).split(",") if t.strip()]
        if any(t in ("lm_head", "embed_tokens") for t in targets):
            raise RecipeError("train.lora_targets: the lm_head and the embeddings stay frozen (the heads share them)")
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        base_model_name_or_path=target.name,
        revision=target.revision,
    )


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
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in target.model.modules() if isinstance(m, BaseTunerLayer)]


def adapter_parameters(target) -> list[torch.nn.Parameter]:
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


def save_adapter(target, folder: Path) -> dict:
    """Write adapter_config.json + adapter_model.safetensors into `folder` (renamed into place)."""
    if not lora_layers(target):
        raise AdapterError("the target carries no adapter to save")
    peft_config = target.adapter["config"]
    write_safetensors(folder / ADAPTER_WEIGHTS, adapter_state(target), {"format": "pt"})
    cfg = peft_config.to_dict()
    cfg["target_modules"] = sorted(cfg["target_modules"]) if isinstance(cfg["target_modules"], set) else cfg["target_modules"]
    write_json(folder / ADAPTER_CONFIG, cfg)
    return {"config": ADAPTER_CONFIG, "weights": ADAPTER_WEIGHTS, "r": peft_config.r, "lora_alpha": peft_config.lora_alpha}


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
        _remove_adapter(target)
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
    model costs (unmerged LoRA layers made plain decoding ~20% slower here). The LoRA tensors stay, so
    the adapter can still be saved or compared."""
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


def _remove_adapter(target) -> None:
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


def head_loss_weight(cfg, progress: float) -> float:
    """w(step): linear from 0 to head_loss_weight over the first head_loss_warmup of training."""
    if cfg.head_loss_warmup <= 0:
        return cfg.head_loss_weight
    return cfg.head_loss_weight * min(1.0, progress / cfg.head_loss_warmup)


def joint_loss(heads, target, batch: dict, cfg, progress: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Medusa-2's loss for one batch: the backbone's own loss plus the warmed-up head loss."""
    ids, attention = batch["input_ids"], batch["attention_mask"]
    out = target.forward_with_grad(ids, attention_mask=attention)  # adapters on, gradients through them
    predicts = batch["loss_mask"][:, 1:].bool()  # position t predicts an assistant token at t + 1
    logits = target.logits(out.hidden[:, :-1][predicts]).float()  # (M, V)
    if cfg.backbone_loss == "kl":
        with torch.no_grad(), adapters_disabled(target):
            base = target.forward_with_grad(ids, attention_mask=attention).hidden[:, :-1][predicts]
            base_logp = target.logits(base).float().log_softmax(-1)
        backbone = F.kl_div(logits.log_softmax(-1), base_logp, log_target=True, reduction="batchmean")
    else:
        backbone = F.cross_entropy(logits, ids[:, 1:][predicts])
    head_loss, metrics = heads.training_loss(out, batch, target, cfg)
    w = head_loss_weight(cfg, progress)
    metrics.update({f"backbone_{cfg.backbone_loss}": backbone.item(), "head_loss": head_loss.item(), "head_loss_weight": w})
    return cfg.backbone_loss_weight * backbone + w * head_loss, metrics


def save_merged_target(head_folder: str | Path, target, out: str | Path, force: bool = False) -> Path:
    """Load a Medusa-2 head's adapter onto `target`, merge it, and save the merged model (with the
    tokenizer) to `out`, renamed into place: the model to serve with the exported head.

    `out` is replaced only when it is empty or an earlier merged target (its marker file lists all
    it holds), or with `force`; never when it holds the head, the target's own folder or a training
    run's output.
    """
    from headstart.heads.checkpoint import load_heads, read_config
    from headstart.heads.export import ExportError

    loaded_from = {target.name, getattr(target.model, "name_or_path", None) or target.name}
    keep = [Path(head_folder), *(Path(p) for p in loaded_from if Path(p).exists())]
    refusal = replace_refusal(out, force, keep)
    if refusal:
        raise ExportError(f"not saving the merged target to {out}: {refusal}")
    if not read_config(Path(head_folder)).get("adapter"):
        raise AdapterError(f"{head_folder} was trained without an adapter (Medusa-1): serve it with the target as it is")
    load_heads(head_folder, target, allow_other_target=True)
    merge_adapter(target)
    with staged_folder(out, written_by="headstart export --merged-target") as tmp:
        target.model.save_pretrained(tmp)
        if target.tokenizer is not None:
            target.tokenizer.save_pretrained(tmp)
    return Path(out)
