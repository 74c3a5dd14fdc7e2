"""The serving engine is the judge: vLLM (its CPU build, in .venv-vllm) loads and decodes every layout
headstart says it serves, its greedy float32 output with a head equals its plain output, and its
acceptance equals headstart's prediction for the same head, prompts and chain of k.

One vLLM subprocess (headstart.serve.engine) loads the engines one after the other (each start takes
tens of seconds on 2 cores) and is shared by the tests; `headstart serve-check` runs once more, as a user runs it (a
subprocess: its own vLLM with plain, the trained head in the speculators layout, n-gram, headstart's
corpus proposer and the head as headstart's hybrid, loaded at once and taking turns prompt by prompt), and
the speculators layout's tests read its report. Skipped when .venv-vllm is missing outside CI (`make vllm`
creates it; `make test-vllm` runs this file with it); in CI (CI=true) a missing one is an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers as tr

import headstart as hs
from headstart.chat import encode_chat
from headstart.decode.corpus import CorpusNgram
from headstart.decode.plain import greedy_generate
from headstart.heads.checkpoint import save_heads
from headstart.heads.dflash import DFlashOptions
from headstart.heads.eagle3 import Eagle3Options
from headstart.heads.export import export
from headstart.serve.check import agreement, compare, headstart_side
from headstart.serve.job import ServingError, corpus_env, head_speculative_config, run_vllm, vllm_job, vllm_python
from headstart.serve.prediction import along_text_acceptance, hybrid_along_text_counts, learning_counts
from headstart.serve.proposer import HYBRID_ENV, along_text_counts
from headstart.target import Target
from tests.helpers import batch_of, fit_head

NEW = 32  # new tokens per prompt
K = 3  # the chain the trained head drafts
PROMPTS = ["Name three rivers.", "Count from 7 to 12.", "Why is the sky blue?", "Write a haiku about rain."]
#: relative difference allowed between vLLM's and headstart's mean acceptance length (float32: the
#: same head and prompts give the same accepted counts; the margin covers a near-tie flipping one step)
TOLERANCE = 0.05


def tiny_llama(folder, tokenizer) -> Target:
    """A random Llama (hidden 256, head_dim 64, 4 layers) over SmolLM2's tokenizer, saved for vLLM.

    initializer_range 0.2 keeps its greedy output varied (at 0.02 it repeats two tokens), so that
    token identity means something; rope_theta is not the default, so a misread rope would show.
    """
    torch.manual_seed(0)
    config = tr.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rope_theta=50000.0, initializer_range=0.2,
        tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Target(model, tokenizer, name=str(folder))


def trained_eagle3(target, sequences: list[torch.Tensor], steps: int = 200, **options):
    """An EAGLE-3 head that has learnt the target's own continuations of the prompts (so it accepts),
    over a draft vocabulary of the tokens they hold (smaller than the target's: d2t / t2d); `options`
    go to its build (parallel_drafting=True: a P-EAGLE head)."""
    vocab = torch.cat(sequences).unique()
    head = hs.heads.build("eagle3", target, draft_vocab=vocab, **options)
    fit_head(head, target, [batch_of(seq[None]) for seq in sequences], Eagle3Options(ttt_steps=K), steps)
    return head


def noisy(head, scale: float, seed: int = 0):
    """Every parameter moved by noise, so that a wrongly mapped tensor changes the drafts."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return head.eval().requires_grad_(False)


def write_recipe(tmp, target_folder) -> Path:
    """A recipe for the tiny target (float32) whose eval prompts are PROMPTS, written into the new folder `tmp`."""
    tmp.mkdir()
    (tmp / "prompts.jsonl").write_text("".join(json.dumps({"id": str(i), "category": "chat", "prompt": p}) + "\n"
                                               for i, p in enumerate(PROMPTS)))
    (tmp / "recipe.yaml").write_text(
        f"target:\n  name_or_path: {target_folder}\n  dtype: float32\n"
        f"eval:\n  prompts: {tmp / 'prompts.jsonl'}\n  num_prompts: {len(PROMPTS)}\n  max_new_tokens: {NEW}\n"
        f"  output: {tmp / 'eval.json'}\n"
    )
    return tmp / "recipe.yaml"


def taught_head(folder, target, continuations: list[torch.Tensor], prompts: list[list[int]]):
    """(the EAGLE-3 head taught half the prompts' continuations, its corpus table), saved in `folder`.

    Taught half, it accepts all of those and little of the others, so that parity is checked on partial
    acceptance, where a wrong mapping or position would show. The table training saves beside a head
    (decode/corpus.py) is counted from the continuations with every 4th token of the second half changed, so
    that its chains are accepted whole on some prompts and in part on the others."""
    head = trained_eagle3(target, continuations[: len(continuations) // 2])
    save_heads(head, folder, target)
    answers = [c[len(p) :].tolist() for c, p in zip(continuations, prompts)]
    answers[2:] = [[t + 1 if i % 4 == 3 else t for i, t in enumerate(a)] for a in answers[2:]]
    corpus = CorpusNgram.build(answers, order=3)
    corpus.save(folder)
    return head, corpus


def run_serve_check(tmp, target_folder, head_folder) -> dict:
    """`headstart serve-check` as a user runs it, on PROMPTS (a prompt file and a recipe written here):
    the speculators layout of the head, a chain of K, float32, vLLM compiled as a server runs it (the
    fixture's own engines run eager). Returns its exit, output and files."""
    recipe = write_recipe(tmp, target_folder)
    out = tmp / "serve-check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "headstart", "serve-check", str(recipe), "--head", str(head_folder),
         "--k", str(K), "--layout", "speculators", "--compiled", "--out", str(out)],
        capture_output=True, text=True, timeout=1500,
    )
    report = json.loads(out.read_text()) if out.is_file() else None
    markdown = out.with_suffix(".md").read_text() if out.with_suffix(".md").is_file() else None
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:], "report": report,
            "markdown": markdown, "log": out.with_suffix(".vllm.log")}


def require_vllm() -> None:
    """Skip without .venv-vllm outside CI; in CI a missing one is an error."""
    try:
        vllm_python()
    except ServingError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run these tests with vLLM (make test-vllm sets it up): {e}")
        pytest.skip(f"vLLM's environment is missing (run `make vllm`): {e}")


@pytest.fixture(scope="module")
def served(tmp_path_factory, smol_tokenizer):
    """Build the target and heads, export them, run every engine once in one vLLM subprocess."""
    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm")
    target = tiny_llama(tmp / "target", smol_tokenizer)
    prompts = [encode_chat(smol_tokenizer, [{"role": "user", "content": p}])[0].tolist() for p in PROMPTS]
    continuations = [greedy_generate(target, torch.tensor([p]), NEW, eos_token_id=[]).sequences[0] for p in prompts]
    head_folder = tmp / "eagle3-head"  # with its table, serve-check also serves headstart's corpus proposer and hybrid
    taught, corpus = taught_head(head_folder, target, continuations, prompts)
    heads = {
        "eagle3": taught,
        "eagle3-full": noisy(hs.heads.build("eagle3", target), 0.02),
        # a draft vocabulary, as the demo's Medusa head: served over the full vocabulary (heads/export.py)
        "medusa": noisy(hs.heads.build("medusa", target, num_heads=K, draft_vocab=torch.arange(0, 4096)), 0.002),
    }
    cli = run_serve_check(tmp / "cli", tmp / "target", head_folder)
    exports = {  # engine name: (head, layout, vLLM method, k); "speculators" is the serve-check run's
        "eagle3": ("eagle3", "eagle3", "eagle3", K),
        "speculators": ("eagle3", "speculators", "eagle3", K),
        "eagle3-full": ("eagle3-full", "eagle3", "eagle3", 2),
        "medusa": ("medusa", "vllm-medusa", "medusa", K),
    }
    engines = [{"name": "plain", "speculative_config": None}]
    for name, (head, layout, method, k) in exports.items():
        if name == "speculators":
            continue
        folder = export(heads[head], target, tmp / name, layout)
        engines.append({"name": name, "speculative_config": {"method": method, "model": str(folder), "num_speculative_tokens": k}})
    # headstart's hybrid (serve/proposer.py): the trained head, its folder's table and prompt lookup in one
    # engine, through headstart's vLLM plugin, which every engine of this run loads (the others pass through)
    engines.append({"name": "hybrid", "speculative_config": {"method": "eagle3", "model": str(tmp / "eagle3"), "num_speculative_tokens": K},
                    "env": {HYBRID_ENV: "1"}})
    job = vllm_job(tmp / "target", prompts, engines, "float32", NEW, eos=None, ignore_eos=True, kv_cache_gib=1)
    result = run_vllm(job, timeout=1500, log=tmp / "vllm.log", env=corpus_env(head_folder))
    return {"target": target, "prompts": prompts, "heads": heads, "exports": exports, "result": result, "cli": cli,
            "reference": [c[len(p):].tolist() for c, p in zip(continuations, prompts)], "log": tmp / "vllm.log", "corpus": corpus}


def cli_report(served) -> dict:
    cli = served["cli"]
    log = cli["log"].read_text(errors="replace")[-3000:] if cli["log"].is_file() else ""
    assert cli["returncode"] == 0 and cli["report"] is not None, f"serve-check failed:\n{cli['stderr']}\n{log}"
    return cli["report"]


def record(served, name: str) -> dict:
    """One engine's record: the fixture's run, or (speculators) the serve-check run's head engine."""
    if name == "speculators":
        report = cli_report(served)
        return {"ok": True, "outputs": None, "metrics": report["acceptance"]["vllm"], "draft_config": report["draft_config"]}
    r = next(e for e in served["result"]["engines"] if e["name"] == name)
    assert r["ok"], f"vLLM failed on {name}: {r['error']}\n{r.get('traceback', '')}"
    return r


def test_vllm_plain_equals_headstart_greedy(served):
    """The tiny target itself: vLLM's float32 greedy output is the HF model's, token for token."""
    plain = record(served, "plain")
    assert plain["outputs"] == served["reference"]
    assert all(len(set(o)) > NEW // 2 for o in plain["outputs"])  # varied output, not a loop


@pytest.mark.parametrize("name", ["eagle3", "eagle3-full", "medusa"])
def test_layout_loads_and_decodes_identically(served, name):
    """Each served layout loads, drafts (vLLM's counters move) and leaves the output unchanged; the
    Medusa head has a draft vocabulary (vLLM 0.32 loads no token_map: exported over the full vocabulary).
    The speculators layout: test_serve_check_cli."""
    r = record(served, name)
    k = served["exports"][name][3]
    assert r["metrics"]["drafts"] > 0 and r["metrics"]["draft_tokens"] == k * r["metrics"]["drafts"]
    assert agreement(r["outputs"], record(served, "plain")["outputs"])["matched"] == len(served["prompts"])


def test_draft_configs_read_as_written(served):
    """What vLLM built the drafts from: the fields the exporter writes, read as meant."""
    for name in ("eagle3", "speculators"):
        c = record(served, name)["draft_config"]
        head = served["heads"]["eagle3"]
        assert c["method"] == "eagle3" and c["norm_before_residual"] is False
        assert c["eagle_aux_hidden_state_layer_ids"] == [i + 1 for i in head.feature_layers]  # capture index = ours + 1
        assert c["draft_vocab_size"] == head.options["draft_vocab_size"] < c["vocab_size"] == 49152
        assert c["rope_parameters"]["rope_theta"] == 50000.0 and c["max_position_embeddings"] == 1024
        assert (c["hidden_size"], c["head_dim"], c["num_hidden_layers"], c["target_hidden_size"]) == (256, 64, 1, 256)
    assert record(served, "eagle3-full")["draft_config"]["draft_vocab_size"] == 49152  # no d2t: vLLM has no map to load
    m = record(served, "medusa")["draft_config"]  # a head with a draft vocabulary, served over the full one
    assert (m["num_heads"], m["truncated_vocab_size"], m["original_lm_head"]) == (K, 49152, True)


def check_parity(report: dict, least: float = 1.5) -> None:
    acc = report["acceptance"]
    assert least < acc["headstart"]["mean_acceptance_length"] < K + 0.5, acc  # a head that accepts, not always
    assert acc["headstart"]["acceptance_per_position"][-1] < 0.9, acc  # some drafts are rejected
    assert abs(acc["relative_difference"]["mean_acceptance_length"]) <= TOLERANCE, acc
    v, h = acc["vllm"]["acceptance_per_position"], acc["headstart"]["acceptance_per_position"]
    assert all(abs(a - b) <= TOLERANCE for a, b in zip(v, h)), (v, h)
    assert report["agreement"]["headstart_head_vs_vllm_plain"]["rate"] == 1.0


def test_vllm_acceptance_equals_headstart_prediction(served):
    """Same head, prompts and chain of k: vLLM's acceptance is headstart's, within TOLERANCE (the
    speculators layout: serve-check's own report, test_serve_check_cli)."""
    ours = headstart_side(served["target"], served["heads"]["eagle3"], served["prompts"], K, NEW, eos=[])
    check_parity(compare(served["result"], ours, K, head_engine="eagle3", ngram_engine=None))


def test_serve_check_cli(served):
    """`headstart serve-check` end to end (subprocess, speculators layout, float32, vLLM compiled): it exits 0 and writes
    the JSON and Markdown reports with every field, the conventions stated, vLLM's outputs identical to
    its plain ones (and to headstart's), and its acceptance equal to headstart's prediction."""
    cli, report = served["cli"], cli_report(served)
    assert {"target", "head", "prompts", "machine", "conventions", "chain", "acceptance", "agreement", "speed",
            "draft_config", "engine_load_seconds"} <= set(report)
    assert report["head"] == {"path": str(report["head"]["path"]), "kind": "eagle3", "layout": "speculators", "method": "eagle3",
                              "draft_vocab_size": served["heads"]["eagle3"].options["draft_vocab_size"],
                              "served_draft_vocab_size": served["heads"]["eagle3"].options["draft_vocab_size"]}
    assert report["target"]["dtype"] == "float32" and report["prompts"]["count"] == len(PROMPTS) and report["chain"] == K
    assert report["machine"]["vllm"] == "0.32.0" and report["machine"]["threads"] >= 1
    assert report["machine"]["vllm_engines"].startswith("interleaved")  # all engines in one process, taking turns
    assert report["machine"]["vllm_mode"].startswith("compiled")  # --compiled: torch.compile, vLLM's default
    assert "interleaved prompt by prompt, one process, compiled" in cli["markdown"]
    for key in ("drafts", "draft_tokens", "accepted", "mean_acceptance_length", "accepted_per_draft", "draft_token_acceptance",
                "acceptance_per_position", "relative_difference", "agreement", "tokens_per_s"):
        assert report["conventions"][key], key
    assert "bonus" in report["conventions"]["accepted"] and "bonus counted" in report["conventions"]["mean_acceptance_length"]
    for side in ("vllm", "headstart"):
        assert set(report["acceptance"][side]) >= {"drafts", "draft_tokens", "accepted", "accepted_per_pos", "mean_acceptance_length",
                                                   "accepted_per_draft", "draft_token_acceptance", "acceptance_per_position"}
        assert len(report["acceptance"][side]["acceptance_per_position"]) == K
    assert "headstart_as_trained" not in report["acceptance"]  # the eagle3 head is served as trained
    for key in ("vllm_plain", "vllm_head", "vllm_ngram", "headstart_plain", "headstart_head"):
        speed = report["speed"][key]
        assert speed["tokens"] > 0 and speed["tokens_per_s"] > 0 and speed["vs_vllm_plain"] > 0, key
    assert report["speed"]["vllm_plain"]["vs_vllm_plain"] == 1.0
    for key in ("vllm_head_vs_vllm_plain", "headstart_plain_vs_vllm_plain", "headstart_head_vs_vllm_plain"):
        assert report["agreement"][key]["matched"] == len(PROMPTS), key  # float32: identical outputs
    assert set(report["engine_load_seconds"]) == {"plain", "head", "ngram", "corpus", "hybrid"}
    c = report["draft_config"]  # what vLLM built the speculators draft from
    assert c["method"] == "eagle3" and c["norm_before_residual"] is False and c["dtype"] == "float32"
    assert c["eagle_aux_hidden_state_layer_ids"] == [i + 1 for i in served["heads"]["eagle3"].feature_layers]
    assert c["rope_parameters"]["rope_theta"] == 50000.0 and c["draft_vocab_size"] < c["vocab_size"] == 49152
    check_parity(report)
    md = cli["markdown"]
    assert md.strip() in cli["stdout"]  # the verb prints what it writes
    for text in ("| mean acceptance length (1 + accepted / drafts; = τ, bonus counted) |", "| accepted draft tokens |",
                 f"| position {K}: share of drafts accepted this far |", "| vLLM n-gram (k = 3) |", "| headstart plain loop |",
                 f"| vLLM + head | {len(PROMPTS)}/{len(PROMPTS)} |", "Conventions:", "vLLM 0.32.0", "layout speculators"):
        assert text in md, text


def test_corpus_proposer_served_with_the_counts_headstart_predicts(served):
    """vLLM's custom_class proposer (serve/proposer.py) loads the head folder's corpus table in vLLM's
    engine, drafts from it and from prompt lookup, leaves the float32 output identical to vLLM plain, and
    vLLM's counters equal headstart's count along the text it served (`along_text_counts`)."""
    corpus = cli_report(served)["corpus"]
    v, h = corpus["vllm"], corpus["headstart_along_vllm_text"]
    assert corpus["proposer"] == "headstart.serve.proposer.CorpusProposer" and corpus["chain"] == K
    assert v["drafts"] > 0 and 0 < v["accepted"] < v["draft_tokens"] <= K * v["drafts"], v
    assert corpus["agreement_vs_vllm_plain"]["matched"] == len(PROMPTS)
    # The same drafts; accepted equal too, but for the last step of a request, where vLLM may accept drafts
    # past max_tokens that the text (cut there) cannot show: at most k per prompt more on vLLM's side.
    assert (v["drafts"], v["draft_tokens"]) == (h["drafts"], h["draft_tokens"]), (v, h)
    assert 0 <= v["accepted"] - h["accepted"] <= K * len(PROMPTS), (v, h)
    assert corpus["speed"]["tokens"] > 0 and corpus["speed"]["vs_vllm_plain"] > 0
    assert "| vLLM + headstart's corpus proposer (chain ≤ 3) |" in served["cli"]["markdown"]
    hybrid = cli_report(served)["hybrid"]  # serve-check serves the head as headstart's hybrid too, compiled
    assert hybrid["agreement_vs_vllm_plain"]["matched"] == len(PROMPTS) and hybrid["chain"] == K
    v, h = hybrid["vllm"], hybrid["headstart_along_vllm_text"]
    assert v["drafts"] > 0 and (v["drafts"], v["draft_tokens"]) == (h["drafts"], h["draft_tokens"]), hybrid
    assert abs(v["accepted"] - h["accepted"]) <= K * len(PROMPTS), hybrid
    assert hybrid["speed"]["vs_vllm_plain"] > 0 and "Hybrid (the head served with HEADSTART_HYBRID=1" in served["cli"]["markdown"]


def test_hybrid_served_identically_drafting_from_prompt_lookup_and_the_table(served):
    """vLLM loads headstart's plugin (its entry point, from headstart's package metadata in vLLM's environment,
    in the engine's own process); the engine created with HEADSTART_HYBRID=1 drafts hybrid chains: float32 output identical to
    vLLM plain, k drafts a step, and on the prompts the head never learnt, where the table knows most of the
    answer (every 4th token changed), it accepts more than the same head drafting alone."""
    hybrid, head, plain = record(served, "hybrid"), record(served, "eagle3"), record(served, "plain")
    assert hybrid["outputs"] == plain["outputs"] == served["reference"]
    log = served["log"].read_text(errors="replace")
    assert log.count("headstart: hybrid drafting, k = 3") >= 1, log[-3000:]
    m = hybrid["metrics"]
    assert m["drafts"] > 0 and 0 < m["accepted"] < m["draft_tokens"] <= K * m["drafts"], m
    # headstart's count along the same text: the same chains (drafts and draft tokens), the same accepted but
    # for a request's last step, where a chain running past max_tokens is checked against the target's own
    # continuation on our side and may be counted differently on vLLM's (at most k per prompt)
    ours = hybrid_along_text_counts(served["target"], served["heads"]["eagle3"], served["corpus"], served["prompts"], hybrid["outputs"], K)
    assert (m["drafts"], m["draft_tokens"]) == (ours["drafts"], ours["draft_tokens"]), (m, ours)
    assert abs(m["accepted"] - ours["accepted"]) <= K * len(PROMPTS), (m, ours)
    unlearnt = slice(len(PROMPTS) // 2, None)
    alone = sum(p["accepted"] for p in head["prompt_metrics"][unlearnt])
    mixed = sum(p["accepted"] for p in hybrid["prompt_metrics"][unlearnt])
    assert mixed > alone, (mixed, alone)


@pytest.fixture(scope="module")
def served_parallel(tmp_path_factory, smol_tokenizer):
    """A P-EAGLE head (EAGLE-3 with parallel drafting, heads/parallel.py) trained on half the prompts'
    continuations, exported in the eagle3 layout and served with `parallel_drafting: true` beside vLLM
    plain, in a vLLM subprocess of its own (so that `-k parallel` runs alone)."""
    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm-parallel")
    target = tiny_llama(tmp / "target", smol_tokenizer)
    prompts = [encode_chat(smol_tokenizer, [{"role": "user", "content": p}])[0].tolist() for p in PROMPTS]
    continuations = [greedy_generate(target, torch.tensor([p]), NEW, eos_token_id=[]).sequences[0] for p in prompts]
    head = trained_eagle3(target, continuations[: len(continuations) // 2], parallel_drafting=True, parallel_tokens=K)
    folder = export(head, target, tmp / "parallel", "eagle3")
    spec = head_speculative_config(head, "eagle3", folder, K)  # what serve-check and bench_serving send
    assert spec["parallel_drafting"] is True
    engines = [{"name": "plain", "speculative_config": None}, {"name": "parallel", "speculative_config": spec}]
    job = vllm_job(tmp / "target", prompts, engines, "float32", NEW, eos=None, ignore_eos=True, kv_cache_gib=1)
    result = run_vllm(job, timeout=1500, log=tmp / "vllm.log")
    return {"target": target, "prompts": prompts, "head": head, "result": result,
            "reference": [c[len(p):].tolist() for c, p in zip(continuations, prompts)]}


def test_parallel_drafting_served_identically_with_headstart_acceptance(served_parallel):
    """vLLM loads the parallel head's eagle3 export (mask_hidden, ptd_token_id), drafts K tokens a step with
    it, its greedy float32 output equals its plain output, and its acceptance per position equals
    headstart's for the same head and chain of K: the two engines draft the same tokens."""
    s = served_parallel
    engines = {e["name"]: e for e in s["result"]["engines"]}
    for name, e in engines.items():
        assert e["ok"], f"vLLM failed on {name}: {e['error']}\n{e.get('traceback', '')}"
    assert engines["plain"]["outputs"] == s["reference"]
    c = engines["parallel"]["draft_config"]  # vLLM read the placeholder token and drafts in parallel
    assert c["parallel_drafting"] is True and c["ptd_token_id"] == s["head"].options["ptd_token_id"], c
    m = engines["parallel"]["metrics"]
    assert m["drafts"] > 0 and m["draft_tokens"] == K * m["drafts"]
    assert agreement(engines["parallel"]["outputs"], engines["plain"]["outputs"])["matched"] == len(s["prompts"])
    ours = headstart_side(s["target"], s["head"], s["prompts"], K, NEW, eos=[])
    # trained as briefly as the other heads, the parallel head accepts less (docs/results.md#dflash-at-the-cpu-budget)
    check_parity(compare(s["result"], ours, K, head_engine="parallel", ngram_engine=None), least=1.25)


def test_parallel_prediction_along_vllm_text(served_parallel):
    """headstart's drafter teacher-forced along the text vLLM served (serve/prediction.py `along_text_acceptance`):
    in float32 that text is headstart's own, and the prediction along it equals headstart's loop step for
    step in every figure and vLLM's acceptance within TOLERANCE, per position too."""
    s = served_parallel
    served = next(e for e in s["result"]["engines"] if e["name"] == "parallel")
    assert served["ok"], served["error"]
    ours = headstart_side(s["target"], s["head"], s["prompts"], K, NEW, eos=[])
    ours["along_vllm_text"] = along_text_acceptance(s["target"], s["head"], s["prompts"], served["outputs"], K)
    assert ours["along_vllm_text"] == ours["acceptance"]
    acc = compare(s["result"], ours, K, head_engine="parallel", ngram_engine=None)["acceptance"]
    assert abs(acc["relative_difference_along_vllm_text"]["mean_acceptance_length"]) <= TOLERANCE, acc
    v, along = acc["vllm"]["acceptance_per_position"], acc["headstart_along_vllm_text"]["acceptance_per_position"]
    assert all(abs(a - b) <= TOLERANCE for a, b in zip(v, along)), (v, along)


def trained_dflash(target, sequences: list[torch.Tensor], steps: int = 200, **options):
    """A DFlash head (heads/dflash.py) with blocks of K + 1 slots (K drafts, vLLM's num_speculative_tokens) that
    has learnt the target's own continuations of the prompts; `options` go to its build."""
    head = hs.heads.build("dflash", target, block_size=K + 1, **options)
    fit_head(head, target, [batch_of(seq[None]) for seq in sequences], DFlashOptions(dflash_blocks=64), steps)
    return head


@pytest.fixture(scope="module")
def served_dflash(tmp_path_factory, smol_tokenizer):
    """A DFlash head trained on half the prompts' continuations, exported in the dflash layout and served with
    vLLM's method "dflash" (num_speculative_tokens = block_size - 1) beside vLLM plain, in a vLLM subprocess
    of its own (so that `-k dflash` runs alone)."""
    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm-dflash")
    target = tiny_llama(tmp / "target", smol_tokenizer)
    prompts = [encode_chat(smol_tokenizer, [{"role": "user", "content": p}])[0].tolist() for p in PROMPTS]
    continuations = [greedy_generate(target, torch.tensor([p]), NEW, eos_token_id=[]).sequences[0] for p in prompts]
    head = trained_dflash(target, continuations[: len(continuations) // 2], feature_layers=[0, 1, 3])  # 3: the last layer
    folder = export(head, target, tmp / "dflash", "dflash")
    spec = {"method": "dflash", "model": str(folder), "num_speculative_tokens": K}
    engines = [{"name": "plain", "speculative_config": None}, {"name": "dflash", "speculative_config": spec}]
    job = vllm_job(tmp / "target", prompts, engines, "float32", NEW, eos=None, ignore_eos=True, kv_cache_gib=1)
    result = run_vllm(job, timeout=1500, log=tmp / "vllm.log")
    return {"target": target, "prompts": prompts, "head": head, "result": result,
            "reference": [c[len(p):].tolist() for c, p in zip(continuations, prompts)]}


def test_dflash_served_identically_with_headstart_acceptance(served_dflash):
    """vLLM's CPU runner loads the DFlash export (DFlashDraftModel: layers, fc, hidden_norm, norm; embedding
    and lm_head shared), drafts K tokens a step with it in one block, its greedy float32 output equals its
    plain output, and its acceptance per position equals headstart's for the same head and chain of K:
    the two engines draft the same tokens."""
    s = served_dflash
    engines = {e["name"]: e for e in s["result"]["engines"]}
    for name, e in engines.items():
        assert e["ok"], f"vLLM failed on {name}: {e['error']}\n{e.get('traceback', '')}"
    assert engines["plain"]["outputs"] == s["reference"]
    c = engines["dflash"]["draft_config"]  # what vLLM built the draft from
    assert c["method"] == "dflash" and c["architectures"] == ["DFlashDraftModel"] and c["num_hidden_layers"] == 2, c
    assert c["rope_parameters"]["rope_theta"] == 50000.0 and c["target_hidden_size"] == 256, c
    m = engines["dflash"]["metrics"]
    assert m["drafts"] > 0 and m["draft_tokens"] == K * m["drafts"]
    assert agreement(engines["dflash"]["outputs"], engines["plain"]["outputs"])["matched"] == len(s["prompts"])
    ours = headstart_side(s["target"], s["head"], s["prompts"], K, NEW, eos=[])
    # it accepts the taught prompts' continuations whole and little else (docs/results.md#dflash-at-the-cpu-budget)
    check_parity(compare(s["result"], ours, K, head_engine="dflash", ngram_engine=None), least=1.4)


# ---------------------------------------------------------------- `headstart serve`, asked by a real client

#: what the taught EAGLE-3 head with a corpus table serves (`headstart serve --method`); vLLM's n-gram proposer beside
SERVED_METHODS = ("head", "hybrid", "corpus")
ASKED_METHODS = (*SERVED_METHODS, "ngram")
#: each prompt is asked four ways: chat and completion (its token ids), each streamed and not
WAYS = (("chat", False), ("chat", True), ("completion", False), ("completion", True))
#: then REQUESTS chat requests from CONCURRENT clients at once, over PROMPTS and LONG_PROMPTS: mixed lengths up to
#: the tiny target's context (1024), each asked alone first
REQUESTS, CONCURRENT = 16, 4
LONG_PROMPTS = [" ".join(f"Mill {i} stands on the river bank." for i in range(n)) + " Which mill is last?" for n in (40, 95)]



def ask(client, model: str, prompt: str, ids: list[int], way: str, stream: bool) -> dict:
    """One greedy request of NEW tokens (EOS ignored) through the openai client: its new token ids, text and
    (chat) the prompt's token ids as vLLM rendered the chat template."""
    common = {"model": model, "temperature": 0, "max_tokens": NEW, "stream": stream,
              "extra_body": {"ignore_eos": True, "return_token_ids": True}}
    if way == "chat":
        response = client.chat.completions.create(messages=[{"role": "user", "content": prompt}], **common)
    else:
        response = client.completions.create(prompt=ids, **common)
    chunks = response if stream else [response]
    out = {"ids": [], "text": "", "prompt_ids": None}
    for chunk in chunks:  # vLLM's fields beyond OpenAI's are the models' extras
        out["prompt_ids"] = out["prompt_ids"] or (chunk.model_extra or {}).get("prompt_token_ids")
        for choice in chunk.choices:
            extra = choice.model_extra or {}
            out["ids"] += extra.get("token_ids") or []
            out["prompt_ids"] = out["prompt_ids"] or extra.get("prompt_token_ids")
            message = (choice.delta if stream else choice.message) if way == "chat" else choice
            out["text"] += (message.content if way == "chat" else message.text) or ""
    return out


def serve_and_ask(recipe, head_folder, method: str, cache, prompts: list[list[int]]) -> dict:
    """`headstart serve` as a user runs it (a subprocess; eager, to start sooner): each prompt asked every way in
    WAYS, one request at a time, the server's counters read from /metrics, then the prompts asked again by
    CONCURRENT clients at once (REQUESTS requests), and SIGTERM sent."""
    from openai import DefaultHttpxClient, OpenAI

    from headstart.serve.load import ask_chat, free_port, run_load, started_server
    from headstart.serve.server import served_counts

    argv = [str(recipe), "--head", str(head_folder), "--method", method, "--k", str(K), "--eager"]
    with started_server(argv, free_port(), cache.parent / f"serve-{method}", env={"HEADSTART_CACHE": str(cache), "HF_HUB_OFFLINE": "1"},
                        timeout=900) as server:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=300,
                        http_client=DefaultHttpxClient(trust_env=False))
        answers = [[ask(client, server.model, text, ids, way, stream) for way, stream in WAYS] for text, ids in zip(PROMPTS, prompts)]
        counts = served_counts(server.url)
        alone = [a[0] for a in answers] + [ask_chat(server.url, server.model, p, NEW, ignore_eos=True) for p in LONG_PROMPTS]
        concurrent, _ = run_load(server.url, server.model, [*PROMPTS, *LONG_PROMPTS], REQUESTS, CONCURRENT, NEW, ignore_eos=True)
    return {"server": server, "answers": answers, "counts": counts, "alone": alone, "concurrent": concurrent}


@pytest.fixture(scope="module")
def openai_served(tmp_path_factory, smol_tokenizer):
    """The taught EAGLE-3 head with its table, served by `headstart serve` with each of ASKED_METHODS in turn
    (one server at a time, on a free port) and asked by the openai client."""
    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm-serve")
    target = tiny_llama(tmp / "target", smol_tokenizer)
    prompts = [encode_chat(smol_tokenizer, [{"role": "user", "content": p}])[0].tolist() for p in PROMPTS]
    continuations = [greedy_generate(target, torch.tensor([p]), NEW, eos_token_id=[]).sequences[0] for p in prompts]
    head, corpus = taught_head(tmp / "head", target, continuations, prompts)
    recipe = write_recipe(tmp / "recipe", tmp / "target")
    runs = {method: serve_and_ask(recipe, tmp / "head", method, tmp / "cache", prompts) for method in ASKED_METHODS}
    return {"target": target, "prompts": prompts, "head": head, "corpus": corpus, "runs": runs,
            "reference": [c[len(p):].tolist() for c, p in zip(continuations, prompts)]}


@pytest.mark.parametrize("method", ASKED_METHODS)
def test_served_output_equals_vllm_plain_for_every_way_of_asking(openai_served, method):
    """Chat and completion, streamed and not, at temperature 0: every answer is the target's greedy text, which
    vLLM plain writes (test_vllm_plain_equals_headstart_greedy); vLLM renders the chat template as headstart does."""
    run = openai_served["runs"][method]
    for answers, reference, prompt in zip(run["answers"], openai_served["reference"], openai_served["prompts"]):
        assert [a["ids"] for a in answers] == [reference] * len(WAYS), (method, answers)
        assert len({a["text"] for a in answers}) == 1 and answers[0]["text"], answers
        assert answers[0]["prompt_ids"] == prompt


@pytest.mark.parametrize("method", SERVED_METHODS)
def test_served_counters_equal_headstarts_prediction_along_the_served_text(openai_served, method):
    """vLLM's /metrics (drafts, draft tokens, accepted tokens, accepted per position) equal headstart's prediction
    along the text it served (serve/prediction.py, serve/proposer.py), count for count, over the 16 requests of
    each method (float32; serve-check's engines allow k per request for drafts accepted past max_tokens, which
    these prompts do not show)."""
    s, run = openai_served, openai_served["runs"][method]
    texts = [a["ids"] for answers in run["answers"] for a in answers]
    prompts = [p for p in s["prompts"] for _ in WAYS]
    if method == "head":
        predicted = along_text_acceptance(s["target"], s["head"], prompts, texts, K)
    elif method == "hybrid":
        predicted = hybrid_along_text_counts(s["target"], s["head"], s["corpus"], prompts, texts, K)
    else:
        predicted = along_text_counts(s["corpus"], prompts, texts, K)
    v = run["counts"]
    assert v["drafts"] > 0 and 0 < v["accepted"] < v["draft_tokens"], v
    assert v == {key: predicted[key] for key in ("drafts", "draft_tokens", "accepted", "accepted_per_pos")}, (v, predicted)


def test_concurrent_requests_answer_as_sequential_ones(openai_served, smol_tokenizer):
    """REQUESTS requests of mixed lengths (up to near the context) from CONCURRENT clients at once (vLLM batches
    them) all complete, each with the answer its prompt got alone (float32, temperature 0): none lost, none
    given another's answer."""
    lengths = [len(encode_chat(smol_tokenizer, [{"role": "user", "content": p}])[0]) for p in LONG_PROMPTS]
    assert 300 < lengths[0] < 600 and 900 < lengths[1] <= 1024 - NEW, lengths
    for method, run in openai_served["runs"].items():
        concurrent, alone = run["concurrent"], run["alone"]
        assert len(concurrent) == REQUESTS and all(len(a["ids"]) == NEW for a in alone), method
        for i, answer in enumerate(concurrent):
            first = alone[i % len(alone)]
            assert (answer["ids"], answer["text"]) == (first["ids"], first["text"]), (method, i)


def test_serve_prints_how_to_reach_it_and_stops_its_whole_process_group(openai_served):
    """Each start printed the URL, the served model, the method and a curl line; the first wrote the export into
    the cache and the next reused it; SIGTERM ended `headstart serve` with status 0 and vLLM's whole process group."""
    for method, run in openai_served["runs"].items():
        server = run["server"]
        assert server.code == 0, server.stderr[-3000:]
        out = server.stdout
        assert f"serving {server.url}/v1" in out and f"  model:   {server.model}" in out, out
        assert f"  method:  {method}, k = {K}" in out and f"  try:     curl {server.url}/v1/chat/completions" in out, out
        assert "vLLM stopped" in server.stderr and server.group is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(server.group, 0)
    runs = openai_served["runs"]
    assert "export written to" in runs["head"]["server"].stdout and "export reused from" in runs["hybrid"]["server"].stdout
    for method in ("corpus", "ngram"):  # neither serves an export
        assert "export" not in runs[method]["server"].stdout.split("\n")[0]


# ---------------------------------------------------------------- `headstart serve --learn`: drafts that learn


def ask_twice_or_once(url: str, model: str, times: int) -> list[dict]:
    """PROMPTS[0] asked `times` times, one request at a time: each answer's ids and text, and the server's
    speculative-decoding counts that request added (from /metrics)."""
    from headstart.serve.load import ask_chat
    from headstart.serve.server import served_counts

    out, before = [], served_counts(url)
    for _ in range(times):
        answer = ask_chat(url, model, PROMPTS[0], NEW, ignore_eos=True)
        after = served_counts(url)
        out.append({**answer, **{k: after[k] - before[k] for k in ("drafts", "draft_tokens", "accepted")}})
        before = after
    return out


@pytest.fixture(scope="module")
def learned_served(tmp_path_factory, smol_tokenizer):
    """`headstart serve --method corpus` on a head whose table knows nothing of PROMPTS[0]'s answer, three starts one
    after the other: without --learn (asked twice), with --learn --learn-every 1 --log-served (asked twice), and
    with --learn again on the same learn folder, saving only at shutdown (asked once); then the (untrained) head
    as headstart's hybrid with --learn (asked twice)."""
    from headstart.serve.load import free_port, started_server

    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm-learn")
    target = tiny_llama(tmp / "target", smol_tokenizer)
    prompt = encode_chat(smol_tokenizer, [{"role": "user", "content": PROMPTS[0]}])[0]
    reference = greedy_generate(target, prompt[None], NEW, eos_token_id=[]).sequences[0, len(prompt):].tolist()
    save_heads(hs.heads.build("eagle3", target), tmp / "head", target)
    CorpusNgram.build([[5, 6, 7, 8, 9]], order=3).save(tmp / "head")
    recipe = write_recipe(tmp / "recipe", tmp / "target")
    env = {"HEADSTART_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    learn = ["--learn", "--learn-dir", str(tmp / "learned")]
    starts = {"frozen": ("corpus", [], 2), "learn": ("corpus", [*learn, "--learn-every", "1", "--log-served", str(tmp / "served")], 2),
              "restart": ("corpus", learn, 1), "hybrid": ("hybrid", ["--learn", "--learn-dir", str(tmp / "learned-hybrid")], 2)}
    runs, saved = {}, {}
    for name, (method, extra, times) in starts.items():
        argv = [str(recipe), "--head", str(tmp / "head"), "--method", method, "--k", str(K), "--eager", *extra]
        with started_server(argv, free_port(), tmp / f"serve-{name}", env=env, timeout=900) as server:
            runs[name] = ask_twice_or_once(server.url, server.model, times)
        assert server.code == 0, server.stderr[-3000:]
        runs[name + "-server"] = server
        learned = tmp / ("learned-hybrid" if method == "hybrid" else "learned") / "learned.json"
        saved[name] = json.loads(learned.read_text()) if learned.is_file() else None
    return {"runs": runs, "saved": saved, "reference": reference, "tmp": tmp, "prompt": prompt.tolist(),
            "corpus": CorpusNgram.load(tmp / "head")}


@pytest.mark.vllm
def test_served_answers_teach_the_table(learned_served):
    """With --learn the second request drafts from the first one's answer (vLLM's own counters: more accepted than
    the same request without --learn, where nothing changes between the two), the table is saved (every answer
    with --learn-every 1, at shutdown by default) and a restart drafts from it at once; every answer is the target's
    greedy one (lossless); the log holds both chats as training rows."""
    s = learned_served
    frozen, learn, restart = (s["runs"][name] for name in ("frozen", "learn", "restart"))
    for answer in [*frozen, *learn, *restart]:
        assert answer["ids"] == s["reference"]
    counts = {name: [(a["accepted"], a["drafts"]) for a in s["runs"][name]] for name in ("frozen", "learn", "restart")}
    assert frozen[0]["accepted"] == frozen[1]["accepted"], counts  # frozen: the same request drafts the same
    assert learn[0]["accepted"] == frozen[0]["accepted"], counts  # nothing learnt before the first answer
    assert learn[1]["accepted"] > frozen[1]["accepted"] and learn[1]["accepted"] >= NEW // 2, counts
    assert restart[0]["accepted"] == learn[1]["accepted"], counts  # continued from the saved table
    # headstart's prediction for a learning table (serve/prediction.py, what scripts/bench_learn.py reports): the same
    # draft steps; vLLM also counts drafts accepted past max_tokens in a request's last step (k at most)
    predicted = learning_counts(s["corpus"], [s["prompt"]] * 2, [s["reference"]] * 2, K)
    assert [a["drafts"] for a in learn] == [p["drafts"] for p in predicted], (counts, predicted)
    assert all(p["accepted"] <= a["accepted"] <= p["accepted"] + K for a, p in zip(learn, predicted)), (counts, predicted)
    assert s["saved"]["frozen"] is None and s["saved"]["learn"]["answers"] == 2 and s["saved"]["restart"]["answers"] == 3
    assert "learns:  each finished answer" in s["runs"]["learn-server"].stdout
    rows = [json.loads(line) for f in sorted((s["tmp"] / "served").glob("served-*.jsonl")) for line in f.read_text().splitlines()]
    assert [r["messages"] for r in rows] == [[{"role": "user", "content": PROMPTS[0]}, {"role": "assistant", "content": a["text"]}]
                                             for a in learn]
    assert all(r["answer_token_ids"] == s["reference"] for r in rows)


@pytest.mark.vllm
def test_the_hybrid_learns_too(learned_served):
    """The hybrid plugin drafts from the same learning table: its second request accepts more than its first (the
    untrained head's drafts accept next to nothing), with the target's greedy answer both times."""
    hybrid = learned_served["runs"]["hybrid"]
    assert [a["ids"] for a in hybrid] == [learned_served["reference"]] * 2
    assert hybrid[1]["accepted"] > hybrid[0]["accepted"] and hybrid[1]["accepted"] >= NEW // 2, hybrid
    assert learned_served["saved"]["hybrid"]["answers"] == 2
