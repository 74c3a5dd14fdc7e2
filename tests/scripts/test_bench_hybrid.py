"""scripts/bench_hybrid.py on a tiny target with an EAGLE-3 head and its corpus table: every variant decodes, the
table and the margin print (with `--draft-int8 both`, the head's int8 copy beside it), and a head folder without a
table is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

import headstart as hs
from headstart.decode.corpus import CorpusNgram
from headstart.target import Target
from tests.helpers import save_tiny

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_hybrid.py"), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _head(tmp_path, tokenizer, table: bool) -> tuple[Path, Path]:
    folder = save_tiny(tmp_path / "target", tokenizer)
    target = Target.from_pretrained(folder, dtype=torch.float32)
    head = hs.heads.build("eagle3", target)
    head.save_pretrained(tmp_path / "head", target)
    if table:
        text = "The cat sat on the mat. The cat sat on the hat. " * 20
        CorpusNgram.build([tokenizer.encode(text, add_special_tokens=False)], order=3).save(tmp_path / "head")
    return folder, tmp_path / "head"


def test_bench_hybrid_prints_every_variant_and_the_margin(tmp_path, smol_tokenizer):
    target, head = _head(tmp_path, smol_tokenizer, table=True)
    proc = _run("--target", str(target), "--dtype", "float32", "--head", str(head), "--only-margin", "--shared-nodes", "4",
                "--free-nodes", "4", "--sure", "0.9", "--head-weight", "3", "--hybrid-tree", "2", "2", "4",
                "--num-prompts", "2", "--max-new-tokens", "6", "--rounds", "1", "--draft-int8", "both")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "the (int8) copies products in int8" in out
    rows = [line.split(" | ")[0][2:] for line in out.splitlines() if line.startswith("| ") and " | " in line]
    for folder in (str(head), f"{head} (int8)"):  # each copy alone, shared, sitting out, weighed
        assert sum(r.startswith(f"{folder}: ") for r in rows) == 4, rows
    assert "plain" in rows and "lookup branch + corpus tree of 4 nodes, no head" in rows
    cells = {line.split(" | ")[0][2:]: line.split(" | ") for line in out.splitlines() if line.startswith("| ") and " | " in line}
    assert "| τ without the head |" in out  # the same steps' head-free paths: a number for hybrids with a head only
    assert cells["plain"][2] == cells["lookup branch + corpus tree of 4 nodes, no head"][2] == cells[f"{head}: head alone"][2] == "-"
    shared = cells[f"{head}: head and corpus share 4 nodes"]
    assert float(shared[2]) >= 1.0 and float(shared[1]) >= 1.0  # a head that loses at shared steps can leave τ below it
    assert "\nthe head's margin: " in out


def test_a_head_without_a_table_is_one_error_line(tmp_path, smol_tokenizer):
    target, head = _head(tmp_path, smol_tokenizer, table=False)
    proc = _run("--target", str(target), "--dtype", "float32", "--head", str(head))
    assert proc.returncode == 2 and "holds no corpus_ngram.safetensors" in proc.stderr
    assert "Traceback" not in proc.stderr
