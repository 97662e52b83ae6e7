"""Learning-rate schedules and the optimizer they drive (AdamW, or Muon with AdamW).

Every schedule warms up linearly over ``train.warmup_steps`` to ``train.lr``,
then follows ``train.schedule``:

- ``noam``: inverse square-root decay, ``lr * sqrt(warmup / step)``. This is
  the shape of "Attention Is All You Need" (``d_model**-0.5 * min(step**-0.5,
  step * warmup**-1.5)``) rescaled so its peak, reached at ``step == warmup``,
  is exactly ``train.lr`` instead of depending on ``d_model``.
- ``cosine``: half a cosine from ``lr`` down to ``lr * min_lr_ratio`` at
  ``train.steps``.
- ``linear``: a straight line from ``lr`` down to ``lr * min_lr_ratio`` at
  ``train.steps``.
- ``constant``: ``lr`` for the rest of the run.

With ``train.decay_over: time`` the cosine or linear decay runs over the
time budget instead: its progress is the larger of the steps' and the
elapsed seconds' fraction of ``max_seconds``, so a run that a time limit
ends still anneals to the floor (the steps alone would leave it at its
peak). The rate then depends on the machine's speed, as the run's length does.

Steps count optimizer updates from 1: ``lr_at(1, train)`` is the rate of the
first update, ``lr_at(train.steps, train)`` the rate of the last; the training
loop calls ``set_lr`` before every update. With
``warmup_steps == 0`` the first update already runs at the peak, and the
decay ends at ``train.steps`` either way.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tui_lab.core.config.lab_config import TrainConfig
from tui_lab.core.training.optimizers import make_adamw, make_muon_adamw


def lr_multiplier(step: int, train: TrainConfig, elapsed: float = 0.0) -> float:
    """Fraction of ``train.lr`` used for update number ``step`` (counted from 1).

    ``elapsed``: training seconds before this update (used by ``decay_over: time``).
    """
    s = max(int(step), 0)
    warmup = train.warmup_steps
    if s < warmup:
        return s / warmup  # linear warmup: 1/warmup, 2/warmup, ... reaching 1 at s == warmup
    if train.schedule == "constant":
        return 1.0
    # The peak is update ``warmup`` (update 1 when there is no warmup, since
    # updates count from 1): warmup_steps 0 and 1 give the same schedule.
    peak = max(warmup, 1)
    if train.schedule == "noam":
        # Normalised Noam: 1 at the peak, halving for every 4x more steps.
        return math.sqrt(peak / max(s, 1))
    # cosine and linear decay over the updates from the peak to train.steps.
    span = max(train.steps - peak, 1)
    progress = min(max((s - peak) / span, 0.0), 1.0)
    if train.decay_over == "time" and train.max_seconds:
        # The decay starts at the peak by time too: the warmup's share of the
        # elapsed time is taken as its share of the steps (a steady speed).
        warm = elapsed * peak / s
        by_time = (elapsed - warm) / max(train.max_seconds - warm, 1e-9)
        progress = max(progress, min(max(by_time, 0.0), 1.0))
    floor = train.min_lr_ratio
    if train.schedule == "cosine":
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if train.schedule == "linear":
        return floor + (1.0 - floor) * (1.0 - progress)
    raise ValueError(f"train.schedule: unknown schedule {train.schedule!r}")


def lr_at(step: int, train: TrainConfig, elapsed: float = 0.0) -> float:
    """Learning rate of update number ``step`` (counted from 1)."""
    return train.lr * lr_multiplier(step, train, elapsed)


def set_lr(optimizer: torch.optim.Optimizer, step: int, train: TrainConfig, elapsed: float = 0.0) -> float:
    """Set every param group's rate for update number ``step``; returns that rate.

    Called before each update (as nanoGPT's ``get_lr``): the rate is a pure
    function of the step, so a resumed run needs no scheduler state to pick
    up where it left off, and an edited ``train.lr`` or ``train.steps``
    applies from the next update.
    """
    rate = lr_at(step, train, elapsed)
    for group in optimizer.param_groups:
        # Muon's group runs at muon_lr: its lr_scale is muon_lr / lr (optimizers.py).
        group["lr"] = rate * group.get("lr_scale", 1.0)
    return rate


def parameter_groups(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """Split trainable parameters into (decayed, not decayed), each listed once.

    Matrices (embeddings, projections, the output head) get weight decay;
    1-D parameters (biases, LayerNorm gains and shifts) do not, because
    shrinking them toward zero only fights the normalisation. A tied weight
    (``lm_head.weight`` is ``tgt_embed.weight``) is one tensor under two
    names; it appears once, or AdamW would update it twice per step.
    """
    seen: set[int] = set()
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for _name, param in model.named_parameters(remove_duplicate=False):
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (decay if param.ndim >= 2 else no_decay).append(param)
    return decay, no_decay


def make_optimizer(model: nn.Module, train: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer ``train.optimizer`` names (``muon``: ``optimizers.make_muon_adamw``).

    AdamW has ``train.betas``/``eps``/``weight_decay`` on matrices only, in groups
    named ``"decay"`` and ``"no_decay"`` (an empty group is left out). Decay is set
    per group, so ``AdamW``'s own default is never used.
    """
    if train.optimizer == "muon":
        return make_muon_adamw(model, train)
    decay, no_decay = parameter_groups(model)
    groups: list[dict[str, object]] = []
    if decay:
        groups.append({"params": decay, "weight_decay": train.weight_decay, "name": "decay"})
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0, "name": "no_decay"})
    if not groups:
        raise ValueError("make_optimizer: the model has no trainable parameters")
    return make_adamw(groups, train)


def warm_up_optimizer() -> None:
    """Make one AdamW and drop it: a process's first AdamW imports the rest of torch it
    needs (torch._dynamo, sympy: about two seconds of a core here), which a process that
    will train soon pays better ahead of time (the lab while it idles, the fork server
    once for all the training processes it forks). Tiny: no thread is started."""
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])
