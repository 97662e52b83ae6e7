"""The Features pane's crosscoder diff view: features new at the later source, gone, shared.

``e`` asks for a crosscoder folder to open, or two snapshot steps of the run in hand
(``A,B``; empty: an early one and the last) to train one on; the sources' contexts are
then read once in a worker (``e`` while it runs stops it, nothing written). ``g`` cycles the list (new at B, gone at B, shared); the
arrows move in it and the card follows: the feature's class, decoder norms and its top
contexts at each source, shaded by activation. Enter opens the card for scrolling. The
pane's ``/`` types text here: enter lists, on each token, the features firing on it (the
crosscoder reading every source, and each source read alone); enter on one shows its card.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static

from tui_lab.ui import key_bindings
from tui_lab.ui.panes.features import crosscoder_workers as jobs
from tui_lab.ui.panes.features.crosscoder_view import (
    GROUPS,
    TITLES,
    card_text,
    header_text,
    ordered,
    row_line,
    token_line,
)
from tui_lab.ui.panes.features.cursor_list import CursorList

if TYPE_CHECKING:
    from tui_lab.core.verbs.crosscoder_features import FeatureRow

TABLE_TOKENS = 10_000  # rows of the text read at every source for the contexts
D_SAE, TRAIN_STEPS, TOKENS = 256, 2000, 40_000  # a crosscoder trained here: the command's defaults


class CrosscoderDiff(Vertical):
    """A crosscoder's features by class, each opening to its contexts at every source."""

    BINDINGS = key_bindings.CROSSCODER_DIFF

    def __init__(self, train_steps: int = TRAIN_STEPS, tokens: int = TOKENS, d_sae: int = D_SAE,
                 table_tokens: int = TABLE_TOKENS, id: str | None = None) -> None:
        super().__init__(id=id)
        self.train_steps, self.tokens, self.d_sae, self.table_tokens = train_steps, tokens, d_sae, table_tokens
        self.ready: jobs.DiffReady | None = None
        self.rows: dict[str, list[FeatureRow]] = {}
        self.shown_rows: list[FeatureRow] = []  # the list on show, in its order
        self.kinds: dict[int, str] = {}  # each feature's class
        self.token_rows: list[jobs.TokenFeature] = []  # the typed text's lines
        self.summary: dict[str, object] = {}
        self.group = GROUPS[0]
        self.run_dir: Path | None = None
        self.runs_root = Path(".")
        self.busy = False  # a worker trains or reads

    def compose(self) -> ComposeResult:
        yield Static(id="xc-head")
        with Horizontal(id="xc-main"):
            yield CursorList(empty="no crosscoder yet: e opens or trains one", id="xc-list")
            with VerticalScroll(id="xc-card-scroll"):
                yield Static(id="xc-card")
        yield Static(id="xc-status")
        yield Input(id="xc-ask")
        yield Input(placeholder="/ type text; enter shows the features firing on each token, at every source",
                    id="xc-prompt")
        yield CursorList(empty="", id="xc-tokens")

    def on_mount(self) -> None:
        """Hidden until the pane's ``c``; the question closed, no typed text's tokens yet."""
        self.query_one("#xc-ask", Input).display = False
        self.query_one("#xc-tokens", CursorList).display = False

    def enter(self, run_dir: Path | None, runs_root: Path) -> None:
        """Shown: remember the run in hand (its snapshots) and where to save; ask if empty."""
        self.run_dir, self.runs_root = run_dir, runs_root
        if self.ready is None:
            self.action_ask()
        else:
            self.query_one("#xc-list", CursorList).focus()

    # ---- keys ----------------------------------------------------------------------
    def action_ask(self) -> None:
        """e: a crosscoder folder, or two steps of the run in hand to train one; while one is
        being trained or read, e stops it (nothing is written)."""
        if self.busy:
            self.workers.cancel_group(self, "crosscoder")
            self._status(Text("stopping…", style="dim"))
            return
        ask = self.query_one("#xc-ask", Input)
        where = f"two steps of {self.run_dir.name} as A,B (empty: an early one and the last)" if self.run_dir \
            else "(the model in hand has no history to train on)"
        ask.placeholder = f"a crosscoder folder to open, or {where}; escape leaves"
        ask.display = True
        ask.focus()

    def action_cycle_group(self) -> None:
        """g: the next list: new at B, gone at B, shared."""
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        self._fill()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """Enter in the question: open the folder, or train over the steps given."""
        message.stop()
        value = message.value.strip()
        if message.input.id == "xc-prompt":
            self.read_text(value)
            return
        message.input.display = False
        self.query_one("#xc-list", CursorList).focus()
        if value and Path(value).expanduser().is_dir():
            self.open(str(Path(value).expanduser()))
            return
        if self.run_dir is None:
            self._status(Text("no run with history in hand: open one (6) or give a crosscoder folder", style="yellow"))
            return
        try:
            steps = tuple(int(v) for v in value.split(",")) if value else None
        except ValueError:
            self._status(Text(f"{value!r}: a folder, or two steps such as 100,1500", style="red"))
            return
        out = self.runs_root / "crosscoders" / f"xc-{time.strftime('%Y%m%d-%H%M%S')}"
        self._status(Text("collecting activations at both snapshots… (e stops)", style="dim"))
        self.busy = True
        self.run_worker(partial(jobs.train_diff, self.post_message, str(self.run_dir), steps, str(out), self.d_sae,
                                self.train_steps, self.tokens, self.table_tokens),
                        name="crosscoder", group="crosscoder", thread=True, exclusive=True, exit_on_error=False)

    def focus_prompt(self) -> None:
        """The pane's /: type text."""
        self.query_one("#xc-prompt", Input).focus()

    def read_text(self, text: str) -> None:
        """The features firing on each token of ``text`` (a worker reads it at every source)."""
        if self.ready is None or self.busy:
            self._status(Text("no crosscoder yet: e opens or trains one", style="yellow") if self.ready is None
                         else Text("busy: wait for the crosscoder (e stops it)", style="yellow"))
            return
        if not text:
            return
        self.run_worker(partial(jobs.typed_text, self.post_message, self.ready.crosscoder, self.ready.models, text),
                        name="crosscoder-text", group="crosscoder-text", thread=True, exclusive=True,
                        exit_on_error=False)

    def on_key(self, event: events.Key) -> None:
        """Escape in the question closes it; in the typed text, back to the list."""
        ask = self.query_one("#xc-ask", Input)
        if event.key == "escape" and (ask.has_focus or self.query_one("#xc-prompt", Input).has_focus):
            ask.display = False
            self.query_one("#xc-list", CursorList).focus()
            event.stop()

    def open(self, folder: str) -> None:
        """Open a crosscoder's folder (its sources named in its cfg.json) and read its contexts."""
        self._status(Text(f"opening {folder}… (e stops)", style="dim"))
        self.busy = True
        self.run_worker(partial(jobs.open_diff, self.post_message, folder, self.table_tokens),
                        name="crosscoder", group="crosscoder", thread=True, exclusive=True, exit_on_error=False)

    # ---- what is on show -------------------------------------------------------------
    def _status(self, text: Text) -> None:
        self.query_one("#xc-status", Static).update(text)

    def _fill(self) -> None:
        if self.ready is None:
            return
        cc = self.ready.crosscoder
        self.query_one("#xc-head", Static).update(header_text(
            self.summary, [s.label for s in cc.cfg.sources], self.group, cc.cfg.hook, self.ready.table.tokens))
        listing = self.query_one("#xc-list", CursorList)
        listing.empty = "no feature of this kind (g: the next list)"
        density = self.ready.table.density.tolist()
        self.shown_rows = ordered(self.group, self.rows.get(self.group, []), density)
        listing.show([row_line(r, density[r["index"]]) for r in self.shown_rows], 0)
        self.show_feature(0)

    def show_feature(self, index: int) -> None:
        """The card of the list's ``index``-th feature (a few windows encoded: no pass over the text)."""
        rows = self.shown_rows
        if self.ready is None or not 0 <= index < len(rows):
            self.query_one("#xc-card", Static).update(Text(""))
            return
        self.show_card(rows[index]["index"])

    def show_card(self, feature: int) -> None:
        """Feature ``feature``'s card, whichever list holds it."""
        from tui_lab.core.verbs.crosscoder_features import feature_card

        if self.ready is None:
            return
        r = self.ready
        self.query_one("#xc-card", Static).update(
            card_text(feature_card(r.crosscoder, r.fired, r.table, r.models, feature)))

    def jump_to(self, feature: int) -> None:
        """Show ``feature``: its list (new, gone, shared) with the cursor on it, and its card; a
        feature in between or dead is in no list, so only its card."""
        kind = self.kinds.get(feature)
        listing = self.query_one("#xc-list", CursorList)
        if kind in GROUPS:
            if kind != self.group:
                self.group = kind
                self._fill()
            at = next(i for i, r in enumerate(self.shown_rows) if r["index"] == feature)
            listing.show(listing.lines, at)
        elif kind is not None:
            self._status(Text(f"feature {feature} is {TITLES[kind]}: in no list g cycles; its card is on show",
                              style="dim"))
        self.show_card(feature)
        listing.focus()

    def on_cursor_list_moved(self, message: CursorList.Moved) -> None:
        """The list's cursor moved: that feature's card."""
        message.stop()
        if message.sender.id == "xc-list":
            self.show_feature(message.index)

    def on_cursor_list_chosen(self, message: CursorList.Chosen) -> None:
        """Enter on the list: the card, focused for scrolling (escape or l returns to the list);
        on a typed token's feature: that feature in its list."""
        message.stop()
        if message.sender.id == "xc-tokens":
            if 0 <= message.index < len(self.token_rows):
                self.jump_to(self.token_rows[message.index].feature)
            return
        self.show_feature(message.index)
        self.query_one("#xc-card-scroll", VerticalScroll).focus()

    # ---- worker messages ---------------------------------------------------------------
    def on_crosscoder_diff_diff_progress(self, message: jobs.DiffProgress) -> None:
        message.stop()
        frac = message.done / max(1, message.total)
        bar = "█" * int(30 * frac) + "·" * (30 - int(30 * frac))
        self._status(Text(f"{message.what} {bar} {message.done:,}/{message.total:,}", style="dim"))

    def on_crosscoder_diff_diff_ready(self, message: jobs.DiffReady) -> None:
        """The lists and the first feature of the first one."""
        from tui_lab.core.verbs.crosscoder_features import feature_rows, summary

        message.stop()
        self.busy = False
        self.ready = message
        self.summary = summary(message.crosscoder, message.fired)
        self.rows = feature_rows(message.crosscoder, message.fired)
        self.kinds = {r["index"]: r["kind"] for rows in self.rows.values() for r in rows}
        self.token_rows = []
        self.query_one("#xc-tokens", CursorList).show([], 0)
        self.query_one("#xc-tokens", CursorList).display = False
        self.group = GROUPS[0]
        self._fill()
        self._status(Text(f"{message.folder}: {message.table.tokens:,} tokens read at each source in "
                          f"{message.seconds:.1f} s; g: new / gone / shared", style="dim"))
        self.query_one("#xc-list", CursorList).focus()

    def on_crosscoder_diff_diff_failed(self, message: jobs.DiffFailed) -> None:
        message.stop()
        self.busy = False
        self._status(Text(message.text, style="red"))

    def on_crosscoder_diff_text_failed(self, message: jobs.TextFailed) -> None:
        message.stop()
        self._status(Text(message.text, style="red"))

    def on_crosscoder_diff_text_features(self, message: jobs.TextFeatures) -> None:
        """The typed text's tokens, each with its features; the list takes the keys."""
        message.stop()
        if self.ready is None:
            return
        sources = [s.label for s in self.ready.crosscoder.cfg.sources]
        self.token_rows = message.rows
        tokens = self.query_one("#xc-tokens", CursorList)
        tokens.empty = "no feature fires on this text"
        tokens.display = True
        tokens.show([token_line(r, message.labels[r.t], sources, self.kinds.get(r.feature))
                     for r in message.rows], 0)
        tokens.focus()
