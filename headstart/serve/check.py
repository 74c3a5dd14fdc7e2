"""`headstart serve-check`: serve a head in vLLM and hold its acceptance against headstart's prediction.

The head is exported in the layout vLLM loads (EAGLE-3: `eagle3` or `speculators`; Medusa:
`vllm-medusa`); vLLM runs in its own environment (`.venv-vllm`, made by `make vllm`) as a
subprocess (serve/engine.py, started by serve/job.py) on the recipe's eval prompts, greedy, batch 1:
plain, with the head (a chain of k drafts, vLLM's `num_speculative_tokens`), and with its n-gram
proposer. headstart decodes the same token ids with its own loop, plainly and with the same head as a
chain of k.

Conventions, all on the same prompts and the same chain of k:
- mean acceptance length = 1 + accepted drafts / drafts: vLLM's figure, and headstart's τ
  (tokens per verification step, bonus counted); one vLLM "draft" is one verification step.
- accepted per draft = τ − 1 (bonus not counted); draft-token acceptance = accepted / (drafts · k);
  acceptance per position d = share of drafts whose first d tokens were all accepted (vLLM's
  `accepted_per_pos[d-1] / drafts`, headstart's `acceptance_per_depth`).
- output agreement is against vLLM plain: identity is expected in float32, a match rate in bf16.
Two predictions of vLLM's figure, in the same counts: headstart's loop on its own greedy text
(`acceptance.headstart`), and headstart's drafter along the text vLLM served
(`acceptance.headstart_along_vllm_text`, `along_text_acceptance`): vLLM's output tokens are teacher-forced
through the target, the drafter proposes from the last accepted position as in decoding, and a draft
is accepted while it matches the served text. In float32 the texts are the same and so are the two;
in bf16 the engines' greedy texts part at near-ties, and only the second is measured on vLLM's text.
headstart predicts with the head as served: the exported folder imported back. They differ for a
Medusa head with a draft vocabulary, which vLLM 0.32 serves over the full vocabulary (heads/export.py);
the report then also gives the trained head's acceptance (`acceptance.headstart_as_trained`).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from functools import partial
from pathlib import Path

import torch

from headstart.decode.contract import trait
from headstart.decode.lookup import common_prefix
from headstart.decode.sampling import Sampling
from headstart.eval.acceptance import round_floats
from headstart.eval.speed import eos_ids, run_plain, run_speculative
from headstart.serve.job import (
    ServingError,
    engine_record,
    hybrid_refusal,
    method_engine,
    ngram_speculative_config,
    run_exported,
    served_layout,
    vllm_mode,
)
from headstart.serve.prediction import (
    acceptance_from_metrics,
    along_text_acceptance,
    chain_generator,
    headstart_acceptance,
    hybrid_along_text_counts,
)
from headstart.serve.proposer import CLASS_PATH, PLUGIN, along_text_counts
from headstart.target import cpu_flags, cpu_kind

#: the report's `conventions`: what each acceptance figure counts (the module doc, in the JSON itself)
CONVENTIONS = {
    "drafts": "verification steps that carried drafts (vLLM: spec_decode_num_drafts; headstart: steps)",
    "draft_tokens": "drafted tokens proposed: k per draft, a chain of k",
    "accepted": "accepted draft tokens, the bonus (corrected) token not counted",
    "mean_acceptance_length": "1 + accepted / drafts: tokens per verification step, bonus counted (headstart's tau)",
    "accepted_per_draft": "accepted / drafts = tau - 1, bonus not counted",
    "draft_token_acceptance": "accepted / draft_tokens, per drafted token",
    "acceptance_per_position": "[d-1]: share of drafts whose first d tokens were all accepted",
    "headstart": "headstart's prediction on its own text: its decoding loop with the head, greedy, on the same prompts",
    "headstart_along_vllm_text": "headstart's prediction along vLLM's text: vLLM's output tokens teacher-forced through the target, "
                                 "the drafter proposing k from each last accepted position, drafts accepted while they match "
                                 "that text; same counts (bonus counted in the mean acceptance length, per draft step)",
    "relative_difference": "(vLLM - headstart) / headstart, for headstart's prediction on its own text",
    "relative_difference_along_vllm_text": "(vLLM - headstart along vLLM's text) / headstart along vLLM's text",
    "agreement": "outputs identical to vLLM plain token for token: expected in float32, a match rate in bf16",
    "tokens_per_s": "new tokens / decoding seconds, batch 1, greedy, after one untimed warm-up request",
}


def relative_difference(served: float | None, predicted: float | None) -> float | None:
    """(served − predicted) / predicted."""
    return (served - predicted) / predicted if served is not None and predicted else None


def agreement(outputs: list[list[int]], reference: list[list[int]]) -> dict:
    """How many outputs equal the reference token for token, and the mean agreeing prefix."""
    prefixes = [common_prefix(a, b) for a, b in zip(outputs, reference)]
    matched = sum(a == b for a, b in zip(outputs, reference))
    return {"matched": matched, "of": len(reference), "rate": matched / len(reference) if reference else None,
            "mean_agree_prefix": sum(prefixes) / len(prefixes) if prefixes else None}


def headstart_side(target, head, prompts: list[list[int]], k: int, max_new_tokens: int, eos: list[int], plain: bool = True) -> dict:
    """headstart's own loop on the prompts: plainly (unless `plain` is False) and with the head as a
    chain of k, after a warm-up."""
    gen = chain_generator(target, head, k)
    s = Sampling()
    warm = torch.tensor([prompts[0]], device=target.device)
    run_plain(target, warm, 4, s, eos)
    run_speculative(gen, warm, 4, s, eos)
    plains, spec = [], []
    for p in prompts:
        ids = torch.tensor([p], device=target.device)
        if plain:
            plains.append(run_plain(target, ids, max_new_tokens, s, eos))
        spec.append(run_speculative(gen, ids, max_new_tokens, s, eos))
    steps = [a for d in spec for a in d.accepted_per_step]
    out = {
        "head": {"outputs": [d.tokens for d in spec], "seconds": sum(d.seconds for d in spec)},
        "acceptance": headstart_acceptance(steps, k),
    }
    if plain:
        out["plain"] = {"outputs": [d.tokens for d in plains], "seconds": sum(d.seconds for d in plains)}
    return out


def _speed(tokens: int, seconds: float, base: float | None) -> dict:
    tps = tokens / seconds if seconds else None
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tps, "vs_vllm_plain": tps / base if tps and base else None}


def differences(served: dict, predicted: dict) -> dict:
    """(served − predicted) / predicted of each acceptance figure compared."""
    return {key: relative_difference(served[key], predicted[key])
            for key in ("mean_acceptance_length", "accepted_per_draft", "draft_token_acceptance")}


def compare(result: dict, ours: dict, k: int, head_engine: str = "head", ngram_engine: str | None = "ngram") -> dict:
    """The side-by-side report of a vLLM run (plain, head, n-gram engines) and headstart's own run
    (`headstart_side`, plus `ours["along_vllm_text"]`: `along_text_acceptance` on the head engine's outputs)."""
    plain, served = engine_record(result, "plain"), engine_record(result, head_engine)
    vllm_acc = acceptance_from_metrics(served["metrics"])
    predicted = ours["acceptance"]
    base = plain["tokens"] / plain["seconds"] if plain["seconds"] else None
    speed = {
        "vllm_plain": _speed(plain["tokens"], plain["seconds"], base),
        "vllm_head": _speed(served["tokens"], served["seconds"], base),
        "headstart_plain": _speed(sum(map(len, ours["plain"]["outputs"])), ours["plain"]["seconds"], base),
        "headstart_head": _speed(sum(map(len, ours["head"]["outputs"])), ours["head"]["seconds"], base),
    }
    if ngram_engine:
        ngram = engine_record(result, ngram_engine)
        speed["vllm_ngram"] = _speed(ngram["tokens"], ngram["seconds"], base)
    acceptance = {"vllm": vllm_acc, "headstart": predicted, "relative_difference": differences(vllm_acc, predicted)}
    along = ours.get("along_vllm_text")
    if along:
        acceptance["headstart_along_vllm_text"] = along
        acceptance["relative_difference_along_vllm_text"] = differences(vllm_acc, along)
    return {
        "chain": k,
        "acceptance": acceptance,
        "agreement": {
            "vllm_head_vs_vllm_plain": agreement(served["outputs"], plain["outputs"]),
            "headstart_plain_vs_vllm_plain": agreement(ours["plain"]["outputs"], plain["outputs"]),
            "headstart_head_vs_vllm_plain": agreement(ours["head"]["outputs"], plain["outputs"]),
        },
        "speed": speed,
        "draft_config": served.get("draft_config"),
        "engine_load_seconds": {e["name"]: e.get("load_seconds") for e in result["engines"]},
    }


def check_k(head, k: int) -> None:
    """k draft tokens per step is something the head can draft: at least 1; at most one per Medusa head,
    at most the K slots a parallel-drafting (P-EAGLE) head was trained for."""
    if k < 1 or (head.kind == "medusa" and k > head.options["num_heads"]):
        most = f" (this Medusa head drafts at most {head.options['num_heads']}: one token per head)" if head.kind == "medusa" else ""
        raise ServingError(f"k = {k}: give 1 or more draft tokens per step{most}")
    if head.options.get("parallel_drafting") and k > head.options["parallel_tokens"]:
        raise ServingError(
            f"k = {k}: this parallel-drafting head was trained for {head.options['parallel_tokens']} slots "
            f"(head.parallel_tokens); serve it with k <= {head.options['parallel_tokens']}"
        )



def eval_prompt_ids(target, eval_config) -> list[list[int]]:
    """The recipe's eval prompts (`eval.prompts`, `num_prompts`, `categories`; first turns) as token ids rendered
    by headstart's chat template: what vLLM and headstart's loop both decode."""
    from headstart.chat import encode_chat
    from headstart.eval.prompts import load_eval_prompts

    cfg = eval_config
    return [encode_chat(target.tokenizer, p.messages)[0].tolist() for p in load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)]


def check_engines(head, method: str, folder, k: int, ngram: bool = True, corpus: bool = True) -> list[dict]:
    """serve-check's engines: vLLM plain, the head exported to `folder` (a chain of k), vLLM's n-gram proposer
    (`ngram`), and, when the head carries a corpus table and `corpus`, headstart's corpus proposer and, for an
    EAGLE head that drafts one token a forward, the head served as headstart's hybrid."""
    # The speculators layout needs the method named: without it vLLM 0.32's engine crashes.
    engines = [method_engine(name, head, method, folder, k) for name in ("plain", "head")]
    if ngram:
        engines.append({"name": "ngram", "speculative_config": ngram_speculative_config(k)})
    if corpus and trait(head, "corpus") is not None:
        engines.append(method_engine("corpus", head, method, folder, k))
        if hybrid_refusal(head, method) is None:
            engines.append(method_engine("hybrid", head, method, folder, k))
    return engines


def serve_check(recipe, target, head_path: str | Path, k: int = 3, layout: str | None = None, ngram: bool = True,
                output: str | Path | None = None, timeout: float = 1800.0, corpus: bool = True, interleave: bool = True,
                compiled: bool = False) -> dict:
    """Export the head, serve it in vLLM beside plain and n-gram decoding (and, when the head carries
    a corpus table and `corpus`, vLLM with headstart's corpus proposer and, for an EAGLE-3 head, the head
    served as headstart's hybrid through its vLLM plugin), decode the same prompts
    with headstart's loop, and write <output>.json and .md (when output is given). `interleave`: the
    vLLM engines loaded at once in one process, taking turns prompt by prompt (serve/engine.py), so
    that a machine's drift slows them alike; False: one engine process after the other. `compiled`:
    vLLM's default mode, torch.compile, instead of eager (`enforce_eager=True`)."""
    from headstart.heads.checkpoint import load_heads

    head = load_heads(head_path, target=target)
    layout, method = served_layout(head, layout)
    check_k(head, k)
    cfg, eos = recipe.eval, eos_ids(target)
    prompts = eval_prompt_ids(target, cfg)
    engines = partial(check_engines, head, method, k=k, ngram=ngram, corpus=corpus)
    result, served = run_exported(target, head_path, layout, recipe.target.name_or_path, prompts, cfg.max_new_tokens, engines,
                                  timeout=timeout, log=Path(output).with_suffix(".vllm.log") if output else None,
                                  interleave=interleave, compiled=compiled)
    load = round(os.getloadavg()[0], 2)  # other work on the machine slows the timings (several-fold on 2 cores)
    ours = headstart_side(target, served, prompts, k, cfg.max_new_tokens, eos)
    ours["along_vllm_text"] = along_text_acceptance(target, served, prompts, engine_record(result, "head")["outputs"], k)
    trained_vocab, served_vocab = head.options.get("draft_vocab_size"), served.options.get("draft_vocab_size")
    report = {
        "target": {"name": target.name, "dtype": str(target.dtype).removeprefix("torch.")},
        "head": {"path": str(head_path), "kind": head.kind, "layout": layout, "method": method,
                 "draft_vocab_size": trained_vocab, "served_draft_vocab_size": served_vocab},
        "conventions": CONVENTIONS,
        "prompts": {"files": cfg.prompts, "count": len(prompts), "max_new_tokens": cfg.max_new_tokens},
        "machine": machine_record(result["vllm"], load, interleave, compiled),
        **compare(result, ours, k, ngram_engine="ngram" if ngram else None),
    }
    report.update(table_reports(result, target, head, served, prompts, k, report["speed"]["vllm_plain"]["tokens_per_s"]))
    if trained_vocab != served_vocab:  # the trained head, for what serving it over the full vocabulary costs
        report["acceptance"]["headstart_as_trained"] = headstart_side(target, head, prompts, k, cfg.max_new_tokens, eos, plain=False)["acceptance"]
    report = round_floats(report)
    if output:
        write_report(report, output)
    return report


def machine_record(vllm_version: str, load: float, interleave: bool, compiled: bool) -> dict:
    """The report's `machine`: what the timings ran on, and how the vLLM engines ran."""
    return {"threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
            "avx512_bf16": "avx512_bf16" in cpu_flags(), "cpu": cpu_kind(), "torch": torch.__version__, "vllm": vllm_version,
            "python": sys.version.split()[0], "load_average": load,
            "vllm_engines": "interleaved prompt by prompt, one process" if interleave else "one after the other",
            "vllm_mode": vllm_mode(compiled)}


def table_reports(result: dict, target, head, served, prompts: list[list[int]], k: int, base: float | None) -> dict:
    """The reports of the engines that drafted from the head folder's corpus table (`corpus`, `hybrid`) that ran."""
    names = {e["name"] for e in result["engines"]}
    out = {}
    if "corpus" in names:
        out["corpus"] = corpus_report(result, head.corpus, prompts, k, base)
    if "hybrid" in names:
        out["hybrid"] = hybrid_report(result, target, served, head.corpus, prompts, k, base)
    return out


def write_report(report: dict, output: str | Path) -> None:
    """<output> (JSON) and the Markdown beside it (.md)."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(format_serving(report) + "\n")


def corpus_report(result: dict, corpus, prompts: list[list[int]], k: int, base: float | None) -> dict:
    """vLLM with the corpus proposer: its acceptance beside headstart's count along the text it served
    (`along_text_counts`: the same drafts; the same accepted but for the last step of a request cut
    at max_tokens), its speed and its agreement with vLLM plain."""
    counts = partial(along_text_counts, corpus, prompts, k=k)
    return {"proposer": CLASS_PATH, "chain": k, **_counted_report(result, "corpus", counts, base)}


def hybrid_report(result: dict, target, head, corpus, prompts: list[list[int]], k: int, base: float | None) -> dict:
    """vLLM serving the head as headstart's hybrid (serve/proposer.py): its acceptance beside headstart's
    count along the text it served (`hybrid_along_text_counts`, with the head as served), its speed and its
    agreement with vLLM plain."""
    counts = partial(hybrid_along_text_counts, target, head, corpus, prompts, k=k)
    return {"plugin": PLUGIN, "chain": k, **_counted_report(result, "hybrid", counts, base)}


def _counted_report(result: dict, name: str, counts, base: float | None) -> dict:
    """An engine's acceptance from vLLM's counters beside `counts(its outputs)` (headstart's count along the
    text it served, in the same counters), their relative difference, its agreement with vLLM plain and its speed."""
    served, plain = engine_record(result, name), engine_record(result, "plain")
    vllm_acc, along = acceptance_from_metrics(served["metrics"]), acceptance_from_metrics(counts(served["outputs"]))
    return {"vllm": vllm_acc, "headstart_along_vllm_text": along, "relative_difference_along_vllm_text": differences(vllm_acc, along),
            "agreement_vs_vllm_plain": agreement(served["outputs"], plain["outputs"]),
            "speed": _speed(served["tokens"], served["seconds"], base)}



def _f(value, fmt: str = "{:.3f}") -> str:
    return "—" if value is None else fmt.format(value)


def format_serving(report: dict) -> str:
    """The report as Markdown (also what `headstart serve-check` prints)."""
    return "\n".join([*_acceptance_lines(report), *_speed_lines(report), *_corpus_lines(report.get("corpus")),
                      *_hybrid_lines(report.get("hybrid")), *_agreement_lines(report), *_convention_lines(report)])


def _acceptance_lines(report: dict) -> list[str]:
    """The opening line and the acceptance table: vLLM's figures, headstart's two predictions, their differences."""
    k, acc = report["chain"], report["acceptance"]
    v, h = acc["vllm"], acc["headstart"]
    along = acc.get("headstart_along_vllm_text") or {}
    rel, rel_along = acc["relative_difference"], acc.get("relative_difference_along_vllm_text") or {}

    def row(name: str, key: str, fmt: str = "{:.3f}", relative: bool = False) -> str:
        cells = [_f(v[key], fmt), _f(h[key], fmt), _f(along.get(key), fmt)]
        if relative:
            cells += [_f(rel[key], "{:+.1%}"), _f(rel_along.get(key), "{:+.1%}")]
        return f"| {name} | " + " | ".join(cells + [""] * (5 - len(cells))) + " |"

    lines = [
        f"Serving check of `{report['head']['path']}` ({report['head']['kind']}, layout {report['head']['layout']}, vLLM method "
        f"{report['head']['method']}) on `{report['target']['name']}` ({report['target']['dtype']}): {report['prompts']['count']} prompts x "
        f"{report['prompts']['max_new_tokens']} new tokens, greedy, batch 1, a chain of {k} drafts; vLLM {report['machine']['vllm']}.",
        "",
        "| acceptance (same prompts, chain of k) | vLLM (served) | headstart predicted, on its own text | headstart predicted, "
        "along vLLM's text | relative difference, own text | relative difference, vLLM's text |",
        "|---|---|---|---|---|---|",
        row("drafts (verification steps)", "drafts", "{}"),
        row("draft tokens", "draft_tokens", "{}"),
        row("accepted draft tokens", "accepted", "{}"),
        row("mean acceptance length (1 + accepted / drafts; = τ, bonus counted)", "mean_acceptance_length", relative=True),
        row("accepted per draft (bonus not counted)", "accepted_per_draft", relative=True),
        row("draft-token acceptance (accepted / draft tokens)", "draft_token_acceptance", relative=True),
    ]
    for d in range(k):
        cells = [x["acceptance_per_position"][d] if x.get("acceptance_per_position") and d < len(x["acceptance_per_position"]) else None
                 for x in (v, h, along)]
        lines.append(f"| position {d + 1}: share of drafts accepted this far | " + " | ".join(map(_f, cells)) + " | | |")
    trained = acc.get("headstart_as_trained")
    if trained:
        lines += ["", f"vLLM serves this head over the full vocabulary (its draft vocabulary of {report['head']['draft_vocab_size']} "
                  f"tokens cannot be loaded by vLLM's Medusa); headstart's prediction above is for that served head. The head as "
                  f"trained: mean acceptance length {_f(trained['mean_acceptance_length'])}, draft-token acceptance "
                  f"{_f(trained['draft_token_acceptance'])}."]
    return lines


def _speed_lines(report: dict) -> list[str]:
    """The speed table: each engine's tokens/s against vLLM plain."""
    k = report["chain"]
    names = {"vllm_plain": "vLLM plain", "vllm_head": f"vLLM + head (k = {k})", "vllm_ngram": f"vLLM n-gram (k = {k})",
             "headstart_plain": "headstart plain loop", "headstart_head": f"headstart + head (chain of {k})"}
    engines, mode = report["machine"].get("vllm_engines"), report["machine"].get("vllm_mode")
    lines = ["", f"Speed (vLLM engines {engines}, {mode}; headstart's loop after them):" if engines else "Speed:",
             "", "| decoding | tokens | seconds | tokens/s | vs vLLM plain |", "|---|---|---|---|---|"]
    for key, name in names.items():
        if key in report["speed"]:
            s = report["speed"][key]
            lines.append(f"| {name} | {s['tokens']} | {_f(s['seconds'], '{:.1f}')} | {_f(s['tokens_per_s'], '{:.1f}')} | "
                         f"{_f(s['vs_vllm_plain'], '{:.2f}x')} |")
    return lines


def _agreement_lines(report: dict) -> list[str]:
    """The table of outputs identical to vLLM plain."""
    lines = ["", "| outputs identical to vLLM plain | matched | mean agreeing prefix |", "|---|---|---|"]
    for key, name in (("vllm_head_vs_vllm_plain", "vLLM + head"), ("headstart_plain_vs_vllm_plain", "headstart plain loop"),
                      ("headstart_head_vs_vllm_plain", "headstart + head")):
        a = report["agreement"][key]
        lines.append(f"| {name} | {a['matched']}/{a['of']} | {_f(a['mean_agree_prefix'], '{:.1f}')} |")
    return lines


def _convention_lines(report: dict) -> list[str]:
    """What the figures count, and what bf16 does to identity."""
    lines = ["", "Conventions: a draft is one verification step carrying k drafted tokens; accepted drafted tokens exclude "
             "the bonus token; mean acceptance length = 1 + accepted / drafts (bonus counted, headstart's τ); position d = "
             "share of drafts whose first d tokens were all accepted; relative difference = (vLLM − headstart) / headstart. "
             "headstart predicts twice: its decoding loop on its own greedy text, and its drafter along the text vLLM served "
             "(vLLM's tokens teacher-forced through the target, k drafted from each last accepted position, drafts accepted "
             "while they match that text). In float32 the texts are one and the two agree; in bf16 only the second is "
             "measured on vLLM's text."]
    if report["target"]["dtype"] != "float32":
        lines += ["", f"In {report['target']['dtype']} outputs may differ from plain decoding by rounding (near-ties flip); "
                  "in float32 they are identical (tests/end_to_end/test_vllm.py)."]
    return lines


def _corpus_lines(corpus: dict | None) -> list[str]:
    """The corpus proposer's rows: its speed, and vLLM's counts beside headstart's along the same text."""
    if not corpus:
        return []
    v, h, s, a = corpus["vllm"], corpus["headstart_along_vllm_text"], corpus["speed"], corpus["agreement_vs_vllm_plain"]
    return [
        f"| vLLM + headstart's corpus proposer (chain ≤ {corpus['chain']}) | {s['tokens']} | {_f(s['seconds'], '{:.1f}')} | "
        f"{_f(s['tokens_per_s'], '{:.1f}')} | {_f(s['vs_vllm_plain'], '{:.2f}x')} |",
        "",
        f"Corpus proposer (`{corpus['proposer']}`: prompt lookup, else the head's corpus table's argmax chain; chains of 0..k): "
        f"vLLM counted {v['drafts']} drafts, {v['draft_tokens']} draft tokens, {v['accepted']} accepted (mean acceptance length "
        f"{_f(v['mean_acceptance_length'])}, per draft that carried tokens); headstart along vLLM's text: {h['drafts']}, "
        f"{h['draft_tokens']}, {h['accepted']} ({_f(h['mean_acceptance_length'])}); outputs identical to vLLM plain: "
        f"{a['matched']}/{a['of']}.",
    ]


def _hybrid_lines(hybrid: dict | None) -> list[str]:
    """The hybrid's line: vLLM's counts, its speed and its agreement with vLLM plain."""
    if not hybrid:
        return []
    v, h, s, a = hybrid["vllm"], hybrid["headstart_along_vllm_text"], hybrid["speed"], hybrid["agreement_vs_vllm_plain"]
    return [
        "",
        f"Hybrid (the head served with HEADSTART_HYBRID=1 through headstart's vLLM plugin `{hybrid['plugin']}`: prompt lookup, "
        f"else the corpus table when sure, else the head's first draft and the table after it; chains of 0..{hybrid['chain']}): "
        f"{_f(s['tokens_per_s'], '{:.1f}')} tokens/s, {_f(s['vs_vllm_plain'], '{:.2f}x')} vLLM plain; vLLM counted {v['drafts']} drafts, "
        f"{v['draft_tokens']} draft tokens, {v['accepted']} accepted (mean acceptance length {_f(v['mean_acceptance_length'])}, per draft "
        f"that carried tokens); headstart along vLLM's text: {h['drafts']}, {h['draft_tokens']}, {h['accepted']} "
        f"({_f(h['mean_acceptance_length'])}); outputs identical to vLLM plain: {a['matched']}/{a['of']}.",
    ]
