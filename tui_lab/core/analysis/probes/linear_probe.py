"""Linear probes: multinomial logistic regression on the residual stream, held-out
accuracy, and the control that keeps a probe honest.

A probe is fitted on 80% of the examples (split by example, so two slots of one
example never sit on both sides) and scored on the rest. The control fits the same
probe to the same activations with the labels shuffled across slots (Hewitt and
Liang's control task, in its simplest form): a probe that scores well on shuffled
labels has memorised, not read. ``chance`` is the held-out share of the commonest
label. Features are standardised with the training split's mean and spread; LBFGS
minimises the cross-entropy plus a small L2 penalty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tui_lab.core.analysis.probes.slot_activations import ALL, SlotData

TEST_FRACTION = 0.2
STEPS = 100  # LBFGS iterations
L2 = 1e-3


@dataclass(frozen=True)
class ProbeScore:
    """A probe's held-out accuracy, its control's, chance, and the split's sizes."""

    accuracy: float
    control: float
    chance: float
    n_train: int
    n_test: int
    n_classes: int

    def to_dict(self) -> dict[str, object]:
        return {"accuracy": self.accuracy, "control": self.control, "chance": self.chance,
                "n_train": self.n_train, "n_test": self.n_test, "classes": self.n_classes}


def split(example: Tensor, seed: int, test_fraction: float = TEST_FRACTION) -> Tensor:
    """(S,) bool: the held-out slots, every slot of a fifth of the examples."""
    ids = torch.unique(example)
    gen = torch.Generator().manual_seed(seed)
    order = ids[torch.randperm(len(ids), generator=gen)]
    held = order[: max(1, round(test_fraction * len(ids)))]
    return torch.isin(example, held)


def fit_logistic(x: Tensor, y: Tensor, n_classes: int, steps: int = STEPS, l2: float = L2) -> Callable[[Tensor], Tensor]:
    """A logistic-regression probe fitted to (x, y): returns the function x -> logits."""
    mean = x.mean(0)
    std = x.std(0, unbiased=False).clamp_min(1e-6)
    z = (x - mean) / std
    linear = nn.Linear(x.size(1), n_classes)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    opt = torch.optim.LBFGS(linear.parameters(), lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(linear(z), y) + l2 * linear.weight.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    linear.requires_grad_(False)
    return lambda t: linear((t - mean) / std)


def held_out_accuracy(x: Tensor, y: Tensor, test: Tensor, steps: int = STEPS) -> float:
    """Accuracy on the ``test`` slots of a probe fitted on the others (labels 0..K-1)."""
    n_classes = int(y.max()) + 1
    probe = fit_logistic(x[~test], y[~test], n_classes, steps)
    return float((probe(x[test]).argmax(-1) == y[test]).float().mean())


def score_probe(x: Tensor, y: Tensor, example: Tensor, seed: int = 0, steps: int = STEPS) -> ProbeScore | None:
    """The probe and its control on (x, y); None where the slots hold one label only or a
    split side is empty."""
    _, y = torch.unique(y, return_inverse=True)  # labels as 0..K-1
    n_classes = int(y.max()) + 1 if y.numel() else 0
    test = split(example, seed)
    if n_classes < 2 or bool(test.all()) or not bool(test.any()):
        return None
    gen = torch.Generator().manual_seed(seed + 1)
    shuffled = y[torch.randperm(len(y), generator=gen)]
    x = x.float()
    counts = torch.bincount(y[test], minlength=n_classes)
    return ProbeScore(
        accuracy=held_out_accuracy(x, y, test, steps),
        control=held_out_accuracy(x, shuffled, test, steps),
        chance=float(counts.max()) / int(test.sum()),
        n_train=int((~test).sum()),
        n_test=int(test.sum()),
        n_classes=n_classes,
    )


@dataclass
class ProbeTable:
    """A probe per layer (rows) and position class (columns; ``all`` last)."""

    hooks: list[str]
    classes: list[str]
    scores: list[list[ProbeScore | None]]  # [layer][class]

    def best(self) -> tuple[int, int, ProbeScore] | None:
        """(layer, class index, score) of the most accurate probe (None: none was fitted)."""
        found = [(s.accuracy, r, c, s) for r, row in enumerate(self.scores) for c, s in enumerate(row) if s]
        if not found:
            return None
        _, r, c, s = max(found, key=lambda t: (t[0], -t[1]))
        return r, c, s

    def to_dict(self) -> dict[str, object]:
        def grid(key: str) -> list[list[float | None]]:
            return [[None if s is None else float(getattr(s, key)) for s in row] for row in self.scores]

        best = self.best()
        return {
            "layers": list(range(len(self.hooks))), "hooks": self.hooks, "positions": self.classes,
            "accuracy": grid("accuracy"), "control": grid("control"), "chance": grid("chance"),
            "best": None if best is None else {"layer": best[0], "hook": self.hooks[best[0]],
                                                "position": self.classes[best[1]], **best[2].to_dict()},
        }


def probe_layers(data: SlotData, seed: int = 0, classes: list[str] | None = None,
                 steps: int = STEPS, tick: Callable[[], None] | None = None) -> ProbeTable:
    """A probe and its control at every layer hook of ``data`` and every position class
    (``classes``; default: each of ``data``'s, then ``all`` when it has several)."""
    if classes is None:
        classes = data.classes()
        classes = [*classes, ALL] if len(classes) > 1 else classes
    masks = [data.mask(c) for c in classes]
    scores: list[list[ProbeScore | None]] = []
    for hook in data.hooks:
        x = data.resid[hook]
        row = []
        for mask in masks:
            row.append(score_probe(x[mask], data.value[mask], data.example[mask], seed, steps))
            if tick is not None:
                tick()
        scores.append(row)
    return ProbeTable(list(data.hooks), classes, scores)
