"""Learning-rate schedules at hand-computed steps, and AdamW's parameter groups."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tui_lab.core.config.lab_config import TrainConfig
from tui_lab.core.training.schedule import lr_at, make_optimizer, parameter_groups, set_lr


def cfg(**kw: object) -> TrainConfig:
    base: dict[str, object] = {"steps": 1000, "warmup_steps": 100, "lr": 1e-3, "min_lr_ratio": 0.1}
    base.update(kw)
    return TrainConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule", ["noam", "cosine", "linear", "constant"])
def test_every_schedule_warms_up_linearly_to_the_peak(schedule: str) -> None:
    t = cfg(schedule=schedule)
    assert lr_at(0, t) == 0.0
    assert lr_at(1, t) == pytest.approx(1e-5)  # 1/100 of the peak
    assert lr_at(50, t) == pytest.approx(5e-4)  # midpoint of warmup: half the peak
    assert lr_at(100, t) == pytest.approx(1e-3)  # peak is exactly train.lr
    assert max(lr_at(s, t) for s in range(0, 1001)) == pytest.approx(1e-3)


def test_noam_is_inverse_sqrt_normalised_to_the_peak() -> None:
    t = cfg(schedule="noam")
    assert lr_at(400, t) == pytest.approx(1e-3 / 2)  # 4 * warmup -> lr / 2
    assert lr_at(900, t) == pytest.approx(1e-3 / 3)  # 9 * warmup -> lr / 3
    # Same shape as the paper's d_model**-0.5 * min(s**-0.5, s * w**-1.5), rescaled.
    d, w = 512, 100
    paper = [d**-0.5 * min(s**-0.5, s * w**-1.5) for s in (10, 100, 400, 1000)]
    ours = [lr_at(s, t) for s in (10, 100, 400, 1000)]
    ratio = [o / p for o, p in zip(ours, paper, strict=True)]
    assert ratio == pytest.approx([ratio[0]] * 4)


def test_cosine_ends_at_min_ratio_and_is_halfway_at_the_middle() -> None:
    t = cfg(schedule="cosine")
    assert lr_at(1000, t) == pytest.approx(1e-4)  # lr * min_lr_ratio at train.steps
    # Halfway through the decay (step 550) cosine is at the mean of peak and floor.
    assert lr_at(550, t) == pytest.approx((1e-3 + 1e-4) / 2)
    assert lr_at(5000, t) == pytest.approx(1e-4)  # past the end: stays at the floor


def test_linear_decays_in_a_straight_line() -> None:
    t = cfg(schedule="linear", min_lr_ratio=0.0)
    assert lr_at(550, t) == pytest.approx(5e-4)
    assert lr_at(1000, t) == 0.0
    t = cfg(schedule="linear", min_lr_ratio=0.1)
    assert lr_at(1000, t) == pytest.approx(1e-4)


def test_constant_stays_at_the_peak() -> None:
    t = cfg(schedule="constant")
    assert lr_at(100, t) == lr_at(999, t) == lr_at(1000, t) == pytest.approx(1e-3)


@pytest.mark.parametrize("schedule", ["noam", "cosine", "linear", "constant"])
def test_no_warmup_starts_at_the_peak(schedule: str) -> None:
    t = cfg(schedule=schedule, warmup_steps=0)
    assert lr_at(1, t) == pytest.approx(1e-3)
    assert all(math.isfinite(lr_at(s, t)) for s in range(0, 1002))


def test_noam_without_warmup_is_lr_over_sqrt_step() -> None:
    t = cfg(schedule="noam", warmup_steps=0)
    assert lr_at(4, t) == pytest.approx(1e-3 / 2)


def test_warmup_longer_than_the_run_never_divides_by_zero() -> None:
    t = cfg(schedule="cosine", steps=10, warmup_steps=100)
    assert lr_at(10, t) == pytest.approx(1e-4)  # still warming up at the end
    assert math.isfinite(lr_at(200, t))


class Tied(nn.Module):
    """Embedding + LayerNorm + output head sharing the embedding matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 8)
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 12, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.proj(self.norm(self.embed(x))))


def test_optimizer_lists_each_parameter_once_with_decay_on_matrices_only() -> None:
    model = Tied()
    t = cfg(weight_decay=0.05, betas=(0.8, 0.9), eps=1e-7)
    opt = make_optimizer(model, t)
    params = [p for g in opt.param_groups for p in g["params"]]
    assert len(params) == len({id(p) for p in params}) == len(list(model.parameters()))
    groups = {g["name"]: g for g in opt.param_groups}
    assert groups["decay"]["weight_decay"] == 0.05
    assert groups["no_decay"]["weight_decay"] == 0.0
    assert {id(p) for p in groups["decay"]["params"]} == {
        id(model.embed.weight),
        id(model.proj.weight),
    }
    assert all(p.ndim == 1 for p in groups["no_decay"]["params"])
    assert len(groups["no_decay"]["params"]) == 3  # norm weight, norm bias, proj bias
    assert all(g["betas"] == (0.8, 0.9) and g["eps"] == 1e-7 for g in opt.param_groups)


def test_frozen_parameters_are_left_out() -> None:
    model = Tied()
    model.norm.requires_grad_(False)
    decay, no_decay = parameter_groups(model)
    assert len(no_decay) == 1  # only proj.bias


def test_set_lr_gives_every_group_the_rate_of_each_update() -> None:
    model = Tied()
    t = cfg(schedule="cosine", steps=30, warmup_steps=5)
    opt = make_optimizer(model, t)
    x = torch.tensor([[1, 2, 3]])
    for step in range(1, 31):
        rate = set_lr(opt, step, t)
        assert rate == pytest.approx(lr_at(step, t))
        assert [g["lr"] for g in opt.param_groups] == [rate, rate]
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        assert [g["lr"] for g in opt.param_groups] == [rate, rate]  # the step leaves it alone


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_no_warmup_still_ends_at_the_floor(schedule: str) -> None:
    t = cfg(schedule=schedule, warmup_steps=0)
    assert lr_at(1000, t) == pytest.approx(1e-4)
    assert lr_at(1, t) == lr_at(1, cfg(schedule=schedule, warmup_steps=1))


def test_decay_over_time_follows_the_clock_from_the_peak() -> None:
    # 1000 steps would take far longer than the 100 s budget: the clock decides.
    t = cfg(schedule="linear", min_lr_ratio=0.0, decay_over="time", max_seconds=100.0)
    # Warmup is by steps, as before, whatever the clock says.
    assert lr_at(50, t, elapsed=40.0) == pytest.approx(5e-4)
    # Step 100 is the peak at 10 s: the warmup took a tenth of the steps so far, 1 s of 10.
    assert lr_at(100, t, elapsed=10.0) == pytest.approx(1e-3)
    # Step 200 at 20 s: the warmup took 10 s (half the steps), so the decay is
    # (20 - 10) / (100 - 10) = 1/9 of the way down.
    assert lr_at(200, t, elapsed=20.0) == pytest.approx(1e-3 * (1 - 1 / 9))
    # At the budget the rate reaches the floor, and stays there.
    assert lr_at(300, t, elapsed=100.0) == pytest.approx(0.0)
    assert lr_at(310, t, elapsed=103.0) == pytest.approx(0.0)


def test_decay_over_time_still_ends_at_the_steps_when_they_come_first() -> None:
    t = cfg(schedule="cosine", decay_over="time", max_seconds=1e6)
    assert lr_at(550, t, elapsed=1.0) == pytest.approx((1e-3 + 1e-4) / 2)
    assert lr_at(1000, t, elapsed=2.0) == pytest.approx(1e-4)
    # The default clock is the steps: elapsed time changes nothing.
    assert lr_at(550, cfg(schedule="cosine", max_seconds=10.0), elapsed=9.0) == pytest.approx(5.5e-4)


def test_decay_over_time_needs_a_time_budget() -> None:
    from tui_lab.core.config.lab_config import ConfigError

    with pytest.raises(ConfigError, match="train.decay_over"):
        cfg(decay_over="time")
    with pytest.raises(ConfigError, match="train.decay_over"):
        cfg(decay_over="seconds", max_seconds=5.0)
