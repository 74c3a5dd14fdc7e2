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
        '{"method": "custom_class", "model": "headstart.serve.proposer.CorpusProposer",
          "num_speculative_tokens": 5}'

It needs `headstart` installed in vLLM's environment (`pip install --no-deps headstart` there, as
`make vllm` does: it imports only numpy, torch, safetensors and headstart's decode package, none of
headstart's pinned dependencies), and HEADSTART_CORPUS, the folder holding `corpus_ngram.safetensors`.
`headstart serve-check` runs it beside the head and vLLM's n-gram proposer.

The hybrid: an EAGLE / EAGLE-3 head and these tables in one vLLM engine. vLLM has no proposer
class that sees the target's hidden states, so `install` (a vLLM general plugin, the entry point
`vllm.general_plugins: headstart` that `pip install headstart` declares) wraps vLLM's model runner:
an EAGLE engine created while HEADSTART_HYBRID=1 is set drafts each step's chain by `hybrid_chain`,
the head running one draft forward a step (which keeps its KV cache in step with the text) instead
of k. Lossless like any draft: the target verifies every chain, and the drafts are given to vLLM's
rejection sampler without draft probabilities, so at temperature > 0 it verifies them as fixed
tokens (exact, as vLLM's n-gram drafts are).

    HEADSTART_HYBRID=1 HEADSTART_CORPUS=runs/eagle3/final vllm serve TARGET --speculative-config \
        '{"method": "eagle3", "model": "EXPORTED_HEAD", "num_speculative_tokens": 5}'

Learning (`headstart serve --learn`, serve/learn.py): with HEADSTART_LEARN set, both draft from a `LearningTable`
(the head's table, or the learn folder's on a restart), and the plugin's runner wrapper counts each finished
request's answer into it as vLLM's runner drops the request (`_on_request_state_removed`) and saves it when the
runner shuts down.
"""

from __future__ import annotations

import os
import sys

from headstart.decode.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.decode.lookup import NgramIndex, common_prefix
from headstart.serve.learn import Learner, learner_from_env

ENV = "HEADSTART_CORPUS"
HYBRID_ENV = "HEADSTART_HYBRID"
#: vLLM's methods the hybrid drafts with (EAGLE heads: one draft forward over the target's features)
HYBRID_METHODS = ("eagle", "eagle3")
#: the vLLM plugin (entry point `vllm.general_plugins: headstart` in pyproject.toml)
PLUGIN = "headstart.serve.proposer:install"
#: the corpus chain replaces the head's when its first token has at least this probability in the table
#: (chosen teacher-forced against other thresholds and the table never first: docs/results.md#choices-made-teacher-forced)
CORPUS_FIRST = 0.5
CLASS_PATH = "headstart.serve.proposer.CorpusProposer"


def chain_draft(corpus: CorpusNgram, tokens: list[int], k: int, max_ngram: int = 2, index: NgramIndex | None = None) -> list[int]:
    """The chain of at most k drafts after `tokens` (prompt and answer so far, the newest last): the
    continuation of the latest earlier match of its last max_ngram tokens; else the corpus table's
    argmax chain after its last `corpus.order` tokens; else the continuation of a shorter match
    (down to its last token alone); [] when none has anything. The order was chosen teacher-forced
    against the other orders and each source alone (docs/results.md#choices-made-teacher-forced).
    `index`: an index of tokens[:-1] (`RowIndexes`), else one is built."""
    if not tokens or k < 1:
        return []
    index = index or NgramIndex(max_ngram, tokens[:-1])
    copied = index.continuation(tokens[-1], k, min_ngram=max_ngram)
    if copied:
        return copied
    leaves = corpus.tree(tokens[-corpus.order :], k, width=1)
    return leaves[0] if leaves else index.continuation(tokens[-1], k)


def count_chains(walks, k: int) -> dict:
    """What vLLM's counters read for a proposer of chains of 0..k along texts it wrote (greedy). `walks`
    yields, per prompt, (text, reference, chain_after): from each last accepted position `done` of the text
    (1: the first new token comes from the prefill, undrafted), the chain `chain_after(done)` is accepted while
    it matches reference[done:] (the text, or the text followed by the target's own continuation), and the
    next token is the bonus; until the text is covered. Counts as vLLM's: drafts (steps that carried drafts),
    draft tokens, accepted draft tokens, accepted per position."""
    drafts = draft_tokens = accepted = 0
    per_position = [0] * k
    for text, reference, chain_after in walks:
        done = 1
        while done < len(text):
            chain = chain_after(done)
            run = common_prefix(chain, reference[done:])
            drafts, draft_tokens, accepted = drafts + bool(chain), draft_tokens + len(chain), accepted + run
            for d in range(run):
                per_position[d] += 1
            done += run + 1
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "accepted_per_pos": per_position}


def along_text_counts(corpus: CorpusNgram, prompts: list[list[int]], texts: list[list[int]], k: int) -> dict:
    """What vLLM's counters read for `CorpusProposer` on these prompts if it wrote these texts
    (greedy): `count_chains` of `chain_draft`'s chains, checked against the text. They equal vLLM's,
    except that in the last step of a request cut at max_tokens vLLM also counts drafts
    accepted past the cut, which the text cannot show (at most k more per request)."""

    def walk(prompt: list[int], text: list[int]):
        return text, text, lambda done: chain_draft(corpus, [*prompt, *text[:done]], k)

    return count_chains((walk(p, t) for p, t in zip(prompts, texts, strict=True)), k)


def corpus_from_env() -> CorpusNgram | None:
    """The table of the head folder HEADSTART_CORPUS names; None when it is not set. A folder without
    one is an error."""
    folder = os.environ.get(ENV)
    corpus = CorpusNgram.load(folder) if folder else None
    if folder and corpus is None:
        raise CorpusNgramError(f"set {ENV} to a head folder holding {FILE_NAME} (got {folder!r})")
    return corpus


def drafting_table(corpus: CorpusNgram | None, learner: Learner | None) -> CorpusNgram | None:
    """The table a server drafts from: the learner's under `--learn`, else the head's (None: none), its lookup
    built now, at load, so that the first request does not build it."""
    table = learner.table if learner else corpus
    return None if table is None else table.prepare()


class RowIndexes:
    """The prompt-lookup index of each serving row, kept from step to step and extended by the tokens
    the row gained (`NgramIndex.follow`), instead of built over the whole context at every step: a
    row's step costs its new tokens, not its context (measured by scripts/bench_proposer.py). A row
    that holds another request than last step gets a fresh index."""

    def __init__(self, max_ngram: int = 2):
        self.max_ngram = max_ngram
        self.rows: dict[int, NgramIndex] = {}

    def of(self, row: int, tokens: list[int]) -> NgramIndex:
        """The index of `tokens` (a row's context without its newest token)."""
        index = self.rows.get(row) or NgramIndex(self.max_ngram)
        self.rows[row] = index = index.follow(tokens)
        return index


class CorpusProposer:
    """vLLM's `custom_class` proposer drafting `chain_draft` for each request (see the module doc)."""

    def __init__(self, vllm_config):
        spec = vllm_config.speculative_config
        self.k = spec.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        corpus = corpus_from_env()
        if corpus is None:
            raise CorpusNgramError(f"set {ENV} to a head folder holding {FILE_NAME} (got {os.environ.get(ENV)!r})")
        self.learner = learner_from_env(corpus)  # HEADSTART_LEARN: the table counts finished answers (serve/learn.py)
        self.corpus = drafting_table(corpus, self.learner)
        self.indexes = RowIndexes()

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
            tokens = token_ids_cpu[row, :n].tolist()
            drafts.append(chain_draft(self.corpus, tokens, k, index=self.indexes.of(row, tokens[:-1])))
        return drafts


def hybrid_chain(corpus: CorpusNgram | None, tokens: list[int], k: int, head_first: int | None,
                 index: NgramIndex | None = None) -> list[int]:
    """The hybrid's chain of at most k drafts after `tokens` (the newest last): the continuation of the
    latest earlier match of the last 2 tokens; else the corpus table's argmax chain when its first token
    has probability >= CORPUS_FIRST; else the head's first draft `head_first` followed by the table's chain
    after it (the head's draft alone without a table). `index`: a 2-gram index of tokens[:-1], else built."""
    if not tokens or k < 1:
        return []
    copied = (index or NgramIndex(2, tokens[:-1])).continuation(tokens[-1], k, min_ngram=2)
    if copied:
        return copied
    if corpus is not None:
        scored = corpus.scored_tree(tokens[-corpus.order :], k, width=1)
        if scored and scored[0][1] >= CORPUS_FIRST:
            return scored[-1][0]
    if head_first is None:
        return []
    if corpus is None or k == 1:
        return [head_first]
    tail = corpus.scored_tree([*tokens[-corpus.order + 1 :], head_first], k - 1, width=1)
    return [head_first, *(tail[-1][0] if tail else [])]


class HybridDrafts:
    """One vLLM model runner's hybrid drafting (see the module doc): set up by `install`'s runner
    wrapper when HEADSTART_HYBRID=1 at the runner's creation and the engine drafts with an EAGLE head."""

    def __init__(self, runner, corpus: CorpusNgram | None, learner: Learner | None = None):
        self.runner, self.learner = runner, learner
        self.corpus = drafting_table(corpus, learner)
        self.k = runner.speculative_config.num_speculative_tokens
        self.indexes = RowIndexes()
        drafter = runner.drafter
        head_propose = drafter.propose

        def one_forward(num_speculative_tokens, *args, **kwargs):  # the head's first draft only
            return head_propose(min(int(num_speculative_tokens), 1), *args, **kwargs)

        drafter.propose = one_forward

    def chains(self, sampled, head_first) -> list[list[int]]:
        """Each request row's chain of 0..k tokens (vLLM verifies what each holds, as for its n-gram drafts),
        from the tokens it holds (vLLM writes this step's sampled tokens in after drafting, so they are
        added here; -1 marks a rejected slot) and the head's draft."""
        batch = self.runner.input_batch
        rows = []
        for row in range(sampled.shape[0]):
            n = int(batch.num_tokens_no_spec[row])
            new = [t for t in sampled[row].tolist() if t >= 0]
            first = int(head_first[row, 0]) if head_first is not None and head_first.shape[1] else None
            if not new:
                rows.append([])
                continue
            tokens = [*batch.token_ids_cpu[row, :n].tolist(), *new]
            rows.append(hybrid_chain(self.corpus, tokens, self.k, first, self.indexes.of(row, tokens[:-1]))[: self.k])
        return rows


def _hybrid_for(runner) -> HybridDrafts | None:
    spec = getattr(runner, "speculative_config", None)
    if os.environ.get(HYBRID_ENV, "") in ("", "0") or spec is None or not spec.use_eagle() or getattr(runner, "drafter", None) is None:
        return None
    if spec.parallel_drafting or getattr(runner, "use_async_scheduling", False):
        raise CorpusNgramError(f"{HYBRID_ENV}=1 reads each step's tokens as it drafts: not with parallel drafting, nor with "
                               "async scheduling (vLLM's CPU build runs without; on a GPU pass --no-async-scheduling)")
    corpus = corpus_from_env()
    print(f"headstart: hybrid drafting, k = {spec.num_speculative_tokens}, corpus table {os.environ.get(ENV) or 'none'}",
          file=sys.stderr, flush=True)
    return HybridDrafts(runner, corpus, learner_from_env(corpus))


def runner_learner(runner) -> Learner | None:
    """The learner of a model runner's drafts (`headstart serve --learn`): its hybrid's or its corpus proposer's."""
    hybrid = getattr(runner, "headstart_hybrid", None)
    return hybrid.learner if hybrid is not None else getattr(getattr(runner, "drafter", None), "learner", None)


def install() -> None:
    """vLLM's general-plugin hook (entry point `vllm.general_plugins: headstart`), run in each of vLLM's
    processes: wraps its model runner so that EAGLE engines created while HEADSTART_HYBRID=1 draft
    hybrid chains. Engines created without it run as vLLM's own."""
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError:  # not vLLM's v1 engine: nothing to wrap
        return
    if getattr(GPUModelRunner.propose_draft_token_ids, "headstart", False):
        return
    create, propose = GPUModelRunner.__init__, GPUModelRunner.propose_draft_token_ids
    removed, shutdown = GPUModelRunner._on_request_state_removed, GPUModelRunner.shutdown

    def __init__(self, *args, **kwargs):
        create(self, *args, **kwargs)
        self.headstart_hybrid = _hybrid_for(self)

    def propose_draft_token_ids(self, scheduler_output, sampled_token_ids, *args, **kwargs):
        drafts = propose(self, scheduler_output, sampled_token_ids, *args, **kwargs)
        hybrid = getattr(self, "headstart_hybrid", None)
        if hybrid is None or not hasattr(sampled_token_ids, "shape") or not hasattr(drafts, "shape"):
            return drafts

        self._draft_probs = self._draft_prob_req_ids = None  # fixed tokens to vLLM's rejection sampler
        return hybrid.chains(sampled_token_ids.cpu(), drafts.cpu())  # lists, as vLLM's n-gram proposer returns

    def _on_request_state_removed(self, req_id, req_state):  # a finished request leaves the runner: learn its answer
        learner = runner_learner(self)
        if learner is not None and req_state is not None:
            learner.learn(req_state.output_token_ids)
        return removed(self, req_id, req_state)

    def shutdown_and_save(self):
        learner = runner_learner(self)
        if learner is not None:
            learner.save()
        return shutdown(self)

    __init__.headstart = propose_draft_token_ids.headstart = True
    GPUModelRunner.__init__, GPUModelRunner.propose_draft_token_ids = __init__, propose_draft_token_ids
    GPUModelRunner._on_request_state_removed, GPUModelRunner.shutdown = _on_request_state_removed, shutdown_and_save
