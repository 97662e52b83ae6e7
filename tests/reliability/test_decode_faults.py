"""Decode input a user might type or paste: refused with one line that says what is allowed, never a crash.

tests/core/test_decode.py covers empty, '12a', 40 digits, one CSI sequence and
addition without '+'. Here: every task shape, Unicode look-alikes, every
kind of control and escape sequence, a megabyte of input, bad sampling
options, and the same through ``tfx-lab decode`` and the lab's Decode pane.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tests.reliability.conftest import assert_one_line_error, assert_printable, cli
from tui_lab.core.decoding.decode import DecodeInputError, generate
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD

COPY = tiny_config()  # copy, 1 to 5 digits, encoder-decoder, max_len 64
ADDITION = tiny_config(task={"name": "addition", "max_digits": 2}, model={"max_len": 16})
DECODER_COPY = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0, "max_len": 16})
CHAR_LM = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0, "max_len": 32},
                      task={"name": "char-lm", "block_size": 32})


def _model(cfg):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    task = make_task(cfg.task)
    return build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval(), task


_MODELS: dict[str, tuple] = {}


def model_for(name: str):  # type: ignore[no-untyped-def]
    if name not in _MODELS:
        _MODELS[name] = _model({"copy": COPY, "addition": ADDITION, "decoder-copy": DECODER_COPY,
                                "char-lm": CHAR_LM}[name])
    return _MODELS[name]


@contextmanager
def forwards(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """The token ids of every forward pass ``model`` makes inside the block."""
    fed: list[torch.Tensor] = []
    handle = model.register_forward_pre_hook(lambda _m, args: fed.append(args[0].detach().clone()))
    try:
        yield fed
    finally:
        handle.remove()


def refusal(name: str, text: str, **options: object) -> str:
    model, task = model_for(name)
    with forwards(model) as fed, pytest.raises(DecodeInputError) as err:
        generate(model, task, text, **options)
    assert fed == []  # refused before the model ran, whatever the size
    message = str(err.value)
    assert "\n" not in message and len(message) < 300, message
    assert_printable(message)
    return message


# --------------------------------------------------------------------------- refused input


@pytest.mark.parametrize("text, fragments", [
    # empty once cleaned
    ("\t \n", ("empty", "e.g. '")),
    ("\x1b[31m\x1b[0m", ("empty",)),  # colour codes only
    ("\x00\x07\x08", ("empty",)),  # NUL, bell, backspace only
    # outside the vocabulary: Unicode look-alikes and friends
    ("１２３", ("outside the vocabulary", "'１'", "e.g. '")),  # full-width digits
    ("1٣", ("outside the vocabulary",)),  # Arabic-Indic three
    ("12😀", ("outside the vocabulary",)),
    ("3\u03014", ("outside the vocabulary",)),  # a combining accent
    ("3\n14", ("outside the vocabulary", "'\\n'")),  # shown escaped, never a raw newline
    ("3\t14", ("outside the vocabulary", "'\\t'")),
    ("3.14", ("outside the vocabulary", "'.'")),
    # the wrong shape for the task: '+' is in the vocabulary, not in a copy input
    ("12+34", ("'+'", "only the digits")),
    # too long: the task's limit, not a crash in the model
    ("123456", ("too long", "1 to 5")),
    ("7" * 1_000_000, ("too long", "1000000 digits")),
])
def test_copy_refuses(text: str, fragments: tuple[str, ...]) -> None:
    message = refusal("copy", text)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("text, fragment", [
    ("1234", "exactly one '+'"),  # addition without '+'
    ("12+", "missing on one side"),
    ("+12", "missing on one side"),
    ("+", "missing on one side"),
    ("1++2", "exactly one '+'"),
    ("1+2+3", "exactly one '+'"),
    ("123+4", "up to 2"),
    ("01+2", "leading zeros"),
    ("1 + 2", "outside the vocabulary"),
    ("1-2", "outside the vocabulary"),
    ("", "empty"),
])
def test_addition_refuses_the_wrong_shape(text: str, fragment: str) -> None:
    message = refusal("addition", text)
    assert fragment in message and "e.g. '" in message, message


def test_decoder_only_refuses_input_longer_than_its_positions() -> None:
    message = refusal("decoder-copy", "12345678901234")
    assert "too long" in message


@pytest.mark.parametrize("options, fragment", [
    ({"temperature": 1.0, "top_k": -1}, "top-k"),  # was a RuntimeError from torch.topk
    ({"temperature": float("nan")}, "temperature"),  # was a RuntimeError from torch.multinomial
    ({"temperature": float("inf")}, "temperature"),
])
def test_bad_sampling_options_are_refused(options: dict, fragment: str) -> None:
    assert fragment in refusal("copy", "314", **options)


# --------------------------------------------------------------------------- cleaned input


@pytest.mark.parametrize("text", [
    "\x1b[2J31\r4\x7f",  # clear-screen, carriage return, DEL
    "31\u200b4",  # zero-width space
    "\u202e314",  # right-to-left override
    "\x1b]0;owned\x07314",  # a terminal-title (OSC) sequence, removed whole
    "\x1b]8;;http://x\x1b\\314\x1b]8;;\x1b\\",  # an OSC 8 hyperlink ended by ST
    "31\x1bc4",  # a lone ESC sequence (reset)
])
def test_control_and_escape_characters_are_removed_with_a_note(text: str) -> None:
    model, task = model_for("copy")
    result = generate(model, task, text, max_new_tokens=4)
    assert result.input == "314"
    assert any("control/escape" in note for note in result.notes), result.notes
    for note in result.notes:
        assert_printable(note)


def test_char_lm_takes_a_megabyte_prompt_by_keeping_its_end() -> None:
    model, task = model_for("char-lm")
    text = ("The quick brown fox. " * 50_000)[: 1_000_000 - 12] + "END OF TEXT."
    with forwards(model) as fed:
        result = generate(model, task, text, max_new_tokens=4, capture=False)
    # The prompt's end fills one pass within the model's context, then one token a step.
    lengths = [int(ids.shape[-1]) for ids in fed]
    assert len(fed) == 4 and lengths[0] <= CHAR_LM.model.max_len and lengths[1:] == [1, 1, 1], lengths
    assert task.vocab.decode(fed[0][0]).endswith("END OF TEXT.")
    assert len(result.tokens) == 4
    assert any("truncated" in note for note in result.notes)


def test_char_lm_refuses_non_ascii_and_cleans_escapes() -> None:
    model, task = model_for("char-lm")
    assert "outside the vocabulary" in refusal("char-lm", "naïve café")
    result = generate(model, task, "\x1b[1mdef\x1b[0m f", max_new_tokens=2, capture=False)
    assert result.input == "def f" and result.notes


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("args, fragments", [
    (("--input", ""), ("empty",)),
    (("--input", "12x"), ("outside the vocabulary", "'x'")),
    (("--input", "3\n14"), ("'\\n'",)),
    (("--input", "\x1b[31m\x1b[0m"), ("empty",)),
    (("--input", "9" * 200_000), ("too long",)),
    (("--input", "12+3"), ("only the digits",)),
    (("--input", "314", "--temperature", "1", "--top-k", "-2"), ("top-k",)),
    (("--input", "314", "--temperature", "nan"), ("temperature",)),
])
def test_cli_decode_refuses_in_one_line(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                        args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    result = cli(capsys, "decode", "--run", run_dir, *args)
    assert_one_line_error(result.rc, result.err, *fragments)
    assert result.out == ""


def test_cli_decode_notes_removed_escapes(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    result = cli(capsys, "decode", "--run", run_dir, "--input", "\x1b[2J31\x074")
    assert result.rc == 0, result.err
    assert result.err.startswith("note: removed 5 control/escape character(s)")
    assert_printable(result.out.strip())
    result = cli(capsys, "decode", "--run", run_dir, "--input", "\u200b31\r4", "--json")
    assert result.rc == 0, result.err
    out = json.loads(result.out)
    assert out["input"] == "314" and out["notes"]


# --------------------------------------------------------------------------- the lab


async def test_lab_decode_pane_explains_each_bad_input_and_keeps_working(in_tmp: Path, run_dir: Path) -> None:
    from textual.widgets import Input, Static

    from tests.ui.helpers import SIZE, plain, ready, tiny_app, wait_until
    from tui_lab.ui.panes.decode.decode_pane import DecodePane

    app = tiny_app(run_dir=str(run_dir))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(DecodePane)
        await wait_until(pilot, lambda: pane.run is not None, 30, "the run's model")
        await pilot.press("3")
        field = pane.query_one("#decode-input", Input)
        cases = {
            "": "empty",
            "\x1b[31m\x1b[0m": "empty",
            "１２３": "outside the vocabulary",
            "12+3": "only the digits",
            "4" * 100_000: "too long",
            "3\n14": "outside the vocabulary",
        }
        for text, fragment in cases.items():
            field.value = text  # what a paste puts there
            field.focus()
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            shown = plain(pane.query_one("#decode-error", Static))
            assert fragment in shown, (text[:20], shown)
            assert not app._exit and app._exception is None
        # Sampling options typed wrong: explained, nothing decoded.
        await pilot.press("ctrl+t")
        pane.query_one("#temperature", Input).value = "hot"
        field.value = "314"
        field.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "temperature" in plain(pane.query_one("#decode-error", Static))
        pane.query_one("#temperature", Input).value = "0.8"
        await pilot.press("ctrl+t")
        # And a good input still decodes, with escapes removed visibly.
        field.value = "\x1b[1m31\x1b[0m4"
        field.focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert pane.result is not None and pane.result.input == "314"
        assert "control/escape" in plain(pane.query_one("#decode-output", Static))
