"""`tfx-lab fourier`: JSON and text, `--at-step`, and one line for a run of another task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import TINY_RUN, assert_one_line_error, tfx
from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.training.train import TrainingRun


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fourier") / "run"
    cfg = from_dict({
        "model": {"arch": "decoder-only", "n_encoder_layers": 0, "n_decoder_layers": 1, "d_model": 16,
                  "n_heads": 2, "d_ff": 32, "positional": "learned", "max_len": 4},
        "task": {"name": "modular-addition", "p": 13},
        "train": {"full_batch": True, "steps": 4, "eval_every": 2, "device": "cpu", "threads": 1},
    })
    TrainingRun(cfg, out).run()  # history: steps 1, 2, 4
    return out


def test_json_has_p_key_frequencies_top8_share_and_power(run_dir):
    proc = tfx("fourier", "--run", str(run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"p", "key_frequencies", "top8_share", "power"} <= set(data)
    assert data["p"] == 13 and len(data["power"]) == 7 and data["step"] == 4
    assert sum(data["power"]) == pytest.approx(1.0, abs=1e-4)
    assert data["top8_share"] == pytest.approx(sum(sorted(data["power"])[-7:]), abs=1e-4)  # 7 < 8: all


def test_at_step_reads_a_history_snapshot(run_dir):
    at_1 = json.loads(tfx("fourier", "--run", str(run_dir), "--at-step", "1", "--json").stdout)
    at_4 = json.loads(tfx("fourier", "--run", str(run_dir), "--json").stdout)
    assert at_1["step"] == 1 and at_1["power"] != at_4["power"]


def test_text_names_the_key_frequencies_and_draws_a_bar_per_frequency(run_dir):
    out = tfx("fourier", "--run", str(run_dir)).stdout.splitlines()
    assert "p = 13" in out[0] and "top-8 share" in out[0]
    assert [line.split()[0] for line in out[1:]] == [str(k) for k in range(7)]


def test_a_run_of_another_task_is_one_line():
    assert_one_line_error(tfx("fourier", "--run", str(TINY_RUN)), "modular-addition")
