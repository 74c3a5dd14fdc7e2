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
a `DynamicTreeSpec` and hand it back with the proposal. Rows of a batch are decoded one after
another; each equals that row decoded alone, and a finished row costs nothing more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from headstart.decode.cache import commit_path
from headstart.decode.sampling import Sampling, make_generator
from headstart.decode.tree import DraftHead, DraftState, DynamicTreeSpec, Tree, load_tree
from headstart.decode.verify import children_lists, greedy_accept, sample_accept, typical_accept

ACCEPTANCE_MODES = ("exact", "typical")


@dataclass
class GenerateOutput:
    sequences: torch.Tensor  # (B, T + new) prompt followed by the new tokens (padded), as HF generate
    accepted_per_step: list[int] = field(default_factory=list)  # drafts accepted at each verification
    seconds: float = 0.0
    new_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)  # per row: "eos", "stop_string" or "length"
    new_lengths: list[int] = field(default_factory=list)  # per row: new tokens before padding
    steps: list[list[dict]] = field(default_factory=list)  # per row, per step (record_steps=True)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (profile=True)

    @property
    def acceptance_length(self) -> float:
        """τ: tokens per target forward after prefill, bonus token counted (plain decoding: 1.00)."""
        steps = self.accepted_per_step
        return sum(a + 1 for a in steps) / len(steps) if steps else 1.0


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
            raise ValueError("stop_strings need the target's tokenizer (Target(..., tokenizer=...))")
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


def _check_prompt(target, input_ids: torch.Tensor, max_new_tokens: int) -> None:
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be (B, T) with T >= 1, got shape {tuple(input_ids.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    limit = target.max_position_embeddings
    if limit and input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"the prompt has {input_ids.shape[1]} tokens; with max_new_tokens={max_new_tokens} it exceeds the "
            f"target's context of {limit} positions. Shorten the prompt or lower max_new_tokens."
        )


def _rows(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> list[torch.Tensor]:
    """The prompts of a batch without their padding (left or right), each (1, T_i)."""
    if attention_mask is None:
        return [row[None] for row in input_ids]
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must match input_ids {tuple(input_ids.shape)}")
    rows = []
    for row, keep in zip(input_ids, attention_mask.bool()):
        if not keep.any():
            raise ValueError("a row of the batch is all padding")
        rows.append(row[keep][None])
    return rows


def _choose(logits: torch.Tensor, sampling: Sampling, gen: torch.Generator | None) -> torch.Tensor:
    """The next token after (1, V) logits: argmax, or a draw from the warped distribution."""
    if sampling.greedy:
        return logits.argmax(-1)
    return torch.multinomial(sampling.probs(logits), 1, generator=gen)[:, 0]


def _pack(rows: list[torch.Tensor], news: list[list[int]], pad: int) -> torch.Tensor:
    """Prompt followed by new tokens for every row; rows of unequal length padded on the right."""
    full = [torch.cat([r[0].cpu(), torch.tensor(n, dtype=r.dtype)]) for r, n in zip(rows, news)]
    width = max(f.numel() for f in full)
    out = torch.full((len(full), width), pad, dtype=full[0].dtype)
    for i, f in enumerate(full):
        out[i, : f.numel()] = f
    return out


def _pad_id(target) -> int:
    tok = target.tokenizer
    for value in (getattr(tok, "pad_token_id", None), getattr(tok, "eos_token_id", None)):
        if isinstance(value, int):
            return value
    return 0


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
            raise ValueError("streaming needs a batch of one prompt")
        self.streamer = streamer

    def put(self, tokens) -> None:
        if self.streamer is not None and len(tokens):
            self.streamer.put(torch.as_tensor(tokens, dtype=torch.long).cpu())

    def end(self) -> None:
        if self.streamer is not None:
            self.streamer.end()


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
    """Plain decoding with the same Target calls, one token per forward: the reference."""
    sampling = Sampling(temperature, top_k, top_p)
    _check_prompt(target, input_ids, max_new_tokens)
    stopper = Stopper(target, max_new_tokens, eos_token_id, stop_strings)
    gen = None if sampling.greedy else make_generator(target.device, seed)
    rows = _rows(input_ids.to(target.device), attention_mask)
    streams = _Streams(streamer, len(rows))
    if streamer is not None:
        streams.put(rows[0][0].cpu())  # HF streamers expect the prompt first
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
        _pack(rows, news, _pad_id(target)), [], seconds, sum(map(len, news)), reasons, [len(n) for n in news]
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
        """Decode every row of input_ids (B, T); returns sequences and acceptance statistics.

        attention_mask (B, T) marks padding (left or right) to strip from ragged prompts.
        acceptance="typical" is Medusa's typical acceptance: LOSSY, the output no longer follows
        the target's distribution (at temperature 0 it is greedy, hence exact).
        profile=True times each phase (draft, target forward, accept, commit) into out.timings,
        synchronising the device between phases (a little slower; for benchmarks).
        """
        sampling = Sampling(temperature, top_k, top_p)
        if acceptance not in ACCEPTANCE_MODES:
            raise ValueError(f"acceptance must be one of {ACCEPTANCE_MODES}, got {acceptance!r}")
        _check_prompt(self.target, input_ids, max_new_tokens)
        stopper = Stopper(self.target, max_new_tokens, eos_token_id, stop_strings)
        gen = None if sampling.greedy else make_generator(self.target.device, seed)
        rows = _rows(input_ids.to(self.target.device), attention_mask)
        streams = _Streams(streamer, len(rows))
        if streamer is not None:
            streams.put(rows[0][0].cpu())
        mode = {"sampling": sampling, "gen": gen, "typical": acceptance == "typical" and not sampling.greedy,
                "threshold": typical_threshold, "alpha": typical_alpha}
        out = GenerateOutput(torch.empty(0))
        self._clock = _Clock(self.target.device, out.timings) if profile else None
        start = time.perf_counter()
        news = []
        for row in rows:
            new, steps, reason, trace = self._decode_row(row, stopper, mode, streams, record_steps)
            news.append(new)
            out.accepted_per_step.extend(steps)
            out.finish_reasons.append(reason)
            out.new_lengths.append(len(new))
            if record_steps:
                out.steps.append(trace)
        streams.end()
        out.seconds = time.perf_counter() - start
        out.sequences = _pack(rows, news, _pad_id(self.target))
        out.new_tokens = sum(out.new_lengths)
        return out

    def _features(self, out, index=None) -> torch.Tensor:
        """(1, n, F) what the head reads at the given inputs: tapped layers concatenated, or the last hidden."""
        if self.feature_layers:
            feats = torch.cat([out.features[i] for i in self.feature_layers], dim=-1)
        else:
            feats = out.hidden
        return feats if index is None else feats[:, index]

    def _decode_row(self, prompt: torch.Tensor, stopper: Stopper, mode: dict, streams: _Streams, record: bool):
        target, sampling, gen = self.target, mode["sampling"], mode["gen"]
        layers = self.feature_layers if self.needs_features else ()
        cache = target.new_cache()
        out = target(prompt, cache=cache, feature_layers=layers)  # prefill
        hidden = out.hidden[:, -1]  # (1, D)
        root = _choose(target.logits(hidden), sampling, gen)  # (1,)
        state = DraftState(hidden=hidden, root=root)
        if self.needs_features:
            state.features, state.committed, state.start = self._features(out), prompt, 0
        new = [int(root)]
        steps: list[int] = []
        trace: list[dict] = []
        keep, reason = stopper.cut(new, 0)
        streams.put(new[:keep])
        past = prompt.shape[1]
        clock = self._clock or _Clock(None, None)
        while reason is None:
            clock.start()
            proposal = self.heads.propose(state, self.tree_spec if self.dynamic else self.tree)
            t = self._static if proposal.tree is self.tree else self._tensors(proposal.tree)
            tokens = torch.cat([root, proposal.tokens[0].to(root.device)])  # (N + 1,)
            clock.lap("draft")
            verified = target.tree_forward(
                tokens[None], t["visible"], (past + t["positions"])[None], cache, past, feature_layers=layers
            )
            logits = target.logits(verified.hidden[0])  # (N + 1, V)
            clock.lap("target_forward")
            if sampling.greedy:
                predicted = logits.argmax(-1)
                accepted, kept = greedy_accept(tokens, predicted, t["retrieve"])
                bonus = predicted[kept[-1]][None]
            elif mode["typical"]:
                probs = sampling.probs(logits)
                accepted, kept = typical_accept(tokens, probs, t["retrieve"], mode["threshold"], mode["alpha"])
                bonus = torch.multinomial(probs[kept[-1]], 1, generator=gen)
            else:
                probs = sampling.probs(logits)
                q = None if proposal.draft_probs is None else proposal.draft_probs[0]
                accepted, kept, b = sample_accept(tokens, probs, t["children"], gen, q)
                bonus = torch.tensor([b], device=tokens.device)
            clock.lap("accept")
            commit_path(cache, past, kept)
            state = DraftState(hidden=verified.hidden[:, kept[-1]], root=bonus)
            if self.needs_features:
                state.features, state.committed, state.start = self._features(verified, kept), tokens[kept][None], past
            past += accepted + 1
            root = bonus
            step_tokens = tokens[kept[1:]].tolist() + [int(bonus)]
            before = len(new)
            new.extend(step_tokens)
            steps.append(accepted)
            if record:
                trace.append(self._record(tokens, kept, t, int(bonus), accepted))
            keep, reason = stopper.cut(new, before)
            streams.put(new[before:keep])
            clock.lap("commit_and_bookkeeping")
        return new[:keep], steps, reason, trace

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
