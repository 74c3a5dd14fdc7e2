"""vLLM's speculators trainer (0.9.0) writes EAGLE-3 drafts with three normalisations headstart's own heads
leave off (norm_before_fc, norm_before_residual, norm_output: heads/eagle3.py NORMS); headstart imports them
and drafts as vLLM's EAGLE-3 layer computes them (vllm/model_executor/models/llama_eagle3.py)."""

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import headstart as hs
from headstart.heads.checkpoint import CheckpointError
from headstart.heads.export import detect_layout, export, import_heads
from tests.helpers import VOCAB, assert_close, tiny_target

D, N, LAYER_IDS = 32, 48, [1, 2, 3]  # hidden, draft vocabulary, vLLM capture ids (ours: outputs of layers 0, 1, 2)
DRAFT_IDS = torch.arange(0, 2 * N, 2)  # the target ids the draft ranks


def speculators_folder(folder, target, norms=(True, True, True), seed=0):
    """A draft as `speculators train` 0.9.0 saves it (its config.json keys, its tensor names, bf16), random weights."""
    before_fc, before_residual, output = norms
    g = torch.Generator().manual_seed(seed)
    cfg = target.config
    heads, kv, hd, inter = cfg.num_attention_heads, cfg.num_key_value_heads, D // cfg.num_attention_heads, cfg.intermediate_size

    def w(*shape, scale=0.2):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    def norm_weight(n):
        return (1 + 0.1 * torch.randn(n, generator=g)).to(torch.bfloat16)

    state = {
        "embed_tokens.weight": target.embed_tokens.weight.detach().to(torch.bfloat16),  # the verifier's, frozen
        "fc.weight": w(D, 3 * D),
        "layers.0.input_layernorm.weight": norm_weight(D),
        "layers.0.hidden_norm.weight": norm_weight(D),
        "layers.0.post_attention_layernorm.weight": norm_weight(D),
        "layers.0.self_attn.q_proj.weight": w(heads * hd, 2 * D),
        "layers.0.self_attn.k_proj.weight": w(kv * hd, 2 * D),
        "layers.0.self_attn.v_proj.weight": w(kv * hd, 2 * D),
        "layers.0.self_attn.o_proj.weight": w(D, heads * hd),
        "layers.0.mlp.gate_proj.weight": w(inter, D),
        "layers.0.mlp.up_proj.weight": w(inter, D),
        "layers.0.mlp.down_proj.weight": w(D, inter),
        "norm.weight": norm_weight(D),
        "lm_head.weight": w(N, D),
        "d2t": DRAFT_IDS - torch.arange(N),
        "t2d": torch.zeros(VOCAB, dtype=torch.bool).index_fill_(0, DRAFT_IDS, True),
    }
    if before_fc:
        state["input_norm.weight"] = norm_weight(3 * D)
    layer = {"model_type": "llama", "hidden_size": D, "intermediate_size": inter, "num_hidden_layers": 1,
             "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd, "hidden_act": "silu",
             "rms_norm_eps": cfg.rms_norm_eps, "max_position_embeddings": cfg.max_position_embeddings,
             "rope_parameters": dict(cfg.rope_parameters), "vocab_size": VOCAB, "layer_types": ["sliding_attention"],
             "sliding_window": 2048, "use_sliding_window": True, "tie_word_embeddings": False}
    config = {
        "architectures": ["Eagle3DraftModel"], "auto_map": {"": "config.Eagle3SpeculatorConfig"},
        "draft_vocab_size": N, "dtype": "bfloat16", "eagle_aux_hidden_state_layer_ids": LAYER_IDS,
        "embed_requires_grad": False, "fc_norm": False, "norm_before_fc": before_fc,
        "norm_before_residual": before_residual, "norm_output": output,
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy",
                                                     "speculative_tokens": 3, "verifier_accept_k": 1}],
                               "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": "tiny-llama"}},
        "speculators_model_type": "eagle3", "speculators_version": "0.9.0", "target_hidden_size": None,
        "tie_word_embeddings": False, "transformer_layer_config": layer,
    }
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(state, str(folder / "model.safetensors"))
    return {k: v.float() for k, v in state.items()}


def rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def vllm_step(w, features, token, norms, eps):
    """vLLM's EAGLE-3 layer for one token alone (its attention then reads only its own value), from the
    file's tensors and the target's embedding `w["embed"]` (the file's copy is the verifier's, rounded to
    bf16): (logits over the draft vocabulary, the hidden state passed to the next step)."""
    before_fc, before_residual, output = norms
    h = (rms(features, w["input_norm.weight"], eps) if before_fc else features) @ w["fc.weight"].T
    embed = rms(w["embed"][token], w["layers.0.input_layernorm.weight"], eps)
    normed = rms(h, w["layers.0.hidden_norm.weight"], eps)
    residual = normed if before_residual else h
    v = torch.cat([embed, normed], -1) @ w["layers.0.self_attn.v_proj.weight"].T  # (kv * hd,)
    groups = w["layers.0.self_attn.q_proj.weight"].shape[0] // v.shape[0]
    v = v.view(-1, 1, D // 4).expand(-1, groups, -1).reshape(-1)  # each KV head serves its group of query heads
    hidden = residual + v @ w["layers.0.self_attn.o_proj.weight"].T
    x = rms(hidden, w["layers.0.post_attention_layernorm.weight"], eps)
    mlp = (F.silu(x @ w["layers.0.mlp.gate_proj.weight"].T) * (x @ w["layers.0.mlp.up_proj.weight"].T)) @ w["layers.0.mlp.down_proj.weight"].T
    out = hidden + mlp
    final = rms(out, w["norm.weight"], eps)
    return final @ w["lm_head.weight"].T, final if output else out


@pytest.mark.parametrize("norms", [(True, True, True), (False, True, False), (True, False, True), (False, False, False)])
def test_a_speculators_draft_imports_and_drafts_as_vllm_computes_it(tmp_path, norms):
    target = tiny_target()
    w = speculators_folder(tmp_path / "spec", target, norms)
    w["embed"] = target.embed_tokens.weight.detach()
    assert detect_layout(tmp_path / "spec") == "speculators"
    head = import_heads(tmp_path / "spec", target).float()
    assert head.feature_layers == (0, 1, 2) and torch.equal(head.draft_ids, DRAFT_IDS)
    assert {k: v for k, v in head.options.items() if k.startswith("norm_")} == {
        k: True for k, on in zip(("norm_before_fc", "norm_before_residual", "norm_output"), norms) if on}
    eps = target.config.rms_norm_eps
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        features, token = torch.randn(3 * D, generator=g) * 2, int(torch.randint(VOCAB, (1,), generator=g))
        with torch.no_grad():
            out = head.step(head.input_features(features[None, None]), torch.tensor([[token]]), torch.tensor([[0]]), None)
            logits = head.draft_logits(out)[0, 0]
            lean = head.step(head.input_features(features[None, None]), torch.tensor([[token]]), torch.tensor([[0]]),
                             torch.ones(1, 1, dtype=torch.bool), head.new_cache())  # drafting's lean forward
        ref_logits, ref_out = vllm_step(w, features, token, norms, eps)
        assert_close(logits, ref_logits, "logits against vLLM's arithmetic")
        assert_close(out[0, 0], ref_out, "output against vLLM's arithmetic")
        assert_close(lean[0, 0], ref_out, "the lean forward's output against vLLM's arithmetic")


def test_an_imported_speculators_draft_saves_exports_and_decodes_losslessly(tmp_path):
    target = tiny_target()
    speculators_folder(tmp_path / "spec", target)
    head = import_heads(tmp_path / "spec", target).float()
    head.save_pretrained(tmp_path / "ours", target)
    ours = hs.load_heads(tmp_path / "ours", target=target)
    prompt = torch.tensor([[1, 5, 9, 3, 7, 2]])
    plain = target.model.generate(prompt, max_new_tokens=12, do_sample=False)
    runs = []
    for layout in ("speculators", "eagle3"):  # served as vLLM reads them: the fields and input_norm written
        folder = export(ours, target, tmp_path / layout, layout)
        config = json.loads((folder / "config.json").read_text())
        assert (config["norm_before_fc"], config["norm_before_residual"], config["norm_output"]) == (True, True, True)
        again = import_heads(folder, target)
        out = hs.SpeculativeGenerator(target, again, depth=3, top_k=2, total_tokens=6).generate(prompt, 12, eos_token_id=[])
        assert torch.equal(out.sequences, plain)
        runs.append(out.accepted_per_step)
    first = hs.SpeculativeGenerator(target, ours, depth=3, top_k=2, total_tokens=6).generate(prompt, 12, eos_token_id=[])
    assert runs == [first.accepted_per_step] * 2


def test_load_heads_points_a_speculators_folder_to_the_importer(tmp_path):
    target = tiny_target()
    speculators_folder(tmp_path / "spec", target)
    with pytest.raises(CheckpointError, match=r"not written by headstart \(it looks like another project's layout: .*import_heads"):
        hs.load_heads(tmp_path / "spec", target=target)


def test_a_speculators_draft_with_per_chunk_norms_is_refused(tmp_path):
    target = tiny_target()
    speculators_folder(tmp_path / "spec", target)
    config = json.loads((tmp_path / "spec" / "config.json").read_text())
    config["fc_norm"] = True
    (tmp_path / "spec" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"uses fc_norm=True \(.*\); headstart's EAGLE-3 layer has no such normalisation"):
        import_heads(tmp_path / "spec", target)
