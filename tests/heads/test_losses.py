"""Draft losses by name (heads/losses.py): hand-checked values, the old CE kept bit for bit, finite
gradients at the extremes, and a training run on the acceptance loss."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import transformers as tr

import headstart as hs
from headstart.errors import HeadstartError
from headstart.heads.losses import LOSSES, Objective, hard_draft_loss, soft_draft_loss
from headstart.recipe import load_recipe
from headstart.target import Target
from headstart.train.trainer import train
from tests.helpers import assert_close, recipe

P = torch.tensor([[0.5, 0.3, 0.2], [0.7, 0.1, 0.2]], dtype=torch.float64)
Q = torch.tensor([[0.2, 0.2, 0.6], [0.8, 0.1, 0.1]], dtype=torch.float64)


def soft(name: str, mix: float = 1.0, p: torch.Tensor = P, q: torch.Tensor = Q):
    return soft_draft_loss(q.log(), p, Objective(name, mix))


def test_soft_losses_match_a_hand_computation():
    alpha = [0.6, 0.9]
    ce = [-sum(p * math.log(q) for p, q in zip(P[r].tolist(), Q[r].tolist())) for r in range(2)]
    kl = [sum(p * math.log(p / q) for p, q in zip(P[r].tolist(), Q[r].tolist())) for r in range(2)]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    lam = math.exp(-3.0 * mean(alpha))
    expected = {
        "ce": mean(ce),
        "tv": mean([1 - a for a in alpha]),
        "lk": mean([-math.log(a) for a in alpha]),
        "lk_lambda": lam * mean(kl) + (1 - lam) * mean([1 - a for a in alpha]),
    }
    assert sorted(expected) == sorted(LOSSES)
    for name, value in expected.items():
        term = soft(name)
        assert_close(term.loss, torch.tensor(value, dtype=torch.float64), name)
        assert_close(term.ce, torch.tensor(mean(ce), dtype=torch.float64), f"{name}: the CE metric")
        assert_close(term.accept, torch.tensor(mean(alpha), dtype=torch.float64), f"{name}: the mean acceptance")
    mixed = soft("tv", mix=0.25).loss
    assert_close(mixed, torch.tensor(0.25 * expected["tv"] + 0.75 * expected["ce"], dtype=torch.float64), "0.25 tv + 0.75 ce")


def test_tv_is_half_the_l1_distance_and_zero_only_when_p_equals_q():
    g = torch.Generator().manual_seed(0)
    p = torch.randn(6, 50, generator=g).softmax(-1)
    q = torch.randn(6, 50, generator=g).softmax(-1)
    half_l1 = 0.5 * (p - q).abs().sum(-1).mean()
    assert_close(soft("tv", p=p, q=q).loss, half_l1, "1 - Σ min(p, q) = TV(p, q)")
    assert soft("tv", p=p, q=q).loss > 0.1
    assert soft("tv", p=p, q=p).loss.abs() < 1e-6  # p == q: nothing is ever rejected
    assert soft("lk", p=p, q=p).loss.abs() < 1e-6
    assert_close(soft("tv", p=p, q=p).accept, torch.tensor(1.0), "α of q = p")


def test_ce_is_the_old_formula_bit_for_bit():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(7, 40, generator=g, requires_grad=True)
    p = torch.randn(7, 40, generator=g).softmax(-1)
    logq = logits.log_softmax(-1)
    old = -(p * logq).sum(-1).mean()  # EAGLE's and EAGLE-3's line before heads/losses.py
    new = soft_draft_loss(logq, p).loss
    assert torch.equal(new, old)
    (grad_old,) = torch.autograd.grad(old, logits, retain_graph=True)
    (grad_new,) = torch.autograd.grad(new, logits)
    assert torch.equal(grad_new, grad_old)
    labels = torch.tensor([3, -1, 0, 39, 5, -1, 7])  # -1: outside the draft vocabulary
    old = F.cross_entropy(logits, labels, ignore_index=-1)  # Medusa's line before
    assert torch.equal(hard_draft_loss(logits, labels).loss, old)


def test_hard_losses_match_a_hand_computation():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 1.0], [3.0, 1.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([0, 2, -1])  # the third token is outside the draft vocabulary
    q = logits.softmax(-1)
    q_y = [q[0, 0].item(), q[1, 2].item()]
    ce = -(math.log(q_y[0]) + math.log(q_y[1])) / 2
    lam = math.exp(-3.0 * sum(q_y) / 2)
    tv = sum(1 - x for x in q_y) / 2
    expected = {"ce": ce, "lk": ce, "tv": tv, "lk_lambda": lam * ce + (1 - lam) * tv}
    for name, value in expected.items():
        term = hard_draft_loss(logits, labels, Objective(name))
        assert_close(term.loss, torch.tensor(value, dtype=torch.float64), name)
        # Acceptance counts the token outside the draft vocabulary as a sure rejection.
        assert_close(term.accept, torch.tensor(sum(q_y) / 3, dtype=torch.float64), f"{name}: mean acceptance")


@pytest.mark.parametrize("name", LOSSES)
def test_gradients_are_finite_for_one_hot_p_and_q(name):
    p = torch.eye(4)[[0, 1, 2]]  # (3, 4) one-hot targets
    logits = torch.full((3, 4), -1000.0)
    logits[0, 0] = logits[1, 3] = logits[2, 2] = 1000.0  # q one-hot too: equal, disjoint, equal
    logits.requires_grad_(True)
    for mix in (1.0, 0.5):
        term = soft_draft_loss(logits.log_softmax(-1), p, Objective(name, mix))
        (grad,) = torch.autograd.grad(term.loss, logits)
        assert torch.isfinite(term.loss) and torch.isfinite(grad).all(), (name, mix, term.loss, grad)
        term = hard_draft_loss(logits, torch.tensor([0, 1, 2]), Objective(name, mix))
        (grad,) = torch.autograd.grad(term.loss, logits)
        assert torch.isfinite(term.loss) and torch.isfinite(grad).all(), (name, mix, term.loss, grad)
    assert_close(soft_draft_loss(logits.log_softmax(-1), p).accept, torch.tensor(2 / 3), "α: two of three agree")


def test_lk_trains_from_a_cold_start_where_tv_does_not():
    """Where p and q barely overlap, TV's gradient vanishes and −log α's does not (why the paper has it)."""
    p = torch.tensor([[0.0, 0.0, 1.0]])
    logits = torch.tensor([[12.0, 12.0, 0.0]], requires_grad=True)  # q(2) ≈ 3e-6
    grads = {}
    for name in ("tv", "lk"):
        (grads[name],) = torch.autograd.grad(soft_draft_loss(logits.log_softmax(-1), p, Objective(name)).loss, logits)
    assert grads["tv"].abs().max() < 1e-4
    assert grads["lk"][0, 2] < -0.9  # −log α pushes up the target's token at full strength


def test_a_bad_loss_name_is_one_line_naming_the_choices():
    cfg = load_recipe(None, ["train.loss=kl"]).train
    with pytest.raises(HeadstartError) as err:
        Objective.from_config(cfg)
    message = str(err.value)
    assert "\n" not in message and "'kl'" in message and "ce, tv, lk, lk_lambda" in message
    with pytest.raises(HeadstartError, match="train.loss_mix"):
        load_recipe(None, ["train.loss_mix=1.5"])


@pytest.fixture
def smol_shaped_3_layers(smol_tokenizer):
    """A tiny random Llama over SmolLM2's tokenizer, with the three layers EAGLE-3 reads."""
    torch.manual_seed(0)
    config = tr.LlamaConfig(
        vocab_size=len(smol_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=smol_tokenizer.eos_token_id, pad_token_id=smol_tokenizer.pad_token_id,
    )
    return Target(tr.AutoModelForCausalLM.from_config(config), smol_tokenizer, name="tiny-smol-3")


def test_training_on_tv_moves_the_head_and_not_the_target(tmp_path, smol_shaped_3_layers):
    target = smol_shaped_3_layers
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    head = hs.heads.build("eagle3", target, draft_vocab=torch.arange(300))
    initial = {k: v.clone() for k, v in head.state_dict().items()}
    r = recipe(tmp_path, "head.kind=eagle3", "train.ttt_steps=2", "train.loss=tv", "train.max_steps=3", "train.save_steps=100")
    summary = train(r, target, head)
    assert summary.steps == 3
    moved = [k for k, v in head.state_dict().items() if not torch.equal(v, initial[k])]
    assert {"fc.weight", "lm_head.weight"} <= set(moved), moved
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    accept = summary.heldout["accept"]  # held-out Σ min(p, q) per training-time-test step
    assert len(accept) == 2 and all(0 < a < 1 for a in accept), accept


def test_weighted_hard_loss_is_the_weighted_mean_over_positions():
    torch.manual_seed(0)
    logits = torch.randn(6, 11)
    labels = torch.tensor([0, 3, -1, 7, 10, 2])  # one position outside the draft vocabulary
    plain = hard_draft_loss(logits, labels)
    ones = hard_draft_loss(logits, labels, weights=torch.ones(6))
    torch.testing.assert_close(ones.loss, plain.loss)
    # Zero weight on the first two positions: the loss is the CE of the others alone; metrics unweighted.
    w = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    half = hard_draft_loss(logits, labels, weights=w)
    torch.testing.assert_close(half.loss, torch.nn.functional.cross_entropy(logits[3:], labels[3:]))
    torch.testing.assert_close(half.ce, plain.ce)
    torch.testing.assert_close(half.accept, plain.accept)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_weighted_soft_loss_is_the_weighted_mean_over_positions(name):
    torch.manual_seed(0)
    p = torch.randn(5, 7, dtype=torch.float64).softmax(-1)
    logq = torch.randn(5, 7, dtype=torch.float64).log_softmax(-1)
    plain = soft_draft_loss(logq, p, Objective(name, 0.5))
    ones = soft_draft_loss(logq, p, Objective(name, 0.5), weights=torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(ones.loss, plain.loss)
    # Zero weight on the first two positions: the loss of the other three alone; the metrics unweighted.
    w = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    half = soft_draft_loss(logq, p, Objective(name, 0.5), weights=w)
    torch.testing.assert_close(half.loss, soft_draft_loss(logq[2:], p[2:], Objective(name, 0.5)).loss)
    torch.testing.assert_close(half.ce, plain.ce)
    torch.testing.assert_close(half.accept, plain.accept)
