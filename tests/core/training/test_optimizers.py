"""train.optimizer: muon. Muon's update (the lab's, and torch.optim.Muon's) against
Newton-Schulz written here from its formula, the parameter groups by name, and a
resumed run that continues the uninterrupted one's losses (the momentum buffers
saved and restored)."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.config.lab_config import ConfigError, from_dict
from tui_lab.core.model.models import build_model
from tui_lab.core.training.distributed import data_rng
from tui_lab.core.training.muon import Muon
from tui_lab.core.training.optimizers import MuonAdamW, muon_groups
from tui_lab.core.training.schedule import make_optimizer, set_lr
from tui_lab.core.training.train import StepEvent, TrainingRun, open_run

# Keller Jordan's quintic coefficients, as Muon's post gives them.
A, B, C = 3.4445, -4.7750, 2.0315


def newton_schulz(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """X <- a X + (b X X^T + c (X X^T)^2) X, from X = G / ||G||_F, in float64,
    on the wide orientation (rows <= columns) as the iteration needs."""
    x = g.double()
    tall = x.size(0) > x.size(1)
    x = x.T if tall else x
    x = x / x.norm()
    for _ in range(steps):
        gram = x @ x.T
        x = A * x + (B * gram + C * gram @ gram) @ x
    return x.T if tall else x


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).detach().norm() / b.detach().norm())


@pytest.mark.parametrize(("make", "tolerance"), [
    (functools.partial(Muon, dtype=torch.float32), 1e-5),  # the lab's Muon where bf16 is slow
    (functools.partial(Muon, dtype=torch.bfloat16), 0.04),  # the lab's where it is fast
    (functools.partial(Muon, dtype=None), 0.04),  # the lab's, in the dtype it picks here
    (torch.optim.Muon, 0.04),  # torch's, always bfloat16
])
def test_newton_schulz_of_a_hand_made_gradient(make: Any, tolerance: float) -> None:
    """Muon on one 4 x 3 matrix, momentum 0, no decay: W <- W - lr * sqrt(4/3) * NS(G)."""
    g = torch.tensor([[2.0, -1.0, 0.5], [0.25, 1.5, -0.75], [1.0, 0.0, 1.0], [-0.5, 0.5, 2.5]])
    w = torch.nn.Parameter(torch.zeros(4, 3))
    opt = make([w], lr=0.1, momentum=0.0, weight_decay=0.0)
    w.grad = g
    opt.step()
    assert _relative(w.detach().double(), -0.1 * math.sqrt(4 / 3) * newton_schulz(g)) < tolerance


def _decoder(**model: object) -> torch.nn.Module:
    cfg = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0, **model},
                      task={"name": "char-lm", "block_size": 8})
    torch.manual_seed(0)
    return build_model(cfg.model, 11)


def test_groups_put_hidden_matrices_in_muon_and_embeddings_never() -> None:
    model = _decoder(tie_embeddings=False, positional="learned")
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {g: sorted(names[id(p)] for p in ps) for g, ps in muon_groups(model).items()}
    assert groups["embed"] == ["pos.weight", "tgt_embed.weight"]
    assert groups["head"] == ["lm_head.weight"]
    assert all(n.endswith((".bias", "norm1.weight", "norm2.weight", "norm.weight")) for n in groups["no_decay"])
    layer = "decoder.layers.0."
    assert groups["muon"] == sorted(layer + n for n in (
        "self_attn.w_q.weight", "self_attn.w_k.weight", "self_attn.w_v.weight", "self_attn.w_o.weight",
        "ff.lin1.weight", "ff.lin2.weight"))
    every = [n for ps in groups.values() for n in ps]
    assert sorted(every) == sorted(n for n, _ in model.named_parameters())  # each once


def test_a_tied_head_is_the_embedding_once() -> None:
    groups = muon_groups(_decoder(tie_embeddings=True))
    assert groups["head"] == [] and len(groups["embed"]) == 1


def test_muon_update_is_newton_schulz_of_the_gradient_and_embeddings_take_adam() -> None:
    model = _decoder()
    train = tiny_config(train={"optimizer": "muon", "muon_lr": 0.05, "lr": 0.01, "weight_decay": 0.0,
                               "muon_momentum": 0.0}).train
    opt = make_optimizer(model, train)
    assert isinstance(opt, MuonAdamW)
    set_lr(opt, 10**6, train.__class__(**{**train.__dict__, "schedule": "constant"}))
    w_up = model.decoder.layers[0].ff.lin1.weight  # (d_ff 64, d_model 32): tall
    embed = model.tgt_embed.weight
    g = torch.linspace(-1.0, 1.0, w_up.numel()).reshape(w_up.shape) ** 3 + 0.1 * torch.eye(64, 32)
    g_embed = torch.zeros_like(embed)
    g_embed[3, :4] = torch.tensor([0.5, -2.0, 1e-3, -1e-3])
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    w_up.grad, embed.grad = g.clone(), g_embed.clone()
    before_up, before_embed = w_up.detach().clone(), embed.detach().clone()
    opt.step()
    # Muon: momentum 0 leaves the gradient itself; the rate is scaled by sqrt(rows / cols).
    expected = -0.05 * math.sqrt(64 / 32) * newton_schulz(g)
    # bfloat16 (3 significant digits; the lab's Muon where this CPU multiplies it fast, as
    # torch's always) is 6% apart in Frobenius norm here, float32 much closer,
    # where four steps instead of five, or the gradient merely normalised, are 29% and more.
    assert _relative((w_up - before_up).double(), expected) < 0.08
    assert _relative(newton_schulz(g, 4), newton_schulz(g)) > 0.25
    assert _relative(g.double() / g.norm() * math.sqrt(32), newton_schulz(g)) > 0.25
    # The result is near-orthogonal: singular values near one, where G's spread widely.
    sv = torch.linalg.svdvals(newton_schulz(g))
    assert sv.min() > 0.5 and sv.max() < 1.3 and torch.linalg.svdvals(g).max() / torch.linalg.svdvals(g).min() > 5
    # AdamW's first step is lr * g / (|g| + eps): a sign step of the rows the batch touched.
    step = embed - before_embed
    assert torch.allclose(step[3, :4], -0.01 * torch.sign(g_embed[3, :4]), rtol=1e-4)
    assert step[[0, 1, 2, 4]].abs().max() == 0.0


def test_unknown_optimizer_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        from_dict({"train": {"optimizer": "sgd"}}, source="p.yaml")
    assert "train.optimizer" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="train.muon_lr"):
        from_dict({"train": {"muon_lr": -1.0}}, source="p.yaml")


def test_resumed_muon_run_gives_the_uninterrupted_runs_next_losses(tmp_path) -> None:
    cfg = tiny_config(train={"optimizer": "muon", "steps": 10, "eval_every": 100, "history": False})
    losses: dict[int, float] = {}

    def note(event: object) -> None:
        if isinstance(event, StepEvent):
            losses[event.step] = event.loss
            if event.step == 5:  # a resumed run draws a new stream of examples: this one too
                whole._rng = data_rng(cfg.train.seed, 0, 5)

    whole = TrainingRun(cfg, None, on_event=note)
    whole.run()
    first = TrainingRun(cfg, tmp_path / "run")
    first.on_event = lambda e: first.stop() if isinstance(e, StepEvent) and e.step == 5 else None
    assert first.run()["step"] == 5
    again: dict[int, float] = {}
    second = open_run(tmp_path / "run", device="cpu",
                      on_event=lambda e: isinstance(e, StepEvent) and again.__setitem__(e.step, e.loss))
    momentum = [s["momentum_buffer"] for s in second.optimizer.state.values() if "momentum_buffer" in s]
    assert momentum and all(bool(m.abs().sum() > 0) for m in momentum)  # restored, not fresh
    second.run()
    assert sorted(again) == [6, 7, 8, 9, 10]
    assert [again[s] for s in again] == pytest.approx([losses[s] for s in again], rel=1e-5)
