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

import torch
import torch.nn.functional as F

from headstart.adapter import adapters_disabled
from headstart.config import RecipeError

BACKBONE_LOSSES = ("kl", "lm")


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
