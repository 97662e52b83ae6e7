"""Write small run folders for the Runs pane's tests and bench: no training, fixed numbers.

    .venv/bin/python -m tests.data.make_pane_runs   # rewrites tests/data/runs-pane/

Each folder has what a run leaves (config.yaml, state.json, metrics.jsonl,
log.txt with a closing line) and curves from a formula, so the table and the
overlay show the same thing on every machine. ``runs-pane/`` is committed
(with fixed dates in log.txt) for the snapshot test.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from tui_lab.core.config.presets import load_preset

HERE = Path(__file__).resolve().parent
PANE_RUNS = HERE / "runs-pane"
STAMP = "2026-01-15T10:{minute:02d}:00+00:00"


def write_run(
    folder: Path,
    preset: str = "copy",
    values: dict[str, Any] | None = None,
    steps: int = 60,
    rate: float = 0.05,
    minute: int = 0,
    closing: str | None = "finished",
) -> Path:
    """A run folder of ``preset`` with ``values`` changed, ``steps`` logged steps, fixed figures."""
    config = load_preset(preset).with_values(values or {})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(config.to_yaml(full=True))
    lines = []
    for step in range(1, steps + 1):
        loss = 0.1 + 3.0 * math.exp(-rate * step)
        lines.append(
            {
                "kind": "step",
                "step": step,
                "total_steps": steps,
                "loss": round(loss, 4),
                "lr": 0.001,
                "grad_norm": 1.0,
                "tokens_per_s": 10000.0 + 100 * minute,
                "elapsed": round(step * 0.05, 2),
                "eta": 1.0,
            }
        )
        if step % 20 == 0:
            em = round(0.95 * (1 - math.exp(-rate * step)), 3)
            lines.append(
                {
                    "kind": "eval",
                    "step": step,
                    "val_loss": round(loss * 1.1, 4),
                    "exact_match": em,
                    "n": 20,
                    "overlap": 5,
                }
            )
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    state = {"step": steps, "elapsed": steps * 0.05, "best_accuracy": 0.0, "preset": preset}
    (folder / "state.json").write_text(json.dumps(state))
    stamp = STAMP.format(minute=minute)
    log = f"{stamp} training on cpu (1 thread) from step 0 to {steps}\n"
    if closing == "finished":
        log += f"{stamp} finished {steps} steps\n"
    elif closing:
        log += f"{stamp} {closing} at step {steps}\n"
    (folder / "log.txt").write_text(log)
    return folder


def write_damaged(folder: Path) -> Path:
    """A folder that looks like a run but whose config.yaml is not YAML."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("model: [unclosed\n")
    (folder / "state.json").write_text("{}")
    return folder


def write_pane_runs(root: Path) -> Path:
    """The snapshot's runs: pre/post-LN, warmup off, a longer one, and a damaged folder."""
    write_run(root / "copy-pre", minute=1)
    write_run(root / "copy-post", values={"model.norm": "post"}, rate=0.03, minute=2)
    write_run(root / "copy-nowarm", values={"train.warmup_steps": 0}, rate=0.04, minute=3)
    write_run(root / "copy-long", steps=100, rate=0.02, minute=4, closing="stopped")
    write_damaged(root / "broken")
    return root


if __name__ == "__main__":
    shutil.rmtree(PANE_RUNS, ignore_errors=True)
    print(write_pane_runs(PANE_RUNS))
