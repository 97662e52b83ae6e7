"""A run's history: weights-only snapshots kept while training, to watch mechanisms form.

``<run>/history/step-<N>.safetensors`` holds the model's weights at step N
(no optimizer: a snapshot is for looking, not for resuming), and
``history/index.json`` lists every complete snapshot with its size and
SHA-256. Both are written through ``atomic.py``, the snapshot first and the
index after it, so a kill at any moment leaves every snapshot the index
names complete and loadable; a snapshot cut off before its index update is
simply not listed. Loading checks the index's size and checksum and the
hand-read safetensors header before safetensors sees the file: nothing is
ever unpickled.

When: ``train.history`` on (the default) plans steps 1, 2, 4, 8, ... and
every evaluation; ``train.history_every: N`` plans every N-th step instead;
``train.history: off`` keeps none. A plan that would pass ``MAX_BYTES`` for
the run is thinned evenly (the last planned step is always kept) and the log
says so; the run's last step is snapshotted at the end while room is left.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from tui_lab.core.config.lab_config import LabConfig, available_memory_bytes
from tui_lab.core.runs import safetensors_check
from tui_lab.core.runs.atomic import (
    atomic_write_text,
    commit,
    remove_stale_temps,
    sha256_file,
    stage,
)
from tui_lab.core.runs.run_files import RunError, reason

if TYPE_CHECKING:
    from typing_extensions import NotRequired

HISTORY_DIR = "history"
INDEX_FILE = "index.json"
MAX_BYTES = 25 * 10**6  # per run, every snapshot together
HEADER_SLACK = 16_384  # a snapshot's safetensors header, generously


def snapshot_name(step: int) -> str:
    return f"step-{step}.safetensors"


def snapshot_bytes(model: nn.Module) -> int:
    """About how large one snapshot of ``model`` is (unique tensors, plus the header)."""
    seen: dict[int, int] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        seen[id(t)] = t.numel() * t.element_size()
    return sum(seen.values()) + HEADER_SLACK


def planned_steps(config: LabConfig) -> list[int]:
    """The steps ``config``'s history setting asks for, before any thinning."""
    train = config.train
    if not train.history:
        return []
    if train.history_every is not None:
        steps = set(range(train.history_every, train.steps + 1, train.history_every))
    else:
        steps = {2**i for i in range(int(math.log2(train.steps)) + 1)}
        steps |= set(range(train.eval_every, train.steps + 1, train.eval_every))
    return sorted(steps | {train.steps})


def thin(steps: list[int], keep: int) -> list[int]:
    """At most ``keep`` of ``steps``, evenly spread, the last one always among them."""
    if keep <= 0:
        return []
    if len(steps) <= keep:
        return steps
    if keep == 1:
        return steps[-1:]
    picks = {round(i * (len(steps) - 1) / (keep - 1)) for i in range(keep)}
    return [steps[i] for i in sorted(picks)]


class SnapshotRecord(TypedDict):
    """One snapshot in the index; ``read_index`` has checked step, file and bytes."""

    step: int
    file: str
    bytes: NotRequired[int]
    sha256: NotRequired[str]


def read_index(run_dir: str | Path) -> list[SnapshotRecord]:
    """The index's snapshot records, sorted by step ([] without a readable index)."""
    path = Path(run_dir) / HISTORY_DIR / INDEX_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    rows = data.get("snapshots") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return []
    good = [r for r in rows if isinstance(r, dict) and isinstance(r.get("step"), int)
            and isinstance(r.get("file"), str) and "/" not in r["file"]
            and isinstance(r.get("bytes", 0), int)]  # a resumed run sums them for its budget
    return sorted((cast(SnapshotRecord, r) for r in good), key=lambda r: r["step"])


def list_snapshots(run_dir: str | Path) -> list[int]:
    """Steps with a snapshot the index lists and whose file is there, ascending."""
    folder = Path(run_dir) / HISTORY_DIR
    return [r["step"] for r in read_index(run_dir) if (folder / r["file"]).is_file()]


def nearest(steps: list[int], step: int) -> list[int]:
    """The snapshot steps just below and just above ``step`` (one or two of them)."""
    below = [s for s in steps if s < step]
    above = [s for s in steps if s > step]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def load_snapshot(run_dir: str | Path, step: int, model: nn.Module) -> None:
    """Load the snapshot of ``step`` into ``model``; RunError (one line) if it cannot.

    A step without a snapshot names the nearest ones. The file must match the
    index's size and SHA-256 and be safetensors with the model's names and shapes.
    """
    records = {r["step"]: r for r in read_index(run_dir)}
    folder = Path(run_dir) / HISTORY_DIR
    if step not in records or not (folder / records[step]["file"]).is_file():
        steps = list_snapshots(run_dir)
        if not steps:
            raise RunError(f"{run_dir}: no history snapshots (train with train.history on)")
        near = ", ".join(str(s) for s in nearest(steps, step))
        raise RunError(f"no snapshot at step {step}; nearest: {near}")
    record = records[step]
    path = folder / record["file"]
    if path.stat().st_size != record.get("bytes") or sha256_file(path) != record.get("sha256"):
        raise RunError(f"{path}: corrupted (its checksum differs from {INDEX_FILE}'s)")
    header = safetensors_check.read_safetensors_header(path)  # refuses anything else
    safetensors_check.check_names_and_shapes(path, header, model)
    try:
        load_model(model, str(path), strict=True)
    except Exception as exc:  # safetensors raises its own error types as well
        raise RunError(f"{path}: cannot load the snapshot ({reason(exc)})") from exc


class SnapshotCache:
    """Snapshots loaded once, checked once, kept in memory: stepping back and forth is cheap.

    ``load(run_dir, step, model)`` does what ``load_snapshot`` does the first
    time (index, size, SHA-256, header, names and shapes) and keeps a copy of
    the weights; later loads of the same file (same index record) copy them
    straight into ``model``. Least recently used first out, once the copies
    pass ``max_bytes`` (default: 64 MB, at most 2% of this machine's memory).
    Thread-safe.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = (
            max_bytes if max_bytes is not None else min(64 * 2**20, available_memory_bytes() // 50)
        )
        self._entries: OrderedDict[tuple[str, int, str], tuple[dict[str, torch.Tensor], int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    def load(self, run_dir: str | Path, step: int, model: nn.Module) -> None:
        """Load ``step``'s snapshot into ``model`` (from memory when it was loaded before)."""
        record = next((r for r in read_index(run_dir) if r["step"] == step), None)
        key = (str(Path(run_dir).resolve()), step, str(record.get("sha256")) if record else "")
        with self._lock:
            entry = self._entries.get(key) if record is not None else None
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None:
            try:
                model.load_state_dict(entry[0], strict=True)
                self.hits += 1
                return
            except (RuntimeError, KeyError):  # another architecture: load the file as usual
                pass
        self.misses += 1
        load_snapshot(run_dir, step, model)
        if record is not None:
            self._keep(key, model)

    def _keep(self, key: tuple[str, int, str], model: nn.Module) -> None:
        clones: dict[tuple[object, ...], torch.Tensor] = {}  # tied weights: one copy, every name
        weights = {}
        for name, t in model.state_dict().items():
            same = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)
            if same not in clones:
                clones[same] = t.detach().clone()
            weights[name] = clones[same]
        size = sum(t.numel() * t.element_size() for t in clones.values())
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            self._bytes -= old[1] if old else 0
            self._entries[key] = (weights, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, (_, freed) = self._entries.popitem(last=False)
                self._bytes -= freed


class History:
    """Snapshots of one training run (rank 0 only); see the module docstring."""

    def __init__(self, run_dir: Path, config: LabConfig, model: nn.Module,
                 log: Callable[[str], None] = lambda message: None, max_bytes: int | None = None) -> None:
        """``max_bytes``: every snapshot of the run together (None: ``MAX_BYTES``; a real
        model's run asks for more)."""
        self.folder = run_dir / HISTORY_DIR
        self.model = model
        self.log = log
        self.records = read_index(run_dir)  # a resumed run keeps its earlier snapshots
        self.size = snapshot_bytes(model)
        plan = planned_steps(config)
        self.enabled = bool(plan)  # train.history: off keeps nothing, not even the last step
        max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self.budget = max_bytes - sum(int(r.get("bytes", 0)) for r in self.records)
        keep = max(0, self.budget // self.size)
        self.plan = set(thin(plan, keep))
        if len(self.plan) < len(plan):
            log(f"history: {self.size / 1e6:.2f} MB a snapshot; keeping {len(self.plan)} of "
                f"{len(plan)} planned snapshots to stay under {max_bytes / 1e6:.0f} MB")

    def after_step(self, step: int) -> None:
        """Snapshot ``step`` if the plan holds it (call after the step's evaluation)."""
        if step in self.plan:
            self.save(step)

    def finish(self, step: int) -> None:
        """Snapshot the run's last step too, if it is new and room is left."""
        if self.enabled and step > 0 and all(r["step"] != step for r in self.records):
            self.save(step)

    def save(self, step: int) -> None:
        """Write ``step``'s snapshot, then the index; a failing disk only ends the history."""
        if self.size > self.budget:
            return
        try:
            self._write(step)
        except (RunError, OSError) as exc:  # snapshots are extras: training goes on
            self.budget = -1
            self.log(f"history: stopped keeping snapshots ({reason(exc)})")

    def _write(self, step: int) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.folder)
        path = self.folder / snapshot_name(step)
        tmp = stage(path, lambda t: save_model(self.model, str(t)))
        size = tmp.stat().st_size
        record: SnapshotRecord = {"step": step, "file": path.name, "bytes": size, "sha256": sha256_file(tmp)}
        commit(tmp, path)
        self.records = [r for r in self.records if r["step"] != step] + [record]
        self.records.sort(key=lambda r: r["step"])
        self.budget -= size
        index = {"format": 1, "snapshots": self.records}
        atomic_write_text(self.folder / INDEX_FILE, json.dumps(index, indent=1) + "\n")  # fsyncs the folder
