"""DAS on a model in hand: interchange pairs drawn from a task variable's slots, and the
forward pass that intervenes at one hook.

A pair is a base slot and a source slot (of the same position class, or of any
two classes for ``all``: copy's source position is one value per class) whose
counterfactual (``Variable.counterfactual``: the base's answer with the source's
value) changes the base's answer; bases of the test pairs are examples no training
pair's base comes from. The model's weights are never trained: their
``requires_grad`` is off while a subspace is fitted, then put back.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.probes.das import Forward, Pairs
from tui_lab.core.analysis.probes.linear_probe import split
from tui_lab.core.analysis.probes.slot_activations import ALL, SlotData, forward_rows
from tui_lab.core.errors import LabError
from tui_lab.core.tasks.variables import Slot

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task
    from tui_lab.core.tasks.variables import Variable

MIN_PAIRS = 8


@dataclass
class PairPlan:
    """Which slots pair up (base, source), where the base is read, and the target id:
    the same at every layer and history step; only the source activations change."""

    base: Tensor  # (P,) slot index
    source: Tensor  # (P,) slot index
    read: Tensor  # (P,) position scored in the base's row
    target: Tensor  # (P,) counterfactual token id
    test: Tensor  # (P,) bool: a held-out pair

    def pairs(self, data: SlotData, hook: str) -> tuple[Pairs, Pairs]:
        """(train, test) pairs with the source activations of ``hook``."""
        pairs = Pairs(data.example[self.base], data.position[self.base], self.read,
                      data.resid[hook][self.source], self.target, self.source)
        return pairs.take(torch.nonzero(~self.test).flatten()), pairs.take(torch.nonzero(self.test).flatten())


def _answer_ids(task: Task, answer: str) -> list[int]:
    return list(task.vocab.encode(answer))


def plan_pairs(task: Task, variable: Variable, data: SlotData, position: str, n_pairs: int,
               seed: int) -> PairPlan:
    """Up to ``n_pairs`` pairs of slots of ``position`` (``all``: any two slots)."""
    rng = random.Random(f"das:{seed}")
    slots = [i for i, cls in enumerate(data.cls) if position in (ALL, cls)]
    if len(slots) < 2:
        raise LabError(f"no two slots at position {position!r} to pair")
    answers = [_answer_ids(task, a) for a in data.answers]
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for _ in range(20 * n_pairs):
        if len(found) >= n_pairs:
            break
        b, s = rng.choice(slots), rng.choice(slots)
        made = _counterfactual(task, variable, data, answers, b, s)
        if made is not None:
            found.setdefault((b, s), made)
    if len(found) < MIN_PAIRS:
        raise LabError(f"only {len(found)} base/source pairs change the answer at {position!r}: too few for DAS")
    keys = list(found)
    base = torch.tensor([b for b, _ in keys])
    test = split(data.example, seed)[base]
    if bool(test.all()) or not bool(test.any()):
        raise LabError("too few examples to hold some DAS pairs out")
    return PairPlan(base, torch.tensor([s for _, s in keys]), torch.tensor([found[k][0] for k in keys]),
                    torch.tensor([found[k][1] for k in keys]), test)


def _counterfactual(task: Task, variable: Variable, data: SlotData, answers: list[list[int]],
                    b: int, s: int) -> tuple[int, int] | None:
    """(read position, target id) of base slot ``b`` given source slot ``s``'s value; None
    when the swap has no answer or leaves the base's answer as it is."""
    e = int(data.example[b])
    assert data.index is not None
    cls = data.cls[b] if data.slot_cls is None else data.slot_cls[b]  # the variable's own class
    slot = Slot(cls, int(data.index[b]), int(data.value[b]))
    cf = variable.counterfactual(task, data.texts[e], slot, int(data.value[s]))
    if cf is None or cf.answer_index >= len(answers[e]):
        return None
    token = task.vocab.encode(cf.token)
    if len(token) != 1 or token[0] == answers[e][cf.answer_index]:
        return None
    assert data.answer_start is not None
    return int(data.answer_start[e]) + cf.answer_index, token[0]


@contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """``model``'s parameters take no gradient inside (put back as they were after)."""
    flags = [p.requires_grad for p in model.parameters()]
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(flag)


def model_forward(model: ModelInHand, data: SlotData, hook: str) -> Forward:
    """The ``Forward`` that reruns ``data``'s rows with ``hook``'s activation edited."""

    def forward(rows: Tensor, edit: Callable[[Tensor], Tensor]) -> Tensor:
        return forward_rows(model, data, rows, [(hook, lambda x, _name: edit(x))])

    return forward
