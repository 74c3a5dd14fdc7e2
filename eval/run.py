"""`headstart eval`: acceptance and speed of one or more heads against plain decoding and peers, in one run.

For every held-out prompt (and every later turn of a multi-turn question) and every temperature:
plain decoding (headstart's loop: the baseline), speculative decoding with each head, HF
`generate` (plain and prompt lookup) and, when a draft model is named, HF assisted generation,
all in the same process with the same target, dtype, thread count, EOS set and token budget.

Writes <output>.json (schema in docs/eval.md, `schema_version`), .md (tables), .png (acceptance
per depth, accepted-length histogram, tokens/s) and .html (every verification step coloured).
τ counts the bonus token (plain decoding = 1.00); see eval/acceptance.py for vLLM's and SGLang's counts.
"""

from __future__ import annotations

import json
import platform
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from headstart.chat import encode_chat
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.contract import trait
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.hybrid import verified_bounds
from headstart.decode.lookup import common_prefix
from headstart.decode.sampling import Sampling
from headstart.decode.verify import acceptance_length
from headstart.eval.acceptance import acceptance_stats, free_drafter_bound, round_floats, varying_drafter_bound
from headstart.eval.methods import Methods, build_methods
from headstart.eval.prompts import EvalPrompt, load_eval_prompts
from headstart.eval.report import format_table, head_margin, write_outputs
from headstart.eval.speed import Decoded, EvalError, relative_forward_cost
from headstart.target import cpu_kind

SCHEMA_VERSION = 1
__all__ = ["SCHEMA_VERSION", "evaluate", "format_table"]


def _named_heads(heads) -> dict:
    """{label: head} from one head, a list of heads or a dict; a label names a head in every output."""
    if isinstance(heads, dict):
        return dict(heads)
    heads = list(heads) if isinstance(heads, (list, tuple)) else [heads]
    named: dict = {}
    for h in heads:
        label = h.kind if h.kind not in named else f"{h.kind}-{len(named) + 1}"
        named[label] = h
    return named


def _check_labels(named: dict) -> None:
    """No head may carry a baseline's name: labels name methods in every output."""
    clash = set(named) & {"plain", "hf_generate", "hf_prompt_lookup", "hf_assisted"}
    if clash:
        raise EvalError(f"a head may not be labelled {sorted(clash)[0]!r}: that names a baseline; pick another label")


def _head_info(label: str, heads) -> dict:
    options = trait(heads, "options")
    return {
        "label": label,
        "kind": heads.kind,
        "options": {k: v for k, v in options.items() if not isinstance(v, (dict, list))},
    }


@dataclass
class Turn:
    """One turn of one prompt as one method decoded it, beside plain decoding's tokens (the reference)."""

    prompt: EvalPrompt
    index: int  # 0: the prompt's first question; i: its i-th follow-up
    decoded: Decoded
    plain: list[int]  # plain decoding's new tokens for the same turn


@dataclass
class Decodings:
    """Every decoded turn, and the heads' steps that the HTML report colours."""

    turns: dict[float, dict[str, list[Turn]]]  # temperature -> method -> turns, in decoding order
    traces: list[dict]  # one per head and turn: its messages, tokens and verification steps


def evaluate(
    target,
    heads,
    decode: DecodeConfig,
    cfg: EvalConfig,
    tree=None,
    peers: bool | None = None,
    progress: bool = True,
    prompts: list[EvalPrompt] | None = None,
    warmup: bool = True,
    given: Collection[str] = (),
) -> dict:
    """Decode the held-out prompts with every method at every temperature; returns the report.

    heads: one head, a list, or {label: head}. Each head decodes with its own saved or tuned tree
    unless `given` names decode fields set on the command line (those win) or `tree` is passed (it
    replaces decode.tree, as `--tree` does); a head without a tree takes the decode section's.
    The report records each head's tree and its source ('command', 'head', 'recipe').
    prompts: use these instead of reading cfg.prompts. The report (docs/eval.md) is also written
    as JSON, Markdown, PNG and HTML beside cfg.output when that is set.
    """
    if target.tokenizer is None:
        raise EvalError("evaluation needs the target's tokenizer (Target(model, tokenizer))")
    named = _named_heads(heads)
    _check_labels(named)
    if peers is not None:
        cfg = replace(cfg, peers=peers)
    temperatures = _temperatures(cfg)
    files = cfg.prompts if prompts is None else ""  # the report names no files for prompts handed over in code
    if prompts is None:
        prompts = load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)
    if tree is not None:
        decode, given = replace(decode, tree=tree), {*given, "tree"}
    methods = build_methods(target, named, decode, cfg, frozenset(given))
    if warmup:
        methods.warm_up()
    decoded = _decode_all(methods, prompts, temperatures, progress)
    report = _report(methods, decoded, _prompt_info(files, prompts, cfg.max_new_tokens))
    if cfg.output:
        write_outputs(report, decoded.traces, target.tokenizer, Path(cfg.output))
    return report


def _temperatures(cfg: EvalConfig) -> list[float]:
    """cfg.temperatures without repeats, in order (greedy alone when empty); each must be >= 0."""
    temperatures = list(dict.fromkeys(float(t) for t in cfg.temperatures)) or [0.0]
    if any(t < 0 for t in temperatures):
        raise EvalError(f"temperatures must be >= 0, got {temperatures}")
    return temperatures


def _decode_all(methods: Methods, prompts: list[EvalPrompt], temperatures: list[float], progress: bool) -> Decodings:
    """Every turn of every prompt by every method, at every temperature (a prompt's seed: cfg.seed + its index)."""
    decoded = Decodings(turns={}, traces=[])
    bar = tqdm(total=_turn_count(prompts) * len(temperatures), desc="eval", unit="turn", disable=not progress)
    for temperature in temperatures:
        decoded.turns[temperature] = {m: [] for m in methods.names}
        for i, p in enumerate(prompts):
            seed = methods.cfg.seed + i if temperature > 0 else None
            _decode_conversation(methods, p, Sampling(temperature), seed, decoded, bar)
    bar.close()
    return decoded


def _decode_conversation(methods: Methods, p: EvalPrompt, s: Sampling, seed: int | None, decoded: Decodings, bar: tqdm) -> None:
    """One prompt's turns, each by every method, added to `decoded`; a later turn follows the
    target's own (plain) answer to the one before, so every method answers the same conversation."""
    tokenizer = methods.target.tokenizer
    messages = list(p.messages)
    for turn in range(1 + len(p.followups)):
        ids = encode_chat(tokenizer, messages).to(methods.target.device)
        outs = {m: methods.decode(m, ids, s, seed) for m in methods.names}
        for m in methods.names:
            decoded.turns[s.temperature][m].append(Turn(prompt=p, index=turn, decoded=outs[m], plain=outs["plain"].tokens))
        for label in methods.gens:
            decoded.traces.append({
                "temperature": s.temperature, "head": label, "id": p.id, "category": p.category, "turn": turn,
                "messages": messages, "tokens": outs[label].tokens, "steps": outs[label].steps,
                "plain_tokens": outs["plain"].tokens,
            })
        if turn < len(p.followups):
            answer = tokenizer.decode(outs["plain"].tokens, skip_special_tokens=True)
            messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": p.followups[turn]}]
        bar.update(1)


def _report(methods: Methods, decoded: Decodings, prompt_info: dict) -> dict:
    """The report (schema in docs/eval.md): what ran on what, then each method's summary and every
    turn's row at each temperature; floats rounded."""
    target, gens, cfg = methods.target, methods.gens, methods.cfg
    verify_tokens = methods.verify_tokens()
    sizes = set(verify_tokens.values())
    if any(_varies(methods, label) for label in gens):  # lookup drafts: price each step on the cost curve
        sizes |= {n for n in COST_GRID if n < max(sizes)} | {1}
    cost = relative_forward_cost(target, sorted(sizes)) if gens else {}
    report = {
        "schema_version": SCHEMA_VERSION,
        "target": {"name": target.name, "dtype": str(target.dtype).replace("torch.", ""), "vocab_size": target.vocab_size},
        "machine": _machine(target),
        "prompts": prompt_info,
        "sampling": {"temperatures": list(decoded.turns), "seed": cfg.seed, "top_p": 1.0, "top_k": 0},
        "heads": [{**_head_info(label, methods.heads[label]), "tree": methods.tree(label)} for label in gens],
        "forward_cost": {str(n): c for n, c in cost.items()},
        "results": [_result(t, [_summarise(m, turns, by_method["plain"], methods, cost, t) for m, turns in by_method.items()],
                            methods) for t, by_method in decoded.turns.items()],
        "rows": [_row(t, m, turn) for t, by_method in decoded.turns.items() for m, turns in by_method.items() for turn in turns],
    }
    return round_floats(report)


def _machine(target) -> dict:
    import transformers

    return {
        "threads": torch.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
        "device": str(target.device),
        "cpu": cpu_kind(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def _turn_count(prompts: list[EvalPrompt]) -> int:
    """Turns per method and temperature: each prompt's first question and its follow-ups."""
    return sum(1 + len(p.followups) for p in prompts)


def _prompt_info(files: str, prompts: list[EvalPrompt], max_new_tokens: int) -> dict:
    """What was decoded; `files` is empty when the prompts were handed over in code."""
    categories: dict[str, int] = defaultdict(int)
    for p in prompts:
        categories[p.category] += 1
    return {
        "files": [f.strip() for f in str(files).split(",") if f.strip()],
        "count": len(prompts),
        "turns": _turn_count(prompts),
        "max_new_tokens": max_new_tokens,
        "categories": dict(sorted(categories.items())),
    }


def _row(t: float, method: str, turn: Turn) -> dict:
    """One turn of one method at temperature t, as the report's rows list it."""
    d = turn.decoded
    steps = d.accepted_per_step
    return {
        "temperature": t,
        "method": method,
        "id": turn.prompt.id,
        "category": turn.prompt.category,
        "turn": turn.index,
        "new_tokens": len(d.tokens),
        "seconds": d.seconds,
        "tau": acceptance_length(steps) if steps else None,
        "match": d.tokens == turn.plain if t == 0 else None,
    }


def _rate(turns: list[Turn]) -> tuple[int, float]:
    """New tokens and seconds summed over `turns`."""
    tokens = sum(len(t.decoded.tokens) for t in turns)
    seconds = sum(t.decoded.seconds for t in turns)
    return tokens, seconds


def _result(temperature: float, summaries: list[dict], methods: Methods) -> dict:
    """One temperature's `result`: its methods, and the head's margin over head-free decoding."""
    kinds = {label: h.kind for label, h in methods.heads.items()}
    return {"temperature": temperature, "methods": summaries, "head_margin": head_margin(summaries, kinds)}


def _summarise(method: str, turns: list[Turn], plain_turns: list[Turn], methods: Methods, cost: dict[int, float], temperature: float) -> dict:
    """One method at one temperature: speed, speedup, acceptance, greedy match and the bound."""
    cfg = methods.cfg
    tokens, seconds = _rate(turns)
    p_tokens, p_seconds = _rate(plain_turns)
    plain_tps = p_tokens / p_seconds if p_seconds else 0.0
    tps = tokens / seconds if seconds else 0.0
    gen = methods.gens.get(method)
    entry = {
        "method": method if gen is None else "headstart",
        "label": method,
        "tree": methods.tree(method) if gen else None,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tps,
        "speedup": tps / plain_tps if plain_tps else None,
        "target_forwards": None,
        "acceptance": None,
        "bound": None,
        "head_gain": None,
        "greedy_match": None,
        "per_category": {},
    }
    if method == "hf_prompt_lookup":
        entry["peer_options"] = {"prompt_lookup_num_tokens": cfg.prompt_lookup_tokens}
    elif method == "hf_assisted":
        entry["peer_options"] = {"assistant_model": cfg.assistant}
    else:
        entry["peer_options"] = None
    if gen is not None:
        drafted = sum(s["tree_size"] for t in turns for s in t.decoded.steps)
        stats = acceptance_stats(_accepted(turns), verified_bounds(gen.tree_settings())[0], drafted)
        entry["target_forwards"] = stats["steps"] + len(turns)  # verifications plus one prefill per turn
        entry["acceptance"] = stats
        verified = [s["tree_size"] + 1 for t in turns for s in t.decoded.steps] if _varies(methods, method) else None
        entry["bound"] = _bound(stats["tau"], cost, methods.verify_tokens()[method], entry["speedup"], verified or None)
        gains = [t.decoded.head_gain for t in turns if t.decoded.head_gain is not None]
        if gains:
            entry["head_gain"] = _head_gain(gains, stats)
    if temperature == 0:
        entry["greedy_match"] = _greedy_match(turns)
    entry["per_category"] = _per_category(turns, plain_turns, gen)
    return entry


def _head_gain(gains: list[dict], stats: dict) -> dict:
    """What a hybrid's head added on its own steps (decode/hybrid.py), summed over the turns, and the τ
    the head-free paths of the same steps would have given."""
    total = {k: sum(g[k] for g in gains) for k in gains[0]}
    return {
        "head_steps": total["head_steps"],
        "gained_steps": total["head_gained"],
        "lost_steps": total["head_lost"],
        "drafts": total["head_gain"],
        "tau_without_head": stats["tau"] - total["head_gain"] / stats["steps"] if stats["steps"] else None,
    }


def _accepted(turns: list[Turn]) -> list[int]:
    """Drafts accepted at each verification step, over every turn."""
    return [a for t in turns for a in t.decoded.accepted_per_step]


COST_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # sizes measured for methods whose tree size varies


def _varies(methods: Methods, label: str) -> bool:
    """Whether a method's verifications feed different numbers of tokens (a lookup chain or branch)."""
    return bool(methods.tree(label).get("lookup"))


def _bound(tau: float, cost: dict[int, float], verify_tokens: int, real: float | None, verified: list[int] | None = None) -> dict:
    """The speedup a free drafter would reach at this τ, beside the real one and the share drafting lost
    (`verified`: each step's tokens, for a method whose tree size varies)."""
    bound = varying_drafter_bound(tau, cost, verified) if verified else free_drafter_bound(tau, cost, verify_tokens)
    bound["real_speedup"] = real
    bound["lost_to_drafting"] = 1 - real / bound["free_drafter_speedup"] if real else None
    return bound


def _greedy_match(turns: list[Turn]) -> dict:
    """At temperature 0: how many turns equal plain decoding's, and the mean length they agree for."""
    matched = [t.decoded.tokens == t.plain for t in turns]
    agree = [common_prefix(t.decoded.tokens, t.plain) for t in turns]
    return {
        "reference": "plain",
        "matched": sum(matched),
        "of": len(matched),
        "rate": sum(matched) / len(matched) if matched else None,
        "mean_agree_prefix": sum(agree) / len(agree) if agree else None,
    }


def _per_category(turns: list[Turn], plain_turns: list[Turn], gen: SpeculativeGenerator | None) -> dict:
    """Speedup (tokens/s ratio: bf16 outputs may differ in length) and τ per prompt category."""
    groups: dict[str, list[Turn]] = defaultdict(list)
    plain_groups: dict[str, list[Turn]] = defaultdict(list)
    for t in turns:
        groups[t.prompt.category].append(t)
    for t in plain_turns:
        plain_groups[t.prompt.category].append(t)
    out = {}
    for cat in sorted(groups):
        tokens, seconds = _rate(groups[cat])
        p_tokens, p_seconds = _rate(plain_groups[cat])
        steps = _accepted(groups[cat])
        out[cat] = {
            "turns": len(groups[cat]),
            "tokens_per_s": tokens / seconds if seconds else 0.0,
            "speedup": (tokens / seconds) / (p_tokens / p_seconds) if seconds and p_tokens else None,
            "tau": acceptance_length(steps) if gen is not None and steps else None,
        }
    return out


def load_report(path: str | Path) -> dict:
    """Read a report back, refusing one of another schema version."""
    report = json.loads(Path(path).read_text())
    if report.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {report.get('schema_version')!r}, this headstart reads {SCHEMA_VERSION}")
    return report
