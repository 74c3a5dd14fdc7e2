"""Exporting heads to serving layouts and importing other projects' checkpoints (heads/export.py)."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import headstart as hs
from headstart.cli import main
from headstart.decode.contract import DraftState
from headstart.decode.tree import HeldOutAccuracy, tree_from_paths
from headstart.files import MARKER
from headstart.heads.checkpoint import CheckpointError
from headstart.heads.export import ExportError, export, import_heads
from headstart.train.trainer import train
from tests.helpers import VOCAB, tiny_config, tiny_target
from tests.helpers import recipe as train_recipe

PATHS = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # a small tree, 3 deep


def randomised(heads, seed=1):
    """Trained-looking heads: every parameter random (blocks start at zero, which hides mistakes)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in heads.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return heads


def proposals(heads, hidden):
    state = DraftState(hidden=hidden, root=torch.zeros(hidden.shape[0], dtype=torch.long))
    return heads.propose(state, tree_from_paths(PATHS)).tokens


def files_topk(folder, hidden, need=2):
    """What vLLM's Medusa model computes from the exported files (its loader's rules, written out):
    x + SiLU(W x + b) per layer, the head's (or the one original) lm_head, token_map scatter."""
    config = json.loads((folder / "config.json").read_text())
    state = load_file(folder / "model.safetensors")
    ranked = []
    for h in range(config["num_heads"]):
        x = hidden
        for layer in range(config["num_hidden_layers"]):
            bias = state[f"blocks.{h}.layers.{layer}.bias"] if config["medusa_fc_bias"] else None
            x = x + F.silu(F.linear(x, state[f"blocks.{h}.layers.{layer}.weight"], bias))
        lm = state["lm_heads.0.weight" if config["original_lm_head"] else f"lm_heads.{h}.weight"]
        logits = F.linear(x, lm)
        if config["truncated_vocab_size"] < config["vocab_size"]:
            full = torch.full((*logits.shape[:-1], config["vocab_size"]), -torch.inf)
            full[..., state["token_map"]] = logits
            logits = full
        ranked.append(logits.topk(need, dim=-1).indices)
    return torch.stack(ranked, dim=1)  # (B, K, need)


def tree_tokens(ranked):
    tree = tree_from_paths(PATHS)
    return ranked[:, tree.depth[1:] - 1, tree.choice[1:]]


@pytest.fixture
def target():
    return tiny_target("llama")


DRAFT = torch.tensor([5, 3, 9, 100, 2, 7, 8, 11, 40, 41, 64, 65])


# ---- layout: the exact names a serving loader reads --------------------------------------------


def test_vllm_medusa_names_and_config(tmp_path, target):
    heads = randomised(hs.heads.build("medusa", target, num_heads=2, draft_vocab=DRAFT))
    out = export(heads, target, tmp_path / "vllm", "vllm-medusa")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "config.json", "model.safetensors"]
    config = json.loads((out / "config.json").read_text())
    assert sorted(config) == sorted([
        "architectures", "model_type", "hidden_size", "vocab_size", "num_heads", "num_hidden_layers",
        "max_paths", "topk", "truncated_vocab_size", "medusa_fc_bias", "original_lm_head",
        "max_position_embeddings", "base_model_name_or_path", "torch_dtype", "headstart",
    ])
    assert config["architectures"] == ["MedusaModel"] and config["model_type"] == "medusa"
    assert (config["hidden_size"], config["vocab_size"], config["num_heads"], config["num_hidden_layers"]) == (32, VOCAB, 2, 1)
    # vLLM 0.32 loads no token_map: the draft vocabulary is written as the full one
    assert config["truncated_vocab_size"] == VOCAB and config["medusa_fc_bias"] is True and config["original_lm_head"] is True
    assert config["max_position_embeddings"] == 256 and config["base_model_name_or_path"] == "tiny-llama"
    assert config["headstart"]["head"]["draft_vocab_size"] is None
    state = load_file(out / "model.safetensors")
    assert sorted(state) == sorted([
        "blocks.0.layers.0.weight", "blocks.0.layers.0.bias", "blocks.1.layers.0.weight", "blocks.1.layers.0.bias",
        "lm_heads.0.weight",
    ])
    assert torch.equal(state["lm_heads.0.weight"], target.lm_head.weight)  # the target's rows, all of them

    own = randomised(hs.heads.build("medusa", target, num_heads=2, num_layers=2, shared_lm_head=False))
    out = export(own, target, tmp_path / "own", "vllm-medusa", dtype=torch.bfloat16)
    config = json.loads((out / "config.json").read_text())
    assert config["original_lm_head"] is False and config["truncated_vocab_size"] == VOCAB and config["torch_dtype"] == "bfloat16"
    state = load_file(out / "model.safetensors")
    assert sorted(state) == sorted(
        [f"blocks.{h}.layers.{lay}.{p}" for h in range(2) for lay in range(2) for p in ("weight", "bias")]
        + ["lm_heads.0.weight", "lm_heads.1.weight"]
    )
    assert all(t.dtype == torch.bfloat16 for t in state.values())


def test_official_medusa_names(tmp_path, target):
    heads = randomised(hs.heads.build("medusa", target, num_heads=2, shared_lm_head=False))
    out = export(heads, None, tmp_path / "m", "medusa")  # own lm_heads: the target is not needed
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "config.json", "medusa_lm_head.pt", "medusa_lm_head.safetensors"]
    tensors = load_file(out / "medusa_lm_head.safetensors")
    assert sorted(tensors) == [
        "0.0.linear.bias", "0.0.linear.weight", "0.1.weight", "1.0.linear.bias", "1.0.linear.weight", "1.1.weight",
    ]
    config = json.loads((out / "config.json").read_text())
    assert (config["medusa_num_heads"], config["medusa_num_layers"], config["base_model_name_or_path"]) == (2, 1, "tiny-llama")
    # FasterDecoding's MedusaModel.from_pretrained reads medusa_lm_head.pt with torch.load into its
    # `medusa_head`: a ModuleList of Sequential(ResBlock (.linear), Linear(D, V, bias=False)) per head.
    pt = torch.load(out / "medusa_lm_head.pt", weights_only=True)
    assert sorted(pt) == sorted(tensors) and all(torch.equal(pt[k], tensors[k]) for k in tensors)
    medusa_head = torch.nn.ModuleList(
        [torch.nn.Sequential(ResBlock(32), torch.nn.Linear(32, VOCAB, bias=False)) for _ in range(2)]
    )
    medusa_head.load_state_dict(pt, strict=True)
    hidden = torch.randn(2, 32)
    ranked = torch.stack([h(hidden).topk(2, dim=-1).indices for h in medusa_head], dim=1)  # (B, K, 2)
    tree = tree_from_paths([[0], [1], [0, 0], [0, 1], [1, 0]])  # two heads deep
    ours = heads.propose(DraftState(hidden=hidden, root=torch.zeros(2, dtype=torch.long)), tree).tokens
    assert torch.equal(ranked[:, tree.depth[1:] - 1, tree.choice[1:]], ours)


class ResBlock(torch.nn.Module):
    """The shape of FasterDecoding/Medusa's residual block (x + SiLU(linear(x))), for its state dict names."""

    def __init__(self, d: int):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)

    def forward(self, x):
        return x + F.silu(self.linear(x))


# ---- round trips: identical proposals and outputs ----------------------------------------------


@pytest.mark.parametrize("layout,options", [
    ("vllm-medusa", dict(num_heads=3, num_layers=2)),
    ("vllm-medusa", dict(num_heads=3, shared_lm_head=False)),
    ("vllm-medusa", dict(num_heads=3)),
    ("medusa", dict(num_heads=3, shared_lm_head=False)),
    ("headstart", dict(num_heads=3, draft_vocab=DRAFT)),
])
def test_round_trip(tmp_path, target, layout, options):
    heads = randomised(hs.heads.build("medusa", target, **options))
    heads.held_out = HeldOutAccuracy([[0.5, 0.2], [0.3, 0.1], [0.2, 0.1]])
    out = export(heads, target, tmp_path / layout, layout)
    back = import_heads(out, target)  # layout detected from the files
    assert back.options == heads.options or layout == "medusa"
    assert back.held_out == heads.held_out or layout == "medusa"  # the official layout has no accuracy table
    assert set(back.state_dict()) == set(heads.state_dict())
    for name, value in heads.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name
    hidden = torch.randn(2, 32)
    assert torch.equal(proposals(back, hidden), proposals(heads, hidden))
    if layout == "vllm-medusa":  # what vLLM would compute from the files ranks the same tokens
        assert torch.equal(tree_tokens(files_topk(out, hidden)), proposals(heads, hidden))
    # Decoding with the imported head gives the same sequence and the same acceptance.
    prompt = torch.tensor([[1, 5, 9, 3, 7]])
    a = hs.SpeculativeGenerator(target, heads, tree=PATHS).generate(prompt, 10, eos_token_id=[])
    b = hs.SpeculativeGenerator(target, back, tree=PATHS).generate(prompt, 10, eos_token_id=[])
    assert torch.equal(a.sequences, b.sequences) and a.accepted_per_step == b.accepted_per_step


@pytest.mark.parametrize("shared", [True, False])
def test_vllm_medusa_draft_vocabulary_served_full(tmp_path, target, shared):
    """vLLM 0.32 loads no token_map, so a head with a draft vocabulary is written over the full
    vocabulary: the target's rows outside the draft (all of them for a shared lm_head). Importing
    the folder gives that served head, which ranks what vLLM ranks; where its best token lies in the
    draft vocabulary it proposes what the trained head proposes."""
    heads = randomised(hs.heads.build("medusa", target, num_heads=3, shared_lm_head=shared, draft_vocab=DRAFT))
    heads.held_out = HeldOutAccuracy([[0.5, 0.2], [0.3, 0.1], [0.2, 0.1]])
    out = export(heads, target, tmp_path / "vllm", "vllm-medusa")
    back = import_heads(out, target)
    assert back.options == {**heads.options, "draft_vocab_size": None}
    assert back.held_out is None  # measured over the draft vocabulary, which the served head no longer has
    for h in range(3):
        assert torch.equal(back.state_dict()[f"blocks.{h}.0.linear.weight"], heads.state_dict()[f"blocks.{h}.0.linear.weight"])
        if not shared:
            rows = back.state_dict()[f"lm_heads.{h}.weight"]
            outside = torch.ones(VOCAB, dtype=torch.bool)
            outside[DRAFT] = False
            assert torch.equal(rows[DRAFT], heads.state_dict()[f"lm_heads.{h}.weight"])
            assert torch.equal(rows[outside], target.lm_head.weight[outside])
    hidden = torch.randn(64, 32)
    assert torch.equal(proposals(back, hidden), tree_tokens(files_topk(out, hidden)))  # what vLLM ranks
    top = files_topk(out, hidden, need=1)[:, 0, 0]  # head 0's best token over the full vocabulary (B,)
    in_draft = torch.isin(top, DRAFT)
    assert 0 < int(in_draft.sum()) < len(top)  # both cases occur
    first = proposals(heads, hidden)[:, 0]  # the trained head's first proposal (head 0, top-1)
    assert torch.equal(first[in_draft], top[in_draft])


def official_files(folder, target, k=2, n_layers=1, with_lm_head=True, fmt="safetensors", seed=3, said_heads=None):
    """A FasterDecoding/Medusa head folder: config.json + medusa_lm_head.{safetensors,pt}."""
    torch.manual_seed(seed)
    d, v = target.hidden_size, target.vocab_size
    state = {}
    for h in range(k):
        for layer in range(n_layers):
            state[f"{h}.{layer}.linear.weight"] = torch.randn(d, d) * 0.3
            state[f"{h}.{layer}.linear.bias"] = torch.randn(d) * 0.3
        if with_lm_head:
            state[f"{h}.{n_layers}.weight"] = torch.randn(v, d)
    folder.mkdir()
    # MedusaConfig.save_pretrained's keys; uploaded configs may say fewer heads than the files hold
    config = {"medusa_num_heads": said_heads or k, "medusa_num_layers": n_layers, "base_model_name_or_path": "tiny-llama",
              "transformers_version": "4.34.0"}
    (folder / "config.json").write_text(json.dumps(config))
    if fmt == "safetensors":
        save_file(state, folder / "medusa_lm_head.safetensors")
    else:
        torch.save(state, folder / "medusa_lm_head.pt")
    return state


def official_ranked(state, target, hidden, k, n_layers, need=2):
    ranked = []
    for h in range(k):
        x = hidden
        for layer in range(n_layers):
            x = x + F.silu(F.linear(x, state[f"{h}.{layer}.linear.weight"], state[f"{h}.{layer}.linear.bias"]))
        lm = state.get(f"{h}.{n_layers}.weight", target.lm_head.weight)
        ranked.append(F.linear(x, lm).topk(need, dim=-1).indices)
    return torch.stack(ranked, dim=1)


@pytest.mark.parametrize("fmt,with_lm_head", [("safetensors", True), ("pt", True), ("pt", False)])
def test_import_official_medusa(tmp_path, target, fmt, with_lm_head):
    state = official_files(tmp_path / "m", target, k=3, with_lm_head=with_lm_head, fmt=fmt)
    heads = import_heads(tmp_path / "m", target)
    assert heads.options["shared_lm_head"] is (not with_lm_head)  # the legacy layout had no lm_head
    hidden = torch.randn(2, 32)
    assert torch.equal(proposals(heads, hidden), tree_tokens(official_ranked(state, target, hidden, 3, 1)))


def test_import_official_medusa_counts_heads_from_weights(tmp_path, target):
    """FasterDecoding's uploaded configs say medusa_num_heads 2 while medusa_lm_head.pt holds 5 heads
    (its loader overrides the config with 5): the heads are counted from the tensor names."""
    state = official_files(tmp_path / "m", target, k=5, fmt="pt", said_heads=2)
    with pytest.warns(UserWarning, match="says medusa_num_heads=2.*hold 5 heads of 1 layers"):
        heads = import_heads(tmp_path / "m", target)
    assert heads.options["num_heads"] == 5
    hidden = torch.randn(2, 32)
    ranked = official_ranked(state, target, hidden, 5, 1)
    assert torch.equal(proposals(heads, hidden), tree_tokens(ranked))
    state = {k: v for k, v in state.items() if not k.startswith("3.")}  # heads 0, 1, 2, 4: not a Medusa file
    torch.save(state, tmp_path / "m" / "medusa_lm_head.pt")
    with pytest.raises(CheckpointError, match=r"heads 0..K-1.*not a FasterDecoding/Medusa head file"):
        import_heads(tmp_path / "m", target)


# ---- bad input: clear errors, nothing half-written ---------------------------------------------


class NotATensor:
    pass


def test_unsafe_or_broken_files_are_refused(tmp_path, target):
    # A pickle with an arbitrary object: weights_only refuses it, and so do we.
    official_files(tmp_path / "pickle", target, fmt="pt")
    torch.save({"0.0.linear.weight": NotATensor()}, tmp_path / "pickle" / "medusa_lm_head.pt")
    with pytest.raises(CheckpointError, match="weights_only=True"):
        import_heads(tmp_path / "pickle", target)
    # A pickle under a safetensors name.
    official_files(tmp_path / "renamed", target, fmt="pt")
    (tmp_path / "renamed" / "medusa_lm_head.pt").rename(tmp_path / "renamed" / "medusa_lm_head.safetensors")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        import_heads(tmp_path / "renamed", target)
    # Truncated files, both formats.
    for fmt, name in (("pt", "medusa_lm_head.pt"), ("safetensors", "medusa_lm_head.safetensors")):
        folder = tmp_path / f"cut-{fmt}"
        official_files(folder, target, fmt=fmt)
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])
        with pytest.raises(CheckpointError, match="corrupt|truncated|weights_only"):
            import_heads(folder, target)
    heads = randomised(hs.heads.build("medusa", target, num_heads=2, draft_vocab=DRAFT))
    out = export(heads, target, tmp_path / "vllm", "vllm-medusa")
    data = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes(data[:-100])
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        import_heads(out, target)
    # Configs missing keys, or not JSON; a missing tensor.
    export(heads, target, out, "vllm-medusa")
    config = json.loads((out / "config.json").read_text())
    del config["num_heads"]
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"lacks the keys \['num_heads'\]"):
        import_heads(out, target, layout="vllm-medusa")
    (tmp_path / "m2").mkdir()
    (tmp_path / "m2" / "config.json").write_text('{"medusa_num_heads": 2}')
    with pytest.raises(CheckpointError, match="has neither medusa_lm_head.safetensors nor medusa_lm_head.pt"):
        import_heads(tmp_path / "m2", target)
    (tmp_path / "m2" / "config.json").write_text('{"medusa_num_heads": 2,')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        import_heads(tmp_path / "m2", target, layout="medusa")
    state = official_files(tmp_path / "short", target)
    del state["1.0.linear.bias"]
    save_file(state, tmp_path / "short" / "medusa_lm_head.safetensors")
    with pytest.raises(CheckpointError, match="'1.0.linear.bias' is missing"):
        import_heads(tmp_path / "short", target)
    # Another target's shapes.
    export(heads, target, tmp_path / "vllm2", "vllm-medusa")
    with pytest.raises(CheckpointError, match="was made for hidden size 32 and 128 tokens"):
        import_heads(tmp_path / "vllm2", _other_vocab_target())


def _other_vocab_target():
    import transformers as tr

    from headstart.target import Target

    config = tiny_config("llama")
    config.vocab_size = VOCAB * 2
    return Target(tr.AutoModelForCausalLM.from_config(config), None, name="tiny-llama")


def leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_export_refusals_write_nothing(tmp_path, target, monkeypatch):
    shared = randomised(hs.heads.build("medusa", target, num_heads=2, draft_vocab=DRAFT))
    with pytest.raises(ExportError, match="unknown export layout 'vllm'"):
        export(shared, target, tmp_path / "a", "vllm")
    with pytest.raises(ExportError, match="pass the target"):
        export(shared, None, tmp_path / "a", "vllm-medusa")
    with pytest.raises(ExportError, match="no draft vocabulary"):
        export(shared, target, tmp_path / "a", "medusa")
    with pytest.raises(CheckpointError, match="does not fit"):
        export(shared, _other_vocab_target(), tmp_path / "a", "vllm-medusa")
    # A layout that does not fit the head's kind (an EAGLE-3 head's folder, say).
    folder = shared.save_pretrained(tmp_path / "head", target)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, kind="eagle3")))
    with pytest.raises(ExportError, match="holds medusa heads, not heads of kind 'eagle3'.*: headstart"):
        export(folder, target, tmp_path / "a", "vllm-medusa")
    assert not (tmp_path / "a").exists() and leftovers(tmp_path) == []

    # A crash while writing leaves neither a partial folder nor temporary files, and an existing
    # export stays as it was.
    (folder / "config.json").write_text(json.dumps(config))
    good = export(folder, target, tmp_path / "a", "vllm-medusa")
    before = {p.name: p.read_bytes() for p in good.iterdir()}

    def crash(tensors, path, metadata=None):
        path.write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("headstart.files.save_file", crash)
    with pytest.raises(OSError, match="disk full"):
        export(folder, target, tmp_path / "a", "vllm-medusa")
    with pytest.raises(OSError, match="disk full"):
        export(folder, target, tmp_path / "b", "vllm-medusa")
    assert {p.name: p.read_bytes() for p in good.iterdir()} == before
    assert not (tmp_path / "b").exists() and leftovers(tmp_path) == []


def test_cli_export(tmp_path, target, smol_tokenizer, capsys):
    own = randomised(hs.heads.build("medusa", target, num_heads=3, shared_lm_head=False))
    own.save_pretrained(tmp_path / "own", target)
    # Own lm_heads: no target needed, so no recipe either.
    assert main(["export", "--head", str(tmp_path / "own"), "--layout", "vllm-medusa", "--out", str(tmp_path / "o1")]) == 0
    assert torch.equal(proposals(import_heads(tmp_path / "o1", target), torch.ones(1, 32)), proposals(own, torch.ones(1, 32)))
    # A shared lm_head: the recipe's target (a folder here) supplies its rows.
    target.model.save_pretrained(tmp_path / "target")
    smol_tokenizer.save_pretrained(tmp_path / "target")
    shared = randomised(hs.heads.build("medusa", target, num_heads=2, draft_vocab=DRAFT))
    shared.save_pretrained(tmp_path / "shared", target)
    argv = ["export", "--head", str(tmp_path / "shared"), "--layout", "vllm-medusa", "--out", str(tmp_path / "o2")]
    assert main([*argv, f"target.name_or_path={tmp_path / 'target'}", "target.dtype=float32"]) == 0
    assert torch.equal(load_file(tmp_path / "o2" / "model.safetensors")["lm_heads.0.weight"], target.lm_head.weight)  # all rows
    assert main(["export", "--head", str(tmp_path / "shared"), "--layout", "nope", "--out", str(tmp_path / "o3")]) == 2
    assert "unknown export layout 'nope'" in capsys.readouterr().err


# ---- EAGLE-3 ("eagle3", "speculators") and the official EAGLE-1 layout ------------------------

EAGLE3_LAYER = [
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    "input_layernorm.weight", "hidden_norm.weight", "post_attention_layernorm.weight",
]
EAGLE3_NAMES = {  # what each loader reads; no embed_tokens (the target's embedding is shared)
    "eagle3": ["fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"] + [f"midlayer.{n}" for n in EAGLE3_LAYER],
    "speculators": ["fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"] + [f"layers.0.{n}" for n in EAGLE3_LAYER],
}
LAYER_CONFIG = [
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "hidden_act", "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings",
    "vocab_size", "attention_bias", "mlp_bias", "tie_word_embeddings",
]
EAGLE3_CONFIG = {
    "eagle3": ["architectures", "model_type", *LAYER_CONFIG, "draft_vocab_size", "target_hidden_size",
               "norm_before_residual", "norm_before_fc", "norm_output", "eagle_aux_hidden_state_layer_ids", "eagle_config",
               "torch_dtype", "headstart"],
    "speculators": ["architectures", "speculators_model_type", "speculators_config", "transformer_layer_config",
                    "draft_vocab_size", "target_hidden_size", "norm_before_residual", "norm_before_fc", "fc_norm",
                    "norm_output", "eagle_aux_hidden_state_layer_ids", "tie_word_embeddings", "torch_dtype", "headstart"],
}
EAGLE_DRAFT = torch.arange(0, VOCAB, 2)


def deep_target(layers=5):
    """The tiny Llama with more layers (the conftest one has three)."""
    import transformers as tr

    from headstart.target import Target

    torch.manual_seed(0)
    config = tiny_config("llama")
    config.num_hidden_layers = layers
    return Target(tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32), None, name="tiny-llama")


def eagle3_head(target, feature_layers=None, seed=1):
    return randomised(hs.heads.build("eagle3", target, draft_vocab=EAGLE_DRAFT, feature_layers=feature_layers), seed).eval()


def same_decoding(target, a, b, new=12):
    prompt = torch.tensor([[1, 5, 9, 3, 7, 2]])
    x = hs.SpeculativeGenerator(target, a, depth=3, top_k=2, total_tokens=6).generate(prompt, new, eos_token_id=[])
    y = hs.SpeculativeGenerator(target, b, depth=3, top_k=2, total_tokens=6).generate(prompt, new, eos_token_id=[])
    return torch.equal(x.sequences, y.sequences) and x.accepted_per_step == y.accepted_per_step


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("layout", ["eagle3", "speculators"])
def test_eagle3_layout_names_config_and_round_trip(tmp_path, target, layout):
    target = deep_target()  # 5 layers: room for feature layers other than the default [0, 2, 4]
    head = eagle3_head(target, feature_layers=[1, 2, 4])
    out = export(head, target, tmp_path / layout, layout)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "config.json", "model.safetensors"]
    assert json.loads((out / MARKER).read_text())["files"] == ["config.json", "model.safetensors"]
    config = json.loads((out / "config.json").read_text())
    assert sorted(config) == sorted(EAGLE3_CONFIG[layout])
    state = load_file(out / "model.safetensors")
    assert sorted(state) == sorted(EAGLE3_NAMES[layout])
    assert state["d2t"].dtype == torch.int64 and state["t2d"].dtype == torch.bool
    assert torch.equal(torch.arange(64) + state["d2t"], EAGLE_DRAFT) and int(state["t2d"].sum()) == 64
    layer = config["transformer_layer_config"] if layout == "speculators" else config
    assert sorted(k for k in layer if k in LAYER_CONFIG) == sorted(LAYER_CONFIG)
    # The target's max_position_embeddings (256 here; LlamaConfig's default would be 2048).
    assert layer["max_position_embeddings"] == target.max_position_embeddings == 256
    assert (layer["num_hidden_layers"], layer["num_key_value_heads"], layer["head_dim"]) == (1, 2, 8)
    assert config["draft_vocab_size"] == 64 and config["target_hidden_size"] == 32 and config["norm_before_residual"] is False
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 3, 5]  # vLLM: ours + 1 (the stream entering the layer)
    if layout == "eagle3":
        assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["model_type"] == "llama"
        assert config["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [1, 2, 4], "use_aux_hidden_state": True}
        assert torch.equal(state["midlayer.self_attn.q_proj.weight"], head.midlayer.self_attn.q_proj.weight)
    else:
        assert config["speculators_model_type"] == "eagle3" and config["architectures"] == ["Eagle3Speculator"]
        spec = config["speculators_config"]
        assert spec["algorithm"] == "eagle3" and spec["default_proposal_method"] == "greedy"
        assert spec["proposal_methods"][0]["proposal_type"] == "greedy" and spec["proposal_methods"][0]["speculative_tokens"] >= 1
        assert spec["verifier"] == {"name_or_path": "tiny-llama", "architectures": ["LlamaForCausalLM"]}
    back = import_heads(out, target)  # layout detected from the files
    assert back.options == head.options and same_weights(back, head)
    assert same_decoding(target, head, back)
    # Without our own block (a file another trainer wrote), the engines' keys give the same head.
    del config["headstart"]
    (out / "config.json").write_text(json.dumps(config))
    again = import_heads(out, target, layout=layout)
    assert again.options["feature_layers"] == [1, 2, 4] and same_weights(again, head)


def test_aux_layer_ids_per_engine():
    from headstart.heads.layout_eagle3 import from_sglang_ids, sglang_aux_ids, vllm_aux_ids

    assert vllm_aux_ids([1, 15, 28]) == [2, 16, 29]  # vLLM's default capture for Llama-3.1-8B (32 layers)
    assert sglang_aux_ids([1, 15, 28]) == [1, 15, 28]  # SGLang adds 1 itself when the first id is 1
    assert sglang_aux_ids([3, 15, 28]) == [4, 16, 29]  # ... and takes other lists as capture indices
    for ours in ([1, 15, 28], [3, 15, 28], [2, 9, 20], [0, 1, 2]):
        assert from_sglang_ids(sglang_aux_ids(ours)) == ours


def test_import_official_eagle3_release(tmp_path, target):
    """The official EAGLE-3 files (e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): our names, a plain config."""
    head = eagle3_head(target, seed=4)
    out = export(head, target, tmp_path / "e3", "eagle3", dtype=torch.float16)
    config = json.loads((out / "config.json").read_text())
    official = {k: config[k] for k in ("architectures", "model_type", "hidden_size", "intermediate_size", "num_attention_heads",
                                        "num_key_value_heads", "num_hidden_layers", "rms_norm_eps", "vocab_size",
                                        "draft_vocab_size", "max_position_embeddings", "tie_word_embeddings")}
    official["eagle_config"] = config["eagle_config"]
    (out / "config.json").write_text(json.dumps(official))
    state = load_file(out / "model.safetensors")
    save_file({k: v for k, v in state.items() if k != "t2d"}, out / "model.safetensors")  # some releases lack t2d
    back = import_heads(out, target)
    assert back.options["feature_layers"] == head.options["feature_layers"]
    assert torch.equal(back.lm_head.weight, head.lm_head.weight.half().float()) and torch.equal(back.t2d, head.t2d)


def rope_target(theta=500000.0, layers=8):
    """A tiny Llama with Llama-3.1's RoPE base (500000) and 8 layers (the engines' default capture fits)."""
    import transformers as tr

    from headstart.target import Target

    torch.manual_seed(0)
    config = tiny_config("llama")
    config.num_hidden_layers = layers
    config.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    return Target(tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32), None, name="tiny-llama-3.1")


def official_eagle3(folder, head, fmt="bin", **config):
    """Files as EAGLE's traineagle3 writes them: its config.json (a LlamaConfig saying LlamaForCausalLM,
    with draft_vocab_size and no rope_theta) and the draft's state dict without the frozen embedding
    (fc, midlayer.*, norm, lm_head, d2t, t2d) in pytorch_model.bin (torch.save), as the releases ship it."""
    folder.mkdir()
    state = {k: v.clone() for k, v in head.state_dict().items()}
    base = dict(architectures=["LlamaForCausalLM"], bos_token_id=1, eos_token_id=2, hidden_act="silu", hidden_size=32,
                initializer_range=0.02, intermediate_size=64, max_position_embeddings=256, model_type="llama",
                num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, pad_token_id=0, rms_norm_eps=1e-6,
                tie_word_embeddings=False, torch_dtype="float16", transformers_version="4.28.1", use_cache=True,
                vocab_size=VOCAB, draft_vocab_size=int(head.lm_head.weight.shape[0]))
    (folder / "config.json").write_text(json.dumps({**base, **config}))
    if fmt == "bin":
        torch.save(state, folder / "pytorch_model.bin")
    else:
        save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    return state


def test_import_official_eagle3_bin_keeps_its_rope(tmp_path):
    """An official EAGLE-3 release for a Llama-3.1 target: pytorch_model.bin, a config saying
    LlamaForCausalLM without rope_theta. Detected as EAGLE-3 by its weights (not EAGLE-1), imported
    with its own RoPE (base 10000, as its authors trained and the engines serve it) and a warning
    that the target's differs; exported again, the config says base 10000."""
    from headstart.heads.export import detect_layout

    target = rope_target()
    head = eagle3_head(target, feature_layers=[1, 3, 4], seed=5)  # the engines' default capture for 8 layers
    official_eagle3(tmp_path / "e3", head)
    assert detect_layout(tmp_path / "e3") == "eagle3"
    with pytest.warns(UserWarning, match=r"RoPE \{'rope_type': 'default', 'rope_theta': 10000.0\} differs from the target's"):
        back = import_heads(tmp_path / "e3", target)
    assert back.options["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert back.draft_config.rope_parameters["rope_theta"] == 10000.0 and back.options["feature_layers"] == [1, 3, 4]
    assert same_weights(back, head)
    inv_freq = back.rotary.rotary.inv_freq
    assert torch.allclose(inv_freq, 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8))
    assert not torch.allclose(inv_freq, head.rotary.rotary.inv_freq)  # the same weights with the target's RoPE
    out = export(back, target, tmp_path / "served", "eagle3")
    served = json.loads((out / "config.json").read_text())
    assert served["rope_theta"] == 10000.0 and served["rope_scaling"] is None
    assert import_heads(out, target).options == back.options  # our own block keeps it
    # With a rope_theta equal to the target's, nothing is added and nothing is said.
    official_eagle3(tmp_path / "same", head, fmt="safetensors", rope_theta=500000.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = import_heads(tmp_path / "same", target)
    assert "rope_parameters" not in same.options and same_weights(same, head)
    # An EAGLE-1 file under the same kind of config stays EAGLE-1.
    e1 = randomised(hs.heads.build("eagle", target), seed=6).eval()
    official_eagle1(tmp_path / "e1", e1)
    assert detect_layout(tmp_path / "e1") == "eagle"


def test_eagle3_norm_variants(tmp_path, target):
    """SpecForge's EAGLE-3.1 per-chunk fc_norm (configs/qwen3-30B-A3B-eagle3.1.json) is refused with its
    meaning, never dropped, and so are tensors the head has no place for (fc_norm.{i}.weight); the other
    normalisations vLLM reads (norm_before_fc, norm_output, norm_before_residual) become the head's options
    (tests/heads/test_import_eagle_speculators.py checks their arithmetic)."""
    head = eagle3_head(target)
    out = export(head, target, tmp_path / "e3", "eagle3")
    config = json.loads((out / "config.json").read_text())
    del config["headstart"]
    for nested in (False, True):
        changed = json.loads(json.dumps(config))
        (changed["eagle_config"] if nested else changed)["fc_norm"] = True
        (out / "config.json").write_text(json.dumps(changed))
        with pytest.raises(CheckpointError, match=r"uses fc_norm=True \(.*\); headstart's EAGLE-3 layer has no such normalisation"):
            import_heads(out, target)
    changed = dict(config, norm_output=True, norm_before_residual=True)
    (out / "config.json").write_text(json.dumps(changed))
    assert {k for k, v in import_heads(out, target).options.items() if k.startswith("norm_") and v} == {"norm_output", "norm_before_residual"}
    (out / "config.json").write_text(json.dumps(dict(config, norm_before_fc=True)))
    with pytest.raises(CheckpointError, match=r"the tensor 'input_norm.weight' is missing"):
        import_heads(out, target)
    (out / "config.json").write_text(json.dumps(config))
    state = load_file(out / "model.safetensors")
    save_file({**state, **{f"fc_norm.{i}.weight": torch.ones(32) for i in range(3)}}, out / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"no place for: \['fc_norm.0.weight', 'fc_norm.1.weight', 'fc_norm.2.weight'\]"):
        import_heads(out, target)
    spec = export(head, target, tmp_path / "spec", "speculators")
    config = json.loads((spec / "config.json").read_text())
    del config["norm_before_residual"]  # absent means true in vLLM's speculators reader
    (spec / "config.json").write_text(json.dumps(config))
    assert import_heads(spec, target).options.get("norm_before_residual") is True


def official_eagle1(folder, head, fmt="bin", names=None):
    """yuhuili/EAGLE-style files of an EagleHead: a one-layer LlamaConfig and fc.*, layers.0.*, embed_tokens."""
    state = {k.replace("layer.", "layers.0.", 1) if k.startswith("layer.") else k: v.clone()
             for k, v in head.state_dict().items() if k != "draft_ids"}
    state["embed_tokens.weight"] = torch.randn(VOCAB, 32)  # ignored: the target's embedding is used
    if names is not None:
        state = names(state)
    folder.mkdir()
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32, intermediate_size=64,
                  num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, vocab_size=VOCAB,
                  max_position_embeddings=256, bias=True)
    (folder / "config.json").write_text(json.dumps(config))
    if fmt == "bin":
        torch.save(state, folder / "pytorch_model.bin")
    else:
        save_file(state, folder / "model.safetensors")


@pytest.mark.parametrize("fmt", ["bin", "safetensors"])
def test_import_official_eagle1(tmp_path, target, fmt):
    head = randomised(hs.heads.build("eagle", target), seed=6).eval()
    official_eagle1(tmp_path / "e1", head, fmt)
    back = import_heads(tmp_path / "e1", target)  # detected: a one-layer config and its weights
    assert same_weights(back, head) and back.options == head.options
    assert same_decoding(target, head, back)


def test_import_eagle1_other_architecture(tmp_path):
    qwen = tiny_target("qwen2")  # its layer class has q/k/v biases: names fit when the file has them
    head = randomised(hs.heads.build("eagle", qwen), seed=7).eval()
    official_eagle1(tmp_path / "fits", head)
    assert same_weights(import_heads(tmp_path / "fits", qwen, layout="eagle"), head)
    official_eagle1(tmp_path / "llama-names", head, names=lambda s: {k: v for k, v in s.items() if not k.endswith("_proj.bias")})
    with pytest.raises(CheckpointError, match=r"does not fit the 'qwen2' target's own layer class.*missing \['layers.0.self_attn.k_proj.bias'"):
        import_heads(tmp_path / "llama-names", qwen, layout="eagle")


def test_eagle_bad_input_and_refusals(tmp_path, target):
    head = eagle3_head(target)
    out = export(head, target, tmp_path / "e3", "eagle3")
    data = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        import_heads(out, target)
    torch.save(head.state_dict(), out / "model.safetensors")  # a pickle where safetensors is expected
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        import_heads(out, target)
    state = {k: v for k, v in head.state_dict().items() if k != "midlayer.mlp.up_proj.weight"}
    save_file({k: v.contiguous() for k, v in state.items()}, out / "model.safetensors")
    with pytest.raises(CheckpointError, match="'midlayer.mlp.up_proj.weight' is missing"):
        import_heads(out, target)
    # EAGLE-1: a pickle holding objects is refused by weights_only; a truncated file too.
    e1 = randomised(hs.heads.build("eagle", target)).eval()
    official_eagle1(tmp_path / "e1", e1)
    torch.save({"fc.weight": NotATensor()}, tmp_path / "e1" / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="weights_only=True"):
        import_heads(tmp_path / "e1", target, layout="eagle")
    official_eagle1(tmp_path / "e1cut", e1)
    data = (tmp_path / "e1cut" / "pytorch_model.bin").read_bytes()
    (tmp_path / "e1cut" / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="weights_only=True"):
        import_heads(tmp_path / "e1cut", target, layout="eagle")
    # Export refusals write nothing: no target; a head folder missing a tensor; another max_position_embeddings.
    before = leftovers(tmp_path)
    with pytest.raises(ExportError, match="needs the target"):
        export(head, None, tmp_path / "x", "eagle3")
    folder = head.save_pretrained(tmp_path / "head", target)
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="does not match the SHA-256"):  # config.json knew the old file
        export(folder, target, tmp_path / "x", "speculators")
    config = json.loads((folder / "config.json").read_text())
    del config["sha256"]  # as a head saved before checksums were recorded
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ExportError, match="up_proj.weight.*nothing was written"):
        export(folder, target, tmp_path / "x", "speculators")
    good = head.save_pretrained(tmp_path / "good", target)  # records max_position_embeddings 256
    with pytest.raises(ExportError, match="max_position_embeddings=256.*4096"):
        export(good, _other_max_positions_target(), tmp_path / "x", "eagle3")
    assert not (tmp_path / "x").exists() and leftovers(tmp_path) == before


def _other_max_positions_target():
    import transformers as tr

    from headstart.target import Target

    config = tiny_config("llama")
    config.max_position_embeddings = 4096
    return Target(tr.AutoModelForCausalLM.from_config(config), None, name="tiny-llama")


def test_cli_export_eagle3(tmp_path, target, smol_tokenizer):
    target.model.save_pretrained(tmp_path / "target")
    smol_tokenizer.save_pretrained(tmp_path / "target")
    head = eagle3_head(target)
    head.save_pretrained(tmp_path / "head", target)
    for layout in ("eagle3", "speculators"):
        argv = ["export", "--head", str(tmp_path / "head"), "--layout", layout, "--out", str(tmp_path / layout)]
        assert main([*argv, f"target.name_or_path={tmp_path / 'target'}", "target.dtype=float32"]) == 0
        assert same_weights(import_heads(tmp_path / layout, target, layout=layout), head)


# ---- the output folder: nothing the user owns is replaced --------------------------------------


def snapshot(folder):
    """Every file under `folder` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_never_replaces_what_the_user_owns(tmp_path, smol_shaped_target):  # noqa: F811
    # A real training run: runs/x/final, checkpoint-1, checkpoint-2 and train_summary.json.
    run = tmp_path / "runs" / "x"
    summary = train(train_recipe(tmp_path, "train.max_steps=2", "train.save_steps=1", f"train.output_dir={run}"),
                    smol_shaped_target)
    final = Path(summary.final)
    assert {"final", "checkpoint-1", "checkpoint-2", "train_summary.json"} <= {p.name for p in run.iterdir()}
    before = snapshot(run)
    # --out runs/x for --head runs/x/final: the folder holds the head being exported, even with force.
    for force in (False, True):
        with pytest.raises(ExportError, match=r"holds .*final, which would be deleted with it"):
            export(final, None, run, force=force)
    # A folder holding a run's checkpoints, a train_summary.json or a head's own config.json: never.
    module = hs.load_heads(final, target=smol_shaped_target)
    with pytest.raises(ExportError, match=r"output of a training run \(.*checkpoint-1\).*even with force"):
        export(module, smol_shaped_target, tmp_path / "runs", "vllm-medusa", force=True)
    with pytest.raises(ExportError, match=r"output of a training run \(.*checkpoint-1/config.json\)"):
        export(final, smol_shaped_target, run / "checkpoint-1", "vllm-medusa", force=True)
    (tmp_path / "summary-only").mkdir()
    (tmp_path / "summary-only" / "train_summary.json").write_text("{}")
    with pytest.raises(ExportError, match=r"output of a training run \(.*train_summary.json\)"):
        export(final, None, tmp_path / "summary-only", force=True)
    assert snapshot(run) == before and leftovers(run) == [] and leftovers(tmp_path / "runs") == []

    # A folder of the user's notes: refused without force (what to do is in the message), replaced with it.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("my notes")
    with pytest.raises(ExportError, match=r"not empty \(todo.md\).*pass force=True \(--force\)"):
        export(final, None, notes)
    assert (notes / "todo.md").read_text() == "my notes"
    export(final, None, notes, force=True)
    assert not (notes / "todo.md").exists() and (notes / "config.json").is_file()
    # An earlier export is replaced without force; once the user adds a file to it, it is theirs again.
    out = export(final, smol_shaped_target, tmp_path / "vllm", "vllm-medusa")
    export(final, smol_shaped_target, out, "vllm-medusa")
    (out / "README.md").write_text("served on host 3")
    with pytest.raises(ExportError, match=r"not empty \(\.headstart-export\.json, README.md"):
        export(final, smol_shaped_target, out, "vllm-medusa")
    assert (out / "README.md").read_text() == "served on host 3"
    # An empty folder is fine; a file is never replaced.
    (tmp_path / "empty").mkdir()
    assert (export(final, None, tmp_path / "empty") / "model.safetensors").is_file()
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ExportError, match="is a file, not a folder"):
        export(final, None, tmp_path / "a-file", force=True)
    # The command line says the same in one line.
    assert main(["export", "--head", str(final), "--layout", "headstart", "--out", str(run)]) == 2
    assert snapshot(run) == before


def test_exports_follow_the_umask(tmp_path, target):
    """Files 0644 and folders 0755 under umask 022 (mkdtemp would give 0700), 0640/0750 under 027."""
    import os
    import stat

    medusa = randomised(hs.heads.build("medusa", target, num_heads=2, shared_lm_head=False))
    eagle3 = eagle3_head(target)
    old = os.umask(0o022)
    try:
        for umask, dmode, fmode in ((0o022, 0o755, 0o644), (0o027, 0o750, 0o640)):
            os.umask(umask)
            base = tmp_path / f"u{umask:o}"
            written = [
                medusa.save_pretrained(base / "head", target),
                export(medusa, target, base / "headstart", "headstart"),
                export(medusa, target, base / "vllm", "vllm-medusa"),
                export(medusa, target, base / "medusa", "medusa"),
                export(eagle3, target, base / "eagle3", "eagle3"),
                export(eagle3, target, base / "speculators", "speculators"),
            ]
            export(medusa, target, base / "vllm", "vllm-medusa")  # replacing keeps the modes too
            for folder in [base, *written]:
                assert stat.S_IMODE(folder.stat().st_mode) == dmode, folder
                for f in folder.iterdir():
                    if f.is_file():
                        assert stat.S_IMODE(f.stat().st_mode) == fmode, f
    finally:
        os.umask(old)


# ---- EAGLE-3 feature layers: three distinct layers, ascending --------------------------------


def test_feature_layers_must_be_sorted_unique_and_in_range(tmp_path):
    from headstart.heads.options import HeadOptionsError

    target = deep_target()
    for layers, why in (([1, 2, 2], "listed twice"), ([4, 2, 1], "not in ascending order"),
                        ([1, 2, 5], r"\[5\] outside the target's layers 0..4"), ([1, 2], "2 layers instead of three")):
        with pytest.raises(HeadOptionsError, match=why):
            hs.heads.build("eagle3", target, feature_layers=layers)
    head = eagle3_head(target, feature_layers=[1, 2, 4])
    folder = head.save_pretrained(tmp_path / "h", target)
    config = json.loads((folder / "config.json").read_text())
    for layers, why in (([2, 1, 4], "not in ascending order"), ([1, 1, 4], "listed twice")):
        config["head"]["feature_layers"] = layers
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(HeadOptionsError, match=rf"h/config.json: EAGLE-3 reads three target layers.*{why}"):
            hs.load_heads(folder, target=target)
        with pytest.raises(HeadOptionsError, match=why):
            export(folder, target, tmp_path / "out", "eagle3")
        assert not (tmp_path / "out").exists()
    # A vLLM-layout file whose capture list is unsorted (written by another tool): refused on import.
    out = export(head, target, tmp_path / "vllm", "eagle3")
    exported = json.loads((out / "config.json").read_text())
    del exported["headstart"]
    exported["eagle_aux_hidden_state_layer_ids"] = [5, 3, 2]
    exported["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [4, 2, 1]
    (out / "config.json").write_text(json.dumps(exported))
    with pytest.raises(HeadOptionsError, match="not in ascending order"):
        import_heads(out, target, layout="eagle3")
