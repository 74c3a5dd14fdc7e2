"""Prompt lookup drafts (n-gram matches in the context), alone or as a branch beside a head's tree.

Prompt lookup (Saxena, 2023; HF's `prompt_lookup_num_tokens`) needs no training: when the last
tokens of the context (prompt + generated tokens) occurred earlier, the tokens that followed them
then are a draft of what follows now. It wins where answers copy their prompt (summaries,
rewrites, code edits) and draws blanks elsewhere; a trained head is the other way round.

- `NgramIndex`: the proposer. For n from `max_ngram` down to 1, the latest earlier occurrence of
  the last n tokens; its continuation, up to L tokens, is the draft. (HF's rule, with the same
  defaults: n ≤ 2, L = 10, longest n first, a continuation may run up to the end of the context;
  HF takes the *first* occurrence, this the latest, closer to what is being written: on the 9
  held-out prompts with SmolLM2, prompt lookup alone reaches τ 1.62 against 1.59 with the first.)
- `LookupHead` (kind "lookup"): prompt lookup as a DraftHead in headstart's own loop, a chain of
  the continuation (nothing to verify but the root when nothing matches), so that it is compared
  with the heads like for like.
- `HybridHead`: any head (a Medusa static tree, an EAGLE/EAGLE-3 dynamic tree, a draft model) with
  the lookup continuation merged into its tree as a trie from the root: where the head already has
  a node with the next token, the branch follows it; elsewhere it adds nodes. One target forward
  verifies both sources, and decoding stays lossless as with any tree (lookup nodes are
  deterministic drafts: q is one-hot on their token where the head gives sampled drafts' q).

Budget, per row, from what the row measures: lookup nodes are added only when a match exists.
The branch length starts at L, grows by 2 (up to L) after a step that accepted the whole branch
and shrinks by 1 (down to 1) after one that did not (HF's rule for assistant tokens): long in
copying passages, one node elsewhere. The head's tree is kept whole, except while the text copies
its context (the last branch was L long and accepted whole): then the head sits the step out and
the branch is verified alone, as prompt lookup alone would, without the head's drafting and width.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from headstart.decode.contract import DraftState, Proposal, TreeSpec
from headstart.decode.dynamic import DynamicTreeSpec, tree_from_parents
from headstart.decode.tree import HeldOutAccuracy, Tree
from headstart.errors import HeadstartError


class PromptLookupError(HeadstartError):
    """Prompt-lookup settings out of range."""


def _check(max_tokens: int, max_ngram: int) -> None:
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

    def continuation(self, root: int, max_tokens: int) -> list[int]:
        """Up to max_tokens tokens that followed the latest earlier occurrence of the sequence's last
        n tokens (root last), trying n = max_ngram first; [] when none of them occurred before."""
        seq = self.tokens
        for n in range(min(self.max_ngram, len(seq)), 0, -1):
            start = self.latest[n - 1].get((*seq[len(seq) - n + 1 :], int(root)))
            if start is not None:  # the n-gram lies within seq, so at least the root follows it
                begin = start + n
                out = seq[begin : begin + max_tokens]
                return out + [int(root)] if len(out) < max_tokens else out
        return []

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
    _check(max_tokens, max_ngram)
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


def merge_branch(tokens: list[int], parents: list[int], branch: list[int]) -> Merged:
    """Merge `branch` (a token path from the root) into a tree as a trie.

    tokens, parents: the head's nodes 1..N (parents[i] is node i + 1's parent input, 0 = root).
    The branch follows existing nodes while their tokens match (the first such child among
    siblings), then hangs the rest of itself below the last one as new nodes appended after
    the head's, so the order stays topological and the head's node indices do not move.
    """
    kids: dict[tuple[int, int], int] = {}  # (parent, token) -> the first child with that token
    for i, (p, t) in enumerate(zip(parents, tokens), start=1):
        kids.setdefault((p, t), i)
    node, shared = 0, 0
    for t in branch:
        child = kids.get((node, t))
        if child is None:
            break
        node, shared = child, shared + 1
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


class _Branch:
    """One row's lookup state: its context index, its branch length and the last branch, to credit."""

    def __init__(self, max_tokens: int, max_ngram: int, stats: LookupStats, adapt: bool):
        self.index = NgramIndex(max_ngram)
        self.max_tokens, self.length, self.adapt, self.stats = max_tokens, max_tokens, adapt, stats
        self.last: list[int] = []  # the previous step's branch
        self.shared = 0  # how many of its leading tokens were head nodes
        self.copying = False  # the previous branch was max_tokens long and accepted whole

    def next(self, state: DraftState, limit: int) -> list[int]:
        """Take in what was committed, credit the last branch, and propose the next (≤ limit tokens)."""
        accepted = state.committed[0, 1:].tolist() if state.start else []  # drafts accepted last step
        copying = False
        if self.last:
            run = next((i for i, (a, b) in enumerate(zip(self.last, accepted)) if a != b), min(len(self.last), len(accepted)))
            self.stats.accepted += max(0, run - self.shared)
            copying = run == len(self.last) == self.max_tokens
            if self.adapt:
                grow = run == len(self.last)
                self.length = min(self.max_tokens, self.length + 2) if grow else max(1, self.length - 1)
        self.index.sync(state)
        branch = self.index.continuation(int(state.root[0]), min(self.length, limit))
        self.stats.proposals += 1
        self.stats.matched += bool(branch)
        self.last, self.shared, self.copying = branch, 0, copying and bool(branch)
        return branch


def _chain(branch: list[int], device) -> Proposal:
    """The branch alone as a chain (no nodes when it is empty: the step verifies the root alone)."""
    return Proposal(torch.tensor([branch], dtype=torch.long, device=device), chain_tree(len(branch)))  # (1, n)


class LookupDrafter:
    """Prompt lookup for one sequence: a chain of the continuation of the latest n-gram match."""

    def __init__(self, head: LookupHead):
        self.branch = _Branch(head.max_tokens, head.max_ngram, head.stats, adapt=False)

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        chain = self.branch.next(state, min(spec.depth, spec.total_tokens))
        self.branch.stats.added += len(chain)
        return _chain(chain, state.root.device)


class LookupHead:
    """Prompt lookup as a head (kind "lookup", no training): a chain of up to `max_tokens` tokens
    copied from the context after the latest match of its last ≤ `max_ngram` tokens, nothing
    when there is no match. The chain length is the dynamic budget's depth (default max_tokens)."""

    kind = "lookup"
    dynamic = True
    needs_features = True  # the engine then hands each row's committed tokens over
    feature_layers = ()

    def __init__(self, max_tokens: int = 10, max_ngram: int = 2):
        _check(max_tokens, max_ngram)
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


def _joined(pending: DraftState | None, state: DraftState) -> DraftState:
    """`state` extended back over the positions committed since `pending` (features, tokens, start)."""
    if pending is None:
        return state
    return DraftState(
        state.hidden, state.root, torch.cat([pending.features, state.features], dim=1),
        torch.cat([pending.committed, state.committed], dim=1), pending.start,
    )


def merge_into(proposal: Proposal, branch: list[int]) -> tuple[Proposal, Merged]:
    """A one-row proposal with `branch` merged into its tree (`merge_branch`); the proposal itself
    when the tree already holds the whole branch. Where the head gives draft distributions
    (sampled drafts), each added node gets q = 1 on its token: a lookup draft is deterministic,
    which rejection sampling verifies exactly, beside sampled siblings too."""
    merged = merge_branch(proposal.tokens[0].tolist(), proposal.tree.parent[1:].tolist(), branch)
    if not merged.added:
        return proposal, merged
    dev = proposal.tokens.device
    tokens = torch.tensor([merged.tokens], dtype=proposal.tokens.dtype, device=dev)  # (1, N')
    q = proposal.draft_probs
    if q is not None:  # (1, N, V) -> (1, N', V)
        added = torch.tensor(merged.tokens[-merged.added :], device=q.device)
        one_hot = torch.zeros(merged.added, q.shape[-1], dtype=q.dtype, device=q.device)
        one_hot[torch.arange(merged.added, device=q.device), added] = 1.0
        q = torch.cat([q, one_hot[None]], dim=1)
    return Proposal(tokens, tree_from_parents(merged.parents), q), merged


class HybridDrafter:
    """One sequence's hybrid drafting: the head's own drafter, then the lookup branch merged in.

    While the text copies its context (the last branch was max_tokens long and accepted whole),
    the head sits the step out and the branch is verified alone; what was committed meanwhile is
    handed to the head's drafter at its next call, so a drafter with a cache of its own (EAGLE's,
    a draft model's) misses nothing.
    """

    def __init__(self, head: HybridHead):
        inner = head.head
        self.inner = inner.drafter() if hasattr(inner, "drafter") else copy.copy(inner)
        self.branch = _Branch(head.max_tokens, head.max_ngram, head.stats, adapt=True)
        self.pending: DraftState | None = None  # what was committed while the head sat out

    def propose(self, state: DraftState, tree_or_spec) -> Proposal:
        branch = self.branch.next(state, self.branch.max_tokens)
        if self.branch.copying:
            self.pending = _joined(self.pending, state)
            self.branch.stats.added += len(branch)
            self.branch.stats.alone += 1
            return _chain(branch, state.root.device)
        proposal = self.inner.propose(_joined(self.pending, state), tree_or_spec)
        self.pending = None
        if not branch:
            return proposal
        proposal, merged = merge_into(proposal, branch)
        self.branch.shared = merged.shared
        self.branch.stats.added += merged.added
        return proposal


class HybridHead:
    """Any DraftHead with a prompt-lookup branch merged into its tree each step (hybrid trees).

    It drafts row by row (each row follows its own context), through the head's `drafter()` when
    it has one, else a shallow copy of the head per row; it keeps the head's tree settings, kind
    (+ "+lookup"), feature layers, options, own tree and held-out accuracy. Lossless as any tree:
    see the module docstring.
    """

    needs_features = True

    def __init__(self, head, max_tokens: int = 10, max_ngram: int = 2):
        _check(max_tokens, max_ngram)
        self.head, self.max_tokens, self.max_ngram = head, max_tokens, max_ngram
        self.kind = f"{head.kind}+lookup"
        self.dynamic = bool(getattr(head, "dynamic", False))
        self.feature_layers = tuple(getattr(head, "feature_layers", ()) or ())
        self.options = getattr(head, "options", {}) or {}
        self.stats = LookupStats()
        self._own: HybridDrafter | None = None

    @property
    def default_tree(self) -> TreeSpec | None:
        """The head's own tree, read when a generator is made."""
        return getattr(self.head, "default_tree", None)

    @property
    def held_out(self) -> HeldOutAccuracy | None:
        """The head's measured held-out accuracy."""
        return getattr(self.head, "held_out", None)

    def lookup_settings(self) -> dict:
        """What to report beside τ."""
        return {"max_tokens": self.max_tokens, "max_ngram": self.max_ngram, "branch": True}

    def drafter(self) -> HybridDrafter:
        return HybridDrafter(self)

    def propose(self, state: DraftState, tree_or_spec) -> Proposal:
        if state.start == 0 or self._own is None:
            self._own = self.drafter()
        return self._own.propose(state, tree_or_spec)


def with_lookup(head, max_tokens: int, max_ngram: int = 2):
    """`head` with lookup branches (`decode.prompt_lookup` tokens, 0 = the head as it is)."""
    return HybridHead(head, max_tokens, max_ngram) if max_tokens else head


def verified_bounds(settings: dict) -> tuple[int, int]:
    """(deepest draft, most draft nodes) one verification may hold, from a generator's tree settings
    with a head's `lookup` block: a hybrid's branch of L tokens reaches depth L and adds at most L nodes."""
    lookup = settings.get("lookup")
    if not lookup or not lookup["branch"]:
        return settings["depth"], settings["size"]
    return max(settings["depth"], lookup["max_tokens"]), settings["size"] + lookup["max_tokens"]
