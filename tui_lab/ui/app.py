"""The lab's Textual app: the panes of ``pane_registry`` behind a tab bar, a status bar, the footer and the palette.

Thin on purpose: the panes own their widgets and actions; ``routing.py``'s
mixin hands the messages that cross panes on; the app owns the global keys
(1-N, ?, q, escape, f12), holds the lab's config (a preset's, or an opened
run's) and loads torch in a thread after the first frame is on screen.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from tui_lab.core.errors import one_line
from tui_lab.core.runs.folder import runs_root
from tui_lab.ui import compat, hangup, pane_registry, torch_preload
from tui_lab.ui.export import save_svg
from tui_lab.ui.lazy_panes import panes_in_tab_order
from tui_lab.ui.messages import ToPane
from tui_lab.ui.pane_registry import PaneStart
from tui_lab.ui.panes.builder.build_pane import BuildPane
from tui_lab.ui.panes.params.param_count import ParamCounter
from tui_lab.ui.routing import PaneRouting
from tui_lab.ui.run_config import starting_config
from tui_lab.ui.state.host import Pane
from tui_lab.ui.state.lab_state import LabState
from tui_lab.ui.user_keymap import read_keymap
from tui_lab.ui.widgets.key_bar import KeyBar
from tui_lab.ui.widgets.pane_stand_in import PaneStandIn
from tui_lab.ui.widgets.pane_tabs import PaneSwitcher, PaneTabs
from tui_lab.ui.widgets.size_notice import MIN_HEIGHT, MIN_WIDTH, SizeNotice
from tui_lab.ui.widgets.status_bar import StatusBar

compat.install()

if TYPE_CHECKING:
    from tui_lab.ui.core_access import Core
    from tui_lab.ui.screens.help import PaneKeys

class LabApp(PaneRouting):
    """Build, train, decode and look inside small Transformers."""

    @dataclass
    class CoreLoaded(Message):
        """Torch and the core modules are imported (``core`` is None if that failed)."""

        core: Core | None
        error: str | None = None

    TITLE = "tfx-lab"
    CSS_PATH = ["styles/app.tcss", *pane_registry.style_sheets()]
    # Screen classes the .tcss files use to fit 80x24 as well as large terminals.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]
    BINDINGS = pane_registry.APP

    def __init__(
        self,
        preset: str | None = None,
        run_dir: str | os.PathLike[str] | None = None,
        runs_dir: str | os.PathLike[str] | None = None,
        follow: bool = False,
        user_dir: Path | None = None,
        load_core: bool = True,
        model_source: str | None = None,
        revision: str | None = None,
        dtype: str = "float32",
        warm_hidden_panes: bool = True,
        keymap_path: Path | None = None,
    ) -> None:
        super().__init__()
        # No animations unless asked for (TEXTUAL_ANIMATIONS): the sliding tab
        # underline alone repainted ~15 frames per pane switch, which is what a
        # two-core machine training a model (or an SSH link) can least afford.
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            self.animation_level = "none"
        self.run_dir = Path(run_dir) if run_dir else None
        # An opened run's settings are the lab's from the first frame on.
        config, self.start_error = starting_config(preset, self.run_dir)
        # What the panes share (host.state); --model SOURCE is opened once torch is here.
        self.state = LabState(
            config,
            runs_root(runs_dir),
            user_dir=user_dir,
            model_source=model_source,
            model_revision=revision,
            model_dtype=dtype,
        )
        self.follow_run = follow
        self.start_pane = "train" if follow else "build"  # watching a run is about its curves
        self.panes: dict[str, Pane] = {}  # pane id -> pane widget, once mounted
        self.pane_waiters: dict[str, list[ToPane]] = {}
        self._load_core = load_core
        self._report_generation = 0
        self.counter = ParamCounter()
        # The user's keymap.yaml: the entries kept apply from the first key on.
        self.user_keymap = read_keymap(keymap_path)
        self.set_keymap(self.user_keymap.entries)
        self.state.keymap = dict(self.user_keymap.entries)
        # Each hidden pane is drawn once out of sight, so that showing it is instant
        # (PaneSwitcher); False builds a pane when it is first shown instead.
        self.warm_hidden_panes = warm_hidden_panes

    # ---- layout -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield PaneTabs(pane_registry.tabs(), self.start_pane, id="tabs")
        yield PaneSwitcher(
            # Build now; the others after the first frame (see loaded()).
            *panes_in_tab_order(PaneStart(self.state, self.run_dir, self.follow_run), held=self._load_core),
            active=self.start_pane,
            warm=self.warm_hidden_panes,
            id="panes",
        )
        yield SizeNotice(id="size-notice")
        yield KeyBar(id="keys")

    def register_pane(self, pane_id: str, widget: Widget) -> None:
        """Called by each pane when it mounts; hands it what it missed."""
        assert isinstance(widget, Pane)
        self.panes[pane_id] = widget
        if self.active_pane == pane_id:
            self._focus_pane(pane_id)
        for message in self.pane_waiters.pop(pane_id, []):
            widget.post_message(message)

    def on_mount(self) -> None:
        """Show the first frame now; load torch once it is painted."""
        build = self.panes["build"] = self.query_one(BuildPane)
        if self.model_source is not None:
            build.show_opening(self.model_source)
        self._update_status()
        self._focus_pane(self.start_pane)
        for problem in self.user_keymap.problems:  # one line each; the default key stands
            self.notify(problem, title="Keymap", severity="warning", timeout=10)
        if self.start_error:
            self.notify(  # long enough to read while torch loads
                self.start_error,
                title="Preset not loaded; using the default",
                severity="error",
                timeout=15,
            )
            self.query_one(BuildPane).show_preset_error(f"{self.start_error} (showing the default)")
        if self._load_core:
            self.call_after_refresh(self._load_core_worker)
        if not self.is_headless and sys.__stdin__ is not None:
            self._hangup_timer = self.set_interval(hangup.CHECK_SECONDS, self._check_hangup)

    async def _check_hangup(self) -> None:
        """The terminal has closed: quit as ctrl+q would (see ``hangup``)."""
        stdin = sys.__stdin__
        if stdin is not None and hangup.hung_up(stdin.fileno()):
            self._hangup_timer.stop()
            await self.action_quit()

    def on_resize(self, event: events.Resize) -> None:
        """Below 80x24, show a notice instead of a squeezed layout."""
        width, height = event.size
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        was_small = self.screen.has_class("-too-small")
        self.screen.set_class(small, "-too-small")
        if small:
            self.query_one(SizeNotice).show_size(width, height)
            if not was_small:
                # Hidden widgets must not keep taking keys (a zero-height list breaks).
                self._focus_before_small = self.focused
                self.set_focus(None)
        elif was_small:
            before = getattr(self, "_focus_before_small", None)
            active = self.active_pane
            pane = self.pane(active)
            if before is not None and before.is_attached and pane in before.ancestors_with_self:
                self.set_focus(before)
            else:
                self._focus_pane(active)

    def _update_status(self) -> None:
        if self.quitting:  # a message routed while the screens are pruned (a run ending at exit)
            return
        train = self.train_pane()
        build = self.query_one(BuildPane)
        training = train.train_state.status_word if train is not None else ""
        if self.opened is not None:
            name, kind = self.opened.config.name, "model"
        elif self.model_source is not None:  # still loading torch, or opening it
            name, kind = self.model_source, "model"
        else:
            name, kind = build.config.name + (" (edited)" if build.edited else ""), "preset"
        self.query_one(StatusBar).show(name, self.core_state, training, kind)

    @property
    def active_pane(self) -> str:
        """The id of the pane on show ("build", "train", ...: ``pane_registry.PANES``)."""
        return self.query_one(PaneSwitcher).active

    @property
    def in_text_field(self) -> bool:
        """True while typed characters go into a field (so the pane keys and q type, not switch)."""
        focused = self.focused
        return focused is not None and focused.check_consume_key("1", "1")

    @property
    def training_active(self) -> bool:
        """True while a training loop is running or paused."""
        train = self.train_pane()
        return train is not None and train.train_state.active

    # ---- torch loading ----------------------------------------------------------------

    def _load_core_worker(self) -> None:
        """Import torch and the core (a second or two) in a background thread.

        A daemon thread rather than a Textual worker: an import cannot be
        interrupted, and quitting while torch loads must not wait for it.
        """

        def load() -> None:
            from tui_lab.ui.core_access import load_core

            widening = None
            if self.model_source is not None and self.model_dtype == "float32":
                # Torch-free: its thread widens the weights on the other core meanwhile.
                from tui_lab.core.pretrained.widening import start_widening

                widening = start_widening(self.model_source, self.model_revision)
            try:
                core = load_core()
            except Exception as exc:  # noqa: BLE001 - the lab still shows presets and configs
                self.post_message(self.CoreLoaded(None, one_line(exc)))
                return
            self.post_message(self.CoreLoaded(core))
            if self.model_source is not None:  # on at once, without a round trip through the UI
                from tui_lab.ui.model_opening import open_and_post

                open_and_post(self, self.model_source, self.model_revision, self.model_dtype, widening)

        threading.Thread(target=load, name="tfx-lab-load-torch", daemon=True).start()

    def on_lab_app_core_loaded(self, message: LabApp.CoreLoaded) -> None:
        """Torch is here: panes that need it come alive."""
        if message.core is None:
            self.core_state = f"torch failed to load: {message.error}"
            self.notify(self.core_state, severity="error", timeout=10)
            self._update_status()
            self.loaded()
            return
        self.core = message.core
        self.core_state = f"torch {message.core.version} ready"
        if self.model_source is not None:  # the loading thread opens it now
            self.core_state = f"opening {self.model_source}…"
        else:
            self.loaded()
        self._update_status()
        if (train := self.train_pane()) is not None:
            train.core_ready()
        build = self.query_one(BuildPane)
        self._request_report(build.config, build.edited)  # not while a model opens

    def loaded(self) -> None:
        """What the user waited for is here (torch, and the ``--model``, opened or not):
        the hidden panes are built now. Before, they would have slowed that wait."""
        for stand_in in self.query(PaneStandIn):
            stand_in.release()

    def _focus_pane(self, pane_id: str) -> None:
        pane = self.pane(pane_id)
        if pane is not None and not self.screen.has_class("-too-small"):
            pane.focus_default()

    def on_worker_state_changed(self, event: Any) -> None:
        """Keep the status bar in step with training."""
        self._update_status()

    # ---- actions ------------------------------------------------------------------

    def action_show_pane(self, pane: str) -> None:
        """Switch to a pane (its key: 1-N)."""
        self.query_one(PaneSwitcher).show(pane)
        self.query_one(PaneTabs).active = pane
        self._focus_pane(pane)  # focus lands where the pane's keys work

    def action_save_svg(self) -> None:
        """f12: the screen as it is (any pane, a modal too) to an SVG under the runs root."""
        save_svg(self, self.runs_root, self.active_pane)

    def action_help(self) -> None:
        """Open the help screen listing every binding."""
        from tui_lab.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.help_sections(), self.user_keymap))

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The help screen's sections: the app's keys and each mounted pane's, as remapped."""
        from tui_lab.ui.screens.help import lab_sections

        keymap = self.user_keymap.entries
        return lab_sections(pane_registry.APP, self.pane_keys(), self.get_key_display, keymap)

    def pane_keys(self) -> list[PaneKeys]:
        """What help lists for each mounted pane, in tab order."""
        from tui_lab.ui.screens.help import PaneKeys

        found = []
        for spec in pane_registry.PANES:
            pane = self.pane(spec.id)
            if pane is None:
                continue
            cls = type(pane)
            sections: list[tuple[str, list[BindingType]]] = [("", spec.bindings), *cls.KEY_SECTIONS]
            found.append(PaneKeys(spec.key, spec.title, sections, list(cls.HELP_EXTRA)))
        return found

    def action_basics(self, view: str = "positions") -> None:
        """Open the basics: positional table, masks, sqrt(d_k) scaling, schedule of the lab's model."""
        from tui_lab.ui.screens.basics.basics_screen import BasicsScreen, lab_source

        self.push_screen(BasicsScreen(lab_source(self.state), view))

    def action_leave_field(self) -> None:
        """Escape: leave a text field so the single-key bindings work again."""
        if isinstance(self.focused, Input):
            if self.active_pane == "decode":
                self.query_one("#decode-steps").focus()
            else:
                self.set_focus(None)

    async def action_quit(self) -> None:
        """Quit at once; a training loop is told to stop and saves its checkpoint."""
        if (train := self.train_pane()) is not None:
            train.stop_training()
        self.exit()

    def run_pane_action(self, pane: str, action: str) -> None:
        """Switch to ``pane`` and run one of its actions (for the command palette)."""
        self.action_show_pane(pane)
        target = self.pane(pane)
        if target is not None:
            self.call_later(self.run_action, action, target)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers Textual's own commands and every lab action (from the bindings)."""
        from tui_lab.ui.palette import lab_commands

        yield from super().get_system_commands(screen)
        panes = [p for spec in pane_registry.PANES if (p := self.pane(spec.id)) is not None]
        yield from lab_commands(self, panes, self.user_keymap.entries, self.run_pane_action)


def run_lab(
    preset: str | None = None,
    run_dir: str | None = None,
    runs_dir: str | None = None,
    follow: bool = False,
    model_source: str | None = None,
    revision: str | None = None,
    dtype: str = "float32",
) -> None:
    """Open the lab (the ``tfx-lab`` command with no subcommand)."""
    torch_preload.start()  # on the second core, while the first frame is drawn
    try:
        LabApp(
            preset=preset,
            run_dir=run_dir,
            runs_dir=runs_dir,
            follow=follow,
            model_source=model_source,
            revision=revision,
            dtype=dtype,
        ).run()
    finally:
        # The screen is back to the shell; wait (briefly) for a stopped run's last save.
        # (Imported here: nothing may delay the first frame.)
        from tui_lab.core.training import remote as run_process

        run_process.shutdown_all()
