"""What the Decode pane shows of a greedy or sampled decode, as Rich text (Textual-free).

The output block says what was read and what came out, why it stopped, whether
it is the task's answer, the notes, the heads switched off and the steered
decode beside it; the steps table holds one row per step: the token chosen and
the ``TOP_K_SHOWN`` most likely, those the sampling cut removed struck through.
A fill-mask result is drawn by ``fill_view.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from typing_extensions import TypeIs

from tui_lab.core.visible_text import VISIBLE_WHITESPACE
from tui_lab.ui.state.decoding import is_fill_result

if TYPE_CHECKING:  # torch-backed: a result exists only once torch is loaded
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.tasks.protocol import Task

TOP_K_SHOWN = 5
ORDINALS = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th")

Row = tuple[RenderableType | None, ...]  # a steps-table row (the widget's ``Row``)
Steered = tuple[int, str, str]  # (id of the plain result, the steering's label, the steered output)


def is_fill(result: DecodeResult | FillMaskResult) -> TypeIs[FillMaskResult]:
    """Whether ``result`` is fill-mask's (masks and their fillers) rather than a greedy decode's."""
    return is_fill_result(result)


def fill_hint(run: ModelHandle) -> str:
    """How to decode with an encoder-only model: type masks, Enter fills them."""
    from tui_lab.core.decoding.fill_mask import mask_token
    from tui_lab.core.model.encoder_only import mlm_head_note

    note = mlm_head_note(run.model)
    if note is not None:  # a bare encoder: Attention, Params and the hooks still work
        return f"{note}. Enter reads the text: its attention goes to Attention (4)"
    token = mask_token(run.task)
    return (f"{run.config.name} fills masks: type a text with {token} where a token should be "
            f"filled (or pick an example, ctrl+n) and press Enter.")


def continue_hint(name: str, new_tokens: int) -> str:
    """How to decode with a real model opened from files: it continues a text."""
    return (f"Type a text (or pick an example, ctrl+n) and press Enter: {name} "
            f"continues it by {new_tokens} tokens with its own tokenizer.")


def sampling_options(temperature: str, top_k: str, top_p: str) -> tuple[float, int, float] | str:
    """The sampling fields read as (temperature, top-k, top-p), or the one line that refuses them."""
    try:
        read = float(temperature), int(top_k or 0), float(top_p or 1.0)
    except ValueError:
        return "temperature and top-p must be numbers and top-k a whole number"
    if read[0] <= 0 or read[1] < 0 or not 0 < read[2] <= 1:
        return "temperature must be > 0, top-k >= 0 (0 = all tokens), top-p in (0, 1]"
    return read


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


def top_cell(token: str, p: float, chosen: bool) -> Text:
    """A token (bold if it was chosen), a space, its probability as a percentage (dim)."""
    cell = Text(token, style="bold" if chosen else "")
    cell.append(" " + percent(p), style="dim")
    return cell


def _expected(task: Task | None, result: DecodeResult) -> str | None:
    """The task's own answer to the input, for a task that has one (not a language model's)."""
    if task is None or task.is_lm:
        return None
    try:
        return task.solve(result.input)
    except Exception:  # noqa: BLE001 - a check beside the output, never a failure
        return None


def result_text(
    result: DecodeResult, task: Task | None, ablated: str, steered: Steered | None
) -> Text:
    """The output block: input, output, why it stopped, ✓/✗ against ``task``'s answer, notes,
    the heads switched off (``ablated``) and the steered decode of the same input."""
    out = Text()
    out.append("input  ", style="dim")
    out.append(visible(result.input), style="bold")
    out.append("\noutput ", style="dim")
    out.append(visible(result.output) or "(empty)", style="bold green")
    stopped = "end-of-sequence" if result.stopped == "eos" else "length limit"
    out.append(f"\n{len(result.steps)} steps, stopped at {stopped}", style="dim")
    expected = _expected(task, result)
    if expected is not None:
        ok = expected == result.output
        out.append("  ·  ", style="dim")
        out.append("✓ correct" if ok else f"✗ expected {expected}", style="green" if ok else "red")
    for note in result.notes:
        out.append(f"\nnote: {note}", style="yellow")
    return ablated_and_steered(out, result, ablated, steered)


def ablated_and_steered(
    out: Text, result: DecodeResult | FillMaskResult, ablated: str, steered: Steered | None
) -> Text:
    """``out`` with the heads ``result`` ran without, then its steered twin (if that is of it)."""
    if ablated:
        out.append(f"\nablated: {ablated}", style="bold magenta")
    if steered is not None and steered[0] == id(result):
        _, label, text = steered
        out.append("\nsteered ", style="dim")
        out.append(visible(text) or "(empty)", style="bold cyan")
        out.append(f"  ({label})", style="dim")
    return out


def step_rows(result: DecodeResult, sampled: bool) -> list[Row]:
    """One row per step: its number, the token chosen, the top tokens (struck through where
    ``sampled`` and the sampling cut removed them)."""
    rows: list[Row] = []
    for i, step in enumerate(result.steps, start=1):
        top = [top_cell(token, p, token == step.token) for token, p in step.top[:TOP_K_SHOWN]]
        if sampled:
            for cell, kept in zip(top, step.kept, strict=False):
                if not kept:
                    cell.stylize("strike dim")
        top += [Text()] * (TOP_K_SHOWN - len(top))
        rows.append((str(i), top_cell(step.token, step.prob, True), *top))
    return rows
