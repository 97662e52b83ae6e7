"""Damaged run folders are refused with one line that names the file; failing disks never damage a save.

tests/core/test_checkpoint.py proves the mechanics on a small module of its
own (atomic writes, truncation, pickles, shape mismatches, a failed save);
tests/cli/test_cli.py checks ``eval`` on half a weights file and on a missing
config. Here the same faults meet real runs of the lab's models, through
``eval``, ``decode`` and ``train --resume``, plus what the issue adds: a config
edited after training, weights from a different preset, and a disk that fills
up or turns read-only while a run is saving.
"""

from __future__ import annotations

import builtins
import errno
import os
import pickle
import shutil
from pathlib import Path

import pytest
import yaml

from tests.reliability.conftest import (
    assert_one_line_error,
    assert_timestamped,
    cli,
    log_lines,
    snapshot,
    state,
    temps,
    tiny,
    train_run,
)
from tui_lab.core.runs import checkpoint as ck
from tui_lab.core.runs import safetensors_check

LOADERS = ("eval", "decode", "resume")


def load_with(capsys: pytest.CaptureFixture[str], how: str, run: Path):  # type: ignore[no-untyped-def]
    args = {"eval": ("eval", "--run", run, "--n", "8"),
            "decode": ("decode", "--run", run, "--input", "314"),
            "resume": ("train", "--resume", run, "--steps", "30", "--json")}[how]
    return cli(capsys, *args)


def refused_everywhere(capsys: pytest.CaptureFixture[str], run: Path, *fragments: str) -> None:
    """eval, decode and train --resume all refuse with one line, and leave the folder as it was."""
    before = snapshot(run)
    for how in LOADERS:
        result = load_with(capsys, how, run)
        assert_one_line_error(result.rc, result.err, *fragments)
        assert snapshot(run) == before, f"{how} changed the folder it refused"


def edit_config(run: Path, **changes: object) -> None:
    path = run / "config.yaml"
    data = yaml.safe_load(path.read_text())
    for dotted, value in changes.items():
        section, _, key = dotted.partition("__")
        data[section][key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# --------------------------------------------------------------------------- config vs weights


@pytest.mark.parametrize("changes, fragment", [
    ({"model__d_model": 64}, "model.d_model: 32, config.yaml now says 64"),
    ({"model__d_ff": 128}, "model.d_ff: 64, config.yaml now says 128"),
    ({"model__n_decoder_layers": 2}, "model.n_decoder_layers: 1"),
    ({"model__positional": "learned"}, "model.positional: sinusoidal, config.yaml now says learned"),
    ({"model__tie_embeddings": False}, "model.tie_embeddings: True"),
    ({"model__arch": "decoder-only", "model__n_encoder_layers": 0}, "model.arch: encoder-decoder"),
])
def test_config_edited_to_other_sizes_is_refused(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                  changes: dict, fragment: str) -> None:
    """The message names the setting, the value the weights need, and what to do."""
    edit_config(run_dir, **changes)
    refused_everywhere(capsys, run_dir, "model.safetensors", fragment, "or train a new run")


def test_older_checkpoints_without_the_record_still_compare_shapes(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(safetensors_check, "check_fingerprint", lambda *args: None)  # as before the record existed
    edit_config(run_dir, model__d_model=64)
    refused_everywhere(capsys, run_dir, "weights do not match config.yaml", "[16, 32] saved vs [16, 64] built")


@pytest.mark.parametrize("changes, field", [
    ({"model__positional": "rope"}, "model.positional"),  # no parameters either way
    ({"model__activation": "gelu"}, "model.activation"),
    ({"task__name": "reverse"}, "task.name"),  # same vocabulary, same shapes
])
def test_config_edited_without_changing_shapes_is_refused(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                          changes: dict, field: str) -> None:
    """Shapes alone cannot see these edits; loading would silently run another model."""
    edit_config(run_dir, **changes)
    refused_everywhere(capsys, run_dir, "model.safetensors", field, "config.yaml")


def test_edits_that_do_not_change_the_model_still_load(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Editing train.* (lr, steps) or dropout to resume differently is allowed."""
    edit_config(run_dir, train__lr=0.0005, train__steps=30, model__dropout=0.1)
    result = load_with(capsys, "resume", run_dir)
    assert result.rc == 0, result.err
    assert state(run_dir)["step"] == 30


def test_weights_from_a_different_preset_are_refused(run_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    wider = train_run(tmp_path / "wide", tiny(model={"d_model": 16, "n_heads": 2}, train={"steps": 2}))
    same_shape = train_run(tmp_path / "reverse", tiny(task={"name": "reverse"}, train={"steps": 2}))
    original = (run_dir / "model.safetensors").read_bytes()

    shutil.copy(wider / "model.safetensors", run_dir / "model.safetensors")
    refused_everywhere(capsys, run_dir, "model.safetensors", "model.d_model: 16, config.yaml now says 32")

    shutil.copy(same_shape / "model.safetensors", run_dir / "model.safetensors")
    refused_everywhere(capsys, run_dir, "model.safetensors", "task.name", "reverse")

    (run_dir / "model.safetensors").write_bytes(original)
    assert load_with(capsys, "eval", run_dir).rc == 0


# --------------------------------------------------------------------------- missing and damaged files


@pytest.mark.parametrize("missing, fragment", [
    ("config.yaml", "not a run folder (no config.yaml)"),
    ("state.json", "no finished checkpoint yet"),
    ("model.safetensors", "model.safetensors: missing"),
])
def test_missing_files(run_dir: Path, capsys: pytest.CaptureFixture[str], missing: str, fragment: str) -> None:
    (run_dir / missing).unlink()
    refused_everywhere(capsys, run_dir, fragment)


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_lost_optimizer_refuses_resume_but_not_inference(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                            damage: str) -> None:
    """eval and decode need only the weights; resuming needs the optimizer and says so."""
    path = run_dir / "optimizer.pt"
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:200])
    result = load_with(capsys, "resume", run_dir)
    assert_one_line_error(result.rc, result.err, "optimizer.pt")
    for how in ("eval", "decode"):
        result = load_with(capsys, how, run_dir)
        assert result.rc == 0, result.err


@pytest.mark.parametrize("cut", [0, 7, 100, 0.5, -1])
def test_truncated_weights(run_dir: Path, capsys: pytest.CaptureFixture[str], cut: float) -> None:
    path = run_dir / "model.safetensors"
    data = path.read_bytes()
    keep = int(len(data) * cut) if isinstance(cut, float) else (len(data) - 1 if cut == -1 else cut)
    path.write_bytes(data[:keep])
    refused_everywhere(capsys, run_dir, "model.safetensors")


def test_corrupted_weights(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = run_dir / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # one flipped bit in the tensor bytes
    path.write_bytes(bytes(data))
    refused_everywhere(capsys, run_dir, "model.safetensors: corrupted", "restore it from a copy or train again")
    data = bytearray(path.read_bytes())
    data[20] = ord("#")  # the JSON header itself
    path.write_bytes(bytes(data))
    refused_everywhere(capsys, run_dir, "model.safetensors")


def test_corrupted_state_and_config(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "state.json").write_text('{"step": ')
    refused_everywhere(capsys, run_dir, "state.json: not valid JSON")
    shutil.copy(run_dir / "config.yaml", run_dir / "config.bak")
    (run_dir / "config.yaml").write_bytes(b"\x00\xff" * 50)
    refused_everywhere(capsys, run_dir, "config.yaml")


class Payload:
    """Unpickling this creates ``marker``: what a hostile file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


@pytest.mark.filterwarnings("ignore")
def test_pickles_are_refused_and_never_run(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    marker = tmp_path / "pwned"
    weights = run_dir / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(pickle.dumps(Payload(marker)))
    refused_everywhere(capsys, run_dir, "not a safetensors file; refusing to load it")
    torch.save({"w": Payload(marker)}, weights)  # torch's zip pickle
    refused_everywhere(capsys, run_dir, "not a safetensors file")
    weights.write_bytes(original)
    torch.save({"optimizer": Payload(marker)}, run_dir / "optimizer.pt")
    result = load_with(capsys, "resume", run_dir)
    assert_one_line_error(result.rc, result.err, "optimizer.pt", "refusing to unpickle it")
    assert not marker.exists()


# --------------------------------------------------------------------------- a failing disk while saving


def fail_saves_after(monkeypatch: pytest.MonkeyPatch, good_saves: int, how: str) -> dict:
    """Let ``good_saves`` checkpoints through, then make the disk fail in the way ``how`` says.

    ``full``: fsync of each staged file raises ENOSPC. ``replace``: the rename that
    publishes a file raises EROFS. ``readonly``: every write in the folder fails
    (staging, renames, the metrics and log appends), as on a remounted disk.
    """
    seen = {"saves": 0, "before": None, "failing": False}
    real_save, real_open, real_replace, real_fsync = ck.save_checkpoint, builtins.open, os.replace, os.fsync

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def replace(src: object, dst: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    def ro_open(file: object, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if any(m in mode for m in "wax+") and seen["folder"] in str(file):
            raise OSError(errno.EROFS, "Read-only file system", str(file))
        return real_open(file, mode, *args, **kwargs)

    def start_failing() -> None:
        seen["failing"] = True
        if how == "full":
            monkeypatch.setattr(os, "fsync", fsync)
        elif how == "replace":
            monkeypatch.setattr(os, "replace", replace)
        else:
            monkeypatch.setattr(os, "replace", replace)
            monkeypatch.setattr(builtins, "open", ro_open)

    def save(run_dir, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["folder"] = str(run_dir)
        if seen["saves"] == good_saves and not seen["failing"]:
            seen["before"] = snapshot(Path(run_dir))
            start_failing()
        record = real_save(run_dir, *args, **kwargs)
        seen["saves"] += 1
        return record

    monkeypatch.setattr(ck, "save_checkpoint", save)
    seen["undo"] = lambda: (monkeypatch.setattr(os, "fsync", real_fsync),
                            monkeypatch.setattr(os, "replace", real_replace),
                            monkeypatch.setattr(builtins, "open", real_open))
    return seen


@pytest.mark.parametrize("how, reason_text", [
    ("full", "No space left on device"),
    ("replace", "Read-only file system"),
    ("readonly", "Read-only file system"),
])
def test_disk_failing_mid_run_stops_with_a_message_and_keeps_the_last_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    how: str, reason_text: str,
) -> None:
    from tui_lab.core.training.train import DoneEvent, LogEvent, TrainingRun

    out = tmp_path / "run"
    seen = fail_saves_after(monkeypatch, good_saves=4, how=how)
    events: list = []
    run = TrainingRun(tiny(train={"steps": 200, "checkpoint_seconds": 1e-9}), out, on_event=events.append)
    summary = run.run()  # must return, not raise
    seen["undo"]()

    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "error", events[-3:]
    assert summary["reason"] == "error" and summary["step"] < 200
    assert reason_text in done.message and "cannot save" in done.message and str(out) in done.message
    assert "\n" not in done.message
    errors = [e for e in events if isinstance(e, LogEvent) and e.level == "error"]
    assert errors and errors[-1].message == done.message
    # Nothing already saved is damaged, and no staging file is left behind.
    assert snapshot(out) == seen["before"]
    assert temps(out) == []
    result = cli(capsys, "eval", "--run", out, "--n", "8", "--json")
    assert result.rc == 0, result.err
    if how != "readonly":  # a read-only disk cannot take the log line, a full one can
        lines = log_lines(out)
        assert_timestamped(lines)
        assert reason_text in lines[-1] and "training on cpu" in lines[0]


def test_cli_train_on_a_full_disk_is_one_error_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny(train={"steps": 200, "checkpoint_seconds": 1e-9}).to_yaml())
    out = tmp_path / "run"
    fail_saves_after(monkeypatch, good_saves=2, how="full")
    result = cli(capsys, "train", "--preset", preset, "--out", out, "--json")
    assert result.rc == 1
    assert "Traceback" not in result.err
    assert result.err.strip().splitlines() == [
        line for line in result.err.strip().splitlines() if line.startswith("error: cannot save")
    ] and result.err.strip(), result.err
    import json

    summary = json.loads(result.out.strip().splitlines()[-1])
    assert summary["reason"] == "error" and "No space left on device" in summary["message"]


def test_disk_full_when_the_run_starts_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny().to_yaml())

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    result = cli(capsys, "train", "--preset", preset, "--out", tmp_path / "run")
    assert_one_line_error(result.rc, result.err, "No space left on device", "cannot save")


def test_log_records_what_happened_and_when(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """log.txt: each start (with step range and device), each end with its reason, resumes, warnings."""
    edit_config(run_dir, train__steps=30)
    assert load_with(capsys, "resume", run_dir).rc == 0
    lines = log_lines(run_dir)
    assert_timestamped(lines)
    assert "training on cpu" in lines[0] and "from step 0 to 24" in lines[0]
    assert any("finished 24 steps" in line for line in lines)
    assert any("from step 24 to 30" in line for line in lines)
    assert "finished 30 steps" in lines[-1]


def test_missing_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for how in LOADERS:
        result = load_with(capsys, how, tmp_path / "no-such-run")
        assert_one_line_error(result.rc, result.err, "no-such-run", "no such run folder")


@pytest.mark.skipif(not Path("/sys").is_dir() or os.access("/sys", os.W_OK) and os.geteuid() != 0,
                    reason="needs a folder even root cannot write (Linux /sys)")
def test_unwritable_out_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real read-only place (no monkeypatch): /sys refuses even root."""
    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny().to_yaml())
    result = cli(capsys, "train", "--preset", preset, "--out", "/sys/tfx-lab-run")
    assert_one_line_error(result.rc, result.err, "/sys/tfx-lab-run")
    (tmp_path / "a-file").write_text("x")
    result = cli(capsys, "train", "--preset", preset, "--out", tmp_path / "a-file")
    assert_one_line_error(result.rc, result.err, "a-file")
