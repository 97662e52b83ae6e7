"""How a training run keeps its folder: checkpoints, restore, log, metrics and its end.

A mixin of ``TrainingRun`` (train.py), which holds the loop; this holds what
the loop writes. Every write goes through ``checkpoint``/``run_log`` (atomic,
checksummed), and nothing is written without a run folder (``out_dir`` None).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from tui_lab.core.runs import checkpoint
from tui_lab.core.runs.events import CheckpointEvent, Event, LogEvent
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.log import append_metrics, json_float, log
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.snapshots import MAX_BYTES, History, snapshot_bytes
from tui_lab.core.tasks.vocab import Vocab

# Snapshots a fine-tuning run keeps room for, whatever their size (snapshots.py thins the plan to them).
REAL_MODEL_SNAPSHOTS = 8

if TYPE_CHECKING:
    from collections.abc import Callable

    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.tasks.protocol import Vocabulary
    from tui_lab.core.training.distributed import DistInfo


class NonFiniteWeights(RunError):
    """The model's weights hold inf or nan: saving them would replace a good checkpoint."""


class RunKeeping:
    """The run-folder half of ``TrainingRun``."""

    config: LabConfig
    out_dir: Path | None
    on_event: Callable[[Event], None]
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    vocab: Vocabulary
    dist: DistInfo
    device_name: str
    step: int
    _start_step: int
    elapsed: float
    best_accuracy: float | None
    history: History | None

    def _prepare_folder(self) -> None:
        if self.out_dir is None:
            return
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"{self.out_dir}: cannot create the run folder ({exc.strerror})") from None
        self.history = History(self.out_dir, self.config, self.model, self._log, self._history_bytes())
        if self.step == 0:
            self.save()
        self._record_end(None)  # a resumed run is training again

    def _history_bytes(self) -> int | None:
        """The run's snapshot budget: the lab's (None), or room for a few snapshots of a real
        model (one of pythia-14m's is 56 MB, more than the lab's budget for a whole run)."""
        if self.config.task.name != "token-lm":
            return None
        return max(MAX_BYTES, REAL_MODEL_SNAPSHOTS * snapshot_bytes(self.model))

    def _record_end(self, end: dict[str, object] | None) -> None:
        if self.out_dir is not None:
            try:
                checkpoint.record_end(self.out_dir, end)
            except (OSError, RunError):
                # A failing disk has been reported already; log.txt's last line
                # says how the run ended, and run_status reads it when this is missing.
                pass

    def state(self) -> dict[str, object]:
        return {
            "step": self.step,
            "elapsed": self.elapsed,
            "best_accuracy": self.best_accuracy,
            "vocab": self.vocab.chars if isinstance(self.vocab, Vocab) else None,  # None: a real model's tokenizer
            "world_size": self.dist.world_size,
            "preset": self.config.name,
            "device": self.device_name,
            "torch": torch.__version__,
        }

    def save(self) -> None:
        """Checkpoint atomically; no-op without a run folder.

        Weights that are no longer finite are never saved (they would replace
        the last good checkpoint): NonFiniteWeights ends the run as "nan".
        """
        if self.out_dir is None:
            return
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            raise NonFiniteWeights(
                f"weights became inf/nan by step {self.step}; not saved (lower train.lr or "
                f"raise warmup); the last good checkpoint is kept"
            )
        checkpoint.save_checkpoint(  # through the module: tests make it fail like a disk would
            self.out_dir, self.model, self.optimizer, self.state(), self.config)
        self._emit(CheckpointEvent(self.step, str(self.out_dir)))

    def _restore(self, folder: RunFolder) -> None:
        """Weights, optimizer moments and progress from the run's last checkpoint."""
        notes = checkpoint.load_weights(folder, self.model)
        notes += checkpoint.load_optimizer(folder, self.optimizer)
        for note in notes:
            self._log(note, "warning")
        self.step = self._start_step = folder.step
        self.elapsed = json_float(folder.state.get("elapsed", 0.0))
        self.best_accuracy = cast("float | None", folder.state.get("best_accuracy"))  # as saved

    def _emit(self, event: Event) -> None:
        self.on_event(event)

    def _metric(self, record: dict[str, object]) -> None:
        if self.out_dir is not None:
            append_metrics(self.out_dir, record)

    def _log(self, message: str, level: str = "info") -> None:
        if self.out_dir is not None:
            try:
                log(self.out_dir, message)
            except RunError as exc:  # a failing disk must not hide what happened
                self._emit(LogEvent(str(exc), "warning"))
        self._emit(LogEvent(message, level))
