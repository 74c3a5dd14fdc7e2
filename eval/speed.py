"""Timed decoding of one prompt by each method, and the target's measured forward-cost curve.

Every method decodes the same input ids with the same target, dtype, thread count, EOS set and
token budget: plain decoding (headstart's loop, the baseline), speculative decoding with a head,
HF `generate` plain, HF prompt lookup, and HF assisted generation with a draft model. Each samples
as the decoding engine's `Sampling` says (temperature, top-k, top-p), from `seed` when given.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import plain_generate
from headstart.decode.sampling import Sampling
from headstart.decode.tune import forward_cost
from headstart.errors import HeadstartError


class EvalError(HeadstartError):
    """An evaluation that cannot run as asked (a peer's model, a tokenizer); the message says what to do."""


@dataclass
class Decoded:
    tokens: list[int]  # the new tokens
    seconds: float
    accepted_per_step: list[int] = field(default_factory=list)  # speculative only
    steps: list[dict] = field(default_factory=list)  # speculative only: one record per verification
    head_gain: dict | None = None  # a hybrid with a head: its LookupStats.head_* counted over this decode


def eos_ids(target) -> list[int]:
    """Every token that ends an answer: the generation config's EOS ids and the tokenizer's."""
    eos = target.model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    tok = target.tokenizer
    if tok is not None and tok.eos_token_id is not None:
        ids.add(tok.eos_token_id)
    return sorted(ids)


def run_plain(target, ids: torch.Tensor, max_new_tokens: int, s: Sampling, eos: list[int], seed: int | None = None) -> Decoded:
    out = plain_generate(
        target, ids, max_new_tokens, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed, eos_token_id=eos
    )
    return Decoded(out.sequences[0, ids.shape[1] :].tolist()[: out.new_lengths[0]], out.seconds)


def run_speculative(
    gen: SpeculativeGenerator, ids: torch.Tensor, max_new_tokens: int, s: Sampling, eos: list[int], seed: int | None = None
) -> Decoded:
    # record_steps costs a few list conversions per step; the HTML view needs them.
    out = gen.generate(
        ids, max_new_tokens, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed,
        eos_token_id=eos, record_steps=True,
    )
    new = out.sequences[0, ids.shape[1] :].tolist()[: out.new_lengths[0]]
    return Decoded(new, out.seconds, list(out.accepted_per_step), out.steps[0])


def run_hf(target, ids: torch.Tensor, max_new_tokens: int, s: Sampling, eos: list[int], seed: int | None = None, **kwargs) -> Decoded:
    """HF `generate` (plain, or with prompt_lookup_num_tokens= / assistant_model= in kwargs)."""
    sample = s.temperature > 0
    if sample and seed is not None:
        torch.manual_seed(seed)
    extra = {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k} if sample else {}  # top_k 0: off
    start = time.perf_counter()
    out = target.model.generate(
        ids.to(target.device), attention_mask=torch.ones_like(ids).to(target.device), max_new_tokens=max_new_tokens,
        do_sample=sample, eos_token_id=eos, pad_token_id=eos[0] if eos else 0, **extra, **kwargs,
    )
    seconds = time.perf_counter() - start
    new = out[0, ids.shape[1] :].tolist()
    for i, t in enumerate(new):  # HF pads finished rows; cut at the first EOS (kept, as HF does)
        if t in eos:
            new = new[: i + 1]
            break
    return Decoded(new, seconds)


def load_assistant(path: str, target):
    """A draft model for HF assisted generation, in the target's dtype and on its device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise EvalError(f"assistant {path}: not a Hugging Face model folder or id ({e})") from None
    if getattr(config, "vocab_size", None) != target.vocab_size:
        raise EvalError(
            f"assistant {path} has a vocabulary of {getattr(config, 'vocab_size', None)} tokens but the target has "
            f"{target.vocab_size}; assisted generation needs the target's tokenizer. Name a draft model of the same family."
        )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=target.dtype)
    return model.to(target.device).eval().requires_grad_(False)


def relative_forward_cost(target, token_counts: list[int], repeats: int = 5) -> dict[int, float]:
    """The target's forward over n new tokens, relative to one token, measured on this machine.

    The cached prefix is 256 tokens (less where the context is short), as in `tune-tree`.
    """
    seconds = forward_cost(target, token_counts, repeats=repeats)
    return {n: seconds[n] / seconds[1] for n in sorted(seconds)}
