"""Hybrid trees: a head's tree, a prompt-lookup branch and a corpus tree, verified in one forward.

`HybridHead` wraps any head (a Medusa static tree, an EAGLE/EAGLE-3 dynamic tree, a draft model),
or none, and merges two head-free sources into its tree each step, each as a trie path from the
root (`merge_branch`: where the tree already has a node with the next token the path follows it,
elsewhere it adds nodes):
- the **prompt-lookup branch** (decode/lookup.py): the continuation of the latest n-gram match in
  the row's context, `decode.prompt_lookup` tokens at most;
- the **corpus tree** (decode/corpus.py, `decode.corpus_draft` nodes): the most probable paths,
  taken best-first, in an n-gram table of the target's own training answers, saved with the head
  (`train.corpus_ngram`). It holds the phrases the target repeats across answers, which the
  context does not.
One target forward verifies all sources, and decoding stays lossless as with any tree: the added
nodes are deterministic drafts (q is one-hot on their token where the head gives sampled drafts' q).

Budget, per row, from what the row measures: lookup nodes are added only when a match exists. The
branch length starts at L, grows by 2 (up to L) after a step that accepted the whole branch and
shrinks by 1 (down to 1) after one that did not (HF's rule for assistant tokens): long in copying
passages, one node elsewhere. The corpus tree keeps its budget: adapted the same way, it lost
more τ than it saved nodes (docs/results.md#choices-made-teacher-forced).
A head that scores its drafts (`scores_drafts`: each node's probability along its path; Medusa's
heads' softmax products, an EAGLE-2 tree's exp of the cumulative draft log-probability) shares a
budget with the corpus instead (`decode.hybrid_nodes`, S):
the head's nodes and the corpus tree's best-first paths (count / (occurrences + 1) along the path)
compete, and the S most probable of both form the tree (`shared_tree`), so that the head's nodes
join where it is surer than the corpus and the corpus's where the target repeats itself. The head's
probabilities can be weighed (`decode.hybrid_head_weight`, w: w x p against the corpus's ratio): a
head trained for an hour is right more often than its probabilities say against the table's.
The table also continues the head's paths (`decode.hybrid_continue`, C): after each of the head's
nodes, its best-first tree of up to C nodes from the context extended by that node's path, each
continuation scored by the head's (weighed) path probability times the table's along it, competing
for the same places: the head drafts the token the table is unsure of, the table the phrase that
follows it (the chain vLLM's hybrid serves, serve/proposer.py, as a tree).
Any other head's tree is kept whole. While the text copies its context (the last branch was at
least L long and accepted whole), the step verifies the branch alone, as prompt lookup alone
would, without the head's drafting and width, and the branch doubles after each step that
accepts it whole, up to `copy_tokens` (`decode.lookup_copy`, default 40): a passage copied from
the prompt is verified 20 and 40 tokens at a time instead of 10 (docs/results.md#choices-made-teacher-forced); a miss
costs one longer verification before the branch is back at L - 1.

With `sure` = p > 0 the head also sits out the steps where the corpus table's next token after the
root is at least p probable: the step drafts what the sources without a head draft, and the
positions committed meanwhile reach the head's drafter joined with its next call's, so a head with
a cache of its own (EAGLE's) drafts afterwards as if it had seen every step.

`HybridHead(None, ...)` drafts from the two sources alone (kind "corpus+lookup"): no training
beyond the table, a peer every trained head is measured against.

What the head adds is counted on the steps themselves (`LookupStats.head_*`, reported by eval as
`head_gain`): at each step the head drafts, the paths the head-free sources would have drafted at
that step (the lookup branch and the corpus table's own tree of the same budget) are kept, and when
the step's result comes back the drafts it accepted are compared with the longest run of those
paths along the accepted drafts and the bonus token: the head's gain at that step, -1 where its
nodes pushed a corpus path out of the shared budget that the bonus token shows would have gone
further (at least one draft lost). Exact at temperature 0; sampled, it reads the drawn path.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields

import torch

from headstart.decode.contract import DraftState, Proposal, TreeSpec, trait
from headstart.decode.corpus import leaves
from headstart.decode.dynamic import DynamicTreeSpec, tree_from_parents
from headstart.decode.generate import draft_modules
from headstart.decode.lookup import (
    Branch,
    LookupStats,
    Merged,
    accepted_run,
    chain_proposal,
    check_lookup_settings,
    common_prefix,
    trie_of,
    trie_walk,
)
from headstart.decode.tree import HeldOutAccuracy


def _joined(pending: DraftState | None, state: DraftState) -> DraftState:
    """`state` extended back over the positions committed since `pending` (features, tokens, start)."""
    if pending is None:
        return state
    return DraftState(
        state.hidden, state.root, torch.cat([pending.features, state.features], dim=1),
        torch.cat([pending.committed, state.committed], dim=1), pending.start,
    )


def merge_into(proposal: Proposal, paths: list[list[int]]) -> tuple[Proposal, list[Merged]]:
    """A one-row proposal with token paths from the root merged into its tree one after the other
    (`merge_branch`, a trie), and what each merge did; the proposal itself when the tree already
    holds them all. Where the head gives draft distributions (sampled drafts), each added node gets
    q = 1 on its token: a lookup or corpus draft is deterministic, which rejection sampling
    verifies exactly, beside sampled siblings too."""
    tokens, parents = proposal.tokens[0].tolist(), proposal.tree.parent[1:].tolist()
    # merge_branch's trie, kept across the paths (linear in the nodes, where one merge_branch per
    # path rebuilt it each time: quadratic); each Merged holds the tree after all the merges
    kids = trie_of(tokens, parents)
    merges = []
    for path in paths:
        node, shared = trie_walk(kids, path)
        for t in path[shared:]:
            tokens.append(t)
            parents.append(node)
            node = kids[(parents[-1], t)] = len(tokens)
        merges.append(Merged(tokens, parents, len(path) - shared, shared))
    added = sum(m.added for m in merges)
    if not added:
        return proposal, merges
    dev = proposal.tokens.device
    q = proposal.draft_probs
    if q is not None:  # (1, N, V) -> (1, N', V)
        new = torch.tensor(tokens[-added:], device=q.device)
        one_hot = torch.zeros(added, q.shape[-1], dtype=q.dtype, device=q.device)
        one_hot[torch.arange(added, device=q.device), new] = 1.0
        q = torch.cat([q, one_hot[None]], dim=1)
    return Proposal(torch.tensor([tokens], dtype=proposal.tokens.dtype, device=dev), tree_from_parents(parents), q), merges


def scored_paths(proposal: Proposal) -> list[tuple[list[int], float]]:
    """A one-row proposal's nodes as (token path from the root, the head's score), parents first."""
    tokens, parents, scores = proposal.tokens[0].tolist(), proposal.tree.parent[1:].tolist(), proposal.scores[0].tolist()
    paths: list[tuple[list[int], float]] = []
    for token, parent, score in zip(tokens, parents, scores):
        paths.append(([*paths[parent - 1][0], token] if parent > 0 else [token], score))
    return paths


def shared_tree(head: list[tuple[list[int], float]], corpus: list[tuple[list[int], float]], nodes: int) -> list[list[int]]:
    """The `nodes` most probable paths of the head's and the corpus's (a path both hold counts at
    the higher of its two scores), closed under prefixes, parents first. A path's score never
    exceeds its parent's, so the best `nodes` are a tree: a path whose parent was not taken (a
    tie at the cut) is skipped."""
    score: dict[tuple[int, ...], float] = {}
    for path, p in (*head, *corpus):
        key = tuple(path)
        score[key] = max(score.get(key, 0.0), p)
    taken: set[tuple[int, ...]] = set()
    chosen: list[list[int]] = []
    for key in sorted(score, key=lambda k: (-score[k], len(k))):
        if len(chosen) == nodes:
            break
        if len(key) == 1 or key[:-1] in taken:
            taken.add(key)
            chosen.append(list(key))
    return chosen


class _CorpusTree:
    """One row's corpus tree (`CorpusNgram.tree`, a fixed budget of nodes) and its last leaves, to credit."""

    def __init__(self, corpus, nodes: int, stats: LookupStats):
        self.corpus, self.nodes, self.stats = corpus, nodes, stats
        self.last: list[list[int]] = []

    def credit(self, state: DraftState) -> None:
        """Count the drafts the last tree got accepted (its longest accepted path); nothing is pending after."""
        if self.last:
            self.stats.corpus_accepted += max(accepted_run(leaf, state) for leaf in self.last)
        self.last = []

    def _context(self, committed: list[int], root: int) -> list[int]:
        return [*committed[-self.corpus.order :], root]

    def draft(self, committed: list[int], root: int) -> list[list[int]]:
        """The tree's leaves after the row's committed tokens and its root, kept to be credited next step."""
        self.last = self.corpus.tree(self._context(committed, root), self.nodes)
        return self.last

    def scored(self, committed: list[int], root: int, nodes: int) -> list[tuple[list[int], float]]:
        """Up to `nodes` paths of the tree after the committed tokens and the root, with their
        probabilities (`CorpusNgram.scored_tree`); the caller says which it kept (`self.last`)."""
        return self.corpus.scored_tree(self._context(committed, root), nodes)

    def after(self, committed: list[int], root: int, paths: list[tuple[list[int], float]], nodes: int) -> list[tuple[list[int], float]]:
        """Each of the head's paths continued by the table: up to `nodes` paths after it, scored by the
        head path's score times the table's probability of the continuation."""
        base = self._context(committed, root)
        out = []
        for path, p in paths:
            out.extend(([*path, *more], p * q) for more, q in self.corpus.scored_tree(base + path, nodes))
        return out

    def surest(self, committed: list[int], root: int) -> float:
        """The probability of the table's likeliest token after the committed tokens and the root (0: none known)."""
        _, probs = self.corpus.successors(self._context(committed, root))
        return probs[0] if probs else 0.0


class HybridDrafter:
    """One sequence's hybrid drafting: the head's own drafter, then the lookup branch and the
    corpus tree merged in.

    While the text copies its context (the last branch was at least max_tokens long and accepted
    whole), the head sits the step out and the branch is verified alone; what was committed
    meanwhile is handed to the head's drafter at its next call, so a drafter with a cache of its
    own (EAGLE's, a draft model's) misses nothing.
    """

    def __init__(self, head: HybridHead):
        inner = head.head
        self.inner = None if inner is None else inner.drafter() if hasattr(inner, "drafter") else copy.copy(inner)
        self.branch = Branch(head.max_tokens, head.max_ngram, head.stats, adapt=True, copy_tokens=head.copy_tokens)
        self.corpus = _CorpusTree(head.corpus, head.corpus_nodes, head.stats) if head.uses_corpus else None
        self.shared_nodes, self.sure, self.head_weight = head.shared_nodes, head.sure, head.head_weight
        self.head_continue = head.head_continue
        self.pending: DraftState | None = None  # what was committed while the head sat out
        self.free: list[list[int]] | None = None  # the head-free paths of the last step the head drafted

    def propose(self, state: DraftState, tree_or_spec) -> Proposal:
        self._credit_head(state)
        branch = self.branch.next(state, self.branch.copy_tokens)  # also brings the row's context index up to date
        if self.corpus:
            self.corpus.credit(state)
        stats = self.branch.stats
        if self.branch.copying:  # no corpus tree is drafted for a step that verifies the branch alone
            self._sit_out(state)
            stats.added += len(branch)
            stats.alone += 1
            return chain_proposal(branch, state.root.device)
        root = int(state.root[0])
        proposal, head = chain_proposal([], state.root.device), None  # head: the head's scored paths, to share
        corpus = None  # the corpus's scored paths in the shared budget, once drafted
        drafted = False  # whether the head drafted this step
        if self.inner is not None and self.sure and self.corpus.surest(self.branch.index.tokens, root) >= self.sure:
            self._sit_out(state)  # the corpus table is sure of the next token: the step drafts as without a head
            stats.sure += 1
        elif self.inner is not None:
            joined, self.pending, drafted = _joined(self.pending, state), None, True
            if not self.shared_nodes:
                proposal = self.inner.propose(joined, tree_or_spec)
            else:  # the corpus drafted first: its worst path is the floor the head's tree is not grown below
                corpus = self.corpus.scored(self.branch.index.tokens, root, self.shared_nodes)
                if hasattr(self.inner, "scored_paths"):  # its paths without the tree's tensors
                    head = self.inner.scored_paths(joined, tree_or_spec, self._floor(corpus))
                else:
                    proposal = self.inner.propose(joined, tree_or_spec)
                    if proposal.scores is not None and proposal.draft_probs is None:
                        proposal, head = chain_proposal([], state.root.device), scored_paths(proposal)
        # The shared tree's leaves first, then the branch, then the corpus tree's (none where the tree is shared).
        shared = self._shared(head, root, corpus) if head is not None else []
        paths = self.corpus.draft(self.branch.index.tokens, root) if self.corpus and head is None else []
        if drafted:  # what the step would have held without the head, to count what the head added
            free = leaves([p for p, _ in corpus]) if head is not None else list(paths)
            self.free = [*free, *([branch] if branch else [])]
        proposal, merges = merge_into(proposal, [*shared, *([branch] if branch else []), *paths])
        if branch:
            self.branch.shared = merges[len(shared)].shared
            stats.added += merges[len(shared)].added
        stats.corpus_added += sum(m.added for m in merges[len(shared) + bool(branch) :])
        return proposal

    def _credit_head(self, state: DraftState) -> None:
        """Count what the head added at the last step it drafted (`LookupStats.head_*`, the module docstring):
        the drafts the step accepted beyond the longest head-free path of that step, read along the accepted
        drafts and the bonus token after them (the target's own next token): a head-free path the head's
        nodes pushed out of a shared budget that matches the bonus too would have been accepted one draft
        further (a loss of at least one)."""
        if self.free is None:
            return
        truth = [*(state.committed[0, 1:].tolist() if state.start else []), int(state.root[0])]
        accepted = len(truth) - 1
        gain = accepted - max((common_prefix(path, truth) for path in self.free), default=0)
        stats = self.branch.stats
        stats.head_steps += 1
        stats.head_gain += gain
        stats.head_gained += gain > 0
        stats.head_lost += gain < 0
        self.free = None

    def _sit_out(self, state: DraftState) -> None:
        """The head drafts nothing this step; what is committed meanwhile reaches its drafter joined
        with its next call's (`pending`), so its cache misses nothing."""
        if self.inner is not None:
            self.pending = _joined(self.pending, state)

    def _floor(self, corpus: list[tuple[list[int], float]]) -> float:
        """The head's path probability below which none of its paths can take a place in the shared budget
        (`shared_tree`): the corpus already holds `shared_nodes` paths that score higher, and a path never
        scores above its parent, so the head need not grow its tree below it (0 where the corpus holds fewer).
        A hair under the cut, so that rounding never drops a path that ties with it."""
        if len(corpus) < self.shared_nodes:
            return 0.0
        return min(p for _, p in corpus) / self.head_weight * (1 - 1e-4)

    def _shared(self, head: list[tuple[list[int], float]], root: int, corpus: list[tuple[list[int], float]]) -> list[list[int]]:
        """The head's scored paths and the corpus's (`corpus`) competing for `shared_nodes` (`shared_tree`):
        the leaves of the tree they form; the corpus paths taken are kept to be credited."""
        head = [(path, p * self.head_weight) for path, p in head]
        if self.head_continue:  # the table's continuations of the head's paths compete too
            corpus = corpus + self.corpus.after(self.branch.index.tokens, root, head, self.head_continue)
        chosen = shared_tree(head, corpus, self.shared_nodes)
        from_corpus = {tuple(p) for p, _ in corpus}
        self.corpus.last = leaves([p for p in chosen if tuple(p) in from_corpus])
        self.branch.stats.corpus_added += len({tuple(p) for p in chosen} - {tuple(p) for p, _ in head})
        return leaves(chosen)


class HybridHead:
    """Any DraftHead (or none) with a prompt-lookup branch and a corpus tree merged into its tree
    each step (hybrid trees).

    It drafts row by row (each row follows its own context), through the head's `drafter()` when
    it has one, else a shallow copy of the head per row; it keeps the head's tree settings, kind
    (+ "+lookup"), feature layers, options, own tree and held-out accuracy. `corpus`: a
    heads.corpus.CorpusNgram (None, or corpus_nodes = 0: no corpus tree). Lossless as any tree:
    see the module docstring.
    """

    needs_features = True

    def __init__(self, head, max_tokens: int = 10, max_ngram: int = 2, copy_tokens: int = 0, corpus=None,
                 corpus_nodes: int = 8, shared_nodes: int = 0, sure: float = 0.0, tree: DynamicTreeSpec | None = None,
                 head_weight: float = 1.0, head_continue: int = 0):
        check_lookup_settings(max_tokens, max_ngram)
        self.head, self.max_tokens, self.max_ngram = head, max_tokens, max_ngram
        self.copy_tokens = max(copy_tokens, max_tokens)
        self.corpus, self.corpus_nodes = corpus, corpus_nodes
        # Only a head that scores its nodes shares, and only with a corpus tree.
        self.shared_nodes = shared_nodes if trait(head, "scores_drafts") and self.uses_corpus else 0
        if not head_weight > 0:
            raise ValueError(f"the head's weight in a shared tree must be > 0, got {head_weight!r}")
        self.head_weight = head_weight if self.shared_nodes else 1.0
        if isinstance(head_continue, bool) or not isinstance(head_continue, int) or head_continue < 0:
            raise ValueError(f"the table's continuation of the head's paths is a number of nodes >= 0, got {head_continue!r}")
        self.head_continue = head_continue if self.shared_nodes else 0  # 0: the table drafts from the root only
        self.sure = sure if head is not None and self.uses_corpus else 0.0  # 0: the head drafts at every step
        self.hybrid_tree = tree if trait(head, "dynamic") else None  # a dynamic head's tree here; None = its own
        self.kind = "corpus+lookup" if head is None else f"{head.kind}+lookup"
        self.dynamic = True if head is None else bool(trait(head, "dynamic"))
        self.feature_layers = tuple(trait(head, "feature_layers"))
        self.options = trait(head, "options")
        self.stats = LookupStats()
        self._own: HybridDrafter | None = None

    @property
    def draft_modules(self) -> tuple:
        """The torch modules of the head it drafts through (none without a head)."""
        return () if self.head is None else draft_modules(self.head)

    @property
    def uses_corpus(self) -> bool:
        return self.corpus is not None and self.corpus_nodes > 0

    @property
    def default_tree(self) -> TreeSpec | None:
        """The tree the head drafts here, read when a generator is made: a dynamic head's hybrid tree
        (`hybrid_tree`, decode.hybrid_tree) or the head's own (no head: the root alone)."""
        if self.head is None:
            return DynamicTreeSpec(depth=1, top_k=1, total_tokens=1)
        return self.hybrid_tree or trait(self.head, "default_tree")

    @property
    def held_out(self) -> HeldOutAccuracy | None:
        """The head's measured held-out accuracy."""
        return trait(self.head, "held_out")

    def lookup_settings(self) -> dict:
        """What to report beside τ."""
        settings = {"max_tokens": self.max_tokens, "max_ngram": self.max_ngram, "branch": True, "copy_tokens": self.copy_tokens}
        if self.uses_corpus:
            settings["corpus_nodes"] = self.corpus_nodes
            settings["corpus_order"] = self.corpus.order
        if self.shared_nodes:
            settings["shared_nodes"] = self.shared_nodes
        if self.sure:
            settings["sure"] = self.sure
        if self.head_weight != 1.0:
            settings["head_weight"] = self.head_weight
        if self.head_continue:
            settings["head_continue"] = self.head_continue
        if self.head is None:
            settings["head"] = False
        return settings

    def drafter(self) -> HybridDrafter:
        return HybridDrafter(self)

    def propose(self, state: DraftState, tree_or_spec) -> Proposal:
        if state.start == 0 or self._own is None:
            self._own = self.drafter()
        return self._own.propose(state, tree_or_spec)


def head_stats(head) -> LookupStats | None:
    """The stats where a hybrid that drafts with a head counts what its head added (`LookupStats.head_*`);
    None for any other head, a head-free hybrid included."""
    return head.stats if isinstance(head, HybridHead) and head.head is not None else None


@dataclass(frozen=True)
class HybridSettings:
    """What hybrid trees draft beside a head: the recipe's decode fields of the same names
    (headstart/config.py's DecodeConfig, where each has its help), read once."""

    prompt_lookup: int = 0  # tokens of the lookup branch; 0 = no hybrid tree, the head as it is
    lookup_ngram: int = 2  # the longest n-gram of the newest tokens matched in the context
    lookup_copy: int = 0  # the longest branch while the text copies its context
    corpus_draft: int = 0  # nodes of the corpus tree (0 = none)
    hybrid_nodes: int = 0  # nodes a scoring head's tree and the corpus tree share (0 = the head's tree whole)
    hybrid_sure: float = 0.0  # the head sits out steps the corpus table is this sure of (0 = never)
    hybrid_tree: tuple[int, ...] = ()  # (depth, top_k, total_tokens) an EAGLE head drafts in a hybrid; () = its own tree
    hybrid_head_weight: float = 1.0  # the head's path probabilities are multiplied by this in the shared tree
    hybrid_continue: int = 0  # nodes of the table's continuation after each of the head's paths in the shared tree

    @classmethod
    def from_decode(cls, decode) -> HybridSettings:
        """The settings of a recipe's decode section."""
        return cls(**{f.name: (tuple(v) if isinstance(v := getattr(decode, f.name), list) else v) for f in fields(cls)})


def with_lookup(head, settings: HybridSettings, corpus=None):
    """`head` (None: no head) as a hybrid (`HybridHead`) with `settings`' lookup branches and corpus
    trees from `corpus`, by default the table the head carries (`head.corpus`, saved by training);
    the head as it is when settings.prompt_lookup is 0."""
    if not settings.prompt_lookup:
        return head
    corpus = trait(head, "corpus") if corpus is None else corpus
    tree = DynamicTreeSpec(*settings.hybrid_tree) if settings.hybrid_tree else None
    return HybridHead(head, settings.prompt_lookup, settings.lookup_ngram, settings.lookup_copy, corpus,
                      settings.corpus_draft, settings.hybrid_nodes, settings.hybrid_sure, tree, settings.hybrid_head_weight,
                      settings.hybrid_continue)


def verified_bounds(settings: dict) -> tuple[int, int]:
    """(deepest draft, most draft nodes) one verification may hold, from a generator's tree settings
    with a head's `lookup` block: a hybrid's branch of L tokens reaches depth L and adds at most L
    nodes, its corpus tree of C nodes at most C deep (a shared tree of S nodes: at most S nodes, S
    deep); while the text copies its context the branch runs alone, up to copy_tokens long."""
    lookup = settings.get("lookup")
    if not lookup or not lookup["branch"]:
        return settings["depth"], settings["size"]
    head_depth, head_size = (settings["depth"], settings["size"]) if lookup.get("head", True) else (0, 0)
    corpus = max(lookup.get("corpus_nodes", 0), lookup.get("shared_nodes", 0))
    longest = lookup.get("copy_tokens", lookup["max_tokens"])
    depth = max(head_depth, lookup["max_tokens"], corpus, longest)
    return depth, max(head_size + lookup["max_tokens"] + corpus, longest)
