"""The Attention pane's importance table (``i``): which head does the work, measured in a thread.

``ImportancePanel`` is the table (``ImportanceView``) plus the work behind it.
For a run, it ablates each head alone on N held-out examples in a thread
worker, on its own copy of the model (or of the history snapshot on show),
cached in the run folder per checkpoint (or snapshot). A real model opened
from files has no held-out examples: its table is the rise of its loss on the
text on show with each head switched off. Progress and the table come back as
its own messages (``Progress``, ``Ready``).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual import work
from textual.message import Message
from typing_extensions import Unpack

from tui_lab.core.errors import one_line
from tui_lab.ui.state.model_copies import settled, shared_clone
from tui_lab.ui.state.travel import Travel
from tui_lab.ui.widgets.importance_view import ImportanceView
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_importance import ImportanceTable
    from tui_lab.core.analysis.heads.text_ablation import TextImportance
    from tui_lab.core.opening.model_handle import ModelHandle

IMPORTANCE_N = 200  # held-out examples per head in the lab (the CLI's --n)
PROGRESS_EVERY = 0.1  # seconds between progress messages (the last one always goes)


@runtime_checkable
class KeptRun(Protocol):
    """A run the lab trains or follows (``TrainingRun``, ``RemoteRun``): its folder, if it has one."""

    @property
    def out_dir(self) -> str | Path | None:
        """The run's folder (None: not saved)."""
        ...


@dataclass(frozen=True)
class ImportanceAsk:
    """What one importance table is measured on: the model, the mode, and where in its history."""

    run: ModelHandle  # a TrainingRun, RemoteRun or an opened model
    mode: str  # "zero" or "mean"
    training: bool = False  # the run is training: its weights are not its checkpoint's
    at_step: int | None = None  # a history snapshot on show
    text: str | None = None  # an opened model: the text its loss is measured on


def ask_for(
    run: ModelHandle | None, mode: str, decoded: str | None, training: bool, at_step: int | None
) -> tuple[ImportanceAsk | None, str]:
    """What to measure for the model on show: a run's exact match (at the history snapshot
    ``at_step`` on show, else the live model), an opened model's loss on the text ``decoded``
    last; else None and why not."""
    from tui_lab.core.opening.model_handle import opened_from_files

    if run is None:
        return None, "no model yet: train one (2) or open a run"
    if not opened_from_files(run):
        return ImportanceAsk(run, mode, training, at_step), ""
    if decoded is None:
        return None, "importance: decode a text first (3); each head is scored on it"
    return ImportanceAsk(run, mode, text=decoded), ""


class ImportancePanel(ImportanceView):
    """``start(ask)`` measures and shows each head's importance; ``shown`` is toggled by ``i``."""

    @dataclass
    class Progress(Message):
        """``done`` of ``total`` heads measured."""

        done: int
        total: int
        what: str

    @dataclass
    class Ready(Message):
        """The importance table (``table`` None and ``error`` set if it failed)."""

        table: ImportanceTable | TextImportance | None = None
        cached: bool = False
        where: str = ""
        error: str | None = None
        loss: bool = False  # ``table`` is a TextImportance (a real model's loss on the text)

    def __init__(self, travel: Travel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.travel = travel  # the lab's: a snapshot on show is loaded through it
        self.n = IMPORTANCE_N
        self.shown = False

    def toggle(self) -> bool:
        """Show or hide the table; True when it is now shown (the caller starts it)."""
        self.shown = not self.shown
        self.display = self.shown
        return self.shown

    def start(self, ask: ImportanceAsk | None, why_not: str = "") -> None:
        """Measure ``ask`` in a thread (None: show ``why_not`` instead)."""
        if ask is None:
            self.show_message(why_not)
        elif ask.text is not None:
            self.show_message(f"importance: starting ({ask.mode}, on the text on show)…")
            self._text_worker(ask.run, ask.mode, ask.text)
        else:
            self.show_message(f"importance: starting ({ask.mode}, N={self.n})…")
            self._exact_worker(ask, self.n)

    def _progress(self, what: str) -> Callable[[int, int], None]:
        """A progress callback for the worker thread, merged to one message a tenth of a second."""
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done == total or now - last[0] >= PROGRESS_EVERY:  # merged: no flood of messages
                last[0] = now
                self.post_message(self.Progress(done, total, what))

        return progress

    @work(thread=True, exclusive=True, exit_on_error=False, group="importance")
    def _exact_worker(self, ask: ImportanceAsk, n: int) -> None:
        """Ablate each head alone on ``n`` held-out examples; post progress and the table (thread)."""
        try:
            self.post_message(self.Ready(*self._exact_table(ask, n)))
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.Ready(error=one_line(exc)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="importance")
    def _text_worker(self, run: ModelHandle, mode: str, text: str) -> None:
        """Switch each head of a real model off alone; its loss on ``text`` (thread)."""
        from tui_lab.core.verbs.ablate import text_table

        progress = self._progress(f"{mode}, loss on the text")
        try:
            table = text_table(shared_clone(settled(run).model), run.task, run.config.model.max_len, text, mode,
                               progress)
        except Exception as exc:  # noqa: BLE001 - say it in the view, never crash the lab
            self.post_message(self.Ready(error=one_line(exc)))
            return
        where = f"on the input {text[:40]!r}" + ("…" if len(text) > 40 else "")
        self.post_message(self.Ready(table, where=where, loss=True))

    def _exact_table(self, ask: ImportanceAsk, n: int) -> tuple[ImportanceTable, bool, str]:
        """The table, whether it came from the run folder's cache, and what it was measured on."""
        from tui_lab.core.analysis.heads.head_importance import weights_key
        from tui_lab.core.errors import LabError
        from tui_lab.core.tasks.base import TaskBase
        from tui_lab.core.tasks.token_lm import TokenLMTask
        from tui_lab.core.training.evaluate import held_out_pairs
        from tui_lab.core.verbs.ablate import importance_table

        run, mode = ask.run, ask.mode
        if not isinstance(run, KeptRun) or not isinstance(run.task, (TaskBase, TokenLMTask)):
            raise LabError("importance by exact match needs a run the lab trains or follows, on a task of its own")
        task = run.task
        run_dir = Path(run.out_dir) if run.out_dir is not None else None
        if ask.at_step is not None and run_dir is not None:
            model = self.travel.snapshot_model(run_dir, ask.at_step, run.model)
            where, key = f"snapshot at step {ask.at_step:,}", weights_key(run_dir, ask.at_step)
        else:
            model = copy.deepcopy(run.model)  # never the Train pane's model
            where = f"model at step {run.step:,}"
            # Cached per checkpoint: only when the weights are the checkpoint's.
            at_checkpoint = run_dir is not None and _at_checkpoint(run_dir, run.step)
            key = weights_key(run_dir) if run_dir and at_checkpoint and not ask.training else None
        pairs = held_out_pairs(task, run.config.train, n)
        progress = self._progress(f"{mode}, N={len(pairs)}")
        table, cached = importance_table(model, task, run.config, pairs, mode, progress, run_dir or ".", key)
        return table, cached, where

    def on_importance_panel_progress(self, message: ImportancePanel.Progress) -> None:
        """Move the importance progress line."""
        message.stop()
        self.show_progress(message.done, message.total, message.what)

    def on_importance_panel_ready(self, message: ImportancePanel.Ready) -> None:
        """Show the importance table (or why there is none)."""
        from tui_lab.core.analysis.heads.text_ablation import TextImportance

        message.stop()
        if message.table is None:
            self.show_message(f"importance unavailable: {message.error}")
        elif isinstance(message.table, TextImportance):  # ``loss``: a real model's loss on the text
            self.show_loss_table(message.table, message.where)
        else:
            self.show_table(message.table, message.cached, message.where)


def _at_checkpoint(run_dir: Path, step: int) -> bool:
    """Whether the run folder's checkpoint holds ``step``'s weights."""
    try:
        return int(json.loads((run_dir / "state.json").read_text())["step"]) == int(step)
    except (OSError, ValueError, KeyError, TypeError):
        return False
