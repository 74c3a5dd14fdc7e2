"""scripts/bench_serving.py's command line: recipe overrides stand before or after the list options,
as docs/results.md's commands write them (the engine runs are tests/end_to_end/test_vllm.py's)."""

from __future__ import annotations

import importlib.util

import pytest

from headstart.config import parse_script_args
from tests.helpers import ROOT


def parse_args(argv):
    spec = importlib.util.spec_from_file_location("bench_serving", ROOT / "scripts" / "bench_serving.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return parse_script_args(module.parser(), argv)


def test_overrides_after_a_list_option():
    args = parse_args(["r.yaml", "--head", "h", "--ks", "2", "3", "eval.num_prompts=9", "eval.max_new_tokens=96",
                       "--corpus-ks", "8"])
    assert args.ks == [2, 3] and args.corpus_ks == [8] and args.head == "h" and args.recipe == "r.yaml"
    assert args.overrides == ["eval.num_prompts=9", "eval.max_new_tokens=96"]
    assert args.ngram_k == [3] and not args.sequential  # by default the engines take turns in one process


def test_several_ngram_ks_and_sequential_engines():
    args = parse_args(["r.yaml", "--head", "h", "--ngram-k", "3", "5", "eval.num_prompts=9", "--sequential"])
    assert args.ngram_k == [3, 5] and args.sequential and args.overrides == ["eval.num_prompts=9"]


def test_overrides_before_the_options():
    args = parse_args(["r.yaml", "eval.num_prompts=9", "--head", "h", "--out=runs/x.json"])
    assert args.ks == [1, 2, 3, 4, 5] and args.overrides == ["eval.num_prompts=9"] and args.out == "runs/x.json"


def test_a_word_that_is_no_k_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["r.yaml", "--head", "h", "--ks", "2", "three"])
    assert e.value.code == 2 and "invalid int value: 'three'" in capsys.readouterr().err
