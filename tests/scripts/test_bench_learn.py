"""scripts/bench_learn.py on a tiny target and table: it answers a stream of HumanEval prompts and prints, per
block, the corpus proposer's acceptance with the table frozen and learning (its JSON with it); a head folder
without a table is one error line. --continue trains a head on the first chats of a stream and compares it with
the served head on the rest, leaving the served head as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import snapshot, write_small_recipe

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_learn.py"), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PATH": ""})


@pytest.mark.parametrize("stream", ["humaneval", "switch"])
def test_bench_learn_prints_frozen_and_learning_per_block(tmp_path, smol_folder, stream):
    data = tmp_path / "answers.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "def f(x):\n    return x"}]}) + "\n")
    proc = _run("--target", str(smol_folder), "--dtype", "float32", "--data", str(data), "--prompts", "4", "--block", "2",
                "--new", "12", "--stream", stream, "--out", str(tmp_path / "out.json"), "--answers", str(tmp_path / "answers.jsonl"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 1-2") or line.startswith("| 3-4")]
    assert len(rows) == 2, proc.stdout
    blocks = json.loads((tmp_path / "out.json").read_text())["blocks"]
    chats = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]  # the served log's rows
    assert len(chats) == 4 and all([m["role"] for m in c["messages"]] == ["user", "assistant"] and c["answer_token_ids"] for c in chats)
    assert [b["prompts"] for b in blocks] == [[1, 2], [3, 4]]
    for row, block in zip(rows, blocks):  # the printed table is the JSON's
        frozen, learning = block["frozen"], block["learning"]
        assert f"| {frozen['accepted']} / {frozen['drafts']} |" in row and f"| {learning['accepted']} / {learning['drafts']} |" in row
        assert frozen["accepted"] <= 3 * frozen["drafts"] and learning["accepted"] <= 3 * learning["drafts"]  # k = 3


def test_a_head_folder_without_a_table_is_one_error_line(tmp_path, smol_folder):
    proc = _run("--target", str(smol_folder), "--dtype", "float32", "--head", str(tmp_path), "--prompts", "1")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("bench_learn: error: ") and "Traceback" not in proc.stderr


def test_table_cost_prints_contexts_memory_and_step_time(tmp_path, smol_folder):
    data = tmp_path / "answers.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "def f(x):\n    return x + 1"}]}) + "\n")
    proc = _run("--target", str(smol_folder), "--dtype", "float32", "--data", str(data), "--table-cost", "5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line.split("|")[2:] for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    frozen, learned = rows["frozen (the head's)"], rows["learning, after 5 answers (0 s to count)"]
    assert int(learned[0]) > int(frozen[0])  # shifted answers are new text: new contexts
    assert float(frozen[2]) > 0 and float(learned[2]) > 0


def test_continue_trains_on_the_first_chats_and_compares_on_the_rest(tmp_path, smol_folder):
    write_small_recipe(tmp_path, smol_folder)
    proc = subprocess.run([sys.executable, "-m", "headstart", "train", str(tmp_path / "recipe.yaml"), f"train.output_dir={tmp_path / 'first'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = tmp_path / "first" / "final"
    before = snapshot(served)
    argv = ["--target", str(smol_folder), "--dtype", "float32", "--head", str(served), "--continue", str(tmp_path / "recipe.yaml"),
            "--continue-on", str(tmp_path / "conv.jsonl"), "--data", str(tmp_path / "conv.jsonl"), "--out-dir", str(tmp_path / "cont"),
            "--first", "12", "--minutes", "0.2", "--k", "2", "--also", str(tmp_path / "conv.jsonl"), "--out", str(tmp_path / "res.json")]
    proc = _run(*argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "res.json").read_text())["results"]
    assert [r["chats"] for r in results] == [12, 24] and all(r["head"]["continued"] >= 1 and r["table"]["served"] > 1 for r in results)
    assert sum(line.startswith(f"| {tmp_path}") for line in proc.stdout.splitlines()) == 2, proc.stdout
    assert (tmp_path / "cont" / "head" / "final" / "model.safetensors").is_file() and snapshot(served) == before
    assert len((tmp_path / "cont" / "served.jsonl").read_text().splitlines()) == 12
    again = snapshot(tmp_path / "cont")
    proc = _run(*argv)  # the folder holds a run: refused in one line, nothing replaced
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("bench_learn: error: --out-dir") and "Traceback" not in proc.stderr
    assert snapshot(tmp_path / "cont") == again
