"""``sweep.json``: what a sweep folder holds (spec, arms, runs and their summaries).

Written when the sweep starts (runs pending), after every run that ends and
at the end, atomically, so the lab can group a sweep being run by arm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tui_lab.core.runs.atomic import atomic_write_text
from tui_lab.core.runs.run_files import RunDir, RunError
from tui_lab.core.runs.summary import RunSummary, summarize_run
from tui_lab.core.sweeps.spec import SweepPlan
from tui_lab.core.sweeps.stats import arm_stats

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class ArmGroup:
    """One arm of a recorded sweep: its label, varied values and run folders."""

    label: str
    values: dict[str, object]
    runs: list[Path]


def sweep_document(
    plan: SweepPlan, outcomes: dict[str, dict[str, object]], interrupted: bool = False
) -> dict[str, object]:
    """The ``sweep.json`` object; runs are summarised from their folders now."""
    summaries: dict[str, RunSummary] = {}
    bases: dict[str | None, dict[str, object]] = {}
    for run in plan.runs:
        if run.folder.exists():
            summaries[run.name] = summarize_run(run.folder, name=run.name, bases=bases)
    arms = []
    table = []
    for arm in plan.arms:
        names = [r.name for r in plan.runs if r.arm.label == arm.label]
        arms.append({"label": arm.label, "values": arm.values, "runs": names})
        table.append(arm_stats(arm.label, [summaries[n] for n in names if n in summaries]))
    return {
        "spec": plan.spec.to_dict(),
        "preset": plan.base.name,
        "out": str(plan.out),
        "interrupted": interrupted,
        "updated": datetime.now().astimezone().isoformat(timespec="seconds"),
        "arms": arms,
        "runs": [
            {
                "name": r.name,
                "arm": r.arm.label,
                "seed": r.seed,
                "folder": str(r.folder),
                **outcomes.get(r.name, {}),
                "summary": summaries[r.name].to_dict() if r.name in summaries else None,
            }
            for r in plan.runs
        ],
        "table": table,
    }


def write_sweep(folder: Path, document: dict[str, object]) -> None:
    atomic_write_text(folder / SWEEP_FILE, json.dumps(document, indent=2) + "\n")


def read_sweep(sweep_dir: RunDir) -> dict[str, Any] | None:  # open JSON, as write_sweep wrote it
    """A sweep folder's ``sweep.json``, None when it has none; RunError when damaged."""
    path = Path(sweep_dir) / SWEEP_FILE
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: cannot read it ({exc}); the sweep record is damaged") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: expected a JSON object; the sweep record is damaged")
    return data


def arm_groups(sweep_dir: RunDir) -> list[ArmGroup]:
    """The arms of a sweep folder with their run folders (for mean curves per arm); [] if none."""
    data = read_sweep(sweep_dir)
    if not data:
        return []
    base = Path(sweep_dir)
    out = []
    for arm in data.get("arms") or []:
        if isinstance(arm, dict) and isinstance(arm.get("label"), str):
            runs = [base / str(name) for name in arm.get("runs") or []]
            out.append(ArmGroup(arm["label"], dict(arm.get("values") or {}), runs))
    return out
