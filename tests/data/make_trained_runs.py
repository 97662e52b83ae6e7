"""Write the trained runs the tests read (run once, review, commit):

    .venv/bin/python -m tests.data.make_trained_runs [induction-run] [induction-control]

- ``induction-run/``: the shipped ``induction`` preset (two attention-only
  layers) trained its 2,000 steps on one thread: layer 1 holds induction heads
  and layer 0 the heads they read through, so activation patching is tested on
  real trained weights (``tests/core/analysis/patching/test_patching_induction.py``).
- ``induction-control/``: the one-layer control (``presets/induction-1layer.yaml``)
  trained the same way: a model that learned what one layer can but cannot form
  an induction head, so the head atlas's label floor is tested on real trained
  weights (``tests/core/analysis/heads/test_head_floor.py``).

Only what ``load_for_inference`` reads is kept: the config, the weights,
``state.json``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = {"induction-run": "induction", "induction-control": "induction-1layer"}  # folder -> preset


def write(folder: str) -> None:
    out = HERE / folder
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(
            [sys.executable, "-m", "tui_lab.cli", "train", "--preset", RUNS[folder],
             "--steps", "2000", "--max-seconds", "1000", "--out", str(run)],
            check=True, env=env,
        )
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        for name in ("config.yaml", "model.safetensors", "state.json"):
            shutil.copy2(run / name, out / name)


if __name__ == "__main__":
    for name in sys.argv[1:] or list(RUNS):
        write(name)
