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

Static heads (Medusa) fill a fixed tree; dynamic heads (EAGLE-2 style) grow their own tree within
a `DynamicTreeSpec` and hand it back with the proposal.

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

from headstart.decode.cache import RaggedCache
from headstart.decode.sampling import GenerationError, Sampling, make_generator
from headstart.decode.tree import DraftHead, DraftState, DynamicTreeSpec, Tree, load_tree
from headstart.decode.verify import (
    acceptance_length,
    children_lists,
    greedy_accept_rows,
    sample_accept,
    typical_accept,
)

ACCEPTANCE_MODES = ("exact", "typical")


@dataclass
class GenerateOutput:
    sequences: torch.Tensor  # (B, T + new) the input as given, then the new tokens right-padded: HF generate's layout
    accepted_per_step: list[int] = field(default_factory=list)  # drafts accepted at each verification
    seconds: float = 0.0
    new_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)  # per row: "eos", "stop_string" or "length"
    new_lengths: list[int] = field(default_factory=list)  # per row: new tokens before padding
    steps: list[list[dict]] = field(default_factory=list)  # per row, per step (record_steps=True)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (profile=True)
    cache_slots: int = 0  # most target cache slots per row between steps (padding and holes included)

    @property
    def acceptance_length(self) -> float:
        """τ: tokens per target forward after prefill, bonus token counted (plain decoding: 1.00)."""
        return acceptance_length(self.accepted_per_step)


class Stopper:
    """When a row is done: an EOS token (any of several), a stop string, or max_new_tokens.

    Tokens accepted past the stop are dropped; the EOS token or the token completing the stop
    string is kept, as HF `generate` does.
    """

    def __init__(self, target, max_new_tokens: int, eos_token_id=None, stop_strings=None):
        if eos_token_id is None:
            eos_token_id = target.model.generation_config.eos_token_id
        if eos_token_id is None:
            eos_token_id = []
        self.eos = set(eos_token_id if isinstance(eos_token_id, (list, tuple, set)) else [eos_token_id])
        if isinstance(stop_strings, str):
            stop_strings = [stop_strings]
        self.stop_strings = [s for s in (stop_strings or []) if s]
        if self.stop_strings and target.tokenizer is None:
            raise GenerationError("stop_strings need the target's tokenizer: build it with Target(..., tokenizer=...)")
        self.tokenizer = target.tokenizer
        self.max_new_tokens = max_new_tokens

    def cut(self, new: list[int], checked: int) -> tuple[int, str | None]:
        """(tokens to keep, reason) after new[checked:] was appended; reason None: go on."""
        for i in range(checked, min(len(new), self.max_new_tokens)):
            if new[i] in self.eos:
                return self._first_stop_string(new, checked, i + 1) or (i + 1, "eos")
        limit = min(len(new), self.max_new_tokens)
        found = self._first_stop_string(new, checked, limit)
        if found:
            return found
        if len(new) >= self.max_new_tokens:
            return self.max_new_tokens, "length"
        return len(new), None

    def _first_stop_string(self, new: list[int], checked: int, limit: int) -> tuple[int, str] | None:
        if not self.stop_strings:
            return None
        decode = self.tokenizer.decode
        if not any(s in decode(new[:limit]) for s in self.stop_strings):
            return None
        for i in range(max(checked, 1), limit + 1):
            text = decode(new[:i])
            if any(s in text for s in self.stop_strings):
                return i, "stop_string"
        return None


def _check_lengths(input_ids: torch.Tensor, max_new_tokens: int) -> None:
    """The batch is (B, T), max_new_tokens a positive integer."""
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise GenerationError(
            f"input_ids must be (B, T) with T >= 1, got shape {tuple(input_ids.shape)}; "
            "pass a batch of token ids, e.g. tokenizer(texts, return_tensors='pt', padding=True).input_ids"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise GenerationError(
            f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}; pass how many tokens to generate at most"
        )


def _check_context(target, rows: list[torch.Tensor], max_new_tokens: int) -> None:
    """Every row's prompt (padding aside) and its new tokens fit the target's positions."""
    limit = target.max_position_embeddings
    longest = max(row.shape[1] for row in rows)
    if limit and longest + max_new_tokens > limit:
        room = f"lower max_new_tokens to {limit - longest}" if longest < limit else f"keep it under {limit} tokens"
        raise GenerationError(
            f"the longest prompt has {longest} tokens; with max_new_tokens={max_new_tokens} it exceeds the "
            f"target's context of {limit} positions (max_position_embeddings). Shorten the prompt or {room}."
        )


def _rows(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> list[torch.Tensor]:
    """The prompts of a batch without their padding (left or right), each (1, T_i)."""
    if attention_mask is None:
        return [row[None] for row in input_ids]
    if attention_mask.shape != input_ids.shape:
        raise GenerationError(
            f"attention_mask {tuple(attention_mask.shape)} must match input_ids {tuple(input_ids.shape)}; "
            "pass the mask the tokenizer returned with the ids (1 for tokens, 0 for padding)"
        )
    rows = []
    for b, (row, keep) in enumerate(zip(input_ids, attention_mask.bool())):
        if not keep.any():
            raise GenerationError(f"row {b} of the batch is all padding (its attention_mask is all 0); drop it")
        rows.append(row[keep][None])
    return rows


def _choose(logits: torch.Tensor, sampling: Sampling, gen: torch.Generator | None) -> torch.Tensor:
    """The next token after (1, V) logits: argmax, or a draw from the warped distribution."""
    if sampling.greedy:
        return logits.argmax(-1)
    return torch.multinomial(sampling.probs(logits), 1, generator=gen)[:, 0]


def _pack(input_ids: torch.Tensor, news: list[list[int]], pad: int) -> torch.Tensor:
    """HF generate's layout (B, T + new): the input as given, padding kept, then each row's new tokens,
    right-padded with `pad`, so that `sequences[:, T:]` are the new tokens of every row."""
    new = torch.full((len(news), max(map(len, news))), pad, dtype=input_ids.dtype)  # (B, new)
    for b, tokens in enumerate(news):
        new[b, : len(tokens)] = torch.tensor(tokens, dtype=input_ids.dtype)
    return torch.cat([input_ids, new.to(input_ids.device)], dim=1)


def _pad_id(target) -> int:
    """What pads the rows that finished first: the pad token (tokenizer's, then generation config's), else
    EOS, else 0."""
    tok, config = target.tokenizer, target.model.generation_config
    for value in (getattr(tok, "pad_token_id", None), config.pad_token_id, getattr(tok, "eos_token_id", None),
                  config.eos_token_id):
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, int):
            return value
    return 0


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


class _Clock:
    """Accumulates seconds per phase of a decoding step; a no-op without a store."""

    def __init__(self, device, store: dict | None):
        self.store = store
        self.cuda = device is not None and torch.device(device).type == "cuda"
        self.t = 0.0

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def start(self) -> None:
        if self.store is not None:
            self.t = self._now()

    def lap(self, name: str) -> None:
        if self.store is not None:
            now = self._now()
            self.store[name] = self.store.get(name, 0.0) + now - self.t
            self.t = now


class _Streams:
    """Feeds an HF-style streamer (put / end): the prompt first, then tokens as they are accepted."""

    def __init__(self, streamer, batch: int):
        if streamer is not None and batch != 1:
            raise GenerationError(f"streaming needs a batch of one prompt, got {batch}; decode the prompts one by one")
        self.streamer = streamer

    def put(self, tokens) -> None:
        if self.streamer is not None and len(tokens):
            self.streamer.put(torch.as_tensor(tokens, dtype=torch.long).cpu())

    def end(self) -> None:
        if self.streamer is not None:
            self.streamer.end()


def _start(target, input_ids, max_new_tokens, sampling, seed, eos_token_id, stop_strings, attention_mask, streamer):
    """What both decoding loops check and set up: the lengths (the prompts' against the context),
    the rows without their padding, the stop rules, the seeded generator, and the streamer (fed the
    first prompt first, as HF streamers expect). Bad arguments raise GenerationError."""
    _check_lengths(input_ids, max_new_tokens)
    rows = _rows(input_ids.to(target.device), attention_mask)
    _check_context(target, rows, max_new_tokens)
    stopper = Stopper(target, max_new_tokens, eos_token_id, stop_strings)
    gen = None if sampling.greedy else make_generator(target.device, seed)
    streams = _Streams(streamer, len(rows))
    if streamer is not None:
        streams.put(rows[0][0].cpu())
    return stopper, gen, rows, streams


@torch.no_grad()
def plain_generate(
    target,
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
) -> GenerateOutput:
    """Plain decoding with the same Target calls, one token per forward: the reference.

    Takes and returns what `SpeculativeGenerator.generate` does (HF generate's layout; GenerationError
    on bad arguments); each row decodes alone.
    """
    sampling = Sampling(temperature, top_k, top_p)
    stopper, gen, rows, streams = _start(
        target, input_ids, max_new_tokens, sampling, seed, eos_token_id, stop_strings, attention_mask, streamer
    )
    news, reasons = [], []
    start = time.perf_counter()
    for row in rows:
        cache = target.new_cache()
        out = target(row, cache=cache)
        new: list[int] = []
        while True:
            nxt = _choose(target.logits(out.hidden[:, -1]), sampling, gen)  # (1,)
            new.append(int(nxt))
            keep, reason = stopper.cut(new, len(new) - 1)
            streams.put(new[len(new) - 1 : keep])
            if reason:
                new = new[:keep]
                break
            out = target(nxt[:, None], cache=cache)
        news.append(new)
        reasons.append(reason)
    streams.end()
    seconds = time.perf_counter() - start
    return GenerateOutput(
        _pack(input_ids, news, _pad_id(target)), [], seconds, sum(map(len, news)), reasons, [len(n) for n in news]
    )


def greedy_generate(target, input_ids: torch.Tensor, max_new_tokens: int = 128, eos_token_id=None, **kwargs) -> GenerateOutput:
    """Plain greedy decoding (temperature 0): the reference speculative decoding must equal."""
    return plain_generate(target, input_ids, max_new_tokens, eos_token_id=eos_token_id, **kwargs)


class SpeculativeGenerator:
    """Tree speculative decoding of `target` with `heads` (any DraftHead).

    Static heads: tree is a shipped name ('tree16', 'chain3', ...), a list of paths, a JSON file,
    or 'auto' (the tree stored with the head, else built from its measured per-depth accuracy).
    Dynamic heads (`heads.dynamic`): depth, top_k and total_tokens bound the tree they grow
    (defaults: the head's stored settings, else DynamicTreeSpec's).
    """

    def __init__(
        self,
        target,
        heads: DraftHead,
        tree="auto",
        tree_size: int = 16,
        depth: int | None = None,
        top_k: int | None = None,
        total_tokens: int | None = None,
    ):
        if not isinstance(heads, DraftHead):
            raise TypeError(f"{type(heads).__name__} does not implement the DraftHead protocol (kind, propose)")
        self.target, self.heads = target, heads
        config = getattr(heads, "options", {})
        self.dynamic = bool(getattr(heads, "dynamic", False))
        self.feature_layers = tuple(getattr(heads, "feature_layers", ()) or ())
        self.needs_features = self.dynamic or bool(getattr(heads, "needs_features", False))
        self.tree: Tree | None = None
        self.tree_spec: DynamicTreeSpec | None = None
        if self.dynamic:
            stored = config.get("tree") if isinstance(config.get("tree"), dict) else {}
            base = DynamicTreeSpec(**{k: v for k, v in stored.items() if k in ("depth", "top_k", "total_tokens")})
            self.tree_spec = DynamicTreeSpec(
                depth=depth or base.depth, top_k=top_k or base.top_k, total_tokens=total_tokens or base.total_tokens
            )
        else:
            max_depth = config.get("num_heads")
            if tree == "auto" and config.get("tree"):
                tree = config["tree"]
            self.tree = load_tree(tree, accuracy=config.get("accuracy"), size=tree_size, max_depth=max_depth)
            if max_depth is not None and self.tree.max_depth > max_depth:
                raise ValueError(f"tree is {self.tree.max_depth} deep but the head drafts only {max_depth} tokens ahead")
        self._static = self._tensors(self.tree) if self.tree is not None else None

    def tree_settings(self) -> dict:
        """What to report with every τ: the tree (static) or the budget of the grown tree (dynamic)."""
        if self.dynamic:
            s = self.tree_spec
            return {"kind": "dynamic", "depth": s.depth, "top_k": s.top_k, "size": s.total_tokens}
        t = self.tree
        return {
            "kind": "static",
            "paths": [list(p) for p in t.paths],
            "size": t.size,
            "depth": t.max_depth,
            "top_k": max(t.topk_per_depth()),
        }

    def _tensors(self, tree: Tree) -> dict:
        dev = self.target.device
        return {
            "tree": tree,
            "positions": tree.depth.to(dev),
            "visible": tree.visible.to(dev),
            "retrieve": tree.retrieve.to(dev),
            "children": children_lists(tree.parent),
        }

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
        stopper, gen, prompts, streams = _start(
            self.target, input_ids, max_new_tokens, sampling, seed, eos_token_id, stop_strings, attention_mask, streamer
        )
        mode = {"sampling": sampling, "gen": gen, "typical": acceptance == "typical" and not sampling.greedy,
                "threshold": typical_threshold, "alpha": typical_alpha}
        out = GenerateOutput(torch.empty(0))
        clock = _Clock(self.target.device, out.timings if profile else None)
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
        out.sequences = _pack(input_ids, [row.new[: row.keep] for row in rows], _pad_id(self.target))
        out.new_tokens = sum(out.new_lengths)
        return out

    def _drafters(self, n: int) -> list:
        """Each row's own drafting state, or None for every row when the head drafts for the whole batch.

        A head with `drafter()` makes one per row (EAGLE's KV cache, a draft model's cache). A static
        head that reads only hidden states (Medusa) drafts for all rows in one call. Any other head
        drafts row by row through a shallow copy per row, so that what it keeps in its attributes
        between calls stays with one sequence.
        """
        if hasattr(self.heads, "drafter"):
            return [self.heads.drafter() for _ in range(n)]
        if not self.needs_features:
            return [None] * n
        return [self.heads] if n == 1 else [copy.copy(self.heads) for _ in range(n)]

    def _features(self, out) -> torch.Tensor:
        """(B, n, F) what the head reads: the tapped layers concatenated, or the last hidden state."""
        if self.feature_layers:
            return torch.cat([out.features[i] for i in self.feature_layers], dim=-1)
        return out.hidden

    def _decode(self, rows: list[_Row], stopper: Stopper, mode: dict, streams: _Streams, record: bool, clock) -> int:
        """Prefill, then propose → verify → accept → commit for all unfinished rows at once.

        Fills each row's tokens, steps and finish reason; returns the most cache slots per row
        held between steps.
        """
        target, dev = self.target, self.target.device
        layers = self.feature_layers if self.needs_features else ()
        slots, hidden = self._prefill(rows, layers)  # hidden (B, D)
        root = _choose(target.logits(hidden), mode["sampling"], mode["gen"])  # (B,)
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
            visible, depth, retrieve = _stack_trees(trees, tokens.shape[1])
            width = tokens.shape[1]
            clock.lap("draft")
            verified = target.batch_tree_forward(
                tokens, visible, starts[:, None] + depth, slots.cache, slots.valid, slots.positions, layers
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
        are padded at the end (see `_stack_trees`).
        """
        spec = self.tree_spec if self.dynamic else self.tree
        if rows[0].drafter is None:  # one call drafts for the whole batch
            proposal = self.heads.propose(DraftState(hidden=hidden, root=root), spec)
            t = self._static if proposal.tree is self.tree else self._tensors(proposal.tree)
            tokens = torch.cat([root[:, None], proposal.tokens.to(root.device)], dim=1)
            return tokens, [t] * len(rows), proposal.draft_probs
        proposals = []
        for b, row in enumerate(rows):
            state = DraftState(hidden[b : b + 1], root[b : b + 1], row.features, row.committed, row.start)
            proposals.append(row.drafter.propose(state, spec))
        trees = [self._static if p.tree is self.tree else self._tensors(p.tree) for p in proposals]
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
    def _accept(tokens, logits, trees, retrieve, draft_probs, mode) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each row's accepted drafts (B,), kept inputs (B, L) padded with -1, and bonus token (B,)."""
        sampling, gen = mode["sampling"], mode["gen"]
        if sampling.greedy:
            predicted = logits.argmax(-1)  # (B, N + 1)
            accepted, paths = greedy_accept_rows(tokens, predicted, retrieve)
            return accepted, paths, predicted.gather(1, paths.gather(1, accepted[:, None]))[:, 0]
        probs = sampling.probs(logits)  # (B, N + 1, V)
        paths = torch.full(retrieve.shape[::2], -1, dtype=torch.long, device=tokens.device)  # (B, L)
        accepted, bonus = [], []
        for b, t in enumerate(trees):  # rows draw from the one generator in turn: reproducible with a seed
            if mode["typical"]:
                a, kept = typical_accept(tokens[b], probs[b], t["retrieve"], mode["threshold"], mode["alpha"])
                token = int(torch.multinomial(probs[b, kept[-1]], 1, generator=gen))
            else:
                q = None if draft_probs is None else draft_probs[b]
                a, kept, token = sample_accept(tokens[b], probs[b], t["children"], gen, q)
            paths[b, : a + 1] = kept
            accepted.append(a)
            bonus.append(token)
        return torch.tensor(accepted, device=tokens.device), paths, torch.tensor(bonus, device=tokens.device)

    @staticmethod
    def _record(tokens: torch.Tensor, kept: torch.Tensor, t: dict, bonus: int, accepted: int) -> dict:
        """One verification: accepted drafts, the draft's best guess that was rejected, the target's token."""
        last = int(kept[-1])
        kids = t["children"][last]
        return {
            "accepted": tokens[kept[1:]].tolist(),
            "rejected": int(tokens[kids[0]]) if kids else None,  # the drafter's top choice after the kept path
            "bonus": bonus,
            "tree_size": t["tree"].size,
            "accepted_count": accepted,
        }


def _stack_trees(trees: list[dict], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Visibility (B, N + 1, N + 1), depths (B, N + 1) and paths (B, P, L) of each row's tree.

    A static tree shared by all rows is only expanded. Trees smaller than the widest are padded
    with nodes that see only themselves, that no node sees and that lie on no path: whatever the
    head put there, they are never accepted.
    """
    first = trees[0]
    b = len(trees)
    if all(t is first for t in trees):
        return first["visible"].expand(b, -1, -1), first["positions"].expand(b, -1), first["retrieve"].expand(b, -1, -1)
    dev = first["visible"].device
    visible = torch.eye(width, dtype=torch.bool, device=dev).repeat(b, 1, 1)
    depth = torch.ones(b, width, dtype=torch.long, device=dev)
    shape = (b, max(t["retrieve"].shape[0] for t in trees), max(t["retrieve"].shape[1] for t in trees))
    retrieve = torch.full(shape, -1, dtype=torch.long, device=dev)
    for i, t in enumerate(trees):
        n, (p, length) = t["visible"].shape[0], t["retrieve"].shape
        visible[i, :n, :n], depth[i, :n], retrieve[i, :p, :length] = t["visible"], t["positions"], t["retrieve"]
    return visible, depth, retrieve
