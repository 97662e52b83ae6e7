"""The optimizer at work, per parameter group: learning rate, gradient norm and the
update-to-weight ratio ||W_after - W_before|| / ||W_before||.

Measured every ``every`` steps only (``stats_every``: about ``POINTS`` points
over a run): the ratio needs a copy of the weights before the update, which
every step would pay for; the rate and the norms are one fused norm per
group. The gradient norm is taken before clipping, like the run's total
``grad_norm``. Group names are the optimizer's (``decay``/``no_decay`` for
AdamW; ``muon``/``embed``/``head``/``no_decay`` for Muon); a group without one
is ``group{i}``.
"""

from __future__ import annotations

import torch

# About this many measurements over a whole run.
POINTS = 200


def stats_every(total_steps: int) -> int:
    """Steps between two measurements for a run of ``total_steps``."""
    return max(1, total_steps // POINTS)


def group_name(group: dict[str, object], index: int) -> str:
    name = group.get("name")
    return name if isinstance(name, str) else f"group{index}"


def _norm(tensors: list[torch.Tensor]) -> float:
    """The L2 norm of several tensors together (one fused call)."""
    if not tensors:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors))))


class GroupWatch:
    """Measures the groups of ``optimizer`` around one update in every ``every``."""

    def __init__(self, optimizer: torch.optim.Optimizer, every: int) -> None:
        self.optimizer = optimizer
        self.every = every
        self._grad_norms: dict[str, float] = {}
        self._before: dict[str, list[torch.Tensor]] = {}

    def due(self, step: int) -> bool:
        """Whether update number ``step`` (from 1) is measured."""
        return step % self.every == 0 or step == 1

    def before_update(self) -> None:
        """After backward, before clipping: gradient norms; and a copy of the weights."""
        self._grad_norms, self._before = {}, {}
        with torch.no_grad():
            for i, group in enumerate(self.optimizer.param_groups):
                params = [p for p in group["params"] if p.grad is not None]
                name = group_name(group, i)
                self._grad_norms[name] = _norm([p.grad for p in params if p.grad is not None])
                self._before[name] = [p.detach().clone() for p in group["params"]]

    def after_update(self) -> dict[str, dict[str, float]]:
        """Each group's ``lr``, ``grad_norm`` and ``update_ratio`` for the update just made."""
        out: dict[str, dict[str, float]] = {}
        with torch.no_grad():
            for i, group in enumerate(self.optimizer.param_groups):
                name = group_name(group, i)
                before = self._before.get(name)
                if before is None:
                    continue
                after = [p.detach() for p in group["params"]]
                weight = _norm(before)
                change = _norm(list(torch._foreach_sub(after, before))) if after else 0.0
                out[name] = {
                    "lr": float(group["lr"]),
                    "grad_norm": self._grad_norms.get(name, 0.0),
                    "update_ratio": change / weight if weight > 0 else 0.0,
                }
        self._before = {}
        return out
