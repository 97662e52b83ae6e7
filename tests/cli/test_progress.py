"""Progress on the command line: in place on a terminal, quiet (or plain lines) when piped."""

from __future__ import annotations

import io

import pytest

from tui_lab.cli.progress import CountLine, PlainReporter, RichReporter, make_reporter


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [io.StringIO, Terminal])
def test_count_line_rewrites_in_place_on_a_terminal_and_says_nothing_when_piped(
    monkeypatch: pytest.MonkeyPatch, stream: type[io.StringIO]
) -> None:
    err = stream()
    monkeypatch.setattr("sys.stderr", err)
    count = CountLine("ablating head")
    for done in (1, 2, 3):
        count(done, 3)
    count.close()
    count.close()  # a second close adds nothing
    if stream is Terminal:
        assert err.getvalue() == "\rablating head 1/3\rablating head 2/3\rablating head 3/3\n"
    else:
        assert err.getvalue() == ""


def test_count_line_switched_off_and_never_called_prints_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    off = CountLine("x", enabled=False)
    off(1, 2)
    off.close()
    CountLine("y").close()  # closed before any count: no empty line
    assert err.getvalue() == ""


def test_training_progress_is_a_bar_on_a_terminal_and_lines_when_piped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdout", Terminal())
    assert isinstance(make_reporter(json_mode=False), RichReporter)
    quiet = make_reporter(json_mode=True)
    assert type(quiet) is PlainReporter and quiet.quiet
    monkeypatch.setattr("sys.stdout", io.StringIO())
    plain = make_reporter(json_mode=False)
    assert type(plain) is PlainReporter and not plain.quiet
