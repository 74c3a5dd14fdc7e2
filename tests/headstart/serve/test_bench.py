"""serve/bench.py without an engine: the engines a plan runs, the base of the speedups, and the table's
rows from a recorded run (the engine itself is tests/end_to_end/test_vllm.py's)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from headstart.serve.bench import BenchPlan, bench_engines, bench_rows, format_bench, plain_base
from headstart.serve.proposer import HYBRID_ENV

HEAD = SimpleNamespace(kind="eagle3", options={})


def engine(name: str, outputs, seconds: float, accepted: int = 0, drafts: int = 0, k: int = 1) -> dict:
    metrics = {"drafts": drafts, "draft_tokens": drafts * k, "accepted": accepted, "accepted_per_pos": [accepted] + [0] * (k - 1)}
    return {"name": name, "ok": True, "outputs": outputs, "tokens": sum(map(len, outputs)), "seconds": seconds,
            "metrics": metrics, "prompt_metrics": [metrics]}


def test_a_plan_names_its_engines():
    plan = BenchPlan(ks=(2, 3), ngram_ks=(3,), corpus_ks=(5,), hybrid_ks=(4,), sequential=True)
    engines = bench_engines(plan, HEAD, "eagle3", "/x")
    assert [e["name"] for e in engines] == ["plain", "k2", "k3", "ngram3", "corpus5", "hybrid4", "plain_end"]
    assert engines[1]["speculative_config"] == {"method": "eagle3", "model": "/x", "num_speculative_tokens": 2}
    assert engines[5]["env"] == {HYBRID_ENV: "1"} and engines[0]["speculative_config"] is None
    assert [e["name"] for e in bench_engines(BenchPlan(ks=(1,), ngram_ks=()), HEAD, "eagle3", "/x")] == ["plain", "k1"]


def test_the_base_is_plain_first_and_last_together_when_sequential():
    result = {"engines": [engine("plain", [[1] * 10], 1.0), engine("plain_end", [[1] * 10], 0.5)]}
    assert plain_base(result, sequential=False)[0] == 10.0
    base, how = plain_base(result, sequential=True)
    assert base == pytest.approx(20 / 1.5) and "10.0 tok/s first and 20.0 last (+100% over the run)" in how


def test_rows_and_table_of_a_recorded_run():
    ref = [[1, 2, 3, 4]]
    result = {"engines": [engine("plain", ref, 1.0), engine("k1", ref, 0.5, accepted=1, drafts=2),
                          engine("ngram3", [[1, 2, 3, 5]], 2.0, accepted=0, drafts=1, k=3)]}
    side = {"outputs": ref, "seconds": 2.0}
    ours = {1: {"plain": side, "head": side, "acceptance": {"mean_acceptance_length": 1.4}}}
    acceptance = {1: {"vllm": {"mean_acceptance_length": 1.5}, "headstart_own_text": {"mean_acceptance_length": 1.4},
                      "headstart_along_vllm_text": {"mean_acceptance_length": 1.5}}}
    rows = bench_rows(result, BenchPlan(ks=(1,), ngram_ks=(3,)), acceptance, ours, base=4.0)
    assert rows == [("vLLM plain", "-", 1.0, "-", "-", 4.0, 1), ("vLLM + head, k=1", 1, 1.5, 1.4, 1.5, 8.0, 1),
                    ("vLLM n-gram, k=3", 3, 1.0, "-", "-", 2.0, 0), ("headstart plain loop", "-", 1.0, "-", "-", 2.0, 1),
                    ("headstart loop + head, chain 1", 1, 1.4, "-", "-", 2.0, 1)]
    table = format_bench("header", rows, 4.0, prompts=1)
    assert table.startswith("header\n\n| decoding | k |")
    assert "| vLLM + head, k=1 | 1 | 1.50 | 1.40 | 1.50 | 8.0 | 2.00x | 1/1 |" in table
    assert "| vLLM n-gram, k=3 | 3 | 1.00 | - | - | 2.0 | 0.50x | 0/1 |" in table
