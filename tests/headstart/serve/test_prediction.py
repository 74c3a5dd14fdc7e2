"""serve/prediction.py without an engine: headstart's prediction along a given text (`along_text_steps`, the
text vLLM served teacher-forced through headstart's drafter) by hand with a head that drafts the root
again, and equal to the decoding loop's own steps along its own float32 text for every draft shape vLLM
serves (P-EAGLE's k slots, EAGLE-3's chain, Medusa's chain). The engine itself is tests/end_to_end/test_vllm.py's."""

from __future__ import annotations

import pytest
import torch

import headstart as hs
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.corpus import CorpusNgram
from headstart.decode.plain import greedy_generate
from headstart.heads.eagle3 import Eagle3Options
from headstart.serve.check import headstart_side
from headstart.serve.prediction import along_text_acceptance, along_text_steps, learning_counts
from headstart.serve.proposer import along_text_counts
from tests.helpers import batch_of, fit_head, tiny_target

K = 3
NEW = 24  # new tokens per prompt


class RepeatHead:
    """Drafts the root token again at every node: its acceptance along a text can be counted by hand."""

    kind = "repeat"

    def propose(self, state: DraftState, tree) -> Proposal:
        return Proposal(tokens=state.root[:, None].expand(-1, tree.size), tree=tree)


def test_along_text_by_hand(one_thread):
    """Drafts proposed from each last accepted position, the longest prefix the text continues with
    accepted, the text's next token the bonus and next root, steps until the text is covered."""
    target, prompt = tiny_target("llama"), [3, 9, 4]
    # root 1 drafts 1 1 1: all accepted; root 2 drafts 2 2 2 against 3 3 4: none; root 3 drafts 3 3 3
    # against 3 4 (and what follows): one; the bonus 4 ends the text.
    assert along_text_steps(target, RepeatHead(), prompt, [1, 1, 1, 1, 2, 3, 3, 4], K) == [3, 0, 1]
    assert along_text_steps(target, RepeatHead(), prompt, [1, 1, 1, 1, 1], K) == [3]  # the bonus is the text's last token
    assert along_text_steps(target, RepeatHead(), prompt, [7], K) == []  # the first token ends it: nothing drafted
    # A last step whose drafts run past the text's end is checked against the target's own next tokens,
    # as both engines verify drafts beyond the stop and count them.
    text = [1, 1, 1, 1, 1, 1]
    after = greedy_generate(target, torch.tensor([prompt + text]), 2, eos_token_id=[]).sequences[0, -2:].tolist()
    past_end = 1 + (after[0] == 1) + (after[0] == 1 and after[1] == 1)
    assert along_text_steps(target, RepeatHead(), prompt, text, K) == [3, past_end]
    stats = along_text_acceptance(target, RepeatHead(), [prompt, prompt], [[1, 1, 1, 1, 2, 3, 3, 4], [1, 1, 1, 1, 1]], K)
    assert (stats["drafts"], stats["draft_tokens"], stats["accepted"], stats["accepted_per_pos"]) == (4, 12, 7, [3, 2, 2])
    assert stats["mean_acceptance_length"] == pytest.approx(1 + 7 / 4)  # bonus counted, per draft step


HEADS = {  # the draft shapes vLLM serves: P-EAGLE's k slots, EAGLE-3's chain of k, Medusa's chain of k
    "p-eagle": lambda target: hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=K),
    "eagle3": lambda target: hs.heads.build("eagle3", target),
    "medusa": lambda target: hs.heads.build("medusa", target, num_heads=K),
}


@pytest.mark.parametrize("kind", list(HEADS))
def test_along_own_text_equals_loop_in_float32(kind, one_thread):
    """Along the loop's own greedy float32 text, the prediction along a text is the loop's: the same
    drafts accepted at every step of every prompt, hence the same acceptance figures."""
    target = tiny_target("llama")
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 128, (6,), generator=g).tolist() for _ in range(4)]
    continuations = [greedy_generate(target, torch.tensor([p]), NEW, eos_token_id=[]).sequences[0] for p in prompts]
    head = HEADS[kind](target)  # taught half the prompts: partial acceptance
    fit_head(head, target, [batch_of(seq[None]) for seq in continuations[:2]], Eagle3Options(ttt_steps=K), 150)
    ours = headstart_side(target, head, prompts, K, NEW, eos=[])
    texts = ours["plain"]["outputs"]
    assert ours["head"]["outputs"] == texts  # lossless: the loop's text is the target's greedy text
    loop = ours["acceptance"]
    assert 0 < loop["accepted"] < loop["draft_tokens"], loop  # accepts some drafts, not all
    along = along_text_acceptance(target, head, prompts, texts, K)
    assert along == loop


def test_learning_counts_accept_what_earlier_answers_wrote():
    """The corpus proposer along a stream of requests: frozen, each request counts as it does alone; learning,
    a repeated answer is drafted from its first occurrence (more accepted), and the first request is unchanged."""
    corpus = CorpusNgram.build([[1, 2, 3, 4]], order=3)
    answer = [50, 51, 52, 53, 54, 55, 56, 57, 58, 59]
    prompts, texts = [[9, 8], [7, 6]], [answer, answer]
    frozen = learning_counts(corpus, prompts, texts, 3, learn=False)
    learnt = learning_counts(corpus, prompts, texts, 3)
    assert frozen == [along_text_counts(corpus, [p], [t], 3) for p, t in zip(prompts, texts)]
    assert learnt[0] == frozen[0] and frozen[1]["accepted"] == 0
    assert learnt[1]["accepted"] == 7 and learnt[1]["drafts"] == 3  # 3 + 3 + 1 (the text ends), each with its bonus
    assert learning_counts(None, prompts, texts, 3)[1]["accepted"] == 7  # from an empty table too
