"""Which head does the work: exact match with each head ablated alone, beside the baseline.

``ablated_accuracy`` measures one set of heads switched off; ``importance``
does it for every head in turn (one row each, sorted by the drop) with a
progress callback, so the lab can run it in a worker. ``cached_importance``
keeps tables in the run folder (``ablation.json``), keyed by the weights'
sha256 that ``state.json`` records, so a table is never recomputed for the
same checkpoint and never reused for different weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.heads.ablation import HeadRef, ablate, all_heads, head_means
from tui_lab.core.decoding.decode import batch_greedy
from tui_lab.core.runs.atomic import atomic_write_text
from tui_lab.core.tasks.base import TaskBase
from tui_lab.core.tasks.protocol import Task

CACHE_FILE = "ablation.json"
Progress = Callable[[int, int], None]  # (done, total) heads


@dataclass
class HeadRow:
    head: str  # "decoder.0.cross:2"
    exact_match: float
    drop: float  # baseline - exact_match (positive: the head helps)


@dataclass
class ImportanceTable:
    mode: str
    n: int
    baseline: float
    rows: list[HeadRow] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImportanceTable:
        rows = [HeadRow(str(r["head"]), float(r["exact_match"]), float(r["drop"])) for r in data["rows"]]
        return cls(str(data["mode"]), int(data["n"]), float(data["baseline"]), rows)


def probe_means(
    model: nn.Module, task: Task, arch: str, pairs: list[tuple[str, str]], device: torch.device | str
) -> dict[str, Tensor]:
    """Per-head mean outputs over the held-out ``pairs`` (the probe batch for ``mode='mean'``)."""
    if not isinstance(task, TaskBase):
        raise TypeError(f"{task.name} has no (input, answer) pairs to batch: mean ablation reads a lab task's")
    return head_means(model, task.collate(pairs, arch), device)


def ablated_accuracy(
    model: nn.Module,
    task: Task,
    pairs: list[tuple[str, str]],
    max_new_tokens: int,
    heads: Sequence[HeadRef] = (),
    mode: str = "zero",
    means: dict[str, Tensor] | None = None,
) -> float:
    """Exact match of greedy answers on ``pairs`` with ``heads`` ablated (none: the baseline)."""
    with ablate(model, heads, mode, means):
        outs = batch_greedy(model, task, [p[0] for p in pairs], max_new_tokens=max_new_tokens)
    return sum(o == p[1] for o, p in zip(outs, pairs, strict=False)) / max(1, len(pairs))


def importance(
    model: nn.Module,
    task: Task,
    pairs: list[tuple[str, str]],
    max_new_tokens: int,
    mode: str = "zero",
    means: dict[str, Tensor] | None = None,
    progress: Progress | None = None,
) -> ImportanceTable:
    """Every head ablated alone; rows sorted by drop, largest first (ties in model order)."""
    heads = all_heads(model)
    baseline = ablated_accuracy(model, task, pairs, max_new_tokens)
    rows = []
    for i, ref in enumerate(heads):
        acc = ablated_accuracy(model, task, pairs, max_new_tokens, [ref], mode, means)
        rows.append(HeadRow(str(ref), acc, baseline - acc))
        if progress is not None:
            progress(i + 1, len(heads))
    rows.sort(key=lambda r: -r.drop)  # stable: equal drops keep model order
    return ImportanceTable(mode, len(pairs), baseline, rows)


def weights_key(run_dir: str | Path, at_step: int | None = None) -> str | None:
    """The sha256 ``state.json`` records for ``model.safetensors`` (or, with ``at_step``,
    the history index records for that snapshot); None if none is recorded."""
    if at_step is not None:
        from tui_lab.core.runs.snapshots import read_index

        found = [r.get("sha256") for r in read_index(run_dir) if r.get("step") == at_step]
        return str(found[0]) if found and found[0] else None
    try:
        state = json.loads((Path(run_dir) / "state.json").read_text())
        return str(state["checkpoint"]["files"]["model.safetensors"]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cached_importance(
    run_dir: str | Path,
    key: str | None,
    compute: Callable[[], ImportanceTable],
    *,
    mode: str,
    n: int,
) -> tuple[ImportanceTable, bool]:
    """The table for weights ``key`` (from ``ablation.json`` if there), else ``compute()`` and keep it.

    Returns ``(table, from_cache)``. ``key`` None (no recorded hash) computes
    without caching. A history snapshot passes its own file's hash as ``key``.
    The file is rewritten atomically; an unreadable one is treated as empty.
    """
    if key is None:
        return compute(), False
    path = Path(run_dir) / CACHE_FILE
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    slot = f"{key}:{mode}:{n}"
    if isinstance(data.get(slot), dict):
        try:
            return ImportanceTable.from_json(data[slot]), True
        except (KeyError, TypeError, ValueError):
            pass
    table = compute()
    data[slot] = table.to_json()
    try:
        atomic_write_text(path, json.dumps(data, indent=1))
    except OSError:
        pass  # a read-only run folder still gets its table, just not kept
    return table, False

