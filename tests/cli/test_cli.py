"""The command line: JSON contracts, one-line errors, a whole train/eval/decode round trip."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]


def tfx_executable(*args: str) -> subprocess.CompletedProcess:
    """The real command in a fresh interpreter (the end-to-end check: trains the shared run)."""
    return subprocess.run(
        [sys.executable, "-m", "tui_lab.cli", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def tfx(*args: str) -> subprocess.CompletedProcess:
    """``tfx-lab ARGS`` in this process: the exact code the command runs, minus seconds of
    interpreter and torch start-up per call. An escaping exception fails the test (a
    traceback a user would see)."""
    import contextlib
    import io

    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            rc = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


def assert_one_line_error(proc: subprocess.CompletedProcess, fragment: str) -> None:
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert fragment in err, err


def test_presets_json_lists_every_shipped_preset():
    proc = tfx("presets", "--json")
    assert proc.returncode == 0, proc.stderr
    names = {p["name"] for p in json.loads(proc.stdout)}
    assert {"copy", "reverse", "sort", "addition", "char-lm", "seed-mini", "paper-base"} <= names


def test_params_json_paper_base():
    proc = tfx("params", "--preset", "paper-base", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    d, f, v, n = 512, 2048, 37000, 6
    attn = 4 * (d * d + d)
    ff = d * f + f + f * d + d
    enc = attn + ff + 2 * 2 * d
    dec = 2 * attn + ff + 3 * 2 * d
    assert data["total"] == v * d + n * enc + n * dec
    assert sum(r["params"] for r in data["rows"]) == data["total"]
    assert all({"name", "params"} <= set(r) for r in data["rows"])


def test_params_table_is_human_readable():
    proc = tfx("params", "--preset", "copy")
    assert proc.returncode == 0, proc.stderr
    assert "total" in proc.stdout and "fp32" in proc.stdout


@pytest.mark.parametrize("args, fragment", [
    (("params", "--preset", "no-such-preset"), "no such preset"),
    (("params", "--preset", "copyy"), "did you mean 'copy'"),
    (("params", "--preset", "/nonexistent/x.yaml"), "no such preset file"),
    (("eval", "--run", "/nonexistent/run"), "/nonexistent/run"),
    (("decode", "--run", "/nonexistent/run", "--input", "1"), "/nonexistent/run"),
    (("train", "--preset", "copy", "--steps", "0"), "train.steps"),
    (("train", "--preset", "copy", "--device", "tpu"), "train.device"),
])
def test_user_mistakes_are_one_line(args, fragment):
    assert_one_line_error(tfx(*args), fragment)


def test_bad_preset_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  d_modle: 64\n")
    assert_one_line_error(tfx("params", "--preset", str(bad)), "did you mean 'd_model'")
    bad.write_text("model: [1, 2\n")
    assert_one_line_error(tfx("train", "--preset", str(bad)), "YAML")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    cfg = tiny_config(model={"d_model": 64, "n_heads": 4, "d_ff": 128}, task={"max_len": 4},
                      train={"steps": 300, "lr": 3e-3, "eval_every": 100, "batch_size": 32, "threads": 1})
    preset = root / "tiny.yaml"
    preset.write_text(cfg.to_yaml())
    out = root / "run"
    proc = tfx_executable("train", "--preset", str(preset), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["step"] == 300 and summary["reason"] in ("finished", "target")
    return out


def test_train_writes_a_complete_run_folder(trained_run):
    for name in ("config.yaml", "model.safetensors", "optimizer.pt", "state.json", "metrics.jsonl", "log.txt"):
        assert (trained_run / name).is_file(), name
    lines = (trained_run / "metrics.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds.count("step") == 300 and kinds.count("eval") >= 3


def test_eval_and_decode_round_trip(trained_run):
    proc = tfx("eval", "--run", str(trained_run), "--n", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exact_match"] > 0.5 and result["val_loss"] > 0
    proc = tfx("decode", "--run", str(trained_run), "--input", "3141", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["output"] == "3141"
    assert len(out["steps"]) >= 4


def test_decode_attention_prints_heatmaps(trained_run):
    proc = tfx("decode", "--run", str(trained_run), "--input", "271", "--attention")
    assert proc.returncode == 0, proc.stderr
    assert "decoder.0.cross head 0" in proc.stdout
    assert any(ch in proc.stdout for ch in "░▒▓█")


def test_decode_bad_input_is_one_line(trained_run):
    assert_one_line_error(tfx("decode", "--run", str(trained_run), "--input", "12x"), "vocabulary")
    assert_one_line_error(tfx("decode", "--run", str(trained_run), "--input", ""), "empty")


def test_pickle_in_place_of_weights_is_refused_and_never_run(tmp_path, trained_run):
    import shutil

    run = tmp_path / "evil"
    shutil.copytree(trained_run, run)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (run / "model.safetensors").write_bytes(pickle.dumps(Evil()))
    assert_one_line_error(tfx("decode", "--run", str(run), "--input", "12"), "safetensors")
    assert not marker.exists()


def test_half_written_run_folder_is_a_clear_error(tmp_path, trained_run):
    import shutil

    run = tmp_path / "half"
    shutil.copytree(trained_run, run)
    data = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert_one_line_error(tfx("eval", "--run", str(run)), "model.safetensors")
    (run / "config.yaml").unlink()
    assert_one_line_error(tfx("eval", "--run", str(run)), "config.yaml")


def test_train_without_out_writes_under_tfx_lab_runs(tmp_path, monkeypatch, capsys):
    from tui_lab.cli import main

    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny_config(train={"steps": 2, "eval_every": 2}).to_yaml())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFX_LAB_RUNS", str(tmp_path / "mine"))
    assert main(["train", "--preset", str(preset), "--json"]) == 0
    run = Path(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run"])
    assert run.parent == tmp_path / "mine" and run.name.startswith("tiny-")
    assert (run / "state.json").is_file() and not (tmp_path / "runs").exists()


def test_resume_continues(tmp_path):
    cfg = tiny_config(train={"steps": 20})
    preset = tmp_path / "t.yaml"
    preset.write_text(cfg.to_yaml())
    out = tmp_path / "run"
    assert tfx("train", "--preset", str(preset), "--out", str(out), "--steps", "10", "--json").returncode == 0
    again = tfx("train", "--preset", str(preset), "--out", str(out))
    assert_one_line_error(again, "--resume")
    proc = tfx("train", "--resume", str(out), "--steps", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["step"] == 20
