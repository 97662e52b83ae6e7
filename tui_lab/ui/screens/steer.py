"""Steer dialog: a hook, two prompt sets and a coefficient for the Decode pane's steering.

The vector is the difference of the two sets' mean activations at the hook
(``core.analysis.steering``); every decode then shows the steered output beside
the plain one. A prompt set is a file (one prompt a line) or prompts typed here
separated by ``|``.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from tui_lab.core.errors import LabError
from tui_lab.core.verbs.steer import Steering
from tui_lab.ui import key_bindings

# What the dialog asks for: the hook, the two prompt sets, the coefficient (checked as
# ``tfx-lab steer`` checks them: the same one-line refusals).
SteerRequest = Steering


def prompt_set(text: str) -> list[str]:
    """A file's lines (one prompt each) when ``text`` names a file, else ``|``-separated
    prompts; LabError (one line) for a file that cannot be read."""
    if text and _is_file(text):
        from tui_lab.core.analysis.patching.steering import read_prompts

        lines = read_prompts(Path(text).expanduser())
    else:
        lines = text.split("|")
    return [line.strip() for line in lines if line.strip()]


def _is_file(text: str) -> bool:
    """Whether ``text`` names a file (prompts too long for a file name are no file)."""
    try:
        return Path(text).expanduser().is_file()
    except OSError:
        return False


class SteerScreen(ModalScreen[SteerRequest | None]):
    """Asks for the steering vector's hook, prompt sets and coefficient."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS = key_bindings.STEER

    def __init__(self, hook: str, hooks: list[str]) -> None:
        super().__init__()
        self.hook = hook
        self.hooks = set(hooks)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Steer the decodes", classes="dialog-title")
            yield Static("the vector: mean(positive) − mean(negative) at the hook", classes="dim")
            yield Label("hook")
            yield Input(value=self.hook, id="steer-hook")
            yield Label("positive prompts (a file, or prompts separated by |)")
            yield Input(placeholder="I love this | what a joy", id="steer-positive")
            yield Label("negative prompts")
            yield Input(placeholder="I hate this | what a bore", id="steer-negative")
            yield Label("coefficient")
            yield Input(value="4", id="steer-coef")
            yield Static("", id="steer-error", classes="field-error")
            yield Static("enter steer · escape cancel", classes="dim")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in any field: check them all, then steer."""
        event.stop()
        request, problem = self._read()
        if request is None:
            self.query_one("#steer-error", Static).update(f"↳ {problem}")
            return
        self.dismiss(request)

    def _read(self) -> tuple[SteerRequest | None, str]:
        def value(name: str) -> str:
            return self.query_one(f"#steer-{name}", Input).value.strip()

        hook = value("hook")
        if hook not in self.hooks:
            return None, f"no hook point {hook!r} in this model (tfx-lab hooks lists them)"
        try:
            positive, negative = prompt_set(value("positive")), prompt_set(value("negative"))
        except LabError as exc:
            return None, str(exc)
        try:
            coef = float(value("coef"))
        except ValueError:
            return None, f"the coefficient {value('coef')!r} is not a number"
        try:
            return SteerRequest(hook, tuple(positive), tuple(negative), coef), ""
        except LabError as exc:
            return None, str(exc)

    def action_cancel(self) -> None:
        """Close without steering."""
        self.dismiss(None)
