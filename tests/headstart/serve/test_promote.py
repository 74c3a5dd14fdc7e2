"""`headstart promote` (serve/promote.py): a head taught the logged answers replaces the served one, whose folder
is kept as OLD.prev-<time>; a head no better leaves everything as it was; refusals are one line with nothing
written. Nothing is ever deleted."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import transformers as tr
import yaml

import headstart as hs
from headstart.chat import encode_chat
from headstart.cli import main
from headstart.decode.plain import greedy_generate
from headstart.heads.checkpoint import save_corpus, save_heads
from headstart.heads.eagle3 import Eagle3Options
from headstart.serve.promote import better
from headstart.target import Target
from headstart.train.data import Example
from tests.helpers import assert_one_error_line, batch_of, fit_head, run_cli, snapshot, tiny_config

pytestmark = pytest.mark.usefixtures("no_progress_bars")
K, NEW = 3, 16


def contents(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def logged(tmp_path_factory, smol_tokenizer) -> dict:
    """A tiny target over SmolLM2's tokenizer, a log of 6 chats it answered, the served head (untrained EAGLE-3),
    a head taught those answers, and a recipe."""
    root = tmp_path_factory.mktemp("promote")
    config = tiny_config("llama")
    config.vocab_size, config.num_hidden_layers = len(smol_tokenizer), 3
    torch.manual_seed(0)
    tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(root / "target")
    smol_tokenizer.save_pretrained(root / "target")
    target = Target.from_pretrained(root / "target", dtype=torch.float32)
    rows, sequences = [], []
    for i in range(6):
        messages = [{"role": "user", "content": f"count from {i}"}]
        prompt = encode_chat(smol_tokenizer, messages)
        out = greedy_generate(target, prompt, NEW, eos_token_id=[]).sequences[0]
        answer = out[prompt.shape[1]:].tolist()
        sequences.append(out)
        rows.append({"messages": [*messages, {"role": "assistant", "content": smol_tokenizer.decode(answer)}], "answer_token_ids": answer})
    (root / "log").mkdir()
    (root / "log" / "served-00001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    save_heads(hs.heads.build("eagle3", target), root / "served", target)
    taught = hs.heads.build("eagle3", target)
    fit_head(taught, target, [batch_of(seq[None]) for seq in sequences], Eagle3Options(ttt_steps=K), 150)
    save_heads(taught, root / "taught", target)
    (root / "recipe.yaml").write_text(yaml.safe_dump({"target": {"name_or_path": str(root / "target"), "dtype": "float32"}}))
    (root / "answers.json").write_text(json.dumps([r["answer_token_ids"] for r in rows]))
    return {"root": root, "R": str(root / "recipe.yaml")}


@pytest.fixture
def place(logged, tmp_path) -> dict:
    """A fresh copy of the served and taught heads and the log for one test."""
    for name in ("served", "taught", "log"):
        shutil.copytree(logged["root"] / name, tmp_path / name)
    return {"R": logged["R"], "S": str(tmp_path / "served"), "T": str(tmp_path / "taught"), "L": str(tmp_path / "log"), "root": tmp_path}


def test_a_better_head_is_promoted_and_the_old_one_kept(place, capsys):
    root = place["root"]
    served, taught = contents(root / "served"), contents(root / "taught")
    code = main(["promote", place["R"], "--head", place["T"], "--over", place["S"], "--prompts", place["L"], "--k", str(K),
                 "--out", str(root / "promote.json")])
    out = capsys.readouterr().out
    assert code == 0 and "| new | " in out and "| old | " in out and "\npromoted: τ +" in out, out
    [prev] = root.glob("served.prev-*")
    assert contents(prev) == served and contents(root / "served") == taught and contents(root / "taught") == taught
    report = json.loads((root / "promote.json").read_text())
    assert report["promoted"] and report["old_kept_at"] == str(prev) and report["chats"] == 6
    new, old = (report["acceptance"][n]["mean_acceptance_length"] for n in ("new", "old"))
    assert new > old * 1.02


def test_a_head_no_better_changes_nothing(place, capsys):
    """The served head over the taught one (worse), and the taught one over itself by a margin it cannot reach."""
    root = place["root"]
    shutil.copytree(root / "taught", root / "taught-copy")
    before = snapshot(root)
    assert main(["promote", place["R"], "--head", place["S"], "--over", place["T"], "--prompts", place["L"]]) == 0
    assert "kept the old head" in capsys.readouterr().out and snapshot(root) == before
    code, _ = run_cli(["promote", place["R"], "--head", str(root / "taught-copy"), "--over", place["T"], "--prompts",
                       str(root / "log" / "served-00001.jsonl"), "--margin", "0.5"], capsys)
    assert code == 0 and snapshot(root) == before and not list(root.glob("*.prev-*"))


def test_the_margin_is_relative():
    assert better(2.04, 2.0, 0.02) and not better(2.03, 2.0, 0.02) and better(1.5, None, 0.02) and not better(None, 1.0, 0.0)


REFUSED = [  # command line ({R} recipe, {S} served, {T} taught, {L} log, {X} an empty folder) and its error line's words
    ("promote {R} --head {T} --over {X} --prompts {L}", "no config.json; give a head folder"),
    ("promote {R} --head {S} --over {S} --prompts {L}", "are the same folder"),
    ("promote {R} --head {T} --over {S} --prompts {X}", "no served-*.jsonl there"),
    ("promote {R} --head {T} --over {S} --prompts {L} --margin -1", "argument --margin: expected a value >= 0"),
]


@pytest.mark.parametrize("line, names", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_in_one_line_with_nothing_written(place, capsys, line, names):
    (place["root"] / "empty").mkdir()
    argv = [w.format(X=str(place["root"] / "empty"), **place) for w in line.split()]
    before = snapshot(place["root"])
    code, err = run_cli(argv, capsys)
    assert_one_error_line(code, err, "promote", names)
    assert snapshot(place["root"]) == before


def test_a_better_head_whose_table_drafts_worse_is_not_promoted(logged, place, capsys, tmp_path_factory):
    """The folder swapped holds the corpus table too: a better head over a folder whose table knows the answers is
    kept out while its own folder has no table (a continued head saved without the old table), and promoted
    once it carries one at least as good."""
    root = place["root"]
    answers = json.loads((logged["root"] / "answers.json").read_text())
    examples = [Example(input_ids=a, loss_mask=[1] * len(a), source=f"log:{i}") for i, a in enumerate(answers)]
    save_corpus(root / "served", examples, order=3, max_tokens=10_000)
    before = snapshot(root)
    argv = ["promote", place["R"], "--head", place["T"], "--over", place["S"], "--prompts", place["L"], "--k", str(K)]
    kept_report = tmp_path_factory.mktemp("kept") / "report.json"  # outside the folders compared
    assert main([*argv, "--out", str(kept_report)]) == 0
    out = capsys.readouterr().out
    assert "drafts worse than the old one's" in out and "| new | none | - | - |" in out and snapshot(root) == before, out
    save_corpus(root / "taught", examples, order=3, max_tokens=10_000)
    assert main([*argv, "--out", str(root / "report.json")]) == 0
    assert "\npromoted: τ +" in capsys.readouterr().out and len(list(root.glob("served.prev-*"))) == 1
    report = json.loads((root / "report.json").read_text())
    tables = report["tables"]
    assert tables["new"]["mean_acceptance_length"] == tables["old"]["mean_acceptance_length"] > 1
    assert report["kept_by"] is None
    kept = json.loads(kept_report.read_text())
    assert kept["kept_by"] == "table" and not kept["promoted"] and kept["tables"]["new"] is None
