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


@pytest.fixture(scope="module")
def real_models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from bench.hf_factory import save_family

    root = tmp_path_factory.mktemp("basics-models")
    return {family: (root / family, save_family(root / family, family)) for family in ("gpt2", "llama")}


def test_a_real_models_positions(real_models: dict) -> None:
    # GPT-2 adds learned rows: the table is its wpe weight, as transformers holds it.
    folder, reference = real_models["gpt2"]
    pos = _json("positions", "--model", str(folder), "--length", "5")
    assert pos["kind"] == "learned" and pos["dims"] == 32
    for got, want in zip(pos["table"], reference.transformer.wpe.weight[:5].tolist(), strict=True):
        assert got == pytest.approx(want, abs=1e-5)
    # Llama rotates (head size 8: 4 pairs at rope_theta 10000): angle p * 10000^(-2j/8) mod 2 pi.
    folder, _ = real_models["llama"]
    rope = _json("positions", "--model", str(folder), "--length", "6")
    assert rope["kind"] == "rope" and rope["dims"] == 4
    for p, j in ((1, 0), (3, 1), (5, 3)):
        theta = p * 10000 ** (-2 * j / 8)
        assert math.cos(rope["table"][p][j]) == pytest.approx(math.cos(theta), abs=1e-4)
        assert math.sin(rope["table"][p][j]) == pytest.approx(math.sin(theta), abs=1e-4)


def test_a_real_models_masks_and_scaling(real_models: dict) -> None:
    folder, _ = real_models["llama"]
    masks = _json("masks", "--model", str(folder), "--input", "The cat")
    n, t = masks["lengths"][masks["row"]], len(masks["tokens"])
    assert n < t and masks["combined"] == [[int(j <= i and j < n) for j in range(t)] for i in range(t)]
    scaling = _json("scaling", "--model", str(folder))
    assert [r["name"] for r in scaling["model"]] == ["decoder.0.self", "decoder.1.self"]
