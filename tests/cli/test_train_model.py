"""``tfx-lab train --model SOURCE --text FILE``: fine-tune a real model, then use the run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.hf_factory import TEXT, save_family
from tests.cli.helpers import assert_one_line_error, tfx


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """(the source folder's copy, the run folder, train's JSON summary); the copy is deleted after training."""
    root = tmp_path_factory.mktemp("finetune")
    source = root / "llama-src"
    save_family(source, "llama")
    text = root / "story.txt"
    text.write_text(TEXT)
    out = root / "run"
    proc = tfx("train", "--model", str(source), "--text", str(text), "--steps", "20", "--block", "32",
               "--device", "cpu", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(source)  # everything below reads the run folder alone
    return text, out, summary


def test_train_model_writes_a_run_whose_loss_was_measured(trained) -> None:
    _, out, summary = trained
    assert summary["reason"] == "finished" and summary["step"] == 20
    assert summary["val_loss"] is not None and summary["run"] == str(out)
    evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["kind"] == "eval"]
    assert evals and evals[-1]["next_char_accuracy"] is not None  # next-token accuracy


def test_decode_run_continues_a_prompt_through_the_runs_tokenizer(trained) -> None:
    _, out, _ = trained
    proc = tfx("decode", "--run", str(out), "--input", "The cat sat on the", "--max-new", "6", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert len(result["tokens"]) == 6 and result["input"] == "The cat sat on the"


def test_heads_and_ablate_read_the_run(trained) -> None:
    _, out, _ = trained
    heads = tfx("heads", "--run", str(out), "--json")
    assert heads.returncode == 0, heads.stderr
    assert json.loads(heads.stdout)["task"] == "token-lm"
    ablate = tfx("ablate", "--run", str(out), "--head", "decoder.0.self:1", "--json")
    assert ablate.returncode == 0, ablate.stderr
    row = json.loads(ablate.stdout)
    assert row["run"] == str(out) and row["step"] == 20 and row["n_tokens"] > 1


def test_runs_lists_the_run_with_its_task(trained) -> None:
    _, out, _ = trained
    rows = json.loads(tfx("runs", str(out.parent), "--json").stdout)
    row = next(r for r in rows if r["path"].endswith("run"))
    assert row["task"] == "token-lm" and row["step"] == 20


def test_resume_continues_the_step_count(trained, tmp_path) -> None:
    _, out, _ = trained
    copy = Path(shutil.copytree(out, tmp_path / "run"))
    proc = tfx("train", "--resume", str(copy), "--steps", "26", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["step"] == 26
    state = json.loads((copy / "state.json").read_text())
    assert state["step"] == 26


def test_text_without_model_is_one_line(tmp_path) -> None:
    assert_one_line_error(tfx("train", "--text", str(tmp_path / "x.txt")), "--text goes with --model")


def test_model_without_text_is_one_line(tmp_path) -> None:
    assert_one_line_error(tfx("train", "--model", str(tmp_path)), "--text FILE")


def test_model_and_preset_are_exclusive(tmp_path) -> None:
    proc = tfx("train", "--model", str(tmp_path), "--preset", "copy", "--text", "x")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_a_text_too_short_leaves_no_folder(tmp_path) -> None:
    source = tmp_path / "src"
    save_family(source, "gpt2")
    short = tmp_path / "short.txt"
    short.write_text("The cat sat.")
    out = tmp_path / "runs"
    proc = tfx("train", "--model", str(source), "--text", str(short), "--out", str(out / "r"))
    assert_one_line_error(proc, "tokens")
    assert not (out / "r").exists()


def test_eval_run_reports_bits_per_token_and_next_token_accuracy(trained) -> None:
    _, out, _ = trained
    proc = tfx("eval", "--run", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "bits/token, next-token accuracy" in proc.stdout
