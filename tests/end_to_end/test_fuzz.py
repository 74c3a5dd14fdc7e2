"""Generated bad input through the real CLI, in this process: every run ends in success or in one
`headstart VERB: error:` line with exit status 2, never a traceback, a hang or a file written.

Recipe overrides (every field, values out of range, of the wrong type, huge), data rows (each
format, keys missing, wrong types, odd Unicode, empty turns) and prompt files go through
`headstart train` and `headstart distill`, which check them before the target loads; the target is
a folder that does not exist, so a run that passes every check ends at loading it (exit 2 too)
and no model loads per example. Rows that pass the checks are also tokenised with SmolLM2's real
chat template (`build_examples`). `make test` runs a fixed, derandomized handful of examples; the
long run is `pytest -m fuzz tests/end_to_end/test_fuzz.py`.
"""

import dataclasses
import json
import os
import tempfile
import typing
from contextlib import redirect_stderr
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headstart.cli import main
from headstart.config import Recipe, part_fields
from headstart.jsonl import DataError
from headstart.recipe import recipe_parts
from headstart.train.data import build_examples

QUICK = settings(max_examples=12, derandomize=True, deadline=timedelta(seconds=20), database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
LONG = settings(QUICK, max_examples=400)

# Overrides the fuzz never sets: they name where a run writes, or would reach the network or a model.
PINNED = {"target.name_or_path", "train.output_dir", "distill.output", "eval.output", "data.features_dir",
          "data.train_files", "distill.prompts", "head.init_from", "eval.prompts", "eval.assistant"}


def recipe_keys() -> list[str]:
    """Every dotted key: the core's sections' and those of the parts layers above own (every head kind's
    options, joint training's)."""
    keys = []
    for section in dataclasses.fields(Recipe):
        if "part" not in section.metadata:
            keys += [f"{section.name}.{f.name}" for f in dataclasses.fields(typing.get_type_hints(Recipe)[section.name])
                     if "part" not in f.metadata]
    parts = recipe_parts()
    for cls, default in [*((cls, "head") for cls in parts.kinds.values()), (parts.joint, "train")]:
        keys += [f"{section}.{name}" for section, name in part_fields(cls, default)]
    return sorted(set(keys) - PINNED)


odd_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
numbers = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**12]),
                    st.floats(allow_nan=True, allow_infinity=True))
values = st.one_of(numbers, odd_text, st.booleans(), st.none(), st.lists(numbers | odd_text, max_size=3),
                   st.dictionaries(odd_text, numbers, max_size=2))
raw_values = st.one_of(values.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()),
                       odd_text, st.sampled_from(["[", "{a: ", "1e999", ".nan", "'", "!!python/object:os.system"]))
overrides = st.lists(st.tuples(st.sampled_from(recipe_keys()), raw_values).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=4)


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_cli(argv: list[str], folder: Path) -> int:
    """Run `headstart ARGV`; check it ended in success or one error line, and wrote nothing into `folder`."""
    before = files_under(folder)
    err = StringIO()
    with redirect_stderr(err):
        code = main(argv)
    text = err.getvalue()
    assert "Traceback" not in text, text
    if code != 0:
        assert code == 2, text
        lines = [line for line in text.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"headstart {argv[0]}: error: "), text
    assert files_under(folder) == before, f"{argv} wrote {files_under(folder) - before}"
    return code


@pytest.fixture(scope="module")
def place():
    """A folder holding a valid data file and the recipe; the target named there does not exist."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
        (folder / "conv.jsonl").write_text(json.dumps(row) + "\n")
        (folder / "recipe.yaml").write_text("train:\n  max_steps: 1\n")
        yield folder


def pinned(folder: Path, data: str = "conv.jsonl") -> list[str]:
    return [f"target.name_or_path={folder / 'no-model'}", f"train.output_dir={folder / 'run'}",
            f"data.train_files=[{folder / data}]", f"distill.prompts={folder / data}", f"distill.output={folder / 'out.jsonl'}"]


def check_overrides(place: Path, given_overrides: list[str]) -> None:
    assert run_cli(["train", str(place / "recipe.yaml"), *given_overrides, *pinned(place)], place) == 2  # no target


@QUICK
@given(given_overrides=overrides)
def test_generated_overrides(place, given_overrides):
    check_overrides(place, given_overrides)


@pytest.mark.fuzz
@LONG
@given(given_overrides=overrides)
def test_generated_overrides_long(place, given_overrides):
    check_overrides(place, given_overrides)


# -------------------- data rows and prompt files

roles = st.sampled_from(["user", "assistant", "system", "human", "gpt", "", "tool"])
content = st.one_of(odd_text, st.just(""), numbers, st.none(), st.lists(odd_text, max_size=2),
                    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": odd_text}), max_size=2))
message = st.dictionaries(st.sampled_from(["role", "content", "from", "value", "extra"]), roles | content, max_size=3)
turns = st.lists(st.fixed_dictionaries({"role": roles, "content": content}) | message, max_size=4)
row = st.one_of(
    st.fixed_dictionaries({"messages": turns}, optional={"id": odd_text | numbers, "system": content}),
    st.fixed_dictionaries({"conversations": st.lists(st.fixed_dictionaries({"from": roles, "value": content}) | message, max_size=4)}),
    st.fixed_dictionaries({"data": st.lists(content, max_size=4)}),
    st.fixed_dictionaries({"prompt": content}, optional={"id": odd_text | numbers, "category": content}),
    st.dictionaries(odd_text, values, max_size=3),
    values,
)
lines = st.lists(row.map(lambda r: json.dumps(r, ensure_ascii=False).encode())
                 | st.binary(max_size=20) | odd_text.map(str.encode), min_size=1, max_size=4)


def check_rows(place: Path, tokenizer, rows: list[bytes], suffix: str, on_error: str) -> None:
    name = f"rows{suffix}"
    body = b"\n".join(rows) + b"\n"
    if suffix == ".json":
        body = b"[" + b",".join(rows) + b"]"
    (place / name).write_bytes(body)
    try:
        for verb in ("train", "distill"):
            run_cli([verb, str(place / "recipe.yaml"), f"data.on_error={on_error}", f"distill.on_error={on_error}",
                     *pinned(place, name)], place)
        try:  # what passed the checks, through SmolLM2's real chat template
            build_examples(tokenizer, [str(place / name)], 64, on_error=on_error)
        except DataError:
            pass
    finally:
        os.unlink(place / name)


@QUICK
@given(rows=lines, suffix=st.sampled_from([".jsonl", ".json"]), on_error=st.sampled_from(["raise", "skip"]))
def test_generated_data_rows_and_prompt_files(place, smol_tokenizer, rows, suffix, on_error):
    check_rows(place, smol_tokenizer, rows, suffix, on_error)


@pytest.mark.fuzz
@LONG
@given(rows=lines, suffix=st.sampled_from([".jsonl", ".json"]), on_error=st.sampled_from(["raise", "skip"]))
def test_generated_data_rows_and_prompt_files_long(place, smol_tokenizer, rows, suffix, on_error):
    check_rows(place, smol_tokenizer, rows, suffix, on_error)
