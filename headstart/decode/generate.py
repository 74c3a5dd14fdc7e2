"""Speculative decoding with draft heads: propose → verify → accept → commit, in small steps.

Each step the head drafts a tree below the root (the last token the target chose, not yet in the
cache); the target verifies root and tree in one forward; the longest path the target agrees
with is kept, its keys and values are moved into place, and the target's own next token after it
(the bonus) becomes the next root. At temperature 0 the output is the target's greedy output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from headstart.decode.cache import commit_path
from headstart.decode.tree import DraftHead, DraftState, Tree, load_tree
from headstart.decode.verify import greedy_accept


@dataclass
class GenerateOutput:
    sequences: torch.Tensor  # (B, T + new) prompt followed by the new tokens, as HF generate
    accepted_per_step: list[int] = field(default_factory=list)  # drafts accepted at each verification
    seconds: float = 0.0
    new_tokens: int = 0

    @property
    def acceptance_length(self) -> float:
        """τ: tokens per target forward after prefill, bonus token counted (plain decoding: 1.00)."""
        steps = self.accepted_per_step
        return sum(a + 1 for a in steps) / len(steps) if steps else 1.0


def _eos_set(target, eos_token_id) -> set[int]:
    if eos_token_id is None:
        eos_token_id = target.model.generation_config.eos_token_id
    if eos_token_id is None:
        return set()
    return set(eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id])


def _check_prompt(target, input_ids: torch.Tensor, max_new_tokens: int) -> None:
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be (B, T) with T >= 1, got shape {tuple(input_ids.shape)}")
    limit = target.max_position_embeddings
    if limit and input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"the prompt has {input_ids.shape[1]} tokens; with max_new_tokens={max_new_tokens} it exceeds the "
            f"target's context of {limit} positions. Shorten the prompt or lower max_new_tokens."
        )


def _trim_at_eos(new: list[int], eos: set[int], max_new_tokens: int) -> tuple[list[int], bool]:
    new = new[:max_new_tokens]
    for i, t in enumerate(new):
        if t in eos:
            return new[: i + 1], True
    return new, False


@torch.no_grad()
def greedy_generate(target, input_ids: torch.Tensor, max_new_tokens: int = 128, eos_token_id=None) -> GenerateOutput:
    """Plain greedy decoding with the same Target calls, one token per forward: the reference."""
    _check_prompt(target, input_ids, max_new_tokens)
    eos = _eos_set(target, eos_token_id)
    rows = []
    start = time.perf_counter()
    for row in input_ids:
        cache = target.new_cache()
        out = target(row[None], cache=cache)
        new: list[int] = []
        nxt = target.logits(out.hidden[:, -1]).argmax(-1)  # (1,)
        while True:
            new.append(int(nxt))
            if len(new) >= max_new_tokens or new[-1] in eos:
                break
            out = target(nxt[:, None], cache=cache)
            nxt = target.logits(out.hidden[:, -1]).argmax(-1)
        rows.append(new)
    seconds = time.perf_counter() - start
    return _pack(input_ids, rows, [], seconds)


def _pack(input_ids: torch.Tensor, rows: list[list[int]], steps: list[int], seconds: float, pad: int = 0) -> GenerateOutput:
    width = max(len(r) for r in rows)
    new = torch.full((len(rows), width), pad, dtype=input_ids.dtype)
    for i, r in enumerate(rows):
        new[i, : len(r)] = torch.tensor(r, dtype=input_ids.dtype)
    seq = torch.cat([input_ids.cpu(), new], dim=1)
    return GenerateOutput(seq, steps, seconds, sum(len(r) for r in rows))


class SpeculativeGenerator:
    """Tree speculative decoding of `target` with `heads` (any DraftHead).

    tree: a shipped name ('tree16', 'chain3', ...), a list of paths, a JSON file, or 'auto' (built
    from the head's measured per-depth accuracy when its checkpoint has one). Rows of a batch are
    decoded one after another in this version; each equals that row decoded alone.
    """

    def __init__(self, target, heads: DraftHead, tree="auto", tree_size: int = 16):
        if not isinstance(heads, DraftHead):
            raise TypeError(f"{type(heads).__name__} does not implement the DraftHead protocol (kind, propose)")
        self.target, self.heads = target, heads
        config = getattr(heads, "options", {})
        max_depth = config.get("num_heads")
        if tree == "auto" and config.get("tree"):
            tree = config["tree"]
        self.tree: Tree = load_tree(tree, accuracy=config.get("accuracy"), size=tree_size, max_depth=max_depth)
        if max_depth is not None and self.tree.max_depth > max_depth:
            raise ValueError(f"tree is {self.tree.max_depth} deep but the head drafts only {max_depth} tokens ahead")
        dev = target.device
        self._positions = self.tree.depth.to(dev)  # (N + 1,)
        self._visible = self.tree.visible.to(dev)
        self._retrieve = self.tree.retrieve.to(dev)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        eos_token_id=None,
        **unsupported,
    ) -> GenerateOutput:
        """Decode every row of input_ids (B, T); returns sequences and acceptance statistics."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if temperature > 0 or unsupported:
            raise NotImplementedError(
                "this version decodes greedily (temperature=0) only; lossless sampling is tracked in issue 3"
            )
        _check_prompt(self.target, input_ids, max_new_tokens)
        eos = _eos_set(self.target, eos_token_id)
        rows, steps = [], []
        start = time.perf_counter()
        for row in input_ids.to(self.target.device):
            new, row_steps = self._decode_row(row[None], max_new_tokens, eos)
            rows.append(new)
            steps.extend(row_steps)
        return _pack(input_ids, rows, steps, time.perf_counter() - start)

    def _decode_row(self, prompt: torch.Tensor, max_new_tokens: int, eos: set[int]) -> tuple[list[int], list[int]]:
        target, tree = self.target, self.tree
        cache = target.new_cache()
        out = target(prompt, cache=cache)  # prefill
        hidden = out.hidden[:, -1]  # (1, D)
        root = target.logits(hidden).argmax(-1)  # (1,)
        new = [int(root)]
        steps: list[int] = []
        past = prompt.shape[1]
        while len(new) < max_new_tokens and new[-1] not in eos:
            proposal = self.heads.propose(DraftState(hidden=hidden, root=root), tree)
            tokens = torch.cat([root, proposal.tokens[0]])  # (N + 1,)
            verified = target.tree_forward(
                tokens[None], self._visible, (past + self._positions)[None], cache, past
            )
            predicted = target.logits(verified.hidden[0]).argmax(-1)  # (N + 1,)
            accepted, kept = greedy_accept(tokens, predicted, self._retrieve)
            commit_path(cache, past, kept)
            past += accepted + 1
            hidden = verified.hidden[:, kept[-1]]
            root = predicted[kept[-1]][None]
            new.extend(tokens[kept[1:]].tolist() + [int(root)])
            steps.append(accepted)
        new, _ = _trim_at_eos(new, eos, max_new_tokens)
        return new, steps
