"""A label file: its lines, and each way it can be wrong as one line naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_lab.core.analysis.probes.labels import LabelLine, check_lengths, read_labels
from tui_lab.core.errors import LabError


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "labels.tsv"
    path.write_text(text)
    return path


def test_lines_comments_and_blank_lines(tmp_path: Path) -> None:
    path = _file(tmp_path, "# carry\nab\t1\n\ncd\t0 1\nef\t0\ngh\tx\n")
    lines = read_labels(path)
    assert lines[0] == LabelLine("ab", ("1",), 2)
    assert lines[1] == LabelLine("cd", ("0", "1"), 4)
    check_lengths(path, lines, len)  # one label, or one per character-token


@pytest.mark.parametrize(("text", "message"), [
    ("ab 1\ncd\t0\nef\t1\ngh\t0\n", "labels.tsv:1: write TEXT<TAB>LABEL"),
    ("ab\t\ncd\t0\nef\t1\ngh\t0\n", "labels.tsv:1: no label after the tab"),
    ("ab\t1\ncd\t0\n", "2 labelled example(s); a probe needs at least 4"),
    ("ab\t1\ncd\t1\nef\t1\ngh\t1\n", "every label is the same"),
])
def test_a_bad_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(LabError) as info:
        read_labels(_file(tmp_path, text))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_wrong_length_names_the_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "ab\t1\nabc\t0 1\nef\t0\ngh\t1\n")
    with pytest.raises(LabError, match=r"labels.tsv:2: 2 labels for 3 tokens of 'abc'"):
        check_lengths(path, read_labels(path), len)
