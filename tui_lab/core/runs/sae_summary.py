"""An SAE's training folder (``tfx-lab sae train --out``) as a row of the runs table.

The folder holds SAELens's files plus what resuming needs (``core/sae/checkpoint.py``)::

    cfg.json  sae_weights.safetensors  trainer_state.json  metrics.jsonl  ...

and no ``config.yaml``. It is read here as plainly as a run folder is in
``summary.py``: JSON and the safetensors header only, no torch, so the runs
table stays cheap. The file names are the SAE package's; they are repeated
here (not imported) because ``core.sae`` builds on ``core.runs``, never the
other way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from tui_lab.core.runs.log import finite_number, read_metrics
from tui_lab.core.runs.run_files import CONFIG_FILE, RunError, reason
from tui_lab.core.runs.status import RUNNING_WINDOW_S

SAE_CONFIG_FILE = "cfg.json"
SAE_WEIGHTS_FILE = "sae_weights.safetensors"
SAE_STATE_FILE = "trainer_state.json"
SAE_TASK = "sae"

# The figures of an SAE's last step record, as the summary carries them.
SAE_FIGURES = ("explained_variance", "ce_loss_recovered", "l0", "dead_fraction")

# How trainer's end reasons read as the runs table's statuses.
_STATUS = {"done": "finished", "source ended": "finished", "stopped": "stopped", "interrupted": "stopped"}


def is_sae_folder(path: Path) -> bool:
    """An SAE's folder: SAELens's ``cfg.json`` and no run config beside it."""
    return (path / SAE_CONFIG_FILE).is_file() and not (path / CONFIG_FILE).exists()


def read_json(path: Path) -> dict[str, object] | None:
    """A JSON object file; None when absent; RunError naming the file when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunError(f"{path}: cannot read it ({reason(exc)})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a JSON object")
    return data


def sae_architecture(cfg: dict[str, object]) -> object:
    """The architecture an SAE was trained as: a BatchTopK or Matryoshka SAE is written as
    JumpReLU (as SAELens writes it) and says what it was trained as in its metadata."""
    trained = _object(cfg.get("metadata")).get("training_architecture")
    return trained if trained is not None else cfg.get("architecture")


def sae_description(cfg: dict[str, object]) -> dict[str, object]:
    """What an SAE is, as the table's difference column shows it."""
    meta = _object(cfg.get("metadata"))
    details = _object(meta.get("training_architecture_details"))
    out = {"arch": sae_architecture(cfg), "d_sae": cfg.get("d_sae"), "k": cfg.get("k", details.get("k")),
           "widths": details.get("matryoshka_widths"), "hook": meta.get("hook_name"), "model": meta.get("model_name")}
    return {key: value for key, value in out.items() if value is not None}


def sae_totals(state: dict[str, object] | None) -> tuple[int, int | None]:
    """(steps done, steps planned) from ``trainer_state.json``: tokens over batch size."""
    if state is None:
        return 0, None
    settings = _object(state.get("settings"))
    tokens, batch = _count(settings.get("tokens")), _count(settings.get("batch_size"))
    return _count(state.get("step")), math.ceil(tokens / batch) if tokens and batch else None


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _count(value: object) -> int:
    """A positive whole number, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def sae_records(run: Path) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """(last step record, end record) of ``metrics.jsonl``; the end only when it is the last word."""
    last_step, end = None, None
    for rec in read_metrics(run):
        kind = rec.get("kind")
        if kind == "step":
            last_step, end = rec, None
        elif kind == "end":
            end = rec
    return last_step, end


def sae_status(end: dict[str, object] | None, step: int, last_write: float | None, now: float) -> tuple[str, str]:
    """(status, detail): how training ended, that it runs, or that it died without a word."""
    if end is not None:
        why = str(end.get("reason"))
        return _STATUS.get(why, "stopped"), f"{why} at step {end.get('step', step)}"
    if last_write is not None and now - last_write < RUNNING_WINDOW_S:
        return "running", f"last written {max(0.0, now - last_write):.0f} s ago"
    return "stopped", f"no closing record: the process ended at step {step} without one (killed?)"


def sae_figures(last_step: dict[str, object] | None) -> dict[str, float | None]:
    """The last step's explained variance, CE loss recovered, L0 and dead fraction."""
    rec = last_step or {}
    return {name: finite_number(rec.get(name)) for name in SAE_FIGURES}


def figures_text(figures: dict[str, float | None]) -> str:
    """``"EV 0.922 · CE rec 95.1% · L0 16.0 · dead 0.0%"``: the figures an SAE has."""
    formats = (("explained_variance", "EV {:.3f}"), ("ce_loss_recovered", "CE rec {:.1%}"),
               ("l0", "L0 {:.1f}"), ("dead_fraction", "dead {:.1%}"))
    return " · ".join(fmt.format(figures[name]) for name, fmt in formats if figures.get(name) is not None)


def sae_speed(last_step: dict[str, object] | None) -> tuple[float | None, float | None]:
    """(elapsed seconds, tokens per second) of the last step record."""
    rec = last_step or {}
    elapsed, tokens = finite_number(rec.get("elapsed")), finite_number(rec.get("tokens"))
    speed = tokens / elapsed if elapsed and tokens is not None else None
    return elapsed, speed
