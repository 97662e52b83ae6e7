"""Shared helpers for the lab's UI tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.pilot import Pilot
from textual.widgets import Input

from tests.ui.conftest import TINY
from tui_lab.ui.app import LabApp

if TYPE_CHECKING:
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.runs.runs_pane import RunsPane

SIZE = (120, 40)


def tiny_app(**kwargs: object) -> LabApp:
    """The lab on the tiny test preset (runs and presets go to the test's folder).

    Hidden panes are not drawn ahead of their first showing (``warm_hidden_panes``):
    that drawing is a speed-up for people switching panes, half of a test's start-up,
    draws nothing on screen, and the same panes are built either way. Its own test
    (``test_hidden_panes_are_drawn_once_out_of_sight``), the command-line tests and the
    reliability tests (real processes) keep it on.
    """
    kwargs.setdefault("preset", str(TINY))
    kwargs.setdefault("warm_hidden_panes", False)
    app = LabApp(**kwargs)  # type: ignore[arg-type]
    app.animation_level = "none"  # no bar or scroll animations: snapshots see final frames
    return app


# Restoring a run starts a training process (the fork server, torch, the checkpoint): at
# load 9-12 on two cores the snapshot of an opened run waited over 30 s for it. A bound, not
# a pause: a test that gets there sooner goes on at once.
RUN_RESTORE_S = 120.0


async def wait_until(
    pilot: Pilot, predicate: Callable[[], bool], timeout: float = 30.0, what: str = ""
) -> None:
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await pilot.pause(0.05)


async def train_endless(pilot: Pilot, steps: int = 3):  # type: ignore[no-untyped-def]
    """Start a run that will not end by itself; return the Train pane once ``steps`` are in."""
    from tui_lab.ui.panes.train.train_pane import TrainPane

    app = pilot.app
    pane = app.query_one(TrainPane)
    pane.config_changed(app.config.with_values({"train.steps": 1_000_000}))  # type: ignore[attr-defined]
    await pilot.press("2", "space")
    await wait_until(
        pilot, lambda: pane.state == "running" and len(pane.history) >= steps, 60, "steps"
    )
    return pane


async def ready(pilot: Pilot) -> LabApp:
    """Wait for torch, the first parameter count and every pane (the hidden ones are
    built once torch is in, after a refresh that a single pause does not always cover)."""
    from tui_lab.ui.widgets.pane_stand_in import PaneStandIn

    app = pilot.app
    assert isinstance(app, LabApp)
    await wait_until(pilot, lambda: app.core is not None, 60, "torch to load")
    await app.workers.wait_for_complete()
    await wait_until(pilot, lambda: not app.query(PaneStandIn), 30, "the panes to be built")
    await pilot.pause()
    return app


async def build_ready(pilot: Pilot) -> LabApp:
    """Wait for the Build pane of a lab started without torch (``tiny_app(load_core=False)``):
    what a test of the form or the presets needs, without the second or more torch takes."""
    from tui_lab.ui.panes.builder.config_form import ConfigForm

    app = pilot.app
    assert isinstance(app, LabApp)
    await wait_until(pilot, lambda: bool(app.query(ConfigForm)), 10, "the Build pane")
    await pilot.pause()
    return app


async def settle(pilot: Pilot) -> None:
    """For snapshots: finish workers, drop toasts, stop cursors blinking."""
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause(0.3)
    for field in app.query(Input):
        field.cursor_blink = False
    app.clear_notifications()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def type_text(pilot: Pilot, text: str) -> None:
    """Type characters one by one into whatever has focus."""
    for ch in text:
        await pilot.press(ch)


async def edit_field(pilot: Pilot, key: str) -> None:
    """Focus the Build form and walk its cursor to ``key`` with the arrow keys, editing."""
    from tui_lab.ui.panes.builder.config_form import ConfigForm
    from tui_lab.ui.panes.builder.form_fields import FIELDS

    form = pilot.app.query_one(ConfigForm)
    if not form.has_focus:
        form.focus()
        await pilot.pause()
    if not form.editing:
        await pilot.press("enter")
    order = list(FIELDS)
    while form.cursor_key != key:
        step = order.index(key) - order.index(form.cursor_key)
        await pilot.press("down" if step > 0 else "up")
    assert form.editing and form.cursor_key == key


async def form_settled(pilot: Pilot) -> None:
    """Wait until the Build form has reported its last edit and the pane has taken it in
    (the report follows the next refresh, which a slow machine or frame rate delays)."""
    from tui_lab.ui.panes.builder.config_form import ConfigForm

    form = pilot.app.query_one(ConfigForm)
    await wait_until(pilot, lambda: not form.reporting, 10, "the form's report")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def set_field(pilot: Pilot, key: str, text: str) -> None:
    """Type ``text`` into a Build form field the way a user would (clear it, type)."""
    await edit_field(pilot, key)
    await pilot.press("end", "ctrl+u")
    await type_text(pilot, text)
    await form_settled(pilot)


def plain(widget: object) -> str:
    """What a Static shows, as plain text (works for strings, Text and tables)."""
    import io

    from rich.console import Console
    from textual.content import Content

    content = getattr(widget, "content", None)
    if content is None:
        content = widget.render()  # type: ignore[attr-defined]
    if isinstance(content, Content):
        return content.plain
    if isinstance(content, str):
        return Content.from_markup(content).plain
    console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
    console.print(content)
    return console.export_text()


async def open_trained(pilot: Pilot) -> None:
    """Wait until the run given with ``run_dir`` is restored and Decode has its model."""
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.train.train_pane import TrainPane

    app = await ready(pilot)
    pane = app.query_one(TrainPane)
    await wait_until(
        pilot, lambda: pane.state == "ready" and app.query_one(DecodePane).run is not None, 30
    )


async def decode(pilot: Pilot, text: str) -> DecodePane:
    """Type ``text`` into the Decode pane, Enter, and wait for the decode."""
    from tui_lab.ui.panes.decode.decode_pane import DecodePane

    await pilot.press("3")
    pane = pilot.app.query_one(DecodePane)
    pane.query_one("#decode-input", Input).value = ""
    await type_text(pilot, text)
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return pane


async def runs_pane(pilot: Pilot) -> RunsPane:
    """Show the Runs pane (6) and wait until its first read of the run folders is on show."""
    app = pilot.app
    assert isinstance(app, LabApp)
    await pilot.press("6")
    await wait_until(pilot, lambda: app.pane("runs") is not None and app.pane("runs").shown, 20)
    await pilot.pause()
    pane: RunsPane = app.pane("runs")
    return pane
