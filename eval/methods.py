"""The methods `headstart eval` compares, and how each decodes one turn.

Every method decodes the same input ids with the same target, EOS set and token budget (the
timed decoding itself is in eval/speed.py): plain decoding (headstart's loop, the baseline),
speculative decoding with each head, HF `generate` plain and with prompt lookup (`peers`), and HF
assisted generation when a draft model is named.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from headstart.chat import encode_chat
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.contract import trait
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.hybrid import HybridHead, HybridSettings, head_stats, verified_bounds, with_lookup
from headstart.decode.lookup import LookupHead
from headstart.decode.sampling import Sampling
from headstart.decode.tune import tree_options
from headstart.eval.speed import Decoded, EvalError, eos_ids, load_assistant, run_hf, run_plain, run_speculative
from headstart.target import Target


@dataclass
class Methods:
    """What decodes each turn, all with the same target, EOS set and token budget: plain decoding
    (the baseline), speculative decoding with each head, and HF's peers when asked for."""

    target: Target
    heads: dict[str, object]  # label -> head
    gens: dict[str, SpeculativeGenerator]  # label -> its generator
    tree_sources: dict[str, str]  # label -> where its tree came from: 'command', 'head' or 'recipe' (tune.tree_options)
    assistant: object | None  # the draft model of HF assisted generation (cfg.assistant), or None
    eos: list[int]
    cfg: EvalConfig

    @property
    def names(self) -> list[str]:
        """Every method, in the report's order."""
        names = ["plain", *self.gens]
        if self.cfg.peers:
            names += ["hf_generate", "hf_prompt_lookup"]
        if self.assistant is not None:
            names.append("hf_assisted")
        return names

    def decode(self, method: str, ids: torch.Tensor, s: Sampling, seed: int | None = None) -> Decoded:
        """One turn's answer (ids: (1, T)) by `method`, up to cfg.max_new_tokens new tokens; sampled
        from `seed` when s is not greedy."""
        target, n, eos = self.target, self.cfg.max_new_tokens, self.eos
        if method == "plain":
            return run_plain(target, ids, n, s, eos, seed)
        if method in self.gens:
            stats = head_stats(self.gens[method].head)
            if stats is None:
                return run_speculative(self.gens[method], ids, n, s, eos, seed)
            before = _head_counts(stats)
            out = run_speculative(self.gens[method], ids, n, s, eos, seed)
            out.head_gain = {k: v - before[k] for k, v in _head_counts(stats).items()}  # what the head added on this decode's steps
            return out
        if method == "hf_generate":
            return run_hf(target, ids, n, s, eos, seed)
        if method == "hf_prompt_lookup":
            return run_hf(target, ids, n, s, eos, seed, prompt_lookup_num_tokens=self.cfg.prompt_lookup_tokens)
        return run_hf(target, ids, n, s, eos, seed, assistant_model=self.assistant)

    def warm_up(self) -> None:
        """One short decode per method, so that one-time costs do not land on the first prompt."""
        target, eos, s = self.target, self.eos, Sampling()
        ids = encode_chat(target.tokenizer, [{"role": "user", "content": "Hello"}])
        run_plain(target, ids, 4, s, eos)
        for gen in self.gens.values():
            run_speculative(gen, ids, 4, s, eos)
        if self.cfg.peers:
            run_hf(target, ids, 4, s, eos)
        if self.assistant is not None:
            run_hf(target, ids, 4, s, eos, assistant_model=self.assistant)

    def tree(self, label: str) -> dict:
        """What a report records with head `label`'s τ: its generator's tree settings and where they came from."""
        return {**self.gens[label].tree_settings(), "source": self.tree_sources[label]}

    def verify_tokens(self) -> dict[str, int]:
        """label -> tokens one verification forward of that head's tree feeds the target (nodes + root;
        a hybrid's lookup branch counted at its longest)."""
        return {label: verified_bounds(gen.tree_settings())[1] + 1 for label, gen in self.gens.items()}


HEAD_GAIN_FIELDS = ("head_steps", "head_gained", "head_lost", "head_gain")


def _head_counts(stats) -> dict[str, int]:
    return {k: getattr(stats, k) for k in HEAD_GAIN_FIELDS}


def build_methods(target: Target, named: dict, decode: DecodeConfig, cfg: EvalConfig, given: frozenset[str] = frozenset()) -> Methods:
    """A generator per head with its own tree (`tune.tree_options`: the decode fields in `given`,
    set on the command line, > the head's saved or tuned tree > the decode section), HF assisted
    generation's draft model when cfg.assistant names one, and the EOS set. With
    decode.prompt_lookup > 0, each head also runs as a hybrid ('<label>+lookup', with corpus trees
    when the head carries a corpus table and decode.corpus_draft > 0), and prompt lookup alone
    ('lookup', a chain of decode.prompt_lookup tokens) and, with a corpus table, lookup and corpus
    trees without a head ('corpus+lookup') run in headstart's loop."""
    named = _with_lookup(named, decode)
    gens, sources = {}, {}
    for label, h in named.items():
        if isinstance(h, LookupHead) or (isinstance(h, HybridHead) and h.head is None):  # no head: no tree to choose
            gens[label], sources[label] = SpeculativeGenerator(target, h), "command" if "prompt_lookup" in given else "recipe"
        else:
            options, sources[label] = tree_options(h, decode, given)
            gens[label] = SpeculativeGenerator(target, h, draft_int8=decode.draft_int8, **options)
    assistant = load_assistant(cfg.assistant, target) if cfg.assistant else None
    return Methods(target=target, heads=named, gens=gens, tree_sources=sources, assistant=assistant, eos=eos_ids(target), cfg=cfg)


def _with_lookup(named: dict, decode: DecodeConfig) -> dict:
    """The heads, then (decode.prompt_lookup > 0) each as a hybrid with lookup branches, then lookup alone."""
    if not decode.prompt_lookup:
        return named
    if "lookup" in named or any(label.endswith("+lookup") for label in named):
        raise EvalError("with decode.prompt_lookup > 0, 'lookup' and '<label>+lookup' name the lookup methods; relabel the head")
    settings = HybridSettings.from_decode(decode)
    hybrids = {f"{label}+lookup": with_lookup(h, settings) for label, h in named.items()}
    corpus = next((h.corpus for h in named.values() if trait(h, "corpus") is not None), None)
    free = {"corpus+lookup": with_lookup(None, settings, corpus)} if corpus is not None and settings.corpus_draft else {}
    return {**named, **hybrids, "lookup": LookupHead(settings.prompt_lookup, settings.lookup_ngram), **free}

