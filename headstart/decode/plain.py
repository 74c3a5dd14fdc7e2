"""Plain decoding, one token per target forward: the reference speculative decoding is checked against.

It makes the same Target calls as the speculative loop and shares its edges (`decode/io.py`):
the same argument checks, stop rules, streaming and output layout, so that the two differ only
in how many tokens each forward yields.
"""

from __future__ import annotations

import time

import torch

from headstart.decode.io import GenerateOutput, begin, pack_sequences, pad_id
from headstart.decode.sampling import Sampling, choose


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
    stopper, gen, rows, streams = begin(
        target, input_ids, max_new_tokens, sampling, seed, eos_token_id, stop_strings, attention_mask, streamer
    )
    news, reasons = [], []
    start = time.perf_counter()
    for row in rows:
        cache = target.new_cache()
        out = target(row, cache=cache)
        new: list[int] = []
        while True:
            nxt = choose(target.logits(out.hidden[:, -1]), sampling, gen)  # (1,)
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
        pack_sequences(input_ids, news, pad_id(target)), [], seconds, sum(map(len, news)), reasons, [len(n) for n in news]
    )


def greedy_generate(target, input_ids: torch.Tensor, max_new_tokens: int = 128, eos_token_id=None, **kwargs) -> GenerateOutput:
    """Plain greedy decoding (temperature 0): the reference speculative decoding must equal."""
    return plain_generate(target, input_ids, max_new_tokens, eos_token_id=eos_token_id, **kwargs)
