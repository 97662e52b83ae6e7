"""Write the trained run the transcoder tests read (run once, review, commit):

    .venv/bin/python -m tests.data.make_transcoder_runs

- ``induction-mlp-run/``: the shipped ``induction-mlp`` preset (two layers, each with
  an MLP) trained 1,200 steps on one thread, with three history snapshots kept
  (``KEEP``): early (before the induction jump), middle and last, so transcoders are
  trained at chosen snapshots (``--at-step``, ``--history``) on real weights.

Only what ``open_model`` reads is kept: the config, the weights, ``state.json`` and
``history/`` (its ``index.json`` listing the snapshots kept).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDER = "induction-mlp-run"
STEPS = 1200
KEEP = (100, 400, 1200)  # history steps kept: before, during and after the jump


def write() -> None:
    out = HERE / FOLDER
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(
            [sys.executable, "-m", "tui_lab.cli", "train", "--preset", "induction-mlp",
             "--steps", str(STEPS), "--max-seconds", "2000", "--out", str(run)],
            check=True, env=env,
        )
        shutil.rmtree(out, ignore_errors=True)
        (out / "history").mkdir(parents=True)
        for name in ("config.yaml", "model.safetensors", "state.json"):
            shutil.copy2(run / name, out / name)
        index = json.loads((run / "history" / "index.json").read_text())
        index["snapshots"] = [s for s in index["snapshots"] if s["step"] in KEEP]
        for snap in index["snapshots"]:
            shutil.copy2(run / "history" / snap["file"], out / "history" / snap["file"])
        (out / "history" / "index.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    write()
