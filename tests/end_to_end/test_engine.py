"""The engine beyond static greedy trees: dynamic trees, draft models, ragged batches, stopping, streaming."""

from __future__ import annotations

import pytest
import torch
import transformers as tr

import headstart as hs
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.draft_model import DraftModelProposer, VocabularyMismatch
from headstart.decode.dynamic import DynamicTreeSpec, select_dynamic_tree
from headstart.decode.plain import greedy_generate
from headstart.target import Target
from tests.helpers import VOCAB, tiny_target


class DynamicOracle:
    """Grows a random tree each step; one random-depth path is the target's greedy continuation."""

    kind = "oracle"
    dynamic = True

    def __init__(self, continuation: list[int], prompt_len: int, seed: int = 0):
        self.cont, self.prompt_len = continuation, prompt_len
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        pos = state.start + state.committed.shape[1] - self.prompt_len  # index of the root in cont
        assert self.cont[pos] == int(state.root[0])
        good_depth = int(torch.randint(0, spec.depth + 1, (1,), generator=self.gen))
        parents, tokens, scores = [], [], []
        prev = -1
        for d in range(good_depth):  # the right path
            parents.append(prev)
            j = pos + 1 + d
            tokens.append(self.cont[j] if j < len(self.cont) else 0)
            scores.append(-0.1 * (d + 1))
            prev = len(tokens) - 1
        wrong = int(torch.randint(1, spec.total_tokens + 1, (1,), generator=self.gen))  # trees of varying size
        for _ in range(wrong):  # wrong branches hanging off random nodes
            parent = int(torch.randint(-1, len(tokens), (1,), generator=self.gen))
            parents.append(parent)
            tokens.append(int(torch.randint(0, VOCAB, (1,), generator=self.gen)))
            scores.append((scores[parent] if parent >= 0 else 0.0) - float(torch.rand(1, generator=self.gen)) - 0.2)
        kept, tree, _ = select_dynamic_tree(torch.tensor(parents), torch.tensor(scores), torch.tensor(tokens), spec.total_tokens)
        return Proposal(kept[None], tree)


def test_dynamic_trees_equal_greedy_on_every_arch(arch):
    target = tiny_target(arch)
    prompt = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(4))
    ref = greedy_generate(target, prompt, 40, eos_token_id=[])
    cont = ref.sequences[0, 10:].tolist()
    gen = hs.SpeculativeGenerator(target, DynamicOracle(cont, 10), depth=4, top_k=3, total_tokens=10)
    out = gen.generate(prompt, 40, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)
    assert out.acceptance_length > 1.5
    assert gen.tree_settings() == {"kind": "dynamic", "depth": 4, "top_k": 3, "size": 10}


def _ragged(n_rows=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 11, 8, 3][:n_rows]
    width = max(lengths)
    ids = torch.zeros(n_rows, width, dtype=torch.long)
    mask = torch.zeros(n_rows, width, dtype=torch.long)
    for i, n in enumerate(lengths):  # left padding, as HF batches prompts for generation
        ids[i, width - n :] = torch.randint(1, VOCAB, (n,), generator=g)
        mask[i, width - n :] = 1
    return ids, mask, lengths


@pytest.mark.parametrize("tree", ["tree8", "dynamic"])
def test_ragged_batch_equals_rows_alone(tree):
    target = tiny_target("qwen2")
    ids, mask, lengths = _ragged()
    if tree == "dynamic":
        heads = DraftModelProposer(tiny_target("qwen2", seed=1), target, depth=3, top_k=2, total_tokens=6)
    else:
        heads = hs.heads.build("medusa", target, num_heads=3)
    gen = hs.SpeculativeGenerator(target, heads, tree=tree if tree != "dynamic" else "auto")
    out = gen.generate(ids, 20, attention_mask=mask, eos_token_id=[])
    for i, n in enumerate(lengths):
        alone = greedy_generate(target, ids[i : i + 1, ids.shape[1] - n :], 20, eos_token_id=[])
        assert out.sequences[i, ids.shape[1] - n : ids.shape[1] + 20].tolist() == alone.sequences[0].tolist()
    assert out.new_lengths == [20] * 4 and out.finish_reasons == ["length"] * 4


class StaticOracle:
    """One row's static drafter: the target's greedy continuation down to a random depth, wrong below."""

    kind = "oracle"
    needs_features = True  # for state.start and state.committed: where the row stands

    def __init__(self, continuation: list[int], prompt_len: int, seed: int = 0):
        self.cont, self.prompt_len = continuation, prompt_len
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, state: DraftState, tree) -> Proposal:
        pos = state.start + state.committed.shape[1] - self.prompt_len  # index of the root in cont
        assert self.cont[pos] == int(state.root[0])
        good_depth = int(torch.randint(0, tree.max_depth + 1, (1,), generator=self.gen))
        tokens = []
        for d, c in zip(tree.depth[1:].tolist(), tree.choice[1:].tolist()):
            j = pos + d
            right = self.cont[j] if j < len(self.cont) else 0
            tokens.append(right if c == 0 and d <= good_depth else (right + 1 + c) % VOCAB)
        return Proposal(torch.tensor([tokens]), tree)


class RowOracles:
    """A head whose `drafter()` hands the rows of a batch, in order, an oracle of their own continuation.

    Each row accepts a different random number of drafts at each step, so the batch cache gets holes.
    """

    kind = "oracle"

    def __init__(self, continuations: list[list[int]], prompt_lens: list[int], dynamic: bool):
        oracle = DynamicOracle if dynamic else StaticOracle
        self.dynamic = dynamic
        self.needs_features = True
        self._rows = iter([oracle(c, n, seed=i) for i, (c, n) in enumerate(zip(continuations, prompt_lens))])

    def drafter(self):
        return next(self._rows)

    def propose(self, state, tree):
        raise AssertionError("the engine drafts through one drafter per row")


def _ragged_batch(lengths, seed=0):
    """Prompts of the given lengths, left-padded into one batch with an attention mask, and each alone."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    alone = []
    for i, n in enumerate(lengths):
        alone.append(torch.randint(1, VOCAB, (1, n), generator=g))
        ids[i, width - n :], mask[i, width - n :] = alone[-1][0], 1
    return ids, mask, alone


@pytest.mark.parametrize("head", ["medusa", "static_oracle", "dynamic_oracle"])
def test_batch_of_four_equals_each_row_decoded_alone(arch, head):
    target = tiny_target(arch)
    lengths, new = [4, 19, 9, 13], 24
    ids, mask, alone = _ragged_batch(lengths)
    refs = [greedy_generate(target, p, new, eos_token_id=[]).sequences[0].tolist() for p in alone]
    conts = [r[n:] for r, n in zip(refs, lengths)]
    if head == "medusa":  # one propose call drafts for all rows
        gen = hs.SpeculativeGenerator(target, hs.heads.build("medusa", target, num_heads=3), tree="tree8")
    elif head == "static_oracle":
        gen = hs.SpeculativeGenerator(target, RowOracles(conts, lengths, dynamic=False), tree="tree16")
    else:
        heads = RowOracles(conts, lengths, dynamic=True)
        gen = hs.SpeculativeGenerator(target, heads, depth=4, top_k=3, total_tokens=10)
    out = gen.generate(ids, new, attention_mask=mask, eos_token_id=[])
    for i, n in enumerate(lengths):
        assert out.sequences[i, ids.shape[1] - n : ids.shape[1] + new].tolist() == refs[i], (arch, head, i)
    assert out.new_lengths == [new] * 4 and out.finish_reasons == ["length"] * 4
    # Holes left by rows that accepted fewer drafts than others are squeezed out: the cache stays
    # within the longest prompt + the longest output + one tree.
    size = gen.tree_settings()["size"]
    assert out.cache_slots <= max(lengths) + new + size
    if head != "medusa":
        assert out.acceptance_length > 1.5


@pytest.mark.parametrize("dynamic", [False, True])
def test_rows_finishing_early_leave_the_others_unchanged(dynamic):
    target = tiny_target("mistral")
    lengths, new = [7, 3, 12, 5], 30
    ids, mask, alone = _ragged_batch(lengths, seed=1)
    refs = [greedy_generate(target, p, new, eos_token_id=[]).sequences[0, n:].tolist() for p, n in zip(alone, lengths)]
    eos = refs[1][4]  # row 1 stops after 5 tokens; any row whose text holds that token stops there too
    want = [r[: r.index(eos) + 1] if eos in r else r for r in refs]
    assert len(want[1]) <= 5 and any(len(w) == new for w in want)
    heads = RowOracles(refs, lengths, dynamic=dynamic)
    kwargs = {"depth": 3, "top_k": 2, "total_tokens": 6} if dynamic else {"tree": "tree8"}
    out = hs.SpeculativeGenerator(target, heads, **kwargs).generate(ids, new, attention_mask=mask, eos_token_id=eos)
    for i, w in enumerate(want):  # the input as given, then each row's new tokens (HF generate's layout)
        assert out.sequences[i, ids.shape[1] : ids.shape[1] + len(w)].tolist() == w
        assert out.new_lengths[i] == len(w)
    assert torch.equal(out.sequences[:, : ids.shape[1]], ids)
    assert out.finish_reasons == ["eos" if len(w) < new or w[-1] == eos else "length" for w in want]
    # Padding after a finished row is the pad id, as HF generate returns it.
    assert out.sequences.shape[1] == ids.shape[1] + max(len(w) for w in want)


def test_batched_sampling_runs_and_is_reproducible():
    target = tiny_target("gemma3")
    ids, mask, _ = _ragged_batch([6, 2, 10, 4], seed=2)
    heads = hs.heads.build("medusa", target, num_heads=3)
    gen = hs.SpeculativeGenerator(target, heads, tree="tree8")
    runs = [gen.generate(ids, 16, temperature=0.8, seed=s, attention_mask=mask, eos_token_id=[]) for s in (3, 3, 4)]
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    assert not torch.equal(runs[0].sequences, runs[2].sequences)
    assert runs[0].new_lengths == [16] * 4
    # EAGLE-style dynamic drafting with per-row drafters samples too.
    eagle = hs.SpeculativeGenerator(target, hs.heads.build("eagle", target), depth=3, top_k=2, total_tokens=5)
    a, b = (eagle.generate(ids, 12, temperature=0.8, seed=5, attention_mask=mask, eos_token_id=[]) for _ in range(2))
    assert torch.equal(a.sequences, b.sequences) and a.new_lengths == [12] * 4


@pytest.mark.parametrize("top_k", [1, 3])
def test_draft_model_proposer_is_exact_and_a_copy_of_the_target_accepts_everything(top_k):
    target = tiny_target("llama")
    prompt = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
    ref = greedy_generate(target, prompt, 30, eos_token_id=[])
    for draft, full in ((tiny_target("llama", seed=5), False), (tiny_target("llama"), True)):
        proposer = DraftModelProposer(draft, target, depth=4, top_k=top_k)
        out = hs.SpeculativeGenerator(target, proposer).generate(prompt, 30, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences)
        if full and top_k == 1:  # the same weights draft exactly the target's continuation
            assert all(a == 4 for a in out.accepted_per_step[:-1])
        elif full:  # a beam of 3 may prune the greedy path on near-flat tiny-model logits, rarely
            assert out.acceptance_length > 4.0


def test_draft_model_with_another_vocabulary_is_refused(smol_tokenizer):
    target = tiny_target("llama")
    torch.manual_seed(0)
    other = Target(tr.AutoModelForCausalLM.from_config(tr.LlamaConfig(
        vocab_size=VOCAB * 2, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2)), name="other")
    with pytest.raises(VocabularyMismatch, match="share a vocabulary"):
        DraftModelProposer(other, target)


def smol_shaped(tokenizer) -> Target:
    torch.manual_seed(0)
    config = tr.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return Target(model, tokenizer, name="tiny-smol-vocab")


class Recorder:
    """An HF-style streamer: put(prompt), put(tokens)..., end()."""

    def __init__(self):
        self.calls, self.ended = [], False

    def put(self, value):
        self.calls.append(value.reshape(-1).tolist())

    def end(self):
        self.ended = True


def test_stop_strings_eos_and_streaming(smol_tokenizer):
    target = smol_shaped(smol_tokenizer)
    prompt = torch.tensor([smol_tokenizer.encode("The tide comes in and")])
    t = prompt.shape[1]
    ref = greedy_generate(target, prompt, 40, eos_token_id=[]).sequences[0, t:].tolist()
    heads = hs.heads.build("medusa", target, num_heads=3)
    gen = hs.SpeculativeGenerator(target, heads, tree="tree8")
    # A stop string taken from the middle of the reference text: output ends right after it.
    text = smol_tokenizer.decode(ref)
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    cut = next(i for i in range(1, 41) if stop in smol_tokenizer.decode(ref[:i]))
    out = gen.generate(prompt, 40, eos_token_id=[], stop_strings=[stop])
    assert out.sequences[0, t:].tolist() == ref[:cut]
    assert out.finish_reasons == ["stop_string"]
    # Several EOS ids: the first one that appears ends the row, and is kept.
    eos = [ref[12], ref[25]]
    first = min(ref.index(e) for e in eos)
    out = gen.generate(prompt, 40, eos_token_id=eos)
    assert out.sequences[0, t:].tolist() == ref[: first + 1] and out.finish_reasons == ["eos"]
    # Streaming: the prompt, then the new tokens in order, then end(); never a token past the stop.
    rec = Recorder()
    out = gen.generate(prompt, 40, eos_token_id=[], stop_strings=[stop], streamer=rec)
    assert rec.calls[0] == prompt[0].tolist() and rec.ended
    assert sum(rec.calls[1:], []) == ref[:cut]
    # HF's own TextIteratorStreamer works with it.
    streamer = tr.TextIteratorStreamer(smol_tokenizer, skip_prompt=True)
    gen.generate(prompt, 20, eos_token_id=[], streamer=streamer)
    assert "".join(streamer) == smol_tokenizer.decode(ref[:20])
    with pytest.raises(ValueError, match="batch of one"):
        gen.generate(prompt.expand(2, -1), 5, streamer=Recorder())


def test_stop_strings_end_each_row_of_a_batch_as_alone(smol_tokenizer):
    target = smol_shaped(smol_tokenizer)
    prompts = [torch.tensor([smol_tokenizer.encode(p)]) for p in ("The tide comes in and", "Hello", "Once upon a")]
    first = greedy_generate(target, prompts[0], 30, eos_token_id=[]).sequences[0, prompts[0].shape[1] :].tolist()
    stop = smol_tokenizer.decode(first)[10:13]  # ends row 0 early; the others may or may not meet it
    width = max(p.shape[1] for p in prompts)
    ids, mask = torch.zeros(3, width, dtype=torch.long), torch.zeros(3, width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - p.shape[1] :], mask[i, width - p.shape[1] :] = p[0], 1
    gen = hs.SpeculativeGenerator(target, hs.heads.build("medusa", target, num_heads=3), tree="tree8")
    out = gen.generate(ids, 30, attention_mask=mask, eos_token_id=[], stop_strings=[stop])
    assert out.finish_reasons[0] == "stop_string"
    for i, p in enumerate(prompts):
        alone = gen.generate(p, 30, eos_token_id=[], stop_strings=[stop])
        n = p.shape[1]
        assert out.sequences[i, width : width + out.new_lengths[i]].tolist() == alone.sequences[0, n:].tolist()
        assert out.finish_reasons[i] == alone.finish_reasons[0]


def test_step_records_rebuild_the_output():
    target = tiny_target("llama")
    prompt = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(1))
    heads = hs.heads.build("medusa", target, num_heads=3)
    out = hs.SpeculativeGenerator(target, heads, tree="tree8").generate(prompt, 25, eos_token_id=[], record_steps=True)
    steps = out.steps[0]
    rebuilt = [int(out.sequences[0, 7])]
    for s in steps:
        rebuilt += s["accepted"] + [s["bonus"]]
        assert s["accepted_count"] == len(s["accepted"]) and s["rejected"] != s["bonus"]
    assert rebuilt[:25] == out.sequences[0, 7:].tolist()


def test_show_drafts_view_is_readable_without_colour(smol_tokenizer):
    from headstart.decode.steps import format_steps

    target = smol_shaped(smol_tokenizer)
    prompt = torch.tensor([smol_tokenizer.encode("Once upon a time")])
    heads = hs.heads.build("medusa", target, num_heads=3)
    out = hs.SpeculativeGenerator(target, heads, tree="tree8").generate(prompt, 20, eos_token_id=[], record_steps=True)
    first = int(out.sequences[0, prompt.shape[1]])
    plain = format_steps(smol_tokenizer, first, out.steps[0], color=False)
    body = plain.split("\n")[0]
    assert "\033[" not in plain and body.count("⟦") == len(out.steps[0])
    coloured = format_steps(smol_tokenizer, first, out.steps[0], color=True)
    assert "\033[32m" in coloured
    # Dropping the rejected guesses gives back the answer, token by token.
    import re

    rebuilt = re.sub(r"⟦(?:\+|.*? ✗ → )(.*?)⟧", r"\1", body, flags=re.S)
    pieces = []
    for s in out.steps[0]:
        pieces.append(smol_tokenizer.decode(s["accepted"]) + smol_tokenizer.decode([s["bonus"]]))
    assert rebuilt == smol_tokenizer.decode([first]) + "".join(pieces)


@pytest.mark.parametrize("kind", ["eagle", "eagle3"])
def test_eagle_heads_decode_a_ragged_batch_row_by_row_exactly(kind):
    target = tiny_target("gemma3")
    draft_vocab = torch.arange(0, VOCAB, 2) if kind == "eagle3" else None
    head = hs.heads.build(kind, target, draft_vocab=draft_vocab)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # as if trained: drafts neither all right nor all wrong
        for p in head.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
    lengths, new = [3, 14, 8], 20
    ids, mask, alone = _ragged_batch(lengths, seed=4)
    gen = hs.SpeculativeGenerator(target, head.eval(), depth=4, top_k=3, total_tokens=10)
    out = gen.generate(ids, new, attention_mask=mask, eos_token_id=[])
    for i, (p, n) in enumerate(zip(alone, lengths)):
        ref = greedy_generate(target, p, new, eos_token_id=[]).sequences[0].tolist()
        assert out.sequences[i, ids.shape[1] - n : ids.shape[1] + new].tolist() == ref
        solo = gen.generate(p, new, eos_token_id=[])
        assert solo.sequences[0].tolist() == ref
