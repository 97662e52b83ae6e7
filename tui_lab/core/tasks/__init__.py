"""What the model learns: algorithmic digit tasks and character-level language modelling.

``make_task(config.task)`` returns a task; ``protocol`` is ``Task``, what
decoding and the lab ask of every task (a real model's too); ``base`` is
``TaskBase``, the lab's tasks' base (the batch layout for both architectures,
and batching); ``digits`` holds copy,
reverse, sort and addition; ``char_lm`` next-character prediction on a text
that ``text`` reads and cleans; ``masked_lm`` BERT's masked characters on
the same text; ``modular`` (a op b) mod p over every pair,
the grokking task.
"""

from __future__ import annotations

from tui_lab.core.config.error import field_error
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.tasks.base import IGNORE, Batch, TaskBase
from tui_lab.core.tasks.char_lm import CharLMTask
from tui_lab.core.tasks.digits import AdditionTask, DigitTask
from tui_lab.core.tasks.induction import InductionTask
from tui_lab.core.tasks.masked_lm import MaskedLMTask
from tui_lab.core.tasks.modular import ModularTask
from tui_lab.core.tasks.protocol import Task, Vocabulary
from tui_lab.core.tasks.text import default_text
from tui_lab.core.tasks.token_lm import TokenLMTask
from tui_lab.core.tasks.tokenized import Tokenizer

__all__ = [
    "IGNORE",
    "AdditionTask",
    "Batch",
    "CharLMTask",
    "DigitTask",
    "InductionTask",
    "MaskedLMTask",
    "ModularTask",
    "Task",
    "TaskBase",
    "TokenLMTask",
    "Vocabulary",
    "default_text",
    "make_task",
]


def make_task(task: TaskConfig, tokenizer: Tokenizer | None = None, context: int | None = None) -> TaskBase:
    """The task a ``TaskConfig`` describes (char-lm reads its text here).

    token-lm's vocabulary is a real model's tokenizer, which a config does not
    hold: ``tokenizer`` (a run folder's copy, ``decoding/run_source.py``) and the
    model's ``context`` (default: the block) come with it.
    """
    if task.name in ("copy", "reverse", "sort"):
        return DigitTask(task)
    if task.name == "addition":
        return AdditionTask(task)
    if task.name == "char-lm":
        return CharLMTask(task)
    if task.name == "induction":
        return InductionTask(task)
    if task.name == "masked-lm":
        return MaskedLMTask(task)
    if task.name == "modular-addition":
        return ModularTask(task)
    if task.name == "token-lm":
        if tokenizer is None:
            raise field_error("task.name", "token-lm is the task of a model opened with --model SOURCE")
        return TokenLMTask(task, tokenizer, context)  # type: ignore[return-value]
    if task.name == "translation":
        raise field_error("task.name", "translation is the task of a translator opened with --model SOURCE")
    raise field_error("task.name", f"unknown task {task.name!r}")
