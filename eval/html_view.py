"""One self-contained HTML page of where each draft went wrong (written beside the eval JSON).

Per prompt, the answer is shown as its verification steps: drafts the target accepted in green,
the draft's best guess that it rejected in red and struck through, and the token the target wrote
instead (or the bonus after a fully accepted path) in yellow. A summary table opens the page.
"""

from __future__ import annotations

from html import escape

from headstart.eval.report import method_name

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 24px; color: #1b1b1b; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; margin: 18px 0 4px; }
table { border-collapse: collapse; margin: 8px 0 16px; } td, th { border: 1px solid #ccc; padding: 4px 10px; text-align: left; }
th { background: #f0f0f0; }
.answer { white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 14px; line-height: 1.9;
          border: 1px solid #ddd; padding: 10px; border-radius: 4px; }
.acc { background: #b6f2b6; color: #0b4d0b; }
.rej { background: #f7b3b3; color: #8a0c0c; text-decoration: line-through; }
.fix { background: #ffe680; color: #5c4a00; }
.first { background: #e4e4e4; }
.step { border-right: 1px dotted #999; }
.meta { color: #555; font-size: 13px; }
.prompt { color: #333; white-space: pre-wrap; }
"""


def _text(tokenizer, ids: list[int]) -> str:
    return escape(tokenizer.decode(ids, skip_special_tokens=False)) if ids else ""


def _answer(tokenizer, tokens: list[int], steps: list[dict]) -> str:
    """The answer as coloured steps; tokens cut by EOS or the budget are left out, as in the output."""
    if not tokens:
        return ""
    parts = [f'<span class="first" title="from the prompt forward">{_text(tokenizer, tokens[:1])}</span>']
    written = 1
    for n, s in enumerate(steps, start=1):
        room = len(tokens) - written
        if room <= 0:
            break
        accepted = s["accepted"][:room]
        title = f"step {n}: {s['accepted_count']} of up to {s['tree_size']} draft nodes accepted"
        html = f'<span class="acc">{_text(tokenizer, accepted)}</span>' if accepted else ""
        written += len(accepted)
        if written < len(tokens):
            if s["rejected"] is not None:
                html += f'<span class="rej" title="the draft\'s rejected guess">{_text(tokenizer, [s["rejected"]])}</span>'
            html += f'<span class="fix" title="the target\'s own token">{_text(tokenizer, [s["bonus"]])}</span>'
            written += 1
        parts.append(f'<span class="step" title="{escape(title)}">{html}</span>')
    return "".join(parts)


def _summary(report: dict) -> str:
    kinds = {h["label"]: h["kind"] for h in report["heads"]}
    rows = []
    for res in report["results"]:
        for e in res["methods"]:
            tau = f"{e['acceptance']['tau']:.2f}" if e["acceptance"] else "—"
            m = e["greedy_match"]
            match = "—" if m is None or e["label"] == "plain" else f"{m['matched']}/{m['of']}"
            speed = "—" if e["speedup"] is None else f"{e['speedup']:.2f}x"
            rows.append(
                f"<tr><td>{res['temperature']:g}</td><td>{escape(method_name(e, kinds))}</td><td>{tau}</td>"
                f"<td>{e['tokens_per_s']:.1f}</td><td>{speed}</td><td>{match}</td></tr>"
            )
    return (
        "<table><tr><th>temperature</th><th>decoding</th><th>τ</th><th>tokens/s</th><th>vs plain</th>"
        "<th>identical to plain</th></tr>" + "".join(rows) + "</table>"
    )


def render_html(report: dict, traces: list[dict], tokenizer) -> str:
    """The page: a summary, a legend, then every prompt's answer per head and temperature."""
    target = report["target"]
    p = report["prompts"]
    body = [
        f"<h1>Where the drafts went wrong: {escape(target['name'])} ({escape(target['dtype'])})</h1>",
        f"<p class='meta'>{p['count']} prompts ({p['turns']} turns) x {p['max_new_tokens']} new tokens from "
        f"{escape(', '.join(p['files']) or 'prompts given in code')}. τ = tokens per target forward, bonus counted.</p>",
        _summary(report),
        "<p>Legend: <span class='acc'>accepted drafts</span> <span class='rej'>rejected draft</span> "
        "<span class='fix'>the target's own token</span> <span class='first'>first token (prompt forward)</span>; "
        "dotted lines separate verification steps; hover a step for its counts.</p>",
    ]
    current = None
    for tr in traces:
        section = (tr["temperature"], tr["head"])
        if section != current:
            current = section
            body.append(f"<h2>{escape(tr['head'])}, temperature {tr['temperature']:g}</h2>")
        steps = [s["accepted_count"] for s in tr["steps"]]
        tau = (sum(steps) + len(steps)) / len(steps) if steps else 1.0
        same = "" if tr["temperature"] > 0 else (" · identical to plain" if tr["tokens"] == tr["plain_tokens"] else " · differs from plain")
        turn = f" · turn {tr['turn'] + 1}" if tr["turn"] else ""
        earlier = "".join(
            f"<div class='prompt'><b>{escape(m['role'])}:</b> {escape(m['content'])}</div>" for m in tr["messages"][:-1]
        )
        body += [
            f"<h3>{escape(tr['id'])} <span class='meta'>· {escape(tr['category'])}{turn} · τ {tau:.2f} · "
            f"{len(tr['tokens'])} tokens in {len(steps)} steps{same}</span></h3>",
            f"<details><summary class='meta'>earlier turns</summary>{earlier}</details>" if earlier else "",
            f"<div class='prompt'><b>user:</b> {escape(tr['messages'][-1]['content'])}</div>",
            f"<div class='answer'>{_answer(tokenizer, tr['tokens'], tr['steps'])}</div>",
        ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>headstart eval: drafts</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )
