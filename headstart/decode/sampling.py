"""Turning the target's logits into the distribution that plain sampling would draw from.

Temperature, then top-k, then top-p (nucleus), in the order HF's `generate` applies its warpers.
Speculative sampling verifies drafts against exactly this distribution, so the output follows it.
`choose` picks a next token from it (the argmax when greedy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from headstart.errors import HeadstartError


class GenerationError(HeadstartError):
    """A generate call that cannot run as asked (a sampling setting, a length, a prompt); the message says what to do."""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: temperature 0 is greedy (argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0: no top-k cut
    top_p: float = 1.0  # 1.0: no nucleus cut

    def __post_init__(self):
        if not _is_number(self.temperature) or self.temperature < 0:
            raise GenerationError(
                f"temperature must be >= 0 (0 decodes greedily), got {self.temperature!r}; "
                "pass temperature=0 for greedy decoding or a positive value such as 0.7 to sample"
            )
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise GenerationError(
                f"top_k must be an integer >= 0 (0 keeps every token), got {self.top_k!r}; "
                "pass top_k=0 to turn it off or e.g. top_k=50 to sample among the 50 likeliest tokens"
            )
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise GenerationError(
                f"top_p must be in (0, 1] (1 keeps every token), got {self.top_p!r}; pass top_p=1 to turn it off "
                "or e.g. top_p=0.9 to sample from the likeliest tokens that hold 90% of the probability"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., V) logits -> (..., V) float32 probabilities after temperature, top-k and top-p."""
        scores = logits.float() / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = scores.topk(self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = scores.softmax(-1)
        if self.top_p < 1:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            before = sorted_p.cumsum(-1) - sorted_p  # mass of the better tokens
            drop_sorted = before >= self.top_p  # keep the smallest set whose mass reaches top_p
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            probs = probs.masked_fill(drop, 0.0)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs


def make_generator(device, seed: int | None) -> torch.Generator:
    """A generator on `device`, seeded when `seed` is given (reproducible runs)."""
    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(int(seed))
    return gen


def choose(logits: torch.Tensor, sampling: Sampling, gen: torch.Generator | None) -> torch.Tensor:
    """The next token after (B, V) logits: argmax, or a draw from the warped distribution."""
    if sampling.greedy:
        return logits.argmax(-1)
    return torch.multinomial(sampling.probs(logits), 1, generator=gen)[:, 0]
