"""The Patch pane's pair: a pick list of ready-made pairs (and "typed"), the clean and
corrupted texts, the two answers, and an encoder-decoder's decoder input (optional).
Enter picks or submits; the pane runs the pair."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input
from typing_extensions import Unpack

from tui_lab.ui.panes.patch.patch_jobs import PairSource
from tui_lab.ui.widgets.pick_list import Item, PickList
from tui_lab.ui.widgets.widget_options import WidgetOptions

TYPED = "typed"  # the pick list's last item: the four fields as typed
FIELDS = ("clean", "corrupt", "answer", "wrong", "target")
OPTIONAL = ("target",)  # left empty, the pair has none
PLACEHOLDERS = {
    "clean": "clean text (the model gives the answer)",
    "corrupt": "corrupted text, as many tokens",
    "answer": "answer (1 token)",
    "wrong": "wrong answer (1 token)",
    "target": "an encoder-decoder's decoder input before the answer (optional)",
}


class PairForm(Vertical):
    """Ready-made pairs on the left, the four fields on the right."""

    @dataclass
    class Submitted(Message):
        """Run this pair."""

        source: PairSource

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.names: list[str] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="patch-pair-row"):
            yield PickList(id="patch-pairs")
            with Vertical(id="patch-fields"):
                yield Input(placeholder=PLACEHOLDERS["clean"], id="patch-clean")
                yield Input(placeholder=PLACEHOLDERS["corrupt"], id="patch-corrupt")
                with Horizontal(id="patch-answers"):
                    yield Input(placeholder=PLACEHOLDERS["answer"], id="patch-answer")
                    yield Input(placeholder=PLACEHOLDERS["wrong"], id="patch-wrong")
                yield Input(placeholder=PLACEHOLDERS["target"], id="patch-target")

    def offer(self, names: list[str], source: PairSource) -> None:
        """Offer ``names`` (the model's ready-made pairs) and typing one's own; ``source``'s
        highlighted (its default, None: the first ready-made pair)."""
        self.names = [*names, TYPED]
        chosen = TYPED if source.custom else (source.name or (names[0] if names else TYPED))
        items = [Item(n, "ready-made") for n in names]
        items.append(Item(TYPED, "the fields", "your clean and corrupted texts and answers"))
        pick = self.query_one("#patch-pairs", PickList)
        pick.set_items(items, self.names.index(chosen) if chosen in self.names else len(names))

    def fill(self, source: PairSource) -> None:
        """Show a pair's texts in the fields."""
        for name in FIELDS:
            self.query_one(f"#patch-{name}", Input).value = getattr(source, name)

    def typed(self) -> PairSource:
        """The fields as they are."""
        values = {name: self.query_one(f"#patch-{name}", Input).value for name in FIELDS}
        return PairSource(None, custom=True, **values)

    def focus_list(self) -> None:
        """The pick list takes the keys."""
        self.query_one("#patch-pairs", PickList).focus()

    def on_pick_list_picked(self, message: PickList.Picked) -> None:
        """Enter on a pair: run it (on "typed", go to the first field)."""
        message.stop()
        name = self.names[message.index]
        if name == TYPED:
            self.query_one("#patch-clean", Input).focus()
        else:
            self.post_message(self.Submitted(PairSource(name)))

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """Enter in a field: the next empty one, or run the typed pair."""
        message.stop()
        for name in FIELDS:
            field = self.query_one(f"#patch-{name}", Input)
            if not field.value and name not in OPTIONAL:
                field.focus()
                return
        self.post_message(self.Submitted(self.typed()))
