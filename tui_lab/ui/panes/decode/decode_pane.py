"""Decode pane: type an input, Enter decodes it (greedy or sampled) with the current model.

An encoder-only model's decode is fill-mask instead: the input holds masks (``_``,
``[MASK]``, ``<mask>``), Enter fills them (``fill_view.py`` draws the result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, Static
from typing_extensions import Unpack

from tui_lab.core.errors import one_line
from tui_lab.core.opening.model_handle import opened_from_files
from tui_lab.core.visible_text import NEWLINE
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import Decoded, DecodeText, UseModel, UseTask
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.decode import decode_view, decode_workers, fill_view
from tui_lab.ui.panes.decode.decode_view import TOP_K_SHOWN, Steered, percent, top_cell, visible
from tui_lab.ui.panes.decode.logit_lens import LogitLens
from tui_lab.ui.panes.decode.steering import Steering
from tui_lab.ui.state.ablation import AblationState
from tui_lab.ui.state.decoding import fills_masks
from tui_lab.ui.state.host import Pane
from tui_lab.ui.time_travel.control import TimeTravelControl
from tui_lab.ui.widgets.pick_list import Item, PickList
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip
from tui_lab.ui.widgets.text_table import ColumnSpec, TextTable
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:  # torch-backed: a model and its results exist only once torch is loaded
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task
    from tui_lab.core.verbs.steer import Steering as SteerRequest

N_EXAMPLES = 8


class DecodePane(Pane, Vertical):
    """Input, sampling options, the output, per-step top-k and example inputs."""

    @dataclass
    class Failed(Message):
        """Decoding refused the input or failed; ``message`` is one line shown inline."""

        message: str

    PANE_ID = pane_id(__name__)
    HELP_EXTRA = (("enter", "decode the input / the chosen example"),)
    BINDINGS = key_bindings.DECODE

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.run: ModelHandle | None = None
        self.lab_task: Task | None = None  # the task decoded with: the model's, else the lab config's
        self.config_task: Task | None = None
        self.examples: list[str] = []
        self._example_index = -1
        self.result: DecodeResult | FillMaskResult | None = None
        self.steering: Steering | None = None  # s: every decode is shown steered beside it
        self.steered: Steered | None = None  # (id of the result, label, output)
        self._sampled = False  # the shown result was sampled: mark what the cut removed

    def compose(self) -> ComposeResult:
        # Titles sit in borders, not in Labels and rows of their own: every
        # container and label is drawn again, line by line, each time the pane shows.
        field = Input(placeholder="type an input, e.g. 31415, then Enter", id="decode-input")
        field.border_title = "input"
        yield field
        yield Static("", id="decode-error", classes="field-error")
        with Horizontal(id="decode-options"):
            yield Checkbox("sample", compact=True, id="sample")
            yield Label(" temperature ", classes="opt-label")
            yield Input("0.8", compact=True, id="temperature", classes="opt-input")
            yield Label(" top-k ", classes="opt-label")
            yield Input("0", compact=True, id="top-k", classes="opt-input")
            yield Label(" top-p ", classes="opt-label")
            yield Input("1.0", compact=True, id="top-p", classes="opt-input")
            yield Static("", id="decode-model")
        yield SnapshotStrip()
        with Horizontal(id="decode-body"):
            with Vertical(id="decode-main"):
                yield Static(id="decode-output")
                # Each of the top-k in a column of its own: aligned, two spaces apart.
                yield TextTable(
                    {"header": "#", "justify": "right", "no_wrap": True},
                    {"header": "token", "no_wrap": True},  # the one chosen, and its probability
                    *(ColumnSpec(header=decode_view.ORDINALS[j], no_wrap=True) for j in range(TOP_K_SHOWN)),
                    id="decode-steps",
                )
                yield Static(id="decode-fills")  # fill-mask's steps (empty for a greedy decode)
                yield LogitLens(id="decode-lens")
                scores = Static("", id="decode-lens-scores")  # the lens's KL and top-1 per layer
                scores.display = False
                yield scores
            examples = PickList(id="examples")
            examples.border_title = "Examples"
            yield examples
        yield TimeTravelControl()

    def on_mount(self) -> None:
        """Set up the steps table and say there is no model yet."""
        if self.host.quitting:
            return  # mounted while the app quits
        self._show_model()
        self.query_one("#decode-output", Static).update(
            Text("Train a model (2, then space) or open a run (2, then o) to decode.", style="dim")
        )
        self.host.register_pane(self.PANE_ID, self)
        if self.host.state.last_report is not None:
            self.show_task(self.host.state.last_report.task)
        if self.host.state.current_run is not None:
            self.set_run(self.host.state.current_run)

    def focus_default(self) -> None:
        """Focus lands in the input."""
        self.query_one("#decode-input", Input).focus()

    # ---- model and task -------------------------------------------------------

    def on_use_task(self, message: UseTask) -> None:
        """The config's task: its examples."""
        self.show_task(message.task)

    def on_use_model(self, message: UseModel) -> None:
        """The model to decode with."""
        self.set_run(message.run)

    def on_decode_text(self, message: DecodeText) -> None:
        """Attention switched a head: decode the input again."""
        self.decode(message.text)

    def show_task(self, task: Task | None) -> None:
        """The lab config's task: its examples are offered while there is no model."""
        self.config_task = task
        if self.run is None:
            self._use_task(task)

    def set_run(self, run: ModelHandle | None) -> None:
        """Decode with this run's model (and its task's examples) from now on (None: no model)."""
        opened_now = opened_from_files(run) and run is not self.run
        self.run = run
        self._use_task(run.task if run is not None else self.config_task)
        self._show_model()
        if self.result is None and run is not None and fills_masks(run):
            self.query_one("#decode-output", Static).update(Text(decode_view.fill_hint(run), style="dim"))
        elif run is not None and opened_now and self.result is None:
            hint = decode_view.continue_hint(run.config.name, decode_workers.REAL_MODEL_NEW_TOKENS)
            self.query_one("#decode-output", Static).update(Text(hint, style="dim"))

    def _use_task(self, task: Task | None) -> None:
        if task is not self.lab_task:
            self.lab_task = task
            self._fill_examples()

    def _show_model(self) -> None:
        label = self.query_one("#decode-model", Static)
        if self.run is None:
            label.update(Text("  no model yet", style="dim italic"))
        elif opened_from_files(self.run):  # opened from files (--model)
            label.update(Text(f"  model: {self.run.config.name} (from files)", style="dim"))
        else:
            label.update(
                Text(f"  model: {self.run.config.name} at step {self.run.step:,}", style="dim")
            )

    def _fill_examples(self) -> None:
        options = self.query_one("#examples", PickList)
        options.set_items([])
        self.examples = []
        self._example_index = -1
        if self.lab_task is None:
            return
        try:
            self.examples = list(self.lab_task.examples_for_display(N_EXAMPLES))
        except Exception:  # noqa: BLE001 - examples are a convenience
            self.examples = []
        options.set_items([Item(text.replace("\n", NEWLINE)[:40]) for text in self.examples])
        if self.examples:
            self.query_one(
                "#decode-input", Input
            ).placeholder = (
                f"type an input, e.g. {self.examples[0].splitlines()[0][:20]}, then Enter"
            )

    # ---- decoding -------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the input (or an option field) decodes the input text."""
        event.stop()
        if self.decode(self.query_one("#decode-input", Input).value):
            # Leave the field so 1-5 work at once; i or / comes back to it.
            self.query_one("#decode-steps", TextTable).focus()

    def on_pick_list_picked(self, event: PickList.Picked) -> None:
        """Enter on an example puts it in the input and decodes it."""
        event.stop()
        text = self.examples[event.index]
        self.query_one("#decode-input", Input).value = text
        self.decode(text)

    def _options(self) -> tuple[float, int, float] | None:
        if not self.query_one("#sample", Checkbox).value:
            return 0.0, 0, 1.0
        read = decode_view.sampling_options(
            *(self.query_one(f"#{name}", Input).value for name in ("temperature", "top-k", "top-p"))
        )
        if isinstance(read, str):
            self._error(read)
            return None
        return read

    def decode(self, text: str) -> bool:
        """Decode ``text`` in a thread worker; False (and a message) if it cannot start."""
        if self.host.state.core is None:
            self._error("torch is still loading; try again in a moment")
            return False
        if self.run is None:
            if self.host.state.model_source is not None:  # --model, still being opened
                self._error(f"{self.host.state.model_source} is still opening; try again in a moment")
            elif self.host.training_active:  # an opened run being restored
                self._error("the model is still being built; try again in a moment")
            else:
                self._error("no model yet: train one in the Train pane (2, then space)")
            return False
        # Fill-mask has no sampling: the options row is for a greedy or sampled decode.
        options = (0.0, 0, 1.0) if fills_masks(self.run) else self._options()
        if options is None:
            return False
        self._error("")
        self.query_one("#decode-output", Static).update(Text("decoding…", style="dim"))
        training = self.host.training_active
        self._decode_worker(self.run, text, options[0], options[1], training, top_p=options[2])
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="decode")
    def _decode_worker(
        self, run: ModelHandle, text: str, temperature: float, top_k: int, snapshot: bool, top_p: float = 1.0
    ) -> None:
        """Run the core's decoder (thread, ``decode_workers.py``); a copy of the model if it is
        training. An encoder-only model fills the masks in ``text`` instead."""
        options = decode_workers.options_for(run, temperature, top_k, top_p)
        try:
            done = decode_workers.decode_in_hand(
                run, text, options, snapshot=snapshot, ablation=self.ablation, steering=self.steering
            )
        except Exception as exc:  # DecodeInputError and friends: one line, inline
            self.post_message(self.Failed(one_line(exc)))
            return
        if done.steered is not None:
            self.steered = done.steered
        # A fill-mask result travels in the same message, declared a DecodeResult (the panes
        # tell the two apart by its fields).
        result = cast("DecodeResult", done.result)
        self.post_message(Decoded(result, model=done.model, task=run.task, options=options))

    def on_decode_pane_failed(self, message: DecodePane.Failed) -> None:
        """Show why the input was refused."""
        message.stop()
        self._error(message.message)
        self.query_one("#decode-output", Static).update("")
        self.query_one("#decode-input", Input).focus()

    def on_decoded(self, message: Decoded) -> None:
        """Show the output and each step's top-k; let the app pass it to Attention."""
        self.result = message.result
        # Struck-through top tokens are those the sampling cut removed (greedy: no cut shown).
        self._sampled = bool((message.options or {}).get("temperature", 0) > 0)
        self._show_result(message.result)
        self._show_model()
        self.query_one(LogitLens).decoded(message.result, message.model, message.task, self.run)
        self.query_one(TimeTravelControl).decoded(message.result)

    def _error(self, text: str) -> None:
        widget = self.query_one("#decode-error", Static)
        widget.update(f"↳ {text}" if text else "")
        widget.set_class(bool(text), "-shown")

    def _show_result(self, result: DecodeResult | FillMaskResult) -> None:
        if decode_view.is_fill(result):
            self._show_fills(result)
            return
        self.query_one("#decode-fills", Static).update("")
        out = decode_view.result_text(result, self.lab_task, self.ablation.label_of(result), self.steered)
        self.query_one("#decode-output", Static).update(out)
        self.query_one("#decode-steps", TextTable).show(decode_view.step_rows(result, self._sampled))

    def _show_fills(self, result: FillMaskResult) -> None:
        """A fill-mask result: the summary, each mask's fillers, the fills in their order."""
        out = decode_view.ablated_and_steered(
            fill_view.summary(result, visible), result, self.ablation.label_of(result), self.steered
        )
        self.query_one("#decode-output", Static).update(out)
        rows = fill_view.filler_rows(result, TOP_K_SHOWN, top_cell)
        self.query_one("#decode-steps", TextTable).show(rows)
        self.query_one("#decode-fills", Static).update(fill_view.fill_steps(result, visible, percent))

    # ---- actions ----------------------------------------------------------------

    @property
    def ablation(self) -> AblationState:
        """The heads the lab's decodes run without (the lab's: Attention switches them)."""
        return self.host.state.ablation

    @property
    def lens_shown(self) -> bool:
        """Whether the logit lens is on show (v)."""
        return self.query_one(LogitLens).shown

    def action_steer(self) -> None:
        """s: steer every decode by a vector from two prompt sets; s again: plain decodes."""
        if self.steering is not None:
            self.steering, self.steered = None, None
            self.notify("steering off", timeout=2)
            return
        if self.run is None:
            self._error("no model yet: train one in the Train pane (2, then space)")
            return
        from tui_lab.ui.screens.steer import SteerScreen
        from tui_lab.ui.state.model_copies import in_hand

        handle = in_hand(self.run)
        names = handle.hook_names()
        resid = [n for n in names if n.endswith("hook_resid_pre") and not n.startswith("decoder.")]
        default = resid[len(resid) // 2] if resid else names[0]

        def chosen(request: SteerRequest | None) -> None:
            if request is not None:
                self._steer_worker(handle, request)

        self.app.push_screen(SteerScreen(default, names), chosen)

    @work(thread=True, exclusive=True, exit_on_error=False, group="decode-steer")
    def _steer_worker(self, handle: ModelInHand, request: SteerRequest) -> None:
        """The vector from the two prompt sets (thread, ``core/verbs/steer.py``); then decode again, steered."""
        try:
            self.steering = decode_workers.steering_of(request, handle)
        except Exception as exc:  # noqa: BLE001 - one line, inline
            self.post_message(self.Failed(one_line(exc)))
            return
        self.app.call_from_thread(self._steering_ready)

    def _steering_ready(self) -> None:
        steering = self.steering
        if steering is not None:
            self.notify(f"steering: {steering.label}", timeout=3)
        text = self.query_one("#decode-input", Input).value.strip()
        if text:
            self.decode(text)

    def action_toggle_lens(self) -> None:
        """Show or hide the logit lens: each layer's top token and probability per step."""
        self.query_one(LogitLens).toggle()

    def action_switch_lens(self) -> None:
        """Switch the lens: logit, tuned, Jacobian (a new tuned or Jacobian lens is fitted first)."""
        self.query_one(LogitLens).switch()

    def action_snapshot(self, move: str) -> None:
        """Show the last decode on an earlier/later/first/last history snapshot."""
        self.query_one(TimeTravelControl).step(move)

    def action_play_snapshots(self) -> None:
        """Play the decode through every history snapshot (p again, or any key, stops)."""
        self.query_one(TimeTravelControl).play()

    def on_key(self, event: events.Key) -> None:
        """Any key but p stops time travel's playing (and then does what it does)."""
        self.query_one(TimeTravelControl).key_pressed(event.key)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer i and / (edit input) only while the input does not have the keys already."""
        if action == "edit_input":
            return not self.query_one("#decode-input", Input).has_focus
        return True

    def action_edit_input(self) -> None:
        """Back into the input field to type another input."""
        self.query_one("#decode-input", Input).focus()

    def action_next_example(self) -> None:
        """Put the next example input in the field."""
        if not self.examples:
            self.notify("no examples until torch has loaded", severity="warning", timeout=2)
            return
        self._example_index = (self._example_index + 1) % len(self.examples)
        field = self.query_one("#decode-input", Input)
        field.value = self.examples[self._example_index]
        field.focus()

    def action_toggle_sampling(self) -> None:
        """Switch between greedy decoding and sampling."""
        box = self.query_one("#sample", Checkbox)
        box.value = not box.value
        self.notify("sampling on" if box.value else "greedy decoding", timeout=2)
