"""Hybrid trees: a head's tree with a prompt-lookup branch and a corpus tree, lossless; the
branch alone while the text copies its context; the two sources without a head; a scoring head and the corpus sharing a budget."""

from __future__ import annotations

import pytest
import torch

import headstart as hs
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.contract import DraftState
from headstart.decode.corpus import CorpusNgram
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.hybrid import HybridHead, HybridSettings, scored_paths, shared_tree, verified_bounds, with_lookup
from headstart.decode.plain import greedy_generate
from headstart.decode.tree import load_tree
from headstart.eval.report import _tree_text
from headstart.eval.run import evaluate
from headstart.target import Target
from tests.helpers import (
    PROMPT,
    perturbed_heads,
    perturbed_of,
    random_prompts,
    save_tiny,
    tiny_target,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread, far faster on shared cores


def _own_corpus(target, n: int = 40) -> CorpusNgram:
    """The table of what the target writes: its greedy answers to other prompts (self-distilled)."""
    answers = greedy_generate(target, random_prompts(batch=8, seed=11), n, eos_token_id=[]).sequences[:, 11:]
    return CorpusNgram.build(answers.tolist(), order=3)


def test_a_copying_branch_grows_past_its_length_alone_and_stays_lossless():
    """The tiny Llama's greedy text loops, so it copies its context: a branch accepted whole at
    its full length runs alone and doubles up to copy_tokens (4 -> 8 -> 16; a match's continuation
    ends where the context does), in fewer steps than a branch held at 4, with the same tokens as
    plain decoding."""
    target = tiny_target("llama")
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 80, eos_token_id=[])
    runs = {}
    for copy in (0, 16):
        hybrid = HybridHead(perturbed_of("medusa", target), max_tokens=4, copy_tokens=copy)
        gen = hs.SpeculativeGenerator(target, hybrid, tree="tree8")
        out = gen.generate(prompts, 80, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences)
        runs[copy] = (out, hybrid.stats, verified_bounds(gen.tree_settings()))
    (held, _, held_bounds), (grown, grown_stats, grown_bounds) = runs[0], runs[16]
    assert max(held.accepted_per_step) <= 4 and held_bounds == (4, 12)  # tree8 is 3 deep
    assert 4 < max(grown.accepted_per_step) <= 16 and grown_bounds == (16, 16)  # a loop's period caps the match
    assert grown_stats.alone > 0 and len(grown.accepted_per_step) < len(held.accepted_per_step)


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_corpus_trees_are_accepted_and_decoding_stays_lossless(arch, kind):
    target = tiny_target(arch)
    corpus = _own_corpus(target)
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    options = {"tree": "tree8"} if kind == "medusa" else {"depth": 3, "top_k": 2, "total_tokens": 6}
    taus = {}
    for nodes in (0, 6):
        hybrid = HybridHead(perturbed_of(kind, target), max_tokens=4, corpus=corpus, corpus_nodes=nodes)
        gen = hs.SpeculativeGenerator(target, hybrid, **options)
        out = gen.generate(prompts, 40, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences)
        taus[nodes] = out.acceptance_length
        if nodes:
            assert hybrid.stats.corpus_added > 0 and hybrid.stats.corpus_accepted > 0
            lookup = gen.tree_settings()["lookup"]
            assert lookup["corpus_nodes"] == 6 and lookup["corpus_order"] == 3
            depth, size = verified_bounds(gen.tree_settings())
            assert depth >= 6 and size >= gen.tree_settings()["size"] + 4 + 6
    assert taus[6] > taus[0]
    # Sampled: reproducible with a seed, the corpus nodes verified beside sampled drafts.
    hybrid = HybridHead(perturbed_of(kind, target), max_tokens=4, corpus=corpus, corpus_nodes=6)
    gen = hs.SpeculativeGenerator(target, hybrid, **options)
    a, b = (gen.generate(prompts, 30, temperature=0.8, seed=5, eos_token_id=[]) for _ in range(2))
    assert torch.equal(a.sequences, b.sequences) and a.accepted_per_step == b.accepted_per_step


def test_shared_tree_takes_the_most_probable_paths_of_both_sources():
    head = [([5], 0.6), ([7], 0.2), ([5, 6], 0.3), ([7, 1], 0.2)]
    corpus = [([5], 0.5), ([8], 0.4), ([8, 9], 0.35), ([5, 6], 0.45)]
    # [5, 6] counts at the corpus's 0.45; the cut at 5 falls in the tie of [7] and [7, 1]: the parent first
    assert shared_tree(head, corpus, 5) == [[5], [5, 6], [8], [8, 9], [7]]
    assert shared_tree(head, corpus, 2) == [[5], [5, 6]]
    assert shared_tree(head, [], 3) == [[5], [5, 6], [7]]
    assert shared_tree([], [], 4) == []


def test_medusa_scores_its_nodes_by_the_product_of_its_probabilities_along_the_path():
    target = tiny_target("llama")
    head = perturbed_of("medusa", target)
    hidden = target(random_prompts()[:2]).hidden[:, -1]  # (2, D)
    tree = load_tree("tree8")
    proposal = head.propose(DraftState(hidden, torch.zeros(2, dtype=torch.long)), tree)
    with torch.no_grad():
        probs = [head.project(head.blocks[k](hidden), k).float().softmax(-1) for k in range(tree.max_depth)]  # (2, V) each
    for b in range(2):
        for i, path in enumerate(tree.paths):
            ranked = [probs[d][b].sort(descending=True).values[c] for d, c in enumerate(path)]
            expected = torch.stack(ranked).prod()
            assert torch.allclose(proposal.scores[b, i], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_a_head_and_the_corpus_sharing_a_budget_stay_lossless(arch, kind):
    """hybrid_nodes: the head's scored nodes (Medusa's static tree, EAGLE-3's dynamic one) and the
    corpus tree's compete for 6 nodes (the lookup branch of up to 4 beside them); greedy float32
    output equals plain decoding, and the corpus nodes are drafted and accepted."""
    target = tiny_target(arch)
    corpus = _own_corpus(target)
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    options = {"tree": "tree8"} if kind == "medusa" else {"depth": 3, "top_k": 2, "total_tokens": 6}
    hybrid = HybridHead(perturbed_of(kind, target), max_tokens=4, corpus=corpus, corpus_nodes=8, shared_nodes=6)
    gen = hs.SpeculativeGenerator(target, hybrid, **options)
    out = gen.generate(prompts, 40, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert hybrid.stats.corpus_added > 0 and hybrid.stats.corpus_accepted > 0
    assert gen.tree_settings()["lookup"]["shared_nodes"] == 6 and verified_bounds(gen.tree_settings())[1] >= 6 + 4


def test_a_shared_proposal_keeps_the_budget_and_a_head_without_scores_keeps_its_tree():
    target = tiny_target("llama")
    corpus = _own_corpus(target)
    hybrid = HybridHead(perturbed_of("medusa", target), max_tokens=4, corpus=corpus, corpus_nodes=8, shared_nodes=6)
    prompt = random_prompts()[:1]
    first = target(prompt)
    state = DraftState(first.hidden[:, -1], target.logits(first.hidden[:, -1]).argmax(-1), first.hidden, prompt, 0)
    proposal = hybrid.drafter().propose(state, load_tree("tree8"))  # 8 head candidates, 6 kept, a branch of <= 4
    assert 6 <= proposal.tokens.shape[1] <= 6 + 4 and proposal.draft_probs is None
    # Parallel drafting (one forward for K positions) scores nothing: its tree stays whole beside the corpus tree.
    parallel = hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=3)
    hybrid = HybridHead(parallel, max_tokens=4, corpus=corpus, corpus_nodes=6, shared_nodes=6)
    assert hybrid.shared_nodes == 0 and "shared_nodes" not in hybrid.lookup_settings()
    assert HybridHead(perturbed_of("medusa", target), 4, corpus=None, shared_nodes=6).lookup_settings().get("shared_nodes") is None


def test_the_heads_weight_moves_the_shared_budget_and_stays_lossless():
    """decode.hybrid_head_weight: the head's probabilities weighed x1000 take the shared places the corpus's
    held at x0.001 (the same step drafted both ways); decoding with a weight of 4 still equals plain decoding
    (float32); the weight reaches the hybrid from the recipe and is reported, and a weight <= 0 is refused."""
    target = tiny_target("llama")
    corpus = _own_corpus(target)
    prompt = random_prompts()[:1]
    first = target(prompt)
    state = DraftState(first.hidden[:, -1], target.logits(first.hidden[:, -1]).argmax(-1), first.hidden, prompt, 0)
    added = {}
    for weight in (0.001, 1000.0):
        hybrid = HybridHead(perturbed_of("medusa", target), max_tokens=4, corpus=corpus, corpus_nodes=8, shared_nodes=6,
                            head_weight=weight)
        proposal = hybrid.drafter().propose(state, load_tree("tree8"))
        assert 6 <= proposal.tokens.shape[1] <= 6 + 4
        added[weight] = hybrid.stats.corpus_added
    assert added[1000.0] < added[0.001], added
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    decode = DecodeConfig(prompt_lookup=4, corpus_draft=8, hybrid_nodes=6, hybrid_head_weight=4.0)
    hybrid = with_lookup(perturbed_of("eagle3", target), HybridSettings.from_decode(decode), corpus=corpus)
    assert hybrid.head_weight == 4.0 and hybrid.lookup_settings()["head_weight"] == 4.0
    gen = hs.SpeculativeGenerator(target, hybrid, depth=3, top_k=2, total_tokens=6)
    assert torch.equal(gen.generate(prompts, 40, eos_token_id=[]).sequences, ref.sequences)
    with pytest.raises(ValueError, match="must be > 0"):
        HybridHead(perturbed_of("medusa", target), 4, corpus=corpus, shared_nodes=6, head_weight=0.0)


def test_the_table_continues_the_heads_paths_and_decoding_stays_lossless():
    """decode.hybrid_continue: the table's best-first continuations after each of the head's paths, each
    extending a head path and scored no higher than it (the head's score times the table's); decoding with
    them in the shared budget equals plain decoding (float32, Medusa and EAGLE-3); the count reaches the
    hybrid from the recipe and is reported; it is off without a shared budget, and a negative count is refused."""
    target = tiny_target("llama")
    corpus = _own_corpus(target)
    prompt = random_prompts()[:1]
    first = target(prompt)
    state = DraftState(first.hidden[:, -1], target.logits(first.hidden[:, -1]).argmax(-1), first.hidden, prompt, 0)
    hybrid = HybridHead(perturbed_of("medusa", target), max_tokens=4, corpus=corpus, corpus_nodes=8, shared_nodes=6,
                        head_continue=3)
    drafter = hybrid.drafter()
    head = scored_paths(drafter.inner.propose(state, load_tree("tree8")))
    root, committed = int(state.root[0]), prompt[0].tolist()
    after = drafter.corpus.after(committed, root, head, 3)
    assert after and len(after) <= 3 * len(head)
    scores = {tuple(path): p for path, p in head}
    for path, p in after:
        cut = next(n for n in range(len(path) - 1, 0, -1) if tuple(path[:n]) in scores)  # the head path it continues
        assert p <= scores[tuple(path[:cut])] + 1e-12
    assert 6 <= hybrid.drafter().propose(state, load_tree("tree8")).tokens.shape[1] <= 6 + 4
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    decode = DecodeConfig(prompt_lookup=4, corpus_draft=8, hybrid_nodes=6, hybrid_continue=3)
    for kind, options in (("medusa", {"tree": "tree8"}), ("eagle3", {"depth": 3, "top_k": 2, "total_tokens": 6})):
        hybrid = with_lookup(perturbed_of(kind, target), HybridSettings.from_decode(decode), corpus=corpus)
        assert hybrid.head_continue == 3 and hybrid.lookup_settings()["head_continue"] == 3
        gen = hs.SpeculativeGenerator(target, hybrid, **options)
        assert torch.equal(gen.generate(prompts, 40, eos_token_id=[]).sequences, ref.sequences), kind
        assert "the table continuing the head's paths by ≤ 3 nodes" in _tree_text(gen.tree_settings())  # eval's report
    assert HybridHead(perturbed_of("medusa", target), 4, corpus=corpus, head_continue=3).head_continue == 0  # no shared budget
    with pytest.raises(ValueError, match="number of nodes >= 0"):
        HybridHead(perturbed_of("medusa", target), 4, corpus=corpus, shared_nodes=6, head_continue=-1)


def test_a_feature_heads_scored_paths_are_its_proposal():
    """What a shared budget reads from an EAGLE-3 drafter without the tree's tensors (`scored_paths`) is its
    proposal's nodes, paths and probabilities exactly (each from a fresh drafter at the sequence's start)."""
    target = tiny_target("llama")
    head = perturbed_of("eagle3", target)
    prompt = random_prompts()[:1]
    first = target(prompt, feature_layers=head.feature_layers)
    features = torch.cat([first.features[i] for i in head.feature_layers], dim=-1)
    state = DraftState(first.hidden[:, -1], target.logits(first.hidden[:, -1]).argmax(-1), features, prompt, 0)
    for spec in (DynamicTreeSpec(depth=3, top_k=3, total_tokens=7), DynamicTreeSpec(depth=2, top_k=6, total_tokens=10)):
        paths = head.drafter().scored_paths(state, spec)
        assert paths == scored_paths(head.drafter().propose(state, spec)) and len(paths) == spec.total_tokens


def test_the_head_grows_no_node_the_shared_budget_cannot_take():
    """In a shared budget the corpus's `shared_nodes` paths set a floor (`HybridDrafter._floor`): a head path
    scoring under the worst of them cannot take a place, and its children score no higher, so the EAGLE-3
    drafter stops growing there. The shared tree is the one drafted without the floor, at every state, and
    the floor saves draft forwards on some of them."""
    target = tiny_target("llama")
    corpus, head = _own_corpus(target), perturbed_of("eagle3", target)
    spec = DynamicTreeSpec(depth=3, top_k=3, total_tokens=8)
    forwards = []
    step = head.step

    def counted(*args, **kwargs):
        forwards[-1] += 1
        return step(*args, **kwargs)

    head.step = counted  # counts the draft layer's forwards; computes what it computed
    saved = 0
    for prompt in random_prompts(batch=6, seed=5).split(1):
        first = target(prompt, feature_layers=head.feature_layers)
        features = torch.cat([first.features[i] for i in head.feature_layers], dim=-1)
        state = DraftState(first.hidden[:, -1], target.logits(first.hidden[:, -1]).argmax(-1), features, prompt, 0)
        drafter = HybridHead(head, max_tokens=4, corpus=corpus, corpus_nodes=8, shared_nodes=6, head_weight=2.0).drafter()
        root = int(state.root[0])
        paths = drafter.corpus.scored(prompt[0].tolist(), root, 6)
        grown = []
        for floor in (0.0, drafter._floor(paths)):
            forwards.append(0)
            grown.append(drafter._shared(head.drafter().scored_paths(state, spec, floor), root, paths))
        assert grown[0] == grown[1] and grown[0]
        saved += forwards[-2] - forwards[-1]
    assert saved > 0


def test_lookup_and_corpus_without_a_head_equal_plain_decoding():
    target = tiny_target("llama")
    corpus = _own_corpus(target)
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    free = HybridHead(None, max_tokens=4, corpus=corpus, corpus_nodes=6)
    assert free.kind == "corpus+lookup" and free.feature_layers == ()
    gen = hs.SpeculativeGenerator(target, free)
    out = gen.generate(prompts, 40, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert out.acceptance_length > 1.2 and free.stats.corpus_accepted > 0
    lookup = gen.tree_settings()["lookup"]
    assert lookup["head"] is False and verified_bounds(gen.tree_settings()) == (6, 10)


def test_with_lookup_takes_the_heads_own_table_and_the_settings():
    target = tiny_target("llama")
    head = perturbed_of("medusa", target)
    assert with_lookup(head, HybridSettings()) is head
    settings = HybridSettings(prompt_lookup=4, lookup_copy=20, corpus_draft=6)
    plain_hybrid = with_lookup(head, settings)
    assert not plain_hybrid.uses_corpus and "corpus_nodes" not in plain_hybrid.lookup_settings()  # no table saved
    head.corpus = _own_corpus(target)
    hybrid = with_lookup(head, settings)
    assert hybrid.corpus is head.corpus and hybrid.copy_tokens == 20 and hybrid.corpus_nodes == 6
    assert not with_lookup(head, HybridSettings(prompt_lookup=4, corpus_draft=0)).uses_corpus  # decode.corpus_draft = 0: off
    # The recipe's decode section, read once: the same fields by the same names.
    recipe = DecodeConfig(prompt_lookup=7, lookup_ngram=3, lookup_copy=30, corpus_draft=5, hybrid_nodes=9, hybrid_sure=0.8)
    assert HybridSettings.from_decode(recipe) == HybridSettings(7, 3, 30, 5, 9, 0.8, ())
    assert with_lookup(head, HybridSettings.from_decode(recipe)).sure == 0.8
    free = with_lookup(None, HybridSettings.from_decode(recipe), head.corpus)
    assert free.head is None and free.kind == "corpus+lookup" and free.corpus_nodes == 5 and free.max_ngram == 3


@pytest.fixture(scope="module")
def chat_target(tmp_path_factory, smol_tokenizer):
    """A tiny float32 Llama with SmolLM2's tokenizer (a chat template)."""
    return Target.from_pretrained(save_tiny(tmp_path_factory.mktemp("hybrid") / "target", smol_tokenizer), dtype=torch.float32)


def test_eval_runs_the_corpus_methods_beside_the_head(chat_target, tmp_path):
    target = chat_target
    head = perturbed_heads(target)
    head.corpus = _own_corpus(target)
    out = tmp_path / "eval.json"
    decode = DecodeConfig(tree="tree8", prompt_lookup=4, corpus_draft=6)
    report = evaluate(target, {"medusa": head}, decode, EvalConfig(max_new_tokens=24, output=str(out), peers=False),
                      prompts=[PROMPT], warmup=False, progress=False)
    (res,) = report["results"]
    by = {e["label"]: e for e in res["methods"]}
    assert list(by) == ["plain", "medusa", "medusa+lookup", "lookup", "corpus+lookup"]
    assert all(e["greedy_match"]["matched"] == 1 for e in by.values())  # float32: every method equals plain
    table = out.with_suffix(".md").read_text()
    assert "+ corpus tree of 6 nodes (3-gram table of the training answers)" in table
    assert "no head + lookup branch ≤ 4 tokens" in table


def test_what_the_head_added_at_a_step_is_counted_by_hand():
    """LookupStats.head_*: the drafts a step accepted beyond the longest run of that step's head-free paths,
    read along the accepted drafts and the bonus token (which shows a pushed-out path would have gone further)."""
    hybrid = HybridHead(None, 4)
    drafter = hybrid.drafter()

    def credit(free, accepted, bonus):
        drafter.free = free
        drafter._credit_head(DraftState(None, torch.tensor([bonus]), committed=torch.tensor([[1, *accepted]]), start=20))

    credit([[5, 6, 7], [5, 8]], [5, 6, 9], 4)  # one draft past the corpus's [5, 6, 7]: +1
    credit([[5, 8]], [5, 8], 3)  # a head-free path went as far: 0
    credit([[5, 6, 7]], [5], 6)  # the bonus 6 shows the pushed-out [5, 6, ...] would have gone one further: -1
    credit([], [5, 6], 2)  # no head-free path: both drafts are the head's: +2
    s = hybrid.stats
    assert (s.head_steps, s.head_gained, s.head_lost, s.head_gain) == (4, 2, 1, 2)
    drafter._credit_head(DraftState(None, torch.tensor([3]), committed=torch.tensor([[1, 5]]), start=30))
    assert s.head_steps == 4  # nothing pending: the head sat the step out


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
def test_the_head_sits_out_the_steps_the_corpus_is_sure_of_and_decoding_stays_lossless(kind):
    """`sure`: where the corpus table's next token is at least that probable the head drafts
    nothing (the corpus tree and the branch alone); greedy float32 output equals plain decoding."""
    target = tiny_target("llama")
    corpus = _own_corpus(target)
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    options = {"tree": "tree8"} if kind == "medusa" else {"depth": 3, "top_k": 2, "total_tokens": 6}
    hybrid = HybridHead(perturbed_of(kind, target), max_tokens=4, corpus=corpus, corpus_nodes=6, shared_nodes=6, sure=0.5)
    gen = hs.SpeculativeGenerator(target, hybrid, **options)
    out = gen.generate(prompts, 40, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert hybrid.stats.sure > 0 and hybrid.stats.sure + hybrid.stats.alone < len(out.accepted_per_step) * 2
    assert gen.tree_settings()["lookup"]["sure"] == 0.5
    assert HybridHead(None, 4, corpus=corpus, sure=0.5).sure == 0.0  # no head, nothing to sit out


def test_a_head_that_sat_out_drafts_as_if_it_had_seen_every_step():
    """The steps an EAGLE-3 head sits out reach its drafter joined with the next one (`pending`):
    its cache then holds what it would have held, and its next tree is the same as a drafter's
    fed every step."""
    from headstart.decode.hybrid import _joined

    target = tiny_target("llama")
    head = perturbed_of("eagle3", target)
    states, make = [], head.drafter

    def recording():
        drafter = make()
        propose = drafter.propose
        drafter.propose = lambda state, spec: (states.append(state), propose(state, spec))[1]
        return drafter

    head.drafter = recording
    gen = hs.SpeculativeGenerator(target, head, depth=3, top_k=2, total_tokens=6)
    gen.generate(random_prompts()[:1], 30, eos_token_id=[])
    del head.drafter
    spec = gen.tree_spec
    assert len(states) > 6
    every = head.drafter()
    expected = [every.propose(s, spec) for s in states]
    for k in (2, len(states) - 3):
        skipping = head.drafter()
        for s in states[:k]:
            skipping.propose(s, spec)
        got = skipping.propose(_joined(_joined(states[k], states[k + 1]), states[k + 2]), spec)  # two steps sat out
        want = expected[k + 2]
        assert torch.equal(got.tokens, want.tokens) and torch.equal(got.tree.parent, want.tree.parent)
        assert torch.allclose(got.scores, want.scores, rtol=1e-4, atol=1e-6)


def test_an_eagle_head_drafts_the_hybrid_tree_whole_in_a_hybrid_and_its_own_alone():
    """decode.hybrid_tree: the tree an EAGLE head drafts inside a hybrid, whole (over the command line's
    depth/top_k/total_tokens, which are the head's alone); a static head ignores it; decoding stays
    lossless in float32; a list that is not [depth, top_k, total_tokens] is refused by the recipe."""
    from headstart.config import RecipeError
    from headstart.decode.tune import tree_options
    from headstart.recipe import load_recipe

    target = tiny_target("llama")
    head = perturbed_of("eagle3", target)
    head.corpus = _own_corpus(target)
    decode = DecodeConfig(prompt_lookup=4, corpus_draft=6, hybrid_nodes=6, hybrid_tree=[2, 3, 5], depth=4, top_k=2, total_tokens=6)
    hybrid = with_lookup(head, HybridSettings.from_decode(decode))
    assert (hybrid.hybrid_tree.depth, hybrid.hybrid_tree.top_k, hybrid.hybrid_tree.total_tokens) == (2, 3, 5)
    assert tree_options(hybrid, decode, {"depth"}) == ({"depth": 2, "top_k": 3, "total_tokens": 5}, "recipe")
    assert tree_options(hybrid, decode, {"hybrid_tree"})[1] == "command"
    assert tree_options(head, decode, {"depth"})[0]["depth"] == 4  # the head alone: its own tree, the command's depth
    assert with_lookup(perturbed_heads(target), HybridSettings.from_decode(decode)).hybrid_tree is None  # Medusa: static
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, 40, eos_token_id=[])
    gen = hs.SpeculativeGenerator(target, hybrid, **tree_options(hybrid, decode)[0])
    assert torch.equal(gen.generate(prompts, 40, eos_token_id=[]).sequences, ref.sequences)
    assert load_recipe(None, ["decode.hybrid_tree=[2, 6, 10]"]).decode.hybrid_tree == [2, 6, 10]
    for bad in ("[2, 6]", "[2, 0, 10]"):
        with pytest.raises(RecipeError, match="hybrid_tree"):
            load_recipe(None, [f"decode.hybrid_tree={bad}"])
