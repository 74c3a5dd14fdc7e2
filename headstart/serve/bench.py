"""A head served by vLLM at several k beside vLLM plain, vLLM n-gram and headstart's own loop, in one run:
what `scripts/bench_serving.py` runs (its doc says how the engines run and what the table shows).

The steps of `bench_serving`: `bench_engines` (the engines of a `BenchPlan`), `run_exported` (serve/job.py:
the export and vLLM), `head_acceptance` (vLLM's acceptance at each k beside headstart's two predictions),
`proposer_acceptance` (headstart's corpus proposer and hybrid in vLLM beside headstart's count along their
text), `plain_base` (the base of every speedup), `bench_rows`, `format_bench` and `write_bench`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from headstart.eval.speed import eos_ids
from headstart.serve.check import eval_prompt_ids, headstart_side
from headstart.serve.job import (
    corpus_speculative_config,
    engine_record,
    head_speculative_config,
    hybrid_engine,
    ngram_speculative_config,
    plain_engine,
    run_exported,
    served_layout,
    vllm_mode,
)
from headstart.serve.prediction import (
    acceptance_from_metrics,
    along_text_steps,
    headstart_acceptance,
    hybrid_along_text_counts,
)
from headstart.serve.proposer import along_text_counts
from headstart.target import cpu_kind

#: the table's label of each of headstart's proposers served by vLLM (`proposer_acceptance`'s prefixes)
PROPOSERS = {"corpus": "vLLM + headstart's corpus proposer", "hybrid": "vLLM + head as headstart's hybrid"}


@dataclass(frozen=True)
class BenchPlan:
    """The engines of one run: the head as a chain of each of `ks`, vLLM's n-gram proposer at each of
    `ngram_ks`, headstart's corpus proposer (the head folder's table) at `corpus_ks` and the head as
    headstart's hybrid at `hybrid_ks`. `sequential`: one engine after the other, vLLM plain first and
    last, instead of all loaded at once and taking turns prompt by prompt; `compiled`: vLLM's torch.compile
    instead of eager."""

    ks: tuple[int, ...] = (1, 2, 3, 4, 5)
    ngram_ks: tuple[int, ...] = (3,)
    corpus_ks: tuple[int, ...] = ()
    hybrid_ks: tuple[int, ...] = ()
    sequential: bool = False
    compiled: bool = False

    def proposers(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(prefix, ks) of headstart's proposers served by vLLM."""
        return ("corpus", self.corpus_ks), ("hybrid", self.hybrid_ks)


def bench_engines(plan: BenchPlan, head, method: str, folder) -> list[dict]:
    """The run's vLLM engines: plain, `k{k}` (the head exported to `folder`), `ngram{k}`, `corpus{k}`, `hybrid{k}`,
    and with `plan.sequential` plain again last (`plain_end`: the machine's drift over the run)."""
    engines = [plain_engine()]
    engines += [{"name": f"k{k}", "speculative_config": head_speculative_config(head, method, folder, k)} for k in plan.ks]
    engines += [{"name": f"ngram{k}", "speculative_config": ngram_speculative_config(k)} for k in plan.ngram_ks]
    engines += [{"name": f"corpus{k}", "speculative_config": corpus_speculative_config(k)} for k in plan.corpus_ks]
    engines += [hybrid_engine(head, method, folder, k) for k in plan.hybrid_ks]
    if plan.sequential:
        engines.append(plain_engine("plain_end"))
    return engines


def head_acceptance(result: dict, target, served, prompts: list[list[int]], ks, ours: dict) -> dict:
    """k -> vLLM's acceptance with the head, headstart's prediction on its own text (`ours[k]`, `headstart_side`)
    and along the text vLLM served; per prompt too."""
    acceptance = {}
    for k in ks:
        r = engine_record(result, f"k{k}")
        along = [along_text_steps(target, served, p, text, k) for p, text in zip(prompts, r["outputs"])]
        acceptance[k] = {
            "vllm": acceptance_from_metrics(r["metrics"]),
            "headstart_own_text": ours[k]["acceptance"],
            "headstart_along_vllm_text": headstart_acceptance([a for steps in along for a in steps], k),
            "per_prompt": [{"vllm": acceptance_from_metrics(m), "headstart_along_vllm_text": headstart_acceptance(steps, k)}
                           for m, steps in zip(r["prompt_metrics"], along)],
        }
    return acceptance


def proposer_acceptance(result: dict, plan: BenchPlan, target, head, served, prompts: list[list[int]]) -> dict:
    """`corpus{k}` / `hybrid{k}` -> vLLM's acceptance with headstart's corpus proposer / the head as its hybrid
    beside headstart's count along the text vLLM served, and vLLM's per prompt. Drafts of 0..k tokens: the
    acceptance length is per step that carried drafts."""
    counts = {"corpus": lambda texts, k: along_text_counts(head.corpus, prompts, texts, k),
              "hybrid": lambda texts, k: hybrid_along_text_counts(target, served, head.corpus, prompts, texts, k)}
    acceptance = {}
    for prefix, ks in plan.proposers():
        for k in ks:
            r = engine_record(result, f"{prefix}{k}")
            acceptance[f"{prefix}{k}"] = {"vllm": acceptance_from_metrics(r["metrics"]),
                                          "headstart_along_vllm_text": acceptance_from_metrics(counts[prefix](r["outputs"], k)),
                                          "per_prompt_vllm": [acceptance_from_metrics(m) for m in r["prompt_metrics"]]}
    return acceptance


def plain_base(result: dict, sequential: bool) -> tuple[float, str]:
    """vLLM plain's tokens/s, the base of every speedup, and how the engines ran (the table says it). One engine
    after the other, the base is vLLM plain run first and last, together: a shared machine's speed drifts over a run."""
    plain = engine_record(result, "plain")
    if not sequential:
        return plain["tokens"] / plain["seconds"], "vLLM engines interleaved prompt by prompt in one process"
    plain_end = engine_record(result, "plain_end")
    base = (plain["tokens"] + plain_end["tokens"]) / (plain["seconds"] + plain_end["seconds"])
    first, last = plain["tokens"] / plain["seconds"], plain_end["tokens"] / plain_end["seconds"]
    return base, f"engines one after the other; vLLM plain {first:.1f} tok/s first and {last:.1f} last ({last / first - 1:+.0%} over the run)"


def bench_rows(result: dict, plan: BenchPlan, acceptance: dict, ours: dict, base: float) -> list[tuple]:
    """One row per decoding: (name, k, acceptance length, headstart's prediction on its own text, along vLLM's
    text, tokens/s, outputs identical to vLLM plain); "-" where a figure does not apply."""
    plain = engine_record(result, "plain")

    def same(outs) -> int:
        return sum(a == b for a, b in zip(outs, plain["outputs"]))

    rows = [("vLLM plain (run first and last)" if plan.sequential else "vLLM plain", "-", 1.0, "-", "-", base, same(plain["outputs"]))]
    for k in plan.ks:
        r, acc = engine_record(result, f"k{k}"), acceptance[k]
        rows.append((f"vLLM + head, k={k}", k, acc["vllm"]["mean_acceptance_length"], acc["headstart_own_text"]["mean_acceptance_length"],
                     acc["headstart_along_vllm_text"]["mean_acceptance_length"], r["tokens"] / r["seconds"], same(r["outputs"])))
    for k in plan.ngram_ks:
        ng = engine_record(result, f"ngram{k}")
        rows.append((f"vLLM n-gram, k={k}", k, acceptance_from_metrics(ng["metrics"])["mean_acceptance_length"], "-", "-",
                     ng["tokens"] / ng["seconds"], same(ng["outputs"])))
    for prefix, ks in plan.proposers():
        for k in ks:
            r, acc = engine_record(result, f"{prefix}{k}"), acceptance[f"{prefix}{k}"]
            rows.append((f"{PROPOSERS[prefix]}, k={k}", k, acc["vllm"]["mean_acceptance_length"], "-",
                         acc["headstart_along_vllm_text"]["mean_acceptance_length"], r["tokens"] / r["seconds"], same(r["outputs"])))
    ours_plain = ours[plan.ks[0]]["plain"]
    rows.append(("headstart plain loop", "-", 1.0, "-", "-", sum(map(len, ours_plain["outputs"])) / ours_plain["seconds"],
                 same(ours_plain["outputs"])))
    for k in plan.ks:
        h = ours[k]["head"]
        rows.append((f"headstart loop + head, chain {k}", k, ours[k]["acceptance"]["mean_acceptance_length"], "-", "-",
                     sum(map(len, h["outputs"])) / h["seconds"], same(h["outputs"])))
    return rows


def format_bench(header: str, rows: list[tuple], base: float, prompts: int) -> str:
    """The Markdown table: `header` (what ran, on what), then one line per row, speeds against vLLM plain."""

    def fmt(x) -> str:
        return x if isinstance(x, str) else f"{x:.2f}"

    lines = [header, "",
             "| decoding | k | acceptance length (bonus counted) | headstart's prediction, its own text | headstart's prediction, "
             "along vLLM's text | tokens/s | vs vLLM plain | same as vLLM plain |",
             "|---|---|---|---|---|---|---|---|"]
    for name, k, tau, pred, along, tps, n in rows:
        lines.append(f"| {name} | {k} | {fmt(tau)} | {fmt(pred)} | {fmt(along)} | {tps:.1f} | {tps / base:.2f}x | {n}/{prompts} |")
    lines += ["", "Acceptance length = 1 + accepted drafts / draft steps (bonus counted, per verification step). headstart's "
              "prediction on its own text: its loop's τ with the head; along vLLM's text: vLLM's output tokens teacher-forced "
              "through the target, headstart's drafter proposing k from each last accepted position, drafts accepted while "
              "they match that text. Per-position acceptance of each is in the JSON."]
    return "\n".join(lines)


def write_bench(out: str | Path, table: str, bench: dict) -> None:
    """<out> (JSON: the rows, every acceptance, the prompts, every engine's and headstart's outputs, the engines'
    load times) and the table beside it (.md)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(bench, indent=2, default=str) + "\n")
    out.with_suffix(".md").write_text(table + "\n")


def bench_serving(recipe, target, head, head_path: str | Path, plan: BenchPlan, out: str | Path = "runs/bench_serving.json") -> str:
    """Serve the head (loaded from `head_path`) in vLLM as `plan` says, decode the recipe's eval prompts with
    headstart's loop after it, write <out> (JSON) and .md beside it; returns the Markdown table."""
    layout, method = served_layout(head)
    cfg, eos = recipe.eval, eos_ids(target)
    prompts = eval_prompt_ids(target, cfg)
    result, served = run_exported(target, head_path, layout, recipe.target.name_or_path, prompts, cfg.max_new_tokens,
                                  partial(bench_engines, plan, head, method), log=Path(out).with_suffix(".vllm.log"),
                                  interleave=not plan.sequential, compiled=plan.compiled)
    ours = {k: headstart_side(target, served, prompts, k, cfg.max_new_tokens, eos, plain=(k == plan.ks[0])) for k in plan.ks}
    acceptance = head_acceptance(result, target, served, prompts, plan.ks, ours)
    acceptance.update(proposer_acceptance(result, plan, target, head, served, prompts))
    base, how = plain_base(result, plan.sequential)
    rows = bench_rows(result, plan, acceptance, ours, base)
    header = (f"{target.name}, {str(target.dtype).removeprefix('torch.')}, greedy, {len(prompts)} prompts x {cfg.max_new_tokens} tokens, "
              f"batch 1, {cpu_kind()} CPU, {torch.get_num_threads()} threads, vLLM {result['vllm']} {vllm_mode(plan.compiled)}, "
              f"load average {os.getloadavg()[0]:.2f}; {how}; headstart's loop runs after vLLM")
    table = format_bench(header, rows, base, len(prompts))
    outputs = {"headstart_plain": ours[plan.ks[0]]["plain"]["outputs"], **{e["name"]: e.get("outputs") for e in result["engines"]},
               **{f"headstart_k{k}": ours[k]["head"]["outputs"] for k in plan.ks}}
    write_bench(out, table, {"rows": rows, "acceptance": acceptance, "prompts": prompts, "outputs": outputs,
                             "engine_load_seconds": {e["name"]: e.get("load_seconds") for e in result["engines"]}})
    return table
