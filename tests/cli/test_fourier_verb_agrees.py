"""``tfx-lab fourier --json`` is the verb's ``run(Request(), model).to_json()`` under the run's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import tfx
from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.training.train import TrainingRun


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fourier-verb") / "run"
    cfg = from_dict({
        "model": {"arch": "decoder-only", "n_encoder_layers": 0, "n_decoder_layers": 1, "d_model": 16,
                  "n_heads": 2, "d_ff": 32, "positional": "learned", "max_len": 4},
        "task": {"name": "modular-addition", "p": 13},
        "train": {"full_batch": True, "steps": 4, "eval_every": 2, "device": "cpu", "threads": 1},
    })
    TrainingRun(cfg, out).run()  # history: steps 1, 2, 4
    return out


@pytest.mark.parametrize("at_step", [None, 2])
def test_command_json_is_the_verbs(run_dir: Path, at_step: int | None) -> None:
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs import fourier

    step_args = [] if at_step is None else ["--at-step", str(at_step)]
    proc = tfx("fourier", "--run", str(run_dir), *step_args, "--json")
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    assert cli.pop("run") == str(run_dir)
    got = fourier.run(fourier.Request(), open_model(run_dir, at_step=at_step)).to_json()
    assert list(cli) == list(got) and json.dumps(cli) == json.dumps(got)
    assert got["step"] == (at_step or 4)
