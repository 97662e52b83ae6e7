"""An answer variable read in an encoder-decoder's encoder (``--stack encoder``).

The decoder re-reads the encoder through cross-attention at every layer, so a variable
the decoder uses (addition's carry) may be computed, and be causal, in the encoder
only. There an answer slot has no position of its own: each answer slot is read at
every input position, and the position class joins the slot's class and the input
position's name (``column 1 @ a digit 0``: the carry into the tens, read at the first
operand's units digit). Input positions are named by the task where it has operands
(addition: ``a digit i`` / ``+`` / ``b digit i``, digits counted from the units), else
``input p``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.tasks.protocol import Task
    from tui_lab.core.tasks.variables import Slot, Variable

JOIN = " @ "


def input_names(task: Task, text: str) -> list[str]:
    """A name per input token of ``text``, as the encoder sees it (no BOS: ``collate``)."""
    n = len(task.vocab.encode(text))
    if task.name == "addition" and text.count("+") == 1 and n == len(text):
        a, _, b = text.partition("+")
        return ([f"a digit {len(a) - 1 - i}" for i in range(len(a))] + ["+"]
                + [f"b digit {len(b) - 1 - i}" for i in range(len(b))])
    return [f"input {p}" for p in range(n)]


def encoder_reads(task: Task, variable: Variable, text: str) -> list[tuple[str, int, Slot]]:
    """(position class, encoder position, the variable's slot) for every answer slot of
    ``text`` at every input position."""
    names = input_names(task, text)
    return [(f"{slot.cls}{JOIN}{name}", p, slot) for slot in variable.slots(task, text)
            for p, name in enumerate(names)]
