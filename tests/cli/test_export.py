"""`tfx-lab export --tensorboard`: event files read back with TensorBoard's own reader.

The expected figures come from metrics.jsonl read here with json, not through
the project's reader. TensorBoard stores scalars as float32, hence approx.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tui_lab import cli

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
TINY = DATA / "tiny-run"
PANE = DATA / "runs-pane"
F32 = {"rel": 1e-6, "abs": 1e-9}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _read(folder: Path) -> EventAccumulator:
    guidance = {"scalars": 0, "tensors": 0, "histograms": 0, "images": 0, "audio": 0,
                "compressedHistograms": 0}
    return EventAccumulator(str(folder), size_guidance=guidance).Reload()


def _series(acc: EventAccumulator, tag: str) -> tuple[list[int], list[float]]:
    events = acc.Scalars(tag)
    return [e.step for e in events], [e.value for e in events]


def _config_text(acc: EventAccumulator) -> str:
    (event,) = acc.Tensors("config/text_summary")
    return event.tensor_proto.string_val[0].decode("utf-8")


def _export(*argv: str) -> int:
    return cli.main(["export", "--tensorboard", *argv])


def test_scalars_and_config_equal_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(TINY, tmp_path / "tiny-run")
    out = tmp_path / "tb"
    assert _export(str(run), "--out", str(out)) == 0
    acc = _read(out / "tiny-run")
    recs = _records(run)
    steps = [r for r in recs if r["kind"] == "step"]
    evals = [r for r in recs if r["kind"] == "eval"]
    expected = {
        "train/loss": (steps, "loss"), "train/lr": (steps, "lr"), "train/grad_norm": (steps, "grad_norm"),
        "train/tokens_per_s": (steps, "tokens_per_s"), "val/loss": (evals, "val_loss"),
        "val/exact_match": (evals, "exact_match"),
    }
    assert sorted(acc.Tags()["scalars"]) == sorted(expected)
    for tag, (rows, key) in expected.items():
        got_steps, got_values = _series(acc, tag)
        assert got_steps == [r["step"] for r in rows], tag
        assert got_values == pytest.approx([r[key] for r in rows], **F32), tag
    # walltime = start + training seconds: TensorBoard's relative axis is real time
    walls = [e.wall_time for e in acc.Scalars("train/loss")]
    assert walls[-1] - walls[0] == pytest.approx(steps[-1]["elapsed"] - steps[0]["elapsed"], abs=1e-3)
    text = _config_text(acc)
    assert "preset: **tiny**" in text and "```yaml" in text
    for line in ("d_model: 16", "n_heads: 2", "d_ff: 32", "arch: encoder-decoder"):
        assert line in text
    lines = capsys.readouterr().out.splitlines()
    points = sum(len(rows) for rows, _ in expected.values())
    assert lines[0] == f"tiny-run: {points} points (30 steps, 1 evaluation) -> {out / 'tiny-run'}"
    assert lines[-1] == f"view them: tensorboard --logdir {out}"


def test_two_runs_side_by_side_and_reexport_does_not_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pre = _copy(PANE / "copy-pre", tmp_path / "runs" / "copy-pre")
    post = _copy(PANE / "copy-post", tmp_path / "runs" / "copy-post")
    out = tmp_path / "tb"
    for _ in range(2):
        assert _export(str(pre), str(post), "--out", str(out)) == 0
    assert sorted(p.name for p in out.iterdir()) == ["copy-post", "copy-pre"]
    assert "replaced the earlier export" in capsys.readouterr().out
    for run in (pre, post):
        folder = out / run.name
        assert len(list(folder.glob("events.out.tfevents.*"))) == 1
        steps, values = _series(_read(folder), "train/loss")
        expected = [r for r in _records(run) if r["kind"] == "step"]
        assert steps == [r["step"] for r in expected]
        assert values == pytest.approx([r["loss"] for r in expected], **F32)
        assert len(_read(folder).Tensors("config/text_summary")) == 1


def test_default_out_is_one_tensorboard_folder_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy(TINY, tmp_path / "tiny-run")
    assert _export("tiny-run") == 0
    assert (tmp_path / "tensorboard" / "tiny-run").is_dir()
    assert capsys.readouterr().out.splitlines()[-1] == "view them: tensorboard --logdir tensorboard"


def test_a_folder_of_runs_exports_the_good_ones_and_names_the_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _copy(PANE, tmp_path / "runs-pane")
    out = tmp_path / "tb"
    assert _export(str(runs), "--out", str(out)) == 2
    assert sorted(p.name for p in out.iterdir()) == ["copy-long", "copy-nowarm", "copy-post", "copy-pre"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken" in err[0] and err[0].startswith("tfx-lab: error: ")


def test_bad_lines_are_skipped_a_repeated_step_keeps_its_last_record_and_lm_figures_show(
    tmp_path: Path,
) -> None:
    run = _copy(TINY, tmp_path / "tiny-run")
    recs = _records(run)
    last = dict(next(r for r in reversed(recs) if r["kind"] == "step"), loss=1.25)  # a resume's repeat
    lm_eval = {"kind": "eval", "step": last["step"], "val_loss": 1.5, "exact_match": None, "n": 0,
               "overlap": None, "bits_per_char": 2.1640425613334453, "next_char_accuracy": 0.5}
    with open(run / "metrics.jsonl", "a") as f:
        f.write("not json\n[1, 2]\n" + json.dumps(last) + "\n" + json.dumps(lm_eval) + '\n{"kind": "st')
    assert _export(str(run), "--out", str(tmp_path / "tb")) == 0
    acc = _read(tmp_path / "tb" / "tiny-run")
    steps, losses = _series(acc, "train/loss")
    assert steps == list(range(1, last["step"] + 1))
    assert losses[-1] == pytest.approx(1.25)
    assert _series(acc, "val/bits_per_char") == ([last["step"]], [pytest.approx(2.1640425613334453, **F32)])
    assert _series(acc, "val/next_char_accuracy") == ([last["step"]], [0.5])


def test_missing_tensorboard_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(TINY, tmp_path / "tiny-run")
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard -> ImportError
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    assert _export(str(run), "--out", str(tmp_path / "tb")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tfx-lab: error: export --tensorboard needs the tensorboard package: "
                   "pip install 'tfx-lab[tensorboard]'"]
    assert not (tmp_path / "tb").exists()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.mkdir(), "holds no run folders"),
        (lambda p: None, "no such run folder"),
        (lambda p: (_copy(TINY, p) / "metrics.jsonl").unlink(), "no metrics.jsonl"),
        (lambda p: (_copy(TINY, p) / "metrics.jsonl").write_text("garbage\n"), "holds no step or evaluation"),
    ],
    ids=["empty-folder", "missing", "no-metrics", "only-garbage"],
)
def test_not_a_run_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, says: str
) -> None:
    target = tmp_path / "thing"
    make(target)
    assert _export(str(target), "--out", str(tmp_path / "tb")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "thing" in err[0], err
