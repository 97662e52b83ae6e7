"""Issue 55 for decode, eval, ablate and hooks: a number that is NaN, infinite or out of range,
and typed text longer than the model's context, are refused in one line before any model
work: non-zero exit, one line on stderr, no traceback, nothing written.

Numbers are refused before the model is even opened (the loader is made to fail); long
text after it is opened but before any forward pass (the forward is made to fail)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import (
    INDUCTION_RUN,
    LONG_TEXT,
    assert_one_line_error,
    no_forward,
    no_loading,
    tfx,
    train_tiny_mlm,
)


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    """A copy of the run: ablate keeps its per-head table in the run's folder."""
    return Path(shutil.copytree(INDUCTION_RUN, tmp_path / "run"))


def _nothing_written(folder: Path, before: list[Path]) -> None:
    assert sorted(folder.rglob("*")) == before


@pytest.mark.parametrize(("extra", "says"), [
    (["--temperature", "nan"], "--temperature: must be a finite number, got nan"),
    (["--temperature", "inf"], "--temperature: must be a finite number, got inf"),
    (["--temperature=-1"], "--temperature: must be >= 0, got -1.0"),
    (["--temperature", "1", "--top-p", "nan"], "--top-p: must be a finite number, got nan"),
    (["--temperature", "1", "--top-p", "0"], "--top-p: must be in (0, 1], got 0.0"),
    (["--temperature", "1", "--top-p", "1.5"], "--top-p: must be in (0, 1], got 1.5"),
    (["--temperature", "1", "--top-k=-1"], "--top-k: must be >= 0, got -1"),
    (["--max-new", "0"], "--max-new: must be >= 1, got 0"),
    (["--explain", "decoder.0.cross:1"], "expected NAME:HEAD@ROW"),
])
def test_decode_numbers(extra: list[str], says: str, run_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.decode.load_target", no_loading)
    before = sorted(run_copy.rglob("*"))
    proc = tfx("decode", "--run", str(run_copy), "--input", "abcab", *extra)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""
    _nothing_written(run_copy, before)


@pytest.mark.parametrize(("n", "says"), [("0", "--n: must be > 0, got 0"), ("-5", "--n: must be > 0, got -5")])
def test_eval_examples(n: str, says: str, run_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.evaluate.load_target", no_loading)
    before = sorted(run_copy.rglob("*"))
    proc = tfx("eval", "--run", str(run_copy), "--n", n)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""
    _nothing_written(run_copy, before)


@pytest.mark.parametrize(("extra", "says"), [
    (["--n", "0"], "--n: must be > 0, got 0"),
    (["--n=-3"], "--n: must be > 0, got -3"),
    (["--mode", "half"], "mode 'half': expected one of zero, mean"),
])
def test_ablate_numbers(extra: list[str], says: str, run_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.ablate.load_target", no_loading)
    before = sorted(run_copy.rglob("*"))
    proc = tfx("ablate", "--run", str(run_copy), *extra)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""
    _nothing_written(run_copy, before)  # no ablation.json kept


def _no_model_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every forward pass of the model in hand fails (the tokenizer still works)."""
    from torch import nn

    from tui_lab.core.opening.model_in_hand import ModelInHand

    for name in ("run_with_cache", "run_with_hooks", "_forward"):
        monkeypatch.setattr(ModelInHand, name, no_forward)
    monkeypatch.setattr(nn.Module, "__call__", no_forward)


def test_hooks_input_past_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_model_work(monkeypatch)
    proc = tfx("hooks", "--run", INDUCTION_RUN, "--input", LONG_TEXT)
    assert_one_line_error(proc, "the input of 5000 tokens: the model reads at most 64")
    assert proc.stdout == ""


def test_decode_input_past_the_context(learned_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's input past the context is refused before the forward pass (a language model's
    prompt is cut to its last half-context instead, with a note: that is how it continues)."""
    _no_model_work(monkeypatch)
    proc = tfx("decode", "--run", str(learned_run), "--input", "31415" * 100)
    assert_one_line_error(proc, "too long")
    assert proc.stdout == ""


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_mlm(tmp_path_factory.mktemp("mlm"))[0]


def test_fill_mask_input_past_the_context(mlm_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoder-only model's typed text is refused before the forward pass too."""
    _no_model_work(monkeypatch)
    proc = tfx("decode", "--run", str(mlm_run), "--input", "th_ cat " * 100)
    assert_one_line_error(proc, "the input of 800 tokens: the model reads at most 32")
    assert proc.stdout == ""


def test_fill_mask_numbers(mlm_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.decode.load_target", no_loading)
    proc = tfx("decode", "--run", str(mlm_run), "--input", "th_ cat", "--top-k=-2")
    assert_one_line_error(proc, "--top-k: must be >= 0, got -2")
    assert proc.stdout == ""


def test_a_refused_decode_json_prints_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.decode.load_target", no_loading)
    proc = tfx("decode", "--run", INDUCTION_RUN, "--input", "abc", "--temperature", "nan", "--json")
    assert_one_line_error(proc, "--temperature")
    with pytest.raises(json.JSONDecodeError):
        json.loads(proc.stdout)
