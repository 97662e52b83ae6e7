"""Write tests/data/induction-run/ (run once, review, commit).

    .venv/bin/python -m tests.data.make_induction_run

The shipped ``induction`` preset (two attention-only layers) trained its 2,000
steps on one thread: layer 1 holds induction heads and layer 0 the heads they
read through, so activation patching is tested on real trained weights
(``tests/core/analysis/test_patching_induction.py``). Only what
``load_for_inference`` reads is kept: the config, the weights, ``state.json``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "induction-run"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(
            [sys.executable, "-m", "tui_lab.cli", "train", "--preset", "induction",
             "--steps", "2000", "--max-seconds", "1000", "--out", str(run)],
            check=True, env=env,
        )
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir()
        for name in ("config.yaml", "model.safetensors", "state.json"):
            shutil.copy2(run / name, OUT / name)


if __name__ == "__main__":
    main()
