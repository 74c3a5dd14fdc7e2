"""scripts/profile_train.py and scripts/gpu_check.py end to end on a tiny Llama: real subprocesses,
real heads, real training steps and decoding; the tables they print and the JSON they write."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.helpers import ROOT

KINDS = ["medusa", "eagle", "eagle3"]
PHASES = ["target_forward", "head_forward", "vocab_and_loss", "backward", "optimizer"]
TITLES = ["target forward", "head forward", "vocab projection + loss", "backward", "optimizer"]
# Tiny matmuls: one thread each, or OpenMP threads spin against the other processes of a shared 2-core machine.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=180)


def table(text: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and body rows of the Markdown table whose first header cell is `first_header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[start:]]
    body = []
    for row in cells[2:]:
        if len(row) != len(cells[0]):
            break
        body.append(row)
    return cells[0], body


def check_training_rows(rows: list[dict], printed: list[list[str]], tokens: list[int], kinds=KINDS) -> None:
    """Every kind profiled: all phases timed, shares summing to 1, throughput consistent with the step
    and with `tokens` per step (made-up batches: no padding), the printed cells those of the JSON."""
    assert [r["kind"] for r in rows] == kinds
    for r, cells, tokens_per_step in zip(rows, printed, tokens):
        assert list(r["ms"]) == PHASES and list(r["share"]) == PHASES
        assert all(r["ms"][p] > 0 for p in ("target_forward", "head_forward", "vocab_and_loss", "backward"))
        assert r["ms"]["optimizer"] >= 0
        assert sum(r["share"].values()) == pytest.approx(1.0, abs=5e-4)  # shares rounded to 4 decimals
        # each figure is rounded to 0.01 ms: the rounded phases sum to the step within half a unit per figure
        assert r["step_ms"] == pytest.approx(sum(r["ms"].values()), abs=0.005 * (len(PHASES) + 1))
        assert r["steps_per_min"] == pytest.approx(60_000 / r["step_ms"], rel=1e-2)
        assert r["tokens_per_step"] == tokens_per_step
        assert r["tokens_per_min"] == pytest.approx(r["steps_per_min"] * tokens_per_step, rel=1e-2)
        assert 0 < r["vocab_share_of_loss"] < 1
        assert cells[0] == r["kind"]
        assert cells[8] == f"{r['step_ms']:,.1f}"
        for title_cell, p in zip(cells[3:8], PHASES):
            assert title_cell == f"{r['ms'][p]:,.1f} ms ({r['share'][p]:.0%})"


def test_profile_train_tiny_prints_the_phase_split_and_writes_json(tmp_path):
    out = tmp_path / "profile.json"
    res = run_script("profile_train.py", "--tiny", "--steps", "1", "--out", str(out),
                     "data.max_length=48", "train.batch_size=2")
    assert res.returncode == 0, res.stderr[-3000:]
    header, printed = table(res.stdout, "head")
    assert header == ["head", "batch (B × T)", "tokens/step", *TITLES, "ms/step", "steps/min", "tokens/min"]
    assert [row[:3] for row in printed] == [[k, "2 × 48", "96"] for k in KINDS]
    data = json.loads(out.read_text())
    assert data["target"] == "tiny-llama" and data["dtype"] == "float32"
    assert data["machine"]["kind"] in ("cpu avx512_bf16", "cpu without avx512_bf16")
    assert data["steps"] == 1 and "made-up" in data["batches"]
    assert f"tiny-llama, float32, {data['machine']['kind']}" in res.stdout
    check_training_rows(data["rows"], printed, tokens=[96, 96, 96])
    # The recipes' draft vocabularies, fitted to the tiny vocabulary; EAGLE-3's draft is smaller than its target's.
    assert [r["draft_vocab_size"] for r in data["rows"]] == [250, 250, 250]


def test_gpu_check_tiny_on_cpu_runs_all_three_checks(tmp_path):
    out = tmp_path / "gpu.json"
    res = run_script("gpu_check.py", "--device", "cpu", "--tiny", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())

    header, printed = table(res.stdout, "tree tokens (cache 512)")
    assert [row[0] for row in printed] == ["1", "2", "4", "8", "16", "32", "64"]
    assert printed[0][2] == "1.00x"
    assert [r["tree_tokens"] for r in data["verify"]] == [1, 2, 4, 8, 16, 32, 64]
    assert all(r["ms"] > 0 for r in data["verify"]) and data["verify"][0]["vs_one"] == 1.0

    _, phases = table(res.stdout, "phase of a speculative step")
    assert [row[0] for row in phases] == ["draft", "target_forward", "accept", "commit_and_bookkeeping", "whole step"]
    loop = data["loop"]
    assert list(loop["ms_per_step"]) == ["draft", "target_forward", "accept", "commit_and_bookkeeping"]
    assert loop["tau"] >= 1.0 and loop["plain_tokens_per_s"] > 0 and loop["speculative_tokens_per_s"] > 0
    assert "outside the target's forward" in res.stdout
    parallel = data["loop_parallel"]  # the same loop with a P-EAGLE head: one draft forward per step
    assert parallel["head"].startswith("P-EAGLE") and list(parallel["ms_per_step"]) == list(loop["ms_per_step"])
    assert parallel["tau"] >= 1.0 and parallel["speculative_tokens_per_s"] > 0

    _, printed = table(res.stdout, "head")
    assert [row[0] for row in printed] == ["medusa", "eagle", "eagle3", "eagle3-parallel"]
    assert [row[1] for row in printed] == ["4 × 64", "4 × 64", "1 × 64", "1 × 64"]  # the GPU recipes' batch sizes
    check_training_rows(data["train"], printed, tokens=[256, 256, 64, 64], kinds=[*KINDS, "eagle3-parallel"])
    assert data["config"] == "tiny" and data["dtype"] == "float32" and data["seconds"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch sees no CUDA GPU")
def test_gpu_check_without_a_gpu_fails_with_one_error_line():
    res = run_script("gpu_check.py", "--device", "cuda")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check.py: error: --device cuda needs a CUDA GPU")
    assert "--device cpu --tiny" in lines[0]
    assert res.stdout == ""
