"""A model the lab was handed, whatever made it: the ``ModelHandle`` protocol.

A run in training (``TrainingRun``), a run training in a child process
(``RemoteRun``) and a model loaded for inference or opened from files
(``ModelInHand``) all carry a config, a task, a model, a step and a ``card``: the
opened model's ``ModelCard``, None for the others. ``opened_from_files`` is the
one way to ask which kind of model is in hand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the lab imports this before torch is loaded: no torch at run time
    from torch import nn

    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.opening.model_card import ModelCard
    from tui_lab.core.tasks.protocol import Task


class ModelHandle(Protocol):
    """What panes and analyses ask of the model in hand."""

    @property
    def config(self) -> LabConfig:
        """The model's settings (an opened model's: read from its config.json)."""
        ...

    @property
    def task(self) -> Task:
        """The task it decodes."""
        ...

    @property
    def model(self) -> nn.Module:
        """The model itself."""
        ...

    @property
    def step(self) -> int:
        """The training step its weights are from (a model from files: 0)."""
        ...

    @property
    def card(self) -> ModelCard | None:
        """An opened model's card (what was read from which file); None for a lab run."""
        ...


def opened_from_files(handle: ModelHandle | None) -> bool:
    """True for a real model opened from files (``--model``), False for a lab run or none."""
    return handle is not None and handle.card is not None
