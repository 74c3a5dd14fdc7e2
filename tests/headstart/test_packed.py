"""oneDNN-packed Linear weights (headstart/packed.py): the same model, decoding still lossless, training untouched."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import AutoTokenizer

import headstart as hs
from headstart.cli import _target
from headstart.decode.plain import greedy_generate
from headstart.embedded import embedded_model_path
from headstart.packed import Int8Linear, PackedLinear, can_pack, can_quantize, quantize_linears, unpack_linears
from headstart.recipe import load_recipe
from tests.helpers import VOCAB, assert_close, perturbed_heads, perturbed_of, random_prompts, tiny_target

pytestmark = pytest.mark.skipif(not can_pack(nn.Linear(2, 2)), reason="PyTorch built without oneDNN")


def logits_of(target, ids):
    return target.logits(target(ids).hidden)  # (B, T, V)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_forwards_equal_the_stock_ones(arch, dtype):
    if dtype == torch.bfloat16 and not can_pack(nn.Linear(2, 2).to(dtype)):
        pytest.skip("oneDNN has no bf16 kernels for this CPU")
    target = tiny_target(arch)
    target.model.to(dtype)
    ids = torch.randint(0, VOCAB, (2, 13), generator=torch.Generator().manual_seed(0))
    before, state = logits_of(target, ids), {k: v.clone() for k, v in target.model.state_dict().items()}
    n = target.pack_linears()
    assert n == sum(1 for m in target.model.modules() if isinstance(m, nn.Linear)) and n > 0
    assert all(type(m) is PackedLinear for m in target.model.modules() if isinstance(m, nn.Linear))
    after = logits_of(target, ids)
    # another kernel sums in another order: equal up to rounding at the logits' scale (through D-long sums)
    assert_close(after, before, f"{arch} {dtype} packed logits", ulps=8 if dtype == torch.bfloat16 else 200)
    assert after.argmax(-1).eq(before.argmax(-1)).float().mean() > 0.9
    now = target.model.state_dict()  # the stored weights and the state dict are untouched
    assert now.keys() == state.keys() and all(torch.equal(now[k], state[k]) for k in state)
    assert unpack_linears(target.model) == n
    assert not any(type(m) is PackedLinear for m in target.model.modules())


def test_speculative_decoding_on_a_packed_target_is_lossless(arch):
    target = tiny_target(arch)
    target.pack_linears()
    prompts = torch.randint(0, VOCAB, (2, 11), generator=torch.Generator().manual_seed(3))
    ref = greedy_generate(target, prompts, max_new_tokens=30, eos_token_id=[])
    for tree in ("chain3", "tree8"):
        out = hs.SpeculativeGenerator(target, perturbed_heads(target), tree=tree).generate(prompts, 30, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences), (arch, tree)


def test_forwards_with_gradients_use_the_stored_weight():
    """Medusa-2 trains through the target: with gradients on, a packed Linear is the stock one, exactly."""
    target = tiny_target("llama")
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(1))
    target.model.requires_grad_(True)
    stock = target.forward_with_grad(ids).hidden
    target.pack_linears()
    packed = target.forward_with_grad(ids).hidden
    assert torch.equal(packed, stock)
    packed.sum().backward()
    grads = [m.weight.grad for m in target.base.modules() if type(m) is PackedLinear]  # the lm_head is not in `hidden`
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_a_weight_changed_after_packing_is_packed_again():
    """An adapter merged into a weight (an in-place change) is what the next no-grad forward reads."""
    target, reference = tiny_target("qwen2"), tiny_target("qwen2")
    target.pack_linears()
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(2))
    logits_of(target, ids)  # packed once, used
    with torch.no_grad():
        for model in (target.model, reference.model):
            model.model.layers[0].mlp.down_proj.weight.mul_(3.0)
            model.lm_head.weight.add_(0.5)
    assert_close(logits_of(target, ids), logits_of(reference, ids), "packed after an in-place change", ulps=200)


def test_the_cli_target_is_packed_on_cpu_unless_the_recipe_says_no(tmp_path):
    tiny_target("llama").model.save_pretrained(tmp_path / "m")
    AutoTokenizer.from_pretrained(embedded_model_path()).save_pretrained(tmp_path / "m")
    for flag, packed in (("true", True), ("false", False)):
        recipe = load_recipe(None, [f"target.name_or_path={tmp_path / 'm'}", "target.dtype=float32", f"target.pack_linears={flag}"])
        target = _target(recipe)
        assert any(type(m) is PackedLinear for m in target.model.modules()) is packed


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
def test_a_head_decoding_with_a_packed_target_is_packed_too_and_stays_lossless(kind):
    """The generator packs the head's Linears (inside a hybrid too) where the target's are packed;
    decoding stays lossless in float32 and the head's stored weights are untouched."""
    from headstart.decode.hybrid import HybridHead

    target = tiny_target("llama")
    head = perturbed_of(kind, target)
    state = {k: v.clone() for k, v in head.state_dict().items()}
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, max_new_tokens=24, eos_token_id=[])
    hs.SpeculativeGenerator(target, head)  # a stock target: the head stays stock
    assert not any(type(m) is PackedLinear for m in head.modules())
    target.pack_linears()
    for drafter in (head, HybridHead(head, 4)):
        out = hs.SpeculativeGenerator(target, drafter).generate(prompts, 24, eos_token_id=[])
        assert torch.equal(out.sequences, ref.sequences), (kind, type(drafter).__name__)
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    assert linears and all(type(m) is PackedLinear for m in linears)
    now = head.state_dict()
    assert now.keys() == state.keys() and all(torch.equal(now[k], state[k]) for k in state)


needs_int8 = pytest.mark.skipif(not can_quantize(nn.Linear(2, 2)), reason="PyTorch has no quantised CPU kernels (fbgemm) here")


@needs_int8
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_linears_are_the_float_product_to_int8s_rounding(dtype):
    """Int8Linear: the weight per output row, the input per tensor (7 bits): the product within int8's
    rounding of the float one, in the input's dtype; the stored weights untouched; with gradients the
    stock product, exactly; a weight changed in place is quantised again; `skip` keeps a Linear as it is."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.SiLU(), nn.Linear(96, 48, bias=False))
    model.add_module("fc", nn.Linear(48, 32))
    model.to(dtype)
    x = torch.randn(5, 64, dtype=dtype)
    with torch.no_grad():
        before = model(x)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert quantize_linears(model, skip=("fc",)) == 2
    assert [type(m) for m in (model[0], model[2], model.fc)] == [Int8Linear, Int8Linear, nn.Linear]
    with torch.no_grad():
        after = model(x)
    assert after.dtype == dtype
    err = (after.float() - before.float()).norm() / before.float().norm()
    assert 0 < err < 0.03, err  # int8 is not the float product, but within its rounding
    now = model.state_dict()
    assert now.keys() == state.keys() and all(torch.equal(now[k], state[k]) for k in state)
    stock = nn.Sequential(nn.Linear(64, 96), nn.SiLU(), nn.Linear(96, 48, bias=False), nn.Linear(48, 32)).to(dtype)
    stock.load_state_dict(dict(zip(stock.state_dict(), state.values())))
    assert torch.equal(model(x), stock(x))  # gradients on: the stored weights, exactly
    with torch.no_grad():
        model[2].weight.mul_(2.0)
        stock[2].weight.mul_(2.0)
        err = (model(x).float() - stock(x).float()).norm() / stock(x).float().norm()
    assert err < 0.03, err
    assert unpack_linears(model) == 2 and not any(type(m) is Int8Linear for m in model.modules())


@needs_int8
@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
def test_an_int8_draft_head_stays_lossless(kind):
    """`draft_int8`: the head's Linears (inside a hybrid too, the lean layer's fused products included)
    multiply in int8 but the one over the target's features (fc); the output is the target's own, in
    float32, with a packed target and a stock one; the head's stored weights are untouched."""
    from headstart.decode.contract import trait
    from headstart.decode.hybrid import HybridHead
    from headstart.eval.report import _tree_text

    target = tiny_target("llama")
    head = perturbed_of(kind, target)
    state = {k: v.clone() for k, v in head.state_dict().items()}
    prompts = random_prompts()
    ref = greedy_generate(target, prompts, max_new_tokens=24, eos_token_id=[])
    assert "draft_int8" not in hs.SpeculativeGenerator(target, head).tree_settings()
    for packed in (False, True):
        if packed:
            target.pack_linears()
        for drafter in (head, HybridHead(head, 4)):
            gen = hs.SpeculativeGenerator(target, drafter, draft_int8=True)
            out = gen.generate(prompts, 24, eos_token_id=[])
            assert torch.equal(out.sequences, ref.sequences), (kind, packed, type(drafter).__name__)
            assert gen.tree_settings()["draft_int8"] is True  # reported with every τ, and in eval's table
            assert "the head's products in int8" in _tree_text(gen.tree_settings())
    named = [(n, m) for n, m in head.named_modules() if isinstance(m, nn.Linear)]
    kept = trait(head, "feature_linears")
    assert named and all((type(m) is Int8Linear) != (n.rsplit(".", 1)[-1] in kept) for n, m in named)
    if kind == "eagle3":
        assert kept == ("fc",) and any(n == "fc" for n, _ in named)
        assert all(type(m) is Int8Linear for m in head._lean.parts().values())
    now = head.state_dict()
    assert now.keys() == state.keys() and all(torch.equal(now[k], state[k]) for k in state)
