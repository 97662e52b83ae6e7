"""Counting a config's parameters for Build's summary and the Params pane (in a thread).

The count runs on the meta device (nothing is allocated, and the core caches it
per config); the task is built once per task config, for its vocabulary size
and for the examples Decode offers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui_lab.core.config.lab_config import LabConfig, TaskConfig
from tui_lab.core.errors import one_line
from tui_lab.ui.messages import ReportReady

if TYPE_CHECKING:
    from tui_lab.core.tasks import Task


class ParamCounter:
    """Counts configs; keeps each task it builds (call from a worker thread: torch is loaded)."""

    def __init__(self) -> None:
        self._tasks: dict[TaskConfig, Task] = {}

    def task_for(self, task_config: TaskConfig) -> Task:
        """The task of a config (vocabulary, examples), built once per task config."""
        if task_config not in self._tasks:
            from tui_lab.core.tasks import make_task

            self._tasks[task_config] = make_task(task_config)
        return self._tasks[task_config]

    def count(self, config: LabConfig, edited: bool) -> ReportReady:
        """The message with ``config``'s parameter report, or with why it cannot be counted."""
        from tui_lab.core.model.params import parameter_report

        if config.task.name == "token-lm" and config.model.vocab_size:
            # A fine-tuned real model's run: its vocabulary is its tokenizer's, which the
            # config does not hold, but the model section states the embedding's size.
            vocab = config.model.vocab_size
            report = parameter_report(config.model, vocab)
            return ReportReady(config, report, vocab, edited=edited, task=None)
        try:
            task = self.task_for(config.task)
            report = parameter_report(config.model, len(task.vocab))
        except Exception as exc:  # noqa: BLE001 - shown in Params, the lab keeps going
            return ReportReady(config, None, 0, one_line(exc))
        return ReportReady(config, report, len(task.vocab), edited=edited, task=task)
