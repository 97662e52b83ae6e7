"""The run folder: what a training run leaves on disk, saved atomically, loaded safely.

Layout of a run folder::

    config.yaml        every setting (LabConfig.to_yaml(full=True))
    model.safetensors  weights (safetensors save_model: tied weights stored once)
    optimizer.pt       AdamW + scheduler state; read only with torch.load(weights_only=True)
    state.json         step, timings, best accuracy, ... plus a "checkpoint" record
    metrics.jsonl      one JSON object per line, appended
    log.txt            timestamped lines of what happened

Why it is written this way:

- Every file is first written to ``.<name>.tmp-<pid>`` in the same folder,
  flushed and fsynced, then ``os.replace``d over the old one. A crash or a
  full disk therefore leaves either the old file or the new one, never half
  of one, and a failed save never damages the previous checkpoint.
- ``save_checkpoint`` stages all files first and replaces ``state.json``
  last. ``state.json`` records the size and SHA-256 of the weights and
  optimizer files plus a save id that is also stored inside each of them.
  So a loader can tell a *corrupted* file (same save id, other bytes: refused)
  from a save that was cut off between two renames (older ``state.json``
  beside complete newer weights: loaded, with a note), and a run folder
  always loads after a crash at any moment once one save has completed.
- Nothing is ever unpickled: weights are safetensors (a JSON header plus raw
  bytes; the header is checked by hand before safetensors sees the file) and
  ``optimizer.pt`` goes through ``torch.load(weights_only=True)`` only, with no
  fallback when that refuses.
- Loading works on any ``nn.Module`` (models are built elsewhere from
  ``config.yaml``), and every failure is a one-line ``RunError`` that names the
  file and says what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import safetensors
import torch
import yaml
from safetensors.torch import load_model, save_model
from torch import nn

from tui_lab.core.config import ConfigError, LabConfig, from_dict
from tui_lab.core.errors import LabError

CONFIG_FILE = "config.yaml"
WEIGHTS_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
STATE_FILE = "state.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "log.txt"

CHECKPOINT_FORMAT = 1
# Key, in the safetensors metadata and in optimizer.pt, holding the save id.
SAVE_ID_KEY = "tfx_lab_save"
# Key, in the safetensors metadata, holding the settings the weights were trained for
# (see _fingerprint): shapes alone cannot tell rope from sinusoidal, gelu from relu,
# or a reverse model from a copy one.
MODEL_KEY = "tfx_lab_model"
# Settings that may change between save and load: they do not change what the weights mean.
_FINGERPRINT_SKIP = ("dropout", "max_len")
# A safetensors header larger than this is not one we wrote (ours are a few KB).
MAX_HEADER_BYTES = 100 * 2**20

RunDir = str | os.PathLike[str]


class RunError(LabError):
    """A run folder or file the lab cannot save or load; ``str()`` is one line for the user."""


@dataclass(frozen=True)
class LoadedRun:
    """What ``load_run`` read: the validated config, the trainer's state, the folder."""

    config: LabConfig
    state: dict[str, Any]
    path: Path


# --------------------------------------------------------------------------- atomic writes


def _temp_path(path: Path) -> Path:
    """The staging name for ``path``: hidden, same folder (so ``os.replace`` is a rename)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _reason(exc: BaseException) -> str:
    """A short reason for a one-line message ("No space left on device", ...)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, ModuleNotFoundError) and exc.name == "numpy":
        return "numpy is missing (safetensors needs it to save torch tensors; pip install numpy)"
    text = str(exc).strip().splitlines()
    # Library messages can carry terminal styling (torch's weights-only error does).
    first = _CONTROL.sub("", text[0])[:200] if text else ""
    return first or type(exc).__name__


_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x1f\x7f]")


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _fsync_file(path: Path) -> None:
    """Force ``path``'s bytes to disk, so the rename that follows publishes complete data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Persist the renames in ``folder`` (best effort: not every OS allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _stage(path: Path, write: Callable[[Path], None]) -> Path:
    """Write ``path``'s new content to its temp file with ``write`` and fsync it.

    On any failure the temp file is removed, ``path`` is untouched, and a
    ``RunError`` says which file could not be saved and why.
    """
    tmp = _temp_path(path)
    try:
        write(tmp)
        _fsync_file(tmp)
    except BaseException as exc:
        _unlink_quietly(tmp)
        if isinstance(exc, Exception):
            raise RunError(f"cannot save {path}: {_reason(exc)}") from exc
        raise
    return tmp


def _commit(tmp: Path, path: Path) -> None:
    """Atomically replace ``path`` with the staged ``tmp``."""
    try:
        os.replace(tmp, path)
    except BaseException as exc:
        _unlink_quietly(tmp)
        if isinstance(exc, Exception):
            raise RunError(f"cannot save {path}: {_reason(exc)}") from exc
        raise


def _write_bytes_to(data: bytes) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()

    return write


def atomic_write_bytes(path: RunDir, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers only ever see the old or the new bytes."""
    target = Path(path)
    _commit(_stage(target, _write_bytes_to(data)), target)
    _fsync_dir(target.parent)


def atomic_write_text(path: RunDir, text: str) -> None:
    """``atomic_write_bytes`` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _remove_stale_temps(folder: Path) -> None:
    """Delete temp files left by a process that died mid-save (never a live writer's)."""
    for tmp in folder.glob(".*.tmp-*"):
        pid_text = tmp.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid != os.getpid() and not _pid_alive(pid):
            _unlink_quietly(tmp)


# --------------------------------------------------------------------------- saving


def _ensure_folder(run_dir: RunDir) -> Path:
    run = Path(run_dir)
    try:
        run.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunError(
            f"cannot save to {run}: it is a file, not a folder; pick another --out"
        ) from None
    except OSError as exc:
        raise RunError(f"cannot create run folder {run}: {_reason(exc)}") from exc
    return run


def init_run(run_dir: RunDir, config: LabConfig) -> Path:
    """Create the run folder and write ``config.yaml`` before training starts.

    Written up front so a folder that crashes before its first checkpoint
    still says what it was; ``save_checkpoint`` rewrites it only if it changed.
    """
    run = _ensure_folder(run_dir)
    atomic_write_text(run / CONFIG_FILE, config.to_yaml(full=True))
    return run


def new_run_dir(base: RunDir, name: str) -> Path:
    """A fresh, not yet existing folder ``base/<name>-YYYYmmdd-HHMMSS[-N]`` (created empty)."""
    root = _ensure_folder(base)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = root / (f"{name}-{stamp}" if n == 0 else f"{name}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise RunError(f"cannot create run folder {candidate}: {_reason(exc)}") from exc
        return candidate
    raise RunError(f"cannot create a new run folder in {root}: too many runs named {name!r}")


def _fingerprint(config: LabConfig) -> dict[str, Any]:
    """The settings a set of weights belongs to: the model section and the task."""
    model = config.to_dict()["model"]
    out = {f"model.{k}": v for k, v in model.items() if k not in _FINGERPRINT_SKIP}
    out["task.name"] = config.task.name
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_record(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def save_checkpoint(
    run_dir: RunDir,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    state: dict[str, Any],
    config: LabConfig,
) -> dict[str, Any]:
    """Save weights, optimizer and ``state`` as one checkpoint; returns what went into state.json.

    ``model`` must be the plain module (not a ``torch.compile`` wrapper, whose
    parameter names carry an ``_orig_mod.`` prefix). ``state`` must be
    JSON-serialisable; a ``"checkpoint"`` record (save id, time, file sizes and
    SHA-256) is added to it. All files are staged before any is replaced and
    ``state.json`` is replaced last; on failure no temp file is left behind and
    the previous checkpoint is intact.
    """
    run = _ensure_folder(run_dir)
    _remove_stale_temps(run)
    save_id = uuid.uuid4().hex
    staged: list[tuple[Path, Path]] = []
    try:
        config_text = config.to_yaml(full=True)
        config_path = run / CONFIG_FILE
        try:
            current = config_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != config_text:
            staged.append(
                (_stage(config_path, _write_bytes_to(config_text.encode("utf-8"))), config_path)
            )

        weights_path = run / WEIGHTS_FILE
        weights_tmp = _stage(
            weights_path,
            lambda tmp: save_model(
                model,
                str(tmp),
                metadata={SAVE_ID_KEY: save_id, MODEL_KEY: json.dumps(_fingerprint(config))},
            ),
        )
        staged.append((weights_tmp, weights_path))

        payload = {
            "format": CHECKPOINT_FORMAT,
            SAVE_ID_KEY: save_id,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
        }
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        optimizer_path = run / OPTIMIZER_FILE
        optimizer_tmp = _stage(optimizer_path, _write_bytes_to(buffer.getvalue()))
        staged.append((optimizer_tmp, optimizer_path))

        record = dict(state)
        record["checkpoint"] = {
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
        state_path = run / STATE_FILE
        try:
            state_bytes = (json.dumps(record, indent=2) + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise RunError(f"cannot save {state_path}: state is not JSON ({exc})") from exc
        staged.append((_stage(state_path, _write_bytes_to(state_bytes)), state_path))

        # Publish: state.json last, so it never describes files that are not there yet.
        while staged:
            tmp, path = staged[0]
            _commit(tmp, path)
            staged.pop(0)
    finally:
        for tmp, _path in staged:
            _unlink_quietly(tmp)
    _fsync_dir(run)
    return record


# --------------------------------------------------------------------------- metrics and log


def _append_line(path: Path, line: str) -> None:
    """Append one line, first ending a line a crash left unterminated (so it stays alone)."""
    data = line.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    data = b"\n" + data
            f.write(data)
            f.flush()
    except OSError as exc:
        raise RunError(f"cannot save {path}: {_reason(exc)}") from exc


def append_metrics(run_dir: RunDir, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``metrics.jsonl`` and flush it.

    Appending (not rewriting) keeps each call O(1) for long runs; a crash can
    leave only the last line half-written, which ``read_metrics`` skips.
    """
    path = Path(run_dir) / METRICS_FILE
    try:
        line = json.dumps(record, separators=(",", ":")) + "\n"
    except (TypeError, ValueError) as exc:
        raise RunError(f"cannot save {path}: record is not JSON ({exc})") from exc
    _append_line(path, line)


def read_metrics(run_dir: RunDir) -> list[dict[str, Any]]:
    """Every metrics record, in order; ``[]`` when there is no ``metrics.jsonl`` yet.

    Lines that are not a JSON object (a line cut short by a crash) are
    skipped: metrics are for charts, and one lost point must not make a run
    unreadable.
    """
    path = Path(run_dir) / METRICS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RunError(f"cannot read {path}: {_reason(exc)}") from exc
    records = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            records.append(item)
    return records


def log(run_dir: RunDir, message: str) -> None:
    """Append ``<local ISO time> <message>`` to ``log.txt`` (one line; newlines flattened)."""
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    text = " ".join(str(message).split("\n"))
    _append_line(Path(run_dir) / LOG_FILE, f"{stamp} {text}\n")


# --------------------------------------------------------------------------- loading


def _existing_run(run_dir: RunDir) -> Path:
    run = Path(run_dir)
    if not run.exists():
        raise RunError(f"{run}: no such run folder; pass the --out folder of a training run")
    if not run.is_dir():
        raise RunError(
            f"{run}: is a file, not a run folder; pass the --out folder of a training run"
        )
    return run


def _read_state(run: Path) -> dict[str, Any] | None:
    """``state.json`` as a dict, ``None`` when absent; RunError when damaged."""
    path = run / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(
            f"{path}: cannot read it ({_reason(exc)}); the run folder is damaged"
        ) from exc
    try:
        state = json.loads(text)
    except ValueError:
        raise RunError(f"{path}: not valid JSON; the run folder is damaged") from None
    if not isinstance(state, dict):
        raise RunError(f"{path}: expected a JSON object; the run folder is damaged")
    return state


def load_run(run_dir: RunDir) -> LoadedRun:
    """Read and validate ``config.yaml`` and ``state.json`` of a run folder.

    The config goes through ``from_dict`` (source = the file's path), so a
    hand-edited or outdated config is refused with the same one-line messages
    as a preset. A folder without ``state.json`` has no finished checkpoint.
    """
    run = _existing_run(run_dir)
    config_path = run / CONFIG_FILE
    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError(
            f"{run}: not a run folder (no {CONFIG_FILE}); pass the --out folder of a training run"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{config_path}: cannot read it ({_reason(exc)})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise RunError(f"{config_path}: not valid YAML; the run folder is damaged") from None
    try:
        config = from_dict(data, source=str(config_path), name=run.name)
    except ConfigError as exc:
        raise RunError(str(exc)) from None
    state = _read_state(run)
    if state is None:
        raise RunError(
            f"{run}: no finished checkpoint yet ({STATE_FILE} missing); "
            "wait for the first save or train again"
        )
    return LoadedRun(config=config, state=state, path=run)


def _recorded(state: dict[str, Any] | None, name: str) -> tuple[str | None, dict[str, Any] | None]:
    """(save id, file record) that ``state.json`` holds for file ``name``, if any."""
    if not state:
        return None, None
    checkpoint = state.get("checkpoint")
    if not isinstance(checkpoint, dict):
        return None, None
    files = checkpoint.get("files")
    record = files.get(name) if isinstance(files, dict) else None
    return checkpoint.get("save"), record if isinstance(record, dict) else None


def _check_against_state(
    path: Path, state: dict[str, Any] | None, file_save_id: str | None
) -> list[str]:
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
    if size == record.get("bytes") and _sha256(path) == record.get("sha256"):
        return []
    if file_save_id is not None and file_save_id == save_id:
        raise RunError(
            f"{path}: corrupted (its checksum differs from the one in {STATE_FILE}); "
            "restore it from a copy or train again"
        )
    return [
        f"{path.name} is from a later save than {STATE_FILE} (a save was interrupted); "
        f"step {state.get('step', '?') if state else '?'} may lag the weights by one checkpoint"
    ]


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Parse and check a safetensors header by hand, without loading any tensor.

    Done before safetensors opens the file so that a pickle (or any other
    file) where weights belong is named as such, and a truncated file is
    reported as truncated, instead of surfacing a Rust deserialisation error.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(9)
            if size == 0:
                raise RunError(f"{path}: empty (a save was cut short); train again")
            n = int.from_bytes(head[:8], "little") if len(head) >= 8 else 0
            if len(head) < 9 or head[8:9] != b"{" or not 2 <= n <= MAX_HEADER_BYTES:
                raise RunError(
                    f"{path}: {path.name} is not a safetensors file; refusing to load it"
                )
            if 8 + n > size:
                raise RunError(
                    f"{path}: truncated ({size} bytes, header alone needs {8 + n}); train again"
                )
            f.seek(8)
            header_bytes = f.read(n)
    except OSError as exc:
        raise RunError(f"{path}: cannot read it ({_reason(exc)})") from exc
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RunError(
            f"{path}: {path.name} is not a safetensors file; refusing to load it"
        ) from None
    if not isinstance(header, dict):
        raise RunError(f"{path}: {path.name} is not a safetensors file; refusing to load it")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not isinstance(info.get("shape"), list)
        ):
            raise RunError(f"{path}: corrupted header (entry {name!r}); train again")
        end = max(end, offsets[1])
    if 8 + n + end > size:
        raise RunError(f"{path}: truncated ({size} of {8 + n + end} bytes); train again")
    if 8 + n + end < size:
        raise RunError(f"{path}: corrupted ({size - 8 - n - end} unexpected trailing bytes)")
    return header


def _tensor_key(t: torch.Tensor) -> tuple[Any, ...]:
    """Identity of the memory behind ``t``: tied names share one key."""
    ptr = t.untyped_storage().data_ptr() if t.device.type != "meta" else 0
    if ptr == 0:
        return ("id", id(t))
    return (t.device.type, t.device.index, ptr, t.storage_offset(), tuple(t.shape), t.stride())


def _check_fingerprint(path: Path, metadata: Any, run: Path) -> None:
    """Refuse weights trained for other settings than ``config.yaml`` now holds.

    Catches a config edited after training and weights copied in from another
    preset even when every shape still matches. Checkpoints without the record
    (older ones) and configs that do not load (``load_run`` reports those) pass.
    """
    saved_text = metadata.get(MODEL_KEY) if isinstance(metadata, dict) else None
    if not saved_text:
        return
    try:
        saved = json.loads(saved_text)
        data = yaml.safe_load((run / CONFIG_FILE).read_text(encoding="utf-8"))
        current = _fingerprint(from_dict(data, source=str(run / CONFIG_FILE)))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):  # ConfigError is a ValueError
        return
    if not isinstance(saved, dict):
        return
    for key, value in current.items():
        if key in saved and saved[key] != value:
            raise RunError(
                f"{path}: weights were trained with {key}: {saved[key]}, {CONFIG_FILE} now says "
                f"{value}; put {saved[key]} back in {CONFIG_FILE}, or train a new run"
            )


def _check_names_and_shapes(path: Path, header: dict[str, Any], model: nn.Module) -> None:
    """Refuse weights whose names or shapes differ from ``model``'s, naming the first culprit."""
    expected = model.state_dict()
    saved = {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, tensor in expected.items():
        groups.setdefault(_tensor_key(tensor), []).append(name)
    where = f"{path}: weights do not match {CONFIG_FILE}"
    for names in groups.values():
        present = [n for n in names if n in saved]
        if not present:
            raise RunError(f"{where} (the model has {names[0]}, the file does not)")
        for name in present:
            want = tuple(expected[name].shape)
            if saved[name] != want:
                raise RunError(f"{where} ({name}: {list(saved[name])} saved vs {list(want)} built)")
    extra = sorted(set(saved) - set(expected))
    if extra:
        raise RunError(f"{where} (the file has {extra[0]}, the model does not)")


def load_weights(run_dir: RunDir, model: nn.Module) -> list[str]:
    """Load ``model.safetensors`` into ``model`` (built from the run's config.yaml).

    Returns notes for the log (empty when the weights are exactly the ones
    ``state.json`` describes). Raises ``RunError`` for a missing folder or
    file, a file that is not safetensors (never unpickled), a truncated or
    corrupted file, or weights whose names/shapes do not match ``model``.
    Tensors are copied into ``model``'s parameters on whatever device they are.
    """
    run = _existing_run(run_dir)
    path = run / WEIGHTS_FILE
    if not path.is_file():
        if not (run / CONFIG_FILE).is_file():
            raise RunError(
                f"{run}: not a run folder (no {CONFIG_FILE}); pass the --out folder of a training run"
            )
        raise RunError(f"{path}: missing; this run has no saved weights yet (train it first)")
    header = read_safetensors_header(path)
    metadata = header.get("__metadata__")
    file_save_id = metadata.get(SAVE_ID_KEY) if isinstance(metadata, dict) else None
    notes = _check_against_state(path, _read_state(run), file_save_id)
    _check_fingerprint(path, metadata, run)
    _check_names_and_shapes(path, header, model)
    try:
        load_model(model, str(path), strict=True)
    except Exception as exc:  # safetensors raises its own error types as well
        raise RunError(f"{path}: cannot load the weights ({_reason(exc)})") from exc
    return notes


def _check_optimizer_shapes(
    path: Path, saved: dict[str, Any], optimizer: torch.optim.Optimizer
) -> None:
    """Refuse saved moments whose shapes differ from the parameters (load_state_dict does not)."""
    groups = saved.get("param_groups")
    states = saved.get("state")
    if not isinstance(groups, list) or not isinstance(states, dict):
        raise RunError(f"{path}: not an optimizer checkpoint; start the optimizer fresh")
    if len(groups) != len(optimizer.param_groups):
        raise RunError(
            f"{path}: saved for {len(groups)} parameter group(s), this model has "
            f"{len(optimizer.param_groups)}; the weights and optimizer come from different models"
        )
    for saved_group, group in zip(groups, optimizer.param_groups, strict=True):
        ids = saved_group.get("params") if isinstance(saved_group, dict) else None
        if not isinstance(ids, list) or len(ids) != len(group["params"]):
            raise RunError(
                f"{path}: parameter groups differ from this model's; "
                "the weights and optimizer come from different models"
            )
        for pid, param in zip(ids, group["params"], strict=True):
            entry = states.get(pid, {})
            for key, value in entry.items() if isinstance(entry, dict) else ():
                if isinstance(value, torch.Tensor) and value.ndim and value.shape != param.shape:
                    raise RunError(
                        f"{path}: optimizer {key} has shape {list(value.shape)}, parameter has "
                        f"{list(param.shape)}; the weights and optimizer come from different models"
                    )


def load_optimizer(
    run_dir: RunDir,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> list[str]:
    """Restore optimizer (and scheduler) state from ``optimizer.pt`` to resume a run.

    Build the optimizer and scheduler from the run's (possibly edited) config
    first, as for a fresh run. What comes back from the file is *progress*:
    AdamW's moments and step counts, and the scheduler's position. The
    hyperparameters (lr, betas, eps, weight decay, the scheduler's base rates)
    stay the ones just built from the config, so editing ``train.lr`` or
    ``train.steps`` and resuming takes effect instead of being silently
    overwritten by the saved values; the current rate is then recomputed for
    the restored position.

    The file is read only with ``torch.load(weights_only=True)``: anything
    that would need real unpickling is refused and never retried another way.
    Returns notes (a save cut off midway) like ``load_weights``.
    """
    run = _existing_run(run_dir)
    path = run / OPTIMIZER_FILE
    if not path.is_file():
        raise RunError(f"{path}: missing; resume is impossible, start the optimizer fresh")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise RunError(
            f"{path}: cannot be loaded safely ({_reason(exc)}); refusing to unpickle it"
        ) from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("optimizer"), dict):
        raise RunError(
            f"{path}: not an optimizer checkpoint of this lab; start the optimizer fresh"
        )
    notes = _check_against_state(path, _read_state(run), payload.get(SAVE_ID_KEY))
    _check_optimizer_shapes(path, payload["optimizer"], optimizer)
    settings = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    base_lrs = list(scheduler.base_lrs) if scheduler is not None else None
    try:
        optimizer.load_state_dict(payload["optimizer"])
        saved_scheduler = payload.get("scheduler")
        if scheduler is not None and saved_scheduler is not None:
            scheduler.load_state_dict(saved_scheduler)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise RunError(f"{path}: does not fit this optimizer ({_reason(exc)})") from exc
    for group, setting in zip(optimizer.param_groups, settings, strict=True):
        group.update(setting)
    if scheduler is not None and base_lrs is not None:
        scheduler.base_lrs = base_lrs
        if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
            rates = [
                base * fn(scheduler.last_epoch)
                for base, fn in zip(base_lrs, scheduler.lr_lambdas, strict=True)
            ]
            for group, rate in zip(optimizer.param_groups, rates, strict=True):
                group["lr"] = rate
            scheduler._last_lr = rates  # what get_last_lr() reports
    return notes
