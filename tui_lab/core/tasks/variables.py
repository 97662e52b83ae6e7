"""The variables the lab's algorithmic tasks compute: what a probe reads and what
distributed alignment search (DAS) swaps.

A registry keyed by task name (``variables_of``): the ``Task`` protocol stays what
decoding asks of every task, a real model's too, and a task without variables
(char-lm, induction, a real text) simply has none here.

A variable labels *slots* of one example. A slot is a position in the input
(``site == "input"``: the encoder's position, or the input part of a decoder-only
sequence) or the position that predicts one answer character (``site ==
"answer"``: the decoder's position j, or the position after the separator's j-th
step). Slots of one kind across examples share a *position class* (``column 1``,
``element 3``), which probes are fitted per.

- addition: ``carry``, the carry into each answer column c >= 1 (units are column
  0; its carry is always 0, so it is left out), read where the model writes that
  column's digit. 57+68=125: column 1 gets 1 (7+8=15), column 2 gets 1 (5+6+1=12).
- sort: ``rank``, each input element's place in the sorted answer (ties keep
  input order, as a stable sort does). 3142: ranks 2, 0, 3, 1.
- copy and reverse: ``source``, the input position each answer character comes
  from. reverse of 123: answer 0 comes from position 2.
- modular-addition: ``residue``, the answer (a op b) mod p, read at ``=``.

``counterfactual`` says what a swap of the variable should do to the output (the
task's answer worked out again with the swapped value): which answer position's
prediction changes and to what character.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError

if TYPE_CHECKING:
    from tui_lab.core.tasks.protocol import Task

INPUT = "input"
ANSWER = "answer"


@dataclass(frozen=True)
class Slot:
    """One labelled place of one example: its position class, index and the variable's value.

    ``index`` is a token index into the input (site input) or an answer character's
    index (site answer).
    """

    cls: str
    index: int
    value: int


@dataclass(frozen=True)
class Counterfactual:
    """What swapping the variable at a slot should do: answer position ``answer_index``
    is then predicted as ``token``."""

    answer_index: int
    token: str


class Variable(ABC):
    """A task's variable: its name, where it is read and how a swap changes the answer."""

    name: str
    site: str
    description: str

    @abstractmethod
    def slots(self, task: Task, text: str) -> list[Slot]:
        """The variable at every slot of the input ``text`` (which the task accepts)."""

    @abstractmethod
    def counterfactual(self, task: Task, text: str, slot: Slot, value: int) -> Counterfactual | None:
        """The answer's change if ``slot`` of ``text`` held ``value`` (None: no such answer)."""


def carries_in(a: str, b: str) -> list[int]:
    """The carry into each column of ``a + b``, units first, over the sum's columns."""
    total = str(int(a) + int(b))
    x, y = a[::-1], b[::-1]
    carries, carry = [], 0
    for c in range(len(total)):
        carries.append(carry)
        carry = (int(x[c] if c < len(x) else 0) + int(y[c] if c < len(y) else 0) + carry) // 10
    return carries


class Carry(Variable):
    name = "carry"
    site = ANSWER
    description = "the carry into each answer column (tens onwards), where that column's digit is written"

    def slots(self, task: Task, text: str) -> list[Slot]:
        a, _, b = text.partition("+")
        carries = carries_in(a, b)
        n = len(carries)
        return [Slot(f"column {c}", n - 1 - c, carries[c]) for c in range(1, n)]

    def counterfactual(self, task: Task, text: str, slot: Slot, value: int) -> Counterfactual | None:
        a, _, b = text.partition("+")
        column = int(slot.cls.split()[-1])
        digit = sum(int(s[::-1][column]) for s in (a, b) if column < len(s))
        return Counterfactual(slot.index, str((digit + value) % 10))


class Rank(Variable):
    name = "rank"
    site = INPUT
    description = "each input element's place in the sorted answer"

    def slots(self, task: Task, text: str) -> list[Slot]:
        order = sorted(range(len(text)), key=lambda i: (text[i], i))
        ranks = [0] * len(text)
        for place, i in enumerate(order):
            ranks[i] = place
        return [Slot(f"element {i}", i, r) for i, r in enumerate(ranks)]

    def counterfactual(self, task: Task, text: str, slot: Slot, value: int) -> Counterfactual | None:
        # The element placed at ``value``: that answer position shows it.
        return Counterfactual(value, text[slot.index]) if value < len(text) else None


class Source(Variable):
    name = "source"
    site = ANSWER
    description = "the input position each answer character is copied from"

    def __init__(self, reverse: bool) -> None:
        self.reverse = reverse

    def slots(self, task: Task, text: str) -> list[Slot]:
        n = len(text)
        return [Slot(f"answer {j}", j, n - 1 - j if self.reverse else j) for j in range(n)]

    def counterfactual(self, task: Task, text: str, slot: Slot, value: int) -> Counterfactual | None:
        return Counterfactual(slot.index, text[value]) if value < len(text) else None


class Residue(Variable):
    name = "residue"
    site = ANSWER
    description = "the answer (a op b) mod p, at '='"

    def slots(self, task: Task, text: str) -> list[Slot]:
        return [Slot("=", 0, int(task.solve(text)))]

    def counterfactual(self, task: Task, text: str, slot: Slot, value: int) -> Counterfactual | None:
        return Counterfactual(0, str(value))


_REGISTRY: dict[str, tuple[Variable, ...]] = {
    "addition": (Carry(),),
    "sort": (Rank(),),
    "copy": (Source(reverse=False),),
    "reverse": (Source(reverse=True),),
    "modular-addition": (Residue(),),
}


def variables_of(task: Task) -> tuple[Variable, ...]:
    """The variables ``task`` declares (none for a text or a real model's task)."""
    return _REGISTRY.get(task.name, ())


def find_variable(task: Task, name: str) -> Variable:
    """``task``'s variable called ``name``; LabError (one line) naming those it has."""
    known = variables_of(task)
    for variable in known:
        if variable.name == name:
            return variable
    has = ", ".join(v.name for v in known) if known else "none (give --labels FILE)"
    raise LabError(f"the {task.name} task has no variable {name!r}; its variables: {has}")
