"""Speculative decoding with draft heads: propose → verify → accept → commit, in small steps.

Each step the head drafts a tree below the root (the last token the target chose, not yet in the
cache); the target verifies root and tree in one forward; the accepted path is kept, its keys and
values are moved into place, and the target's own next token after it (the bonus) becomes the
next root.

- Temperature 0: the longest path the target's argmax agrees with; the output is the target's
  greedy output.
- Temperature > 0: recursive rejection sampling over siblings (`verify.sample_accept`); the
  output follows the target's own distribution after temperature, top-k and top-p.
- `acceptance="typical"`: Medusa's typical acceptance, faster at high temperature but LOSSY.

Static heads (Medusa) fill a fixed tree (`decode/tree.py`); dynamic heads (EAGLE-2 style) grow
their own tree within a `DynamicTreeSpec` (`decode/dynamic.py`) and hand it back with the proposal.
What a head receives and returns is `decode/contract.py`; the argument checks, stop rules and
output layout this loop shares with plain decoding (`decode/plain.py`) are `decode/io.py`.

Batches: the rows decode together, each accepting its own number of drafts per step. They share
one target cache (`cache.RaggedCache`): prompts are left-padded, each row attends only its own
slots at its own positions, and the slots a shorter accepted path leaves empty are holes that
`compact` squeezes out once they add up to a tree's width. One target forward verifies every
row's tree; Medusa drafts for all rows in one call, EAGLE and draft models keep a drafter per row
(trees of different sizes are padded with nodes that can never be accepted). A finished row leaves
the batch and costs nothing more. At temperature 0 each row equals that row decoded alone (up to
float rounding of batched kernels: exact on the tests' float32 models). With sampling, rows draw
from one seeded generator in turn: each row follows the target's distribution and a seed
reproduces the batch, but a row's draws differ from the same row decoded alone. The output is
HF generate's layout: the input as given (left padding kept), then the new tokens right-padded.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from headstart.decode.cache import RaggedCache
from headstart.decode.contract import DraftHead, DraftState, trait
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.io import Clock, GenerateOutput, Stopper, Streams, begin, pack_sequences, pad_id
from headstart.decode.sampling import GenerationError, Sampling, choose
from headstart.decode.tree import Tree, load_tree
from headstart.decode.verify import TreeTensors, greedy_accept_rows, sample_accept, stack_trees, typical_accept
from headstart.packed import is_packed, is_quantized, pack_linears, quantize_linears

ACCEPTANCE_MODES = ("exact", "typical")


@dataclass(frozen=True)
class AcceptMode:
    """How a step's drafts are accepted: the target's sampling settings, and which rule applies."""

    sampling: Sampling
    gen: torch.Generator | None  # the seeded generator every draw takes from; None when greedy
    typical: bool = False  # Medusa's typical acceptance (LOSSY), only when sampling
    threshold: float = 0.09  # typical acceptance: keep x when p(x) > min(threshold, alpha·e^(-H(p)))
    alpha: float = 0.3


@dataclass
class _Row:
    """One prompt while it decodes; what the rows share (cache, hidden states, roots) lives in `_decode`."""

    prompt: torch.Tensor  # (1, T_i) without padding
    drafter: DraftHead | None  # its own drafting state; None when the head drafts for the whole batch
    position: int  # absolute position of the root: tokens committed to the target's cache so far
    new: list[int] = field(default_factory=list)
    keep: int = 0  # tokens of `new` kept (the stop may fall inside an accepted path)
    reason: str | None = None  # set when the row is done
    steps: list[int] = field(default_factory=list)  # drafts accepted per verification
    trace: list[dict] = field(default_factory=list)  # record_steps=True
    features: torch.Tensor | None = None  # (1, n, F) at the positions committed since the last proposal
    committed: torch.Tensor | None = None  # (1, n) the tokens at those positions
    start: int = 0  # position of committed[:, 0]


def draft_modules(head) -> tuple[nn.Module, ...]:
    """The torch modules `head` drafts with: the head itself, or those of the head a wrapper drafts through."""
    return (head,) if isinstance(head, nn.Module) else tuple(trait(head, "draft_modules"))


def pack_like_target(head, target, int8: bool = False) -> None:
    """Where the target's Linear weights are packed for oneDNN (CPU decoding), pack the head's too: a
    draft layer's small matrix products run slower in the stock layout
    (docs/results.md#the-head-sitting-out-sure-steps-packed-draft-heads). `int8`: the head's Linears
    (but its `feature_linears`, over the target's hidden states) multiply in int8 on CPU instead
    (`headstart.packed.Int8Linear`), in place, as packing is; the head's weights and state dict stay
    as they are."""
    for module in draft_modules(head):
        if int8:
            quantize_linears(module, skip=tuple(trait(module, "feature_linears")))
        if is_packed(target.model):
            pack_linears(module)


class SpeculativeGenerator:
    """Tree speculative decoding of `target` with `head` (any DraftHead).

    Static heads: tree is a shipped name ('tree16', 'chain3', ...), a list of paths, a StaticTreeSpec,
    a JSON file, or 'auto' (the head's own `default_tree`, else built from its measured `held_out`
    accuracy). Dynamic heads (`head.dynamic`): depth, top_k and total_tokens bound the tree they grow
    (defaults: the head's `default_tree`, else DynamicTreeSpec's). `draft_int8`: on CPU the head's
    products run in int8 (`pack_like_target`; the head is changed in place, for every generator that
    drafts with it); the output is the target's either way.
    """

    def __init__(
        self,
        target,
        head: DraftHead,
        tree="auto",
        tree_size: int = 16,
        depth: int | None = None,
        top_k: int | None = None,
        total_tokens: int | None = None,
        draft_int8: bool = False,
    ):
        if not isinstance(head, DraftHead):
            raise TypeError(f"{type(head).__name__} does not implement the DraftHead protocol (kind, propose)")
        self.target, self.head = target, head
        pack_like_target(head, target, draft_int8)
        self.draft_int8 = any(is_quantized(m) for m in draft_modules(head))  # reported with the tree
        own_tree = trait(head, "default_tree")  # a TreeSpec of the head's kind, or None
        self.dynamic = bool(trait(head, "dynamic"))
        self.feature_layers = tuple(trait(head, "feature_layers"))
        self.needs_features = self.dynamic or bool(trait(head, "needs_features"))
        self.tree: Tree | None = None
        self.tree_spec: DynamicTreeSpec | None = None
        if self.dynamic:
            base = own_tree or DynamicTreeSpec()
            self.tree_spec = DynamicTreeSpec(
                depth=depth or base.depth, top_k=top_k or base.top_k, total_tokens=total_tokens or base.total_tokens
            )
        else:
            max_depth = trait(head, "options").get("num_heads")
            if tree == "auto" and own_tree is not None:
                tree = own_tree
            held_out = trait(head, "held_out")
            accuracy = held_out.topk if held_out is not None else None
            self.tree = load_tree(tree, accuracy=accuracy, size=tree_size, max_depth=max_depth)
            if max_depth is not None and self.tree.max_depth > max_depth:
                raise ValueError(f"tree is {self.tree.max_depth} deep but the head drafts only {max_depth} tokens ahead")
        self._static = TreeTensors.of(self.tree, target.device) if self.tree is not None else None

    def tree_settings(self) -> dict:
        """What to report with every τ: the tree (static) or the budget of the grown tree (dynamic), and
        the prompt-lookup settings of a head that adds lookup drafts (`lookup_settings()`, decode/lookup.py)."""
        if self.dynamic:
            s = self.tree_spec
            settings = {"kind": "dynamic", "depth": s.depth, "top_k": s.top_k, "size": s.total_tokens}
        else:
            t = self.tree
            settings = {
                "kind": "static",
                "paths": [list(p) for p in t.paths],
                "size": t.size,
                "depth": t.max_depth,
                "top_k": max(t.topk_per_depth()),
            }
        if self.draft_int8:
            settings["draft_int8"] = True
        lookup = trait(self.head, "lookup_settings")
        return {**settings, "lookup": lookup()} if lookup else settings

    def _tensors(self, tree: Tree) -> TreeTensors:
        """The tree's tensors on the target's device; the static tree's are made once, in __init__."""
        return self._static if tree is self.tree else TreeTensors.of(tree, self.target.device)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        eos_token_id=None,
        stop_strings=None,
        attention_mask: torch.Tensor | None = None,
        streamer=None,
        acceptance: str = "exact",
        typical_threshold: float = 0.09,
        typical_alpha: float = 0.3,
        record_steps: bool = False,
        profile: bool = False,
    ) -> GenerateOutput:
        """Decode the rows of input_ids (B, T) together; returns sequences and acceptance statistics.

        attention_mask (B, T) marks padding (left or right): each row decodes its own tokens only.
        out.sequences is HF generate's layout: input_ids exactly as given, then each row's new tokens
        (out.new_lengths[b] of them) right-padded with the pad id, so out.sequences[:, T:] are the new tokens.
        Bad arguments (temperature < 0, top_p outside (0, 1], top_k < 0, max_new_tokens < 1, a
        prompt that with max_new_tokens overruns the target's context) raise GenerationError.
        acceptance="typical" is Medusa's typical acceptance: LOSSY, the output no longer follows
        the target's distribution (at temperature 0 it is greedy, hence exact).
        profile=True times each phase (draft, target forward, accept, commit) into out.timings,
        synchronising the device between phases (a little slower; for benchmarks).
        """
        sampling = Sampling(temperature, top_k, top_p)
        if acceptance not in ACCEPTANCE_MODES:
            raise GenerationError(f"acceptance must be one of {ACCEPTANCE_MODES} (typical is lossy), got {acceptance!r}")
        stopper, gen, prompts, streams = begin(
            self.target, input_ids, max_new_tokens, sampling, seed, eos_token_id, stop_strings, attention_mask, streamer
        )
        mode = AcceptMode(sampling, gen, acceptance == "typical" and not sampling.greedy, typical_threshold, typical_alpha)
        out = GenerateOutput(torch.empty(0))
        clock = Clock(self.target.device, out.timings if profile else None)
        rows = [_Row(p, drafter, p.shape[1]) for p, drafter in zip(prompts, self._drafters(len(prompts)))]
        start = time.perf_counter()
        out.cache_slots = self._decode(rows, stopper, mode, streams, record_steps, clock)
        streams.end()
        out.seconds = time.perf_counter() - start
        for row in rows:
            out.accepted_per_step.extend(row.steps)
            out.finish_reasons.append(row.reason)
            out.new_lengths.append(row.keep)
            if record_steps:
                out.steps.append(row.trace)
        out.sequences = pack_sequences(input_ids, [row.new[: row.keep] for row in rows], pad_id(self.target))
        out.new_tokens = sum(out.new_lengths)
        return out

    def _drafters(self, n: int) -> list:
        """Each row's own drafting state, or None for every row when the head drafts for the whole batch.

        A head with `drafter()` makes one per row (EAGLE's KV cache, a draft model's cache). A static
        head that reads only hidden states (Medusa) drafts for all rows in one call. Any other head
        drafts row by row through a shallow copy per row, so that what it keeps in its attributes
        between calls stays with one sequence.
        """
        if hasattr(self.head, "drafter"):
            return [self.head.drafter() for _ in range(n)]
        if not self.needs_features:
            return [None] * n
        return [self.head] if n == 1 else [copy.copy(self.head) for _ in range(n)]

    def _features(self, out) -> torch.Tensor:
        """(B, n, F) what the head reads: the tapped layers concatenated, or the last hidden state."""
        if self.feature_layers:
            return torch.cat([out.features[i] for i in self.feature_layers], dim=-1)
        return out.hidden

    def _decode(self, rows: list[_Row], stopper: Stopper, mode: AcceptMode, streams: Streams, record: bool, clock: Clock) -> int:
        """Prefill, then propose → verify → accept → commit for all unfinished rows at once.

        Fills each row's tokens, steps and finish reason; returns the most cache slots per row
        held between steps.
        """
        target, dev = self.target, self.target.device
        layers = self.feature_layers if self.needs_features else ()
        slots, hidden = self._prefill(rows, layers)  # hidden (B, D)
        root = choose(target.logits(hidden), mode.sampling, mode.gen)  # (B,)
        for row, token in zip(rows, root.tolist()):
            row.new = [token]
            row.keep, row.reason = stopper.cut(row.new, 0)
            streams.put(row.new[: row.keep])
        active, width, peak = rows, 1, 0
        starts = torch.tensor([row.position for row in rows], device=dev)  # (B,) the roots' positions
        while True:
            alive = [b for b, row in enumerate(active) if row.reason is None]
            if len(alive) < len(active):  # finished rows leave the batch
                if not alive:
                    return peak
                index = torch.tensor(alive, device=dev)
                slots.select_rows(index)
                hidden, root, starts, active = hidden[index], root[index], starts[index], [active[b] for b in alive]
            longest = max(row.position for row in active)
            if slots.length - longest > width:  # holes and padding of finished rows add up: squeeze them out
                slots.compact(longest)
            peak = max(peak, slots.length)
            clock.start()
            tokens, trees, draft_probs = self._propose(active, hidden, root)  # tokens (B, N + 1)
            visible, depths, retrieve = stack_trees(trees, tokens.shape[1])  # (B, N + 1, N + 1), (B, N + 1), (B, P, L)
            width = tokens.shape[1]
            clock.lap("draft")
            verified = target.batch_tree_forward(
                tokens, visible, starts[:, None] + depths, slots.cache, slots.valid, slots.positions, layers
            )
            logits = target.logits(verified.hidden)  # (B, N + 1, V)
            clock.lap("target_forward")
            accepted, paths, bonus = self._accept(tokens, logits, trees, retrieve, draft_probs, mode)
            clock.lap("accept")
            counts = accepted.tolist()
            column = torch.arange(max(counts) + 1, device=dev)
            keep = torch.where(column <= accepted[:, None], paths[:, : column.numel()], column)  # (B, m)
            slots.commit(keep, accepted + 1, starts)
            last = paths.gather(1, accepted[:, None])[:, 0]  # (B,) each row's last kept input
            hidden = verified.hidden[torch.arange(len(active), device=dev), last]  # (B, D)
            root, starts = bonus, starts + accepted + 1
            feats = self._features(verified) if self.needs_features else None
            kept_tokens, bonuses = tokens.gather(1, keep).tolist(), bonus.tolist()
            for b, row in enumerate(active):
                a = counts[b]
                before = len(row.new)
                row.new.extend(kept_tokens[b][1 : a + 1] + [bonuses[b]])
                row.steps.append(a)
                if record:
                    row.trace.append(self._record(tokens[b], paths[b, : a + 1], trees[b], bonuses[b], a))
                if feats is not None:  # what the row's drafter reads next: the path just committed
                    kept = paths[b, : a + 1]
                    row.features, row.committed = feats[b : b + 1, kept], tokens[b : b + 1, kept]
                    row.start = row.position
                row.position += a + 1
                row.keep, row.reason = stopper.cut(row.new, before)
                streams.put(row.new[before : row.keep])
            clock.lap("commit_and_bookkeeping")

    def _prefill(self, rows: list[_Row], layers) -> tuple[RaggedCache, torch.Tensor]:
        """One forward over the prompts, left-padded; returns the cache and the last hidden states (B, D)."""
        target = self.target
        width = max(row.position for row in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long, device=target.device)
        valid = torch.zeros(len(rows), width, dtype=torch.bool, device=target.device)
        for b, row in enumerate(rows):
            ids[b, width - row.position :], valid[b, width - row.position :] = row.prompt[0], True
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # (B, T) each row counts from its first token
        padded = any(row.position < width for row in rows)
        cache = target.new_cache()
        # HF builds the causal, padding and sliding-window masks itself from a 2D padding mask.
        out = target(ids, valid.long() if padded else None, positions if padded else None, cache, layers)
        if self.needs_features:
            feats = self._features(out)
            for b, row in enumerate(rows):
                row.features, row.committed, row.start = feats[b : b + 1, width - row.position :], row.prompt, 0
        return RaggedCache(cache, valid, positions), out.hidden[:, -1]

    def _propose(self, rows: list[_Row], hidden: torch.Tensor, root: torch.Tensor):
        """Every row's verification inputs (B, N + 1), root first; its tree tensors; draft distributions or None.

        Rows that draft on their own may grow trees of different sizes; the inputs of smaller ones
        are padded at the end (see `verify.stack_trees`).
        """
        spec = self.tree_spec if self.dynamic else self.tree
        if rows[0].drafter is None:  # one call drafts for the whole batch
            proposal = self.head.propose(DraftState(hidden=hidden, root=root), spec)
            t = self._tensors(proposal.tree)
            tokens = torch.cat([root[:, None], proposal.tokens.to(root.device)], dim=1)
            return tokens, [t] * len(rows), proposal.draft_probs
        proposals = []
        for b, row in enumerate(rows):
            state = DraftState(hidden[b : b + 1], root[b : b + 1], row.features, row.committed, row.start)
            proposals.append(row.drafter.propose(state, spec))
        trees = [self._tensors(p.tree) for p in proposals]
        width = 1 + max(p.tokens.shape[1] for p in proposals)
        tokens = torch.zeros(len(rows), width, dtype=torch.long, device=root.device)
        tokens[:, 0] = root
        for b, p in enumerate(proposals):
            tokens[b, 1 : 1 + p.tokens.shape[1]] = p.tokens[0]
        draft_probs = None
        if any(p.draft_probs is not None for p in proposals):
            draft_probs = [None if p.draft_probs is None else p.draft_probs[0] for p in proposals]
        return tokens, trees, draft_probs

    @staticmethod
    def _accept(
        tokens, logits, trees: list[TreeTensors], retrieve, draft_probs, mode: AcceptMode
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each row's accepted drafts (B,), kept inputs (B, L) padded with -1, and bonus token (B,)."""
        sampling, gen = mode.sampling, mode.gen
        if sampling.greedy:
            predicted = logits.argmax(-1)  # (B, N + 1)
            accepted, paths = greedy_accept_rows(tokens, predicted, retrieve)
            return accepted, paths, predicted.gather(1, paths.gather(1, accepted[:, None]))[:, 0]
        probs = sampling.probs(logits)  # (B, N + 1, V)
        paths = torch.full(retrieve.shape[::2], -1, dtype=torch.long, device=tokens.device)  # (B, L)
        accepted, bonus = [], []
        for b, t in enumerate(trees):  # rows draw from the one generator in turn: reproducible with a seed
            if mode.typical:
                a, kept = typical_accept(tokens[b], probs[b], t.retrieve, mode.threshold, mode.alpha)
                token = int(torch.multinomial(probs[b, kept[-1]], 1, generator=gen))
            else:
                q = None if draft_probs is None else draft_probs[b]
                a, kept, token = sample_accept(tokens[b], probs[b], t.children, gen, q)
            paths[b, : a + 1] = kept
            accepted.append(a)
            bonus.append(token)
        return torch.tensor(accepted, device=tokens.device), paths, torch.tensor(bonus, device=tokens.device)

    @staticmethod
    def _record(tokens: torch.Tensor, kept: torch.Tensor, t: TreeTensors, bonus: int, accepted: int) -> dict:
        """One verification: accepted drafts, the draft's best guess that was rejected, the target's token."""
        last = int(kept[-1])
        kids = t.children[last]
        return {
            "accepted": tokens[kept[1:]].tolist(),
            "rejected": int(tokens[kids[0]]) if kids else None,  # the drafter's top choice after the kept path
            "bonus": bonus,
            "tree_size": t.tree.size,
            "accepted_count": accepted,
        }

