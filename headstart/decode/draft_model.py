"""A separate small LM as the drafter (classic speculative decoding), through the same engine.

The draft model shares the target's tokenizer vocabulary (Llama-3.2-1B for Llama-3.1-70B,
Qwen2.5-0.5B for Qwen2.5-7B, ...). It keeps its own KV cache, synced to the target's committed
tokens at every step. With top_k = 1 it drafts a chain of `depth` greedy tokens; with top_k > 1 it
grows an EAGLE-2-style tree (expand the top_k best frontier nodes by cumulative log-probability,
top_k children each, for `depth` steps) and keeps the best `total_tokens`.
"""

from __future__ import annotations

import copy

import torch

from headstart.decode.cache import truncate
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import DynamicTreeSpec, frontier_attention, grow_tree, select_dynamic_tree
from headstart.errors import HeadstartError


class VocabularyMismatch(HeadstartError):
    """The draft model and the target do not share a token vocabulary."""


def check_same_vocabulary(draft, target) -> None:
    """Refuse a draft model whose token ids mean other strings than the target's."""
    if draft.vocab_size != target.vocab_size:
        # Padded embedding matrices differ in rows; the tokenizers decide below when both exist.
        if draft.tokenizer is None or target.tokenizer is None:
            raise VocabularyMismatch(
                f"the draft model {draft.name!r} has {draft.vocab_size} output tokens and the target "
                f"{target.name!r} has {target.vocab_size}: they must share a vocabulary"
            )
    if draft.tokenizer is not None and target.tokenizer is not None:
        a, b = draft.tokenizer.get_vocab(), target.tokenizer.get_vocab()
        if a != b:
            differ = sorted(set(a.items()) ^ set(b.items()))[:3]
            raise VocabularyMismatch(
                f"the draft model {draft.name!r} and the target {target.name!r} have different tokenizer "
                f"vocabularies ({len(a)} and {len(b)} entries; e.g. {differ}); pick a draft model of the same family"
            )


class DraftModelProposer:
    """Drafts with a small causal LM (a headstart Target) for a larger target."""

    kind = "draft_model"
    dynamic = True
    needs_features = True
    feature_layers = ()

    def __init__(self, draft, target, depth: int = 4, top_k: int = 1, total_tokens: int | None = None):
        check_same_vocabulary(draft, target)
        self.draft = draft
        self.vocab = min(draft.vocab_size, target.vocab_size)
        total = total_tokens or (depth if top_k == 1 else min(depth * top_k * 2, 64))
        self.default_tree = DynamicTreeSpec(depth=depth, top_k=top_k, total_tokens=total)
        self.cache = None
        self._chain: list[int] = []  # tokens the cache holds after the committed prefix (a chain draft)
        self._root = -1

    def drafter(self) -> DraftModelProposer:
        """A proposer with its own cache over the same draft model: the engine makes one per row."""
        fresh = copy.copy(self)
        fresh.cache, fresh._chain, fresh._root = None, [], -1
        return fresh

    def _log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.draft.logits(hidden)[..., : self.vocab].float().log_softmax(-1)

    @torch.no_grad()
    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        dev = self.draft.device
        committed = state.committed[0].to(dev)
        if state.start == 0 or self.cache is None:
            self.cache, self._chain = self.draft.new_cache(), []
        # Reuse what the cache already holds: the committed prefix, and the part of the last chain
        # draft that the target accepted (same tokens at the same positions).
        reuse = 0
        for a, b in zip(self._chain, committed.tolist()):
            if a != b:
                break
            reuse += 1
        truncate(self.cache, state.start + reuse)
        feed = torch.cat([committed[reuse:], state.root.to(dev)])[None]
        self._root = int(state.root[0])
        out = self.draft(feed, cache=self.cache)
        root_pos = state.start + committed.numel()  # the root's position
        logp = self._log_probs(out.hidden[0, -1])  # (V,) after the root
        if spec.top_k == 1:
            tokens = self._chain_draft(logp, spec.depth, root_pos)
            parents = torch.arange(-1, tokens.numel() - 1)
            scores = -torch.arange(tokens.numel(), dtype=torch.float)
            kept, tree, _ = select_dynamic_tree(parents, scores, tokens, spec.total_tokens)
        else:
            kept, tree, _ = self._tree_draft(logp, spec, root_pos)
            truncate(self.cache, root_pos)
            self._chain = []
        return Proposal(kept[None], tree)

    def _chain_draft(self, logp: torch.Tensor, depth: int, root_pos: int) -> torch.Tensor:
        drafted = [int(logp.argmax())]
        for _ in range(depth - 1):
            out = self.draft(torch.tensor([[drafted[-1]]], device=self.draft.device), cache=self.cache)
            drafted.append(int(self._log_probs(out.hidden[0, -1]).argmax()))
        # The cache now holds the root and drafted[:-1] from root_pos on; the next call keeps the
        # part of them that the target accepted instead of recomputing it.
        self._chain = [self._root, *drafted[:-1]]
        return torch.tensor(drafted, device=self.draft.device)

    def _tree_draft(self, logp: torch.Tensor, spec: DynamicTreeSpec, root_pos: int):
        dev = self.draft.device
        fed: dict[int, int] = {}  # candidate index -> its position in the draft cache

        def expand(frontier, parents, tokens, depths):
            base = self.cache.get_seq_length()
            n = len(frontier)
            allowed = frontier_attention(frontier, parents, fed, root_pos + 1, base, dev)  # prefix and root
            qpos = torch.tensor([root_pos + depths[c] for c in frontier], device=dev)
            kpos = torch.zeros(base + n, dtype=torch.long, device=dev)
            kpos[: root_pos + 1] = torch.arange(root_pos + 1, device=dev)
            kpos[base:] = qpos
            for c, at in fed.items():
                kpos[at] = root_pos + depths[c]
            mask = self.draft.attention_mask(allowed, qpos, kpos)
            ids = torch.tensor([[tokens[c] for c in frontier]], device=dev)
            out = self.draft(ids, mask, qpos[None], self.cache)
            for row, c in enumerate(frontier):
                fed[c] = base + row
            return self._log_probs(out.hidden[0])  # (n, V)

        parents, scores, tokens, _ = grow_tree(logp, spec, expand)
        return select_dynamic_tree(
            torch.tensor(parents), torch.tensor(scores), torch.tensor(tokens, device=dev), spec.total_tokens
        )
