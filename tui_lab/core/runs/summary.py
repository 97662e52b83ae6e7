"""One row per run folder: what it is, how it differs from its preset, how it went.

``summarize_run(path)`` never raises for a bad folder: a folder the lab cannot
read is a row with status ``damaged`` and the reason. ``list_run_folders(root)``
finds the run folders under a directory (a sweep folder's runs one level
down). Both stay cheap enough for a table of hundreds of runs: no torch, no
weights, ``config.yaml`` through libyaml, and of ``metrics.jsonl`` only the
evaluation lines and the last step line are parsed.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from tui_lab.core.config.diff import (
    config_difference,
    default_settings,
    difference_label,
    flat_settings,
)
from tui_lab.core.config.lab_config import ConfigError, LabConfig
from tui_lab.core.config.strict_yaml import parse_yaml
from tui_lab.core.runs.crosscoder_summary import (
    CROSSCODER_WEIGHTS_FILE,
    crosscoder_fields,
    is_crosscoder_folder,
)
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.log import finite_number, json_int
from tui_lab.core.runs.run_files import (
    CONFIG_FILE,
    LOG_FILE,
    METRICS_FILE,
    STATE_FILE,
    WEIGHTS_FILE,
    RunDir,
    RunError,
)
from tui_lab.core.runs.sae_summary import (
    SAE_CONFIG_FILE,
    SAE_FIGURES,
    SAE_STATE_FILE,
    SAE_TASK,
    SAE_WEIGHTS_FILE,
    figures_text,
    is_sae_folder,
    read_json,
    sae_architecture,
    sae_description,
    sae_figures,
    sae_records,
    sae_speed,
    sae_status,
    sae_totals,
)
from tui_lab.core.runs.safetensors_check import read_safetensors_header
from tui_lab.core.runs.status import parse_stamp, read_log_ends, status_of
from tui_lab.core.runs.transcoder_summary import METRICS_FILE as TRANSCODER_METRICS_FILE
from tui_lab.core.runs.transcoder_summary import is_transcoder_folder, transcoder_fields

# Files whose presence makes a folder a run folder (a damaged one if config.yaml is missing);
# an SAE's training folder is one by its cfg.json, a crosscoder's by its weights too.
_MARKERS = (CONFIG_FILE, STATE_FILE, METRICS_FILE, WEIGHTS_FILE, SAE_CONFIG_FILE, TRANSCODER_METRICS_FILE,
            CROSSCODER_WEIGHTS_FILE)


@dataclass
class RunSummary:
    """A run folder as one table row. Figures are None where the run has none yet."""

    path: str
    name: str
    status: str
    detail: str = ""  # the closing message, or why the folder is damaged
    # "run" (a model's training), "sae" (``tfx-lab sae train``), "transcoders" (``tfx-lab transcoder
    # train``) or "crosscoder" (``tfx-lab crosscoder train``)
    kind: str = "run"
    preset: str | None = None
    task: str | None = None
    diff: dict[str, object] = field(default_factory=dict)
    step: int = 0
    total_steps: int | None = None
    best_exact_match: float | None = None
    best_val_loss: float | None = None
    bits_per_char: float | None = None  # char-lm: best_val_loss / ln 2
    target: float | None = None
    steps_to_target: int | None = None
    seconds_to_target: float | None = None
    elapsed: float | None = None
    tokens_per_s: float | None = None
    params: int | None = None
    started: float | None = None  # epoch seconds
    updated: float | None = None
    # An SAE's figures at its last logged step (None for a model's run).
    explained_variance: float | None = None
    ce_loss_recovered: float | None = None
    l0: float | None = None
    dead_fraction: float | None = None
    # A crosscoder's live features new at its last source, gone from it, shared (None for others).
    features_new: int | None = None
    features_gone: int | None = None
    features_shared: int | None = None

    @property
    def label(self) -> str:
        """How the run differs from its preset, for legends; its name when nothing does."""
        return difference_label(self.diff) or self.name

    @property
    def sae_text(self) -> str:
        """An SAE's (or a crosscoder's) last figures on one line ("" for a model's run)."""
        text = figures_text({name: getattr(self, name) for name in SAE_FIGURES})
        if self.features_new is None:
            return text
        counts = f"new {self.features_new} · gone {self.features_gone} · shared {self.features_shared}"
        return f"{text} · {counts}" if text else counts

    @property
    def is_lm(self) -> bool:
        return self.task == "char-lm"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: every field, plus ``label`` and ``date`` (ISO, local time)."""
        out = asdict(self)
        out["label"] = difference_label(self.diff)
        out["date"] = _iso(self.started)
        return out


CSV_COLUMNS = (
    "name", "kind", "preset", "label", "status", "step", "total_steps", "best_exact_match",
    "best_val_loss", "bits_per_char", "steps_to_target", "seconds_to_target", "elapsed",
    "tokens_per_s", "params", "explained_variance", "ce_loss_recovered", "l0", "dead_fraction",
    "features_new", "features_gone", "features_shared", "date", "path", "detail",
)


def csv_row(summary: RunSummary) -> dict[str, object]:
    """The ``CSV_COLUMNS`` of a summary (the config difference as its label text)."""
    data = summary.to_dict()
    return {c: "" if data.get(c) is None else data[c] for c in CSV_COLUMNS}


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch).isoformat(timespec="seconds") if epoch else None


def is_run_folder(path: Path) -> bool:
    """A folder holding any of a run's files (config, state, metrics or weights)."""
    return any((path / name).exists() for name in _MARKERS)


def list_run_folders(root: RunDir, depth: int = 2) -> list[Path]:
    """Run folders under ``root``, sorted: ``root`` itself if it is one, else its
    sub-folders that are, looking ``depth`` levels down (a sweep's runs are in
    ``root/sweep/run``). Hidden folders (a sweep's ``.sweep``) are skipped."""
    base = Path(root)
    if is_run_folder(base):
        return [base]
    found: list[Path] = []
    _walk(base, depth, found)
    return sorted(found)


def _walk(folder: Path, depth: int, found: list[Path]) -> None:
    if depth <= 0:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        sub = Path(entry.path)
        if is_run_folder(sub):
            found.append(sub)
        else:
            _walk(sub, depth - 1, found)


def summarize_runs(root: RunDir, depth: int = 2) -> list[RunSummary]:
    """``summarize_run`` for every run folder under ``root``; names are relative to it."""
    base = Path(root)
    bases: dict[str | None, dict[str, object]] = {}
    out = []
    for path in list_run_folders(base, depth):
        name = path.name if path == base else str(path.relative_to(base))
        out.append(summarize_run(path, name=name, bases=bases))
    return out


def summarize_run(
    path: RunDir, name: str | None = None, bases: dict[str | None, dict[str, object]] | None = None
) -> RunSummary:
    """One run folder as a row; status ``damaged`` with the reason when it cannot be read.

    ``bases`` caches each preset's settings across calls (summarising a table
    loads each preset once).
    """
    run = Path(path)
    row = RunSummary(path=str(run), name=name or run.name, status="damaged")
    try:
        _fill(row, run, {} if bases is None else bases)
    except (RunError, ConfigError) as exc:
        row.status, row.detail = "damaged", str(exc)
    except OSError as exc:  # a folder vanishing under us, a permission: still one row
        row.status, row.detail = "damaged", f"{run}: cannot read it ({exc.strerror or exc})"
    return row


def _fill(row: RunSummary, run: Path, bases: dict[str | None, dict[str, object]]) -> None:
    if not run.is_dir():
        raise RunError(f"{run}: not a run folder")
    if is_crosscoder_folder(run):  # before the SAE check: its cfg.json is an SAE's in form
        for name, value in crosscoder_fields(run).items():
            setattr(row, name, value)
        return
    if is_sae_folder(run):
        _fill_sae(row, run)
        return
    if is_transcoder_folder(run):  # a transcoder set (tfx-lab transcoder train)
        for name, value in transcoder_fields(run).items():
            setattr(row, name, value)
        return
    folder = RunFolder.read(run, need_state=False)  # one read of config.yaml and state.json
    config, state = folder.config, folder.state
    settings = flat_settings(config)
    stamp, last_line, log_mtime = read_log_ends(run / LOG_FILE)
    metrics_path = run / METRICS_FILE
    raw, metrics_mtime = _read_bytes(metrics_path)
    state_mtime = _mtime(run / STATE_FILE)
    writes = [t for t in (metrics_mtime, state_mtime, log_mtime) if t is not None]
    row.updated = max(writes) if writes else None
    row.started = parse_stamp(stamp) or _mtime(run / CONFIG_FILE)
    train = config.train
    preset = state.get("preset") if state else None
    row.preset = preset if isinstance(preset, str) else None
    row.task = config.task.name
    row.total_steps = train.steps
    row.target = train.target_accuracy
    row.diff = config_difference(settings, _base_settings(row.preset, bases, run))
    row.status, row.detail = status_of(last_line, state, train, row.updated)
    _fill_metrics(row, raw or b"")
    if state:
        if row.status != "running" or not row.step:
            row.step = json_int(state.get("step") or 0)
        if row.elapsed is None or row.status != "running":
            elapsed = state.get("elapsed")
            row.elapsed = float(elapsed) if isinstance(elapsed, (int, float)) else row.elapsed
    if row.best_val_loss is not None and row.is_lm:
        row.bits_per_char = row.best_val_loss / math.log(2)
    row.params = _params(run)


def _fill_sae(row: RunSummary, run: Path, now: float | None = None) -> None:
    """An SAE's training folder: what it is, how far it went, its last figures."""
    cfg = read_json(run / SAE_CONFIG_FILE) or {}
    row.kind = row.task = SAE_TASK
    row.preset = f"sae {sae_architecture(cfg) or '?'}"
    row.diff = sae_description(cfg)
    row.step, row.total_steps = sae_totals(read_json(run / SAE_STATE_FILE))
    last_step, end = sae_records(run)
    if last_step is not None:
        row.step = max(row.step, json_int(last_step.get("step") or 0))
    writes = [t for t in (_mtime(run / METRICS_FILE), _mtime(run / SAE_STATE_FILE)) if t is not None]
    row.updated = max(writes) if writes else None
    row.status, row.detail = sae_status(end, row.step, row.updated, time.time() if now is None else now)
    row.elapsed, row.tokens_per_s = sae_speed(last_step)
    for name, value in sae_figures(last_step).items():
        setattr(row, name, value)
    # no log with a start stamp: the last write less the training seconds
    row.started = row.updated - (row.elapsed or 0.0) if row.updated is not None else None
    row.params = _params(run, SAE_WEIGHTS_FILE)


def read_run_config(run: Path) -> tuple[LabConfig, dict[str, object]]:
    """A run folder's config and its flat settings; RunError when the file is missing or refused."""
    config = RunFolder.read(run, need_state=False).config
    return config, flat_settings(config)


def _read_bytes(path: Path) -> tuple[bytes | None, float | None]:
    try:
        with open(path, "rb") as f:
            return f.read(), os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None, None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


# A sweep keeps the config its arms vary from here, so its runs read as their arm and seed.
SWEEP_BASE = Path(".sweep") / "base.yaml"


def _base_settings(
    preset: str | None, bases: dict[str | None, dict[str, object]], run: Path
) -> dict[str, object]:
    """What a run is compared with: its sweep's base config, else the named preset as it
    is now, else the defaults (a preset given by path, renamed or deleted since)."""
    sweep_base = str(run.parent / SWEEP_BASE)
    if sweep_base not in bases:
        try:
            data = parse_yaml((run.parent / SWEEP_BASE).read_text(encoding="utf-8"), sweep_base)
            bases[sweep_base] = flat_settings(data) if isinstance(data, dict) else {}
        except (OSError, UnicodeDecodeError, ConfigError):
            bases[sweep_base] = {}
    if bases[sweep_base]:
        return bases[sweep_base]
    if preset not in bases:
        from tui_lab.core.config.presets import load_preset

        try:
            bases[preset] = flat_settings(load_preset(preset)) if preset else default_settings()
        except ConfigError:  # a preset given by path, renamed or deleted since
            bases[preset] = default_settings()
    return bases[preset]


def _fill_metrics(row: RunSummary, raw: bytes) -> None:
    """Best figures, time to target and speed from ``metrics.jsonl``.

    Only evaluation lines (a few per run) are parsed, plus the step line just
    before each (written for the same step, it holds the elapsed time) and the
    last step line; the thousands of step lines between are never split out.
    """
    target = row.target
    at = raw.find(b'"eval"')
    while at >= 0:
        begin = raw.rfind(b"\n", 0, at) + 1
        end = raw.find(b"\n", at)
        end = len(raw) if end < 0 else end
        rec = _record(raw[begin:end])
        at = raw.find(b'"eval"', end)
        if rec is None or rec.get("kind") != "eval":
            continue
        em, val = finite_number(rec.get("exact_match")), finite_number(rec.get("val_loss"))
        if em is not None and (row.best_exact_match is None or em > row.best_exact_match):
            row.best_exact_match = em
        if val is not None and (row.best_val_loss is None or val < row.best_val_loss):
            row.best_val_loss = val
        if row.steps_to_target is None and target is not None and em is not None and em >= target:
            row.steps_to_target = _int(rec.get("step"))
            prev = _record(raw[raw.rfind(b"\n", 0, max(0, begin - 1)) + 1 : max(0, begin - 1)])
            if prev is not None and prev.get("kind") == "step" and prev.get("step") == rec.get("step"):
                row.seconds_to_target = finite_number(prev.get("elapsed"))
    end = len(raw)
    while end > 0:  # the last step line, walking back over eval lines and a torn tail
        begin = raw.rfind(b"\n", 0, end - 1) + 1
        rec = _record(raw[begin:end])
        end = begin
        if rec is not None and rec.get("kind") == "step":
            row.step = _int(rec.get("step")) or 0
            row.tokens_per_s = finite_number(rec.get("tokens_per_s"))
            row.elapsed = finite_number(rec.get("elapsed"))
            break


def _record(line: bytes) -> dict[str, object] | None:
    try:
        rec = json.loads(line)
    except ValueError:  # a line a crash cut short
        return None
    return rec if isinstance(rec, dict) else None


def _int(value: object) -> int | None:
    number = finite_number(value)
    return int(number) if number is not None else None


def _params(run: Path, weights: str = WEIGHTS_FILE) -> int | None:
    """Parameters stored in ``model.safetensors`` (tied weights stored, and counted, once).

    The header is read directly; only when it looks wrong does the strict reader
    run, to word why the weights are damaged.
    """
    path = run / weights
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n)) if 2 <= n <= size - 8 else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        header = None
    if isinstance(header, dict):
        try:
            total, data_end = 0, 0
            for key, info in header.items():
                if key != "__metadata__":
                    total += math.prod(int(d) for d in info["shape"])
                    data_end = max(data_end, int(info["data_offsets"][1]))
            if 8 + n + data_end <= size:
                return total
        except (AttributeError, KeyError, TypeError, ValueError, IndexError):
            pass
    read_safetensors_header(path)  # raises RunError naming what is wrong
    return None
