"""probe, das and probe_history from tui_lab.core's face, on the committed learned copy run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_lab.core import LabError, das, open_model, probe, probe_history

LEARNED = Path(__file__).resolve().parents[3] / "data" / "learned-copy"


def test_probe_and_das_take_a_source_or_a_model_in_hand() -> None:
    result = probe(str(LEARNED), "source", examples=100)
    assert result.table.hooks == ["decoder.0.hook_resid_pre", "decoder.1.hook_resid_pre", "decoder.1.hook_resid_post"]
    assert result.to_json()["variable"] == "source"
    model = open_model(LEARNED)
    found = das(model, "source", 1, rank=2, examples=100, pairs=100, steps=5)
    assert found.hook == "decoder.1.hook_resid_pre" and 0.0 <= found.score.iia <= 1.0
    with pytest.raises(LabError, match="layers 0-2"):
        das(model, "source", 3, examples=100)


def test_probe_history_over_two_snapshots() -> None:
    history = probe_history(LEARNED, "source", examples=60, snapshots=2)
    assert len(history.readable.steps) == 2 and len(history.readable.values) == 3
    assert history.causal is None
