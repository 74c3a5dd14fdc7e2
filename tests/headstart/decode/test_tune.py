"""Which tree a head decodes with (command > head's own > recipe), and `tune-tree` for dynamic heads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import headstart as hs
from headstart.cli import main
from headstart.config import DecodeConfig
from headstart.decode.tree import HeldOutAccuracy, StaticTreeSpec, Tree
from headstart.decode.tune import TuneError, dynamic_grid, monotone_costs, tree_options, tune_tree
from headstart.errors import HeadstartError
from headstart.heads.results import set_default_tree
from headstart.target import Target
from tests.helpers import ROOT, perturbed_heads, save_tiny

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread, far faster on shared cores

SAVED = {"depth": 2, "top_k": 2, "total_tokens": 3}  # tree A: saved with the head
RECIPE = {"depth": 4, "top_k": 3, "total_tokens": 7}  # tree B: the recipe's decode section


@pytest.fixture(scope="module")
def folder(tmp_path_factory, smol_tokenizer) -> Path:
    """A tiny Llama with SmolLM2's tokenizer, saved: the CLI loads it as a recipe's target."""
    return save_tiny(tmp_path_factory.mktemp("tree-choice") / "target", smol_tokenizer)


@pytest.fixture(scope="module")
def target(folder) -> Target:
    return Target.from_pretrained(folder, dtype=torch.float32)


def _recipe(path: Path, folder: Path, decode: dict) -> Path:
    path.write_text(json.dumps({"target": {"name_or_path": str(folder), "dtype": "float32"}, "decode": decode}))  # JSON is YAML
    return path


def _saved(head, target, path: Path) -> Path:
    head.save_pretrained(path, target)
    return path


# ---------------------------------------------------------------- the precedence, as a function


def test_tree_options_take_the_command_then_the_head_then_the_recipe(target):
    eagle = hs.heads.build("eagle3", target, tree=SAVED)
    decode = DecodeConfig(**RECIPE)
    assert tree_options(eagle, decode) == (SAVED, "head")
    assert tree_options(eagle, decode, {"total_tokens"}) == ({**SAVED, "total_tokens": 7}, "command+head")
    assert tree_options(eagle, decode, {"depth", "top_k", "total_tokens"}) == (RECIPE, "command")
    eagle.default_tree = None  # a head saved without a tree
    assert tree_options(eagle, decode) == (RECIPE, "recipe")

    medusa = hs.heads.build("medusa", target, num_heads=3)
    decode = DecodeConfig(tree="chain2", tree_size=8)
    assert tree_options(medusa, decode) == ({"tree": "chain2", "tree_size": 8}, "recipe")
    set_default_tree(medusa, StaticTreeSpec([[0], [1], [0, 0]]))
    assert tree_options(medusa, decode) == ({"tree": StaticTreeSpec([[0], [1], [0, 0]])}, "head")
    assert tree_options(medusa, decode, {"tree"}) == ({"tree": "chain2"}, "command")
    medusa.held_out = HeldOutAccuracy([[0.6, 0.2], [0.4, 0.1], [0.3, 0.1]])
    sized, source = tree_options(medusa, DecodeConfig(tree="auto", tree_size=5), {"tree_size"})
    assert source == "command" and isinstance(sized["tree"], Tree) and sized["tree"].size == 5  # not the saved 3 nodes


# ---------------------------------------------------------------- the precedence, through the CLI


def test_eval_decodes_each_head_with_its_own_tree_and_records_the_source(folder, target, tmp_path):
    eagle = _saved(hs.heads.build("eagle3", target, tree=SAVED), target, tmp_path / "eagle3")
    medusa = _saved(hs.heads.build("medusa", target, num_heads=3), target, tmp_path / "medusa")  # no tree saved
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p0", "category": "chat", "prompt": "Name a colour."}) + "\n")
    recipe = _recipe(tmp_path / "r.yaml", folder, {"tree": "chain2", **RECIPE})
    out = tmp_path / "e.json"
    common = ["eval", str(recipe), f"eval.prompts={prompts}", "eval.num_prompts=1", "eval.max_new_tokens=8",
              f"eval.output={out}", "--no-peers", "--head", str(eagle), "--head", str(medusa)]

    def trees() -> dict:
        report = json.loads(out.read_text())
        (result,) = report["results"]
        by_method = {e["label"]: e["tree"] for e in result["methods"] if e["tree"]}
        assert by_method == {h["label"]: h["tree"] for h in report["heads"]}  # both places say the same
        return {Path(label).name: tree for label, tree in by_method.items()}

    assert main(common) == 0
    t = trees()
    assert (t["eagle3"]["depth"], t["eagle3"]["top_k"], t["eagle3"]["size"], t["eagle3"]["source"]) == (2, 2, 3, "head")
    assert t["medusa"]["paths"] == [[0], [0, 0]] and t["medusa"]["source"] == "recipe"
    assert "from the head" in out.with_suffix(".md").read_text()

    assert main([*common, "decode.total_tokens=5"]) == 0
    t = trees()
    assert (t["eagle3"]["depth"], t["eagle3"]["size"], t["eagle3"]["source"]) == (2, 5, "command+head")
    assert t["medusa"]["source"] == "recipe"  # total_tokens is no static tree's field

    assert main([*common, "--tree", "chain1"]) == 0
    assert trees()["medusa"]["paths"] == [[0]] and trees()["medusa"]["source"] == "command"


def test_generate_says_which_tree_it_used(folder, target, tmp_path, capsys):
    eagle = _saved(hs.heads.build("eagle3", target, tree=SAVED), target, tmp_path / "eagle3")
    recipe = _recipe(tmp_path / "r.yaml", folder, RECIPE)
    args = ["generate", str(recipe), "--head", str(eagle), "--prompt", "Hi", "--max-new-tokens", "4"]
    assert main(args) == 0
    assert "dynamic tree: 3 nodes, depth 2, top-k 2; from the head)" in capsys.readouterr().err
    assert main([*args, "decode.depth=1"]) == 0
    assert "dynamic tree: 3 nodes, depth 1, top-k 2; from the command+head)" in capsys.readouterr().err


# ---------------------------------------------------------------- tune-tree for dynamic heads


@pytest.mark.parametrize("parallel", [False, True], ids=["eagle3", "parallel"])
def test_tune_tree_stores_a_dynamic_tree_that_decoding_then_uses(folder, target, tmp_path, capsys, monkeypatch, parallel):
    options = {"parallel_drafting": True, "parallel_tokens": 3} if parallel else {}
    head = _saved(hs.heads.build("eagle3", target, **options), target, tmp_path / "head")
    recipe = _recipe(tmp_path / "r.yaml", folder, RECIPE)
    monkeypatch.chdir(ROOT)  # the default prompts: data/prompts/train.jsonl
    # The parallel head tunes over the default grid (its depths capped at K = 3); the other over three trees.
    grid = [] if parallel else ["--grid", "2,1,2", "--grid", "3,2,4", "--grid", "2,3,6"]
    assert main(["tune-tree", str(recipe), "--head", str(head), "--num-prompts", "2", *grid]) == 0
    printed = capsys.readouterr().out
    assert "2 prompts of data/prompts/train.jsonl (the distillation prompts, not the held-out eval set)" in printed
    assert printed.count("<- chosen") == 1 and "the head's products in int8" in printed

    config = json.loads((head / "config.json").read_text())
    tree, table = config["head"]["tree"], config["tree_tuning"]
    candidates = [(c["depth"], c["top_k"], c["total_tokens"]) for c in table["candidates"]]
    expected = [tuple(vars(s).values()) for s in dynamic_grid(3)] if parallel else [(2, 1, 2), (3, 2, 4), (2, 3, 6)]
    assert candidates == expected and (tree["depth"], tree["top_k"], tree["total_tokens"]) in candidates
    assert table["chosen"] == tree and table["prompts"] == {"file": "data/prompts/train.jsonl", "count": 2, "max_new_tokens": 24}
    assert table["draft_int8"] is DecodeConfig().draft_int8 is True  # drafted as decoding drafts: the recipe's decode.draft_int8
    if parallel:
        assert max(c[0] for c in candidates) == 3 and tree["depth"] <= 3
    for c in table["candidates"]:  # every candidate really decoded, and its speed is τ over its step cost
        assert c["steps"] > 0 and c["tau"] >= 1.0 and c["verify_cost"] > 0 and c["draft_cost"] > 0
        assert c["step_cost"] == pytest.approx(c["verify_cost"] + c["draft_cost"] + c["fixed_cost"], abs=0.002)
        assert c["expected_speedup"] == pytest.approx(c["tau"] / c["step_cost"], rel=0.01)
    best = max(table["candidates"], key=lambda c: c["expected_speedup"])
    assert tree == {k: best[k] for k in ("depth", "top_k", "total_tokens")}

    loaded = hs.load_heads(head, target=target)
    kwargs, source = tree_options(loaded, DecodeConfig(**RECIPE))
    assert kwargs == tree and source == "head"
    gen = hs.SpeculativeGenerator(target, loaded, **kwargs)
    assert (gen.tree_spec.depth, gen.tree_spec.top_k, gen.tree_spec.total_tokens) == (tree["depth"], tree["top_k"], tree["total_tokens"])


# ---------------------------------------------------------------- errors


def _one_line(error: Exception) -> None:
    assert isinstance(error, HeadstartError) and "\n" not in str(error)


def test_tuning_errors_are_one_line(folder, target, tmp_path, capsys):
    with pytest.raises(TuneError, match="no measured held-out accuracy") as e:
        tune_tree(target, hs.heads.build("medusa", target, num_heads=3), sizes=(2,))
    _one_line(e.value)
    ids = torch.tensor([[1, 2, 3, 4]])
    eagle = hs.heads.build("eagle3", target)
    parallel = hs.heads.build("eagle3", target, parallel_drafting=True, parallel_tokens=3)
    for head, grid, message in [
        (eagle, [], "grid of candidate trees is empty"),
        (eagle, [(0, 1, 1)], r"grid entry \(0, 1, 1\): expected \(depth, top_k, total_tokens\)"),
        (eagle, [(2, 1)], "three integers >= 1"),
        (parallel, [(4, 2, 7)], r"drafts 3 positions per forward; keep depth <= 3"),
        (perturbed_heads(target), [(2, 1, 2)], "applies to dynamic heads"),
    ]:
        with pytest.raises(TuneError, match=message) as e:
            tune_tree(target, head, prompts=[ids], grid=grid)
        _one_line(e.value)

    head = _saved(parallel, target, tmp_path / "parallel")
    recipe = _recipe(tmp_path / "r.yaml", folder, {})
    assert main(["tune-tree", str(recipe), "--head", str(head), "--grid", "5,1,5"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # besides loading's progress bar
    assert len(errors) == 1 and errors[0].startswith("headstart tune-tree: error: grid entry (5, 1, 5) is 5 deep")
    with pytest.raises(SystemExit) as bad:  # argparse refuses it before any work
        main(["tune-tree", str(recipe), "--head", str(head), "--grid", "5,1"])
    assert bad.value.code == 2 and "argument --grid: expected DEPTH,TOP_K,TOTAL_TOKENS" in capsys.readouterr().err
    assert "tree_tuning" not in json.loads((head / "config.json").read_text())  # a refused tuning writes nothing


def test_monotone_costs_pools_a_size_timed_in_a_slow_moment():
    # 8 tokens timed in a slow moment look dearer than 16: the two are pooled to their mean.
    assert monotone_costs({1: 1.0, 8: 1.6, 16: 1.2, 32: 2.0}) == {1: 1.0, 8: 1.4, 16: 1.4, 32: 2.0}
    # Already non-decreasing: unchanged. A violation spanning three sizes pools all three.
    assert monotone_costs({1: 1.0, 4: 1.1, 8: 1.3}) == {1: 1.0, 4: 1.1, 8: 1.3}
    pooled = monotone_costs({1: 1.0, 4: 1.9, 8: 1.3, 12: 1.4, 16: 2.0})
    assert list(pooled.values()) == sorted(pooled.values())
    assert pooled[4] == pooled[8] == pooled[12] == pytest.approx((1.9 + 1.3 + 1.4) / 3)
