"""Features for training: what the frozen target computes for a batch, which heads learn from.

Online (the default): the target runs inside each training step under `torch.no_grad()`; nothing
touches the disk. Heads say which decoder layers they read (`heads.feature_layers`: empty for the
last hidden state only, three layers for EAGLE-3).

Offline (`headstart features RECIPE`, then `data.features_dir`): the target runs once over the
training data and its features go to disk, so training steps skip the target's forward. Layout:

    features_dir/index.json               format, target, layers, dtype, data, shards
    features_dir/shard-00000.safetensors  "hidden" (N, D) and "layer_<l>" (N, D) for every layer l,
                                          the N real tokens of its examples back to back (no padding)

The index lists, per shard, each example's content key (a hash of its token ids), offset and
length. Training looks examples up by that key, so a cache made from other data, another
`max_length` or another chat template is refused rather than misread, and so is a cache made for
another target or without the layers the head reads. Shards are read lazily: `safe_open` maps the
file and `get_slice` reads one example's rows.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm.auto import tqdm

from headstart import heads
from headstart.jsonl import DataError
from headstart.target import Target, TargetOutput
from headstart.train.data import Example, ExampleDataset, build_examples, collate

FORMAT_VERSION = 1
INDEX_NAME = "index.json"
STORAGE_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
HEADER_BYTES_PER_TENSOR = 96  # a safetensors header entry (name, dtype, shape, offsets)
INDEX_BYTES = 1024  # index.json without its example entries
INDEX_BYTES_PER_EXAMPLE = 64  # one [key, offset, length] entry of index.json


@torch.no_grad()
def batch_features(target: Target, batch: dict[str, torch.Tensor], layers: tuple[int, ...] = ()) -> TargetOutput:
    """The target's last hidden state (B, T, D) and the outputs of `layers` for a collated batch.

    A batch collated from an offline cache carries them (`cached_hidden`, `cached_layer_<l>`); they
    are returned in the target's dtype, as the online forward would return them.
    """
    if "cached_hidden" not in batch:
        return target(batch["input_ids"], attention_mask=batch["attention_mask"], feature_layers=tuple(layers))
    missing = [layer for layer in layers if f"cached_layer_{layer}" not in batch]
    if missing:
        raise DataError(f"the feature cache has no layers {missing}, which the head reads; rerun `headstart features`")
    dtype = target.dtype
    return TargetOutput(
        hidden=batch["cached_hidden"].to(dtype),
        features={layer: batch[f"cached_layer_{layer}"].to(dtype) for layer in layers},
    )


def estimate_bytes(tokens: int, layers: int, hidden_size: int, dtype: str, shards: int = 1, examples: int = 0) -> int:
    """Disk the cache needs: tokens × (1 + layers) × D × bytes per value, plus small metadata."""
    per_value = torch.empty((), dtype=STORAGE_DTYPES[dtype]).element_size()
    metadata = shards * (64 + HEADER_BYTES_PER_TENSOR * (1 + layers)) + INDEX_BYTES + examples * INDEX_BYTES_PER_EXAMPLE
    return tokens * (1 + layers) * hidden_size * per_value + metadata


def check_disk(folder: str | Path, needed: int) -> int:
    """Raise DataError when the file system holding `folder` has less than `needed` bytes free."""
    probe = Path(folder).absolute()
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise DataError(
            f"the feature cache needs about {needed / 2**30:.2f} GiB but {probe} has {free / 2**30:.2f} GiB free; "
            f"free some space, point data.features_dir elsewhere, store fewer layers, or train online (no features_dir)"
        )
    return free


def _target_info(target: Target) -> dict:
    info = target.describe()
    info["dtype"] = str(target.dtype).removeprefix("torch.")
    return info


class ShardWriter:
    """Examples' features, buffered and written as safetensors shards of whole examples, each of at least
    `shard_tokens` tokens (the last one fewer); `shards` lists what each holds, for the cache's index."""

    def __init__(self, folder: Path, names: list[str], shard_tokens: int):
        self.folder, self.names, self.shard_tokens = folder, names, shard_tokens
        self.shards: list[dict] = []
        self.buffer: dict[str, list[torch.Tensor]] = {n: [] for n in names}
        self.entries: list[list] = []  # [key, offset, tokens] of each example in the shard being filled
        self.buffered = 0

    def add(self, key: str, values: dict[str, torch.Tensor]) -> None:
        """One example's features, (n, D) per name, padding dropped."""
        n = len(values[self.names[0]])
        for name in self.names:
            self.buffer[name].append(values[name])
        self.entries.append([key, self.buffered, n])
        self.buffered += n
        if self.buffered >= self.shard_tokens:
            self.flush()

    def flush(self) -> None:
        """Write the buffered examples as the next shard (renamed into place)."""
        if not self.buffered:
            return
        name = f"shard-{len(self.shards):05d}.safetensors"
        tensors = {n: torch.cat(self.buffer[n]).contiguous() for n in self.names}
        save_file(tensors, str(self.folder / (name + ".tmp")), metadata={"format": "headstart-features"})
        os.replace(self.folder / (name + ".tmp"), self.folder / name)
        self.shards.append({"file": name, "tokens": self.buffered, "examples": self.entries})
        for n in self.names:
            self.buffer[n].clear()
        self.entries, self.buffered = [], 0


def write_feature_cache(
    target: Target,
    examples: list[Example],
    folder: str | Path,
    layers: list[int] | tuple[int, ...] = (),
    dtype: str = "bfloat16",
    batch_size: int = 8,
    shard_mb: float = 1024,
    progress: bool = True,
    data_info: dict | None = None,
) -> dict:
    """Run the target over `examples` and write their features (padding excluded) into `folder`."""
    folder, layers = Path(folder), _checked_layers(target, layers, dtype)
    if (folder / INDEX_NAME).exists():
        raise DataError(f"{folder} already holds a feature cache; delete it or choose another data.features_dir")
    todo = _distinct_longest_first(examples)
    tokens = sum(len(e.input_ids) for e in todo)
    d = target.hidden_size
    bytes_per_token = (1 + len(layers)) * d * STORAGE_DTYPES[dtype].itemsize
    shard_tokens = max(1, int(shard_mb * 2**20) // bytes_per_token)
    n_shards = max(1, min(len(todo), tokens // shard_tokens))  # a shard holds whole examples
    estimate = estimate_bytes(tokens, len(layers), d, dtype, n_shards, len(todo))
    free = check_disk(folder, estimate)
    folder.mkdir(parents=True, exist_ok=True)
    writer = ShardWriter(folder, ["hidden"] + [f"layer_{layer}" for layer in layers], shard_tokens)
    start = time.perf_counter()
    _run_target(target, todo, layers, STORAGE_DTYPES[dtype], batch_size, writer, progress)
    writer.flush()
    _write_index(folder, {
        "format": "headstart-features",
        "format_version": FORMAT_VERSION,
        "target": _target_info(target),
        "layers": layers,
        "dtype": dtype,
        "hidden_size": d,
        "examples": len(todo),
        "tokens": tokens,
        "data": data_info or {},
        "shards": writer.shards,
    })
    written = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    return {
        "folder": str(folder),
        "examples": len(todo),
        "duplicates_stored_once": len(examples) - len(todo),
        "tokens": tokens,
        "layers": layers,
        "dtype": dtype,
        "shards": len(writer.shards),
        "estimated_bytes": estimate,
        "written_bytes": written,
        "free_bytes_before": free,
        "seconds": round(time.perf_counter() - start, 1),
    }


def _checked_layers(target: Target, layers, dtype: str) -> list[int]:
    """The layers to store, sorted and distinct, after checking them and the storage dtype."""
    if dtype not in STORAGE_DTYPES:
        raise DataError(f"features.dtype must be one of {sorted(STORAGE_DTYPES)}, got {dtype!r}")
    layers = sorted(set(layers))
    bad = [layer for layer in layers if not 0 <= layer < target.num_layers]
    if bad:
        raise DataError(f"features.layers {bad} do not exist: the target has layers 0..{target.num_layers - 1}")
    return layers


def _distinct_longest_first(examples: list[Example]) -> list[Example]:
    """Each distinct example once (identical token ids have identical features), longest first (similar
    lengths batched together: less padding)."""
    unique: dict[str, Example] = {}
    for e in examples:
        unique.setdefault(e.key, e)
    return sorted(unique.values(), key=lambda e: -len(e.input_ids))


def _run_target(target: Target, todo: list[Example], layers: list[int], storage: torch.dtype, batch_size: int,
                writer: ShardWriter, progress: bool) -> None:
    """The target's features of `todo`, batch by batch, into `writer` (in the storage dtype, on the CPU)."""
    start = time.perf_counter()
    bar = tqdm(total=sum(len(e.input_ids) for e in todo), desc="features", unit="tok", disable=not progress)
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        batch = collate([{"input_ids": e.input_ids, "loss_mask": e.loss_mask} for e in chunk])
        batch = {k: v.to(target.device) for k, v in batch.items()}
        out = batch_features(target, batch, tuple(layers))
        values = {"hidden": out.hidden, **{f"layer_{layer}": out.features[layer] for layer in layers}}
        for row, e in enumerate(chunk):
            n = len(e.input_ids)
            writer.add(e.key, {name: v[row, :n].to("cpu", storage) for name, v in values.items()})  # (n, D) each
        bar.update(sum(len(e.input_ids) for e in chunk))
        bar.set_postfix(tok_s=f"{bar.n / (time.perf_counter() - start):.0f}")
    bar.close()


def _write_index(folder: Path, index: dict) -> None:
    """The cache's index.json, written last and renamed into place: a folder without it is an unfinished cache."""
    tmp = folder / (INDEX_NAME + ".tmp")
    tmp.write_text(json.dumps(index) + "\n")
    os.replace(tmp, folder / INDEX_NAME)


class FeatureCache:
    """An offline feature cache opened for reading; shards are mapped lazily, one handle each."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        path = self.require(folder)
        self.index = json.loads(path.read_text())
        if self.index.get("format_version") != FORMAT_VERSION:
            raise DataError(f"{path}: feature cache format {self.index.get('format_version')}, expected {FORMAT_VERSION}")
        self.layers = list(self.index["layers"])
        self.where = {
            key: (s, offset, length)
            for s, shard in enumerate(self.index["shards"])
            for key, offset, length in shard["examples"]
        }
        self._handles: dict[int, object] = {}

    @staticmethod
    def require(folder: str | Path) -> Path:
        """The cache's index file, or the refusal where `headstart features` has not finished writing one
        (what `headstart train` checks before its target loads; the index is read when the data is)."""
        path = Path(folder) / INDEX_NAME
        if not path.is_file():
            raise DataError(
                f"{folder} is not a feature cache (no {INDEX_NAME}; an interrupted `headstart features` "
                f"leaves none): run `headstart features RECIPE` to write it"
            )
        return path

    def check(self, target: Target, layers: tuple[int, ...] | list[int] = ()) -> None:
        """Refuse a cache made for another target, or one that lacks layers the head reads."""
        made, now = self.index["target"], _target_info(target)
        for field in ("name_or_path", "revision", "hidden_size", "num_hidden_layers", "vocab_size"):
            if made.get(field) != now.get(field):
                raise DataError(
                    f"{self.folder} was made for another target ({field} {made.get(field)!r}, this target has "
                    f"{now.get(field)!r}); its features cannot train a head for this one. Rerun `headstart features` "
                    f"with this recipe into another data.features_dir"
                )
        missing = sorted(set(layers) - set(self.layers))
        if missing:
            raise DataError(
                f"{self.folder} stores layers {self.layers} but the head reads layers {sorted(layers)} "
                f"(missing {missing}); rerun `headstart features` with features.layers covering them"
            )

    def read(self, key: str, layers: tuple[int, ...] | list[int] = ()) -> dict[str, torch.Tensor]:
        """One example's `cached_hidden` (T, D) and `cached_layer_<l>` (T, D), read from its shard."""
        s, offset, length = self.where[key]
        handle = self._handles.get(s)
        if handle is None:
            handle = self._handles[s] = safe_open(str(self.folder / self.index["shards"][s]["file"]), framework="pt")
        out = {"cached_hidden": handle.get_slice("hidden")[offset : offset + length]}
        for layer in layers:
            out[f"cached_layer_{layer}"] = handle.get_slice(f"layer_{layer}")[offset : offset + length]
        return out

    def __getstate__(self):  # DataLoader workers open their own handles
        return {**self.__dict__, "_handles": {}}


class CachedFeatureDataset(ExampleDataset):
    """Training examples with their features read from an offline cache instead of the target."""

    def __init__(self, examples: list[Example], cache: FeatureCache, layers: tuple[int, ...] = ()):
        super().__init__(examples)
        missing = [e for e in examples if e.key not in cache.where]
        if missing:
            raise DataError(
                f"{len(missing)} of {len(examples)} training examples are not in the feature cache {cache.folder} "
                f"(first: {missing[0].source}): it was made from other data, another data.max_length or another "
                f"chat template. Rerun `headstart features` for this recipe"
            )
        self.cache, self.layers = cache, tuple(layers)

    def __getitem__(self, i: int) -> dict:
        e = self.examples[i]
        return {**e.row(), **self.cache.read(e.key, self.layers)}


def training_dataset(examples: list[Example], features_dir: str | None, target: Target, layers=()) -> ExampleDataset:
    """The trainer's dataset: online features (no `features_dir`), or read from the checked cache."""
    if not features_dir:
        return ExampleDataset(examples)
    cache = FeatureCache(features_dir)
    cache.check(target, layers)
    return CachedFeatureDataset(examples, cache, layers)


def recipe_feature_layers(recipe, target: Target) -> list[int]:
    """`features.layers`, or the layers the recipe's head reads (from its options: nothing is built)."""
    if recipe.features.layers is not None:
        return list(recipe.features.layers)
    return list(heads.feature_layers(recipe.head.kind, target, **heads.recipe_options(recipe.head)))


def write_features(recipe, target: Target, progress: bool = True) -> dict:
    """`headstart features`: tokenise the recipe's training data and cache its features."""
    data = recipe.data
    if not data.features_dir:
        raise DataError("set data.features_dir to the folder the feature cache is written to")
    examples, data_stats = build_examples(
        target.tokenizer, data.train_files, data.max_length, data.limit,
        split=data.split, columns=data.columns, on_error=data.on_error,
    )
    info = {"train_files": data.train_files, "max_length": data.max_length, "limit": data.limit, "stats": data_stats}
    stats = write_feature_cache(
        target, examples, data.features_dir, recipe_feature_layers(recipe, target), recipe.features.dtype,
        recipe.features.batch_size, recipe.features.shard_mb, progress, info,
    )
    stats["data"] = data_stats
    return stats
