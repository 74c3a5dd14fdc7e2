"""`headstart eval`: hand-checked acceptance statistics, the report's schema, prompt sets, peers, the HTML view."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from headstart.chat import encode_chat
from headstart.cli import main
from headstart.config import DecodeConfig, EvalConfig
from headstart.decode.contract import Proposal
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.hybrid import HybridHead
from headstart.decode.plain import greedy_generate
from headstart.eval.acceptance import acceptance_stats, free_drafter_bound, interpolated_cost, varying_drafter_bound
from headstart.eval.prompts import load_eval_prompts
from headstart.eval.report import head_margin
from headstart.eval.run import SCHEMA_VERSION, evaluate, format_table
from headstart.eval.speed import EvalError, eos_ids
from headstart.jsonl import DataError
from headstart.target import Target
from tests.helpers import PROMPT, ROOT, OracleHead, perturbed_heads, save_tiny

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread, far faster on shared cores
CHAIN3 = [(0,), (0, 0), (0, 0, 0)]
BRANCHY = [(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]  # depth 3, 5 nodes; the oracle's path is (0, 0, 0)


# ---------------------------------------------------------------- pure statistics, by hand


def test_acceptance_stats_by_hand():
    s = acceptance_stats([0, 1, 3, 3, 2, 0, 1, 3], depth=3, drafted_nodes=8 * 5)
    # 8 steps, 13 drafts accepted: τ = (13 + 8) / 8. Steps with ≥1: 6, ≥2: 4, ≥3: 3.
    assert s["steps"] == 8 and s["accepted_drafts"] == 13
    assert s["tau"] == 21 / 8
    assert s["acceptance_per_depth"] == [6 / 8, 4 / 8, 3 / 8]
    assert s["conditional_acceptance"] == [6 / 8, 4 / 6, 3 / 4]
    assert s["accepted_histogram"] == [2, 2, 1, 3]
    assert s["draft_token_acceptance"] == 13 / 40
    wrong = acceptance_stats([0, 0, 0], depth=2)
    assert wrong["tau"] == 1.0 and wrong["conditional_acceptance"] == [0.0, None]
    assert wrong["draft_token_acceptance"] is None
    with pytest.raises(ValueError, match="0..2"):
        acceptance_stats([3], depth=2)


def test_free_drafter_bound_by_hand():
    cost = {1: 1.0, 5: 1.1, 9: 1.25, 17: 1.6}
    b = free_drafter_bound(2.5, cost, verify_tokens=9)
    assert b == {"verify_tokens": 9, "measured_at": 9, "verify_cost": 1.25, "free_drafter_speedup": 2.0}
    assert free_drafter_bound(2.0, cost, verify_tokens=6)["measured_at"] == 9  # the next measured size up


def test_varying_bound_prices_each_step_on_the_cost_curve():
    cost = {1: 1.0, 5: 1.2, 9: 1.25, 41: 2.0}
    assert interpolated_cost(cost, 3) == pytest.approx(1.1) and interpolated_cost(cost, 25) == pytest.approx(1.625)
    assert interpolated_cost(cost, 100) == 2.0 and interpolated_cost(cost, 9) == 1.25
    b = varying_drafter_bound(3.0, cost, [1, 1, 41, 5])  # steps of 1, 1, 41 and 5 tokens: mean cost 1.3
    assert b["verify_tokens"] == 41 and b["mean_verify_tokens"] == 12.0
    assert b["verify_cost"] == pytest.approx(1.3) and b["free_drafter_speedup"] == pytest.approx(3.0 / 1.3)
    assert varying_drafter_bound(2.5, cost, [9, 9])["free_drafter_speedup"] == free_drafter_bound(2.5, cost, 9)["free_drafter_speedup"]


# ---------------------------------------------------------------- a tiny target with SmolLM2's tokenizer


@pytest.fixture(scope="module")
def models(tmp_path_factory, smol_tokenizer):
    root = tmp_path_factory.mktemp("eval-models")
    return {
        "target": save_tiny(root / "target", smol_tokenizer),
        "assistant": save_tiny(root / "assistant", smol_tokenizer, arch="qwen2", seed=1),
        "other_vocab": save_tiny(root / "other", smol_tokenizer, vocab=128),
    }


@pytest.fixture(scope="module")
def target(models):
    return Target.from_pretrained(models["target"], dtype=torch.float32)


class WrongHead(OracleHead):
    """Every draft is off by one token: nothing is ever accepted."""

    def propose(self, state, tree):
        p = super().propose(state, tree)
        return Proposal((p.tokens + 1) % 49152, tree)


class CyclingHead(OracleHead):
    """Right up to depth k and wrong below it, with k = 0, 1, 2, 3, 0, 1, ... at successive steps."""

    calls = 0

    def propose(self, state, tree):
        p = super().propose(state, tree)
        k = self.calls % 4
        self.calls += 1
        deep = tree.depth[1:] > k  # (N,) nodes deeper than k
        return Proposal(torch.where(deep, (p.tokens + 1) % 49152, p.tokens), tree)


@pytest.fixture(scope="module")
def oracle_run(target, tmp_path_factory):
    """One prompt, 41 new tokens, three heads with controlled proposals, all on one tree."""
    ids = encode_chat(target.tokenizer, PROMPT.messages)
    cont = greedy_generate(target, ids, 41, eos_token_id=eos_ids(target)).sequences[0, ids.shape[1] :].tolist()
    assert len(cont) == 41, "the tiny target stopped early; pick another prompt"
    n = ids.shape[1]
    heads = {"oracle": OracleHead(cont, n), "wrong": WrongHead(cont, n), "cycling": CyclingHead(cont, n)}
    out = tmp_path_factory.mktemp("oracle") / "eval.json"
    cfg = EvalConfig(max_new_tokens=41, output=str(out), peers=False)
    report = evaluate(target, heads, DecodeConfig(), cfg, tree=BRANCHY, prompts=[PROMPT], warmup=False, progress=False)
    return report, out


def test_controlled_heads_give_hand_computed_rates(oracle_run):
    report, _ = oracle_run
    (res,) = report["results"]
    by = {e["label"]: e for e in res["methods"]}
    assert list(by) == ["plain", "oracle", "wrong", "cycling"]
    # The oracle accepts all 3 drafts every step: 1 token from prefill + 10 steps x 4 = 41.
    a = by["oracle"]["acceptance"]
    assert a["steps"] == 10 and a["tau"] == 4.0
    assert a["acceptance_per_depth"] == [1.0, 1.0, 1.0] and a["conditional_acceptance"] == [1.0, 1.0, 1.0]
    assert a["accepted_histogram"] == [0, 0, 0, 10] and a["draft_token_acceptance"] == 0.6  # 3 of 5 nodes
    # Always wrong: 40 steps of one (bonus) token.
    a = by["wrong"]["acceptance"]
    assert a["steps"] == 40 and a["tau"] == 1.0 and a["acceptance_per_depth"] == [0.0, 0.0, 0.0]
    assert a["conditional_acceptance"] == [0.0, None, None] and a["accepted_histogram"] == [40, 0, 0, 0]
    # Accepting 0, 1, 2, 3 in turn: 4 cycles of 10 tokens, 16 steps, 24 drafts.
    a = by["cycling"]["acceptance"]
    assert a["steps"] == 16 and a["tau"] == 2.5
    assert a["acceptance_per_depth"] == [0.75, 0.5, 0.25]
    assert a["conditional_acceptance"] == [0.75, round(2 / 3, 4), 0.5]
    assert a["accepted_histogram"] == [4, 4, 4, 4]
    for label in ("oracle", "wrong", "cycling"):  # lossless: every output is the target's greedy one
        assert by[label]["greedy_match"]["matched"] == 1 and by[label]["greedy_match"]["mean_agree_prefix"] == 41
        assert by[label]["tree"]["size"] == 5 and by[label]["bound"]["verify_tokens"] == 6
        assert by[label]["target_forwards"] == by[label]["acceptance"]["steps"] + 1
    # The head's margin: the fastest head (any of the three) over the fastest head-free method (plain here).
    margin = res["head_margin"]
    fastest = max(("oracle", "wrong", "cycling"), key=lambda label: by[label]["tokens_per_s"])
    assert margin["with_head"] == fastest and margin["without_head"] == "plain"
    assert margin["ratio"] == pytest.approx(by[fastest]["tokens_per_s"] / by["plain"]["tokens_per_s"], rel=1e-2)
    assert head_margin(res["methods"], {"oracle": "lookup"})["with_head"] != "oracle"  # a head-free kind is not a head


class Replaying(OracleHead):
    """The oracle from the continuation's start again at each new sequence, so that the hybrid's copy of
    it (made at a sequence's start) drafts from there after the head alone has decoded the same turn."""

    def propose(self, state, tree):
        if state.start == 0:
            self.position = 0
        return super().propose(state, tree)


def test_a_hybrid_counts_what_its_head_added_over_the_head_free_paths_of_each_step(target):
    """decode/hybrid.py's head_* counts, decoded: a head that is always wrong adds nothing at any step (its
    hybrid accepts exactly what its lookup branch gives), the oracle adds at some steps and loses at none
    (its tree is whole beside the branch: nothing head-free is pushed out); eval reports them as `head_gain`."""
    ids = encode_chat(target.tokenizer, PROMPT.messages)
    cont = greedy_generate(target, ids, 41, eos_token_id=eos_ids(target)).sequences[0, ids.shape[1] :].tolist()
    n = ids.shape[1]
    counts = {}
    for label, head in (("oracle", OracleHead(cont, n)), ("wrong", WrongHead(cont, n))):
        hybrid = HybridHead(head, max_tokens=4)
        out = SpeculativeGenerator(target, hybrid, tree=CHAIN3).generate(ids, 41, eos_token_id=eos_ids(target))
        assert out.sequences[0, n:].tolist() == cont  # float32: lossless
        counts[label] = hybrid.stats
        steps = len(out.accepted_per_step)
        assert 0 < hybrid.stats.head_steps < steps  # a sequence's last step is never credited
    wrong, oracle = counts["wrong"], counts["oracle"]
    assert (wrong.head_gained, wrong.head_lost, wrong.head_gain) == (0, 0, 0)
    assert oracle.head_gained > 0 and oracle.head_lost == 0 and oracle.head_gain >= oracle.head_gained

    report = evaluate(target, {"oracle": Replaying(cont, n)}, DecodeConfig(prompt_lookup=4), EvalConfig(max_new_tokens=41, peers=False),
                      tree=CHAIN3, prompts=[PROMPT], warmup=False, progress=False)
    by = {e["label"]: e for e in report["results"][0]["methods"]}
    assert [label for label, e in by.items() if e["head_gain"] is not None] == ["oracle+lookup"]
    gain, acc = by["oracle+lookup"]["head_gain"], by["oracle+lookup"]["acceptance"]
    assert set(gain) == _documented_keys()["head_gain"]
    assert gain["gained_steps"] > 0 and gain["lost_steps"] == 0 and 0 < gain["head_steps"] < acc["steps"]
    assert gain["tau_without_head"] == pytest.approx(acc["tau"] - gain["drafts"] / acc["steps"], abs=1e-3)  # both rounded to 4 places
    assert "What the head added, step by step: it drafted at" in format_table(report)


# ---------------------------------------------------------------- the schema is the documented one


def _documented_keys() -> dict[str, set[str]]:
    """Keys listed under each '### ... `<object>`' heading of docs/eval.md's schema section."""
    text = (ROOT / "docs" / "eval.md").read_text()
    sections: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"^### .*`(\w+)`", line)
        if head:
            current = sections.setdefault(head.group(1), set())
        elif current is not None and (key := re.match(r"^- `(\w+)`", line)):
            current.add(key.group(1))
    return sections


def test_report_keys_are_the_documented_schema(oracle_run):
    report, out = oracle_run
    docs = _documented_keys()
    assert report["schema_version"] == SCHEMA_VERSION == 1
    assert set(report) == docs["report"]
    entry = report["results"][0]["methods"][1]
    assert set(report["results"][0]) == docs["result"]
    assert set(entry) == docs["method"]
    assert set(entry["acceptance"]) == docs["acceptance"]
    assert set(entry["bound"]) == docs["bound"]
    assert set(entry["greedy_match"]) == docs["greedy_match"]
    assert set(next(iter(entry["per_category"].values()))) == docs["category"]
    assert set(report["rows"][0]) == docs["row"]
    assert set(report["heads"][0]) == docs["head"]
    for name in ("prompts", "target", "machine", "sampling"):
        assert set(report[name]) == docs[name], name
    assert json.loads(out.read_text()) == report
    for suffix in (".md", ".png", ".html"):
        assert out.with_suffix(suffix).stat().st_size > 1000


# ---------------------------------------------------------------- the HTML view, rendered by a real browser


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_html_view_renders_coloured_steps(oracle_run, tmp_path):
    from PIL import Image

    _, out = oracle_run
    html = out.with_suffix(".html").read_text()
    assert 'class="acc"' in html and 'class="rej"' in html and 'class="fix"' in html
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (make test installs it where apt-get is available)")
    shot = tmp_path / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,1600",
        out.with_suffix(".html").as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=True)
    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    counts = {rgb: n for n, rgb in colours}
    assert len(counts) > 50, "the screenshot is nearly blank"
    for name, rgb in {"accepted green": (0xB6, 0xF2, 0xB6), "rejected red": (0xF7, 0xB3, 0xB3), "target yellow": (0xFF, 0xE6, 0x80)}.items():
        assert counts.get(rgb, 0) > 200, f"no {name} in the rendered page"


# ---------------------------------------------------------------- prompt sets, peers, sampling, the CLI


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_mt_bench_multi_turn_peers_and_sampling_through_the_cli(models, target, tmp_path, capsys):
    heads_dir = tmp_path / "medusa"
    perturbed_heads(target).save_pretrained(heads_dir, target)
    bench = _write(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Write a line about rain.", "Now make it rhyme."]},
        {"question_id": 101, "category": "reasoning", "turns": ["What is 2 + 3?"]},
    ])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"target: {{name_or_path: {models['target']}, dtype: float32}}\ndecode: {{tree: tree8}}\n")
    out = tmp_path / "eval.json"
    code = main([
        "eval", str(recipe), f"eval.prompts={bench},data/prompts/eval_extra.jsonl", "eval.num_prompts=4",
        "eval.max_new_tokens=12", f"eval.output={out}",
        "--head", str(heads_dir), "--assistant", str(models["assistant"]), "--temperature", "0", "--temperature", "0.8",
    ])
    printed = capsys.readouterr().out
    assert code == 0
    assert "### temperature 0 (greedy)" in printed and "### temperature 0.8" in printed and "Acceptance per depth" in printed
    report = json.loads(out.read_text())
    p = report["prompts"]
    assert p["count"] == 4 and p["turns"] == 5  # the first MT-Bench question has two turns
    assert p["categories"] == {"multiturn": 1, "reasoning": 1, "translate": 1, "writing": 1}
    greedy, sampled = report["results"]
    labels = [e["label"] for e in greedy["methods"]]
    assert labels == ["plain", str(heads_dir), "hf_generate", "hf_prompt_lookup", "hf_assisted"]
    for e in greedy["methods"]:  # float32: every method reproduces plain greedy decoding
        assert e["greedy_match"]["matched"] == 5, e["label"]
        assert set(e["per_category"]) == set(p["categories"])
    assert all(e["greedy_match"] is None for e in sampled["methods"])
    assert sampled["temperature"] == 0.8 and len(report["rows"]) == 2 * 5 * 5
    turns = [r for r in report["rows"] if r["id"] == "81" and r["method"] == "plain" and r["temperature"] == 0]
    assert [r["turn"] for r in turns] == [0, 1]


def test_shipped_extra_prompts_are_held_out_from_training():
    extra = load_eval_prompts(ROOT / "data/prompts/eval_extra.jsonl")
    assert {p.category for p in extra} == {"multiturn", "translate"}
    assert all(len(p.messages) == 3 for p in extra if p.category == "multiturn")

    def grams(text: str, n: int = 6) -> set:
        w = re.findall(r"[a-z0-9']+", text.lower())
        return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}

    train = set()
    with open(ROOT / "data/prompts/train.jsonl") as f:
        for line in f:
            train |= grams(json.loads(line)["prompt"])
    for p in extra:
        for m in p.messages:
            assert not grams(m["content"]) & train, f"{p.id} shares words with a training prompt"


def test_bad_prompt_files_are_clear_errors(tmp_path):
    bad = _write(tmp_path / "bad.jsonl", [{"id": 1, "category": "chat", "prompt": "hi"}, '{"id": 2, "category": '])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        load_eval_prompts(bad)
    nocat = _write(tmp_path / "nocat.jsonl", [{"question_id": 1, "turns": ["hi"]}])
    with pytest.raises(DataError, match=r"nocat\.jsonl:1: no 'category'"):
        load_eval_prompts(nocat)
    turns = _write(tmp_path / "turns.jsonl", [{"question_id": 1, "category": "x", "turns": "hi"}])
    with pytest.raises(DataError, match=r"turns\.jsonl:1: 'turns' must be a non-empty list"):
        load_eval_prompts(turns)
    good = _write(tmp_path / "good.jsonl", [{"question_id": 1, "category": "writing", "turns": ["hi"]}])
    with pytest.raises(DataError, match="category 'coding' is not in .*good.jsonl; its categories are: writing"):
        load_eval_prompts(good, categories=["coding"])


def test_mismatched_head_and_assistant_are_clear_errors(models, target, tmp_path, capsys):
    other = Target.from_pretrained(models["other_vocab"], dtype=torch.float32)
    foreign = tmp_path / "foreign"
    perturbed_heads(other).save_pretrained(foreign, other)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"target: {{name_or_path: {models['target']}, dtype: float32}}\n")
    assert main(["eval", str(recipe), f"eval.output={tmp_path / 'e.json'}", "--head", str(foreign)]) == 2
    assert "does not fit the target" in capsys.readouterr().err
    cfg = EvalConfig(assistant=str(models["other_vocab"]), output="")
    with pytest.raises(EvalError, match="vocabulary of 128 tokens but the target has 49152"):
        evaluate(target, perturbed_heads(target), DecodeConfig(tree="chain1"), cfg, prompts=[PROMPT], progress=False)


@pytest.mark.embedded
def test_embedded_float32_eval_matches_plain_for_every_method(tmp_path):
    import headstart as hs

    target = hs.embedded_target(dtype=torch.float32)
    cfg = EvalConfig(prompts="data/prompts/eval_extra.jsonl", num_prompts=1, max_new_tokens=12, output=str(tmp_path / "e.json"))
    report = evaluate(target, hs.heads.build("medusa", target, num_heads=3), DecodeConfig(tree="tree8"), cfg, progress=False)
    (res,) = report["results"]
    assert [e["label"] for e in res["methods"]] == ["plain", "medusa", "hf_generate", "hf_prompt_lookup"]
    assert all(e["greedy_match"]["matched"] == 1 for e in res["methods"])  # float32: exact, the multi-turn chat included
    assert report["prompts"]["categories"] == {"multiturn": 1} and report["forward_cost"]["9"] >= 0.5
