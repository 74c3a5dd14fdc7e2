"""Write headstart's self-distillation prompt sets from the tables in data/prompt_tables/.

Draft heads learn to predict the tokens that the target model (SmolLM2-135M-Instruct) is
about to produce, so their training data is the target's own answers to a large set of
user prompts (self-distillation). The heads only generalise if those prompts cover the
kinds of requests the target will see in use, so variety matters more than raw count.
Nothing can be downloaded in this project, so this script writes the prompts itself.

It combines hand-written phrasings (many ways of asking for the same thing) with
hand-written fillers (topics, tasks, code snippets, situations, and about sixty short
original passages) and procedurally drawn numbers, names and constraints, in nine
categories: chat, explain, howto, code, math, summarize, rewrite, list and qa. The
phrasings and fillers are data, one YAML file per category family in data/prompt_tables/;
this script holds only how they are combined.

Held-out eval: every list under ``fillers:`` in those files is split once, deterministically,
and a slice of it (about 15%, at least 2 items) is reserved for eval. Eval prompts are
therefore built from topics, passages, snippets and names that train never uses; the lists
under ``shared:`` (phrasings, constraints) serve both sides, so the eval set measures
generalisation to new content in the same request styles. Eval prompts are additionally
checked to never appear verbatim in train, and all prompts are unique.

Determinism: every random choice goes through ``random.Random`` seeded with a string
(string seeds are hashed with SHA-512, so PYTHONHASHSEED plays no part); the global random
state is never used. Ids are ``<category>-<5 digits>``: train ids count up from 00000 per
category and eval ids from 90000, so the two files never share an id. With the committed
tables and seed 0 it rewrites data/prompts/train.jsonl and eval.jsonl byte for byte
(tests/scripts/test_make_prompts.py checks this).

Usage::

    .venv/bin/python scripts/make_prompts.py [--tables data/prompt_tables] [--out-dir data/prompts] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from headstart.errors import HeadstartError

REPO = Path(__file__).resolve().parents[1]

CATEGORIES: tuple[str, ...] = (
    "chat",
    "explain",
    "howto",
    "code",
    "math",
    "summarize",
    "rewrite",
    "list",
    "qa",
)

# Train prompts per category (9000 in all; the smallest share is summarize, at 7.8%).
TRAIN_COUNTS: dict[str, int] = {
    "chat": 1100,
    "explain": 1200,
    "howto": 1000,
    "code": 1100,
    "math": 1100,
    "summarize": 700,
    "rewrite": 900,
    "list": 900,
    "qa": 1000,
}
EVAL_PER_CATEGORY = 20
EVAL_ID_OFFSET = 90000
EVAL_FRACTION = 0.15  # share of every filler list reserved for eval
MIN_EVAL_FILLERS = 2
MIN_CATEGORY_SHARE = 0.06
MAX_PROMPT_WORDS = 260
MULTI_DOC_WORDS = 200  # passage words allowed in one multi-document qa prompt
MAX_ATTEMPTS_PER_PROMPT = 200


class TableError(HeadstartError):
    """A prompt table that cannot be read, or tables that cannot make the prompt sets."""


class Passage(NamedTuple):
    """A short original passage with questions that it answers."""

    title: str
    text: str
    questions: tuple[str, ...]


class Snippet(NamedTuple):
    """A code snippet. ``goal`` and ``symptom`` are set only for buggy snippets."""

    lang: str
    code: str
    goal: str = ""
    symptom: str = ""


class SqlTask(NamedTuple):
    """A table schema and queries to ask for over it."""

    schema: str
    tasks: tuple[str, ...]


class WordProblem(NamedTuple):
    """A math word problem; ``numbers`` gives each numeric slot as (low, high, step)."""

    template: str
    numbers: dict[str, tuple[int, int, int]]


# Tables whose rows are records (YAML mappings) rather than strings or short lists.
ROW_TYPES: dict[str, type[NamedTuple]] = {
    "passages": Passage,
    "buggy_snippets": Snippet,
    "explain_snippets": Snippet,
    "sql_tasks": SqlTask,
    "word_problems": WordProblem,
}

# Every table by name; under a filler's name, only the side (train or eval) being built.
Tables = Mapping[str, Any]
Generator = Callable[[random.Random, Tables], str]

# ---------------------------------------------------------------------------------------
# Reading the tables
# ---------------------------------------------------------------------------------------


def load_tables(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read every ``*.yaml`` in ``folder`` into (fillers, shared): each table by name.

    YAML lists become tuples and record rows their NamedTuple, so that rows are hashable
    (the split checks each filler list for duplicates) and compare by value.
    """
    paths = sorted(folder.glob("*.yaml"))
    if not paths:
        raise TableError(f"no prompt tables (*.yaml) in {folder}: pass --tables with the folder that holds them")
    fillers: dict[str, Any] = {}
    shared: dict[str, Any] = {}
    where: dict[str, Path] = {}
    for path in paths:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise TableError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from err
        if not isinstance(document, dict) or set(document) - {"fillers", "shared"}:
            found = sorted(document) if isinstance(document, dict) else type(document).__name__
            raise TableError(f"{path}: expected a mapping with the keys 'fillers' and/or 'shared', found {found}")
        for section, into in (("fillers", fillers), ("shared", shared)):
            for name, rows in (document.get(section) or {}).items():
                if name in where:
                    raise TableError(
                        f"{path}: table {name!r} is also defined in {where[name]}: rename or merge one of them"
                    )
                where[name] = path
                into[name] = _table(path, name, rows)
    return fillers, shared


def _table(path: Path, name: str, rows: Any) -> Any:
    """One table as the generators use it: tuples for lists, NamedTuples for record rows."""
    rows = _frozen(rows)
    row_type = ROW_TYPES.get(name)
    if row_type is None:
        return rows
    try:
        return tuple(row_type(**row) for row in rows)
    except TypeError as err:
        raise TableError(f"{path}: a row of {name!r} must have the fields {row_type._fields}: {err}") from err


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, dict):
        return {key: _frozen(item) for key, item in value.items()}
    return value


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _flat(text: str) -> str:
    """Collapse a passage into one paragraph, however its YAML lays it out."""
    return " ".join(text.split())


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """Lower-case the first letter, unless the text starts with the pronoun I."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'"):
        return text
    return text[:1].lower() + text[1:]


def _with_article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _maybe(rng: random.Random, p: float, options: Sequence[str]) -> str:
    """One of ``options`` with probability ``p``, else the empty string."""
    return rng.choice(options) if rng.random() < p else ""


def _casual(rng: random.Random, text: str, p: float = 0.08) -> str:
    """Sometimes make a one-line prompt look typed in a hurry (lower case, no end mark)."""
    if "\n" in text or rng.random() >= p:
        return text
    text = _lower_first(text)
    if text.endswith(("?", ".")) and not text.endswith(".."):
        text = text[:-1]
    return text


def _count(rng: random.Random, tables: Tables, low: int = 3, high: int = 10) -> str:
    n = rng.randint(low, high)
    return tables["number_words"].get(n, str(n)) if rng.random() < 0.6 else str(n)


def _choice_across(rng: random.Random, *pools: Sequence[Any]) -> Any:
    """Pick uniformly from the union of several pools without building it."""
    index = rng.randrange(sum(len(pool) for pool in pools))
    for pool in pools:
        if index < len(pool):
            return pool[index]
        index -= len(pool)
    raise AssertionError("unreachable")


def _code_block(snippet: Snippet) -> str:
    return f"```{snippet.lang}\n{snippet.code.strip()}\n```"


def _money(value: float) -> str:
    return f"{value:.2f}" if value != int(value) else str(int(value))


# ---------------------------------------------------------------------------------------
# Generators: each returns one prompt built from one side (train or eval) of the fillers.
# ---------------------------------------------------------------------------------------

# chat -----------------------------------------------------------------------------------


def _chat_small_talk(rng: random.Random, tables: Tables) -> str:
    return _casual(rng, rng.choice(tables["small_talk"]), p=0.2)


def _chat_favorite(rng: random.Random, tables: Tables) -> str:
    return rng.choice(tables["favorite_phrasings"]).format(t=rng.choice(tables["favorite_things"]))


def _chat_advice(rng: random.Random, tables: Tables) -> str:
    opener = rng.choice(tables["chat_openers"])
    situation = rng.choice(tables["advice_situations"])
    if opener:
        situation = _lower_first(situation)
    ask = rng.choice(tables["advice_asks"])
    if opener.startswith("Honestly") and ask.startswith("Be honest"):
        ask = tables["advice_asks"][0]
    return _casual(rng, f"{opener}{situation} {ask}", p=0.05)


def _chat_opinion(rng: random.Random, tables: Tables) -> str:
    return _casual(rng, rng.choice(tables["opinion_phrasings"]).format(t=rng.choice(tables["opinion_topics"])))


def _chat_debate(rng: random.Random, tables: Tables) -> str:
    a, b = rng.choice(tables["debates"])
    if rng.random() < 0.5:
        a, b = b, a
    return rng.choice(tables["debate_phrasings"]).format(a=a, b=b, A=_cap(a))


def _chat_recommend(rng: random.Random, tables: Tables) -> str:
    request = rng.choice(tables["recommendations"]).format(city=rng.choice(tables["cities"]))
    return _casual(rng, rng.choice(tables["recommend_phrasings"]).format(r=request))


def _chat_news(rng: random.Random, tables: Tables) -> str:
    return rng.choice(tables["news_phrasings"]).format(
        e=rng.choice(tables["life_news"]), f=rng.choice(tables["news_followups"])
    )


def _chat_hypothetical(rng: random.Random, tables: Tables) -> str:
    return _join(rng.choice(tables["hypotheticals"]), _maybe(rng, 0.4, tables["hypothetical_extras"]))


def _chat_job(rng: random.Random, tables: Tables) -> str:
    job = rng.choice(tables["jobs"])
    return rng.choice(tables["job_phrasings"]).format(j=job, aj=_with_article(job))


def _chat_hobby(rng: random.Random, tables: Tables) -> str:
    return _casual(rng, rng.choice(tables["hobby_phrasings"]).format(h=rng.choice(tables["hobbies"])))


def _chat_travel(rng: random.Random, tables: Tables) -> str:
    days = rng.choice(("two", "three", "four", "five"))
    return rng.choice(tables["travel_phrasings"]).format(city=rng.choice(tables["cities"]), n=days)


def _chat_creative(rng: random.Random, tables: Tables) -> str:
    return rng.choice(tables["creative_phrasings"]).format(t=rng.choice(tables["creative_topics"]))


# explain --------------------------------------------------------------------------------


def _explain_extras(rng: random.Random, tables: Tables, base: str, p_constraint: float = 0.5) -> str:
    return _join(
        _maybe(rng, 0.15, tables["explain_prefixes"]), base, _maybe(rng, p_constraint, tables["explain_constraints"])
    )


def _explain_concept(rng: random.Random, tables: Tables) -> str:
    concept = _choice_across(
        rng, tables["science_concepts"], tables["tech_concepts"], tables["society_concepts"]
    )
    base = rng.choice(tables["explain_phrasings"]).format(c=concept)
    return _casual(rng, _explain_extras(rng, tables, base))


def _explain_history(rng: random.Random, tables: Tables) -> str:
    base = rng.choice(tables["history_phrasings"]).format(e=rng.choice(tables["history_events"]))
    return _casual(rng, _explain_extras(rng, tables, base))


def _explain_wonder(rng: random.Random, tables: Tables) -> str:
    base = rng.choice(tables["wonder_phrasings"]).format(q=rng.choice(tables["wonder_questions"]))
    return _casual(rng, _explain_extras(rng, tables, base, p_constraint=0.3))


def _explain_compare(rng: random.Random, tables: Tables) -> str:
    a, b = rng.choice(tables["compare_pairs"])
    if rng.random() < 0.3:
        a, b = b, a
    base = rng.choice(tables["compare_phrasings"]).format(a=a, b=b, A=_cap(a))
    return _explain_extras(rng, tables, base, p_constraint=0.35)


# howto ----------------------------------------------------------------------------------


def _howto(rng: random.Random, tables: Tables) -> str:
    base = rng.choice(tables["howto_phrasings"]).format(t=rng.choice(tables["howto_tasks"]))
    text = _join(
        _maybe(rng, 0.15, tables["howto_contexts"]), base, _maybe(rng, 0.5, tables["howto_constraints"])
    )
    return _casual(rng, text)


# code -----------------------------------------------------------------------------------


def _code_write(rng: random.Random, tables: Tables) -> str:
    lang = rng.choice(tables["code_langs"])
    base = rng.choice(tables["code_write_phrasings"]).format(lang=lang, t=rng.choice(tables["code_tasks"]))
    extras = tables["code_constraints"] + (tables["python_constraints"] if lang == "Python" else ())
    return _join(base, _maybe(rng, 0.45, extras))


def _code_sql(rng: random.Random, tables: Tables) -> str:
    schema, tasks = rng.choice(tables["sql_tasks"])
    return rng.choice(tables["sql_phrasings"]).format(schema=schema, t=rng.choice(tasks))


def _code_shell(rng: random.Random, tables: Tables) -> str:
    return rng.choice(tables["shell_phrasings"]).format(t=rng.choice(tables["shell_tasks"]))


def _code_fix(rng: random.Random, tables: Tables) -> str:
    snippet: Snippet = rng.choice(tables["buggy_snippets"])
    return rng.choice(tables["code_fix_phrasings"]).format(
        lang=tables["lang_names"][snippet.lang],
        goal=snippet.goal,
        symptom=snippet.symptom,
        code=_code_block(snippet),
    )


def _code_explain(rng: random.Random, tables: Tables) -> str:
    snippet: Snippet = rng.choice(tables["explain_snippets"])
    return rng.choice(tables["code_explain_phrasings"]).format(
        lang=tables["lang_names"][snippet.lang], code=_code_block(snippet)
    )


def _code_question(rng: random.Random, tables: Tables) -> str:
    extras = ("Keep it short.", "Include a small code example.", "I'm a beginner.")
    return _join(rng.choice(tables["programming_questions"]), _maybe(rng, 0.35, extras))


# math -----------------------------------------------------------------------------------


def _math_suffix(rng: random.Random, tables: Tables, text: str, p: float = 0.35) -> str:
    return _join(text, _maybe(rng, p, tables["math_suffixes"]))


def _math_arithmetic(rng: random.Random, tables: Tables) -> str:
    a, b, c = rng.randint(12, 999), rng.randint(2, 99), rng.randint(2, 500)
    small, small2, k = rng.randint(2, 25), rng.randint(2, 25), rng.randint(4, 30)
    d1, d2 = rng.choice((2, 3, 4, 5, 6, 8)), rng.choice((2, 3, 4, 5, 6, 8, 10))
    order = [f"{rng.uniform(0, 3):.{rng.randint(1, 3)}f}" for _ in range(4)]
    order.append(f"{rng.randint(1, 3)}/{rng.choice((2, 4, 5))}")
    rng.shuffle(order)
    values = {
        "a": a, "b": b, "c": c, "small": small, "small2": small2, "q": a * small,
        "sq": k * k, "x": f"{rng.uniform(1, 100):.2f}", "y": f"{rng.uniform(1, 50):.1f}",
        "n1": rng.randint(1, d1 - 1), "d1": d1, "n2": rng.randint(1, d2 - 1), "d2": d2,
        "g1": small * rng.randint(2, 12), "g2": small * rng.randint(2, 12),
        "exp": rng.randint(3, 12), "frac_n": rng.randint(1, 7),
        "frac_d": rng.choice((4, 5, 8, 10, 20, 25)), "big": rng.randint(1000, 99999),
        "order_list": ", ".join(order),
    }
    return _math_suffix(rng, tables, rng.choice(tables["arith_templates"]).format(**values))


def _math_percent(rng: random.Random, tables: Tables) -> str:
    whole = rng.randint(20, 400)
    old = rng.randrange(800, 50000, 10)
    price = rng.randint(12, 400)
    values = {
        "pct": rng.choice((5, 10, 12, 15, 20, 25, 30, 35, 40, 50, 60, 75)),
        "base": rng.randrange(20, 2000, 10), "whole": whole, "part": rng.randint(1, whole),
        "old": old, "new": old + rng.randint(old // 50, old // 2), "price": price,
        "sale": price - rng.randint(1, price // 2), "flat": rng.randint(5, price // 3 + 5),
        "tip": rng.choice((10, 12, 15, 18, 20)), "bill": rng.randint(20, 250),
        "tax": rng.choice((5, 6, 7.5, 8, 10, 20)), "rate": rng.choice((1.5, 2, 2.5, 3, 4, 5)),
        "deposit": rng.randrange(500, 20000, 100), "thing": rng.choice(tables["shop_things"]),
        "name": rng.choice(tables["names"]),
    }
    return _math_suffix(rng, tables, rng.choice(tables["percent_templates"]).format(**values))


def _math_units(rng: random.Random, tables: Tables) -> str:
    unit_from, unit_to, low, high = rng.choice(tables["unit_conversions"])
    if rng.random() < 0.3 and high <= 1000:
        amount = f"{rng.uniform(low, high):.1f}"
    else:
        amount = str(rng.randint(low, high))
    text = rng.choice(tables["unit_phrasings"]).format(x=amount, u1=unit_from, u2=unit_to)
    return _math_suffix(rng, tables, text, p=0.25)


def _math_algebra(rng: random.Random, tables: Tables) -> str:
    x, a, b = rng.randint(-9, 15), rng.randint(2, 9), rng.randint(1, 40)
    a2, b2 = rng.randint(2, 6), rng.randint(1, 9)
    px, py = rng.randint(1, 20), rng.randint(1, 20)
    r1, r2 = rng.randint(1, 9), rng.randint(1, 9)
    values = {
        "a": a, "b": b, "c": a * x + b, "a2": a2, "b2": b2, "c2": a2 * (x + b2),
        "s": px + py, "d": px - py, "ad": abs(px - py) or 2, "r1": r1, "r2": r2,
        "rsum": r1 + r2, "rprod": r1 * r2, "m": rng.randint(2, 5), "e": rng.randint(2, 9),
        "xv": rng.randint(1, 6), "cons": 2 * rng.randint(5, 60) + 1, "c3": 2 * x + b,
        "p1": rng.randint(-5, 5), "q1": rng.randint(-5, 5),
        "p2": rng.randint(6, 12), "q2": rng.randint(-5, 15),
    }
    return _math_suffix(rng, tables, rng.choice(tables["algebra_templates"]).format(**values))


def _math_word_template(rng: random.Random, tables: Tables) -> str:
    template, ranges = rng.choice(tables["word_problems"])
    name, name2 = rng.sample(list(tables["names"]), 2)
    numbers = {key: rng.randrange(lo, hi + 1, step) for key, (lo, hi, step) in ranges.items()}
    text = template.format(name=name, name2=name2, items=rng.choice(tables["items"]), **numbers)
    return _math_suffix(rng, tables, text)


def _math_word_change(rng: random.Random, tables: Tables) -> str:
    count = rng.randint(2, 9)
    price = rng.randint(1, 12) + rng.choice((0, 0.25, 0.5, 0.75))
    bill = next(note for note in (10, 20, 50, 100, 200) if note >= count * price)
    thing = rng.choice(("notebooks", "pens", "bus tickets", "muffins", "small plants"))
    name = rng.choice(tables["names"])
    return _math_suffix(rng, tables, (
        f"{name} buys {count} {thing} at ${_money(price)} each and pays with a ${bill} bill. "
        f"How much change does {name} get?"
    ))


def _math_word_clock(rng: random.Random, tables: Tables) -> str:
    hour, minute = rng.randint(6, 21), rng.randrange(0, 60, 5)
    duration = rng.randint(45, 230)
    start = f"{hour}:{minute:02d}"
    if rng.random() < 0.5:
        text = f"A movie starts at {start} and lasts {duration} minutes. What time does it end?"
    else:
        text = (
            f"{rng.choice(tables['names'])}'s train leaves at {start} and the journey takes "
            f"{duration // 60} hours and {duration % 60} minutes. When does it arrive?"
        )
    return _math_suffix(rng, tables, text)


def _math_word_increase(rng: random.Random, tables: Tables) -> str:
    old = rng.randint(5, 80)
    new = old + rng.randint(1, max(2, old // 2))
    thing = rng.choice(("concert ticket", "bus fare", "cup of coffee", "museum ticket"))
    return _math_suffix(
        rng, tables, f"The price of a {thing} went up from ${old} to ${new}. What is the percentage "
        "increase?"
    )


def _math_word_heads_legs(rng: random.Random, tables: Tables) -> str:
    chickens, cows = rng.randint(3, 30), rng.randint(2, 20)
    return _math_suffix(rng, tables, (
        f"A farmer has chickens and cows. Together they have {chickens + cows} heads and "
        f"{2 * chickens + 4 * cows} legs. How many chickens and how many cows are there?"
    ))


def _math_word_unit_price(rng: random.Random, tables: Tables) -> str:
    item = rng.choice(tables["grocery_items"])
    small, large = rng.randint(3, 6), rng.randint(8, 24)
    price_small = round(small * rng.uniform(0.3, 2.0), 2)
    price_large = round(large * rng.uniform(0.3, 2.0), 2)
    return _math_suffix(rng, tables, (
        f"Pack A has {small} {item} for ${price_small:.2f}, and pack B has {large} {item} for "
        f"${price_large:.2f}. Which pack is the better deal per item?"
    ))


def _math_word(rng: random.Random, tables: Tables) -> str:
    specials = (
        _math_word_change, _math_word_clock, _math_word_increase, _math_word_heads_legs,
        _math_word_unit_price,
    )
    if rng.random() < 0.22:
        return rng.choice(specials)(rng, tables)
    return _math_word_template(rng, tables)


# summarize ------------------------------------------------------------------------------


def _summarize_passage(rng: random.Random, tables: Tables) -> str:
    passage: Passage = rng.choice(tables["passages"])
    return rng.choice(tables["summarize_phrasings"]).format(p=_flat(passage.text), title=passage.title)


def _summarize_email(rng: random.Random, tables: Tables) -> str:
    recipient, sender, other = rng.sample(list(tables["names"]), 3)
    day, day2 = rng.sample(tables["weekdays"][:5], 2)
    project = rng.choice(tables["email_projects"])
    body = rng.choice(tables["email_bodies"]).format(
        project=project, day=day, day2=day2, time=rng.choice(tables["email_times"]),
        place=rng.choice(tables["email_places"]), name2=other,
    )
    greeting = rng.choice(tables["email_greetings"]).format(name=recipient)
    email = f"{greeting}\n\n{body}\n\n{rng.choice(tables['email_signoffs'])}\n{sender}"
    if rng.random() < 0.4:
        subject = rng.choice(("Quick update", "Change of plans", "Following up", "Next steps"))
        email = f"Subject: {subject}\n\n{email}"
    return rng.choice(tables["email_phrasings"]).format(e=email)


def _summarize_meeting(rng: random.Random, tables: Tables) -> str:
    names = rng.sample(list(tables["names"]), 3)
    project = rng.choice(tables["email_projects"])
    lines = [
        "- " + note.format(name=rng.choice(names), project=project)
        for note in rng.sample(tables["meeting_notes"], rng.randint(4, 6))
    ]
    header = f"Notes from the {rng.choice(tables['meeting_teams'])} meeting ({rng.choice(tables['weekdays'])}):"
    return rng.choice(tables["meeting_phrasings"]).format(m="\n".join([header, *lines]))


def _summarize_review(rng: random.Random, tables: Tables) -> str:
    product = rng.choice(tables["review_products"])
    aspects = rng.sample(tables["review_aspects"], rng.randint(3, 5))
    n_praise = rng.randint(1, len(aspects) - 1)
    praise = [good for good, _ in aspects[:n_praise]]
    complaints = [bad for _, bad in aspects[n_praise:]]
    good_overall = len(praise) > len(complaints)
    verdicts = tables["review_positive_verdicts"] if good_overall else tables["review_negative_verdicts"]
    review = _join(
        rng.choice(tables["review_openings"]).format(product=product),
        *praise,
        rng.choice(("On the downside, ", "However, ", "That said, ")) + _lower_first(complaints[0]),
        *complaints[1:],
        rng.choice(verdicts),
    )
    return rng.choice(tables["review_phrasings"]).format(r=review)


def _summarize_pair(rng: random.Random, tables: Tables) -> str:
    first, second = rng.sample(list(tables["passages"]), 2)
    return rng.choice(tables["pair_summarize_phrasings"]).format(
        p1=_flat(first.text), p2=_flat(second.text), t1=first.title, t2=second.title
    )


# rewrite --------------------------------------------------------------------------------


def _rewrite_sentence(rng: random.Random, tables: Tables, sentences: str, phrasings: str) -> str:
    """A sentence from the table named ``sentences``, asked for with one of ``phrasings``."""
    base = rng.choice(tables[phrasings]).format(s=rng.choice(tables[sentences]))
    if "different ways" in base:
        return base
    return _join(base, _maybe(rng, 0.4, tables["rewrite_extras"]))


def _rewrite_formal(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "casual_sentences", "rewrite_formal")


def _rewrite_polite(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "blunt_sentences", "rewrite_polite")


def _rewrite_simple(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "complex_sentences", "rewrite_simple")


def _rewrite_short(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "wordy_sentences", "rewrite_short")


def _rewrite_grammar(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "error_sentences", "rewrite_grammar")


def _rewrite_active(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "passive_sentences", "rewrite_active")


def _rewrite_style(rng: random.Random, tables: Tables) -> str:
    return _rewrite_sentence(rng, tables, "announcement_sentences", "rewrite_style")


def _rewrite_paragraph(rng: random.Random, tables: Tables) -> str:
    passage: Passage = rng.choice(tables["passages"])
    base = rng.choice(tables["rewrite_paragraph"]).format(p=_flat(passage.text))
    return _join(base, _maybe(rng, 0.2, ("Keep the meaning the same.",
                                         "Only return the rewritten text.")))


# list -----------------------------------------------------------------------------------


def _list_of(rng: random.Random, tables: Tables, topic: str) -> str:
    base = rng.choice(tables["list_phrasings"]).format(n=_count(rng, tables), t=topic)
    return _casual(rng, _join(base, _maybe(rng, 0.4, tables["list_constraints"])))


def _list_topic(rng: random.Random, tables: Tables) -> str:
    return _list_of(rng, tables, rng.choice(tables["list_topics"]))


def _list_place(rng: random.Random, tables: Tables) -> str:
    if rng.random() < 0.5:
        topic = rng.choice(tables["city_list_topics"]).format(x=rng.choice(tables["cities"]))
    else:
        topic = rng.choice(tables["country_list_topics"]).format(x=rng.choice(tables["countries"]))
    return _list_of(rng, tables, topic)


def _list_people(rng: random.Random, tables: Tables) -> str:
    if rng.random() < 0.5:
        job = rng.choice(tables["jobs"])
        topic = rng.choice(tables["job_list_topics"]).format(x=job, ax=_with_article(job))
    else:
        topic = rng.choice(tables["hobby_list_topics"]).format(x=rng.choice(tables["hobbies"]))
    return _list_of(rng, tables, topic)


# qa -------------------------------------------------------------------------------------


def _qa_fact(rng: random.Random, tables: Tables) -> str:
    return _casual(rng, rng.choice(tables["fact_wrappers"]).format(q=rng.choice(tables["fact_questions"])))


def _qa_country(rng: random.Random, tables: Tables) -> str:
    return _casual(rng, rng.choice(tables["country_questions"]).format(c=rng.choice(tables["countries"])))


def _qa_order(rng: random.Random, tables: Tables) -> str:
    people = rng.sample(list(tables["names"]), rng.choice((3, 3, 4)))
    relation, top, bottom = rng.choice(tables["order_relations"])
    facts = [f"{a} is {relation} {b}." for a, b in pairwise(people)]
    rng.shuffle(facts)
    return _join(*facts, rng.choice((top, bottom)))


def _qa_days(rng: random.Random, tables: Tables) -> str:
    day, n = rng.choice(tables["weekdays"]), rng.randint(2, 100)
    return rng.choice((
        f"If today is {day}, what day of the week will it be in {n} days?",
        f"If the day before yesterday was {day}, what day is tomorrow?",
        f"If today is {day}, what day of the week was it {n} days ago?",
    ))


def _qa_sequence(rng: random.Random, tables: Tables) -> str:
    kind = rng.randrange(4)
    start = rng.randint(1, 20)
    if kind == 0:
        step = rng.randint(2, 12) * rng.choice((1, 1, -1))
        terms = [start + step * i for i in range(5)]
    elif kind == 1:
        ratio = rng.randint(2, 4)
        terms = [rng.randint(1, 5) * ratio**i for i in range(5)]
    elif kind == 2:
        offset = rng.randint(0, 5)
        terms = [(i + offset) ** 2 for i in range(1, 6)]
    else:
        terms = [start, start + rng.randint(1, 5)]
        while len(terms) < 6:
            terms.append(terms[-1] + terms[-2])
    shown = ", ".join(str(t) for t in terms)
    return rng.choice((
        f"What number comes next in this sequence: {shown}, ...?",
        f"Find the pattern and give the next two numbers: {shown}",
        f"What is the rule behind this sequence: {shown}?",
    ))


def _qa_letters(rng: random.Random, tables: Tables) -> str:
    word = rng.choice(tables["count_words"])
    letter = rng.choice(sorted(set(word)))
    return rng.choice((
        f"How many times does the letter '{letter}' appear in the word '{word}'?",
        f"How many letters are in the word '{word}'?",
        f"Spell the word '{word}' backwards.",
        f"What is the third letter of the word '{word}'?",
    ))


def _qa_syllogism(rng: random.Random, tables: Tables) -> str:
    group, larger, quality = rng.choice(tables["syllogisms"])
    return rng.choice((
        f"All {group} are {larger}. Some {larger} are {quality}. Does it follow that some "
        f"{group} are {quality}? Explain your reasoning.",
        f"If all {group} are {larger}, are all {larger} {group}? Explain.",
        f"If all {group} are {larger} and some {group} are {quality}, must some {larger} be "
        f"{quality}? Explain.",
    ))


def _qa_compare_numbers(rng: random.Random, tables: Tables) -> str:
    x = f"0.{rng.randint(1, 9)}"
    y = f"0.{rng.randint(10, 99)}"
    n1, n2 = rng.randint(1, 6), rng.randint(1, 6)
    d1, d2 = n1 + rng.randint(1, 5), n2 + rng.randint(1, 5)
    return rng.choice((
        f"Which is larger: {x} or {y}?",
        f"Which is greater, {n1}/{d1} or {n2}/{d2}? Explain.",
        f"Is {x} bigger or smaller than {y}?",
    ))


def _qa_reasoning(rng: random.Random, tables: Tables) -> str:
    kinds = (
        _qa_order, _qa_days, _qa_sequence, _qa_letters, _qa_syllogism, _qa_compare_numbers,
    )
    if rng.random() < 0.15:
        return rng.choice(tables["riddles"])
    text = rng.choice(kinds)(rng, tables)
    if "Explain" in text:
        return text
    return _join(text, _maybe(rng, 0.2, ("Explain your reasoning.", "Think it through.")))


def _qa_documents(rng: random.Random, tables: Tables) -> str:
    """Retrieval-style: several documents, the question is answered by one of them."""
    answer: Passage = rng.choice(tables["passages"])
    others = [passage for passage in tables["passages"] if passage != answer]
    documents = [answer, *rng.sample(others, rng.choice((1, 1, 2)))]
    while len(documents) > 2 and sum(_word_count(d.text) for d in documents) > MULTI_DOC_WORDS:
        documents.pop()
    rng.shuffle(documents)
    question = rng.choice(answer.questions)
    listed = "\n\n".join(
        f"[{i}] {doc.title}\n{_flat(doc.text)}" for i, doc in enumerate(documents, 1)
    )
    return rng.choice(tables["multi_doc_formats"]).format(docs=listed, q=question)


def _qa_passage(rng: random.Random, tables: Tables) -> str:
    passage: Passage = rng.choice(tables["passages"])
    roll = rng.random()
    if roll < 0.6:
        question = rng.choice(passage.questions)
    elif roll < 0.9:
        question = rng.choice(tables["passage_generic_questions"])
    else:
        question = rng.choice(tables["passage_unanswerable"])
    return rng.choice(tables["passage_qa_formats"]).format(
        p=_flat(passage.text), q=question, lq=_lower_first(question)
    )


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------

# Per category: (weight, generator). Weights are relative; they roughly follow how many
# distinct prompts each generator can make, so small pools are not drawn to exhaustion.
CATEGORY_GENERATORS: dict[str, tuple[tuple[float, Generator], ...]] = {
    "chat": (
        (0.05, _chat_small_talk), (0.06, _chat_favorite), (0.22, _chat_advice),
        (0.12, _chat_opinion), (0.07, _chat_debate), (0.10, _chat_recommend),
        (0.07, _chat_news), (0.05, _chat_hypothetical), (0.08, _chat_job),
        (0.07, _chat_hobby), (0.05, _chat_travel), (0.06, _chat_creative),
    ),
    "explain": (
        (0.55, _explain_concept), (0.18, _explain_history), (0.17, _explain_wonder),
        (0.10, _explain_compare),
    ),
    "howto": ((1.0, _howto),),
    "code": (
        (0.40, _code_write), (0.11, _code_sql), (0.10, _code_shell), (0.15, _code_fix),
        (0.14, _code_explain), (0.10, _code_question),
    ),
    "math": (
        (0.20, _math_arithmetic), (0.15, _math_percent), (0.14, _math_units),
        (0.15, _math_algebra), (0.36, _math_word),
    ),
    "summarize": (
        (0.52, _summarize_passage), (0.18, _summarize_email), (0.13, _summarize_meeting),
        (0.10, _summarize_review), (0.07, _summarize_pair),
    ),
    "rewrite": (
        (0.13, _rewrite_formal), (0.10, _rewrite_polite), (0.12, _rewrite_simple),
        (0.11, _rewrite_short), (0.14, _rewrite_grammar), (0.05, _rewrite_active),
        (0.10, _rewrite_style), (0.25, _rewrite_paragraph),
    ),
    "list": ((0.72, _list_topic), (0.14, _list_place), (0.14, _list_people)),
    "qa": (
        (0.26, _qa_fact), (0.08, _qa_country), (0.26, _qa_reasoning), (0.30, _qa_passage),
        (0.10, _qa_documents),
    ),
}

# ---------------------------------------------------------------------------------------
# Building the set
# ---------------------------------------------------------------------------------------


def split_fillers(
    fillers: Mapping[str, Sequence[Any]], seed: int = 0
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Split every filler list into (train, eval) sides, deterministically for ``seed``.

    About ``EVAL_FRACTION`` of each list (at least ``MIN_EVAL_FILLERS`` items) goes to eval;
    both sides keep the original order of the items they hold.
    """
    train: dict[str, list[Any]] = {}
    held_out: dict[str, list[Any]] = {}
    for name, items in fillers.items():
        if len(set(items)) != len(items):
            raise TableError(f"filler list {name!r} contains duplicates: remove the repeated rows")
        order = list(range(len(items)))
        random.Random(f"headstart-prompts:split:{seed}:{name}").shuffle(order)
        n_eval = max(MIN_EVAL_FILLERS, round(len(items) * EVAL_FRACTION))
        eval_index = set(order[:n_eval])
        train[name] = [item for i, item in enumerate(items) if i not in eval_index]
        held_out[name] = [item for i, item in enumerate(items) if i in eval_index]
    return train, held_out
def _sample_unique(
    rng: random.Random,
    generators: Sequence[tuple[float, Generator]],
    tables: Tables,
    n: int,
    seen: set[str],
    label: str,
) -> list[str]:
    """Draw ``n`` prompts that are not in ``seen`` (which is updated in place)."""
    weights = [weight for weight, _ in generators]
    funcs = [func for _, func in generators]
    prompts: list[str] = []
    attempts = 0
    while len(prompts) < n:
        attempts += 1
        if attempts > n * MAX_ATTEMPTS_PER_PROMPT:
            raise TableError(
                f"{label}: only {len(prompts)} of {n} unique prompts found: add fillers or phrasings to its tables"
            )
        func = rng.choices(funcs, weights)[0]
        try:
            prompt = func(rng, tables).strip()
        except KeyError as err:  # a table the generator reads, or a {slot} a template names
            raise TableError(
                f"{label}: {func.__name__} found no table and no template slot named {err}: "
                "add the table to data/prompt_tables/ or fix the template"
            ) from err
        if prompt in seen:
            continue
        seen.add(prompt)
        prompts.append(prompt)
    return prompts


def _row(category: str, number: int, prompt: str) -> dict[str, str]:
    return {"id": f"{category}-{number:05d}", "category": category, "prompt": prompt}


def build_prompts(
    fillers: Mapping[str, Sequence[Any]], shared: Tables, seed: int = 0
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Build (train, eval) prompt rows from the tables, deterministically for ``seed``.

    Each row is ``{"id": "<category>-<5 digits>", "category": ..., "prompt": ...}``. Train
    rows come shuffled across categories (ids stay stable); eval rows are grouped by
    category, with ids starting at ``EVAL_ID_OFFSET``.
    """
    train_side, eval_side = split_fillers(fillers, seed)
    train_tables = {**shared, **train_side}
    eval_tables = {**shared, **eval_side}
    seen: set[str] = set()
    train: list[dict[str, str]] = []
    for category in CATEGORIES:
        rng = random.Random(f"headstart-prompts:{seed}:{category}:train")
        prompts = _sample_unique(
            rng, CATEGORY_GENERATORS[category], train_tables, TRAIN_COUNTS[category], seen,
            f"train/{category}",
        )
        train.extend(_row(category, i, prompt) for i, prompt in enumerate(prompts))
    held_out: list[dict[str, str]] = []
    for category in CATEGORIES:
        rng = random.Random(f"headstart-prompts:{seed}:{category}:eval")
        prompts = _sample_unique(
            rng, CATEGORY_GENERATORS[category], eval_tables, EVAL_PER_CATEGORY, seen,
            f"eval/{category}",
        )
        held_out.extend(
            _row(category, EVAL_ID_OFFSET + i, prompt) for i, prompt in enumerate(prompts)
        )
    random.Random(f"headstart-prompts:{seed}:order").shuffle(train)
    validate(train, held_out)
    return train, held_out


def _word_count(text: str) -> int:
    return len(text.split())


def validate(train: Sequence[Mapping[str, str]], held_out: Sequence[Mapping[str, str]]) -> None:
    """Check ids, uniqueness, the train/eval separation, category shares and lengths."""
    rows = [*train, *held_out]
    ids = [row["id"] for row in rows]
    _require(len(set(ids)) == len(ids), "duplicate ids")
    prompts = [row["prompt"] for row in rows]
    _require(len(set(prompts)) == len(prompts), "duplicate prompts")
    train_prompts = {row["prompt"] for row in train}
    leaked = [row["id"] for row in held_out if row["prompt"] in train_prompts]
    _require(not leaked, f"eval prompts also in train: {leaked}")
    for row in rows:
        category, number = row["id"].rsplit("-", 1)
        _require(category == row["category"] in CATEGORIES, f"bad category: {row['id']}")
        _require(len(number) == 5 and number.isdigit(), f"bad id: {row['id']}")
        _require(_word_count(row["prompt"]) <= MAX_PROMPT_WORDS, f"too long: {row['id']}")
    train_counts = Counter(row["category"] for row in train)
    eval_counts = Counter(row["category"] for row in held_out)
    for category in CATEGORIES:
        share = train_counts[category] / len(train)
        _require(share >= MIN_CATEGORY_SHARE, f"{category} is only {share:.1%} of train")
        _require(eval_counts[category] == EVAL_PER_CATEGORY, f"eval {category} count")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise TableError(f"the prompt sets fail a check: {message}")


def write_jsonl(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """Write one JSON object per line, keys in the order id, category, prompt."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            record = {"id": row["id"], "category": row["category"], "prompt": row["prompt"]}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _report(train: Sequence[Mapping[str, str]], held_out: Sequence[Mapping[str, str]]) -> str:
    train_counts = Counter(row["category"] for row in train)
    eval_counts = Counter(row["category"] for row in held_out)
    lines = [f"{'category':<10} {'train':>6} {'share':>6} {'eval':>5} {'mean words':>10}"]
    for category in CATEGORIES:
        words = [_word_count(row["prompt"]) for row in train if row["category"] == category]
        lines.append(
            f"{category:<10} {train_counts[category]:>6} "
            f"{train_counts[category] / len(train):>6.1%} {eval_counts[category]:>5} "
            f"{sum(words) / len(words):>10.1f}"
        )
    lines.append(f"{'total':<10} {len(train):>6} {'':>6} {len(held_out):>5}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, default=REPO / "data" / "prompt_tables",
                        help="folder of the YAML prompt tables")
    parser.add_argument("--out-dir", type=Path, default=REPO / "data" / "prompts",
                        help="folder for train.jsonl and eval.jsonl")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random choice")
    args = parser.parse_args(argv)
    try:
        train, held_out = build_prompts(*load_tables(args.tables), seed=args.seed)
    except HeadstartError as err:
        print(f"make_prompts: error: {err}", file=sys.stderr)
        return 2
    write_jsonl(args.out_dir / "train.jsonl", train)
    write_jsonl(args.out_dir / "eval.jsonl", held_out)
    print(_report(train, held_out))
    print(f"wrote {args.out_dir / 'train.jsonl'} and {args.out_dir / 'eval.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
