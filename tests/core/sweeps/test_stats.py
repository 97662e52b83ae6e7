"""Per-arm sweep figures against numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from tui_lab.core.runs.summary import RunSummary
from tui_lab.core.sweeps.stats import arm_stats, format_spread, spread


def test_spread_of_three_seeds_by_hand():
    # 400, 420, 470: mean 430; deviations -30, -10, 40; squares 900 + 100 + 1600 = 2600;
    # sample variance 2600 / 2 = 1300; std sqrt(1300) = 36.0555.
    s = spread([420, None, 400, float("nan"), 470])  # no value and a nan are left out
    assert s["n"] == 3 and s["min"] == 400 and s["max"] == 470
    assert s["mean"] == pytest.approx(430.0)
    assert s["std"] == pytest.approx(math.sqrt(1300), abs=1e-9)
    assert format_spread(s) == "430 ± 36 (400–470)"


def test_spread_of_one_and_of_none():
    assert spread([0.5]) == {"n": 1, "mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5}
    assert format_spread(spread([0.5]), "{:.2f}") == "0.50"
    assert spread([None, float("inf")])["n"] == 0 and format_spread(spread([])) == "-"


def _run(status: str, steps: int | None, seconds: float | None, best: float, **kw: object) -> RunSummary:
    return RunSummary(path="p", name="n", status=status, task=kw.pop("task", "copy"), target=0.9,
                      steps_to_target=steps, seconds_to_target=seconds, best_exact_match=best, **kw)


def test_arm_stats_of_an_algorithmic_arm():
    runs = [_run("target", 300, 12.0, 0.95), _run("target", 500, 20.0, 0.91),
            _run("finished", None, None, 0.6), _run("stopped", None, None, 0.2)]
    row = arm_stats("model.norm=post", runs)
    assert row["arm"] == "model.norm=post" and row["seeds"] == 4
    assert row["finished"] == 3 and row["reached"] == 2 and row["target"] == 0.9
    assert row["metric"] == "exact_match" and row["bits_per_char"] is None
    # steps: 300, 500 -> mean 400, std sqrt(((-100)^2 + 100^2) / 1) = 141.42
    assert row["steps_to_target"]["mean"] == pytest.approx(400)
    assert row["steps_to_target"]["std"] == pytest.approx(math.sqrt(20000))
    assert row["seconds_to_target"]["mean"] == pytest.approx(16.0)
    # best: 0.95, 0.91, 0.6, 0.2 -> mean 2.66 / 4 = 0.665
    assert row["best"]["n"] == 4 and row["best"]["mean"] == pytest.approx(0.665)
    assert (row["best"]["min"], row["best"]["max"]) == (0.2, 0.95)


def test_arm_stats_of_a_char_lm_arm_reads_the_loss():
    runs = [_run("time", None, None, 0.0, task="char-lm", best_val_loss=1.4, bits_per_char=1.4 / math.log(2)),
            _run("time", None, None, 0.0, task="char-lm", best_val_loss=1.2, bits_per_char=1.2 / math.log(2))]
    row = arm_stats("train.lr=0.004", runs)
    assert row["metric"] == "val_loss" and row["finished"] == 2 and row["reached"] == 0
    assert row["best"]["mean"] == pytest.approx(1.3) and row["best"]["std"] == pytest.approx(math.sqrt(0.02))
    assert row["bits_per_char"]["mean"] == pytest.approx(1.3 / math.log(2))
