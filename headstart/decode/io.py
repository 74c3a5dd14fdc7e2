"""The edges of a generate call, shared by the plain and the speculative loop.

What comes in is checked (shapes, lengths against the target's context), the prompts lose their
padding, the stop rules (EOS tokens, stop strings, max_new_tokens) decide when a row is done, a
streamer is fed as tokens are accepted, and what goes out is HF generate's layout: the input as
given, then each row's new tokens right-padded with the pad id. `Clock` times the phases of a
speculative step for `profile=True`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from headstart.decode.sampling import GenerationError, Sampling, make_generator
from headstart.decode.verify import acceptance_length


@dataclass
class GenerateOutput:
    """What both loops return: the sequences, and the statistics every report reads."""

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


def pack_sequences(input_ids: torch.Tensor, news: list[list[int]], pad: int) -> torch.Tensor:
    """HF generate's layout (B, T + new): the input as given, padding kept, then each row's new tokens,
    right-padded with `pad`, so that `sequences[:, T:]` are the new tokens of every row."""
    new = torch.full((len(news), max(map(len, news))), pad, dtype=input_ids.dtype)  # (B, new)
    for b, tokens in enumerate(news):
        new[b, : len(tokens)] = torch.tensor(tokens, dtype=input_ids.dtype)
    return torch.cat([input_ids, new.to(input_ids.device)], dim=1)


def pad_id(target) -> int:
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


class Clock:
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


class Streams:
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


def begin(
    target,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    sampling: Sampling,
    seed: int | None,
    eos_token_id,
    stop_strings,
    attention_mask: torch.Tensor | None,
    streamer,
) -> tuple[Stopper, torch.Generator | None, list[torch.Tensor], Streams]:
    """What both decoding loops check and set up: the lengths (the prompts' against the context),
    the rows without their padding, the stop rules, the seeded generator, and the streamer (fed the
    first prompt first, as HF streamers expect). Bad arguments raise GenerationError."""
    _check_lengths(input_ids, max_new_tokens)
    rows = _rows(input_ids.to(target.device), attention_mask)
    _check_context(target, rows, max_new_tokens)
    stopper = Stopper(target, max_new_tokens, eos_token_id, stop_strings)
    gen = None if sampling.greedy else make_generator(target.device, seed)
    streams = Streams(streamer, len(rows))
    if streamer is not None:
        streams.put(rows[0][0].cpu())
    return stopper, gen, rows, streams
