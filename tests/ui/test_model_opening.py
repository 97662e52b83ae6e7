"""``open_and_post``: the lab's ``--model`` opens through ``open_model`` in torch's thread and
posts one ``ModelOpened``: the model in hand, or one line saying why not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.hf_factory import save_family
from tui_lab.core.config.shape import Shape
from tui_lab.core.opening.model_in_hand import ModelInHand
from tui_lab.ui.messages import ModelOpened
from tui_lab.ui.model_opening import open_and_post

RUN = Path(__file__).resolve().parents[1] / "data" / "induction-run"


class Posted:
    """What the app would be posted (``App.post_message``)."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def post_message(self, message: Any) -> bool:
        self.messages.append(message)
        return True


def test_a_model_folder_is_posted_in_hand(tmp_path: Path) -> None:
    save_family(tmp_path, "gpt2")
    app = Posted()
    open_and_post(app, str(tmp_path), None)  # type: ignore[arg-type]
    [opened] = app.messages
    assert isinstance(opened, ModelOpened) and opened.error is None
    assert isinstance(opened.loaded, ModelInHand) and opened.loaded.shape is Shape.DECODER_ONLY
    assert opened.loaded.card is not None and opened.loaded.card.folder == tmp_path
    assert opened.loaded.settle() in (None, 0)  # re-laid already, after the message


def test_a_run_folder_or_nothing_is_one_line(tmp_path: Path) -> None:
    for source, fragment in [(str(RUN), "pass it as --run"), (str(tmp_path / "nowhere"), "nowhere")]:
        app = Posted()
        open_and_post(app, source, None)  # type: ignore[arg-type]
        [failed] = app.messages
        assert failed.loaded is None and fragment in failed.error and "\n" not in failed.error
