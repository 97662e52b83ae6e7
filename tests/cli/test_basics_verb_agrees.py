"""``tfx-lab basics TOPIC --json`` is the verb's ``run(Request(...), model).to_json()``: on a
run's weights, and on a preset's freshly built model (seeded, so built the same twice)."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import TINY_RUN, tfx
from tui_lab.core.errors import LabError
from tui_lab.core.verbs import basics

TOPICS = ("positions", "masks", "scaling", "schedule")


def _cli(*args: str) -> dict[str, object]:
    proc = tfx("basics", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _same(got: dict[str, object], cli: dict[str, object]) -> None:
    assert list(cli) == list(got)  # the same keys in the same order
    assert json.dumps(cli) == json.dumps(got)


@pytest.mark.parametrize("topic", TOPICS)
def test_a_runs_numbers_are_the_verbs(topic: str) -> None:
    from tui_lab.core.opening.model_in_hand import open_model

    got = basics.run(basics.Request(topic, named=str(TINY_RUN)), open_model(TINY_RUN)).to_json()
    _same(got, _cli(topic, "--run", str(TINY_RUN)))
    assert list(got)[:2] == ["topic", "source"] and str(got["source"]).startswith(f"{TINY_RUN} at step ")


@pytest.mark.parametrize("topic", TOPICS)
def test_a_presets_numbers_are_the_verbs(topic: str) -> None:
    got = basics.run(basics.Request(topic, "reverse", length=5)).to_json()
    _same(got, _cli(topic, "--preset", "reverse", "--length", "5"))
    fresh = "" if topic == "schedule" else " (untrained: initial weights)"  # the schedule builds no model
    assert list(got)[:2] == ["topic", "source"] and got["source"] == f"preset reverse{fresh}"


def test_a_request_refuses_a_length_below_one() -> None:
    with pytest.raises(LabError, match="--length: must be > 0, got 0"):
        basics.Request("positions", length=0)
