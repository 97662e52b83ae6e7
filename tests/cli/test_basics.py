"""`tfx-lab basics TOPIC`: each topic's JSON against the formulas, text output, one-line errors."""

from __future__ import annotations

import json
import math

import pytest

from tests.cli.helpers import TINY_RUN, assert_one_line_error, tfx


def _json(*args: str) -> dict:
    proc = tfx("basics", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_positions_and_schedule_of_a_run() -> None:
    # tiny-run: d_model 16, sinusoidal, warmup 5 of 40 steps
    pos = _json("positions", "--run", str(TINY_RUN), "--length", "6")
    assert pos["kind"] == "sinusoidal" and pos["length"] == 6 and pos["dims"] == 16
    for p, i in ((1, 0), (3, 2), (5, 7)):
        assert pos["table"][p][2 * i] == pytest.approx(math.sin(p / 10000 ** (2 * i / 16)), abs=1e-5)
        assert pos["table"][p][2 * i + 1] == pytest.approx(math.cos(p / 10000 ** (2 * i / 16)), abs=1e-5)
    sched = _json("schedule", "--run", str(TINY_RUN))
    assert sched["warmup"] == 5 and sched["steps"][0] == 1 and sched["steps"][-1] == 40
    noam = dict(zip(sched["steps"], sched["noam"], strict=True))
    assert noam[5] == pytest.approx(16**-0.5 * 5**-0.5) == sched["noam_peak"]["lr"]
    assert noam[20] == pytest.approx(16**-0.5 * 20**-0.5)


def test_masks_and_scaling_of_a_run() -> None:
    masks = _json("masks", "--run", str(TINY_RUN), "--input", "7")
    n, t = masks["lengths"][masks["row"]], len(masks["tokens"])
    assert masks["texts"][0] == "7" and n < t
    assert masks["causal"] == [[int(j <= i) for j in range(t)] for i in range(t)]
    assert masks["padding"] == [[int(j < n) for j in range(t)] for _ in range(t)]
    assert masks["combined"] == [[int(j <= i and j < n) for j in range(t)] for i in range(t)]
    assert sum(masks["after"]) == pytest.approx(1.0, abs=1e-4)
    scaling = _json("scaling", "--run", str(TINY_RUN))
    assert {r["name"] for r in scaling["model"]} == {"encoder.0.self", "decoder.0.self"}
    assert [r["d_k"] for r in scaling["random"]] == [16, 32, 64, 128, 256, 512, 1024]


def test_text_output_of_a_preset() -> None:
    proc = tfx("basics", "schedule", "--preset", "copy")
    assert proc.returncode == 0, proc.stderr
    assert "Noam: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)" in proc.stdout
    proc = tfx("basics", "masks", "--preset", "copy")
    assert proc.returncode == 0, proc.stderr
    assert "combined (rows: queries" in proc.stdout and "after" in proc.stdout


def test_one_line_errors() -> None:
    assert_one_line_error(tfx("basics", "masks", "--preset", "copy", "--input", "abc"), "the input")
    assert_one_line_error(tfx("basics", "positions", "--preset", "no-such-preset"), "no-such-preset")
    assert_one_line_error(tfx("basics", "positions", "--run", str(TINY_RUN), "--length", "0"), "--length")
