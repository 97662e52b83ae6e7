"""Write the committed fixture runs under tests/data/ (run once, review, commit).

    .venv/bin/python -m tests.data.make_runs

Tests that only read or continue a trained run copy these folders instead of
training one per session. Being committed, their weights and metrics are the
same bytes on every machine: what the lab shows from them (losses, decoded
probabilities, attention) no longer depends on how this CPU rounds a
training step. ``tests/ui/test_snapshots.py`` checks that every number the
snapshots show from them sits far from a rounding edge.

tiny-run: tests/ui/data/tiny.yaml trained 30 of its 40 steps on one thread,
then stopped (a run the lab can open and continue); wall-clock figures
(elapsed, tokens/s, ETA) are replaced by fixed ones.

learned-copy: tests/data/learned-copy.yaml trained until it copies (about 99%
exact match): a model whose heads matter, so ablation, importance and
sampling tests see real, unequal effects. Its heads' effects are measured by
the tests themselves, never written down here.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
TINY = HERE.parent / "ui" / "data" / "tiny.yaml"
LEARNED = HERE / "learned-copy.yaml"


def train_tiny_run(out: Path, stop_at: int = 30) -> Path:
    """Train the tiny UI preset into ``out`` and stop after ``stop_at`` steps."""
    warnings.filterwarnings("ignore")
    from tui_lab.core.config.lab_config import load_file
    from tui_lab.core.training.train import StepEvent, TrainingRun

    holder: dict[str, TrainingRun] = {}

    def on_event(event: object) -> None:
        if isinstance(event, StepEvent) and event.step >= stop_at:
            holder["run"].stop()

    run = TrainingRun(load_file(TINY), out, on_event=on_event)
    holder["run"] = run
    run.run()
    freeze_timings(out)
    return out


def train_learned_copy(out: Path) -> Path:
    """Train the learned-copy preset into ``out`` on one thread until it reaches its target."""
    warnings.filterwarnings("ignore")
    import torch

    from tui_lab.core.config.lab_config import load_file
    from tui_lab.core.training.train import TrainingRun

    torch.set_num_threads(1)
    TrainingRun(load_file(LEARNED).with_values({"train.device": "cpu"}), out).run()
    freeze_timings(out)
    return out


def freeze_timings(run_dir: Path) -> None:
    """Wall-clock figures vary per machine and per run: fix them for snapshots."""
    lines = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "step":
            record.update(elapsed=record["step"] * 0.05, tokens_per_s=12345.0, eta=1.0)
        lines.append(json.dumps(record))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text())
    state["elapsed"] = 1.0
    state_path.write_text(json.dumps(state))


def main() -> None:
    for name, train in (("tiny-run", train_tiny_run), ("learned-copy", train_learned_copy)):
        out = HERE / name
        if out.exists():
            shutil.rmtree(out)
        train(out)
        print(f"wrote {out}: " + ", ".join(sorted(p.name for p in out.iterdir())))


if __name__ == "__main__":
    main()
