
"""The head contract (decode/contract.py): its documented minimal head works, and DraftState by hand."""

from __future__ import annotations

import re
import textwrap

import pytest
import torch

import headstart as hs
from headstart.decode import contract
from headstart.decode.contract import DraftHead, DraftState
from headstart.decode.plain import greedy_generate
from tests.helpers import VOCAB, tiny_target


def documented_example() -> str:
    """The first indented block of the module docstring (the minimal head), dedented."""
    block = re.search(r"\n\n((?: {4}\S.*\n)(?: {4}.*\n|\n)*)", contract.__doc__)
    return textwrap.dedent(block.group(1))


def test_the_documented_minimal_head_decodes_a_batch_losslessly():
    target = tiny_target("llama")
    scope = {"SpeculativeGenerator": hs.SpeculativeGenerator, "target": target}
    exec(documented_example(), scope)
    assert isinstance(scope["RepeatHead"](), DraftHead)
    prompt = torch.randint(0, VOCAB, (2, 6), generator=torch.Generator().manual_seed(0))
    out = scope["gen"].generate(prompt, 12, eos_token_id=[])
    assert torch.equal(out.sequences, greedy_generate(target, prompt, 12, eos_token_id=[]).sequences)
    assert out.new_lengths == [12, 12] and out.acceptance_length >= 1.0


def test_next_tokens_are_the_committed_shifted_by_one_then_the_root():
    state = DraftState(hidden=torch.zeros(1, 4), root=torch.tensor([8]), committed=torch.tensor([[5, 6, 7]]))
    assert state.next_tokens().tolist() == [[6, 7, 8]]


def test_trait_gives_each_optional_attribute_or_what_its_absence_means():
    from headstart.decode.contract import OPTIONAL_TRAITS, trait

    class Bare:
        kind = "bare"

    class Dynamic:
        kind, dynamic, feature_layers, options = "dyn", True, [3, 5], {"num_heads": 2}

    assert trait(Bare(), "dynamic") is False and trait(Bare(), "feature_layers") == () and trait(Bare(), "held_out") is None
    assert trait(Dynamic(), "dynamic") is True and trait(Dynamic(), "feature_layers") == [3, 5]
    assert trait(Dynamic(), "options") == {"num_heads": 2}
    first = trait(Bare(), "options")
    first["num_heads"] = 9  # a caller's change to the default reaches no other head
    assert trait(Bare(), "options") == {} and OPTIONAL_TRAITS["options"] == {}
    with pytest.raises(KeyError):
        trait(Bare(), "not_a_trait")
