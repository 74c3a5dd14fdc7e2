"""headstart against its peers on the same target, data and clock, served by the same vLLM (issue 36): one run.

    python scripts/bench_peers.py recipes/smollm2-135m/eagle3.yaml --minutes 11 --out runs/bench_peers
    python scripts/bench_peers.py recipes/smollm2-135m/eagle3.yaml --smoke      # every part at its tiniest size

1. Data: the recipe's training examples (train/data.py, its held-out split) become speculators' pretokenized
   rows (`speculators prepare-data` passes them through, no server) and its hidden-state files, computed by
   headstart's target (vLLM's hidden-state connector, which speculators' data generation runs, is CUDA-only;
   docs/peers.md). Their time is reported, not charged to either clock. With `--features` headstart likewise
   trains from the target's features cached before its clock (`headstart features`, `data.features_dir`; reported,
   charged to neither), so that neither trainer runs the target inside its minutes.
2. Training, the same `--minutes` each: headstart's EAGLE-3 recipe (`train.max_minutes`); vLLM's
   speculators (`make peers`: .venv-peers) with its own defaults except what a CPU needs (scripts/peers/
   speculators_cpu.py; `--draft-vocab-size` from the recipe, `--total-seq-len` the tokens of one of headstart's
   steps). speculators has no clock: a probe of `--probe-steps` steps times a step (its logged step_ms), the
   run gets the steps that fit (`--max-steps`, its schedule's length too) and SIGTERM at the budget (it saves
   a checkpoint on it); the official EAGLE-3 code (`make official-eagle3`: .venv-eagle3 and the code at a pinned
   commit in .peers/EAGLE) through scripts/peers/eagle3_official_cpu.py, its loop run to the clock, on the same
   rows, with the recipe's draft vocabulary size and peak learning rate. `--peers` picks which peers train.
3. Serving: one vLLM job, engines interleaved prompt by prompt (headstart.serve.bench's engines): vLLM
   plain, headstart's head and each peer's (its own folder, as vLLM loads it) as chains of each `--ks`,
   vLLM's n-gram and suffix decoding (`--suffix-ks`; vLLM method `suffix`, the `arctic-inference` package:
   .venv-suffix, docs/peers.md) and headstart's corpus proposer and hybrid, on the recipe's held-out
   prompts and on HumanEval (`--humaneval N`). Beside each head, headstart's prediction of vLLM's
   acceptance along the text vLLM served. Writes <out>/bench_peers.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_PYTHON = ROOT / ".venv-peers/bin/python"
SUFFIX_PYTHON = ROOT / ".venv-suffix/bin/python"
SPECULATORS_CPU = ROOT / "scripts/peers/speculators_cpu.py"
OFFICIAL_PYTHON = ROOT / ".venv-eagle3/bin/python"
OFFICIAL_SOURCE = ROOT / ".peers/EAGLE/eagle/traineagle3"
OFFICIAL_CPU = ROOT / "scripts/peers/eagle3_official_cpu.py"
#: the peer trainers (--peers) and the prefix of their engines' names
PEERS = {"speculators": "spec", "official": "official"}
#: what --smoke shrinks every part to: every trainer, every head and suffix decoding served on one prompt (vLLM's
#: n-gram, headstart's corpus proposer and hybrid, HumanEval's prompts: the same engines and code as the full run's,
#: left out to keep vLLM's start-ups, about 35 s an engine, few)
SMOKE = {"examples": 20, "minutes": 0.5, "probe_steps": 1, "ks": [2], "suffix_ks": [2], "corpus_ks": [], "hybrid_ks": [],
         "ngram_k": [], "prompts": 1, "humaneval": 0, "max_new_tokens": 16, "max_length": 64}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench_peers.py", description=__doc__.splitlines()[0])
    ap.add_argument("recipe", help="an EAGLE-3 recipe (its target, data, head options and eval prompts)")
    ap.add_argument("--minutes", type=float, default=11.0, help="each trainer's wall-clock budget")
    ap.add_argument("--examples", type=int, default=None, help="train on the first N training examples only (default: all)")
    ap.add_argument("--probe-steps", type=int, default=5, help="speculators steps timed before its run, to fit its schedule to the clock")
    ap.add_argument("--peers", nargs="+", choices=sorted(PEERS), default=sorted(PEERS),
                    help="the peer trainers run beside headstart: vLLM's speculators, the official EAGLE-3 code")
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 3], help="chain lengths every head is served at")
    ap.add_argument("--suffix-ks", type=int, nargs="+", default=[3, 8], help="vLLM suffix decoding's num_speculative_tokens; 0: not run")
    ap.add_argument("--ngram-k", type=int, nargs="+", default=[3], help="vLLM n-gram's k; 0: not run")
    ap.add_argument("--corpus-ks", type=int, nargs="+", default=[5], help="headstart's corpus proposer's k; 0: not run")
    ap.add_argument("--hybrid-ks", type=int, nargs="+", default=[5], help="headstart's head as its hybrid, k; 0: not run")
    ap.add_argument("--humaneval", type=int, default=10, help="also serve the first N HumanEval prompts (0: not)")
    ap.add_argument("--compiled", action="store_true", help="vLLM compiled (its default) instead of eager")
    ap.add_argument("--features", action="store_true",
                    help="headstart trains from the target's features cached before its clock (out/headstart-features), as "
                         "speculators trains from hidden states computed before its own; without it headstart runs the target "
                         "inside every step of its minutes")
    ap.add_argument("--smoke", action="store_true", help="every part at its tiniest size: " + json.dumps(SMOKE))
    ap.add_argument("--serve-from", default=None, metavar="DIR",
                    help="serve the heads an earlier run left in DIR (DIR/headstart/final, speculators' newest checkpoint) "
                         "instead of preparing data and training again (a run stopped while serving; other engines)")
    ap.add_argument("--out", default="runs/bench_peers")
    return ap


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Apply --smoke; refuse bad values and missing environments with one `error:` line (argparse's)."""
    if args.smoke:
        for key, value in SMOKE.items():
            if key not in ("prompts", "max_new_tokens", "max_length"):
                setattr(args, key, value)
    if args.minutes <= 0:
        ap.error(f"--minutes must be > 0, got {args.minutes}")
    if args.examples is not None and args.examples < 2:
        ap.error(f"--examples must be at least 2 (speculators holds some out), got {args.examples}")
    if args.features and args.serve_from is not None:
        ap.error("--features changes how headstart trains; --serve-from trains nothing: give one of them")
    if args.probe_steps < 1:
        ap.error(f"--probe-steps must be at least 1, got {args.probe_steps}")
    for name in ("ks", "suffix_ks", "ngram_k", "corpus_ks", "hybrid_ks"):
        values = getattr(args, name)
        if any(k < 0 for k in values) or (name == "ks" and any(k < 1 for k in values)):
            ap.error(f"--{name.replace('_', '-')}: k must be {'at least 1' if name == 'ks' else '>= 0 (0: not run)'}, got {values}")
        setattr(args, name, sorted({k for k in values if k > 0}))
    if args.humaneval < 0:
        ap.error(f"--humaneval must be >= 0, got {args.humaneval}")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        ap.error(f"--out {out} exists and is not an empty folder: the trainers would resume from what is there; give a new --out")
    if not Path(args.recipe).is_file():
        ap.error(f"no recipe at {args.recipe}")
    if args.serve_from is not None:
        earlier = Path(args.serve_from)
        trained = {"speculators": any((earlier / "speculators").glob("*/model.safetensors")),
                   "official": (earlier / "official" / "model.safetensors").is_file()}
        if not (earlier / "headstart" / "final").is_dir() or not all(trained[p] for p in args.peers):
            ap.error(f"--serve-from {earlier}: no trained heads there for {' and '.join(['headstart', *args.peers])} "
                     "(headstart/final, a speculators checkpoint under speculators/, official/model.safetensors, as a run "
                     "of this script leaves them; --peers names the peers to serve)")
    elif "speculators" in args.peers and not PEERS_PYTHON.is_file():
        ap.error(f"{PEERS_PYTHON} is missing: run `make peers` (speculators' environment), or leave speculators out of --peers")
    elif "official" in args.peers and not (OFFICIAL_PYTHON.is_file() and (OFFICIAL_SOURCE / "cnets.py").is_file()):
        ap.error(f"{OFFICIAL_PYTHON} or {OFFICIAL_SOURCE} is missing: run `make official-eagle3` (the official EAGLE-3 "
                 "code and its environment), or leave official out of --peers")
    if args.suffix_ks and not SUFFIX_PYTHON.is_file():
        ap.error(f"{SUFFIX_PYTHON} is missing (vLLM with arctic-inference, for --suffix-ks; docs/peers.md says how), or pass --suffix-ks 0")
    return args


# ---- 1. data ----------------------------------------------------------------------------------

def prepare_speculators_data(recipe, target, rows: Path, out: Path) -> dict:
    """speculators' data folder at out/data: our `rows` through its prepare-data, our hidden-state files. Timed."""
    from headstart.train.peer_data import prepared_token_ids, write_speculators_hidden_states

    data = out / "data"
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    run_peer(["prepare-data", "--model", model_dir(recipe), "--data", str(rows), "--output", str(data), "--seq-length",
              str(recipe.data.max_length), "--no-skip-token-freq", "--num-preprocessing-workers", "1"], out / "prepare-data.log")
    prepared = time.perf_counter()
    # in the prepared dataset's order: prepare-data shuffles, and the trainer pairs dataset row i with file hs_<i>
    write_speculators_hidden_states(target, prepared_token_ids(data), data / "hidden_states")
    return {"prepare_seconds": prepared - started, "hidden_state_seconds": time.perf_counter() - prepared,
            "hidden_state_bytes": sum(p.stat().st_size for p in (data / "hidden_states").iterdir())}


def cache_headstart_features(recipe, target, folder: Path):
    """The recipe reading the target's features from `folder` (`data.features_dir`), written there first (what
    `headstart features` writes). Its time (write_features' `seconds`) is charged to neither clock."""
    from headstart.train.features import write_features

    recipe = replace(recipe, data=replace(recipe.data, features_dir=str(folder)))
    stats = write_features(recipe, target, progress=False)
    return recipe, {key: stats[key] for key in ("folder", "tokens", "written_bytes", "seconds")}


def model_dir(recipe) -> str:
    """The recipe's target as a model folder or Hub id, which speculators (and vLLM) load."""
    from headstart.serve.job import model_folder

    return model_folder(recipe.target.name_or_path)


def peer_env() -> dict[str, str]:
    """A peer's environment: this one, its threads all the cores unless OMP_NUM_THREADS says otherwise."""
    return dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(os.cpu_count())))


def run_peer(argv: list[str], log: Path, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`speculators <argv>` in .venv-peers (through scripts/peers/speculators_cpu.py), its output to `log`; SIGTERM
    at `timeout` (speculators then saves a checkpoint), SIGKILL 120 s later."""
    with open(log, "w") as f:
        proc = subprocess.Popen([str(PEERS_PYTHON), str(SPECULATORS_CPU), *argv], stdout=f, stderr=subprocess.STDOUT, env=peer_env())
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if proc.returncode not in (0, -signal.SIGTERM) and timeout is None:
        raise SystemExit(f"bench_peers: error: speculators {argv[0]} failed (status {proc.returncode}); its log: {log}")
    return proc


# ---- 2. training ------------------------------------------------------------------------------

def train_headstart(recipe, target, minutes: float, out: Path):
    from headstart.train.trainer import train

    recipe = replace(recipe, train=replace(recipe.train, max_minutes=minutes, output_dir=str(out / "headstart")))
    started = time.perf_counter()
    summary = train(recipe, target)
    return out / "headstart" / "final", {"steps": summary.steps, "train_seconds": summary.train_seconds,
                                         "wall_seconds": time.perf_counter() - started}


def speculators_train_args(recipe, target, data: Path, save: Path, steps: int | None, epochs: int | None = None) -> list[str]:
    """speculators' train command: its defaults, except the CPU's attention and loss, our draft vocabulary, the
    tokens a step of headstart's recipe reads (it packs conversations into `--total-seq-len` tokens a step, 8192 by
    default: batch_size x max_length instead), and `steps` (also its schedule's length) and `epochs` when given (it
    validates and saves after every epoch of its 20 even once `--max-steps` is reached: the probe runs one)."""
    argv = ["train", "--verifier-name-or-path", model_dir(recipe), "--data-path", str(data), "--save-path", str(save),
            "--draft-attn-impl", "sdpa", "--loss-implementation", "eager", "--num-workers", "1",
            "--total-seq-len", str(recipe.train.batch_size * recipe.data.max_length), "--on-missing", "raise", "--log-dir", str(save / "logs")]
    if recipe.head.draft_vocab_size:
        argv += ["--draft-vocab-size", str(recipe.head.draft_vocab_size)]
    if steps is not None:
        argv += ["--max-steps", str(steps), "--scheduler-total-steps", str(steps)]
    if epochs is not None:
        argv += ["--epochs", str(epochs)]
    return argv


def earlier_heads(earlier: Path, peers: list[str]) -> tuple[Path, dict[str, Path], dict]:
    """The heads a run of this script left in `earlier` (headstart's, and each of `peers`' folder), and what their
    training logs say of them."""
    def read(path: Path) -> dict:
        return json.loads(path.read_text()) if path.is_file() else {}

    summary = read(earlier / "headstart" / "train_summary.json")
    folders, trained_by = {}, {"served_from": str(earlier), "headstart": {k: summary.get(k) for k in ("steps", "train_seconds", "heldout")}}
    if "speculators" in peers:
        log = earlier / "speculators.log"
        planned = logged(log, "trainer/max_steps") if log.is_file() else []
        folders["speculators"] = newest_checkpoint(earlier / "speculators")
        trained_by["speculators"] = {"planned_steps": int(planned[-1]) if planned else None}
    if "official" in peers:
        folders["official"] = earlier / "official"
        trained_by["official"] = {k: read(earlier / "official" / "summary.json").get(k) for k in ("steps", "seconds", "epochs")}
    return earlier / "headstart" / "final", folders, trained_by


def newest_checkpoint(save: Path) -> Path:
    """The newest folder speculators saved a model in (per epoch, or on SIGTERM)."""
    found = [p.parent for p in save.glob("*/model.safetensors") if p.parent.name != "checkpoint_best"]
    if not found:
        raise SystemExit(f"bench_peers: error: speculators saved no checkpoint under {save}; its log: {save}.log")
    return max(found, key=lambda p: p.stat().st_mtime)


def logged(log: Path, key: str) -> list[float]:
    """Every value speculators logged in `log` as `<key>=<number>`, in order."""
    import re

    return [float(m) for m in re.findall(rf"{re.escape(key)}=([0-9.]+(?:e[+-]?[0-9]+)?)", log.read_text(errors="replace"))]


def logged_step_seconds(log: Path) -> float | None:
    """The median of the step times speculators logs (`profile/step_ms=<ms>`), None when it logged none."""
    import statistics

    found = [ms / 1000 for ms in logged(log, "profile/step_ms")]
    return statistics.median(found) if found else None


def check_trained(log: Path) -> None:
    """Stop when speculators logged a loss of 0 at every step: it drops each sample whose hidden-state file holds
    other tokens than its dataset row (a warning per sample) and then trains on nothing, without failing."""
    losses = logged(log, "train/loss")
    if losses and not any(losses):
        raise SystemExit(f"bench_peers: error: speculators trained on no tokens (train/loss 0 at all {len(losses)} logged steps: "
                         f"its samples were dropped, its log says why): {log}")


def train_speculators(recipe, target, data: Path, minutes: float, probe_steps: int, out: Path) -> tuple[Path, dict]:
    """A probe of `probe_steps` steps, then a run whose steps fit the clock: a step's time is speculators' own
    (`profile/step_ms` in its log, the median), else the probe's wall time per step, start-up included."""
    probe = out / "speculators-probe"
    started = time.perf_counter()
    run_peer(speculators_train_args(recipe, target, data, probe, probe_steps, epochs=1), out / "speculators-probe.log")
    check_trained(out / "speculators-probe.log")
    per_step = logged_step_seconds(out / "speculators-probe.log") or (time.perf_counter() - started) / probe_steps
    steps = max(1, int(minutes * 60 / per_step))
    save = out / "speculators"
    started = time.perf_counter()
    proc = run_peer(speculators_train_args(recipe, target, data, save, steps), out / "speculators.log", timeout=minutes * 60)
    return newest_checkpoint(save), {"probe_seconds_per_step": per_step, "planned_steps": steps,
                                     "wall_seconds": time.perf_counter() - started, "stopped_by_clock": proc.returncode != 0}


def official_train_args(recipe, rows: Path, save: Path, minutes: float) -> list[str]:
    """scripts/peers/eagle3_official_cpu.py's command: the official code's folder, the target's, our rows, the clock,
    and the recipe's draft vocabulary size and peak learning rate (their config.json's 32000 and ds_config's 5e-5 are
    for an 8B Llama over 800k steps; everything else is theirs)."""
    argv = ["--source", str(OFFICIAL_SOURCE), "--model", model_dir(recipe), "--rows", str(rows), "--save", str(save),
            "--minutes", str(minutes), "--lr", str(recipe.train.lr)]
    if recipe.head.draft_vocab_size:
        argv += ["--draft-vocab-size", str(recipe.head.draft_vocab_size)]
    return argv


def train_official(recipe, rows: Path, minutes: float, out: Path) -> tuple[Path, dict]:
    """The official EAGLE-3 code for `minutes` of its training loop (its model's load comes first, not counted, as
    headstart's is not), in .venv-eagle3; its log at out/official.log, its draft at out/official."""
    save, log = out / "official", out / "official.log"
    started = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run([str(OFFICIAL_PYTHON), str(OFFICIAL_CPU), *official_train_args(recipe, rows, save, minutes)],
                              stdout=f, stderr=subprocess.STDOUT, env=peer_env())
    if proc.returncode != 0 or not (save / "model.safetensors").is_file():
        raise SystemExit(f"bench_peers: error: the official EAGLE-3 code failed (status {proc.returncode}); its log: {log}")
    summary = json.loads((save / "summary.json").read_text())
    return save, {"steps": summary["steps"], "train_seconds": summary["seconds"], "epochs": summary["epochs"],
                  "wall_seconds": time.perf_counter() - started, "last_acc": summary["last_acc"]}


# ---- 3. serving -------------------------------------------------------------------------------

def peer_engines(plan, head, method: str, args, peers: dict[str, Path]):
    """headstart's engines (headstart.serve.bench.bench_engines) plus each peer's head (its folder as vLLM loads
    it, method eagle3; named by `PEERS`) at each k and vLLM suffix decoding at each of --suffix-ks."""
    from headstart.serve.bench import bench_engines

    def engines(folder):
        listed = bench_engines(plan, head, method, folder)
        listed += [{"name": f"{PEERS[peer]}_k{k}", "speculative_config": {"method": "eagle3", "model": str(path), "num_speculative_tokens": k}}
                   for peer, path in peers.items() for k in args.ks]
        listed += [{"name": f"suffix{k}", "speculative_config": {"method": "suffix", "num_speculative_tokens": k}} for k in args.suffix_ks]
        return listed

    return engines


def serve_all(recipe, target, head_path: Path, peers: dict[str, Path], args, out: Path, eval_cfg, label: str) -> dict:
    """One interleaved vLLM job over `eval_cfg`'s prompts; every engine's acceptance and tokens/s, headstart's
    prediction along vLLM's text for every head."""
    from headstart.eval.speed import eos_ids
    from headstart.heads.checkpoint import load_heads
    from headstart.heads.export import import_heads
    from headstart.serve.bench import BenchPlan, plain_base
    from headstart.serve.check import eval_prompt_ids
    from headstart.serve.job import engine_record, run_exported, served_layout
    from headstart.serve.prediction import acceptance_from_metrics, along_text_steps, headstart_acceptance

    head = load_heads(head_path, target=target)
    peer_heads = {f"{PEERS[peer]}_k": import_heads(path, target) for peer, path in peers.items()}
    plan = BenchPlan(ks=tuple(args.ks), ngram_ks=tuple(args.ngram_k), corpus_ks=tuple(args.corpus_ks if head.corpus else ()),
                     hybrid_ks=tuple(args.hybrid_ks if head.corpus else ()), compiled=args.compiled)
    layout, method = served_layout(head)
    prompts = eval_prompt_ids(target, eval_cfg)
    if args.suffix_ks:  # the same vLLM with arctic-inference beside it (docs/peers.md)
        os.environ["HEADSTART_VLLM_PYTHON"] = str(SUFFIX_PYTHON)
    result, served = run_exported(target, head_path, layout, recipe.target.name_or_path, prompts, eval_cfg.max_new_tokens,
                                  peer_engines(plan, head, method, args, peers), log=out / f"{label}.vllm.log",
                                  compiled=args.compiled)
    base, how = plain_base(result, False)
    plain = engine_record(result, "plain")
    rows = []
    for engine in result["engines"]:
        r = engine_record(result, engine["name"])
        acc = acceptance_from_metrics(r["metrics"])
        predicted = "-"
        name, k = engine["name"], int("".join(c for c in engine["name"] if c.isdigit()) or 0)
        drafter = served if name == f"k{k}" else peer_heads.get(name.removesuffix(str(k))) if k else None
        if drafter is not None:
            steps = [s for p, text in zip(prompts, r["outputs"]) for s in along_text_steps(target, drafter, p, text, k)]
            predicted = headstart_acceptance(steps, k)["mean_acceptance_length"]
        rows.append({"engine": name, "k": k, "acceptance_length": (acc["mean_acceptance_length"] or 1.0) if k else 1.0,
                     "acceptance_per_position": acc.get("acceptance_per_position"), "headstart_prediction": predicted,
                     "tokens_per_s": r["tokens"] / r["seconds"], "vs_plain": r["tokens"] / r["seconds"] / base,
                     "same_as_plain": sum(a == b for a, b in zip(r["outputs"], plain["outputs"]))})
    return {"prompts": len(prompts), "how": how, "vllm": result.get("vllm"), "rows": rows, "eos": eos_ids(target)}


def table(label: str, served: dict) -> str:
    lines = [f"{label}: {served['prompts']} prompts, vLLM {served['vllm']}; {served['how']}", "",
             "| engine | k | acceptance length | headstart's prediction along vLLM's text | tokens/s | vs vLLM plain | same as plain |",
             "|---|---|---|---|---|---|---|"]
    for r in served["rows"]:
        pred = r["headstart_prediction"] if isinstance(r["headstart_prediction"], str) else f"{r['headstart_prediction']:.2f}"
        lines.append(f"| {r['engine']} | {r['k'] or '-'} | {r['acceptance_length']:.2f} | {pred} | {r['tokens_per_s']:.1f} | "
                     f"{r['vs_plain']:.2f}x | {r['same_as_plain']}/{served['prompts']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = parser()
    args = check_args(ap, ap.parse_args(argv))
    from headstart.files import write_json, write_text
    from headstart.recipe import load_recipe
    from headstart.target import Target
    from headstart.train.data import training_examples

    recipe = load_recipe(args.recipe, [])
    if recipe.head.kind != "eagle3":
        ap.error(f"{args.recipe} trains a {recipe.head.kind} head; the peers train EAGLE-3: give an EAGLE-3 recipe")
    t = recipe.target
    target = Target.from_pretrained(t.name_or_path, dtype=t.dtype, revision=t.revision, attn_implementation=t.attn_implementation,
                                    pack_linears=t.pack_linears)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.examples:  # all trainers read the same first conversations, split alike
        recipe = replace(recipe, data=replace(recipe.data, limit=args.examples))
    if args.smoke:
        recipe = replace(recipe, data=replace(recipe.data, max_length=SMOKE["max_length"]))
    report = {"recipe": args.recipe, "minutes": args.minutes, "args": vars(args)}
    if args.serve_from is not None:
        head_path, peers, trained_by = earlier_heads(Path(args.serve_from), args.peers)
        report.update(trained_by)
    else:
        from headstart.train.peer_data import write_speculators_data

        trained, _, _ = training_examples(target.tokenizer, recipe.data)
        rows = write_speculators_data(trained, out / "rows.jsonl")  # the peers' rows: headstart's examples
        report["data"] = {"examples": len(trained)}
        if "speculators" in args.peers:
            report["data"].update(prepare_speculators_data(recipe, target, rows, out / "speculators-data"))
        if args.features:
            recipe, report["headstart_features"] = cache_headstart_features(recipe, target, out / "headstart-features")
        head_path, report["headstart"] = train_headstart(recipe, target, args.minutes, out)
        peers = {}
        if "speculators" in args.peers:
            data = out / "speculators-data" / "data"
            peers["speculators"], report["speculators"] = train_speculators(recipe, target, data, args.minutes, args.probe_steps, out)
        if "official" in args.peers:
            peers["official"], report["official"] = train_official(recipe, rows, args.minutes, out)
    sets = [("held-out prompts", recipe.eval)]
    if args.humaneval:
        sets.append(("HumanEval", replace(recipe.eval, prompts="humaneval", num_prompts=args.humaneval, categories=[])))
    if args.smoke:
        sets = [(label, replace(cfg, num_prompts=SMOKE["prompts"], max_new_tokens=SMOKE["max_new_tokens"])) for label, cfg in sets]
    tables = []
    from headstart.serve.worker import ServingError

    for label, cfg in sets:
        try:
            report[label] = serve_all(recipe, target, head_path, peers, args, out, cfg, label.split()[0].lower())
        except ServingError as e:  # the heads are kept: --serve-from serves them again
            killed = " (killed: most likely out of memory; every engine is held at once: serve fewer)" if "status -9" in str(e) else ""
            raise SystemExit(f"bench_peers: error: vLLM failed serving the {label}{killed}: {str(e).splitlines()[0]} "
                             f"Its log: {out / (label.split()[0].lower() + '.vllm.log')}; serve the trained heads again with "
                             f"--serve-from {args.serve_from or out}") from None
        tables.append(table(label, report[label]))
    write_json(out / "bench_peers.json", report)
    write_text(out / "bench_peers.md", "\n\n".join(tables) + "\n")
    print("\n\n".join(tables))


if __name__ == "__main__":
    main(sys.argv[1:])
