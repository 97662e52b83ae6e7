"""A transcoder set's folder (``tfx-lab transcoder train --out``) as a row of the runs table.

The folder is circuit-tracer's (``config.yaml`` with ``model_kind: transcoder_set``,
``layer_<i>.safetensors``) or SAELens's (``layer_<i>/cfg.json`` ...), plus the lab's
``transcoder_metrics.json`` (what training measured). Read here with JSON and YAML
only, no torch. The file names are the transcoder code's, repeated (not imported)
because ``core.sae`` builds on ``core.runs``, never the other way.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tui_lab.core.runs.log import finite_number

METRICS_FILE = "transcoder_metrics.json"
SET_CONFIG_FILE = "config.yaml"
TRANSCODER_TASK = "transcoders"
FIGURES = ("explained_variance", "ce_loss_recovered", "l0", "dead_fraction")


def _circuit_tracer_config(path: Path) -> dict[str, object] | None:
    """config.yaml when it is a transcoder set's, else None."""
    try:
        raw = yaml.safe_load((path / SET_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return raw if isinstance(raw, dict) and raw.get("model_kind") == "transcoder_set" else None


def is_transcoder_folder(path: Path) -> bool:
    """A transcoder set's folder: the lab's metrics file, or circuit-tracer's config."""
    return (path / METRICS_FILE).is_file() or (
        (path / SET_CONFIG_FILE).is_file() and _circuit_tracer_config(path) is not None)


def transcoder_fields(path: Path) -> dict[str, object]:
    """The runs table's fields of the set in ``path`` (figures from its metrics file, if any)."""
    try:
        record = json.loads((path / METRICS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    config = _circuit_tracer_config(path) or {}
    lab = config.get("tfx_lab") if isinstance(config.get("tfx_lab"), dict) else {}
    assert isinstance(lab, dict)
    arch = record.get("architecture", lab.get("architecture", "?"))
    whole = record.get("whole") if isinstance(record.get("whole"), dict) else {}
    assert isinstance(whole, dict)
    diff = {"arch": arch, "skip": record.get("skip"), "layers": record.get("n_layers", lab.get("n_layers")),
            "d_tc": record.get("d_tc"), "hook": record.get("feature_input_hook", config.get("feature_input_hook")),
            "model": record.get("model_name", config.get("model_name")), "at_step": record.get("at_step")}
    stamp = (path / METRICS_FILE) if (path / METRICS_FILE).exists() else (path / SET_CONFIG_FILE)
    updated = stamp.stat().st_mtime if stamp.exists() else None
    elapsed = finite_number(record.get("seconds"))
    fields: dict[str, object] = {
        "kind": TRANSCODER_TASK, "task": TRANSCODER_TASK, "preset": f"transcoders {arch}",
        "diff": {k: v for k, v in diff.items() if v is not None}, "status": "finished",
        "detail": f"{diff['layers'] or '?'} layers, reading {diff['hook'] or '?'}",
        "step": int(record.get("steps", 0) or 0), "elapsed": elapsed, "updated": updated,
        "started": updated - (elapsed or 0.0) if updated is not None else None,
    }
    for name in FIGURES:
        fields[name] = finite_number(whole.get(name))
    return fields
