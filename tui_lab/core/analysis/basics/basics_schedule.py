"""The tutorials' learning-rate picture: the config's schedule beside the Noam curve.

The rate a run uses at each update is ``training.schedule.lr_at`` (warmup,
then the config's decay); the tutorials' Noam rate for the same ``d_model``
and warmup is ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``: a linear
rise to ``(d_model * warmup)^-0.5`` at ``step == warmup``, then 1/sqrt(step).
The lab's own ``noam`` schedule has that shape, rescaled to peak at
``train.lr``; the two curves side by side show the difference of scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.training.schedule import lr_at

POINTS = 200  # steps sampled along the run for a chart


def noam_rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (steps from 1)."""
    s = max(step, 1)
    w = max(warmup, 1)
    return factor * d_model**-0.5 * min(s**-0.5, s * w**-1.5)


@dataclass(frozen=True)
class SchedulePicture:
    """The config's rate and the Noam rate at the same sampled steps."""

    schedule: str
    d_model: int
    warmup: int
    total: int  # train.steps
    steps: list[int]
    lr: list[float]  # lr_at(step, config.train)
    noam: list[float]  # noam_rate(step, d_model, warmup)
    by_time: bool  # decay_over: time (the curve drawn is the steps' one)

    @property
    def lr_peak(self) -> tuple[int, float]:
        """(step, rate) where the config's rate is highest (the first such step)."""
        i = max(range(len(self.lr)), key=lambda j: (self.lr[j], -j))
        return self.steps[i], self.lr[i]

    @property
    def noam_peak(self) -> tuple[int, float]:
        """(warmup, rate): where the Noam curve peaks and its height."""
        w = max(self.warmup, 1)
        return w, noam_rate(w, self.d_model, w)


def sample_steps(total: int, warmup: int, points: int = POINTS) -> list[int]:
    """About ``points`` steps from 1 to ``total``, evenly spread, the warmup's end included."""
    total = max(total, 1)
    n = min(points, total)
    steps = {1 + round(i * (total - 1) / max(n - 1, 1)) for i in range(n)}
    if 1 <= warmup <= total:
        steps.add(warmup)
    return sorted(steps)


def schedule_picture(config: LabConfig, points: int = POINTS) -> SchedulePicture:
    """The learning rate over ``config``'s run beside the Noam curve for its d_model and warmup."""
    train = config.train
    steps = sample_steps(train.steps, train.warmup_steps, points)
    return SchedulePicture(
        schedule=train.schedule,
        d_model=config.model.d_model,
        warmup=train.warmup_steps,
        total=train.steps,
        steps=steps,
        lr=[lr_at(s, train) for s in steps],
        noam=[noam_rate(s, config.model.d_model, train.warmup_steps) for s in steps],
        by_time=train.decay_over == "time" and bool(train.max_seconds),
    )
