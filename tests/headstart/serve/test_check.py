"""serve/check.py without an engine: the report of a run puts headstart's two predictions beside vLLM's
figure, in the JSON and in the Markdown. The engine itself is tests/end_to_end/test_vllm.py's."""

from __future__ import annotations

import headstart as hs
from headstart.serve.check import compare, format_serving, headstart_side
from headstart.serve.prediction import along_text_acceptance
from tests.helpers import tiny_target

K = 3


def test_report_gives_both_predictions(one_thread):
    """compare() and the Markdown carry vLLM's figure, the loop's prediction on its own text and the
    prediction along vLLM's text, each named; here 'vLLM' is the loop's own run, recorded as vLLM records it."""
    target = tiny_target("llama")
    head = hs.heads.build("medusa", target, num_heads=K)
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    ours = headstart_side(target, head, prompts, K, 8, eos=[])
    a = ours["acceptance"]
    engine = {"ok": True, "seconds": 1.0, "tokens": 16, "outputs": ours["plain"]["outputs"],
              "metrics": {"drafts": a["drafts"], "draft_tokens": a["draft_tokens"], "accepted": a["accepted"],
                          "accepted_per_pos": a["accepted_per_pos"]}}
    result = {"engines": [{**engine, "name": "plain"}, {**engine, "name": "head"}]}
    ours["along_vllm_text"] = along_text_acceptance(target, head, prompts, engine["outputs"], K)
    report = compare(result, ours, K, ngram_engine=None)
    acc = report["acceptance"]
    assert acc["headstart_along_vllm_text"] == acc["headstart"] == acc["vllm"]
    assert acc["relative_difference_along_vllm_text"]["mean_acceptance_length"] == 0.0
    report.update(head={"path": "h", "kind": "medusa", "layout": "vllm-medusa", "method": "medusa"},
                  target={"name": "tiny", "dtype": "float32"}, prompts={"count": 2, "max_new_tokens": 8}, machine={"vllm": "0.32.0"})
    md = format_serving(report)
    assert ("| vLLM (served) | headstart predicted, on its own text | headstart predicted, along vLLM's text | relative difference, "
            "own text | relative difference, vLLM's text |") in md
    tau = f"{a['mean_acceptance_length']:.3f}"
    assert f"| mean acceptance length (1 + accepted / drafts; = τ, bonus counted) | {tau} | {tau} | {tau} | +0.0% | +0.0% |" in md
