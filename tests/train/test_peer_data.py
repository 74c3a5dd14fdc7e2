"""The recipe's data for vLLM's speculators trainer (train/peer_data.py): the rows its prepare-data passes
through without a server, and the hidden-state files its trainer reads."""

import json

import torch
from safetensors.torch import load_file

from headstart.config import DataConfig
from headstart.train.data import training_examples
from headstart.train.peer_data import (
    prepared_token_ids,
    speculators_layer_ids,
    write_speculators_data,
    write_speculators_hidden_states,
)
from tests.helpers import smol_target, write_conversations


def test_rows_are_the_trainers_own_examples_and_hidden_states_its_layers(tmp_path, smol_tokenizer):
    data = tmp_path / "c.jsonl"
    write_conversations(data, n=20)
    cfg = DataConfig(train_files=[str(data)], eval_size=2, max_length=64)
    trained, heldout, _ = training_examples(smol_tokenizer, cfg)
    path = write_speculators_data(trained, tmp_path / "rows.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == len(trained) == 18 and len(heldout) == 2  # the held-out examples are not in it
    assert [r["input_ids"] for r in rows] == [e.input_ids for e in trained]
    assert [r["loss_mask"] for r in rows] == [e.loss_mask for e in trained] and set(rows[0]) == {"input_ids", "loss_mask"}
    assert not list(tmp_path.glob(".rows.jsonl*"))  # written beside and renamed into place

    target = smol_target(smol_tokenizer, layers=6)
    assert speculators_layer_ids(6) == [2, 3, 3, 6] and speculators_layer_ids(30) == [2, 15, 27, 30]
    shuffled = [trained[1].input_ids, trained[0].input_ids]  # the order of speculators' prepared dataset, not ours
    folder = write_speculators_hidden_states(target, shuffled, tmp_path / "hs", dtype=torch.float32)
    for i, row in enumerate(shuffled):
        saved = load_file(folder / f"hs_{i}.safetensors")
        ids = torch.tensor([row])
        out = target.forward(ids, feature_layers=[1, 2, 5])
        assert torch.equal(saved["token_ids"], ids[0]) and saved["hidden_states"].shape == (len(row), 4, 32)
        for j, layer in enumerate([1, 2, 2, 5]):  # vLLM capture id i: the output of layer i - 1; the last: before the final norm
            assert torch.equal(saved["hidden_states"][:, j], out.features[layer][0])
        assert not torch.allclose(saved["hidden_states"][:, 3], out.hidden[0])  # the final norm is not applied


def test_the_prepared_datasets_order_is_read_back(tmp_path):
    """speculators' prepare-data shuffles the rows; its trainer pairs dataset row i with hs_<i>: the files follow the
    order its saved dataset holds (a dataset saved as prepare-data saves one, by the same library)."""
    import datasets

    rows = [{"input_ids": [5, 6, 7], "loss_mask": [0, 1, 1], "seq_len": 3}, {"input_ids": [9, 8], "loss_mask": [0, 1], "seq_len": 2}]
    datasets.Dataset.from_list(rows).shuffle(seed=0).save_to_disk(str(tmp_path / "data"))
    order = prepared_token_ids(tmp_path / "data")
    assert sorted(order) == [[5, 6, 7], [9, 8]] and order == [r["input_ids"] for r in datasets.load_from_disk(str(tmp_path / "data"))]
