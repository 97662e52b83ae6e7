"""A crosscoder's folder (``tfx-lab crosscoder train --out``) as a row of the runs table.

The folder (``core/sae/crosscoder_folder.py``) is written all at once::

    cfg.json                          architecture "crosscoder", d_in, d_sae, n_sources,
                                      metadata: hook_name, model_name, sources
    crosscoder_weights.safetensors    W_enc, b_enc, W_dec (F, n, d), b_dec, scale, fired (F)
    trainer_state.json                the step reached and the settings
    metrics.jsonl                     the step records and the end, as an SAE's

so a missing or unreadable file is damage (a RunError naming it, which the
summary turns into a ``damaged`` row). The row says what the crosscoder was
trained on (the run and its snapshot steps, or the models), its last figures
and how many live features are new at the last source, gone from it, and
shared, by the relative decoder norm ``||d_last|| / (||d_first|| + ||d_last||)``
with the thresholds of ``core/sae/crosscoder_norms.py`` (repeated here, as the
file names are, because ``core.sae`` builds on ``core.runs``, never the other
way). Only ``W_dec`` and ``fired`` are read, with numpy from the checked
safetensors layout: no torch, so the runs table stays cheap.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.runs.log import json_int
from tui_lab.core.runs.run_files import METRICS_FILE, RunError, reason
from tui_lab.core.runs.sae_summary import (
    SAE_CONFIG_FILE,
    SAE_STATE_FILE,
    read_json,
    sae_figures,
    sae_records,
    sae_speed,
    sae_status,
)
from tui_lab.core.runs.safetensors_check import safetensors_layout, tensor_entries

if TYPE_CHECKING:
    import numpy as np

CROSSCODER_KIND = "crosscoder"
CROSSCODER_WEIGHTS_FILE = "crosscoder_weights.safetensors"
EXCLUSIVE = 0.1  # r <= EXCLUSIVE: the first source's only (gone); r >= 1 - EXCLUSIVE: the last's (new)
SHARED = 0.2  # |r - 1/2| <= SHARED: shared
# The class counts a row carries, as RunSummary's fields.
COUNT_FIELDS = ("features_new", "features_gone", "features_shared")
# safetensors' dtypes as numpy's (little-endian, as the format stores them); numpy is imported on
# first use so listing runs stays quick where no crosscoder is among them.
_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def is_crosscoder_folder(path: Path) -> bool:
    """A crosscoder's folder: its weights file, or a cfg.json whose architecture says so."""
    if (path / CROSSCODER_WEIGHTS_FILE).exists():
        return True
    try:
        cfg = read_json(path / SAE_CONFIG_FILE)
    except RunError:
        return False
    return cfg is not None and cfg.get("architecture") == CROSSCODER_KIND


def crosscoder_fields(path: Path, now: float | None = None) -> dict[str, object]:
    """The runs table's fields of the crosscoder in ``path``; RunError (one line) when damaged."""
    cfg = crosscoder_config(path)
    d_in, d_sae, n = (_whole(cfg, key, path) for key in ("d_in", "d_sae", "n_sources"))
    meta = cfg.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("hook_name"), str):
        raise RunError(f"{path / SAE_CONFIG_FILE}: metadata.hook_name missing")
    sources = _sources(meta.get("sources"), n, path)
    counts = feature_counts(path / CROSSCODER_WEIGHTS_FILE, d_sae, n, d_in)
    if not (path / METRICS_FILE).is_file():
        raise RunError(f"{path}: no {METRICS_FILE} (a crosscoder's files are written together); train it again")
    last_step, end = sae_records(path)
    state = read_json(path / SAE_STATE_FILE) or {}
    settings = state.get("settings") if isinstance(state.get("settings"), dict) else {}
    assert isinstance(settings, dict)
    step = max(json_int(state.get("step") or 0), json_int((last_step or {}).get("step") or 0))
    updated = max(p.stat().st_mtime for p in (path / METRICS_FILE, path / SAE_CONFIG_FILE))
    status, detail = sae_status(end, step, updated, time.time() if now is None else now)
    elapsed, speed = sae_speed(last_step)
    total = settings.get("steps")
    fields: dict[str, object] = {
        "kind": CROSSCODER_KIND, "task": CROSSCODER_KIND, "preset": CROSSCODER_KIND,
        "diff": {**_trained_on(sources), "hook": meta["hook_name"], "d_sae": d_sae},
        "status": status, "detail": detail, "step": step,
        "total_steps": total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None,
        "elapsed": elapsed, "tokens_per_s": speed, "updated": updated,
        "started": updated - (elapsed or 0.0), "params": 2 * n * d_in * d_sae + d_sae + n * d_in,
        **dict(zip(COUNT_FIELDS, counts, strict=True)),
    }
    fields.update(sae_figures(last_step))
    fields["ce_loss_recovered"] = None  # a crosscoder's training measures none
    return fields


def crosscoder_config(path: Path) -> dict[str, object]:
    """``path``'s cfg.json, a crosscoder's; RunError (one line) when absent, unreadable or another kind's."""
    cfg = read_json(path / SAE_CONFIG_FILE)
    if cfg is None:
        raise RunError(f"{path}: no {SAE_CONFIG_FILE} (a crosscoder folder holds it and {CROSSCODER_WEIGHTS_FILE})")
    if cfg.get("architecture") != CROSSCODER_KIND:
        raise RunError(f"{path / SAE_CONFIG_FILE}: architecture {cfg.get('architecture')!r} beside "
                       f"{CROSSCODER_WEIGHTS_FILE}, not a crosscoder's")
    return cfg


def _whole(cfg: dict[str, object], key: str, path: Path) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RunError(f"{path / SAE_CONFIG_FILE}: {key} must be a whole number >= 1, got {value!r}")
    return value


def _sources(raw: object, n: int, path: Path) -> list[tuple[str, int | None]]:
    """(source, at_step) of each source in cfg.json's metadata, checked against ``n_sources``."""
    where = path / SAE_CONFIG_FILE
    if not isinstance(raw, list) or len(raw) < 2:
        raise RunError(f"{where}: metadata.sources must list two or more sources")
    if len(raw) != n:
        raise RunError(f"{where}: n_sources is {n} but metadata lists {len(raw)} sources")
    out: list[tuple[str, int | None]] = []
    for s in raw:
        step = s.get("at_step") if isinstance(s, dict) else None
        if not isinstance(s, dict) or not isinstance(s.get("source"), str) or not (
                step is None or (isinstance(step, int) and not isinstance(step, bool))):
            raise RunError(f"{where}: each source is {{\"source\": PATH, \"at_step\": N or null}}, got {s!r}")
        out.append((s["source"], step))
    return out


def _trained_on(sources: list[tuple[str, int | None]]) -> dict[str, object]:
    """``run`` and ``steps`` for snapshots of one run; ``sources`` for models (a run's final weights: "final")."""
    if len({src for src, _ in sources}) == 1 and any(step is not None for _, step in sources):
        return {"run": sources[0][0], "steps": ",".join("final" if s is None else str(s) for _, s in sources)}
    return {"sources": " vs ".join(src if step is None else f"{src}@{step}" for src, step in sources)}


def feature_counts(weights: Path, d_sae: int, n: int, d_in: int) -> tuple[int, int, int]:
    """(new, gone, shared) live features between the first source and the last, from the
    decoder's norms; dead features (never fired on training's last rows) are in none."""
    import numpy as np

    dec = _tensor(weights, "W_dec", (d_sae, n, d_in)).astype(np.float64)
    fired = _tensor(weights, "fired", (d_sae,))
    if not np.isfinite(dec).all():
        raise RunError(f"{weights}: W_dec holds NaN or infinite values; train it again")
    first, last = np.linalg.norm(dec[:, 0], axis=-1), np.linalg.norm(dec[:, -1], axis=-1)
    total = first + last
    rel = np.where(total > 0, last / np.where(total > 0, total, 1.0), 0.5)
    alive = fired > 0
    new = alive & (rel >= 1 - EXCLUSIVE)
    gone = alive & (rel <= EXCLUSIVE)
    shared = alive & ~new & ~gone & (np.abs(rel - 0.5) <= SHARED)
    return int(new.sum()), int(gone.sum()), int(shared.sum())


def _tensor(path: Path, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One tensor of a checked safetensors file as a numpy array (RunError naming what is wrong)."""
    import numpy as np

    if not path.exists():
        raise RunError(f"{path.parent}: no {path.name} (a crosscoder's files are written together); train it again")
    header, begin = safetensors_layout(path)
    entry = tensor_entries(header).get(name)
    if entry is None:
        raise RunError(f"{path}: no tensor {name!r}; train it again")
    dtype = _DTYPES.get(str(entry["dtype"]))
    got = tuple(entry["shape"])
    if got != shape:
        raise RunError(f"{path}: {name} has shape {got}, cfg.json says {shape}")
    start, stop = entry["data_offsets"]
    if dtype is None or stop - start != math.prod(shape) * np.dtype(dtype).itemsize:
        raise RunError(f"{path}: {name} is stored as {entry['dtype']} in {stop - start} bytes; not readable")
    try:
        with open(path, "rb") as f:
            f.seek(begin + start)
            raw = f.read(stop - start)
    except OSError as exc:
        raise RunError(f"{path}: cannot read it ({reason(exc)})") from exc
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)
