"""Prompt lookup: the n-gram proposer, the trie merge, and hybrid trees decoding losslessly."""

from __future__ import annotations

import random

import pytest
import torch

import headstart as hs
from headstart.cli import main
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.contract import Proposal
from headstart.decode.dynamic import tree_from_parents
from headstart.decode.hybrid import HybridHead, HybridSettings, merge_into, verified_bounds, with_lookup
from headstart.decode.lookup import LookupHead, NgramIndex, PromptLookupError, merge_branch, ngram_continuation
from headstart.decode.plain import greedy_generate
from headstart.decode.tree import tree_from_paths
from headstart.decode.verify import children_lists, greedy_accept, sample_accept
from headstart.eval.run import evaluate
from headstart.eval.speed import EvalError
from headstart.target import Target
from tests.helpers import (
    PROMPT,
    chi2_ok,
    perturbed_heads,
    perturbed_of,
    random_prompts,
    save_tiny,
    tiny_target,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread, far faster on shared cores


def test_latest_match_longest_ngram_first():
    seq = [1, 2, 3, 4, 9, 1, 2, 5, 6, 7, 1, 2]
    # (1, 2) occurred at 0 and 5: the latest (5) is taken; its continuation runs into the context's end.
    assert ngram_continuation(seq, max_ngram=2, max_tokens=10) == [5, 6, 7, 1, 2]
    assert ngram_continuation(seq, max_ngram=2, max_tokens=3) == [5, 6, 7]
    seq = [4, 8, 1, 9, 8, 2, 4, 8]
    assert ngram_continuation(seq, max_ngram=2) == [1, 9, 8, 2, 4, 8]  # the 2-gram (4, 8) beats the later 1-gram (8)
    assert ngram_continuation(seq, max_ngram=1) == [2, 4, 8]


def test_shorter_ngram_when_the_longer_never_occurred_and_nothing_without_a_match():
    assert ngram_continuation([5, 8, 3, 7, 8], max_ngram=3) == [3, 7, 8]  # (3, 7, 8), (7, 8) unseen; (8,) at 1
    assert ngram_continuation([1, 2, 3], max_ngram=2) == []
    assert ngram_continuation([7], max_ngram=2) == []
    assert ngram_continuation([], max_ngram=2) == []
    assert ngram_continuation([3, 3], max_ngram=4) == [3]  # n is capped by what came before


def _reference(seq: list[int], max_ngram: int, max_tokens: int) -> list[int]:
    """The rule spelled out: scan backwards for the latest earlier occurrence, longest n first."""
    for n in range(min(max_ngram, len(seq) - 1), 0, -1):
        for i in range(len(seq) - n - 1, -1, -1):
            if seq[i : i + n] == seq[len(seq) - n :]:
                return seq[i + n : i + n + max_tokens]
    return []


def test_incremental_index_equals_the_rule_on_random_sequences():
    rng = random.Random(0)
    for _ in range(300):
        seq = [rng.randrange(4) for _ in range(rng.randrange(1, 40))]
        n, length = rng.randrange(1, 4), rng.randrange(1, 8)
        assert ngram_continuation(seq, n, length) == _reference(seq, n, length), (seq, n, length)
        index = NgramIndex(n)  # fed in pieces, as the decoding loop commits tokens
        cut = rng.randrange(len(seq))
        index.extend(seq[:cut])
        index.extend(seq[cut:-1])
        assert index.continuation(seq[-1], length) == _reference(seq, n, length)


def test_bad_settings_are_clear_errors():
    with pytest.raises(PromptLookupError, match="max_tokens must be an integer >= 1"):
        LookupHead(max_tokens=0)
    with pytest.raises(PromptLookupError, match="max_ngram"):
        HybridHead(LookupHead(), max_tokens=4, max_ngram=0)
    assert with_lookup("the head", HybridSettings()) == "the head"  # 0 = off: the head as it is


# ---------------------------------------------------------------- the trie merge, by hand

# (0,)=10, (1,)=20, (0, 0)=11, (0, 1)=12, (1, 0)=21: nodes 1..5 of a static tree
HEAD = tree_from_paths([(0,), (1,), (0, 0), (0, 1), (1, 0)])
HEAD_TOKENS = [10, 20, 11, 12, 21]


def test_merge_follows_shared_prefix_then_adds_nodes():
    parents = HEAD.parent[1:].tolist()
    assert parents == [0, 0, 1, 1, 2]
    m = merge_branch(HEAD_TOKENS, parents, [10, 12, 30, 31])
    assert (m.shared, m.added) == (2, 2)
    assert m.tokens == [10, 20, 11, 12, 21, 30, 31]
    assert m.parents == [0, 0, 1, 1, 2, 4, 6]  # 30 hangs below node 4 (12), 31 below node 6 (30)
    tree = tree_from_parents(m.parents)
    assert tree.depth.tolist() == [0, 1, 1, 2, 2, 2, 3, 4]
    assert tree.visible[7].nonzero().flatten().tolist() == [0, 1, 4, 6, 7]
    # The verifier walks the merged path when the target agrees with it.
    tokens = torch.tensor([0, *m.tokens])
    predicted = torch.full((8,), 99)
    predicted[[0, 1, 4, 6, 7]] = torch.tensor([10, 12, 30, 31, 5])
    accepted, kept = greedy_accept(tokens, predicted, tree.retrieve)
    assert accepted == 4 and kept.tolist() == [0, 1, 4, 6, 7]


def test_merge_of_a_new_or_a_held_branch():
    parents = HEAD.parent[1:].tolist()
    m = merge_branch(HEAD_TOKENS, parents, [40, 41])
    assert (m.shared, m.added, m.parents[5:]) == (0, 2, [0, 6])
    m = merge_branch(HEAD_TOKENS, parents, [20, 21])
    assert (m.shared, m.added, m.tokens) == (2, 0, HEAD_TOKENS)
    # Duplicate siblings: the branch follows the first.
    m = merge_branch([7, 7, 8], [0, 0, 2], [7, 8])
    assert (m.shared, m.added, m.parents) == (1, 1, [0, 0, 2, 1])


def test_mixed_tree_sampling_keeps_the_target_distribution():
    """A sampled head node (its q) beside a lookup node (one-hot q) below the same parent: the first
    emitted token still follows the target's p, and so does the token after each accepted child."""
    v = 6
    g = torch.Generator().manual_seed(0)
    probs = (torch.randn(4, v, generator=g) * 1.5).softmax(-1)  # after root, head node, lookup node, its child
    q = (torch.randn(v, generator=g)).softmax(-1)
    lookup = int(probs[0].argsort(descending=True)[1])  # a likely token, but not the likeliest
    first = torch.zeros(v, dtype=torch.long)
    second = torch.zeros(v, dtype=torch.long)
    for _ in range(6000):
        x = int(torch.multinomial(q, 1, generator=g))
        head = Proposal(torch.tensor([[x]]), tree_from_paths([(0,)]), q[None, None])  # (1, 1), (1, 1, V)
        merged, (m,) = merge_into(head, [[lookup, 3]])
        assert m.added == (2 if x != lookup else 1)
        rows = merged.draft_probs[0]  # (N', V): the head's q, then one-hot rows
        assert torch.equal(rows[0], q) and all(rows[i, t] == 1 and rows[i].sum() == 1 for i, t in enumerate(m.tokens[1:], 1))
        tokens = torch.tensor([0, *m.tokens])
        node_probs = probs if x != lookup else probs[[0, 2, 3]]  # what the target says after each input
        accepted, kept, bonus = sample_accept(tokens, node_probs, children_lists(merged.tree.parent), g, rows)
        emitted = tokens[kept[1:]].tolist() + [bonus]
        first[emitted[0]] += 1
        if accepted and int(tokens[kept[1]]) == lookup and x != lookup:
            second[emitted[1]] += 1
    assert chi2_ok(first, probs[0])[0]
    assert second.sum() > 300 and chi2_ok(second, probs[2])[0]


# ---------------------------------------------------------------- decoding: lossless, and lookup nodes accepted

@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_hybrid_greedy_equals_plain(arch, kind):
    target = tiny_target(arch)
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    hybrid = HybridHead(perturbed_of(kind, target), max_tokens=6)
    options = {"tree": "tree8"} if kind == "medusa" else {"depth": 3, "top_k": 2, "total_tokens": 6}
    out = hs.SpeculativeGenerator(target, hybrid, **options).generate(prompts, 40, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert hybrid.stats.matched > 0 and hybrid.stats.added > 0
    if arch == "llama":  # its greedy text loops: the head sat steps out, and caught up after (EAGLE's cache too)
        assert hybrid.stats.alone > 0
    # Ragged rows: each row decodes its own tokens only.
    mask = torch.ones_like(prompts)
    mask[0, :4] = 0
    ref = greedy_generate(target, prompts, 30, eos_token_id=[], attention_mask=mask)
    out = hs.SpeculativeGenerator(target, hybrid, **options).generate(prompts, 30, eos_token_id=[], attention_mask=mask)
    assert torch.equal(out.sequences, ref.sequences)


def test_lookup_alone_equals_plain_and_is_accepted_where_text_repeats():
    target = tiny_target("llama")
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 60, eos_token_id=[])
    head = LookupHead(max_tokens=5)
    gen = hs.SpeculativeGenerator(target, head)
    assert gen.tree_settings() == {
        "kind": "dynamic", "depth": 5, "top_k": 1, "size": 5, "lookup": {"max_tokens": 5, "max_ngram": 2, "branch": False}
    }
    out = gen.generate(prompts, 60, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    # A random tiny model falls into loops: lookup drafts them.
    assert head.stats.accepted > 0 and out.acceptance_length > 1.2
    assert max(out.accepted_per_step) <= 5 and 0 in out.accepted_per_step  # steps without a match verify the root alone


def test_lookup_branches_are_accepted_beside_an_untrained_head():
    """An untrained Medusa head (identity blocks) drafts next-next tokens badly; where the greedy
    continuation repeats the context, the lookup branch carries the accepted tokens."""
    target = tiny_target("llama")
    prompts = random_prompts(batch=2)
    heads = hs.heads.build("medusa", target, num_heads=3)
    alone = hs.SpeculativeGenerator(target, heads, tree="tree8").generate(prompts, 60, eos_token_id=[])
    hybrid = HybridHead(heads, max_tokens=8)
    out = hs.SpeculativeGenerator(target, hybrid, tree="tree8").generate(prompts, 60, eos_token_id=[])
    assert torch.equal(out.sequences, alone.sequences)
    assert hybrid.stats.accepted > 0
    assert out.acceptance_length > alone.acceptance_length


def test_hybrid_sampling_is_reproducible_with_a_seed():
    target = tiny_target("llama")
    prompts = random_prompts(batch=2)
    hybrid = HybridHead(perturbed_of("eagle3", target), max_tokens=4)
    gen = hs.SpeculativeGenerator(target, hybrid, depth=3, top_k=2, total_tokens=6)
    a, b, c = (gen.generate(prompts, 30, temperature=0.8, seed=s, eos_token_id=[]) for s in (7, 7, 8))
    assert torch.equal(a.sequences, b.sequences) and a.accepted_per_step == b.accepted_per_step
    assert not torch.equal(a.sequences, c.sequences)
    gen = hs.SpeculativeGenerator(target, LookupHead(max_tokens=4))  # steps without a match: the root alone
    a, b = (gen.generate(prompts, 30, temperature=0.8, seed=7, eos_token_id=[]) for _ in range(2))
    assert torch.equal(a.sequences, b.sequences) and a.accepted_per_step == b.accepted_per_step


def test_tree_bounds_count_the_branch():
    static = {"kind": "static", "size": 8, "depth": 3, "top_k": 4}
    assert verified_bounds(static) == (3, 8)
    assert verified_bounds(static | {"lookup": {"max_tokens": 10, "max_ngram": 2, "branch": True}}) == (10, 18)
    copying = {"max_tokens": 10, "max_ngram": 2, "branch": True, "copy_tokens": 40}  # alone while copying, up to 40
    assert verified_bounds(static | {"lookup": copying}) == (40, 40)
    alone = {"kind": "dynamic", "size": 10, "depth": 10, "top_k": 1, "lookup": {"max_tokens": 10, "max_ngram": 2, "branch": False}}
    assert verified_bounds(alone) == (10, 10)


# ---------------------------------------------------------------- eval and the CLI


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory, smol_tokenizer):
    """A tiny float32 Llama with SmolLM2's tokenizer (a chat template), saved as an HF folder."""
    return save_tiny(tmp_path_factory.mktemp("lookup") / "target", smol_tokenizer)


@pytest.fixture(scope="module")
def chat_target(chat_folder):
    return Target.from_pretrained(chat_folder, dtype=torch.float32)


def test_eval_runs_hybrid_and_lookup_beside_hf_prompt_lookup(chat_target, tmp_path):
    target = chat_target
    out = tmp_path / "eval.json"
    cfg = EvalConfig(max_new_tokens=24, output=str(out))
    report = evaluate(target, {"medusa": perturbed_heads(target)}, DecodeConfig(tree="tree8", prompt_lookup=4), cfg,
                      prompts=[PROMPT], warmup=False, progress=False)
    (res,) = report["results"]
    by = {e["label"]: e for e in res["methods"]}
    assert list(by) == ["plain", "medusa", "medusa+lookup", "lookup", "hf_generate", "hf_prompt_lookup"]
    assert all(e["greedy_match"]["matched"] == 1 for e in by.values())  # float32: every method equals plain
    assert by["medusa+lookup"]["tree"]["lookup"] == {"max_tokens": 4, "max_ngram": 2, "branch": True, "copy_tokens": 40}
    for label, longest in (("medusa+lookup", 40 + 1), ("lookup", 4 + 1)):  # the most a step may feed (copying, alone)
        b = by[label]["bound"]  # each step priced on the cost curve at the size it fed
        assert b["measured_at"] == "each step, interpolated" and 1 <= b["mean_verify_tokens"] <= b["verify_tokens"] <= longest
    assert by["lookup"]["tree"]["size"] == 4 and by["medusa"]["bound"]["verify_tokens"] == 8 + 1
    table = out.with_suffix(".md").read_text()
    assert "+ lookup branch ≤ 4 tokens, n-gram ≤ 2 (alone, ≤ 40 tokens, while the text copies its context)" in table
    assert "chain of ≤ 4 copied tokens" in table
    # the bound of a lookup draft prices every step at its longest: the table says so, for both lookup methods
    bounds = [line for line in table.splitlines() if line.startswith("- Bound:")]
    assert len(bounds) == 3 and all("a lookup draft's length varies per step" in line for line in bounds[1:])
    assert "up to" not in bounds[0] and all("mean cost of its verifications" in line for line in bounds[1:])
    with pytest.raises(EvalError, match="relabel"):
        evaluate(target, {"lookup": perturbed_heads(target)}, DecodeConfig(prompt_lookup=4), cfg, prompts=[PROMPT])


def test_generate_verb_decodes_with_lookup_branches(chat_folder, chat_target, tmp_path, capsys):
    heads_dir = tmp_path / "medusa"
    perturbed_heads(chat_target).save_pretrained(heads_dir, chat_target)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"target: {{name_or_path: {chat_folder}, dtype: float32}}\ndecode: {{tree: tree8}}\n")
    code = main(["generate", str(recipe), "--head", str(heads_dir), "--prompt", "Say hi.", "--max-new-tokens", "12",
                 "decode.prompt_lookup=4"])
    assert code == 0
    assert "tree: 8 nodes, depth 3, top-k 3, + a prompt-lookup branch of up to 4 tokens" in capsys.readouterr().err
