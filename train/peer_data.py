"""The recipe's training data for a peer trainer: vLLM's speculators (scripts/bench_peers.py, issue 36).

speculators' `prepare-data` renders conversations through a running vLLM server, unless every row
already holds `input_ids` and `loss_mask`; then it carries them through unchanged. headstart writes
those rows itself, from the very examples its own trainer trains on (train/data.py: the target's chat
template, the assistant-only mask, the recipe's `max_length`, the same held-out split), so the two
trainers see the same tokens and the same loss positions, and no server is needed to prepare them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from headstart.files import write_safetensors, write_text
from headstart.train.data import Example


def speculators_rows(examples: list[Example]) -> list[dict]:
    """One speculators pretokenized row per example: {"input_ids": [...], "loss_mask": [0/1, ...]}."""
    return [{"input_ids": list(map(int, e.input_ids)), "loss_mask": [int(bool(m)) for m in e.loss_mask]} for e in examples]


def write_speculators_data(examples: list[Example], path: str | Path) -> Path:
    """`speculators_rows(examples)` as JSON lines at `path` (written beside it and renamed into place),
    what `speculators prepare-data --data <path>` reads without a render endpoint."""
    if not examples:
        raise ValueError("no examples to write: the peer trainer needs at least one conversation")
    text = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in speculators_rows(examples))
    return write_text(path, text)


def speculators_layer_ids(num_layers: int) -> list[int]:
    """The hidden states speculators trains EAGLE-3 on, as vLLM's `eagle_aux_hidden_state_layer_ids` (the
    stream entering layer i; i = num_layers is the last layer's output before the final norm): its default
    [2, n // 2, n - 3] and the last layer, whose states give the verifier's logits (its launch_vllm.py)."""
    return [2, num_layers // 2, num_layers - 3, num_layers]


def write_speculators_hidden_states(target, rows: list[list[int]], folder: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
    """The files speculators' trainer reads: hs_<i>.safetensors for row i of its prepared dataset, whose token ids
    `rows` holds in that dataset's order (its prepare-data shuffles the rows it is given, and its trainer reads
    file i for dataset row i and drops every row whose file holds other tokens). Computed by headstart's target
    instead of vLLM's hidden-state connector: "hidden_states" (T, 4, D), the outputs of decoder layers i - 1 for
    i in `speculators_layer_ids`, and "token_ids" (T,). vLLM's ExampleHiddenStatesConnector, which speculators'
    data generation runs, copies through CUDA streams and pinned memory and fails on a CPU (docs/peers.md)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    layers = [i - 1 for i in speculators_layer_ids(target.num_layers)]  # output-of-layer ids
    for i, row in enumerate(rows):
        ids = torch.tensor([list(map(int, row))], dtype=torch.long, device=target.device)  # (1, T)
        out = target.forward(ids, feature_layers=layers)
        states = torch.stack([out.features[j][0] for j in layers], dim=1)  # (T, 4, D)
        write_safetensors(folder / f"hs_{i}.safetensors", {"hidden_states": states.to(dtype), "token_ids": ids[0]})
    return folder


def prepared_token_ids(folder: str | Path) -> list[list[int]]:
    """The token ids of each row of a dataset speculators' prepare-data saved (`datasets.save_to_disk`), in its order."""
    import datasets

    return [list(map(int, ids)) for ids in datasets.load_from_disk(str(folder))["input_ids"]]
