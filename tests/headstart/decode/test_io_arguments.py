"""Bad generate arguments are GenerationErrors (HeadstartErrors) that say what was given, what is allowed, what to do."""

from __future__ import annotations

import pytest
import torch

import headstart as hs
from headstart.decode.plain import plain_generate
from headstart.decode.sampling import GenerationError
from headstart.errors import HeadstartError
from tests.helpers import tiny_target


@pytest.fixture(scope="module")
def decoders():
    """plain_generate and SpeculativeGenerator.generate on one tiny target (256 positions)."""
    target = tiny_target("llama")
    gen = hs.SpeculativeGenerator(target, hs.heads.build("medusa", target, num_heads=2), tree="chain2")
    return {"plain": lambda ids, **kw: plain_generate(target, ids, **kw), "speculative": gen.generate}


PROMPT = torch.tensor([[5, 6, 7]])


@pytest.mark.parametrize("decode", ["plain", "speculative"])
@pytest.mark.parametrize(
    "kwargs,said",
    [
        ({"temperature": -0.5}, r"temperature must be >= 0 .* got -0\.5; pass temperature=0"),
        ({"temperature": float("nan")}, r"temperature must be >= 0 .* got nan"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\] .* got 0\.0; pass top_p=1"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\] .* got 1\.5"),
        ({"top_k": -1}, r"top_k must be an integer >= 0 .* got -1; pass top_k=0"),
        ({"top_k": 2.5}, r"top_k must be an integer >= 0 .* got 2\.5"),
        ({"max_new_tokens": 0}, r"max_new_tokens must be an integer >= 1, got 0; pass how many"),
        ({"max_new_tokens": -3}, r"max_new_tokens must be an integer >= 1, got -3"),
    ],
)
def test_bad_sampling_and_length_arguments(decoders, decode, kwargs, said):
    with pytest.raises(GenerationError, match=said) as caught:
        decoders[decode](PROMPT, **{"max_new_tokens": 4, **kwargs})
    assert isinstance(caught.value, HeadstartError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("decode", ["plain", "speculative"])
def test_prompt_and_new_tokens_past_the_context(decoders, decode):
    run = decoders[decode]
    with pytest.raises(GenerationError, match=r"250 tokens; with max_new_tokens=10 .* context of 256 .* to 6\."):
        run(torch.zeros(1, 250, dtype=torch.long), max_new_tokens=10)
    with pytest.raises(GenerationError, match=r"300 tokens; .* keep it under 256 tokens"):
        run(torch.zeros(1, 300, dtype=torch.long), max_new_tokens=1)
    # The limit is on each row's own tokens: left padding takes no positions.
    ids, mask = torch.zeros(2, 250, dtype=torch.long), torch.zeros(2, 250, dtype=torch.long)
    mask[:, -4:] = 1
    out = run(ids, max_new_tokens=10, attention_mask=mask, eos_token_id=[])
    assert out.sequences.shape == (2, 260) and out.new_lengths == [10, 10]
