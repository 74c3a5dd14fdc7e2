"""The corpus table and prompt lookup served by vLLM: a proposer for its `custom_class` method.

vLLM verifies one chain of k drafts per request and step (its CPU runner has no tree attention),
and its proposers are a draft model or n-gram matching in the request, never both. vLLM 0.32 also
loads a proposer class by name (`"method": "custom_class"`). `CorpusProposer` is one: each step it
drafts, for each request, `chain_draft` of the request's tokens: the prompt-lookup continuation
(decode/lookup.py, the latest earlier match of the last 2 tokens, as headstart's own loop finds
it) when the context holds one, else the argmax chain of the head's corpus table
(decode/corpus.py, the training answers' n-gram table saved beside the head), else a match of the
last token alone; k tokens at most.
No target forward, no GPU work: an index of the request's tokens and a few dictionary lookups, in Python.

    HEADSTART_CORPUS=runs/demo/medusa/final vllm serve TARGET --speculative-config \
        '{"method": "custom_class", "model": "headstart.decode.vllm_proposer.CorpusProposer",
          "num_speculative_tokens": 5}'

It needs `headstart` importable in vLLM's environment (`pip install --no-deps headstart` there: it
imports only numpy, torch, safetensors and headstart's decode package, none of headstart's pinned
dependencies), and HEADSTART_CORPUS, the folder holding `corpus_ngram.safetensors`.
`headstart serve-check` runs it beside the head and vLLM's n-gram proposer.
"""

from __future__ import annotations

import os
from pathlib import Path

from headstart.decode.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.decode.lookup import NgramIndex, common_prefix

ENV = "HEADSTART_CORPUS"
CLASS_PATH = "headstart.decode.vllm_proposer.CorpusProposer"
#: the `headstart` package folder that holds this module's decode package: what vLLM's environment imports
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def chain_draft(corpus: CorpusNgram, tokens: list[int], k: int, max_ngram: int = 2) -> list[int]:
    """The chain of at most k drafts after `tokens` (prompt and answer so far, the newest last): the
    continuation of the latest earlier match of its last max_ngram tokens; else the corpus table's
    argmax chain after its last `corpus.order` tokens; else the continuation of a shorter match
    (down to its last token alone); [] when none has anything. Teacher-forced along the embedded
    SmolLM2's greedy answers to 36 held-out prompts, k = 5: τ 1.95 in this order, 1.90 with any
    lookup match first, 1.62 with the corpus first, 1.44 for lookup alone and 1.54 for the corpus alone."""
    if not tokens or k < 1:
        return []
    index = NgramIndex(max_ngram, tokens[:-1])
    copied = index.continuation(tokens[-1], k, min_ngram=max_ngram)
    if copied:
        return copied
    leaves = corpus.tree(tokens[-corpus.order :], k, width=1)
    return leaves[0] if leaves else index.continuation(tokens[-1], k)


def along_text_counts(corpus: CorpusNgram, prompts: list[list[int]], texts: list[list[int]], k: int) -> dict:
    """What vLLM's counters read for `CorpusProposer` on these prompts if it wrote these texts
    (greedy): from each last accepted position, `chain_draft`'s chain is accepted while it matches
    the text. The first new token comes from the prefill, undrafted. Counts as vLLM's: drafts (steps
    that carried drafts), draft tokens, accepted draft tokens, accepted per position. They equal
    vLLM's, except that in the last step of a request cut at max_tokens vLLM also counts drafts
    accepted past the cut, which the text cannot show (at most k more per request)."""
    drafts = draft_tokens = accepted = 0
    per_position = [0] * k
    for prompt, text in zip(prompts, texts, strict=True):
        done = 1
        while done < len(text):
            chain = chain_draft(corpus, [*prompt, *text[:done]], k)
            run = common_prefix(chain, text[done:])
            drafts, draft_tokens, accepted = drafts + bool(chain), draft_tokens + len(chain), accepted + run
            for d in range(run):
                per_position[d] += 1
            done += run + 1
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "accepted_per_pos": per_position}


class CorpusProposer:
    """vLLM's `custom_class` proposer drafting `chain_draft` for each request (see the module doc)."""

    def __init__(self, vllm_config):
        spec = vllm_config.speculative_config
        self.k = spec.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        folder = os.environ.get(ENV)
        corpus = CorpusNgram.load(folder) if folder else None
        if corpus is None:
            raise CorpusNgramError(f"set {ENV} to a head folder holding {FILE_NAME} (got {folder!r})")
        self.corpus = corpus

    def load_model(self, *args, **kwargs) -> None:
        """Nothing to load: vLLM calls this on every drafter."""

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec, token_ids_cpu, slot_mappings=None) -> list[list[int]]:
        """Per request row: its drafts (none for a row that sampled nothing this step or is full)."""
        drafts = []
        for row, sampled in enumerate(sampled_token_ids):
            n = int(num_tokens_no_spec[row])
            if not sampled or n >= self.max_model_len:
                drafts.append([])
                continue
            k = min(self.k, self.max_model_len - n)
            drafts.append(chain_draft(self.corpus, token_ids_cpu[row, :n].tolist(), k))
        return drafts
