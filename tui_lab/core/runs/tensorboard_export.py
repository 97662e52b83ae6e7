"""A run folder's ``metrics.jsonl`` and config as TensorBoard event files.

``export_run(run, out_root)`` writes ``out_root/<name>/events.out.tfevents.*``
with ``torch.utils.tensorboard.SummaryWriter`` (imported on first use; the
``tensorboard`` package is the optional extra ``tfx-lab[tensorboard]``).

Tags: ``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s``
from step records; ``val/loss``, ``val/exact_match`` (algorithmic tasks),
``val/bits_per_char`` and ``val/next_char_accuracy`` (char-lm) from evaluation
records; ``config`` as text (the preset's name and config.yaml in a code block).

``global_step`` is the run's step. Records carry no clock time, only
``elapsed`` training seconds, so a point's walltime is the run's start (the
first line of log.txt, else config.yaml's mtime) plus its training seconds:
TensorBoard's "relative" axis then reads as training time, like the Runs
pane's "by seconds". Evaluation points take the seconds of the step record of
their step.

Records are read with ``run_log.read_metrics`` and ``events.event_from_record``
(torn lines and damaged records are skipped). A resumed run repeats the steps
after its last checkpoint: the later record of a step wins, as in
``run_curves``. Points are written in step order across tags, because
TensorBoard's reader drops points that follow a smaller step as orphans.

An SAE's training folder (``tfx-lab sae train``: cfg.json, no config.yaml) is
exported too: ``sae/loss``, ``sae/mse``, ``sae/l0``, ``sae/explained_variance``,
``sae/fvu``, ``sae/dead_fraction``, ``sae/ce_loss_recovered``, ``sae/lr`` and
``sae/tokens_per_s`` from its step records, and its ``cfg.json`` as the
``config`` text (with the architecture it was trained as: a BatchTopK or Matryoshka
SAE is written as SAELens's ``jumprelu`` file).

A crosscoder's folder (``tfx-lab crosscoder train``) is exported the same way
under ``crosscoder/*`` (``loss``, ``mse``, ``l0``, ``explained_variance``,
``fvu``, ``dead_fraction``, ``sparsity_loss``, ``lr``, ``tokens_per_s``), with
its ``cfg.json`` (hook, sources) as the ``config`` text.

Exporting a run again first deletes the ``events.out.tfevents.*`` files in its
folder under ``out_root`` (nothing else there), so points never repeat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from tui_lab.core.errors import LabError, one_line
from tui_lab.core.runs.crosscoder_summary import crosscoder_config, is_crosscoder_folder
from tui_lab.core.runs.events import EvalEvent, StepEvent, event_from_record
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.log import finite_number, read_metrics
from tui_lab.core.runs.run_files import (
    CONFIG_FILE,
    LOG_FILE,
    METRICS_FILE,
    RunDir,
    RunError,
    reason,
)
from tui_lab.core.runs.sae_summary import (
    SAE_CONFIG_FILE,
    is_sae_folder,
    read_json,
    sae_architecture,
)
from tui_lab.core.runs.status import parse_stamp, read_log_ends

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

EXTRA_HINT = "pip install 'tfx-lab[tensorboard]'"
NEEDS_TENSORBOARD = f"export --tensorboard needs the tensorboard package: {EXTRA_HINT}"
EVENT_PREFIX = "events.out.tfevents."


@dataclass
class ExportResult:
    """What one run's export wrote: its event folder and how many points of each kind."""

    run: Path
    folder: Path
    points: int  # scalar points, every tag together
    steps: int  # step records exported
    evals: int  # evaluation records exported
    replaced: int  # event files of an earlier export deleted first
    tags: tuple[str, ...]


def summary_writer_class() -> type[SummaryWriter]:
    """``torch.utils.tensorboard.SummaryWriter``; LabError naming the extra when it is missing."""
    try:
        import tensorboard  # noqa: F401  (torch's module needs it; checked first to name it)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        name = exc.name or ""
        if name and not name.startswith("tensorboard") and name != "torch.utils.tensorboard":
            raise LabError(f"{NEEDS_TENSORBOARD} (import failed: {one_line(exc)})") from None
        raise LabError(NEEDS_TENSORBOARD) from None
    return SummaryWriter


def export_run(run_dir: RunDir, out_root: RunDir, name: str | None = None) -> ExportResult:
    """Write ``run_dir``'s metrics and config under ``out_root/<name>`` (name: the run folder's).

    RunError with one line naming the run when it is not a readable run
    folder or holds no metrics; LabError when tensorboard is not installed.
    """
    writer_class = summary_writer_class()
    run = Path(run_dir)
    target = Path(out_root) / (name or run.name)
    if is_crosscoder_folder(run):  # before the SAE check: its cfg.json is an SAE's in form
        cfg = crosscoder_config(run)
        return _export_sae(writer_class, run, target, "crosscoder", f"a crosscoder over {cfg.get('n_sources')} "
                           "sources", _CROSSCODER_TAGS)
    if is_sae_folder(run):
        heading = f"an SAE, trained as {sae_architecture(read_json(run / SAE_CONFIG_FILE) or {}) or '?'}"
        return _export_sae(writer_class, run, target, "sae", heading, _SAE_TAGS)
    folder = RunFolder.read(run, need_state=False)  # config.yaml validated; state.json if any
    steps, evals = _records(run)
    replaced = _clear_old_events(target)
    base = _start_time(run)
    preset = folder.state.get("preset")
    preset = preset if isinstance(preset, str) else None
    writer = _open_writer(writer_class, target)
    points, tags = 0, set()
    try:
        writer.add_text("config", config_markdown(folder, preset), global_step=0, walltime=base)
        seconds = 0.0
        for step in sorted(set(steps) | set(evals)):
            if step in steps:
                rec, ev = steps[step]
                if _finite(ev.elapsed):
                    seconds = ev.elapsed
                for tag, value in _step_scalars(rec, ev):
                    writer.add_scalar(tag, value, global_step=step, walltime=base + seconds)
                    points += 1
                    tags.add(tag)
            if step in evals:
                for tag, value in _eval_scalars(evals[step]):
                    writer.add_scalar(tag, value, global_step=step, walltime=base + seconds)
                    points += 1
                    tags.add(tag)
    except OSError as exc:
        raise RunError(f"cannot write TensorBoard events to {target}: {reason(exc)}") from exc
    finally:
        writer.close()
    return ExportResult(run, target, points, len(steps), len(evals), replaced, tuple(sorted(tags)))


def _open_writer(writer_class: type[SummaryWriter], target: Path) -> SummaryWriter:
    try:
        return writer_class(log_dir=str(target), max_queue=1000, flush_secs=3600)
    except OSError as exc:
        raise RunError(f"cannot write TensorBoard events to {target}: {reason(exc)}") from exc


_SAE_TAGS = ("loss", "mse", "l0", "explained_variance", "fvu", "dead_fraction", "ce_loss_recovered", "lr")
_CROSSCODER_TAGS = ("loss", "mse", "l0", "explained_variance", "fvu", "dead_fraction", "sparsity_loss", "lr")


def _export_sae(writer_class: type[SummaryWriter], run: Path, target: Path, prefix: str, heading: str,
                names: tuple[str, ...]) -> ExportResult:
    """An SAE's (or a crosscoder's) folder: its step records as ``<prefix>/*`` scalars, cfg.json as
    the config text under ``heading``."""
    steps = _sae_steps(run)
    replaced = _clear_old_events(target)
    try:
        cfg_text = (run / SAE_CONFIG_FILE).read_text(encoding="utf-8").rstrip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{run / SAE_CONFIG_FILE}: cannot read it ({reason(exc)})") from None
    base = (run / SAE_CONFIG_FILE).stat().st_mtime - max(
        (finite_number(rec.get("elapsed")) or 0.0 for rec in steps.values()), default=0.0)
    writer = _open_writer(writer_class, target)
    points, tags = 0, set()
    try:
        writer.add_text("config", f"{heading}\n\n```json\n{cfg_text}\n```\n", global_step=0, walltime=base)
        for step in sorted(steps):
            rec = steps[step]
            walltime = base + (finite_number(rec.get("elapsed")) or 0.0)
            for tag, value in _sae_scalars(rec, prefix, names):
                writer.add_scalar(tag, value, global_step=step, walltime=walltime)
                points += 1
                tags.add(tag)
    except OSError as exc:
        raise RunError(f"cannot write TensorBoard events to {target}: {reason(exc)}") from exc
    finally:
        writer.close()
    return ExportResult(run, target, points, len(steps), 0, replaced, tuple(sorted(tags)))


def _sae_steps(run: Path) -> dict[int, dict[str, object]]:
    """An SAE's step records by step (a resumed run's later record of a step wins)."""
    if not (run / METRICS_FILE).is_file():
        raise RunError(f"{run}: no {METRICS_FILE}; nothing to export (train it first)")
    steps = {step: rec for rec in read_metrics(run)
             if rec.get("kind") == "step" and isinstance(step := rec.get("step"), int)}
    if not steps:
        raise RunError(f"{run}: {METRICS_FILE} holds no step records; nothing to export")
    return steps


def _sae_scalars(rec: dict[str, object], prefix: str, names: tuple[str, ...]) -> list[tuple[str, float]]:
    pairs = [(f"{prefix}/{name}", finite_number(rec.get(name))) for name in names]
    elapsed, tokens = finite_number(rec.get("elapsed")), finite_number(rec.get("tokens"))
    pairs.append((f"{prefix}/tokens_per_s", tokens / elapsed if elapsed and tokens is not None else None))
    return [(tag, value) for tag, value in pairs if _finite(value)]


def config_markdown(folder: RunFolder, preset: str | None) -> str:
    """The ``config`` text: preset and task on one line, every setting as YAML in a code block."""
    config = folder.config
    head = f"preset: **{preset or 'unknown'}**, task: {config.task.name}, arch: {config.model.arch}"
    return f"{head}\n\n```yaml\n{config.to_yaml(full=True).rstrip()}\n```\n"


def _records(run: Path) -> tuple[dict[int, tuple[dict[str, object], StepEvent]], dict[int, EvalEvent]]:
    """Step and evaluation records by step (the later record of a repeated step wins)."""
    if not (run / METRICS_FILE).is_file():
        raise RunError(f"{run}: no {METRICS_FILE}; nothing to export (train it first)")
    steps: dict[int, tuple[dict[str, object], StepEvent]] = {}
    evals: dict[int, EvalEvent] = {}
    for rec in read_metrics(run):
        ev = event_from_record(rec)
        if isinstance(ev, StepEvent):
            steps[ev.step] = (rec, ev)
        elif isinstance(ev, EvalEvent):
            evals[ev.step] = ev
    if not steps and not evals:
        raise RunError(f"{run}: {METRICS_FILE} holds no step or evaluation records; nothing to export")
    return steps, evals


def _step_scalars(rec: dict[str, object], ev: StepEvent) -> list[tuple[str, float]]:
    # tokens_per_s reads as 0.0 when a record lacks it: only a figure the record holds is drawn
    tps = ev.tokens_per_s if "tokens_per_s" in rec else None
    pairs = (("train/loss", ev.loss), ("train/lr", ev.lr), ("train/grad_norm", ev.grad_norm),
             ("train/tokens_per_s", tps))
    return [(tag, value) for tag, value in pairs if _finite(value)]


def _eval_scalars(ev: EvalEvent) -> list[tuple[str, float]]:
    pairs = (("val/loss", ev.val_loss), ("val/exact_match", ev.exact_match),
             ("val/bits_per_char", ev.bits_per_char), ("val/next_char_accuracy", ev.next_char_accuracy))
    return [(tag, value) for tag, value in pairs if _finite(value)]


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _start_time(run: Path) -> float:
    """When the run started: log.txt's first time stamp, else config.yaml's mtime."""
    started = parse_stamp(read_log_ends(run / LOG_FILE)[0])
    if started is not None:
        return started
    try:
        return (run / CONFIG_FILE).stat().st_mtime
    except OSError:
        return 0.0


def _clear_old_events(target: Path) -> int:
    """Delete the event files an earlier export left in ``target``; how many."""
    if target.exists() and not target.is_dir():
        raise RunError(f"cannot write TensorBoard events to {target}: it is a file, not a folder")
    removed = 0
    try:
        for path in target.glob(f"{EVENT_PREFIX}*") if target.is_dir() else ():
            if path.is_file():
                path.unlink()
                removed += 1
    except OSError as exc:
        raise RunError(f"cannot replace the old TensorBoard events in {target}: {reason(exc)}") from exc
    return removed
