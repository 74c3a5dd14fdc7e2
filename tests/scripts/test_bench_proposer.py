"""scripts/bench_proposer.py on a tiny table and data: it prints its table, the kept index drafting what
the rebuilt one drafts (the script asserts it), and refuses a folder without a table in one line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from headstart.decode.corpus import CorpusNgram

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_proposer.py"), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_bench_proposer_prints_both_ways_for_each_context_and_row_count(tmp_path, smol_tokenizer):
    answer = "The cat sat on the mat. The cat sat on the hat. " * 40
    data = tmp_path / "data.jsonl.gz"
    with gzip.open(data, "wt") as f:
        for i in range(4):
            f.write(json.dumps({"id": str(i), "messages": [{"role": "user", "content": "Tell me."},
                                                           {"role": "assistant", "content": answer}]}) + "\n")
    ids = smol_tokenizer.encode(answer, add_special_tokens=False)
    (tmp_path / "head").mkdir()
    CorpusNgram.build([ids], order=3).save(tmp_path / "head")
    proc = _run("--head", str(tmp_path / "head"), "--data", str(data), "--contexts", "32", "64", "--rows", "1", "2", "--steps", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(rows) == 2 * 2 * 2  # contexts x row counts x the two drafters
    assert {line.split(" | ")[0] for line in rows} == {"| 32", "| 64"}


def test_a_folder_without_a_table_is_one_error_line(tmp_path):
    proc = _run("--head", str(tmp_path))
    assert proc.returncode == 2 and "holds no corpus_ngram.safetensors" in proc.stderr
    assert "Traceback" not in proc.stderr
