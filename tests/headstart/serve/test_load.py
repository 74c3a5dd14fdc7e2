"""serve/load.py without a server: the figures a load run reports (the runs themselves: tests/end_to_end/test_vllm.py)."""

from __future__ import annotations

import pytest

from headstart.serve.load import load_summary, percentile


def test_percentiles_interpolate_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5 and percentile(values, 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0


def test_load_summary_counts_requests_and_new_tokens_over_the_wall_clock():
    answers = [{"seconds": s, "tokens": t} for s, t in [(1.0, 10), (2.0, 20), (3.0, 30), (4.0, 40)]]
    summary = load_summary(answers, wall=5.0)
    assert summary["requests"] == 4 and summary["requests_per_s"] == 0.8
    assert summary["tokens"] == 100 and summary["tokens_per_s"] == 20.0
    assert summary["latency_p50"] == 2.5 and summary["latency_p95"] == pytest.approx(3.85)
