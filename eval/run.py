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
from dataclasses import replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from headstart.chat import encode_chat
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.verify import acceptance_length
from headstart.eval.acceptance import acceptance_stats, free_drafter_bound, round_floats
from headstart.eval.prompts import EvalPrompt, load_eval_prompts
from headstart.eval.report import format_table, write_outputs
from headstart.eval.speed import (
    Decoded,
    EvalError,
    Sampling,
    eos_ids,
    load_assistant,
    relative_forward_cost,
    run_hf,
    run_plain,
    run_speculative,
)

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


def _head_info(label: str, heads) -> dict:
    options = getattr(heads, "options", {}) or {}
    return {
        "label": label,
        "kind": heads.kind,
        "options": {k: v for k, v in options.items() if k not in ("accuracy", "tree") and not isinstance(v, (dict, list))},
    }


def _warm_up(target, gens: dict, assistant, cfg: EvalConfig, eos: list[int]) -> None:
    """One short decode per method, so that one-time costs do not land on the first prompt."""
    ids = encode_chat(target.tokenizer, [{"role": "user", "content": "Hello"}])
    s = Sampling()
    run_plain(target, ids, 4, s, eos)
    for gen in gens.values():
        run_speculative(gen, ids, 4, s, eos)
    if cfg.peers:
        run_hf(target, ids, 4, s, eos)
    if assistant is not None:
        run_hf(target, ids, 4, s, eos, assistant_model=assistant)


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
) -> dict:
    """Decode the held-out prompts with every method at every temperature; returns the report.

    heads: one head, a list, or {label: head}. tree overrides decode.tree for static heads.
    prompts: use these instead of reading cfg.prompts. The report (docs/eval.md) is also written
    as JSON, Markdown, PNG and HTML beside cfg.output when that is set.
    """
    if target.tokenizer is None:
        raise EvalError("evaluation needs the target's tokenizer (Target(model, tokenizer))")
    named = _named_heads(heads)
    clash = set(named) & {"plain", "hf_generate", "hf_prompt_lookup", "hf_assisted"}
    if clash:
        raise EvalError(f"a head may not be labelled {sorted(clash)[0]!r}: that names a baseline; pick another label")
    if peers is not None:
        cfg = replace(cfg, peers=peers)
    temperatures = list(dict.fromkeys(float(t) for t in cfg.temperatures)) or [0.0]
    if any(t < 0 for t in temperatures):
        raise EvalError(f"temperatures must be >= 0, got {temperatures}")
    given = prompts
    if prompts is None:
        prompts = load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)
    gens = {label: SpeculativeGenerator(
        target, h, tree=tree or decode.tree, tree_size=decode.tree_size,
        depth=decode.depth, top_k=decode.top_k, total_tokens=decode.total_tokens,
    ) for label, h in named.items()}
    assistant = load_assistant(cfg.assistant, target) if cfg.assistant else None
    eos = eos_ids(target)
    if warmup:
        _warm_up(target, gens, assistant, cfg, eos)

    methods = ["plain", *gens]
    if cfg.peers:
        methods += ["hf_generate", "hf_prompt_lookup"]
    if assistant is not None:
        methods.append("hf_assisted")

    def decode_with(method: str, ids: torch.Tensor, s: Sampling) -> Decoded:
        n = cfg.max_new_tokens
        if method == "plain":
            return run_plain(target, ids, n, s, eos)
        if method in gens:
            return run_speculative(gens[method], ids, n, s, eos)
        if method == "hf_generate":
            return run_hf(target, ids, n, s, eos)
        if method == "hf_prompt_lookup":
            return run_hf(target, ids, n, s, eos, prompt_lookup_num_tokens=cfg.prompt_lookup_tokens)
        return run_hf(target, ids, n, s, eos, assistant_model=assistant)

    turns_total = sum(1 + len(p.followups) for p in prompts)
    # results[temperature][method] = list of (prompt, turn, Decoded, plain tokens)
    results: dict[float, dict[str, list]] = {}
    traces: list[dict] = []
    bar = tqdm(total=turns_total * len(temperatures), desc="eval", unit="turn", disable=not progress)
    for temperature in temperatures:
        per_method: dict[str, list] = {m: [] for m in methods}
        for i, p in enumerate(prompts):
            messages = list(p.messages)
            for turn in range(1 + len(p.followups)):
                ids = encode_chat(target.tokenizer, messages).to(target.device)
                s = Sampling(temperature=temperature, seed=cfg.seed + i if temperature > 0 else None)
                outs = {m: decode_with(m, ids, s) for m in methods}
                for m in methods:
                    per_method[m].append((p, turn, outs[m], outs["plain"].tokens))
                for label in gens:
                    traces.append({
                        "temperature": temperature, "head": label, "id": p.id, "category": p.category, "turn": turn,
                        "messages": messages, "tokens": outs[label].tokens, "steps": outs[label].steps,
                        "plain_tokens": outs["plain"].tokens,
                    })
                if turn < len(p.followups):  # the next turn follows the target's own (plain) answer
                    answer = target.tokenizer.decode(outs["plain"].tokens, skip_special_tokens=True)
                    messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": p.followups[turn]}]
                bar.update(1)
        results[temperature] = per_method
    bar.close()

    verify_tokens = {label: gen.tree_settings()["size"] + 1 for label, gen in gens.items()}
    cost = relative_forward_cost(target, sorted(set(verify_tokens.values()))) if gens else {}
    report = {
        "schema_version": SCHEMA_VERSION,
        "target": {"name": target.name, "dtype": str(target.dtype).replace("torch.", ""), "vocab_size": target.vocab_size},
        "machine": _machine(target),
        "prompts": _prompt_info(cfg.prompts if given is None else "", prompts, turns_total, cfg.max_new_tokens),
        "sampling": {"temperatures": temperatures, "seed": cfg.seed, "top_p": 1.0, "top_k": 0},
        "heads": [{**_head_info(label, named[label]), "tree": gens[label].tree_settings()} for label in gens],
        "forward_cost": {str(n): c for n, c in cost.items()},
        "results": [
            {"temperature": t, "methods": [_summarise(m, per, results[t]["plain"], gens, cost, verify_tokens, t, cfg) for m, per in results[t].items()]}
            for t in temperatures
        ],
        "rows": [_row(t, m, p, turn, d, plain) for t in temperatures for m, per in results[t].items() for p, turn, d, plain in per],
    }
    report = round_floats(report)
    if cfg.output:
        write_outputs(report, traces, target.tokenizer, Path(cfg.output))
    return report


def _machine(target) -> dict:
    import transformers

    return {
        "threads": torch.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
        "device": str(target.device),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def _prompt_info(files: str, prompts: list[EvalPrompt], turns: int, max_new_tokens: int) -> dict:
    """What was decoded; `files` is empty when the prompts were handed over in code."""
    categories: dict[str, int] = defaultdict(int)
    for p in prompts:
        categories[p.category] += 1
    return {
        "files": [f.strip() for f in str(files).split(",") if f.strip()],
        "count": len(prompts),
        "turns": turns,
        "max_new_tokens": max_new_tokens,
        "categories": dict(sorted(categories.items())),
    }


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _row(t: float, method: str, p: EvalPrompt, turn: int, d: Decoded, plain: list[int]) -> dict:
    steps = d.accepted_per_step
    return {
        "temperature": t,
        "method": method,
        "id": p.id,
        "category": p.category,
        "turn": turn,
        "new_tokens": len(d.tokens),
        "seconds": d.seconds,
        "tau": acceptance_length(steps) if steps else None,
        "match": d.tokens == plain if t == 0 else None,
    }


def _rate(entries: list) -> tuple[int, float]:
    tokens = sum(len(d.tokens) for _, _, d, _ in entries)
    seconds = sum(d.seconds for _, _, d, _ in entries)
    return tokens, seconds


def _summarise(method, entries, plain_entries, gens, cost, verify_tokens, temperature, cfg) -> dict:
    """One method at one temperature: speed, speedup, acceptance, greedy match and the bound."""
    tokens, seconds = _rate(entries)
    p_tokens, p_seconds = _rate(plain_entries)
    plain_tps = p_tokens / p_seconds if p_seconds else 0.0
    tps = tokens / seconds if seconds else 0.0
    gen = gens.get(method)
    entry = {
        "method": method if gen is None else "headstart",
        "label": method,
        "tree": gen.tree_settings() if gen else None,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tps,
        "speedup": tps / plain_tps if plain_tps else None,
        "target_forwards": None,
        "acceptance": None,
        "bound": None,
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
        settings = gen.tree_settings()
        steps = [a for _, _, d, _ in entries for a in d.accepted_per_step]
        drafted = sum(s["tree_size"] for _, _, d, _ in entries for s in d.steps)
        stats = acceptance_stats(steps, settings["depth"], drafted)
        entry["target_forwards"] = stats["steps"] + len(entries)  # verifications plus one prefill per turn
        entry["acceptance"] = stats
        bound = free_drafter_bound(stats["tau"], cost, verify_tokens[method])
        real = entry["speedup"]
        bound["real_speedup"] = real
        bound["lost_to_drafting"] = 1 - real / bound["free_drafter_speedup"] if real else None
        entry["bound"] = bound
    if temperature == 0:
        matched = [d.tokens == plain for _, _, d, plain in entries]
        agree = [_first_difference(d.tokens, plain) for _, _, d, plain in entries]
        entry["greedy_match"] = {
            "reference": "plain",
            "matched": sum(matched),
            "of": len(matched),
            "rate": sum(matched) / len(matched) if matched else None,
            "mean_agree_prefix": sum(agree) / len(agree) if agree else None,
        }
    entry["per_category"] = _per_category(entries, plain_entries, gen)
    return entry


def _per_category(entries, plain_entries, gen) -> dict:
    """Speedup (tokens/s ratio: bf16 outputs may differ in length) and τ per prompt category."""
    groups: dict[str, list] = defaultdict(list)
    plain_groups: dict[str, list] = defaultdict(list)
    for e in entries:
        groups[e[0].category].append(e)
    for e in plain_entries:
        plain_groups[e[0].category].append(e)
    out = {}
    for cat in sorted(groups):
        tokens, seconds = _rate(groups[cat])
        p_tokens, p_seconds = _rate(plain_groups[cat])
        steps = [a for _, _, d, _ in groups[cat] for a in d.accepted_per_step]
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
