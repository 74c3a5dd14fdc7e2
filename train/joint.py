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
default: every linear layer but the lm_head, which stays frozen because the heads share it).
Adding, saving, loading, merging and disabling them is the target's business (`headstart.adapter`);
this module holds what training adds: their config from a recipe and the joint loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from headstart.adapter import adapters_disabled
from headstart.config import RecipeError, recipe_field
from headstart.heads.losses import LossSettings

BACKBONE_LOSSES = ("kl", "lm")


@dataclass
class JointConfig:
    """Medusa-2's joint training (`recipe.joint`), its fields written under `train:` as they always were
    (train.joint, train.lora_r, ...); headstart/recipe.py gives it to the recipe loader."""

    joint: bool = recipe_field(False, "Medusa-2: train LoRA adapters on the target together with the heads; decoding then verifies with the ADAPTED target")
    lora_r: int = recipe_field(32, "Medusa-2: LoRA rank", ge=1, le=1 << 16, why="wider than any layer")
    lora_alpha: int = recipe_field(16, "Medusa-2: LoRA alpha (scale alpha / r)", ge=1)
    lora_dropout: float = recipe_field(0.05, "Medusa-2: dropout on the LoRA input", ge=0, lt=1)
    lora_targets: str = recipe_field("all-linear", "Medusa-2: 'all-linear' (every linear layer but the lm_head) or comma-separated module names, e.g. q_proj,v_proj")
    backbone_loss: str = recipe_field("kl", "Medusa-2: the backbone's own loss: kl (KL to the base model's distribution, adapters off) or lm (next-token CE on the data)")
    backbone_loss_weight: float = recipe_field(1.0, "Medusa-2: weight of the backbone's own loss", ge=0)
    head_loss_weight: float = recipe_field(0.2, "Medusa-2: weight of the heads' loss (Medusa's heads coefficient)", ge=0)
    head_loss_warmup: float = recipe_field(0.1, "Medusa-2: fraction of the steps over which the heads' loss weight rises linearly from 0", ge=0, le=1)
    head_lr_multiplier: float = recipe_field(4.0, "Medusa-2: the heads' learning rate is lr times this (the adapters use lr)", gt=0)

    @property
    def enabled(self) -> bool:
        """Whether the recipe trains jointly (`train.joint`)."""
        return self.joint


def lora_config(cfg: JointConfig, target):
    """The PEFT LoraConfig of a recipe's joint training."""
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


def head_loss_weight(cfg: JointConfig, progress: float) -> float:
    """w(step): linear from 0 to head_loss_weight over the first head_loss_warmup of training."""
    if cfg.head_loss_warmup <= 0:
        return cfg.head_loss_weight
    return cfg.head_loss_weight * min(1.0, progress / cfg.head_loss_warmup)


def joint_loss(heads, target, batch: dict, cfg: JointConfig, options, shared: LossSettings,
               progress: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Medusa-2's loss for one batch: the backbone's own loss plus the warmed-up head loss (the head's
    `training_loss` with its kind's `options` and the `shared` training fields)."""
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
    head_loss, metrics = heads.training_loss(out, batch, target, options, shared)
    w = head_loss_weight(cfg, progress)
    metrics.update({f"backbone_{cfg.backbone_loss}": backbone.item(), "head_loss": head_loss.item(), "head_loss_weight": w})
    return cfg.backbone_loss_weight * backbone + w * head_loss, metrics
