"""Held-out accuracy of a head: per-depth top-k accuracy (Medusa: the table static trees are built
from), or per-step top-1 of the unrolled draft (EAGLE heads, whose trees are grown at decode time)."""

from __future__ import annotations

import torch

from headstart.heads.losses import LossSettings, simulated_accept_length
from headstart.train.data import ExampleDataset, collate
from headstart.train.features import batch_features


@torch.no_grad()
def measure_steps(target, head, examples, options, shared: LossSettings, batch_size: int = 4) -> dict:
    """Token-weighted held-out metrics of a dynamic head's loss (no noise; `options`, `shared`: as it
    trained): per-step top-1, expected acceptance Σ min(p, q) and the τ proxy."""
    ds = ExampleDataset(examples)
    sums: dict[str, float] = {}
    weight = 0.0
    was_training = head.training
    head.eval()
    for start in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(start, min(start + batch_size, len(ds)))])
        out = batch_features(target, batch, head.feature_layers)
        _, metrics = head.training_loss(out, batch, target, options, shared)
        w = float(batch["loss_mask"].sum())
        weight += w
        for k, v in metrics.items():
            sums[k] = sums.get(k, 0.0) + v * w
    head.train(was_training)
    mean = {k: v / max(weight, 1.0) for k, v in sums.items()}
    steps = sorted(int(k[4:-5]) for k in mean if k.startswith("step") and k.endswith("_top1"))
    top1 = [round(mean[f"step{i}_top1"], 4) for i in steps]
    accept = [round(mean[f"step{i}_accept"], 4) for i in steps if f"step{i}_accept" in mean]  # Σ min(p, q)
    return {"top1": top1, "accept": accept, "sim_accept_length": round(simulated_accept_length(top1), 4), "tokens": int(weight),
            **{k: round(v, 4) for k, v in mean.items() if not k.startswith("step") and k != "sim_accept_length"}}


@torch.no_grad()
def measure_accuracy(target, head, examples, batch_size: int = 4, topk: int = 10) -> dict:
    """accuracy[d][c] = P(the c-th ranked proposal of depth d+1 is the token), over assistant tokens.

    Also returns per-depth top-1 / top-k and the chain proxy of τ (bonus token counted).
    """
    depth = head.num_heads
    hits = torch.zeros(depth, topk, dtype=torch.float64)
    counts = torch.zeros(depth, dtype=torch.float64)
    ds = ExampleDataset(examples)
    for start in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(start, min(start + batch_size, len(ds)))])
        hidden = target(batch["input_ids"], attention_mask=batch["attention_mask"]).hidden
        for k, block in enumerate(head.blocks):
            shift = k + 2
            if batch["input_ids"].shape[1] <= shift:
                continue
            valid = batch["loss_mask"][:, shift:].bool()
            labels = batch["input_ids"][:, shift:][valid]
            h = hidden[:, :-shift][valid]
            logits = head.project(block(h.to(head.dtype)), k)
            ranked = logits.topk(min(topk, logits.shape[-1]), dim=-1).indices
            hits[k, : ranked.shape[1]] += (ranked == head.draft_index(labels)[:, None]).double().sum(0)
            counts[k] += labels.numel()
    acc = (hits / counts.clamp(min=1)[:, None]).tolist()
    top1 = [a[0] for a in acc]
    return {
        "topk_accuracy": [[round(x, 4) for x in row] for row in acc],
        "top1": [round(x, 4) for x in top1],
        "top5": [round(sum(a[:5]), 4) for a in acc],
        "sim_accept_length": round(simulated_accept_length(top1), 4),
        "tokens": int(counts[0]),
    }
