import pytest
import torch

from headstart.decode.tree import tree_from_paths
from tests.helpers import ARCHS, assert_close, tiny_target


def sequential_logits(target, ids):
    """Reference: the stock model's own logits over a whole sequence."""
    return target.model(ids).logits[0]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tree_forward_matches_sequential_logits(arch, attn):
    target = tiny_target(arch, attn=attn)
    torch.manual_seed(1)
    prefix = torch.randint(0, 128, (1, 14))
    tree = tree_from_paths([(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)])
    n = tree.size + 1
    tokens = torch.randint(0, 128, (1, n))
    cache = target.new_cache()
    target(prefix, cache=cache)
    out = target.tree_forward(tokens, tree.visible, (14 + tree.depth)[None], cache, 14)
    tree_logits = target.logits(out.hidden[0])
    # Each node's logits must equal those of the plain sequence prefix + its root-to-node path.
    for i in range(n):
        path = [j for j in range(n) if tree.visible[i, j]]
        seq = torch.cat([prefix[0], tokens[0, path]])[None]
        ref = sequential_logits(target, seq)[-1]
        assert_close(tree_logits[i], ref, f"tree node {i} against its sequential prefix")


def test_target_is_frozen_and_reports_shapes(target):
    assert not any(p.requires_grad for p in target.model.parameters())
    assert not target.model.training
    d = target.describe()
    assert d["hidden_size"] == 32 and d["vocab_size"] == 128 and d["max_position_embeddings"] == 256


def test_feature_taps_equal_hidden_states(target):
    ids = torch.randint(0, 128, (2, 9))
    assert target.default_feature_layers() == [0, 1, 2]
    layers = [0, 1]  # HF reports the last layer's output after the final norm, so compare below it
    out = target(ids, feature_layers=layers)
    ref = target.model(ids, output_hidden_states=True).hidden_states
    for i in layers:
        assert_close(out.features[i], ref[i + 1], f"tapped layer {i}")
    # The last hidden state is after the final norm, the lm_head's input.
    assert_close(target.logits(out.hidden), target.model(ids).logits, "logits from the last hidden state")
    # Our taps are removed after the call (HF may keep hooks of its own).
    hooks_before = [len(layer._forward_hooks) for layer in target.layers]
    target(ids, feature_layers=layers)
    assert [len(layer._forward_hooks) for layer in target.layers] == hooks_before


@pytest.mark.parametrize("arch_name", ARCHS)
def test_embeddings_and_lm_head_exposed(arch_name):
    target = tiny_target(arch_name)
    assert target.embed_tokens.weight.shape == (128, 32)
    assert target.lm_head.weight.shape == (128, 32)


def test_softcapping_and_float_masks_are_the_targets():
    """One softcapping (the Target's; Gemma-3 caps at 30) and one additive mask for target and heads."""
    from headstart.target import float_mask

    gemma, llama = tiny_target("gemma3"), tiny_target("llama")
    logits = torch.tensor([-300.0, -3.0, 0.0, 3.0, 300.0])
    assert_close(gemma.softcap(logits), 30.0 * torch.tanh(logits / 30.0))
    assert gemma.softcap(logits).abs().max() <= 30.0 and torch.equal(llama.softcap(logits), logits)
    hidden = torch.randn(1, 2, gemma.hidden_size)
    assert_close(gemma.logits(hidden), gemma.softcap(gemma.lm_head(hidden)))

    allowed = torch.tensor([[True, False], [True, True]])
    low = torch.finfo(torch.bfloat16).min
    want = torch.tensor([[0.0, low], [0.0, 0.0]], dtype=torch.bfloat16)
    assert float_mask(allowed, torch.bfloat16).shape == (1, 1, 2, 2)
    assert torch.equal(float_mask(allowed, torch.bfloat16)[0, 0], want)
    assert float_mask(allowed.expand(3, 2, 2), torch.bfloat16).shape == (3, 1, 2, 2)  # one mask per row


def test_a_cpu_capped_below_bf16_decodes_in_float32(monkeypatch):
    """`dtype: auto` follows oneDNN's ISA cap: under ONEDNN_MAX_CPU_ISA=AVX2 bf16 is emulated, so float32
    (how an AVX512 machine runs the AVX2 path); the cap shows in the CPU kind the reports print."""
    from headstart.target import cpu_kind, native_bf16, resolve_dtype

    if torch.cuda.is_available():
        pytest.skip("a GPU is always native bf16")
    for var in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(var, raising=False)
    uncapped = native_bf16()
    assert "capped" not in cpu_kind()
    for cap in ("AVX2", "avx2", "AVX512_CORE"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert native_bf16() is False
        assert resolve_dtype("auto") is torch.float32
        assert f"capped: ONEDNN_MAX_CPU_ISA={cap}" in cpu_kind()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")  # a cap at or above bf16 changes nothing
    assert native_bf16() is uncapped
    assert resolve_dtype("auto") is (torch.bfloat16 if uncapped else torch.float32)


@pytest.mark.parametrize("dtype", ["", "bf16", "half"])
def test_an_unknown_dtype_is_a_clear_error_of_the_target(dtype, capsys, tmp_path):
    """A recipe's target.dtype that names no dtype is one error line from the CLI (a TargetError), not a traceback."""
    from headstart.cli import main
    from headstart.target import TargetError, resolve_dtype

    with pytest.raises(TargetError, match="target.dtype"):
        resolve_dtype(dtype)
    from tests.helpers import write_conversations

    write_conversations(tmp_path / "c.jsonl")
    (tmp_path / "recipe.yaml").write_text(f"target:\n  dtype: {dtype!r}\ndata:\n  train_files: [{tmp_path / 'c.jsonl'}]\n"
                                          f"train:\n  output_dir: {tmp_path / 'run'}\n")
    assert main(["train", str(tmp_path / "recipe.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: the target's dtype (target.dtype)" in err[0]
