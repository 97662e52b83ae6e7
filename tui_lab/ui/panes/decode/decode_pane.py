"""Decode pane: type an input, Enter decodes it (greedy or sampled) with the current model.

An encoder-only model's decode is fill-mask instead: the input holds masks (``_``,
``[MASK]``, ``<mask>``), Enter fills them (``fill_view.py`` draws the result).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, Static

from tui_lab.core.errors import one_line
from tui_lab.core.opening.model_handle import opened_from_files
from tui_lab.core.visible_text import NEWLINE, VISIBLE_WHITESPACE
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import Decoded, DecodeText, UseModel, UseTask
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.decode import fill_view
from tui_lab.ui.panes.decode.logit_lens import LogitLens
from tui_lab.ui.panes.decode.steering import Steering
from tui_lab.ui.state.ablation import AblationState
from tui_lab.ui.state.decoding import decode_text, fills_masks, is_fill_result
from tui_lab.ui.state.host import Pane
from tui_lab.ui.time_travel.control import TimeTravelControl
from tui_lab.ui.widgets.pick_list import Item, PickList
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip
from tui_lab.ui.widgets.text_table import ColumnSpec, Row, TextTable

N_EXAMPLES = 8
TOP_K_SHOWN = 5
# New tokens a real model (``--model``) continues a text with: its context may be
# thousands of tokens, which would take minutes on a CPU (the lab's own tasks stop
# at their end-of-sequence long before their context).
REAL_MODEL_NEW_TOKENS = 32


ORDINALS = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th")


def percent(p: float) -> str:
    """A probability as a percentage that cannot run into a digit token: 0.134 -> '13%'.

    The '%' closes every figure, so a token and its probability read apart
    ('3 13%', never '30.113'); two digits are kept where they mean something.
    """
    if p >= 0.995:
        return "100%"
    if p >= 0.1:
        return f"{p:.0%}"
    if p >= 0.001:
        return f"{p:.1%}"
    return "<0.1%"


def visible(text: str) -> str:
    """``text`` safe to print and readable: a newline as ↵, a tab as ⇥, other control
    characters (a real model's continuation may hold any byte) as their pictures (␄)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch != " " and ch in VISIBLE_WHITESPACE:
            out.append(VISIBLE_WHITESPACE[ch])
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # the Unicode control pictures
        elif code == 0x7F:
            out.append("␡")
        elif 0x80 <= code < 0xA0:
            out.append(f"<0x{code:02X}>")
        else:
            out.append(ch)
    return "".join(out)


def input_loss_note(run: Any, model: Any, result: Any, ablated: str) -> str | None:
    """The loss of a real language model on the typed text (with the heads off, and with none
    off); None for a translator, whose input is not text it predicts."""
    from tui_lab.core.analysis.heads.text_ablation import text_ids, text_loss
    from tui_lab.core.errors import LabError

    if getattr(run.task, "name", None) == "translation":
        return None
    try:
        ids = text_ids(run.task, result.input, run.config.model.max_len)
    except LabError:
        return "loss on the input: one token, nothing to predict"
    loss = text_loss(model, ids)
    if not ablated:
        return f"loss on the input: {loss:.3f} nats/token over {len(ids) - 1} predictions"
    base = text_loss(run.model, ids)
    return f"loss on the input with {ablated} off: {loss:.3f} nats/token ({base:.3f} with every head on, {loss - base:+.3f})"


def top_cell(token: str, p: float, chosen: bool) -> Text:
    """A token (bold if it was chosen), a space, its probability as a percentage (dim)."""
    cell = Text(token, style="bold" if chosen else "")
    cell.append(" " + percent(p), style="dim")
    return cell


class DecodePane(Pane, Vertical):
    """Input, sampling options, the output, per-step top-k and example inputs."""

    @dataclass
    class Failed(Message):
        """Decoding refused the input or failed; ``message`` is one line shown inline."""

        message: str

    PANE_ID = pane_id(__name__)
    HELP_EXTRA = (("enter", "decode the input / the chosen example"),)
    BINDINGS = key_bindings.DECODE

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run: Any = None
        self.lab_task: Any = None  # the task decoded with: the model's, else the lab config's
        self.config_task: Any = None
        self.examples: list[str] = []
        self._example_index = -1
        self.result: Any = None
        self.steering: Steering | None = None  # s: every decode is shown steered beside it
        self.steered: tuple[int, str, str] | None = None  # (id of the result, label, output)
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
                    *(ColumnSpec(header=ORDINALS[j], no_wrap=True) for j in range(TOP_K_SHOWN)),
                    id="decode-steps",
                )
                yield Static(id="decode-fills")  # fill-mask's steps (empty for a greedy decode)
                yield LogitLens(id="decode-lens")
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

    def show_task(self, task: Any) -> None:
        """The lab config's task: its examples are offered while there is no model."""
        self.config_task = task
        if self.run is None:
            self._use_task(task)

    def set_run(self, run: Any) -> None:
        """Decode with this run's model (and its task's examples) from now on (None: no model)."""
        opened_now = opened_from_files(run) and run is not self.run
        self.run = run
        self._use_task(run.task if run is not None else self.config_task)
        self._show_model()
        if self.result is None and fills_masks(run):
            self.query_one("#decode-output", Static).update(Text(self._fill_hint(run), style="dim"))
        elif opened_now and self.result is None:
            self.query_one("#decode-output", Static).update(
                Text(
                    f"Type a text (or pick an example, ctrl+n) and press Enter: {run.config.name} "
                    f"continues it by {REAL_MODEL_NEW_TOKENS} tokens with its own tokenizer.",
                    style="dim",
                )
            )

    @staticmethod
    def _fill_hint(run: Any) -> str:
        """How to decode with an encoder-only model: type masks, Enter fills them."""
        from tui_lab.core.decoding.fill_mask import mask_token
        from tui_lab.core.model.encoder_only import mlm_head_note

        note = mlm_head_note(run.model)
        if note is not None:  # a bare encoder: Attention, Params and the hooks still work
            return f"{note}. Enter reads the text: its attention goes to Attention (4)"
        token = mask_token(run.task)
        return (f"{run.config.name} fills masks: type a text with {token} where a token should be "
                f"filled (or pick an example, ctrl+n) and press Enter.")

    def _use_task(self, task: Any) -> None:
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
        try:
            temperature = float(self.query_one("#temperature", Input).value)
            top_k = int(self.query_one("#top-k", Input).value or 0)
            top_p = float(self.query_one("#top-p", Input).value or 1.0)
        except ValueError:
            self._error("temperature and top-p must be numbers and top-k a whole number")
            return None
        if temperature <= 0 or top_k < 0 or not 0 < top_p <= 1:
            self._error("temperature must be > 0, top-k >= 0 (0 = all tokens), top-p in (0, 1]")
            return None
        return temperature, top_k, top_p

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
        self, run: Any, text: str, temperature: float, top_k: int, snapshot: bool, top_p: float = 1.0
    ) -> None:
        """Run the core's decoder (thread); a copy of the model if it is training.
        An encoder-only model fills the masks in ``text`` instead (``decode_text``)."""
        from tui_lab.ui.state.model_copies import settled

        fill = fills_masks(run)
        options: dict[str, Any] = {"report_k": TOP_K_SHOWN}
        if not fill:
            options.update(temperature=temperature, top_k=top_k, top_p=top_p)
        real = opened_from_files(run)
        if real and not fill:
            options["max_new_tokens"] = REAL_MODEL_NEW_TOKENS
        try:
            # Fetching the weights can fail too (a training process that has ended
            # before its first checkpoint): say so inline, like bad input.
            settled(run)  # an opened model re-laid in the background: done first
            model = copy.deepcopy(run.model) if snapshot else run.model
            model, ablated = self.ablation.apply(model, run, copied=snapshot, text=text)
            result = decode_text(model, run.task, text, options)
            self.ablation.mark(result, ablated)
            steering = self.steering
            if steering is not None:  # the same decode with the vector added: shown beside it
                from tui_lab.core.model.hook_points import using_hooks

                with using_hooks(steering.hooks()):
                    self.steered = (id(result), steering.label, decode_text(model, run.task, text, options).output)
            note = input_loss_note(run, model, result, ablated) if real and not fill else None
            if note:  # no right answer to check: how well it predicts the text instead
                result.notes.append(note)
        except Exception as exc:  # DecodeInputError and friends: one line, inline
            self.post_message(self.Failed(one_line(exc)))
            return
        self.post_message(Decoded(result, model=model, task=run.task, options=options))

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
        self.query_one(LogitLens).decoded(message.result, message.model, message.task)
        self.query_one(TimeTravelControl).decoded(message.result)

    def _error(self, text: str) -> None:
        widget = self.query_one("#decode-error", Static)
        widget.update(f"↳ {text}" if text else "")
        widget.set_class(bool(text), "-shown")

    def _show_result(self, result: Any) -> None:
        if is_fill_result(result):
            self._show_fills(result)
            return
        self.query_one("#decode-fills", Static).update("")
        out = Text()
        out.append("input  ", style="dim")
        out.append(visible(result.input), style="bold")
        out.append("\noutput ", style="dim")
        out.append(visible(result.output) or "(empty)", style="bold green")
        stopped = "end-of-sequence" if result.stopped == "eos" else "length limit"
        out.append(f"\n{len(result.steps)} steps, stopped at {stopped}", style="dim")
        if self.lab_task is not None and not self.lab_task.is_lm:
            try:
                expected = self.lab_task.solve(result.input)
            except Exception:  # noqa: BLE001
                expected = None
            if expected is not None:
                ok = expected == result.output
                out.append("  ·  ", style="dim")
                out.append(
                    "✓ correct" if ok else f"✗ expected {expected}", style="green" if ok else "red"
                )
        for note in result.notes:
            out.append(f"\nnote: {note}", style="yellow")
        if ablated := self.ablation.label_of(result):
            out.append(f"\nablated: {ablated}", style="bold magenta")
        self._append_steered(out, result)
        self.query_one("#decode-output", Static).update(out)
        rows: list[Row] = []
        for i, step in enumerate(result.steps, start=1):
            top = [top_cell(token, p, token == step.token) for token, p in step.top[:TOP_K_SHOWN]]
            if self._sampled:
                for cell, kept in zip(top, getattr(step, "kept", []), strict=False):
                    if not kept:
                        cell.stylize("strike dim")
            top += [Text()] * (TOP_K_SHOWN - len(top))
            rows.append((str(i), top_cell(step.token, step.prob, True), *top))
        self.query_one("#decode-steps", TextTable).show(rows)

    def _show_fills(self, result: Any) -> None:
        """A fill-mask result: the summary, each mask's fillers, the fills in their order."""
        out = fill_view.summary(result, visible)
        if ablated := self.ablation.label_of(result):
            out.append(f"\nablated: {ablated}", style="bold magenta")
        self._append_steered(out, result)
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

    def _append_steered(self, out: Text, result: Any) -> None:
        """The steered decode of the same input, under the plain output."""
        if self.steered is not None and self.steered[0] == id(result):
            _, label, text = self.steered
            out.append("\nsteered ", style="dim")
            out.append(visible(text) or "(empty)", style="bold cyan")
            out.append(f"  ({label})", style="dim")

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

        def chosen(request: Any) -> None:
            if request is not None:
                self._steer_worker(handle, request)

        self.app.push_screen(SteerScreen(default, names), chosen)

    @work(thread=True, exclusive=True, exit_on_error=False, group="decode-steer")
    def _steer_worker(self, handle: Any, request: Any) -> None:
        """The vector from the two prompt sets (thread, ``core/verbs/steer.py``); then decode again, steered."""
        from tui_lab.core.verbs.steer import vector as steering_vector

        try:
            vector = steering_vector(request, handle)
        except Exception as exc:  # noqa: BLE001 - one line, inline
            self.post_message(self.Failed(one_line(exc)))
            return
        self.steering = Steering(request.hook, vector, request.coef)
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
