"""Checkpoints: weights, optimizer and state saved as one unit, loaded safely.

The run folder's layout is in ``layout.py``; atomic replacement of each
file in ``atomic.py``; the metrics and log files in ``log.py``; reading a
folder in ``folder.py``; the weights header checks in ``safetensors_check.py``.
This module joins them into a save and its two loads:

- ``save_checkpoint`` stages all files first and replaces ``state.json``
  last. ``state.json`` records the size and SHA-256 of the weights and
  optimizer files plus a save id that is also stored inside each of them.
  So a loader can tell a *corrupted* file (same save id, other bytes: refused)
  from a save that was cut off between two renames (older ``state.json``
  beside complete newer weights: loaded, with a note), and a run folder
  always loads after a crash at any moment once one save has completed.
- Nothing is ever unpickled: weights are safetensors (the header is checked
  by hand before safetensors sees the file) and ``optimizer.pt`` goes through
  ``torch.load(weights_only=True)`` only, with no fallback when that refuses.
- Loading works on any ``nn.Module`` (models are built elsewhere from
  ``config.yaml``), and every failure is a one-line ``RunError`` that names the
  file and says what to do.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path

import safetensors
import torch
from safetensors.torch import load_model, save_model
from torch import nn

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.runs import safetensors_check
from tui_lab.core.runs.atomic import (
    atomic_write_text,
    commit,
    fsync_dir,
    remove_stale_temps,
    sha256_file,
    stage,
    unlink_quietly,
    write_bytes_to,
)
from tui_lab.core.runs.folder import (
    RunFolder,
    ensure_folder,
)
from tui_lab.core.runs.run_files import (
    CONFIG_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    WEIGHTS_FILE,
    RunDir,
    RunError,
    reason,
)
from tui_lab.core.runs.safetensors_check import SAVE_ID_KEY

CHECKPOINT_FORMAT = 1



def _file_record(path: Path) -> dict[str, object]:
    return {"bytes": path.stat().st_size, "sha256": sha256_file(path)}


def save_checkpoint(
    run_dir: RunDir,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, object],
    config: LabConfig,
) -> dict[str, object]:
    """Save weights, optimizer and ``state`` as one checkpoint; returns what went into state.json.

    ``model`` must be the plain module (not a ``torch.compile`` wrapper, whose
    parameter names carry an ``_orig_mod.`` prefix). ``state`` must be
    JSON-serialisable; a ``"checkpoint"`` record (save id, time, file sizes and
    SHA-256) is added to it. All files are staged before any is replaced and
    ``state.json`` is replaced last; on failure no temp file is left behind and
    the previous checkpoint is intact.
    """
    run = ensure_folder(run_dir)
    remove_stale_temps(run)
    save_id = uuid.uuid4().hex
    staged: list[tuple[Path, Path]] = []
    try:
        staged += _staged_config(run, config)

        weights_tmp = _stage_weights(run, model, config, save_id)
        staged.append((weights_tmp, run / WEIGHTS_FILE))
        optimizer_tmp = _stage_optimizer(run, optimizer, save_id)
        staged.append((optimizer_tmp, run / OPTIMIZER_FILE))
        record = {**state, "checkpoint": _checkpoint_record(save_id, weights_tmp, optimizer_tmp)}
        state_path = run / STATE_FILE
        try:
            state_bytes = (json.dumps(record, indent=2) + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise RunError(f"cannot save {state_path}: state is not JSON ({exc})") from exc
        staged.append((stage(state_path, write_bytes_to(state_bytes)), state_path))

        # Publish: state.json last, so it never describes files that are not there yet.
        while staged:
            tmp, path = staged[0]
            commit(tmp, path)
            staged.pop(0)
    finally:
        for tmp, _path in staged:
            unlink_quietly(tmp)
    fsync_dir(run)
    return record


def _stage_weights(run: Path, model: nn.Module, config: LabConfig, save_id: str) -> Path:
    """model.safetensors staged, stamped with the save id and the settings' fingerprint."""
    fingerprint = json.dumps(safetensors_check.fingerprint(config))
    metadata = {SAVE_ID_KEY: save_id, safetensors_check.MODEL_KEY: fingerprint}
    return stage(run / WEIGHTS_FILE, lambda tmp: save_model(model, str(tmp), metadata=metadata))


def _stage_optimizer(run: Path, optimizer: torch.optim.Optimizer, save_id: str) -> Path:
    """optimizer.pt staged. The learning rate is not saved: the loop sets it from the
    schedule every step."""
    payload = {"format": CHECKPOINT_FORMAT, SAVE_ID_KEY: save_id, "optimizer": optimizer.state_dict()}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return stage(run / OPTIMIZER_FILE, write_bytes_to(buffer.getvalue()))


def _staged_config(run: Path, config: LabConfig) -> list[tuple[Path, Path]]:
    """config.yaml staged when it changed (a resumed run usually rewrites the same text)."""
    config_text = config.to_yaml(full=True)
    config_path = run / CONFIG_FILE
    try:
        current = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current == config_text:
        return []
    return [(stage(config_path, write_bytes_to(config_text.encode("utf-8"))), config_path)]


def _checkpoint_record(save_id: str, weights_tmp: Path, optimizer_tmp: Path) -> dict[str, object]:
    """state.json's ``checkpoint``: the save id, when, the library versions, each file's size and hash."""
    return {
        "format": CHECKPOINT_FORMAT,
        "save": save_id,
        "saved_at": time.time(),
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "files": {
            WEIGHTS_FILE: _file_record(weights_tmp),
            OPTIMIZER_FILE: _file_record(optimizer_tmp),
        },
    }


def record_end(run_dir: RunDir, end: dict[str, object] | None) -> None:
    """Write how the run ended into ``state.json`` (``None``: it is training again).

    Kept beside the checkpoint record rather than in it: a run that ends on a
    nan loss or a device fault saves no checkpoint, and its end must still be
    told. A folder with no ``state.json`` yet is left alone.
    """
    path = Path(run_dir) / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(state, dict) or state.get("end") == end:
        return
    if end is None:
        state.pop("end", None)
    else:
        state["end"] = end
    atomic_write_text(path, json.dumps(state, indent=2) + "\n")


def _recorded(state: dict[str, object], name: str) -> tuple[str | None, dict[str, object] | None]:
    """(save id, file record) that ``state.json`` holds for file ``name``, if any."""
    checkpoint = state.get("checkpoint")
    if not isinstance(checkpoint, dict):
        return None, None
    files = checkpoint.get("files")
    record = files.get(name) if isinstance(files, dict) else None
    return checkpoint.get("save"), record if isinstance(record, dict) else None


def _check_against_state(path: Path, state: dict[str, object], file_save_id: object) -> list[str]:
    """Compare ``path`` with the size/SHA-256 ``state.json`` recorded for it.

    Same bytes: fine. Different bytes from a different save: the save that
    wrote this file was cut off before it replaced ``state.json``; the file is
    complete (it was renamed into place whole), so it loads, with a note.
    Different bytes but the same save id: the file changed after it was
    written (disk or copy damage), refused.
    """
    save_id, record = _recorded(state, path.name)
    if record is None:
        return []
    size = path.stat().st_size
    if size == record.get("bytes") and sha256_file(path) == record.get("sha256"):
        return []
    if file_save_id is not None and file_save_id == save_id:
        raise RunError(
            f"{path}: corrupted (its checksum differs from the one in {STATE_FILE}); "
            "restore it from a copy or train again"
        )
    return [
        f"{path.name} is from a later save than {STATE_FILE} (a save was interrupted); "
        f"step {state.get('step', '?')} may lag the weights by one checkpoint"
    ]


def _folder(run: RunDir | RunFolder) -> RunFolder:
    return run if isinstance(run, RunFolder) else RunFolder.read(run, need_state=False)


def load_weights(run: RunDir | RunFolder, model: nn.Module) -> list[str]:
    """Load ``model.safetensors`` into ``model`` (built from the run's config.yaml).

    ``run`` is a folder's path or the ``RunFolder`` already read. Returns notes
    for the log (empty when the weights are exactly the ones ``state.json``
    describes). Raises ``RunError`` for a missing folder or file, a file that
    is not safetensors (never unpickled), a truncated or corrupted file, or
    weights whose settings, names or shapes do not match the config and
    ``model``. Tensors are copied into ``model``'s parameters on whatever
    device they are.
    """
    folder = _folder(run)
    path = folder.weights_path
    header = folder.weights_header
    meta = safetensors_check.metadata(header)
    notes = _check_against_state(path, folder.state, meta.get(SAVE_ID_KEY))
    safetensors_check.check_fingerprint(path, meta, folder.config)
    safetensors_check.check_names_and_shapes(path, header, model)
    try:
        load_model(model, str(path), strict=True)
    except Exception as exc:  # safetensors raises its own error types as well
        raise RunError(f"{path}: cannot load the weights ({reason(exc)})") from exc
    return notes


def _check_optimizer_shapes(path: Path, saved: dict[str, object], optimizer: torch.optim.Optimizer) -> None:
    """Refuse saved moments whose shapes differ from the parameters (load_state_dict does not)."""
    groups = saved.get("param_groups")
    states = saved.get("state")
    if not isinstance(groups, list) or not isinstance(states, dict):
        raise RunError(f"{path}: not an optimizer checkpoint; start the optimizer fresh")
    other = "the weights and optimizer come from different models"
    if len(groups) != len(optimizer.param_groups):
        raise RunError(
            f"{path}: saved for {len(groups)} parameter group(s), this model has "
            f"{len(optimizer.param_groups)}; {other}"
        )
    for saved_group, group in zip(groups, optimizer.param_groups, strict=True):
        ids = saved_group.get("params") if isinstance(saved_group, dict) else None
        if not isinstance(ids, list) or len(ids) != len(group["params"]):
            raise RunError(f"{path}: parameter groups differ from this model's; {other}")
        for pid, param in zip(ids, group["params"], strict=True):
            entry = states.get(pid, {})
            for key, value in entry.items() if isinstance(entry, dict) else ():
                if isinstance(value, torch.Tensor) and value.ndim and value.shape != param.shape:
                    raise RunError(
                        f"{path}: optimizer {key} has shape {list(value.shape)}, parameter has "
                        f"{list(param.shape)}; {other}"
                    )


def load_optimizer(run: RunDir | RunFolder, optimizer: torch.optim.Optimizer) -> list[str]:
    """Restore AdamW's moments and step counts from ``optimizer.pt`` to resume a run.

    Build the optimizer from the run's (possibly edited) config first, as for
    a fresh run. Only *progress* comes back from the file; the hyperparameters
    (lr, betas, eps, weight decay) stay the ones just built from the config,
    so editing ``train.lr`` and resuming takes effect instead of being
    silently overwritten by the saved values. The training loop sets each
    step's rate from the schedule, so nothing about the schedule is restored;
    files from before that (with a ``"scheduler"`` entry) load the same way.

    The file is read only with ``torch.load(weights_only=True)``: anything
    that would need real unpickling is refused and never retried another way.
    Returns notes (a save cut off midway) like ``load_weights``.
    """
    folder = _folder(run)
    path = folder.path / OPTIMIZER_FILE
    if not path.is_file():
        raise RunError(f"{path}: missing; resume is impossible, start the optimizer fresh")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise RunError(f"{path}: cannot be loaded safely ({reason(exc)}); refusing to unpickle it") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("optimizer"), dict):
        raise RunError(f"{path}: not an optimizer checkpoint of this lab; start the optimizer fresh")
    notes = _check_against_state(path, folder.state, payload.get(SAVE_ID_KEY))
    _check_optimizer_shapes(path, payload["optimizer"], optimizer)
    settings = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    try:
        optimizer.load_state_dict(payload["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise RunError(f"{path}: does not fit this optimizer ({reason(exc)})") from exc
    for group, setting in zip(optimizer.param_groups, settings, strict=True):
        params = group["params"]
        group.clear()  # drops saved-only keys too (an old LambdaLR's "initial_lr")
        group.update({"params": params, **setting})
    return notes
