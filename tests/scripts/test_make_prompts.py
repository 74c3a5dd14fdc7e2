"""The shipped prompt sets are reproducible from the tables in data/prompt_tables/ by scripts/make_prompts.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "make_prompts.py"
TABLES = ROOT / "data" / "prompt_tables"


def make_prompts(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_script_rewrites_the_committed_prompt_sets_byte_for_byte(tmp_path):
    """Run from another folder (the tables are found next to the script), seed 0, into a temp folder."""
    proc = make_prompts(tmp_path, "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    for name in ("train.jsonl", "eval.jsonl"):
        written = (tmp_path / "out" / name).read_bytes()
        assert written == (ROOT / "data" / "prompts" / name).read_bytes(), f"{name} differs from data/prompts/{name}"
    assert "total" in proc.stdout and "9000" in proc.stdout and "180" in proc.stdout


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        # A second definition of a table another file already holds.
        ("zz_extra.yaml", "fillers:\n  names: [Ada, Bo, Cy]\n", ["'names' is also defined in", "common.yaml"]),
        # A record row without one of its fields.
        ("code.yaml", "fillers:\n  buggy_snippets:\n  - lang: python\n    goal: add\n",
         ["a row of 'buggy_snippets' must have the fields", "code"]),
        ("zz_extra.yaml", "- just a list\n", ["expected a mapping with the keys 'fillers' and/or 'shared'"]),
        ("zz_extra.yaml", "fillers: [unclosed\n", ["not valid YAML", "line 2"]),
    ],
    ids=["table-defined-twice", "row-missing-field", "not-a-mapping", "invalid-yaml"],
)
def test_bad_tables_are_one_error_line_naming_the_file(tmp_path, file, text, expected):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    (tables / file).write_text(text, encoding="utf-8")
    proc = make_prompts(tmp_path, "--tables", str(tables), "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"make_prompts: error: {tables / file}: "), proc.stderr
    for part in expected:
        assert part in lines[0]
    assert not (tmp_path / "out").exists()


def test_an_empty_tables_folder_is_an_error(tmp_path):
    proc = make_prompts(tmp_path, "--tables", str(tmp_path), "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"make_prompts: error: no prompt tables (*.yaml) in {tmp_path}: pass --tables with the folder that holds them"


def test_a_missing_table_is_an_error_naming_the_category(tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    (tables / "chat.yaml").unlink()
    proc = make_prompts(tmp_path, "--tables", str(tables), "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("make_prompts: error: train/chat: _chat_"), proc.stderr
    assert "found no table and no template slot named" in lines[0]
    assert not (tmp_path / "out").exists()
