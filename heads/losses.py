"""Draft losses by name (`train.loss`): how a head's draft distribution q is pulled towards p.

Speculative sampling accepts a drafted token with probability min(1, p/q), so one draft position
is accepted with probability α = Σ_v min(p_v, q_v) = 1 − TV(p, q) (Leviathan et al., 2023), and
τ is made of these per-depth α. The soft cross-entropy the heads have always trained on is a
proxy: KL(p ‖ q) and 1 − α share their optimum q = p, but a small draft that cannot reach it
settles where KL is low, not where α is high. The LK losses (Samarin et al., 2026, "LK Losses:
Direct Acceptance Rate Optimization for Speculative Decoding", arXiv 2602.23881) train on α:

- `ce`:        −Σ p log q, the soft cross-entropy (KL(p ‖ q) + H(p)); the default
- `tv`:        1 − α; its gradient vanishes where p and q barely overlap (a cold start)
- `lk`:        −log α (the paper's LK^α): TV's aim with the gradient scaled by 1/α, so it trains
               from a cold start; for a one-hot p it is the cross-entropy itself
- `lk_lambda`: λ·KL(p ‖ q) + (1 − λ)·(1 − α), λ = exp(−η·ᾱ), η = 3, ᾱ the mean α of the call,
               held constant under the gradient (the paper's LK^λ): KL while the draft is far
               from p, TV once it is close

`train.loss_mix` m blends any of them with the cross-entropy: m·L + (1 − m)·CE. Every loss is a
mean over the M positions given; α (a metric whatever trains) is where heads report acceptance.
With a draft vocabulary, p is the target's distribution renormalised over it, as for the CE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from headstart.config import RecipeError

LOSSES = ("ce", "tv", "lk", "lk_lambda")
LK_ETA = 3.0  # LK^λ's decay: λ = exp(-η·ᾱ) is 1 (pure KL) at ᾱ = 0 and 0.05 at ᾱ = 1


@dataclass(frozen=True)
class Objective:
    """What a head's token loss is: a name of LOSSES and its weight against the cross-entropy."""

    name: str = "ce"
    mix: float = 1.0

    def __post_init__(self):
        if self.name not in LOSSES:
            raise RecipeError(f"train.loss: unknown draft loss {self.name!r}; choose one of {', '.join(LOSSES)}")
        if not 0.0 <= self.mix <= 1.0:
            raise RecipeError(f"train.loss_mix: expected a weight in [0, 1], got {self.mix!r}")

    @classmethod
    def from_config(cls, cfg) -> "Objective":
        """The objective of a recipe's train section (TrainConfig: `loss`, `loss_mix`)."""
        return cls(cfg.loss, cfg.loss_mix)


CE = Objective()


@dataclass(frozen=True)
class LossSettings:
    """The shared training fields a head's `training_loss` reads beside its kind's options: the token
    objective (`train.loss`, `train.loss_mix`) and the weight decay over depth (`train.loss_decay`)."""

    objective: Objective = CE
    decay: float = 0.8

    @classmethod
    def from_config(cls, cfg) -> "LossSettings":
        """The settings of a recipe's train section (TrainConfig)."""
        return cls(Objective.from_config(cfg), cfg.loss_decay)


class DraftLoss(NamedTuple):
    """One depth's token loss: `loss` trains; `ce` and `accept` (mean α, detached) are metrics."""

    loss: torch.Tensor
    ce: torch.Tensor
    accept: torch.Tensor


def soft_draft_loss(logq: torch.Tensor, p: torch.Tensor, objective: Objective = CE,
                    weights: torch.Tensor | None = None) -> DraftLoss:
    """The loss of draft log-probabilities `logq` (M, N) against the target's distribution `p` (M, N).

    `ce` is computed exactly as the heads always did, so the default trains bit for bit as before.
    `weights` (M,), when given, make the trained loss a weighted mean over the positions
    (complementary training, heads/complement.py); the metrics `ce` and `accept` stay unweighted.
    """
    ce_rows = -(p * logq).sum(-1)  # (M,)
    ce = ce_rows.mean()
    if weights is None:
        mean = torch.mean
    else:
        w = weights.to(ce_rows.dtype)
        total = w.sum().clamp(min=1e-6)

        def mean(x: torch.Tensor) -> torch.Tensor:
            return (w * x).sum() / total

    trained_ce = ce if weights is None else mean(ce_rows)
    if objective.name == "ce":
        with torch.no_grad():
            return DraftLoss(trained_ce, ce.detach(), torch.minimum(p, logq.exp()).sum(-1).mean())
    alpha = torch.minimum(p, logq.exp()).sum(-1)  # (M,) expected acceptance per position
    if objective.name == "tv":
        loss = mean(1 - alpha)
    elif objective.name == "lk":
        # log α = logsumexp(min(log p, log q)): finite, and its gradient too, even where α underflows
        loss = mean(-torch.logsumexp(torch.minimum(p.log(), logq), dim=-1))
    else:  # lk_lambda
        kl = mean((torch.xlogy(p, p) - p * logq).sum(-1))
        lam = math.exp(-LK_ETA * mean(alpha).item())  # a constant under the gradient
        loss = lam * kl + (1 - lam) * mean(1 - alpha)
    return DraftLoss(_mix(loss, trained_ce, objective), ce.detach(), alpha.detach().mean())


def hard_draft_loss(logits: torch.Tensor, labels: torch.Tensor, objective: Objective = CE,
                    weights: torch.Tensor | None = None) -> DraftLoss:
    """The loss of draft `logits` (M, N) against one-hot targets: `labels` (M,) index the draft
    vocabulary, -1 outside it (ignored by the loss, a sure rejection in `accept`), as Medusa trains.

    With p one-hot on y, α = q(y): `tv` is 1 − q(y), `lk` is −log q(y) (the cross-entropy), and
    `lk_lambda` blends the cross-entropy with 1 − q(y). `weights` (M,), when given, make the loss a
    weighted mean over the positions (complementary training, heads/complement.py); the metrics
    `ce` and `accept` stay unweighted.
    """
    inside = labels >= 0
    if not inside.any():
        zero = logits.sum() * 0
        return DraftLoss(zero, zero.detach(), zero.detach())
    ce = F.cross_entropy(logits, labels, ignore_index=-1)
    with torch.no_grad():
        accept = _label_q(logits, labels)[inside].sum() / labels.numel()
    if weights is None:  # the mean over positions; the CE exactly as Medusa always trained
        mean, trained_ce = torch.mean, ce
    else:
        w = weights[inside].to(logits.dtype)
        total = w.sum().clamp(min=1e-6)

        def mean(x: torch.Tensor) -> torch.Tensor:
            return (w * x).sum() / total

        trained_ce = mean(F.cross_entropy(logits[inside], labels[inside], reduction="none"))
    if objective.name in ("ce", "lk"):  # −log q(y) is the cross-entropy: any mix of the two is too
        return DraftLoss(trained_ce, ce.detach(), accept)
    q_y = _label_q(logits, labels)[inside]  # (M_inside,) α of each position
    tv = mean(1 - q_y)
    if objective.name == "tv":
        loss = tv
    else:  # lk_lambda: KL(one-hot ‖ q) is the cross-entropy
        lam = math.exp(-LK_ETA * mean(q_y).item())
        loss = lam * trained_ce + (1 - lam) * tv
    return DraftLoss(_mix(loss, trained_ce, objective), ce.detach(), accept)


def simulated_accept_length(top1: list[float]) -> float:
    """Training-time proxy of τ for a chain: 1 + Σ_k Π_{i≤k} acc_i (bonus token counted)."""
    total, running = 1.0, 1.0
    for acc in top1:
        running *= acc
        total += running
    return total


def _label_q(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """q(y) of each row (M,), one read of the logits (no (M, N) copy); rows labelled -1 read token 0."""
    picked = logits.gather(-1, labels.clamp(min=0)[:, None])[:, 0]
    return (picked - torch.logsumexp(logits, dim=-1)).exp()


def _mix(loss: torch.Tensor, ce: torch.Tensor, objective: Objective) -> torch.Tensor:
    """m·loss + (1 − m)·CE; m = 1 is the named loss alone."""
    if objective.mix == 1.0:
        return loss
    return objective.mix * loss + (1 - objective.mix) * ce
