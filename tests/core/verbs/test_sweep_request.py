"""The sweep verb's request refuses numbers it cannot run, in one line, before any planning."""

from __future__ import annotations

import math

import pytest

from tui_lab.core.errors import LabError
from tui_lab.core.verbs.sweep import Request


@pytest.mark.parametrize("field", ["seeds", "parallel", "steps"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, -math.inf])
def test_a_count_that_is_not_a_finite_whole_number_of_at_least_one_is_refused(field: str, value: float) -> None:
    with pytest.raises(LabError) as caught:
        Request(preset="copy", vary=("model.norm=pre,post",), **{field: value})  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"--{field}: must be")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_a_time_limit_that_is_not_a_finite_positive_number_is_refused(value: float) -> None:
    with pytest.raises(LabError, match="--max-seconds: must be"):
        Request(preset="copy", max_seconds=value)


def test_counts_given_are_kept() -> None:
    request = Request(preset="copy", vary=("model.norm=pre,post",), seeds=2, parallel=3, steps=5)
    assert (request.seeds, request.parallel, request.steps) == (2, 3, 5)
