"""Lossless sampling: speculative decoding at temperature > 0 follows the target's distribution.

Chi-square tests with fixed seeds: exactly reproducible, and they fail for a verifier that
favours drafted tokens (checked below on a deliberately biased one).
"""

from __future__ import annotations

import pytest
import torch
import transformers as tr

import headstart as hs
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.plain import plain_generate
from headstart.decode.sampling import Sampling
from headstart.decode.tree import tree_from_paths
from headstart.decode.verify import children_lists, sample_accept, typical_accept
from headstart.target import Target
from tests.helpers import assert_close, chi2_ok

V = 12


def _dist(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(V, generator=g) * 1.5).softmax(-1)


TREE = tree_from_paths([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0)])


def _drafts(style: str, probs: torch.Tensor, gen: torch.Generator):
    """Tokens for TREE's nodes: the target's best tokens, its worst, or draws from a draft q."""
    parent = TREE.parent
    tokens = torch.zeros(TREE.size + 1, dtype=torch.long)
    q_all = None
    if style == "sampled":
        q_all = torch.zeros(TREE.size, V)
    for i in range(1, TREE.size + 1):
        p = probs[int(parent[i])]
        rank = int(TREE.choice[i])
        if style == "good":
            tokens[i] = p.argsort(descending=True)[rank]
        elif style == "bad":
            tokens[i] = p.argsort()[rank]
        else:  # siblings drawn i.i.d. from a draft distribution q that differs from p
            q = (p.log() * 0.3).softmax(-1) * 0.5 + _dist(99) * 0.5
            tokens[i] = torch.multinomial(q, 1, generator=gen)
            q_all[i - 1] = q
    return tokens, q_all


@pytest.mark.parametrize("style", ["good", "bad", "sampled"])
def test_rejection_sampling_over_a_tree_keeps_the_target_distribution(style):
    """First emitted token ~ p(root); the token after an accepted child c ~ p(c)."""
    probs = torch.stack([_dist(i) for i in range(TREE.size + 1)])  # target distribution after each input
    kids = children_lists(TREE.parent)
    gen = torch.Generator().manual_seed(0)
    n = 6000
    first = torch.zeros(V, dtype=torch.long)
    second = {c: torch.zeros(V, dtype=torch.long) for c in kids[0]}
    accepted_total = 0
    for _ in range(n):
        tokens, q = _drafts(style, probs, gen)
        accepted, kept, bonus = sample_accept(tokens, probs, kids, gen, q)
        emitted = tokens[kept[1:]].tolist() + [bonus]
        accepted_total += accepted
        first[emitted[0]] += 1
        if accepted >= 1:  # a child c of the root was accepted: what follows must be ~ p(c)
            second[int(kept[1])][emitted[1]] += 1
    ok, stat, crit = chi2_ok(first, probs[0])
    assert ok, f"{style}: first token chi2 {stat:.1f} >= {crit:.1f}"
    for c, counts in second.items():
        if counts.sum() > 300:
            ok, stat, crit = chi2_ok(counts, probs[c])
            assert ok, f"{style}: after child {c} chi2 {stat:.1f} >= {crit:.1f}"
    rate = accepted_total / n
    assert (rate > 0.9) if style == "good" else True
    assert (rate < 0.2) if style == "bad" else True


def test_the_chi_square_test_catches_a_biased_verifier():
    """Accepting a drafted child whenever the target gives it any chance is not lossless."""
    probs = torch.stack([_dist(i) for i in range(TREE.size + 1)])
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(V, dtype=torch.long)
    for _ in range(3000):
        tokens, _ = _drafts("bad", probs, gen)
        x = int(tokens[1]) if float(torch.rand((), generator=gen)) < 0.5 else int(torch.multinomial(probs[0], 1, generator=gen))
        counts[x] += 1
    assert not chi2_ok(counts, probs[0])[0]


def small_target(seed: int = 0) -> Target:
    torch.manual_seed(seed)
    config = tr.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(3.0)
    return Target(model, name="tiny-llama-v12")


class ContextHead:
    """A head that drafts from the target's own distribution (good) or against it (bad)."""

    kind = "test"
    needs_features = True

    def __init__(self, target, style: str, sampling: Sampling):
        self.target, self.style, self.sampling = target, style, sampling
        self.context = None

    def _probs(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.target(ids[None])
        return self.sampling.probs(self.target.logits(out.hidden[0, -1]))

    def propose(self, state: DraftState, tree) -> Proposal:
        self.context = state.committed[0] if state.start == 0 else torch.cat([self.context[: state.start], state.committed[0]])
        base = torch.cat([self.context, state.root])
        tokens = torch.zeros(tree.size + 1, dtype=torch.long)
        for i in range(1, tree.size + 1):
            chain = []
            j = int(tree.parent[i])
            while j > 0:
                chain.append(int(tokens[j]))
                j = int(tree.parent[j])
            p = self._probs(torch.cat([base, torch.tensor(chain[::-1], dtype=torch.long)]))
            order = p.argsort(descending=self.style == "good")
            tokens[i] = order[int(tree.choice[i])]
        return Proposal(tokens[1:][None], tree)


def exact_marginals(target, prompt: torch.Tensor, sampling: Sampling) -> tuple[torch.Tensor, torch.Tensor]:
    """P(x2) and P(x3) of plain sampling after `prompt`, by enumerating x1 and x2."""
    def probs(seqs):
        out = target(seqs)
        return sampling.probs(target.logits(out.hidden[:, -1]))

    p1 = probs(prompt[None])[0]  # (V,)
    seq2 = torch.cat([prompt.expand(V, -1), torch.arange(V)[:, None]], 1)
    p2 = probs(seq2)  # (V, V): x1 -> x2
    seq3 = torch.cat([seq2.repeat_interleave(V, 0), torch.arange(V).repeat(V)[:, None]], 1)
    p3 = probs(seq3).reshape(V, V, V)  # x1, x2 -> x3
    joint12 = p1[:, None] * p2
    return joint12.sum(0), (joint12[:, :, None] * p3).sum((0, 1))


@pytest.mark.parametrize(
    "style,temperature,top_k,top_p", [("good", 0.8, 0, 1.0), ("bad", 1.0, 0, 1.0), ("good", 1.0, 6, 0.9)]
)
def test_speculative_sampling_end_to_end_matches_plain_sampling(style, temperature, top_k, top_p):
    target = small_target()
    sampling = Sampling(temperature, top_k, top_p)
    prompt = torch.tensor([3, 1, 4, 1, 5])
    want2, want3 = exact_marginals(target, prompt, sampling)
    head = ContextHead(target, style, sampling)
    gen = hs.SpeculativeGenerator(target, head, tree=[(0,), (1,), (0, 0)])
    n = 1000
    got2, got3 = torch.zeros(V, dtype=torch.long), torch.zeros(V, dtype=torch.long)
    out = gen.generate(prompt.expand(n, -1), max_new_tokens=3, temperature=temperature, top_k=top_k, top_p=top_p,
                       seed=1, eos_token_id=[])
    for row in out.sequences[:, 5:]:
        got2[row[1]] += 1
        got3[row[2]] += 1
    for got, want in ((got2, want2), (got3, want3)):
        ok, stat, crit = chi2_ok(got, want)
        assert ok, f"chi2 {stat:.1f} >= {crit:.1f}"
    if style == "good":
        assert out.acceptance_length > 1.2
    # Plain sampling through the same warper draws from the same marginal (a check of the check).
    plain = plain_generate(target, prompt.expand(600, -1), 2, temperature, top_p, top_k, seed=2, eos_token_id=[])
    counts = torch.bincount(plain.sequences[:, 6], minlength=V)
    assert chi2_ok(counts, want2)[0]


def test_same_seed_same_output():
    target = small_target()
    head = ContextHead(target, "good", Sampling(0.9))
    gen = hs.SpeculativeGenerator(target, head, tree="chain2")
    prompt = torch.tensor([[1, 2, 3]])
    a = gen.generate(prompt, 12, temperature=0.9, seed=7, eos_token_id=[]).sequences
    b = gen.generate(prompt, 12, temperature=0.9, seed=7, eos_token_id=[]).sequences
    assert torch.equal(a, b)


def test_warping_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    p = Sampling(1.0).probs(logits)
    assert_close(p, logits.softmax(-1), "temperature 1")
    assert_close(Sampling(0.5).probs(logits), (logits / 0.5).softmax(-1), "temperature 0.5")
    top2 = Sampling(1.0, top_k=2).probs(logits)
    assert_close(top2[0], torch.cat([torch.tensor([2.0, 1.0]).softmax(-1), torch.zeros(2)]), "top-k 2")
    full = logits.softmax(-1)[0]  # [0.644, 0.237, 0.087, 0.032]
    nucleus = Sampling(1.0, top_p=0.85).probs(logits)[0]  # 0.644 < 0.85, 0.644 + 0.237 >= 0.85: two tokens
    assert_close(nucleus, torch.cat([full[:2] / full[:2].sum(), torch.zeros(2)]), "top-p 0.85")


@pytest.mark.parametrize(
    "kwargs,message",
    [({"temperature": -0.1}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"), ({"top_k": -1}, "top_k")],
)
def test_bad_sampling_arguments(kwargs, message):
    target = small_target()
    gen = hs.SpeculativeGenerator(target, ContextHead(target, "good", Sampling(1.0)), tree="chain1")
    with pytest.raises(ValueError, match=message):
        gen.generate(torch.tensor([[1, 2]]), 4, **kwargs)
    with pytest.raises(ValueError, match="acceptance"):
        gen.generate(torch.tensor([[1, 2]]), 4, acceptance="loose")


def test_typical_acceptance_keeps_likely_drafts_and_is_opt_in():
    probs = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.1, 0.7], [0.25, 0.25, 0.25, 0.25]])
    tree = tree_from_paths([(0,), (0, 0)])
    tokens = torch.tensor([0, 1, 3])  # root, then 1 (p=0.3 at the root), then 3 (p=0.7 after it)
    accepted, kept = typical_accept(tokens, probs, tree.retrieve, threshold=0.09, alpha=0.3)
    assert accepted == 2 and kept.tolist() == [0, 1, 2]
    tokens = torch.tensor([0, 3, 3])  # p(3 | root) = 0: rejected at once
    assert typical_accept(tokens, probs, tree.retrieve)[0] == 0
