"""Medusa-1 heads (Cai et al., 2024, "Medusa: Simple LLM Inference Acceleration Framework with
Multiple Decoding Heads"): K heads on the frozen target's last hidden state.

Head k (k = 0..K-1) reads the hidden state at position t and predicts the token at t + 2 + k (the
target's own lm_head predicts t + 1). A head is a stack of residual blocks x + SiLU(W x + b), each
with its own weights (W and b zero-initialised, so an untrained head copies the lm_head's guess),
then an lm_head: the target's own, shared and frozen, or a trainable copy initialised from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from headstart.config import DEPTH_WHY, MAX_DEPTH, recipe_field
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.tree import HeldOutAccuracy, StaticTreeSpec, Tree, path_scores
from headstart.heads.feature_head import TargetParts
from headstart.heads.losses import CE, LossSettings, Objective, hard_draft_loss, simulated_accept_length
from headstart.heads.vocab import draft_size, draft_vocab_size, index_in_draft_vocab
from headstart.target import WeightRows, gathered


@dataclass
class MedusaOptions:
    """Medusa's recipe options, written under `head:` (heads/__init__.py registers them with the kind)."""

    num_heads: int = recipe_field(3, "Medusa: number of heads K; head k predicts the token k+1 places past the next", ge=1, le=MAX_DEPTH, why=DEPTH_WHY)
    num_layers: int = recipe_field(1, "Medusa: residual SiLU blocks per head", ge=0, le=MAX_DEPTH, why="blocks run one after the other in every draft")
    shared_lm_head: bool = recipe_field(True, "Medusa: reuse the target's frozen lm_head (True) or train an own copy per head")


class ResBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.Module):
    """K Medusa heads. `options`: num_heads, num_layers, shared_lm_head, hidden_size, vocab_size,
    draft_vocab_size. What was measured or chosen for the head after it was built (heads/results.py):
    `held_out`, the held-out per-depth top-k accuracy that 'auto' trees are built from (set by the
    trainer), and `default_tree`, the tree it decodes with unless told otherwise (tune-tree)."""

    kind = "medusa"
    scores_drafts = True  # its proposals carry each node's path probability (hybrid trees share a budget by it)
    feature_layers: tuple[int, ...] = ()  # reads the target's last hidden state only
    options_class = MedusaOptions  # its recipe options
    held_out: HeldOutAccuracy | None = None
    default_tree: StaticTreeSpec | None = None

    def __init__(self, options: dict, target):
        super().__init__()
        self.options = dict(options)
        self.target_info: dict = {}  # what config.json records about the target (set by build/load)
        self.target_parts = TargetParts.of(target)  # its lm_head: shared, or the start of the heads' own
        d, k = options["hidden_size"], options["num_heads"]
        self.blocks = nn.ModuleList(
            nn.Sequential(*[ResBlock(d) for _ in range(options["num_layers"])]) for _ in range(k)
        )
        # Draft vocabulary: the heads rank only these target token ids (the most frequent in the
        # training answers), which makes every projection V / draft_vocab_size times cheaper.
        n_draft = draft_size(options)
        self.register_buffer("draft_ids", torch.arange(n_draft, dtype=torch.long))
        self._shared_rows = WeightRows()  # the target lm_head's rows of the draft vocabulary
        if options["shared_lm_head"]:
            self.lm_heads = None
        else:
            self.lm_heads = nn.ModuleList(nn.Linear(d, n_draft, bias=False) for _ in range(k))
            self._init_own_lm_heads()

    @classmethod
    def build(
        cls,
        target,
        num_heads: int = 3,
        num_layers: int = 1,
        shared_lm_head: bool = True,
        draft_vocab: torch.Tensor | None = None,
    ) -> "MedusaHeads":
        """New heads for `target`; `draft_vocab` (target ids, most frequent first) restricts ranking."""
        options = {
            "num_heads": num_heads,
            "num_layers": num_layers,
            "shared_lm_head": shared_lm_head,
            "hidden_size": target.hidden_size,
            "vocab_size": target.vocab_size,
            "draft_vocab_size": draft_vocab_size(target, draft_vocab),
        }
        head = cls(options, target)
        if draft_vocab is not None:
            head.draft_ids.copy_(draft_vocab)
            head._init_own_lm_heads()
        head.target_info = target.describe()
        return head.to(target.device)

    @classmethod
    def layers_for(cls, target, **options) -> tuple[int, ...]:
        """The target layers such a head reads besides the last hidden state: none."""
        return cls.feature_layers

    @classmethod
    def from_config(cls, options: dict, target) -> "MedusaHeads":
        """The shell a checkpoint's weights are loaded into."""
        return cls(options, target)

    def _init_own_lm_heads(self) -> None:
        """Start the heads' own lm_heads from the target's rows of the draft vocabulary."""
        if self.lm_heads is not None:
            w = self.target_parts.lm_head.weight
            with gathered([w]), torch.no_grad():
                rows = w.detach()[self.draft_ids.to(w.device)]
                for lm_head in self.lm_heads:
                    lm_head.weight.copy_(rows)

    def draft_index(self, labels: torch.Tensor) -> torch.Tensor:
        """Target ids -> index in the draft vocabulary, -1 where the token is outside it."""
        return index_in_draft_vocab(self.draft_ids, self.options["vocab_size"], labels)

    def save_pretrained(self, folder, target=None, extra: dict | None = None):
        """Write config.json + model.safetensors (this head only) to `folder`."""
        from headstart.heads.checkpoint import save_heads

        return save_heads(self, folder, target, extra)

    @property
    def dtype(self) -> torch.dtype:
        return self.blocks[0][0].linear.weight.dtype

    @property
    def num_heads(self) -> int:
        return self.options["num_heads"]

    def project(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """Head k's logits over the draft vocabulary: (..., D) -> (..., n_draft)."""
        # Module calls, not F.linear on .weight: DeepSpeed ZeRO-3 gathers a partitioned weight only
        # around its module's forward (and backward).
        lm_head = self.lm_heads[k] if self.lm_heads is not None else self.target_parts.lm_head
        if self.lm_heads is None and self.options.get("draft_vocab_size") is not None:
            weight = self._shared_rows(lm_head.weight, self.draft_ids)  # a frozen copy of the rows
            return F.linear(h.to(weight.dtype), weight)
        return lm_head(h.to(lm_head.weight.dtype))

    def forward(self, hidden: torch.Tensor) -> list[torch.Tensor]:
        """hidden (..., D) -> K hidden states (..., D), one per head, before the projection."""
        return [block(hidden) for block in self.blocks]

    def training_loss(self, out, batch: dict, target, options: MedusaOptions,
                      shared: LossSettings = LossSettings()) -> tuple[torch.Tensor, dict[str, float]]:
        """The trainer's entry: `loss` on the target's output for a collated batch (the heads' shape is
        fixed when they are built: `options` set nothing here)."""
        return self.loss(out.hidden, batch["input_ids"], batch["loss_mask"], shared.decay,
                         objective=shared.objective, weights=batch.get("draft_weight"))

    def loss(
        self,
        hidden: torch.Tensor,
        input_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        decay: float = 0.8,
        topk: int = 5,
        objective: Objective = CE,
        weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Σ_k decay^k · CE_k (or `objective`'s loss) over assistant tokens, and per-head top-1 /
        top-k accuracy and expected acceptance. `weights` (B, T), when given, weigh each label
        token's loss (complementary training: heads/complement.py).

        hidden (B, T, D) target's last hidden states; input_ids (B, T); loss_mask (B, T) is 1 where
        the token is an assistant token (the only tokens a head is asked to predict). Logits are
        computed only at the positions that have a label, which is most of the cost.
        """
        total = hidden.new_zeros((), dtype=torch.float32)
        metrics: dict[str, float] = {}
        t = input_ids.shape[1]
        for k, block in enumerate(self.blocks):
            shift = k + 2
            if t <= shift:
                break
            valid = loss_mask[:, shift:].bool()  # (B, T - shift): label at t + shift is assistant
            labels = input_ids[:, shift:][valid]  # (M,)
            if labels.numel() == 0:
                continue
            h = hidden[:, :-shift][valid].to(self.dtype)  # (M, D) in the head's own precision
            logits = self.project(block(h), k).float()  # (M, n_draft)
            target_idx = self.draft_index(labels)  # (M,) -1 outside the draft vocabulary
            w = None if weights is None else weights[:, shift:][valid]  # (M,)
            term = hard_draft_loss(logits, target_idx, objective, w)
            total = total + (decay**k) * term.loss
            with torch.no_grad():
                top = logits.topk(min(topk, logits.shape[-1]), dim=-1).indices
                # Tokens outside the draft vocabulary count as misses: accuracy is over all tokens.
                metrics[f"head{k}_top1"] = (top[:, 0] == target_idx).float().mean().item()
                metrics[f"head{k}_top{topk}"] = (top == target_idx[:, None]).any(-1).float().mean().item()
                metrics[f"head{k}_ce"] = term.ce.item()
                metrics[f"head{k}_accept"] = term.accept.item()
        metrics["sim_accept_length"] = simulated_accept_length(
            [metrics[f"head{k}_top1"] for k in range(self.num_heads) if f"head{k}_top1" in metrics]
        )
        return total, metrics

    @torch.no_grad()
    def propose(self, state: DraftState, tree: Tree) -> Proposal:
        """Rank each depth's proposals from the hidden state at the last accepted token.

        Depth d of the tree uses head d - 1; node (c1, ..., cd) gets head d-1's cd-th best token,
        scored by the product of its heads' probabilities along the path (over the draft vocabulary).
        All needed heads are projected in one matmul when the lm_head is shared.
        """
        depth = tree.max_depth
        if depth > self.num_heads:
            raise ValueError(f"the tree is {depth} deep but there are only {self.num_heads} Medusa heads")
        need = max(tree.topk_per_depth())
        hidden = state.hidden.to(self.dtype)
        hs = torch.stack([self.blocks[k](hidden) for k in range(depth)], dim=1)  # (B, depth, D)
        if self.lm_heads is None:
            logits = self.project(hs, 0)  # (B, depth, n_draft): one matmul for all heads
        else:
            logits = torch.stack([self.project(hs[:, k], k) for k in range(depth)], dim=1)
        top = logits.float().softmax(-1).topk(need, dim=-1)  # (B, depth, need)
        ranked = self.draft_ids[top.indices]  # target ids
        nodes_depth = tree.depth[1:].to(ranked.device) - 1
        nodes_choice = tree.choice[1:].to(ranked.device)
        scores = path_scores(top.values[:, nodes_depth, nodes_choice], tree)  # (B, N)
        return Proposal(tokens=ranked[:, nodes_depth, nodes_choice], tree=tree, scores=scores)
