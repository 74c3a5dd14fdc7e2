"""Acceptance and speed of a head against plain decoding of the same target, in one run.

For every held-out prompt: plain greedy decoding (our loop, same Target calls), speculative
decoding with the head, and HF `generate` (plain, and prompt lookup, the training-free peer), all
in the same process, dtype and thread count. τ counts the bonus token (plain decoding = 1.00);
SGLang's "draft token count" includes the root, vLLM's does not: τ here = vLLM's accepted + 1.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from pathlib import Path

import torch
from tqdm.auto import tqdm

from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.generate import SpeculativeGenerator, greedy_generate
from headstart.eval.prompts import load_eval_prompts


def _encode(tok, prompt: str) -> torch.Tensor:
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    return torch.tensor([tok(text, add_special_tokens=False).input_ids])


def _hf_generate(target, ids: torch.Tensor, max_new_tokens: int, eos: list[int], **kw) -> tuple[list[int], float]:
    start = time.perf_counter()
    out = target.model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
        eos_token_id=eos, pad_token_id=eos[0] if eos else 0, **kw,
    )
    return out[0, ids.shape[1] :].tolist(), time.perf_counter() - start


def evaluate(
    target,
    heads,
    decode: DecodeConfig,
    cfg: EvalConfig,
    tree=None,
    peers: bool = True,
    progress: bool = True,
) -> dict:
    """Decode cfg.num_prompts held-out prompts both ways; returns the report (also written as JSON)."""
    prompts = load_eval_prompts(cfg.prompts, cfg.num_prompts)
    tok = target.tokenizer
    gen = SpeculativeGenerator(target, heads, tree=tree or decode.tree, tree_size=decode.tree_size)
    eos = sorted(_eos_ids(target))
    # Warm up both paths once so that one-time costs do not land on the first prompt.
    warm = _encode(tok, "Hello")
    greedy_generate(target, warm, 4)
    gen.generate(warm, 4)

    rows, steps_all = [], []
    totals = Counter()
    for p in tqdm(prompts, desc="eval", unit="prompt", disable=not progress):
        ids = _encode(tok, p["prompt"]).to(target.device)
        plain = greedy_generate(target, ids, cfg.max_new_tokens)
        spec = gen.generate(ids, cfg.max_new_tokens)
        a, b = plain.sequences[0, ids.shape[1] :].tolist(), spec.sequences[0, ids.shape[1] :].tolist()
        agree = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        row = {
            "id": p["id"], "category": p["category"], "new_tokens": spec.new_tokens, "plain_tokens": plain.new_tokens,
            "tau": round(spec.acceptance_length, 4), "plain_s": round(plain.seconds, 4), "spec_s": round(spec.seconds, 4),
            "match": a == b, "agree_prefix": agree,
        }
        totals["plain_tokens"] += plain.new_tokens
        totals["plain_s"] += plain.seconds
        totals["spec_tokens"] += spec.new_tokens
        totals["spec_s"] += spec.seconds
        if peers:
            hf_plain, t_plain = _hf_generate(target, ids, cfg.max_new_tokens, eos)
            hf_pld, t_pld = _hf_generate(target, ids, cfg.max_new_tokens, eos, prompt_lookup_num_tokens=10)
            totals["hf_tokens"] += len(hf_plain)
            totals["hf_s"] += t_plain
            totals["pld_tokens"] += len(hf_pld)
            totals["pld_s"] += t_pld
            row["pld_match"] = hf_pld == hf_plain
        rows.append(row)
        steps_all.extend(spec.accepted_per_step)

    settings = gen.tree_settings()
    depth = settings["depth"]
    hist = Counter(steps_all)
    n_steps = max(len(steps_all), 1)
    plain_tps = totals["plain_tokens"] / totals["plain_s"]
    spec_tps = totals["spec_tokens"] / totals["spec_s"]
    report = {
        "target": target.name,
        "dtype": str(target.dtype).replace("torch.", ""),
        "head": {"kind": heads.kind, **{k: v for k, v in getattr(heads, "options", {}).items() if k not in ("accuracy", "tree")}},
        "tree": {**settings, "topk": settings["top_k"]},
        "prompts": {"file": cfg.prompts, "count": len(rows), "max_new_tokens": cfg.max_new_tokens},
        "temperature": 0.0,
        "tau": round(sum(a + 1 for a in steps_all) / n_steps, 4),
        "acceptance_per_depth": [round(sum(v for a, v in hist.items() if a >= d) / n_steps, 4) for d in range(1, depth + 1)],
        "accepted_histogram": {str(a): hist.get(a, 0) for a in range(depth + 1)},
        "tokens_per_s": {"plain": round(plain_tps, 2), "speculative": round(spec_tps, 2)},
        "speedup": round(spec_tps / plain_tps, 3),
        "outputs_matched": sum(r["match"] for r in rows),
        "mean_agree_prefix": round(sum(r["agree_prefix"] for r in rows) / len(rows), 1),
        "per_category": _per_category(rows),
        "machine": {"threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine()},
        "rows": rows,
    }
    if peers:
        report["tokens_per_s"]["hf_generate"] = round(totals["hf_tokens"] / totals["hf_s"], 2)
        report["tokens_per_s"]["hf_prompt_lookup"] = round(totals["pld_tokens"] / totals["pld_s"], 2)
        report["prompt_lookup_matched"] = sum(r["pld_match"] for r in rows)
    if cfg.output:
        out = Path(cfg.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        out.with_suffix(".md").write_text(format_table(report) + "\n")
    return report


def _eos_ids(target) -> set[int]:
    eos = target.model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    if target.tokenizer is not None and target.tokenizer.eos_token_id is not None:
        ids.add(target.tokenizer.eos_token_id)
    return ids


def _per_category(rows: list[dict]) -> dict:
    """τ and speedup (tokens/s ratio: bf16 outputs may differ in length) per prompt category."""
    cats: dict[str, Counter] = {}
    for r in rows:
        c = cats.setdefault(r["category"], Counter())
        c["prompts"] += 1
        c["tau_sum"] += r["tau"]
        for key in ("new_tokens", "plain_tokens", "plain_s", "spec_s"):
            c[key] += r[key]
    return {
        k: {
            "prompts": v["prompts"],
            "tau": round(v["tau_sum"] / v["prompts"], 3),
            "speedup": round((v["new_tokens"] / v["spec_s"]) / (v["plain_tokens"] / v["plain_s"]), 3),
        }
        for k, v in sorted(cats.items())
    }


def format_table(report: dict) -> str:
    """The report as a Markdown table a person reads."""
    t = report["tree"]
    tps = report["tokens_per_s"]
    lines = [
        f"**{report['head']['kind']}** heads on `{report['target']}` ({report['dtype']}), greedy, "
        f"{report['prompts']['count']} held-out prompts x {report['prompts']['max_new_tokens']} new tokens; "
        f"tree: {t['size']} nodes, depth {t['depth']}, top-{t['topk']}",
        "",
        "| decoding | τ (tokens / target forward) | tokens/s | vs plain |",
        "|---|---|---|---|",
        f"| plain greedy (headstart loop) | 1.00 | {tps['plain']:.1f} | 1.00x |",
        f"| speculative, {report['head']['kind']} | {report['tau']:.2f} | {tps['speculative']:.1f} | {report['speedup']:.2f}x |",
    ]
    if "hf_generate" in tps:
        lines.append(f"| HF generate, plain | 1.00 | {tps['hf_generate']:.1f} | {tps['hf_generate'] / tps['plain']:.2f}x |")
        lines.append(
            f"| HF prompt lookup (10 tokens) | n/a | {tps['hf_prompt_lookup']:.1f} | {tps['hf_prompt_lookup'] / tps['plain']:.2f}x |"
        )
    acc = ", ".join(f"d{d + 1} {a:.2f}" for d, a in enumerate(report["acceptance_per_depth"]))
    lines += [
        "",
        f"Acceptance per depth (share of steps that accepted at least d drafts): {acc}",
        f"Accepted drafts per step (histogram): {report['accepted_histogram']}",
        f"Outputs identical to plain greedy: {report['outputs_matched']}/{report['prompts']['count']}"
        + (f" (HF prompt lookup vs HF plain: {report['prompt_lookup_matched']}/{report['prompts']['count']})" if "prompt_lookup_matched" in report else "")
        + f"; mean agreeing prefix {report['mean_agree_prefix']} tokens",
    ]
    if report["dtype"] != "float32":
        lines.append(
            f"In {report['dtype']}, a forward over several tokens rounds differently from a one-token forward, so "
            "near-ties flip and outputs can differ from plain decoding (HF's prompt lookup shows the same); in "
            "float32 they are identical (tests/test_decode.py)."
        )
    cats = report.get("per_category") or {}
    if len(cats) > 1:
        lines += ["", "| category | prompts | τ | speedup |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['prompts']} | {v['tau']:.2f} | {v['speedup']:.2f}x |" for k, v in cats.items()]
    return "\n".join(lines)
