"""EAGLE-1/2 heads (Li et al., 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature
Uncertainty"; "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees").

At position t the head reads the target's last hidden state f_t and the embedding of the next
token x_{t+1}: `fc(concat(embed(x_{t+1}), f_t))` (2D -> D), then one decoder layer built from the
target architecture's own HF class (its input norm removed, as in EAGLE), giving a prediction of
f_{t+1}; the target's frozen lm_head turns it into a distribution over x_{t+2}. Training loss:
SmoothL1(predicted, true f_{t+1}) x feature_loss_weight + cross-entropy against the target's own
distribution at t + 1 x ce_loss_weight, over assistant tokens, with uniform noise on the input
features. Drafting grows an EAGLE-2 dynamic tree (heads/drafting.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from headstart.config import recipe_field
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.heads.feature_head import FeatureHead, Rotary, causal_mask, single_layer_config
from headstart.heads.losses import CE, LossSettings, Objective, soft_draft_loss
from headstart.heads.results import dynamic_tree, set_default_tree
from headstart.heads.vocab import draft_size, draft_vocab_size, index_in_draft_vocab


@dataclass
class EagleOptions:
    """EAGLE's recipe options: its training fields, written under `train:` (it takes no `head:` option)."""

    feature_loss_weight: float = recipe_field(1.0, "EAGLE: weight of the SmoothL1 loss on predicted features", ge=0, section="train")
    ce_loss_weight: float = recipe_field(0.1, "EAGLE: weight of the cross-entropy against the target's next-token distribution", ge=0, section="train")
    feature_noise: float = recipe_field(0.2, "EAGLE: width of the uniform noise added to input features in training (0.2 = ±0.1)", ge=0, section="train")


class EagleHead(FeatureHead):
    """One EAGLE-1/2 draft layer. `options`: hidden_size, vocab_size, draft_vocab_size, model_type;
    its own dynamic tree is `default_tree` (heads/results.py)."""

    kind = "eagle"
    options_class = EagleOptions  # its recipe options

    def __init__(self, options: dict, target):
        super().__init__(options, target)
        d = options["hidden_size"]
        cfg = single_layer_config(target.config)
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.layer = type(target.layers[0])(cfg, layer_idx=0)
        self.layer.input_layernorm = nn.Identity()  # EAGLE: the fused input is not normed again
        self.rotary = Rotary(type(target.base.rotary_emb), cfg)
        self.register_buffer("draft_ids", torch.arange(draft_size(options), dtype=torch.long))
        self._drafter = self.drafter()

    @classmethod
    def build(
        cls, target, draft_vocab: torch.Tensor | None = None, tree: DynamicTreeSpec | dict | None = None
    ) -> "EagleHead":
        """A new head for `target`; `draft_vocab` (target ids) restricts what it ranks; `tree` is the
        dynamic tree it decodes with unless told otherwise (default: DynamicTreeSpec's)."""
        options = {
            "hidden_size": target.hidden_size,
            "vocab_size": target.vocab_size,
            "draft_vocab_size": draft_vocab_size(target, draft_vocab),
            "model_type": target.config.model_type,
        }
        head = cls(options, target)
        if draft_vocab is not None:
            head.draft_ids.copy_(draft_vocab)
        head.target_info = target.describe()
        set_default_tree(head, dynamic_tree(tree))
        return head.to(target.device)

    # ---- the layer ----
    def input_features(self, features: torch.Tensor) -> torch.Tensor:
        return features

    def step(self, feats: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, mask, cache=None) -> torch.Tensor:
        """feats (B, n, D) and next tokens (B, n) at `positions` -> predicted next features (B, n, D)."""
        embed = self.target_parts.embed_tokens(tokens).to(self.dtype)
        x = self.fc(torch.cat([embed, feats.to(self.dtype)], dim=-1))
        pe = self.rotary(x, positions)
        return self.layer(x, attention_mask=mask, position_ids=positions, cache=cache, position_embeddings=pe)

    def draft_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., D) predicted features -> (..., N) logits over the draft vocabulary: EAGLE drafts with the
        target's own lm_head (and softcap)."""
        return self.target_logits(h)

    def draft_index(self, ids: torch.Tensor) -> torch.Tensor:
        """Target ids -> index in the draft vocabulary, -1 outside it."""
        return index_in_draft_vocab(self.draft_ids, self.options["vocab_size"], ids)

    # ---- training ----
    def training_loss(self, out, batch: dict, target, options: EagleOptions,
                      shared: LossSettings = LossSettings()) -> tuple[torch.Tensor, dict[str, float]]:
        return self.loss(
            out.hidden, batch["input_ids"], batch["loss_mask"], options.feature_loss_weight, options.ce_loss_weight,
            options.feature_noise if self.training else 0.0, shared.objective,
        )

    def loss(
        self,
        hidden: torch.Tensor,
        input_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        feature_weight: float = 1.0,
        ce_weight: float = 0.1,
        noise: float = 0.2,
        objective: Objective = CE,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """EAGLE's loss over assistant tokens; hidden (B, T, D) the target's last hidden states.

        Index t (0..T-3) reads f_t and x_{t+1}, predicts f_{t+1}; it counts where x_{t+2} is an
        assistant token. noise: width of the uniform noise added to f_t (EAGLE: 0.2, i.e. ±0.1).
        """
        t = input_ids.shape[1] - 2
        if t < 1:
            zero = self.fc.weight.sum() * 0
            return zero, {}
        f_in = hidden[:, :t].to(self.dtype)
        if noise:
            f_in = f_in + (torch.rand_like(f_in) - 0.5) * noise
        positions = torch.arange(t, device=hidden.device)[None].expand(hidden.shape[0], t)
        pred = self.step(f_in, input_ids[:, 1 : t + 1], positions, causal_mask(t, self.dtype, hidden.device))
        valid = loss_mask[:, 2:].bool()  # (B, T - 2)
        if not valid.any():
            return pred.sum() * 0, {}
        p_hat, f_true = pred[valid].float(), hidden[:, 1 : t + 1][valid].float()  # (M, D)
        feature_loss = F.smooth_l1_loss(p_hat, f_true)
        with torch.no_grad():
            target_p = self.draft_logits(f_true).float().softmax(-1)  # the target's own distribution
        draft_logp = self.draft_logits(p_hat).float().log_softmax(-1)
        term = soft_draft_loss(draft_logp, target_p, objective)  # `objective`'s loss; CE by default
        with torch.no_grad():
            labels = self.draft_index(input_ids[:, 2:][valid])
            top1 = draft_logp.argmax(-1)
            acc = (top1 == labels).float().mean().item()
            agree = (top1 == target_p.argmax(-1)).float().mean().item()
        loss = feature_weight * feature_loss + ce_weight * term.loss
        return loss, {"feature_loss": feature_loss.item(), "ce": term.ce.item(), "step0_top1": acc,
                      "step0_agree": agree, "step0_accept": term.accept.item(), "sim_accept_length": 1 + acc}
