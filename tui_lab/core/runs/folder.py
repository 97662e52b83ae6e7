"""Run folders: where a new one goes, and ``RunFolder``, one read of an existing one.

``RunFolder.read(path)`` reads ``config.yaml`` (validated like a preset) and
``state.json`` once; the weights header is read the first time it is asked
for. Loading weights or the optimizer, resuming, ``eval`` and ``decode`` all
take that one object instead of each re-reading the files.

Kept free of torch: the command line and the lab name and list runs cheaply.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

from tui_lab.core.config.lab_config import ConfigError, LabConfig, from_dict
from tui_lab.core.config.strict_yaml import parse_yaml
from tui_lab.core.runs.atomic import atomic_write_text
from tui_lab.core.runs.log import json_int
from tui_lab.core.runs.run_files import (
    CONFIG_FILE,
    STATE_FILE,
    WEIGHTS_FILE,
    RunDir,
    RunError,
    reason,
)
from tui_lab.core.runs.safetensors_check import read_safetensors_header

RUNS_ENV = "TFX_LAB_RUNS"  # where new runs go when no folder is named
_NO_RUN = "pass the --out folder of a training run"


def runs_root(override: RunDir | None = None) -> Path:
    """The folder that holds run folders: ``override``, else ``$TFX_LAB_RUNS``, else ``./runs``."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(RUNS_ENV)
    return Path(env).expanduser() if env else Path("runs")


def ensure_folder(run_dir: RunDir) -> Path:
    """Create ``run_dir`` (and its parents) if needed; RunError when that is impossible."""
    run = Path(run_dir)
    try:
        run.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunError(
            f"cannot save to {run}: it is a file, not a folder; pick another --out"
        ) from None
    except OSError as exc:
        raise RunError(f"cannot create run folder {run}: {reason(exc)}") from exc
    return run


def new_run_dir(base: RunDir | None, name: str) -> Path:
    """A fresh folder ``base/<name>-YYYYmmdd-HHMMSS[-N]``, created empty.

    ``base`` None means ``runs_root()``. Creating the folder is what claims the
    name, so two runs started in the same second never share one.
    """
    root = ensure_folder(runs_root(base))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = root / (f"{name}-{stamp}" if n == 0 else f"{name}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise RunError(f"cannot create run folder {candidate}: {reason(exc)}") from exc
        return candidate
    raise RunError(f"cannot create a new run folder in {root}: too many runs named {name!r}")


def init_run(run_dir: RunDir, config: LabConfig) -> Path:
    """Create the run folder and write ``config.yaml`` before training starts.

    Written up front so a folder that crashes before its first checkpoint
    still says what it was; ``save_checkpoint`` rewrites it only if it changed.
    """
    run = ensure_folder(run_dir)
    atomic_write_text(run / CONFIG_FILE, config.to_yaml(full=True))
    return run


def existing_run(run_dir: RunDir) -> Path:
    """``run_dir`` as a Path if it is a folder; RunError naming what it is otherwise."""
    run = Path(run_dir)
    if not run.exists():
        raise RunError(f"{run}: no such run folder; {_NO_RUN}")
    if not run.is_dir():
        raise RunError(f"{run}: is a file, not a run folder; {_NO_RUN}")
    return run


def _read_config(run: Path) -> LabConfig:
    path = run / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError(f"{run}: not a run folder (no {CONFIG_FILE}); {_NO_RUN}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read it ({reason(exc)})") from exc
    try:
        data = parse_yaml(text, str(path))
    except ConfigError as exc:
        if exc.field is not None:  # valid YAML with a key given twice: say which
            raise RunError(str(exc)) from None
        raise RunError(f"{path}: not valid YAML; the run folder is damaged") from None
    try:
        return from_dict(data, source=str(path), name=run.name)
    except ConfigError as exc:
        raise RunError(str(exc)) from None


def _read_state(run: Path) -> dict[str, object] | None:
    """``state.json`` as a dict, ``None`` when absent; RunError when damaged."""
    path = run / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read it ({reason(exc)}); the run folder is damaged") from exc
    try:
        state = json.loads(text)
    except ValueError:
        raise RunError(f"{path}: not valid JSON; the run folder is damaged") from None
    if not isinstance(state, dict):
        raise RunError(f"{path}: expected a JSON object; the run folder is damaged")
    return state


@dataclass(frozen=True)
class RunFolder:
    """One read of a run folder: its validated config, its state, its weights header.

    ``config`` goes through ``from_dict`` (source = the file's path, name = the
    folder's), so a hand-edited or outdated config is refused with the same
    one-line messages as a preset. ``state`` is ``state.json``; it is empty
    only for a folder read with ``need_state=False`` before its first save.
    """

    path: Path
    config: LabConfig
    state: dict[str, object]

    @classmethod
    def read(cls, run_dir: RunDir, *, need_state: bool = True) -> RunFolder:
        """Read ``config.yaml`` and ``state.json``; RunError with one line if either is bad.

        A folder without ``state.json`` has no finished checkpoint: refused
        unless ``need_state`` is False (loading weights alone does not need it).
        """
        run = existing_run(run_dir)
        config = _read_config(run)
        state = _read_state(run)
        if state is None and need_state:
            raise RunError(
                f"{run}: no finished checkpoint yet ({STATE_FILE} missing); "
                "wait for the first save or train again"
            )
        return cls(path=run, config=config, state=state or {})

    @property
    def step(self) -> int:
        """The step of the last finished checkpoint (0 before any)."""
        return json_int(self.state.get("step", 0))

    @property
    def preset_config(self) -> LabConfig:
        """``config`` named after the preset it was trained from (config.yaml holds no name)."""
        preset = self.state.get("preset")
        return dataclasses.replace(self.config, name=preset) if isinstance(preset, str) else self.config

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    @cached_property
    def weights_header(self) -> dict[str, object]:
        """The checked safetensors header of ``model.safetensors`` (read on first use)."""
        path = self.weights_path
        if not path.exists() and not path.is_symlink():  # a FIFO or symlink there is refused by name
            raise RunError(f"{path}: missing; this run has no saved weights yet (train it first)")
        return read_safetensors_header(path)


def load_run(run_dir: RunDir) -> RunFolder:
    """``RunFolder.read(run_dir)``: config and state of a run with a finished checkpoint."""
    return RunFolder.read(run_dir)
