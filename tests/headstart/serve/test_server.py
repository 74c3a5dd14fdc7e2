"""`headstart serve` without vLLM: what it refuses (one `error:` line, exit status 2, before vLLM starts and
with nothing written), and the plan it would start vLLM with (the export cached by the head's checksum, the
speculative config and environment of each method). vLLM serving it, with a real client: tests/end_to_end/test_vllm_serve.py.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
import torch
import transformers as tr
import yaml

import headstart as hs
from headstart.decode.corpus import CorpusNgram
from headstart.recipe import load_recipe
from headstart.serve.learn import CAP_ENV, EVERY_ENV, LEARN_ENV
from headstart.serve.proposer import ENV, HYBRID_ENV
from headstart.serve.served_log import CAP_ENV as LOG_CAP_ENV
from headstart.serve.served_log import LOG_ENV
from headstart.serve.server import learn_env, local_url, log_env, prepare, vllm_command
from headstart.serve.worker import ServingError
from headstart.target import Target
from tests.helpers import assert_one_error_line, run_cli, snapshot, tiny_config

pytestmark = pytest.mark.usefixtures("no_progress_bars")


@pytest.fixture(scope="module")
def work(tmp_path_factory, smol_tokenizer) -> dict:
    """R (recipe), M (a Medusa head, 3 heads), E (an EAGLE-3 head with a corpus table), O (a head for another
    model of the same shapes), root; every path the runs could write (the cache included) lies under root."""
    root = tmp_path_factory.mktemp("serve")
    config = tiny_config("llama")
    config.vocab_size, config.num_hidden_layers = len(smol_tokenizer), 3
    for seed, name in [(0, "target"), (1, "another-model")]:
        torch.manual_seed(seed)
        tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(root / name)
        smol_tokenizer.save_pretrained(root / name)
    target, other = (Target.from_pretrained(root / name, dtype=torch.float32) for name in ("target", "another-model"))
    hs.heads.build("medusa", target, num_heads=3).save_pretrained(root / "medusa", target)
    hs.heads.build("eagle3", target).save_pretrained(root / "eagle3", target)
    hs.heads.build("eagle3", target).save_pretrained(root / "eagle3-no-table", target)
    CorpusNgram.build([[5, 6, 7, 8], [5, 6, 9]], order=3).save(root / "eagle3")
    hs.heads.build("medusa", other, num_heads=3).save_pretrained(root / "other", other)
    (root / "recipe.yaml").write_text(yaml.safe_dump({"target": {"name_or_path": str(root / "target"), "dtype": "float32"}}))
    CorpusNgram.build([[1, 2, 3]], order=2).save((root / "foreign").mkdir() or root / "foreign")  # a table --learn did not write
    (root / "a-file").write_text("mine")
    return {"R": str(root / "recipe.yaml"), "M": str(root / "medusa"), "E": str(root / "eagle3"), "O": str(root / "other"),
            "N": str(root / "eagle3-no-table"),
            "X": str(root / "foreign"), "F": str(root / "a-file"), "root": root}


@pytest.fixture
def env(work, monkeypatch):
    """The cache under the work folder, and an interpreter standing for vLLM's (only its presence is checked
    before vLLM starts)."""
    monkeypatch.setenv("HEADSTART_CACHE", str(work["root"] / "cache"))
    monkeypatch.setenv("HEADSTART_VLLM_PYTHON", sys.executable)
    return work


@pytest.fixture
def busy_port():
    """A port another process listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


REFUSED = [  # the command line ({R} recipe, {M}, {E}, {O} heads, {BUSY} a port in use) and what its error line names
    ("serve {R} --head {M} --port {BUSY}", "another process holds the port"),
    ("serve {R} --head {M} --host 192.0.2.1", "cannot listen on 192.0.2.1:8000"),  # TEST-NET: no address of this machine
    ("serve {R} --head {O}", "another-model"),
    ("serve {R} --head {M} --method hybrid", "--method hybrid: the hybrid drafts with an EAGLE head"),
    ("serve {R} --head {M} --method corpus", "holds no corpus table"),
    ("serve {R} --head {M} --k 4", "at most 3"),
    ("serve {R} --head {M} --method tree", "invalid choice: 'tree'"),
    ("serve {R} --head {M} --port 0", "argument --port: expected a value >= 1 and <= 65535, got 0"),
    ("serve {R} --head {E} --learn", "--learn: --method head drafts from no corpus table"),
    ("serve {R} --head {E} --method corpus --learn --learn-dir {E}", "is the head folder"),
    ("serve {R} --head {E} --method corpus --learn --learn-dir {X}", "that `headstart serve --learn` did not write"),
    ("serve {R} --head {E} --method corpus --learn --learn-dir {F}", "is not a folder"),
    ("serve {R} --head {E} --method corpus --learn-every 5", "--learn-every applies to --learn"),
    ("serve {R} --head {E} --method corpus --learn --learn-cap 0", "argument --learn-cap: expected a value >= 1"),
    ("serve {R} --head {E} --log-served {F}", "is a file"),
]


@pytest.mark.parametrize("line, names", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_in_one_line_before_vllm_starts_and_nothing_written(env, busy_port, capsys, line, names):
    argv = [w.format(BUSY=busy_port, **env) for w in line.split()]
    before = snapshot(env["root"])
    code, err = run_cli(argv, capsys)
    assert_one_error_line(code, err, "serve", names)
    assert snapshot(env["root"]) == before and not (env["root"] / "cache").exists()
    assert (env["root"] / "a-file").read_text() == "mine"


def test_a_missing_serving_environment_says_make_vllm(env, monkeypatch, capsys):
    monkeypatch.setenv("HEADSTART_VLLM_PYTHON", str(env["root"] / "no-such-venv" / "bin" / "python"))
    before = snapshot(env["root"])
    code, err = run_cli(["serve", env["R"], "--head", env["E"]], capsys)
    assert_one_error_line(code, err, "serve", "run `make vllm`")
    assert snapshot(env["root"]) == before


def test_each_method_is_served_with_serve_checks_engine(env):
    """The export is written once into the cache, keyed by the head's checksum, and reused; each method's vLLM
    command line and environment are those serve-check gives its engine."""
    recipe = load_recipe(env["R"], [])
    target = Target.from_pretrained(env["root"] / "target", dtype=torch.float32)
    plans = {m: prepare(recipe, target, env["E"], m, 2) for m in ("head", "hybrid", "corpus", "ngram", "plain")}
    head, hybrid, corpus, ngram, plain = plans.values()
    assert head.export is not None and not head.reused and (head.export / "config.json").is_file()
    assert hybrid.export == head.export and hybrid.reused  # the second start reuses it
    assert head.export.is_relative_to(env["root"] / "cache" / "serve") and head.export.name == "eagle3"
    assert corpus.export is None and plain.export is None
    spec = {"method": "eagle3", "model": str(head.export), "num_speculative_tokens": 2}
    assert head.engine["speculative_config"] == hybrid.engine["speculative_config"] == spec and head.env == {}
    assert hybrid.env == {HYBRID_ENV: "1", ENV: env["E"]} and corpus.env == {ENV: env["E"]} and plain.env == {}
    assert corpus.engine["speculative_config"]["method"] == "custom_class" and plain.engine["speculative_config"] is None
    # vLLM's own n-gram proposer, as serve-check runs it beside the head: no export, no table
    assert ngram.export is None and ngram.env == {} and ngram.engine["speculative_config"] == {
        "method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4, "prompt_lookup_min": 1}
    command = vllm_command("python", hybrid, "127.0.0.1", 8123, eager=True)
    assert command[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    assert json.loads(command[command.index("--speculative-config") + 1]) == spec
    assert {"--no-async-scheduling", "--enforce-eager"} <= set(command) and command[command.index("--port") + 1] == "8123"
    assert command[command.index("--served-model-name") + 1] == target.name and command[command.index("--dtype") + 1] == "float32"
    assert "--speculative-config" not in vllm_command("python", plain, "127.0.0.1", 8123)
    other = prepare(recipe, target, env["M"], "head", 3)  # another head: another key
    assert other.export.parent != head.export.parent and other.export.name == "vllm-medusa"


def test_a_hybrid_without_a_table_drafts_from_the_head_and_the_lookup(env):
    """An EAGLE-3 head saved without a corpus table serves --method hybrid as head + prompt lookup: the plugin is
    switched on and no table folder is named (the plugin would refuse a folder without one); --learn starts the
    table empty; --method corpus is still refused."""
    recipe = load_recipe(env["R"], [])
    target = Target.from_pretrained(env["root"] / "target", dtype=torch.float32)
    hybrid = prepare(recipe, target, env["N"], "hybrid", 2)
    assert hybrid.env == {HYBRID_ENV: "1"} and hybrid.export is not None
    learning = prepare(recipe, target, env["N"], "hybrid", 2, learn_env("hybrid", env["N"]))
    assert ENV not in learning.env and learning.env[HYBRID_ENV] == "1" and LEARN_ENV in learning.env
    with pytest.raises(ServingError, match="holds no corpus table"):
        prepare(recipe, target, env["N"], "corpus", 2)


def test_the_url_reaches_a_wildcard_host_through_the_loopback():
    assert local_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert local_url("0.0.0.0", 80) == "http://127.0.0.1:80" and local_url("::", 80) == "http://[::1]:80"


def test_learning_and_logging_reach_vllms_environment_and_command(env):
    """--learn: the learn folder (by default in the cache, keyed by the head and its table; never the head folder),
    answers between saves and the cap in vLLM's environment; --log-served: the folder and cap, and the middleware
    on vLLM's command line. Nothing is written before vLLM starts."""
    recipe = load_recipe(env["R"], [])
    target = Target.from_pretrained(env["root"] / "target", dtype=torch.float32)
    learn = learn_env("corpus", env["E"], every=7, cap=1000)
    folder = learn[LEARN_ENV]
    assert folder.startswith(str(env["root"] / "cache" / "serve" / "learned")) and not Path(folder).exists()
    assert learn_env("hybrid", env["E"])[LEARN_ENV] == folder  # the same head and table: the same folder
    assert learn_env("corpus", env["M"])[LEARN_ENV] != folder
    log = log_env(env["root"] / "served", cap_mb=5)
    plan = prepare(recipe, target, env["E"], "corpus", 2, {**learn, **log})
    assert plan.env[LEARN_ENV] == folder and plan.env[EVERY_ENV] == "7" and plan.env[CAP_ENV] == "1000"
    assert plan.env[LOG_ENV] == str(env["root"] / "served") and plan.env[LOG_CAP_ENV] == "5" and plan.env[ENV] == env["E"]
    assert plan.env["VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"] == "20"  # vLLM's workers get the time to save the table
    command = vllm_command("python", plan, "127.0.0.1", 8123)
    assert command[command.index("--middleware") + 1] == "headstart.serve.served_log.LogServed"
    assert command[command.index("--shutdown-timeout") + 1] == "25"
    assert "--middleware" not in vllm_command("python", prepare(recipe, target, env["E"], "corpus", 2), "127.0.0.1", 8123)
    assert not (env["root"] / "served").exists()


def test_the_help_states_the_defaults_the_modules_use(capsys):
    """The CLI does not import serve/learn.py (torch) to build its parser: its help repeats the defaults, checked here."""
    from headstart.cli import build_parser
    from headstart.serve.learn import DEFAULT_CAP, DEFAULT_EVERY
    from headstart.serve.served_log import DEFAULT_MB

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_EVERY})" in out and f"(default {DEFAULT_CAP:,})" in out and f"(default {DEFAULT_MB})" in out
    assert build_parser().parse_args(["serve", "r.yaml", "--head", "h"]).log_served_mb == DEFAULT_MB
