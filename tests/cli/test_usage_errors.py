"""A command line argparse refuses is one line on stderr, like every other mistake: no usage
lines, no traceback, exit status 2 (issue 55 item 3)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cli.helpers import TINY_RUN, tfx, tfx_executable


def _assert_one_usage_line(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr
    assert "Traceback" not in err and "usage:" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("tfx-lab: error: ") and fragment in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "1e9999", "3.5"])
def test_an_integer_option_given_a_non_integer_is_one_line(value: str) -> None:
    proc = tfx("decode", "--run", str(TINY_RUN), "--input", "1 2", "--max-new", value)
    _assert_one_usage_line(proc, f"argument --max-new: invalid int value: '{value}'")


@pytest.mark.parametrize("value", ["abc", "1,5", ""])
def test_a_float_option_given_a_non_number_is_one_line(value: str) -> None:
    proc = tfx("decode", "--run", str(TINY_RUN), "--input", "1 2", "--temperature", value)
    _assert_one_usage_line(proc, "argument --temperature: invalid float value")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["no-such-command"], "invalid choice: 'no-such-command'"),
        (["eval", "--run", "r", "--bogus"], "unrecognized arguments: --bogus"),
        (["eval"], "the following arguments are required: --run"),
        (["sae", "train", "--run", "r", "--hook", "h", "--out", "o", "--tokens", "many"], "invalid int value: 'many'"),
    ],
)
def test_other_usage_mistakes_are_one_line(argv: list[str], fragment: str) -> None:
    _assert_one_usage_line(tfx(*argv), fragment)


def test_the_real_command_prints_one_line_for_an_integer_nan() -> None:
    proc = tfx_executable("decode", "--max-new", "nan", timeout=60)
    _assert_one_usage_line(proc, "argument --max-new: invalid int value: 'nan'")
