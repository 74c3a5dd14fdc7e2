"""Prompt lookup drafts (n-gram matches in the context): the proposer, and prompt lookup as a head.

Prompt lookup (Saxena, 2023; HF's `prompt_lookup_num_tokens`) needs no training: when the last
tokens of the context (prompt + generated tokens) occurred earlier, the tokens that followed them
then are a draft of what follows now. It wins where answers copy their prompt (summaries,
rewrites, code edits) and draws blanks elsewhere; a trained head is the other way round.

- `NgramIndex`: the proposer. For n from `max_ngram` down to 1, the latest earlier occurrence of
  the last n tokens; its continuation, up to L tokens, is the draft. (HF's rule, with the same
  defaults: n ≤ 2, L = 10, longest n first, a continuation may run up to the end of the context;
  HF takes the *first* occurrence, this the latest, closer to what is being written, which
  accepted a little more: docs/results.md#choices-made-teacher-forced).
- `LookupHead` (kind "lookup"): prompt lookup as a DraftHead in headstart's own loop, a chain of
  the continuation (nothing to verify but the root when nothing matches), so that it is compared
  with the heads like for like.
- `Branch`: one row's lookup branch for hybrid trees (decode/hybrid.py), its length adapted from
  what the row accepts; `merge_branch` merges a token path into a tree as a trie.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import DynamicTreeSpec, tree_from_parents
from headstart.decode.tree import Tree
from headstart.errors import HeadstartError


class PromptLookupError(HeadstartError):
    """Prompt-lookup settings out of range."""


def check_lookup_settings(max_tokens: int, max_ngram: int) -> None:
    for name, value in (("max_tokens", max_tokens), ("max_ngram", max_ngram)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PromptLookupError(
                f"prompt lookup {name} must be an integer >= 1, got {value!r}; "
                "set decode.prompt_lookup (tokens per branch, 0 = off) and decode.lookup_ngram (>= 1)"
            )


class NgramIndex:
    """Where every n-gram (n ≤ max_ngram) of a growing token sequence last began.

    `extend` appends tokens (O(max_ngram) each); `continuation(root, L)` answers for the sequence
    followed by `root` in O(max_ngram + L): no scan of the context per step.
    """

    def __init__(self, max_ngram: int = 2, tokens: list[int] = ()):
        self.max_ngram = max_ngram
        self.tokens: list[int] = []
        self.latest: list[dict[tuple[int, ...], int]] = [{} for _ in range(max_ngram)]  # [n - 1][gram] = start
        self.extend(tokens)

    def extend(self, tokens: list[int]) -> None:
        for t in tokens:
            self.tokens.append(int(t))
            end = len(self.tokens)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.latest[n - 1][tuple(self.tokens[end - n :])] = end - n

    def continuation(self, root: int, max_tokens: int, min_ngram: int = 1) -> list[int]:
        """Up to max_tokens tokens that followed the latest earlier occurrence of the sequence's last
        n tokens (root last), trying n = max_ngram first, down to min_ngram; [] when none of them
        occurred before."""
        seq = self.tokens
        for n in range(min(self.max_ngram, len(seq)), min_ngram - 1, -1):
            start = self.latest[n - 1].get((*seq[len(seq) - n + 1 :], int(root)))
            if start is not None:  # the n-gram lies within seq, so at least the root follows it
                begin = start + n
                out = seq[begin : begin + max_tokens]
                return out + [int(root)] if len(out) < max_tokens else out
        return []

    def follow(self, tokens: list[int]) -> NgramIndex:
        """This index brought to hold exactly `tokens`: extended by what follows when it holds a prefix
        of them (a request's next step), else built anew (a serving row that now holds another request).
        The check is one list comparison, in C; building anew is a Python loop over the context."""
        held = len(self.tokens)
        if held <= len(tokens) and tokens[:held] == self.tokens:
            self.extend(tokens[held:])
            return self
        return NgramIndex(self.max_ngram, tokens)

    def sync(self, state: DraftState) -> None:
        """Follow one row's committed tokens: the whole prompt at a new sequence, then each accepted path."""
        if state.start != len(self.tokens):  # a new sequence (start 0); the engine never rewinds otherwise
            fresh = NgramIndex(self.max_ngram, self.tokens[: state.start])
            self.tokens, self.latest = fresh.tokens, fresh.latest
        self.extend(state.committed[0].tolist())


def ngram_continuation(sequence: list[int], max_ngram: int = 2, max_tokens: int = 10) -> list[int]:
    """The prompt-lookup draft after `sequence` (prompt + generated tokens, the newest last): what
    followed the latest earlier occurrence of its last n tokens (n = max_ngram down to 1), up to
    max_tokens tokens; [] when there is none."""
    check_lookup_settings(max_tokens, max_ngram)
    if not sequence:
        return []
    return NgramIndex(max_ngram, list(sequence[:-1])).continuation(sequence[-1], max_tokens)


def empty_tree() -> Tree:
    """A tree of no draft nodes: the step verifies the root alone (plain decoding's forward)."""
    return Tree((), torch.zeros(1, dtype=torch.long), torch.full((1,), -1, dtype=torch.long),
                torch.zeros(1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool), torch.zeros(1, 1, dtype=torch.long))


def chain_tree(n: int) -> Tree:
    """A chain of n nodes (n = 0: the empty tree)."""
    return tree_from_parents(list(range(n))) if n else empty_tree()


@dataclass
class Merged:
    """A head's tree with a lookup branch merged in."""

    tokens: list[int]  # (N',) node tokens, the head's N first, then the added nodes
    parents: list[int]  # (N',) parent input of each node (0 = root), topological
    added: int  # nodes the branch added (N' - N)
    shared: int  # leading branch tokens that were already head nodes


def trie_of(tokens: list[int], parents: list[int]) -> dict[tuple[int, int], int]:
    """A tree's nodes 1..N as a trie: (parent, token) -> the first child with that token."""
    kids: dict[tuple[int, int], int] = {}
    for i, (p, t) in enumerate(zip(parents, tokens), start=1):
        kids.setdefault((p, t), i)
    return kids


def trie_walk(kids: dict[tuple[int, int], int], branch: list[int]) -> tuple[int, int]:
    """How far `branch` follows the trie's nodes from the root: (the last node reached, 0 = root;
    how many of its tokens were matched)."""
    node, shared = 0, 0
    for t in branch:
        child = kids.get((node, t))
        if child is None:
            break
        node, shared = child, shared + 1
    return node, shared


def merge_branch(tokens: list[int], parents: list[int], branch: list[int]) -> Merged:
    """Merge `branch` (a token path from the root) into a tree as a trie.

    tokens, parents: the head's nodes 1..N (parents[i] is node i + 1's parent input, 0 = root).
    The branch follows existing nodes while their tokens match (the first such child among
    siblings), then hangs the rest of itself below the last one as new nodes appended after
    the head's, so the order stays topological and the head's node indices do not move.
    """
    node, shared = trie_walk(trie_of(tokens, parents), branch)
    rest = branch[shared:]
    new_parents = [node, *range(len(tokens) + 1, len(tokens) + len(rest))]
    return Merged(tokens + rest, parents + new_parents[: len(rest)], len(rest), shared)


@dataclass
class LookupStats:
    """What the lookup branches did, summed over the rows of a head's decodes (a step's branch is
    credited at the next proposal of its row, so a sequence's last step is not counted)."""

    proposals: int = 0  # proposals made
    matched: int = 0  # proposals where the context held a match
    added: int = 0  # nodes the branches added beyond the head's own
    accepted: int = 0  # accepted drafts on those added nodes (tokens the head's tree did not hold)
    alone: int = 0  # hybrid: steps the head sat out while the text copied its context
    sure: int = 0  # hybrid: steps the head sat out because the corpus table was sure of the next token
    corpus_added: int = 0  # nodes the corpus n-gram trees added beyond the head's and the branch's
    corpus_accepted: int = 0  # accepted drafts along the corpus trees (their longest accepted path, whoever else drafted it)
    # hybrid with a head: what the head added over the head-free sources of the same steps (HybridDrafter)
    head_steps: int = 0  # steps the head drafted
    head_gained: int = 0  # of those, steps that accepted further than every head-free path of the step
    head_lost: int = 0  # steps where a head-free path the head's nodes displaced would have gone further (the bonus shows it)
    head_gain: int = 0  # accepted drafts beyond the best head-free path, summed over those steps (a loss counts -1)


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two token sequences share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def accepted_run(drafted: list[int], state: DraftState) -> int:
    """How many leading tokens of the path `drafted` (last step's) the step accepted: the drafts
    committed with `state` (none at a new sequence)."""
    return common_prefix(drafted, state.committed[0, 1:].tolist() if state.start else [])


def adapted_length(length: int, whole: bool, longest: int) -> int:
    """HF's rule for assistant tokens: +2 (up to `longest`) after a path accepted whole, else -1 (down to 1)."""
    return min(longest, length + 2) if whole else max(1, min(length, longest) - 1)


class Branch:
    """One row's lookup state: its context index, its branch length and the last branch, to credit."""

    def __init__(self, max_tokens: int, max_ngram: int, stats: LookupStats, adapt: bool, copy_tokens: int = 0):
        self.index = NgramIndex(max_ngram)
        self.max_tokens, self.length, self.adapt, self.stats = max_tokens, max_tokens, adapt, stats
        self.copy_tokens = max(copy_tokens, max_tokens)  # the longest branch while the text copies its context
        self.last: list[int] = []  # the previous step's branch
        self.shared = 0  # how many of its leading tokens were head nodes
        self.copying = False  # the previous branch was max_tokens long and accepted whole

    def next(self, state: DraftState, limit: int) -> list[int]:
        """Take in what was committed, credit the last branch, and propose the next (≤ limit tokens)."""
        copying = False
        if self.last:
            run = accepted_run(self.last, state)
            self.stats.accepted += max(0, run - self.shared)
            whole = run == len(self.last)
            copying = whole and len(self.last) >= self.max_tokens
            if self.adapt and copying:  # doubles while the text copies, up to copy_tokens
                self.length = min(self.copy_tokens, 2 * self.length)
            elif self.adapt:
                self.length = adapted_length(self.length, whole, self.max_tokens)
        self.index.sync(state)
        branch = self.index.continuation(int(state.root[0]), min(self.length, limit))
        self.stats.proposals += 1
        self.stats.matched += bool(branch)
        self.last, self.shared, self.copying = branch, 0, copying and bool(branch)
        return branch


def chain_proposal(branch: list[int], device) -> Proposal:
    """The branch alone as a chain (no nodes when it is empty: the step verifies the root alone)."""
    return Proposal(torch.tensor([branch], dtype=torch.long, device=device), chain_tree(len(branch)))  # (1, n)


class LookupDrafter:
    """Prompt lookup for one sequence: a chain of the continuation of the latest n-gram match."""

    def __init__(self, head: LookupHead):
        self.branch = Branch(head.max_tokens, head.max_ngram, head.stats, adapt=False)

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        chain = self.branch.next(state, min(spec.depth, spec.total_tokens))
        self.branch.stats.added += len(chain)
        return chain_proposal(chain, state.root.device)


class LookupHead:
    """Prompt lookup as a head (kind "lookup", no training): a chain of up to `max_tokens` tokens
    copied from the context after the latest match of its last ≤ `max_ngram` tokens, nothing
    when there is no match. The chain length is the dynamic budget's depth (default max_tokens)."""

    kind = "lookup"
    dynamic = True
    needs_features = True  # the engine then hands each row's committed tokens over
    feature_layers = ()

    def __init__(self, max_tokens: int = 10, max_ngram: int = 2):
        check_lookup_settings(max_tokens, max_ngram)
        self.max_tokens, self.max_ngram = max_tokens, max_ngram
        self.default_tree = DynamicTreeSpec(depth=max_tokens, top_k=1, total_tokens=max_tokens)
        self.stats = LookupStats()
        self._own: LookupDrafter | None = None

    def lookup_settings(self) -> dict:
        """What to report beside τ."""
        return {"max_tokens": self.max_tokens, "max_ngram": self.max_ngram, "branch": False}

    def drafter(self) -> LookupDrafter:
        return LookupDrafter(self)

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        if state.start == 0 or self._own is None:
            self._own = self.drafter()
        return self._own.propose(state, spec)
