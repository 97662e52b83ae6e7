"""Every task is a ``Task`` (the protocol decoding asks of it), and every model handle says by its
``card`` whether it was opened from files (``opened_from_files``)."""

from __future__ import annotations

import pytest

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.opening.model_handle import opened_from_files
from tui_lab.core.tasks import Task, make_task
from tui_lab.core.tasks.protocol import Vocabulary
from tui_lab.core.tasks.tokenized import TokenizedText
from tui_lab.core.tasks.translation import Translation
from tui_lab.core.tasks.vocab import BOS, EOS

MEMBERS = [
    name
    for cls in (Task, Vocabulary)
    for name in cls.__dict__
    if not name.startswith("_") or name == "__len__"
]


class Pieces:
    """The smallest tokenizer: one id per character."""

    eos_id: int | None = 0
    bos_id: int | None = None

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(map(chr, ids))

    def label(self, id: int) -> str:
        return chr(id)

    def __len__(self) -> int:
        return 256


def _tasks() -> list[Task]:
    lab: list[Task] = [
        make_task(TaskConfig(name=name))
        for name in ("copy", "addition", "char-lm", "induction", "modular-addition")
    ]
    real: list[Task] = [TokenizedText(Pieces(), 64), Translation(Pieces(), 64, 5, (5,))]
    return lab + real


@pytest.mark.parametrize("task", _tasks(), ids=lambda t: type(t).__name__)
def test_every_task_has_every_member_of_the_protocol(task: Task) -> None:
    missing = [m for m in MEMBERS if m in Task.__dict__ and not hasattr(task, m)]
    missing += [m for m in MEMBERS if m in Vocabulary.__dict__ and not hasattr(task.vocab, m)]
    assert not missing
    assert task.validate_input(task.examples_for_display(1)[0]) is None


def test_what_ends_and_starts_an_answer() -> None:
    copy, char_lm = make_task(TaskConfig(name="copy")), make_task(TaskConfig(name="char-lm"))
    assert (copy.eos_id, char_lm.eos_id) == (EOS, None)  # a lab LM runs to its length
    assert copy.decoder_start_id == BOS and copy.banned_ids == () and copy.truncates_prompt
    translator = Translation(Pieces(), 64, 5, (5,))
    assert (translator.eos_id, translator.decoder_start_id, translator.banned_ids) == (0, 5, (5,))
    assert not TokenizedText(Pieces(), 64).truncates_prompt


def test_only_a_handle_with_a_card_was_opened_from_files() -> None:
    from tui_lab.core.training.remote import RemoteRun
    from tui_lab.core.training.train import TrainingRun

    class Opened:
        card = object()

    assert opened_from_files(Opened())  # type: ignore[arg-type]
    assert not opened_from_files(None)
    assert TrainingRun.card is None and RemoteRun.card is None
