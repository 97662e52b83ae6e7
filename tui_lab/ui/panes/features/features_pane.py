"""Features pane: a sparse autoencoder on the model in hand, trained live, browsed feature by feature.

- ``t`` trains an SAE (1,024 features, k = 16, ``core/sae/recipe.py``; ``A`` picks TopK,
  BatchTopK or Matryoshka BatchTopK, as ``tfx-lab sae train --arch``) on the
  residual stream after the last block, from the model's own text, in a worker
  that posts its progress (live curves: MSE, L0, explained variance, dead) and
  saves the SAE in SAELens's format under ``<runs>/saes/``; ``t`` again stops it.
- ``o`` opens an SAE folder (SAELens's format, the lab's or SAELens's own).
- Then every feature's table over the text is built once in a worker (cached on
  disk by the SAE's, model's and text's hashes: ``core/sae/feature_cache.py``),
  and the list (``s`` sorts by density, largest activation, or activation on the
  typed text) shows one feature at a time: its contexts shaded by activation with
  the strongest marked, histogram, logit effects and density. Moving is a lookup.
- ``/`` types text: each token shows the features firing on it; enter on one jumps
  to that feature. ``x`` decodes that text plainly and with the feature on show
  ablated (its reconstruction error kept: ``core/sae/interventions.py``), ``v``
  with its decoder row added at its largest activation (steering).
- ``c`` shows the crosscoder diff view instead (``crosscoder_diff.py``); ``/`` there types
  into its own field (the SAE's is hidden with the SAE's list).
- The Circuit pane's enter on a feature shows that transcoder feature's card in place
  of the list (``transcoder_feature_panel.py``); escape goes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static
from typing_extensions import Unpack

from tui_lab.core.sae import defaults as DEFAULT
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import OpenSaeFolder, ShowTranscoderFeature
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.features import features_workers as jobs
from tui_lab.ui.panes.features.browser import SORT_TITLES, FeatureBrowser
from tui_lab.ui.panes.features.card_view import (
    ARCHS,
    arch_text,
    card_text,
    curves_text,
    hint_text,
    shown,
)
from tui_lab.ui.panes.features.crosscoder_diff import CrosscoderDiff
from tui_lab.ui.panes.features.cursor_list import CursorList
from tui_lab.ui.panes.features.transcoder_feature_panel import TranscoderFeaturePanel
from tui_lab.ui.state.host import Pane
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.sae.sae import SparseAutoencoder

TABLE_TOKENS = 200_000  # tokens of the text the browser reads
CURVES = ("mse", "l0", "explained_variance", "dead_fraction")
TRAINED_TITLES = {"batchtopk": "BatchTopK", "matryoshka_batchtopk": "Matryoshka BatchTopK"}
SAE_ONLY = ("cycle_sort", "intervene", "ablate_in_decode")  # actions hidden in the crosscoder diff view


class FeaturesPane(Pane, Vertical, can_focus=False):
    """An SAE on the model in hand: train it live, open one, browse its features."""

    PANE_ID = pane_id(__name__)
    BINDINGS = key_bindings.FEATURES
    KEY_SECTIONS = (("Feature list and the typed text's tokens", key_bindings.FEATURE_LIST),
                    ("Crosscoder diff (c)", key_bindings.CROSSCODER_DIFF))

    # the workers' messages (``features_workers.py``), reachable as FeaturesPane.<name>
    TrainProgress = jobs.TrainProgress
    TrainEnded = jobs.TrainEnded
    TableProgress = jobs.TableProgress
    TableReady = jobs.TableReady
    PromptReady = jobs.PromptReady
    Intervened = jobs.Intervened
    Failed = jobs.Failed

    def __init__(self, d_sae: int = DEFAULT.D_SAE, k: int = DEFAULT.K, train_tokens: int | None = None,
                 table_tokens: int = TABLE_TOKENS, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.d_sae, self.k = d_sae, k
        self.arch = "topk"  # what t trains (A cycles through ARCHS)
        self.train_tokens = train_tokens
        self.table_tokens = table_tokens
        self.browser: FeatureBrowser | None = None
        self.handle: ModelInHand | None = None
        self.hook: str | None = None
        self.training = False
        self.history: dict[str, list[float]] = {name: [] for name in CURVES}
        self.progress = (0, 0)
        self.source = ""

    def compose(self) -> ComposeResult:
        yield Static(id="features-title")
        with Horizontal(id="features-main"):
            yield CursorList(empty="no SAE yet", id="features-list")
            with VerticalScroll(id="features-card-scroll"):
                yield Static(id="features-card")
        yield CrosscoderDiff(id="features-diff")
        yield Static(id="features-status")
        yield Input(placeholder="an SAE folder (SAELens's format); enter opens it, escape leaves",
                    id="features-path")
        yield Input(placeholder="/ type text; enter shows the features firing on each token", id="features-prompt")
        yield CursorList(empty="", id="features-tokens")

    def on_mount(self) -> None:
        """Say how to start; register with the host."""
        if self.host.quitting:
            return
        self.host.register_pane(self.PANE_ID, self)
        self.query_one("#features-path", Input).display = False
        self.query_one("#features-diff", CrosscoderDiff).display = False
        self._title()
        self.query_one("#features-card", Static).update(hint_text(self.arch, self.d_sae, self.k))

    def focus_default(self) -> None:
        """The feature list takes the keys (the crosscoder's, while its diff view is on show)."""
        diff = self.query_one("#features-diff", CrosscoderDiff)
        self.query_one("#xc-list" if diff.display else "#features-list", CursorList).focus()

    # ---- what is on show -----------------------------------------------------------
    def _title(self) -> None:
        title = Text()
        title.append("Features", style="bold")
        if self.browser is not None:
            b = self.browser
            trained = b.sae.cfg.metadata.extra.get("training_architecture")  # a BatchTopK SAE's, as SAELens
            as_ = f" (trained as {TRAINED_TITLES.get(str(trained), trained)})" if trained else ""
            title.append(f"  ·  {self.source}  ·  {b.sae.cfg.architecture}{as_} {b.sae.cfg.d_sae:,} at {self.hook}"
                         f"  ·  sorted by {SORT_TITLES[b.sort]}", style="dim")
            off = [str(f.index) for f in self.host.state.ablation.features if f.sae is b.sae]
            if off:
                title.append(f"  ·  off in Decode: {', '.join(off)}", style="bold magenta")
        elif self.training:
            title.append(f"  ·  training at {self.hook}", style="dim")
        self.query_one("#features-title", Static).update(title)

    def _status(self, text: Text | str) -> None:
        self.query_one("#features-status", Static).update(text)

    def _fill_list(self) -> None:
        b = self.browser
        if b is None:
            return
        key = b.prompt_max if b.sort == "prompt" else None
        lines = []
        for i in b.order:
            line = Text(no_wrap=True)
            line.append(f"{i:>6} ", style="bold")
            line.append(f"{float(b.table.density[i]):7.3%} {float(b.table.max[i]):6.3g}", style="dim")
            if key is not None:
                line.append(f" {float(key[i]):6.3g}", style="yellow")
            lines.append(line)
        self.query_one("#features-list", CursorList).show(lines, b.cursor)

    def show_feature(self) -> None:
        """Draw the feature under the list's cursor (a lookup: no forward pass)."""
        if self.browser is None:
            return
        card = self.browser.card()
        self.query_one("#features-card", Static).update(card_text(card))

    def jump_to(self, feature: int) -> None:
        """Show ``feature``: the list's cursor moves to it (its order kept), the card follows."""
        if self.browser is None:
            return
        self.browser.jump_to(feature)
        listing = self.query_one("#features-list", CursorList)
        listing.show(listing.lines, self.browser.cursor)
        self.show_feature()

    # ---- keys ----------------------------------------------------------------------
    def action_cycle_sort(self) -> None:
        """s: sort the list by density, largest activation, or activation on the typed text."""
        if self.browser is None:
            return
        self.browser.cycle_sort()
        self._fill_list()
        self._title()

    def action_focus_prompt(self) -> None:
        """/: type text (in the crosscoder diff view, its own text field)."""
        diff = self.query_one("#features-diff", CrosscoderDiff)
        if diff.display:
            diff.focus_prompt()
        else:
            self.query_one("#features-prompt", Input).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The SAE's own keys (sort, decode ablated or steered, off in Decode) are off the footer
        while the crosscoder diff view is on show: they act on the SAE's list, hidden then."""
        if action in SAE_ONLY and self.is_mounted and self.query_one("#features-diff", CrosscoderDiff).display:
            return False
        return True

    def action_focus_list(self) -> None:
        """l: back to the feature list."""
        self.focus_default()

    def action_open_sae(self) -> None:
        """o: ask for an SAE folder."""
        path = self.query_one("#features-path", Input)
        path.display = True
        path.focus()

    def action_crosscoder_diff(self) -> None:
        """c: the crosscoder diff view (features new, gone and shared), or back to the SAE's."""
        diff = self.query_one("#features-diff", CrosscoderDiff)
        showing = not diff.display
        diff.display = showing
        for part in ("#features-main", "#features-prompt", "#features-tokens"):
            self.query_one(part).display = not showing
        self.query_one("#features-status").display = not showing or self.training
        self.refresh_bindings()
        if showing:
            diff.enter(self.host.state.travel.state.run_dir, Path(self.host.state.runs_root))
        else:
            self.focus_default()

    def on_open_sae_folder(self, message: OpenSaeFolder) -> None:
        """The Runs pane's enter on an SAE."""
        self.open_folder(str(message.path))

    async def on_show_transcoder_feature(self, message: ShowTranscoderFeature) -> None:
        """The Circuit pane's enter on a feature: its card in place of the list (escape: back)."""
        run = self._run()
        if run is None:
            return
        found = self.query(TranscoderFeaturePanel)
        panel = found.first() if found else TranscoderFeaturePanel(id="features-transcoder")
        if not found:  # mounted on first use, so the pane is drawn as before until then
            await self.mount(panel, before="#features-status")
        if self.query_one("#features-diff", CrosscoderDiff).display:
            self.action_crosscoder_diff()  # back to the SAE's parts first: the panel replaces its list
        self.query_one("#features-main").display = False
        panel.display = True
        panel.open(run, message.transcoders, message.layer, message.feature, self.table_tokens,
                   self.host.training_active)
        panel.focus()

    def on_transcoder_feature_panel_closed(self, message: TranscoderFeaturePanel.Closed) -> None:
        """Escape on the transcoder card: the SAE's list and card again."""
        message.stop()
        self.query_one(TranscoderFeaturePanel).display = False
        self.query_one("#features-main").display = True
        self.focus_default()

    def open_folder(self, folder: str) -> None:
        """Open an SAE's folder on the model in hand and browse its features (a crosscoder's
        folder opens in the diff view, on the sources it names)."""
        from tui_lab.core.sae.crosscoder_folder import is_crosscoder_folder

        if is_crosscoder_folder(Path(folder).expanduser()):
            if not self.query_one("#features-diff", CrosscoderDiff).display:
                self.action_crosscoder_diff()
            self.query_one("#features-diff", CrosscoderDiff).open(folder)
            return
        run = self._run()
        if run is not None:
            self._status(Text(f"opening {folder}…", style="dim"))
            self._open_worker(run, folder, self.host.training_active)

    def action_train(self) -> None:
        """t: train an SAE on the model in hand, or stop the one training."""
        if self.training:
            self.workers.cancel_group(self, "features-train")
            self._status(Text("stopping…", style="dim"))
            return
        run = self._run()
        if run is None:
            return
        self.training = True
        self.query_one("#features-status").display = True
        self.history = {name: [] for name in CURVES}
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = Path(self.host.state.runs_root) / "saes" / f"sae-{stamp}"
        self._status(Text("collecting activations…", style="dim"))
        self._train_worker(run, out, self.host.training_active)

    def action_cycle_arch(self) -> None:
        """A: the architecture the next t trains (TopK, BatchTopK, Matryoshka BatchTopK)."""
        names = list(ARCHS)
        self.arch = names[(names.index(self.arch) + 1) % len(names)]
        said = f"t trains {arch_text(self.arch, self.d_sae, self.k)}"
        self._status(Text(said + (" (next time: one is training now)" if self.training else ""), style="dim"))
        if self.browser is None and not self.training:
            self.query_one("#features-card", Static).update(hint_text(self.arch, self.d_sae, self.k))

    def action_intervene(self, mode: str) -> None:
        """x / v: decode the typed text without the feature on show, or steered along it."""
        if self.browser is None or self.handle is None:
            self._status(Text("no SAE yet: t trains one, o opens one", style="yellow"))
            return
        text = self.query_one("#features-prompt", Input).value.strip()
        if not text:
            self._status(Text("type a prompt first (/): x and v decode it", style="yellow"))
            return
        i = self.browser.feature
        coef = float(self.browser.table.max[i]) if mode == "steer" else 0.0
        self._status(Text("decoding…", style="dim"))
        self._intervene_worker(self.handle, self.browser.sae, self.hook, i, text, mode, coef)

    def action_ablate_in_decode(self) -> None:
        """a: switch the feature on show off in Decode's decodes, or back on."""
        if self.browser is None:
            self._status(Text("no SAE yet: t trains one, o opens one", style="yellow"))
            return
        i = self.browser.feature
        ablation = self.host.state.ablation
        off = ablation.toggle_feature(self.browser.sae, self.hook or "", i, self.source or "the SAE")
        said = (f"feature {i} is off in Decode's decodes (a again: on)" if off
                else f"feature {i} is on again in Decode")
        self._status(Text(said, style="bold magenta" if off else "dim"))
        self._title()

    def _run(self) -> ModelHandle | None:
        state = self.host.state
        run = state.current_run if state.current_run is not None else state.opened
        if run is None:
            self._status(Text("no model yet: train one (2, then space) or open a run (6, enter)", style="yellow"))
        return run

    # ---- messages from the lists and inputs ------------------------------------------
    def on_cursor_list_moved(self, message: CursorList.Moved) -> None:
        """The list's cursor moved: show that feature."""
        message.stop()
        if message.sender.id == "features-list" and self.browser is not None:
            self.browser.cursor = message.index
            self.show_feature()

    def on_cursor_list_chosen(self, message: CursorList.Chosen) -> None:
        """Enter on a token's feature: jump to it in the list."""
        message.stop()
        if message.sender.id != "features-tokens" or self.browser is None:
            return
        pairs = self.browser.prompt_pairs()
        if not pairs:
            return
        self.jump_to(pairs[message.index][2])
        self.focus_default()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """Enter in the path (open it) or the prompt (its features)."""
        message.stop()
        value = message.value.strip()
        if message.input.id == "features-path":
            message.input.display = False
            if value:
                self.open_folder(value)
            self.focus_default()
        elif message.input.id == "features-prompt":
            if self.browser is None or self.handle is None:
                self._status(Text("no SAE yet: t trains one, o opens one", style="yellow"))
            elif value:
                self._prompt_worker(self.handle, self.browser.sae, self.hook, value)

    def on_key(self, event: events.Key) -> None:
        """Escape in the path input closes it."""
        if event.key == "escape" and self.query_one("#features-path", Input).has_focus:
            self.query_one("#features-path", Input).display = False
            self.focus_default()
            event.stop()

    # ---- workers (threads: ``features_workers.py``) ---------------------------------
    def _start(self, group: str, job: Callable[[], None]) -> None:
        """Run ``job`` in a thread, the group's earlier one cancelled."""
        self.run_worker(job, name=group, group=group, thread=True, exclusive=True, exit_on_error=False)

    def _train_worker(self, run: ModelHandle, out: Path, training: bool) -> None:
        self._start("features-train", partial(jobs.train, self.post_message, run, out, self.d_sae, self.k,
                                              self.train_tokens or DEFAULT.TOKENS, self.table_tokens, training,
                                              self.arch))

    def _open_worker(self, run: ModelHandle, folder: str, training: bool) -> None:
        self._start("features-table", partial(jobs.open_folder, self.post_message, run, folder,
                                              self.table_tokens, training))

    def _table_worker(self, sae: SparseAutoencoder, handle: ModelInHand, windows: Tensor, hook: str,
                      source: str) -> None:
        self._start("features-table", partial(jobs.build_table, self.post_message, sae, handle, windows, hook,
                                              source, self.table_tokens, self.host.training_active))

    def _prompt_worker(self, handle: ModelInHand, sae: SparseAutoencoder, hook: str | None, text: str) -> None:
        self._start("features-prompt", partial(jobs.prompt, self.post_message, handle, sae, hook, text))

    def _intervene_worker(self, handle: ModelInHand, sae: SparseAutoencoder, hook: str | None, feature: int,
                          text: str, mode: str, coef: float) -> None:
        self._start("features-decode", partial(jobs.intervene, self.post_message, handle, sae, hook, feature,
                                               text, mode, coef))

    # ---- worker messages -------------------------------------------------------------
    def on_features_pane_train_progress(self, message: jobs.TrainProgress) -> None:
        """Live curves and the bar."""
        message.stop()
        self.hook = message.hook
        for name in CURVES:
            self.history[name].append(float(message.curves[name]))
        self._title()
        self._status(curves_text(self.history, message.tokens, message.total_tokens))

    def on_features_pane_train_ended(self, message: jobs.TrainEnded) -> None:
        """Training stopped: build the feature table of what was trained."""
        message.stop()
        self.training = False
        if self.host.quitting:
            return
        self.notify(f"SAE saved in {message.folder} ({message.reason})", title="Features")
        self._status(Text(f"SAE saved in {message.folder}; reading every feature's contexts…", style="dim"))
        self.hook = message.hook
        self._table_worker(message.sae, message.handle, message.windows, message.hook, message.folder)

    def on_features_pane_table_progress(self, message: jobs.TableProgress) -> None:
        message.stop()
        frac = message.done / max(1, message.total)
        bar = "█" * int(30 * frac) + "·" * (30 - int(30 * frac))
        self._status(Text(f"reading contexts {bar} {message.done:,}/{message.total:,} tokens", style="dim"))

    def on_features_pane_table_ready(self, message: jobs.TableReady) -> None:
        """Browse: the list, the first feature."""
        message.stop()
        if message.handle is not None:
            self.handle, self.hook = message.handle, message.hook
        self.browser = message.browser
        self.source = Path(message.source).name
        self._fill_list()
        self.show_feature()
        self._title()
        how = "read from the cache" if message.cached else f"built in {message.seconds:.1f} s"
        keep = self.query_one("#features-status", Static)
        if not self.training:
            keep.update(Text(f"{message.browser.table.tokens:,} tokens of the text, {how}", style="dim"))

    def on_features_pane_prompt_ready(self, message: jobs.PromptReady) -> None:
        """Each token with its features; the list can now sort by them."""
        message.stop()
        if self.browser is None:
            return
        self.browser.set_prompt(message.labels, message.features)
        lines = []
        for t, token, j, v in self.browser.prompt_pairs():
            line = Text(no_wrap=True)
            line.append(f"{t:>3} {shown(token):<6}", style="bold")
            line.append(f" feature {j:<6} {v:6.3g}", style="dim")
            lines.append(line)
        tokens = self.query_one("#features-tokens", CursorList)
        tokens.empty = "no feature fires on this text"
        tokens.show(lines, 0)
        self._fill_list()
        tokens.focus()

    def on_features_pane_intervened(self, message: jobs.Intervened) -> None:
        """The two continuations, one above the other."""
        message.stop()
        what = ("ablated" if message.mode == "ablate"
                else f"steered (+{message.coef:.3g} × its decoder row)")
        out = Text()
        out.append(f"{'plain':<10}", style="dim")
        out.append(shown(message.plain) + "\n")
        out.append(f"{'ablated' if message.mode == 'ablate' else 'steered':<10}", style="dim")
        out.append(shown(message.changed), style="bold" if message.changed != message.plain else "")
        out.append(f"\nfeature {message.feature} {what}"
                   + ("" if message.changed != message.plain else ": the same continuation"), style="dim")
        self._status(out)

    def on_features_pane_failed(self, message: jobs.Failed) -> None:
        """One line, in the status line."""
        message.stop()
        self.training = False
        self._status(Text(message.text, style="red"))
        self._title()
