"""The contract between the decoding loop and a draft head: what a new head kind implements.

The loop (`decode/generate.py`) knows a head only through `DraftHead`: a `kind` name and
`propose(state, tree_or_spec) -> Proposal`. Before each verification it hands the head a
`DraftState` (the target's last hidden state, the root token and, for heads that ask for them,
the features of the positions committed since the previous call); it verifies the `Proposal`
it gets back in one target forward. Heads do not inherit from anything: having the attributes
is enough. Training, checkpoints and export are `headstart.heads`' business, not this contract's
(a head that trains and saves is registered in `headstart.heads.REGISTRY`).

A minimal static head, complete: it drafts the root token again at every node. Its τ stays near
1.00, but decoding with it is lossless, as with any head.

    from headstart.decode.contract import DraftState, Proposal
    from headstart.decode.tree import Tree

    class RepeatHead:
        kind = "repeat"

        def propose(self, state: DraftState, tree: Tree) -> Proposal:
            tokens = state.root[:, None].expand(-1, tree.size)  # (B, N): every node drafts the root
            return Proposal(tokens=tokens, tree=tree)

    gen = SpeculativeGenerator(target, RepeatHead(), tree="tree8")

A dynamic head (EAGLE-2) sets `dynamic = True`, receives a `DynamicTreeSpec` instead of a tree,
grows its tree with `decode/dynamic.py` (`grow_tree`, then `select_dynamic_tree`) and returns
that tree in its Proposal; `heads/drafting.py` and `decode/draft_model.py` are two such heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.tree import StaticTreeSpec, Tree

#: a head's own tree (`default_tree`): a static tree's paths, or the budget a dynamic head grows its tree within
TreeSpec = StaticTreeSpec | DynamicTreeSpec


@dataclass
class DraftState:
    """What the decoding loop tells a head before each proposal.

    A head that drafts for the whole batch (Medusa) gets hidden and root for all unfinished rows
    (B rows); a head that drafts row by row gets one row (B = 1) with features and committed.
    features/committed cover the target positions committed since the previous call: the whole
    prompt at prefill (start == 0), then the accepted path [root, drafts...] of each step.
    """

    hidden: torch.Tensor  # (B, D) target's last hidden state at the last committed position
    root: torch.Tensor  # (B,) the token the target chose next (the root of the next tree)
    features: torch.Tensor | None = None  # (B, n, F) features at the n newly committed positions
    committed: torch.Tensor | None = None  # (B, n) token ids at those positions
    start: int = 0  # absolute position of committed[:, 0]; 0 means a new sequence

    def next_tokens(self) -> torch.Tensor:
        """(B, n) the token after each committed position: committed[:, 1:] then the root."""
        return torch.cat([self.committed[:, 1:], self.root[:, None]], dim=1)


@dataclass
class Proposal:
    """A head's draft: one token per tree node (nodes 1..N, the root excluded).

    draft_probs, when given, is the distribution (B, N, V) each node's token was *sampled* from
    (its parent's draft distribution); without it, drafts are deterministic choices (q = 1 on the
    token), which verification treats exactly. scores, when given, is the head's own estimate
    (B, N) that each node's path from the root is accepted (the product of its draft
    probabilities along the path): hybrid trees rank the head's nodes against the corpus's by it.
    """

    tokens: torch.Tensor  # (B, N)
    tree: Tree
    draft_probs: torch.Tensor | None = None
    scores: torch.Tensor | None = None  # (B, N)


@runtime_checkable
class DraftHead(Protocol):
    """What the decoding loop needs of a head (structural: heads do not inherit from it).

    Optional attributes: `dynamic` (True: the head grows its own tree within a DynamicTreeSpec
    and returns it in the Proposal), `feature_layers` (target layers whose outputs, concatenated,
    form DraftState.features; empty: the final hidden state), `needs_features` (fill features
    and committed at all; dynamic heads imply it), `drafter()` (a fresh drafting state for one
    sequence, an object with `propose`: the engine makes one per row of a batch), `options` (a
    dict of the head's architecture options: "num_heads", the deepest static tree it can fill),
    `default_tree` (a `TreeSpec`: the tree to decode with unless told otherwise) and `held_out`
    (a `HeldOutAccuracy`: the measured per-depth top-k accuracy that `tree="auto"` builds a tree from)
    and `scores_drafts` (True: its greedy proposals carry `scores`).

    How a batch is drafted: with `drafter()`, one drafter per row; else a static head without
    `needs_features` drafts for all rows in one call (B rows in, tokens (B, N) out); else the
    engine drafts row by row through a shallow copy of the head per row.
    """

    kind: str

    def propose(self, state: DraftState, tree) -> Proposal:
        """Draft a token for every node of a static `tree`, or grow a tree within a DynamicTreeSpec."""
        ...


#: Everything beyond `kind` and `propose` that decoding, tuning and evaluation read from a head, and
#: what a head without the attribute (or with None) means. `trait` is the one place that reads them.
#: Set on a head from outside, each in one place: `held_out` by the trainer, `default_tree` by
#: heads/results.py, `corpus` (the training answers' n-gram table, decode/corpus.py) by checkpoint loading.
OPTIONAL_TRAITS: dict[str, object] = {
    "dynamic": False,  # grows its own tree within a DynamicTreeSpec
    "feature_layers": (),  # target layers whose outputs form DraftState.features (empty: the last hidden state)
    "feature_linears": (),  # attribute names of its Linears over the target's hidden states (kept out of int8)
    "needs_features": False,  # fill DraftState.features and committed (dynamic heads imply it)
    "options": {},  # the head's architecture options ("num_heads": the deepest static tree it fills)
    "default_tree": None,  # a TreeSpec: the tree it decodes with unless told otherwise
    "held_out": None,  # a HeldOutAccuracy: the per-depth top-k accuracy tree="auto" builds from
    "scores_drafts": False,  # its greedy proposals carry `scores` (hybrid trees share a budget by them)
    "parallel_tokens": None,  # a parallel-drafting head's K: no tree deeper than K
    "corpus": None,  # the n-gram table of its training answers, for hybrid trees
    "lookup_settings": None,  # a hybrid's or lookup head's settings, reported beside τ (a method)
    "draft_modules": (),  # the torch modules a wrapper drafts through (a hybrid's head); a Module head is its own
    "hybrid_tree": None,  # a hybrid's DynamicTreeSpec for its dynamic head (decode.hybrid_tree), whole over the command's fields
}


def trait(head, name: str):
    """`head`'s optional attribute `name` (one of OPTIONAL_TRAITS), or what its absence means."""
    default = OPTIONAL_TRAITS[name]
    value = getattr(head, name, None)
    if value is None:
        return dict(default) if isinstance(default, dict) else default
    return value
