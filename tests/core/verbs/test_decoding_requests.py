"""The requests of decode, eval and ablate refuse what they cannot run, in one line naming the
option, the same words for the command line and the lab's forms; a request that exists runs."""

from __future__ import annotations

import math

import pytest

from tui_lab.core.errors import LabError
from tui_lab.core.verbs import ablate, decode, evaluate, heads, hooks

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"temperature": NAN}, "--temperature: must be a finite number, got nan"),
    ({"temperature": INF}, "--temperature: must be a finite number, got inf"),
    ({"temperature": -0.5}, "--temperature: must be >= 0, got -0.5"),
    ({"top_k": -1}, "--top-k: must be >= 0, got -1"),
    ({"top_p": NAN}, "--top-p: must be a finite number, got nan"),
    ({"top_p": 0.0}, "--top-p: must be in (0, 1], got 0.0"),
    ({"top_p": 1.01}, "--top-p: must be in (0, 1], got 1.01"),
    ({"max_new": 0}, "--max-new: must be >= 1, got 0"),
    ({"report_k": 0}, "report_k: must be >= 1, got 0"),
    ({"explain": "decoder.0.cross:1"}, "expected NAME:HEAD@ROW"),
    ({"explain": "decoder.0.cross:1@x"}, "'x' is not a query row number"),
])
def test_decode_request_refuses(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(LabError) as err:
        decode.Request("abc", **kwargs)  # type: ignore[arg-type]
    assert says in str(err.value) and "\n" not in str(err.value)


def test_decode_request_takes_the_edges() -> None:
    decode.Request("abc", temperature=0.0, top_k=0, top_p=1.0, max_new=1)
    assert decode.Request("abc", temperature=2.0, top_p=1e-6, explain="blocks.0.attn:1@3").explain


@pytest.mark.parametrize("n", [0, -1])
def test_evaluate_request_refuses(n: int) -> None:
    with pytest.raises(LabError, match=f"--n: must be > 0, got {n}"):
        evaluate.Request(n)
    assert evaluate.Request(1).n == 1


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"n": 0}, "--n: must be > 0, got 0"),
    ({"mode": "half"}, "mode 'half': expected one of zero, mean"),
])
def test_ablate_request_refuses(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(LabError) as err:
        ablate.Request(**kwargs)  # type: ignore[arg-type]
    assert says in str(err.value)


def test_requests_without_numbers_exist() -> None:
    assert hooks.Request().input is None and heads.Request() == heads.Request()
