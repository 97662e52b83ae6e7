"""Each task's declared variable against hand-worked examples and an independent formula."""

from __future__ import annotations

import random

import pytest

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.errors import LabError
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.variables import Counterfactual, Slot, find_variable, variables_of


def _task(name: str, **kw: object):  # type: ignore[no-untyped-def]
    return make_task(TaskConfig(name=name, **kw))  # type: ignore[arg-type]


def test_carry_of_57_plus_68_per_column() -> None:
    task = _task("addition")
    carry = find_variable(task, "carry")
    # 7+8=15: carry 1 into the tens; 5+6+1=12: carry 1 into the hundreds. 125: tens at answer 1, hundreds at 0.
    assert carry.slots(task, "57+68") == [Slot("column 1", 1, 1), Slot("column 2", 0, 1)]
    assert carry.slots(task, "123+45") == [Slot("column 1", 1, 0), Slot("column 2", 0, 0)]  # 168: no carries
    assert [s.value for s in carry.slots(task, "999+1")] == [1, 1, 1]  # 1000
    assert carry.slots(task, "3+4") == []  # one column: nothing carried into it


def test_carry_matches_the_modulo_formula() -> None:
    task = _task("addition")
    carry = find_variable(task, "carry")
    rng = random.Random(0)
    for _ in range(300):
        a, b = rng.randrange(1000), rng.randrange(1000)
        got = {s.cls: s.value for s in carry.slots(task, f"{a}+{b}")}
        # the carry into column c is whether the operands' lower c digits overflow 10^c
        want = {f"column {c}": int(a % 10**c + b % 10**c >= 10**c) for c in range(1, len(str(a + b)))}
        assert got == want, (a, b)


def test_carry_counterfactual_is_the_column_digit_with_the_swapped_carry() -> None:
    task = _task("addition")
    carry = find_variable(task, "carry")
    tens = Slot("column 1", 1, 1)
    # 57+68 with no carry into the tens: 5+6 = 11 -> digit 1 (the true answer's tens digit is 2)
    assert carry.counterfactual(task, "57+68", tens, 0) == Counterfactual(1, "1")
    assert carry.counterfactual(task, "57+68", tens, 1) == Counterfactual(1, "2")


def test_rank_source_and_residue() -> None:
    sort = _task("sort")
    rank = find_variable(sort, "rank")
    assert [s.value for s in rank.slots(sort, "3142")] == [2, 0, 3, 1]
    assert [s.value for s in rank.slots(sort, "1211")] == [0, 3, 1, 2]  # ties keep input order
    # element 0 (a 3) placed first: answer position 0 shows 3
    assert rank.counterfactual(sort, "3142", Slot("element 0", 0, 2), 0) == Counterfactual(0, "3")
    reverse, copy = _task("reverse"), _task("copy")
    assert [s.value for s in find_variable(reverse, "source").slots(reverse, "123")] == [2, 1, 0]
    assert [s.value for s in find_variable(copy, "source").slots(copy, "123")] == [0, 1, 2]
    assert find_variable(copy, "source").counterfactual(copy, "123", Slot("answer 0", 0, 0), 2) == Counterfactual(0, "3")
    modular = _task("modular-addition", p=7)
    residue = find_variable(modular, "residue")
    assert residue.slots(modular, "3 5") == [Slot("=", 0, 1)]  # 8 mod 7
    assert residue.counterfactual(modular, "3 5", Slot("=", 0, 1), 4) == Counterfactual(0, "4")


def test_a_variable_the_task_lacks_is_one_line() -> None:
    with pytest.raises(LabError) as info:
        find_variable(_task("addition"), "rank")
    assert str(info.value) == "the addition task has no variable 'rank'; its variables: carry"
    assert variables_of(_task("induction", block_size=20)) == ()
    with pytest.raises(LabError, match="none \\(give --labels FILE\\)"):
        find_variable(_task("induction", block_size=20), "carry")
