"""Issue 55 for patch, dla, trace, steer and sae: a number that is NaN, infinite or out of range,
and text longer than the model's context, are refused in one line before any model work:
non-zero exit, one line on stderr, no traceback, nothing written.

Numbers are refused before the model is even opened (the loader is made to fail); long
text after it is opened but before any forward pass (the forward is made to fail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import (
    INDUCTION_RUN,
    LONG_TEXT,
    assert_one_line_error,
    no_forward,
    no_loading,
    tfx,
)


@pytest.fixture
def prompts(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "pos.txt").write_text("abcabc\n")
    (tmp_path / "neg.txt").write_text("xyzxyz\n")
    return str(tmp_path / "pos.txt"), str(tmp_path / "neg.txt")


def _steer(prompts: tuple[str, str], *extra: str) -> list[str]:
    return ["steer", "--run", INDUCTION_RUN, "--input", "abc", "--hook", "blocks.1.hook_resid_pre",
            "--positive", prompts[0], "--negative", prompts[1], *extra]


@pytest.mark.parametrize(("extra", "says"), [
    (["--coef", "nan"], "--coef: must be a finite number, got nan"),
    (["--coef", "inf"], "--coef: must be a finite number, got inf"),
    (["--coef=-inf"], "--coef: must be a finite number, got -inf"),
    (["--coef", "1", "--max-new", "0"], "--max-new: must be >= 1, got 0"),
])
def test_steer_numbers(prompts: tuple[str, str], extra: list[str], says: str,
                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tui_lab.cli.steer.load_target", no_loading)
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    proc = tfx(*_steer(prompts, *extra))
    assert_one_line_error(proc, says)
    assert proc.stdout == "" and sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize(("extra", "says"), [
    (["--noise", "nan"], "--noise: must be a finite number, got nan"),
    (["--noise", "inf"], "--noise: must be a finite number, got inf"),
    (["--noise", "0"], "--noise: must be > 0, got 0"),
    (["--samples", "0"], "--samples: must be in [1, 10000], got 0"),
    (["--samples", "100000"], "--samples: must be in [1, 10000], got 100000"),
])
def test_trace_numbers(extra: list[str], says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui_lab.cli.trace.load_target", no_loading)
    proc = tfx("trace", "--run", INDUCTION_RUN, "--input", "abcab", "--subject", "ab", "--answer", "c", *extra)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""


@pytest.mark.parametrize(("extra", "says"), [
    (["--lr", "nan"], "--lr: must be a finite number, got nan"),
    (["--lr", "inf"], "--lr: must be a finite number, got inf"),
    (["--lr", "0"], "--lr: must be > 0, got 0"),
    (["--lr", "-0.1"], "--lr: must be > 0, got -0.1"),
    (["--l1", "nan"], "--l1: must be a finite number, got nan"),
    (["--l1", "-1"], "--l1: must be >= 0, got -1"),
    (["--tokens", "0"], "--tokens: must be >= 1, got 0"),
    (["--batch", "0"], "--batch: must be >= 1, got 0"),
    (["--d-sae", "0"], "--d-sae: must be >= 1, got 0"),
    (["--k", "0"], "--k: must be >= 1, got 0"),
    (["--k", "64"], "--k: must be <= --d-sae (16), got 64"),
    (["--seed", "-1"], "--seed: must be >= 0, got -1"),
])
def test_sae_train_numbers(extra: list[str], says: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tui_lab.cli.sae._open", no_loading)
    out = tmp_path / "sae"
    args = ["--d-sae", "16", *extra] if "--d-sae" not in extra else extra
    proc = tfx("sae", "train", "--run", INDUCTION_RUN, "--hook", "blocks.1.hook_resid_post", "--out", str(out), *args)
    assert_one_line_error(proc, says)
    assert proc.stdout == "" and not out.exists()


@pytest.mark.parametrize(("action", "extra", "says"), [
    ("eval", ["--tokens", "0"], "--tokens: must be >= 1, got 0"),
    ("features", ["--top", "0"], "--top 0: show at least 1"),
    ("features", ["--feature", "-1"], "--feature: must be >= 0, got -1"),
    ("features", ["--tokens", "-5"], "--tokens: must be >= 1, got -5"),
])
def test_sae_eval_and_features_numbers(action: str, extra: list[str], says: str, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.setattr("tui_lab.cli.sae._open", no_loading)
    proc = tfx("sae", action, str(tmp_path / "sae"), "--run", INDUCTION_RUN, *extra)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""


def _no_model_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every forward pass of the model in hand fails (the tokenizer still works)."""
    from tui_lab.core.opening.model_in_hand import ModelInHand

    for name in ("run_with_cache", "run_with_hooks", "_forward"):
        monkeypatch.setattr(ModelInHand, name, no_forward)


@pytest.mark.parametrize(("args", "says"), [
    (["patch", "--run", INDUCTION_RUN, "--clean", LONG_TEXT, "--corrupt", LONG_TEXT, "--answer", "a", "--wrong", "b"],
     "the clean input of 5000 tokens: the model reads at most 64"),
    (["patch", "--run", INDUCTION_RUN, "--clean", "abcd", "--corrupt", LONG_TEXT, "--answer", "a", "--wrong", "b"],
     "the corrupted input of 5000 tokens: the model reads at most 64"),
    (["dla", "--run", INDUCTION_RUN, "--input", LONG_TEXT, "--answer", "a"], "the input of 5000 tokens: the model reads at most 64"),
    (["trace", "--run", INDUCTION_RUN, "--input", LONG_TEXT, "--subject", "abcd", "--answer", "a"],
     "the input of 5000 tokens: the model reads at most 64"),
])
def test_text_past_the_context(args: list[str], says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_model_work(monkeypatch)
    proc = tfx(*args)
    assert_one_line_error(proc, says)
    assert proc.stdout == ""


def test_steer_text_past_the_context(prompts: tuple[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.core.opening.model_in_hand import ModelInHand, open_model

    names = open_model(INDUCTION_RUN).hook_names()
    monkeypatch.setattr(ModelInHand, "hook_names", lambda _self: names)  # the hook check reads the list
    _no_model_work(monkeypatch)
    proc = tfx("steer", "--run", INDUCTION_RUN, "--input", LONG_TEXT, "--hook", "blocks.1.hook_resid_pre",
               "--positive", prompts[0], "--negative", prompts[1], "--coef", "1")
    assert_one_line_error(proc, "the input of 5000 tokens: the model reads at most 64")
    (tmp_path / "long.txt").write_text(f"abc\n{LONG_TEXT}\n")
    proc = tfx(*_steer((str(tmp_path / "long.txt"), prompts[1]), "--coef", "1"))
    assert_one_line_error(proc, "a positive prompt of 5000 tokens: the model reads at most 64")


def test_sae_features_on_text_past_the_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.folder import save_sae
    from tui_lab.core.sae.recipe import new_sae

    lab = open_model(INDUCTION_RUN)
    save_sae(new_sae(int(lab.config.model.d_model), 16, "topk", 4, "blocks.1.hook_resid_post", INDUCTION_RUN, 16),
             tmp_path / "sae")
    _no_model_work(monkeypatch)
    proc = tfx("sae", "features", str(tmp_path / "sae"), "--run", INDUCTION_RUN, "--input", LONG_TEXT)
    assert_one_line_error(proc, "--input of 5000 tokens: the model reads at most 64")
    assert proc.stdout == ""
