"""headstart's prediction of what vLLM will accept, in vLLM's counts: on headstart's own text (its decoding
loop drafting the served draft shape) and along the text vLLM served (teacher-forced), so that a bf16
difference between the two engines' texts is not read as a difference between their drafters.

A step is one draft of k tokens; accepted drafts per step; position d counts the steps that accepted at
least d drafts; the mean acceptance length counts the bonus token (vLLM's convention, serve/check.py's
CONVENTIONS).
"""

from __future__ import annotations

import torch

from headstart.decode.contract import trait
from headstart.eval.acceptance import acceptance_stats
from headstart.serve.proposer import count_chains, hybrid_chain
from headstart.target import TargetOutput


def chain_generator(target, head, k: int):
    """headstart's decoder drafting a chain of k tokens per step with `head` (vLLM's draft shape)."""
    from headstart.decode.generate import SpeculativeGenerator

    if trait(head, "dynamic"):
        return SpeculativeGenerator(target, head, depth=k, top_k=1, total_tokens=k)
    return SpeculativeGenerator(target, head, tree=[(0,) * d for d in range(1, k + 1)])


def acceptance_from_counts(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> dict:
    """Every acceptance figure of the module doc from the counts vLLM's metrics give."""
    return {
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted": accepted,
        "accepted_per_pos": list(per_pos),
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "accepted_per_draft": accepted / drafts if drafts else None,
        "draft_token_acceptance": accepted / draft_tokens if draft_tokens else None,
        "acceptance_per_position": [a / drafts for a in per_pos] if drafts else None,
    }


def acceptance_from_metrics(metrics: dict) -> dict:
    """`acceptance_from_counts` of vLLM's counters as the engine runner records them (drafts, draft_tokens,
    accepted, accepted_per_pos), or of headstart's count along a text in the same keys."""
    return acceptance_from_counts(metrics["drafts"], metrics["draft_tokens"], metrics["accepted"], metrics["accepted_per_pos"])


def headstart_acceptance(accepted_per_step: list[int], k: int) -> dict:
    """headstart's steps in vLLM's counts: a step is a draft of k tokens; position d counts the
    steps that accepted at least d drafts."""
    stats = acceptance_stats(accepted_per_step, k)
    steps = stats["steps"]
    per_pos = [round(r * steps) for r in stats["acceptance_per_depth"]]
    return acceptance_from_counts(steps, steps * k, stats["accepted_drafts"], per_pos)


@torch.no_grad()
def teacher_forced(target, prompt: list[int], text: list[int], layers: tuple[int, ...], extra: int) -> tuple[TargetOutput, list[int]]:
    """One target forward over prompt + text (the tapped `layers` kept), and the text followed by the
    target's own `extra` greedy tokens after it: what a last step's drafts past the text's end are
    checked against, as both engines verify drafts past the stop and count them."""
    cache = target.new_cache()
    out = target(torch.tensor([prompt + text], device=target.device), cache=cache, feature_layers=layers)
    extended, last = list(text), out.hidden[:, -1]  # (1, D)
    for _ in range(extra):  # greedy, EOS not special
        nxt = target.logits(last).argmax(-1)  # (1,)
        extended.append(int(nxt))
        last = target(nxt[:, None], cache=cache).hidden[:, -1]
    return out, extended


def drafting_along(target, head, prompt: list[int], text: list[int], k: int, extra: int):
    """headstart's drafter for `chain_generator(target, head, k)` reading the target's features of prompt +
    text, teacher-forced (`teacher_forced`, with `extra` greedy tokens after the text). Returns (ext, ids,
    propose): the text and those tokens; prompt + ext as ids (1, P + L + extra); propose(at, start), the
    drafter's proposal after the root at absolute position `at`, positions start..at-1 committed since its
    last call (0 at the first)."""
    from headstart.decode.contract import DraftState

    gen = chain_generator(target, head, k)
    spec = gen.tree_spec if gen.dynamic else gen.tree
    drafter = gen._drafters(1)[0] or head  # a per-sequence drafter, else the head drafts for a batch (Medusa)
    out, ext = teacher_forced(target, prompt, text, gen.feature_layers if gen.needs_features else (), extra)
    feats = gen._features(out) if gen.needs_features else None  # (1, P + L, F)
    ids = torch.tensor([prompt + ext], device=target.device)

    def propose(at: int, start: int):
        state = DraftState(out.hidden[:, at - 1], ids[:, at], None if feats is None else feats[:, start:at], ids[:, start:at], start)
        return drafter.propose(state, spec)

    return ext, ids, propose


@torch.no_grad()
def along_text_steps(target, head, prompt: list[int], text: list[int], k: int) -> list[int]:
    """Drafts accepted per verification step when headstart's drafter drafts along a given text.

    The text (the new tokens after `prompt`, e.g. vLLM's output) stands in for the target's greedy
    choices: each step the drafter proposes `chain_generator`'s draft shape (P-EAGLE's k slots, or a
    chain of k) from the last accepted position, reading the target's features of the text
    (teacher-forced), and the longest prefix of drafts that the text continues with is accepted; the
    text's next token is the bonus and the next root. Steps run until the text is covered, as the
    decoding loop's do. Along the target's own greedy text in float32 this is the loop's own
    `accepted_per_step` (tested); the features come from one forward over the text rather than the
    loop's verification forwards, which round differently in bf16.
    """
    from headstart.decode.verify import greedy_accept

    _, ids, propose = drafting_along(target, head, prompt, text, k, extra=k)  # ids (1, P + L + k)
    p, root, start, steps = len(prompt), 0, 0, []  # root: index in the text of the token drafted after
    while root + 1 < len(text):  # the loop stops once its new tokens cover the text (EOS or the budget)
        at = p + root  # the root's absolute position; positions start..at-1 were committed since the last step
        proposal = propose(at, start)
        tree = proposal.tree
        tokens = torch.cat([ids[0, at : at + 1], proposal.tokens[0].to(ids.device)])  # (N + 1,) root first
        predicted = ids[0, at + 1 + tree.depth.to(ids.device)]  # (N + 1,) the text's token after each input
        accepted, _ = greedy_accept(tokens, predicted, tree.retrieve.to(ids.device))
        steps.append(accepted)
        start, root = at, root + accepted + 1
    return steps


def along_text_acceptance(target, head, prompts: list[list[int]], texts: list[list[int]], k: int) -> dict:
    """headstart's prediction along given texts (vLLM's outputs), in vLLM's counts (`headstart_acceptance`)."""
    steps = [a for prompt, text in zip(prompts, texts, strict=True) for a in along_text_steps(target, head, prompt, text, k)]
    return headstart_acceptance(steps, k)


@torch.no_grad()
def hybrid_along_text_counts(target, head, corpus, prompts: list[list[int]], texts: list[list[int]], k: int) -> dict:
    """What vLLM's counters read for the head served as headstart's hybrid (serve/proposer.py) if it
    wrote these texts (greedy): `count_chains` of `hybrid_chain`'s chains, the head drafting one token from
    each last accepted position (teacher-forced, `drafting_along`), checked against the text followed by the
    target's own k greedy tokens (what a last step's drafts are checked against)."""
    def walk(prompt: list[int], text: list[int]):
        ext, _, propose = drafting_along(target, head, prompt, text, 1, extra=k)
        start = 0  # the drafter reads the positions committed since its last call

        def chain_after(done: int) -> list[int]:
            nonlocal start
            at = len(prompt) + done - 1  # the root's absolute position
            first = int(propose(at, start).tokens[0, 0])
            start = at
            return hybrid_chain(corpus, [*prompt, *ext[:done]], k, first)[:k]

        return text, ext, chain_after

    return count_chains((walk(p, t) for p, t in zip(prompts, texts, strict=True)), k)


def learning_counts(corpus, prompts: list[list[int]], texts: list[list[int]], k: int, learn: bool = True,
                    cap: int | None = None) -> list[dict]:
    """What vLLM's counters read, request by request, for headstart's corpus proposer answering these prompts one
    after the other with these texts (greedy): with the table frozen (`learn=False`), or learning as
    `headstart serve --learn` does (serve/learn.py: each text counted once it is answered, before the next
    request drafts). `corpus`: the head's table, or None for an empty one; `cap`: the learning table's."""
    from headstart.serve.learn import DEFAULT_CAP, LearningTable
    from headstart.serve.proposer import along_text_counts

    if corpus is None:
        table = LearningTable(4, 4, cap or DEFAULT_CAP)
    else:  # a frozen table drafts from the head's own counts: no learning copy
        table = LearningTable.of(corpus, cap or DEFAULT_CAP) if learn else corpus
    out = []
    for prompt, text in zip(prompts, texts, strict=True):
        out.append(along_text_counts(table, [prompt], [text], k))
        if learn:
            table.count(text)
    return out
