"""Where ``b_dec`` starts: the activations' geometric median, by Weiszfeld's iteration.

The geometric median minimises the sum of distances to the points (the mean
minimises the sum of squared ones), so a few outlying activations, such as the
huge first-token residuals of real models, do not drag it off; starting ``b_dec``
there centres the data SAELens-style before the first step.
"""

from __future__ import annotations

import torch


def geometric_median(points: torch.Tensor, steps: int = 8, eps: float = 1e-8) -> torch.Tensor:
    """The geometric median of ``points`` (N, d), after at most ``steps`` Weiszfeld steps.

    Each step is the average of the points weighted by 1 / distance to the current
    guess, starting from the mean. ``eps`` keeps a point that sits on the guess from
    taking all the weight (the classic fix for Weiszfeld's division by zero).
    """
    if points.ndim != 2 or points.shape[0] == 0:
        raise ValueError(f"geometric_median needs a non-empty (N, d) tensor, got {tuple(points.shape)}")
    data = points.detach().to(torch.float64)  # distances of large activations lose bits in fp32
    guess = data.mean(dim=0)
    for _ in range(steps):
        weights = 1.0 / (data - guess).norm(dim=1).clamp_min(eps)  # (N,)
        new = (weights[:, None] * data).sum(dim=0) / weights.sum()
        moved = (new - guess).norm()
        guess = new
        if moved <= 1e-7 * (1.0 + guess.norm()):
            break
    return guess.to(points.dtype)
