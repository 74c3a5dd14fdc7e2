"""The evaluation report for people: Markdown tables, a PNG plot, and the files beside the JSON."""

from __future__ import annotations

import json
from pathlib import Path

PEER_NAMES = {
    "plain": "plain decoding (headstart loop)",
    "hf_generate": "HF generate, plain",
    "hf_prompt_lookup": "HF prompt lookup",
    "hf_assisted": "HF assisted generation",
}


def method_name(entry: dict, kinds: dict[str, str]) -> str:
    """'speculative, medusa' (with its label when that is not just the kind), or the peer's name."""
    label = entry["label"]
    if entry["method"] == "headstart":
        kind = kinds.get(label, label)
        return f"speculative, {kind}" + (f" ({label})" if label != kind else "")
    name = PEER_NAMES.get(label, label)
    opts = entry.get("peer_options") or {}
    if "prompt_lookup_num_tokens" in opts:
        name += f" ({opts['prompt_lookup_num_tokens']} tokens)"
    if "assistant_model" in opts:
        name += f" ({opts['assistant_model']})"
    return name


HEAD_FREE_KINDS = ("lookup", "corpus+lookup")  # headstart's methods that need no trained head


def head_margin(methods: list[dict], kinds: dict[str, str]) -> dict | None:
    """The figure a head-training framework is judged by: the fastest method with a trained head
    against the fastest without one (plain decoding, prompt lookup, lookup + corpus trees, HF's
    peers), in tokens/s, from one temperature's results. None when either side is missing."""
    with_head = [e for e in methods if e["method"] == "headstart" and kinds.get(e["label"], e["label"]) not in HEAD_FREE_KINDS]
    without = [e for e in methods if e not in with_head]
    if not with_head or not without:
        return None
    best = max(with_head, key=lambda e: e["tokens_per_s"])
    free = max(without, key=lambda e: e["tokens_per_s"])
    return {"with_head": best["label"], "without_head": free["label"],
            "ratio": round(best["tokens_per_s"] / free["tokens_per_s"], 3)}


def margin_text(margin: dict | None, methods: list[dict], kinds: dict[str, str]) -> str:
    """One line: the head's margin over the fastest head-free method."""
    if margin is None:
        return ""
    by_label = {e["label"]: e for e in methods}
    best, free = by_label[margin["with_head"]], by_label[margin["without_head"]]
    return (f"**The head's margin**: {margin['ratio']:.2f}x: the fastest method with the head, {method_name(best, kinds)} "
            f"({best['tokens_per_s']:.1f} tokens/s), against the fastest without one, {method_name(free, kinds)} "
            f"({free['tokens_per_s']:.1f} tokens/s).")


def head_gain_text(gain: dict, steps: int, tau: float) -> str:
    """One line: what a hybrid's head added over the head-free paths of the same steps (`head_gain`)."""
    return (f"- What the head added, step by step: it drafted at {gain['head_steps']} of {steps} verifications; "
            f"{gain['gained_steps']} of them accepted further than every head-free path of the same step (the lookup "
            f"branch, the corpus table's own tree), {gain['lost_steps']} less far; {gain['drafts']:+d} drafts: τ {tau:.2f} "
            f"against {gain['tau_without_head']:.2f} from those paths alone")


def _tree_text(tree: dict | None) -> str:
    if not tree:
        return "—"
    lookup = tree.get("lookup")
    if lookup and not lookup["branch"]:
        return f"chain of ≤ {lookup['max_tokens']} copied tokens, n-gram ≤ {lookup['max_ngram']} (prompt lookup)"
    source = f", from the {tree['source']}" if tree.get("source") else ""
    source += ", the head's products in int8" if tree.get("draft_int8") else ""
    text = f"{tree['size']} nodes, depth {tree['depth']}, top-{tree['top_k']} ({tree['kind']}{source})"
    if lookup:
        text = "no head" if lookup.get("head") is False else text
        text += f" + lookup branch ≤ {lookup['max_tokens']} tokens, n-gram ≤ {lookup['max_ngram']}"
        if lookup.get("copy_tokens", lookup["max_tokens"]) > lookup["max_tokens"]:
            text += f" (alone, ≤ {lookup['copy_tokens']} tokens, while the text copies its context)"
        if lookup.get("shared_nodes"):
            text += (f" + corpus tree ({lookup['corpus_order']}-gram table of the training answers), the head's nodes and "
                     f"the corpus's sharing {lookup['shared_nodes']} by probability")
            if lookup.get("head_weight"):
                text += f" (the head's weighed x{lookup['head_weight']:g})"
            if lookup.get("head_continue"):
                text += f", the table continuing the head's paths by ≤ {lookup['head_continue']} nodes"
        elif lookup.get("corpus_nodes"):
            text += f" + corpus tree of {lookup['corpus_nodes']} nodes ({lookup['corpus_order']}-gram table of the training answers)"
    return text


def _x(value) -> str:
    return "—" if value is None else f"{value:.2f}x"


def _device(machine: dict) -> str:
    """"cpu, AVX512-BF16 + AMX"; a GPU's name alone; reports written before the CPU kind was kept: the device."""
    cpu = machine.get("cpu")
    return f"{machine['device']}, {cpu}" if cpu and machine["device"] == "cpu" else machine["device"]


def format_table(report: dict) -> str:
    """The report as Markdown a person reads (also what `headstart eval` prints)."""
    kinds = {h["label"]: h["kind"] for h in report["heads"]}
    p = report["prompts"]
    turns = f" ({p['turns']} turns)" if p["turns"] != p["count"] else ""
    lines = [
        f"Evaluation of `{report['target']['name']}` ({report['target']['dtype']}, {report['machine']['threads']} threads, "
        f"{_device(report['machine'])}): {p['count']} held-out prompts{turns} x {p['max_new_tokens']} new tokens from "
        f"{', '.join(p['files']) or 'prompts given in code'}; categories: {', '.join(p['categories'])}",
    ]
    for res in report["results"]:
        t = res["temperature"]
        greedy = t == 0
        lines += [
            "",
            f"### temperature {t:g}" + (" (greedy)" if greedy else f" (sampled, seed {report['sampling']['seed']} + prompt index)"),
            "",
            "| decoding | tree | τ (tokens / target forward) | tokens/s | vs plain | free-drafter bound |"
            + (" identical to plain |" if greedy else ""),
            "|---|---|---|---|---|---|" + ("---|" if greedy else ""),
        ]
        for e in res["methods"]:
            acc = e["acceptance"]
            tau = f"{acc['tau']:.2f}" if acc else ("1.00" if e["label"] in ("plain", "hf_generate") else "n/a")
            bound = _x(e["bound"]["free_drafter_speedup"]) if e["bound"] else "—"
            row = f"| {method_name(e, kinds)} | {_tree_text(e['tree'])} | {tau} | {e['tokens_per_s']:.1f} | {_x(e['speedup'])} | {bound} |"
            if greedy:
                m = e["greedy_match"]
                row += " — |" if e["label"] == "plain" else f" {m['matched']}/{m['of']} |"
            lines.append(row)
        margin = margin_text(head_margin(res["methods"], kinds), res["methods"], kinds)
        lines += ["", margin] if margin else []
        for e in res["methods"]:
            if e["acceptance"] is None:
                continue
            a, b = e["acceptance"], e["bound"]
            name = method_name(e, kinds)
            per = ", ".join(f"d{d + 1} {r:.2f}" for d, r in enumerate(a["acceptance_per_depth"]))
            cond = ", ".join("—" if r is None else f"{r:.2f}" for r in a["conditional_acceptance"])
            hist = ", ".join(f"{k}: {n}" for k, n in enumerate(a["accepted_histogram"]))
            lines += [
                "",
                f"**{name}**: {a['steps']} verifications, {a['accepted_drafts']} accepted drafts.",
                f"- Acceptance per depth (share of steps that accepted at least d drafts): {per}; "
                f"conditional (given d-1 accepted): {cond}",
                f"- Accepted drafts per step (histogram; a step writes accepted + 1 tokens): {hist}",
                f"- Bound: τ {a['tau']:.2f} / {_cost_text(b)} = {b['free_drafter_speedup']:.2f}x with "
                f"a free drafter; measured {_x(b['real_speedup'])}" + _lost(b["lost_to_drafting"]),
            ]
            if e.get("head_gain"):
                lines.append(head_gain_text(e["head_gain"], a["steps"], a["tau"]))
        if greedy and report["target"]["dtype"] != "float32":
            lines += [
                "",
                f"In {report['target']['dtype']} a forward over several tokens rounds differently from a one-token forward, so "
                "near-ties flip and outputs can differ from plain decoding (HF's own peers show the same); in float32 they "
                "are identical (tests/end_to_end/test_decode.py).",
            ]
        lines += _category_table(res, kinds)
    lines += [
        "",
        "τ counts the bonus token (plain decoding = 1.00; vLLM's mean acceptance length, SGLang's accept length). "
        "Tree sizes exclude the root (SGLang's num_draft_tokens = nodes + 1).",
    ]
    return "\n".join(lines)


def _cost_text(b: dict) -> str:
    """What the bound divides τ by: one tree's cost, or the mean over steps of different sizes."""
    if "mean_verify_tokens" in b:
        return (f"mean cost of its verifications ({b['verify_cost']:.2f}x one token; they fed {b['mean_verify_tokens']:.1f} "
                f"tokens on average, up to {b['verify_tokens']}: a lookup draft's length varies per step)")
    return f"cost of verifying {b['verify_tokens']} tokens ({b['verify_cost']:.2f}x one token)"


def _lost(share: float | None) -> str:
    if share is None:
        return ""
    if share < 0:  # faster than a free drafter allows: the timings were disturbed
        return " (above the bound: the timings are noisy; is another job using the cores?)"
    return f", so drafting and bookkeeping take {share:.0%} of the ideal"


def _category_table(res: dict, kinds: dict[str, str]) -> list[str]:
    heads = [e for e in res["methods"] if e["method"] == "headstart"]
    cats = sorted({c for e in res["methods"] for c in e["per_category"]})
    if len(cats) < 2:
        return []
    others = [e for e in res["methods"] if e["method"] != "headstart" and e["label"] != "plain"]
    cols = [f"τ / speedup, {method_name(e, kinds)}" for e in heads] + [f"speedup, {method_name(e, kinds)}" for e in others]
    lines = ["", "| category | turns | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for c in cats:
        turns = next(e["per_category"][c]["turns"] for e in res["methods"] if c in e["per_category"])
        cells = [f"{e['per_category'][c]['tau']:.2f} / {_x(e['per_category'][c]['speedup'])}" for e in heads]
        cells += [_x(e["per_category"][c]["speedup"]) for e in others]
        lines.append(f"| {c} | {turns} | " + " | ".join(cells) + " |")
    return lines


def plot(report: dict, path: str | Path) -> Path:
    """A PNG of acceptance per depth, the accepted-drafts histogram and tokens/s per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = {h["label"]: h["kind"] for h in report["heads"]}
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), constrained_layout=True)
    ax_depth, ax_hist, ax_speed = axes
    spec = [(res["temperature"], e) for res in report["results"] for e in res["methods"] if e["acceptance"]]
    width = 0.8 / max(len(spec), 1)
    for i, (t, e) in enumerate(spec):
        name = f"{method_name(e, kinds)}, T={t:g}"
        a = e["acceptance"]
        depths = list(range(1, len(a["acceptance_per_depth"]) + 1))
        ax_depth.plot(depths, a["acceptance_per_depth"], marker="o", label=name)
        total = max(a["steps"], 1)
        xs = [k + (i - (len(spec) - 1) / 2) * width for k in range(len(a["accepted_histogram"]))]
        ax_hist.bar(xs, [n / total for n in a["accepted_histogram"]], width=width, label=f"{name} (τ {a['tau']:.2f})")
    top = 1.08 + 0.08 * len(spec)  # room above the bars for the legend
    ax_depth.set(title="Acceptance per depth", xlabel="depth d (draft tokens ahead)",
                 ylabel="share of steps accepting ≥ d drafts", ylim=(0, top), yticks=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax_hist.set(title="Accepted drafts per verification step", xlabel="drafts accepted (the step writes this + 1 tokens)",
                ylabel="share of steps", ylim=(0, top), yticks=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    if spec:
        ax_depth.xaxis.get_major_locator().set_params(integer=True)
        ax_hist.xaxis.get_major_locator().set_params(integer=True)
        ax_depth.legend(fontsize=8, loc="upper right")
        ax_hist.legend(fontsize=8, loc="upper right")
    names, speeds, colours = [], [], []
    for res in report["results"]:
        for e in res["methods"]:
            names.append(f"{method_name(e, kinds)}, T={res['temperature']:g}")
            speeds.append(e["tokens_per_s"])
            colours.append("tab:gray" if e["label"] == "plain" else "tab:green" if e["method"] == "headstart" else "tab:blue")
    ax_speed.barh(range(len(names)), speeds, color=colours)
    ax_speed.set_yticks(range(len(names)), names, fontsize=8)
    ax_speed.invert_yaxis()
    for y, v in enumerate(speeds):
        ax_speed.text(v, y, f" {v:.1f}", va="center", fontsize=8)
    ax_speed.set(title="Speed (grey: plain; green: heads; blue: HF)", xlabel="new tokens per second")
    ax_speed.set_xlim(0, max(speeds, default=1) * 1.2)
    target = report["target"]
    fig.suptitle(f"{target['name']} ({target['dtype']}), {report['prompts']['count']} prompts x "
                 f"{report['prompts']['max_new_tokens']} tokens", fontsize=11)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(report: dict, traces: list[dict], tokenizer, output: Path) -> dict[str, Path]:
    """<output>.json, .md, .png and .html; returns their paths."""
    from headstart.eval.html_view import render_html

    output.parent.mkdir(parents=True, exist_ok=True)
    files = {
        "json": output,
        "md": output.with_suffix(".md"),
        "png": output.with_suffix(".png"),
        "html": output.with_suffix(".html"),
    }
    files["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    files["md"].write_text(format_table(report) + "\n")
    plot(report, files["png"])
    files["html"].write_text(render_html(report, traces, tokenizer), encoding="utf-8")
    return files
