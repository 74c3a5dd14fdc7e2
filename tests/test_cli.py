import pytest

from headstart.cli import build_parser, main


def test_every_verb_has_help(capsys):
    verbs = ["distill", "self-instruct", "train", "eval", "generate", "tune-tree", "demo"]
    for verb in verbs:
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([verb, "--help"])
        assert e.value.code == 0
        assert "overrides" in capsys.readouterr().out


def test_bad_override_is_a_clear_error_and_exit_2(capsys):
    assert main(["train", "recipes/smollm2-135m/medusa.yaml", "train.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown recipe key 'train.lrr'" in err and "lr" in err
    assert main(["distill", "no/such/recipe.yaml"]) == 2
    assert "does not exist" in capsys.readouterr().err
