import pytest
import torch

import headstart as hs
from headstart.decode.contract import Proposal
from headstart.decode.plain import greedy_generate
from headstart.decode.tree import TreeError
from headstart.decode.verify import acceptance_length
from tests.helpers import OracleHead, perturbed_heads, tiny_target

TREES = ["chain1", "chain3", "tree8", "tree16", [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0)]]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t if isinstance(t, str) else "custom")
def test_greedy_speculative_equals_plain_on_every_arch(arch, tree):
    target = tiny_target(arch)
    prompts = torch.randint(0, 128, (2, 11), generator=torch.Generator().manual_seed(3))
    ref = greedy_generate(target, prompts, max_new_tokens=30, eos_token_id=[])
    hf = target.model.generate(
        prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=30, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    assert torch.equal(ref.sequences, hf)
    for heads in (hs.heads.build("medusa", target, num_heads=3), perturbed_heads(target)):
        out = hs.SpeculativeGenerator(target, heads, tree=tree).generate(prompts, max_new_tokens=30, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences)
        assert out.acceptance_length >= 1.0


def test_oracle_head_accepts_whole_depth_every_step():
    target = tiny_target("llama")
    prompt = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(5))
    ref = greedy_generate(target, prompt, max_new_tokens=41, eos_token_id=[])
    cont = ref.sequences[0, 9:].tolist()
    oracle = OracleHead(cont, 9)
    gen = hs.SpeculativeGenerator(target, oracle, tree=[(0,), (1,), (0, 0), (0, 1), (0, 0, 0)])
    out = gen.generate(prompt, max_new_tokens=41, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    # 1 token from prefill, then 4 per step (3 drafts + bonus): 40 tokens in exactly 10 steps.
    assert out.accepted_per_step == [3] * 10
    assert out.acceptance_length == 4.0


def test_always_wrong_head_gives_tau_one():
    target = tiny_target("qwen2")
    prompt = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(5))
    ref = greedy_generate(target, prompt, max_new_tokens=20, eos_token_id=[])
    cont = ref.sequences[0, 9:].tolist()

    class Wrong(OracleHead):
        def propose(self, state, tree):
            p = super().propose(state, tree)
            return Proposal((p.tokens + 1) % 128 if True else p.tokens, tree)

    out = hs.SpeculativeGenerator(target, Wrong(cont, 9), tree="chain3").generate(prompt, 20, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert out.accepted_per_step == [0] * 19 and out.acceptance_length == 1.0


def test_eos_stops_and_drops_tokens_after_it():
    target = tiny_target("llama")
    prompt = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(5))
    ref = greedy_generate(target, prompt, max_new_tokens=30, eos_token_id=[])
    cont = ref.sequences[0, 9:].tolist()
    eos = cont[12]
    first = cont.index(eos)
    out = hs.SpeculativeGenerator(target, OracleHead(cont, 9), tree="chain3").generate(prompt, 30, eos_token_id=eos)
    assert out.sequences[0, 9:].tolist() == cont[: first + 1]
    plain = greedy_generate(target, prompt, max_new_tokens=30, eos_token_id=eos)
    assert torch.equal(plain.sequences, out.sequences)


def test_max_new_tokens_is_exact():
    target = tiny_target("llama")
    prompt = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(5))
    cont = greedy_generate(target, prompt, max_new_tokens=40, eos_token_id=[]).sequences[0, 9:].tolist()
    for n in (1, 2, 5, 7):
        out = hs.SpeculativeGenerator(target, OracleHead(cont, 9), tree="chain3").generate(prompt, n, eos_token_id=[])
        assert out.sequences[0, 9:].tolist() == cont[:n]


def test_prompt_longer_than_context_is_a_clear_error():
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=3)
    prompt = torch.zeros(1, 250, dtype=torch.long)
    with pytest.raises(ValueError, match="exceeds the target's context of 256"):
        hs.SpeculativeGenerator(target, heads).generate(prompt, max_new_tokens=10)
    with pytest.raises(ValueError, match="exceeds the target's context"):
        greedy_generate(target, prompt, max_new_tokens=10)


def test_bad_arguments_are_clear_errors():
    target = tiny_target("llama")
    heads = hs.heads.build("medusa", target, num_heads=2)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        hs.SpeculativeGenerator(target, heads, tree="chain2").generate(torch.zeros(1, 3, dtype=torch.long), temperature=-1)
    with pytest.raises(ValueError, match="3 deep but the head drafts only 2"):
        hs.SpeculativeGenerator(target, heads, tree="chain3")
    with pytest.raises(TreeError, match="has no parent"):
        hs.SpeculativeGenerator(target, heads, tree=[(0,), (1, 0)])
    with pytest.raises(TypeError, match="DraftHead protocol"):
        hs.SpeculativeGenerator(target, object())


def test_tune_tree_picks_a_tree_the_generator_uses(tmp_path):
    from headstart.decode.tree import HeldOutAccuracy
    from headstart.decode.tune import tune_tree
    from headstart.heads.results import set_default_tree

    target = tiny_target("llama")
    head = perturbed_heads(target)
    head.held_out = HeldOutAccuracy([[0.7, 0.1, 0.05], [0.5, 0.1, 0.05], [0.3, 0.1, 0.05]])
    tree, table = tune_tree(target, head, sizes=(2, 4, 8), past_len=32)
    assert tree.size in (2, 4, 8) and set(table["sizes"]) == {2, 4, 8} and table["kind"] == "static"
    head.save_pretrained(tmp_path / "h", target)
    set_default_tree(head, tree, folder=tmp_path / "h", tuning=table)
    loaded = hs.load_heads(tmp_path / "h", target=target)
    assert loaded.default_tree == tree
    gen = hs.SpeculativeGenerator(target, loaded)  # tree="auto" takes the stored tree
    assert gen.tree.paths == tree.paths


def test_ragged_cache_commits_paths_per_row_and_squeezes_holes_out():
    from transformers import DynamicCache

    from headstart.decode.cache import RaggedCache

    def ids(t):  # (B, T) markers -> (B, H=1, T, D=1) keys or values
        return t[:, None, :, None].float()

    # Two rows, one layer; a slot's key holds 100 * row + its position in the row (-1: padding).
    prefix = torch.tensor([[-1, 0, 1], [0, 1, 2]])  # row 0 left-padded
    cache = DynamicCache()
    cache.update(ids(prefix + torch.tensor([[0], [100]])), ids(prefix), 0)
    slots = RaggedCache(cache, prefix >= 0, prefix.clamp(min=0))
    # A verification appended 4 tree inputs per row; row 0 keeps inputs [0, 2], row 1 keeps [0, 1, 3].
    tree = torch.tensor([[10, 11, 12, 13], [110, 111, 112, 113]])
    cache.update(ids(tree), ids(tree), 0)
    slots.commit(torch.tensor([[0, 2, 2], [0, 1, 3]]), torch.tensor([2, 3]), torch.tensor([2, 3]))
    keys = cache.layers[0].keys[:, 0, :, 0].long()
    assert keys[0, 3:5].tolist() == [10, 12] and keys[1, 3:].tolist() == [110, 111, 113]
    assert slots.valid.tolist() == [[False, True, True, True, True, False], [True] * 6]
    assert slots.positions[0, 3:5].tolist() == [2, 3] and slots.positions[1, 3:].tolist() == [3, 4, 5]
    slots.compact(longest=6)  # nothing to squeeze in row 1: the cache keeps 6 slots, row 0 right-aligned
    keys = cache.layers[0].keys[:, 0, :, 0].long()
    assert keys[0, 2:].tolist() == [0, 1, 10, 12] and slots.valid[0].tolist() == [False, False, True, True, True, True]
    assert slots.positions[0, 2:].tolist() == [0, 1, 2, 3]
    slots.select_rows(torch.tensor([0]))  # row 1 finished
    slots.compact(longest=4)
    assert cache.layers[0].keys[0, 0, :, 0].long().tolist() == [0, 1, 10, 12] and slots.valid.all()
    assert cache.get_seq_length() == slots.length == 4


def test_acceptance_length_counts_the_bonus_token():
    """τ = mean of (accepted + 1) per step, by hand; plain decoding (no step) is 1.0."""
    assert acceptance_length([0, 2, 3, 1]) == (1 + 3 + 4 + 2) / 4
    assert acceptance_length([0, 0]) == 1.0 and acceptance_length([]) == 1.0
