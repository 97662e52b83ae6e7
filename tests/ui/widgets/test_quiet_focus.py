"""QuietFocus: a focus change redraws nothing whole, and the Textual behaviour it guards against.

The second test is the guard's expiry date: it fails once a plain Textual widget no
longer redraws itself whole on a focus change, and then ``QuietFocus`` can go.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widget import Widget

from tui_lab.ui.widgets.quiet_focus import QuietFocus


class Counting(Widget, can_focus=True):
    """Counts its whole redraws (a ``refresh()`` with no region)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.whole_redraws = 0
        self.told: list[bool] = []

    def refresh(self, *regions: object, **kwargs: object) -> Widget:  # type: ignore[override]
        if not regions:
            self.whole_redraws += 1
        return super().refresh(*regions, **kwargs)  # type: ignore[arg-type]


class Quiet(QuietFocus, Counting, can_focus=True):
    def focus_changed(self) -> None:
        self.told.append(self.has_focus)


class Two(App[None]):
    def compose(self) -> ComposeResult:
        yield Counting(id="plain")
        yield Quiet(id="quiet")


async def _focus_back_and_forth(app: Two, pilot: object, target: Widget, other: Widget) -> int:
    other.focus()
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]
    before = target.whole_redraws  # type: ignore[attr-defined]
    target.focus()
    await pilot.pause()  # type: ignore[attr-defined]
    other.focus()
    await pilot.pause()  # type: ignore[attr-defined]
    return int(target.whole_redraws) - before  # type: ignore[attr-defined]


async def test_quiet_focus_tells_focus_changed_and_redraws_nothing_whole() -> None:
    app = Two()
    async with app.run_test() as pilot:
        quiet, plain = app.query_one(Quiet), app.query_one("#plain", Counting)
        assert await _focus_back_and_forth(app, pilot, quiet, plain) == 0
        assert quiet.told[-2:] == [True, False] and not quiet.has_focus


async def test_textual_still_redraws_a_plain_widget_whole_on_focus() -> None:
    """When this fails, Textual no longer redraws on focus: delete QuietFocus."""
    app = Two()
    async with app.run_test() as pilot:
        quiet, plain = app.query_one(Quiet), app.query_one("#plain", Counting)
        assert await _focus_back_and_forth(app, pilot, plain, quiet) >= 2
