"""History snapshots: planned steps, bounded size, atomic, checksummed and never unpickled."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.config.presets import list_presets, load_preset
from tui_lab.core.model.models import build_model
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.snapshots import (
    HISTORY_DIR,
    INDEX_FILE,
    MAX_BYTES,
    History,
    list_snapshots,
    load_snapshot,
    planned_steps,
    snapshot_bytes,
    thin,
)
from tui_lab.core.tasks import make_task
from tui_lab.core.training.train import TrainingRun


def test_default_plan_is_powers_of_two_and_evaluations():
    cfg = tiny_config(train={"steps": 300, "eval_every": 100})
    assert planned_steps(cfg) == [1, 2, 4, 8, 16, 32, 64, 100, 128, 200, 256, 300]
    every = cfg.with_values({"train.history_every": 120})
    assert planned_steps(every) == [120, 240, 300]
    assert planned_steps(cfg.with_values({"train.history": False})) == []


def test_thin_spreads_evenly_and_keeps_the_last():
    assert thin(list(range(1, 11)), 4) == [1, 4, 7, 10]
    assert thin([5, 6, 7], 1) == [7]
    assert thin([5, 6], 5) == [5, 6]
    assert thin([5, 6], 0) == []


@pytest.mark.parametrize("info", list_presets(), ids=lambda i: i.name)
def test_every_shipped_preset_stays_under_the_limit(info):
    if not info.shipped:
        pytest.skip("user preset")
    cfg = load_preset(str(info.path))
    with torch.device("meta"):
        model = build_model(cfg.model, len(make_task(cfg.task).vocab))
    size = snapshot_bytes(model)
    kept = thin(planned_steps(cfg), MAX_BYTES // size)
    assert len(kept) * size <= MAX_BYTES
    if size <= MAX_BYTES:  # paper-base's one snapshot alone is over the limit: it keeps none
        assert kept and kept[-1] == cfg.train.steps


def _history(tmp_path: Path, **train: object) -> tuple[History, torch.nn.Module, list[str]]:
    cfg = tiny_config(train={"steps": 8, "eval_every": 4, **train})
    torch.manual_seed(0)
    model = build_model(cfg.model, len(make_task(cfg.task).vocab))
    logged: list[str] = []
    return History(tmp_path, cfg, model, logged.append), model, logged


def test_a_big_model_keeps_fewer_snapshots_and_says_so(tmp_path, monkeypatch):
    import tui_lab.core.runs.snapshots as history

    _, model, _ = _history(tmp_path)
    monkeypatch.setattr(history, "MAX_BYTES", 2 * snapshot_bytes(model) + 1)
    h, _, logged = _history(tmp_path)
    assert sorted(h.plan) == [1, 8]  # of 1, 2, 4, 8: evenly spread, the last kept
    assert logged and "keeping 2 of 4" in logged[0]


def test_save_list_load_round_trip(tmp_path):
    h, model, _ = _history(tmp_path)
    h.save(1)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    h.save(2)
    assert list_snapshots(tmp_path) == [1, 2]
    load_snapshot(tmp_path, 1, model)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())


def test_kill_mid_snapshot_leaves_earlier_snapshots_loadable(tmp_path):
    h, model, _ = _history(tmp_path)
    h.save(1)
    h.save(2)
    folder = tmp_path / HISTORY_DIR
    # Killed while staging step 4 (a temp file of a dead process) ...
    (folder / ".step-4.safetensors.tmp-999999999").write_bytes(b"\x00" * 10)
    # ... and killed after renaming step 8 into place but before the index names it.
    (folder / "step-8.safetensors").write_bytes((folder / "step-2.safetensors").read_bytes()[:50])
    assert list_snapshots(tmp_path) == [1, 2]
    load_snapshot(tmp_path, 1, model)
    load_snapshot(tmp_path, 2, model)
    with pytest.raises(RunError, match=r"^no snapshot at step 8; nearest: 2$"):
        load_snapshot(tmp_path, 8, model)
    h.save(4)  # the next save clears the dead process's temp file
    assert not (folder / ".step-4.safetensors.tmp-999999999").exists()
    assert list_snapshots(tmp_path) == [1, 2, 4]


class _Trap:
    """Unpickling this writes a file: proof that a loader ran pickle."""

    def __reduce__(self):  # noqa: D105
        return (Path.write_text, (Path(os.environ["TRAP_FILE"]), "unpickled"))


def test_a_pickle_in_history_is_refused_unopened(tmp_path, monkeypatch):
    h, model, _ = _history(tmp_path)
    h.save(1)
    trap = tmp_path / "trap"
    monkeypatch.setenv("TRAP_FILE", str(trap))
    folder = tmp_path / HISTORY_DIR
    path = folder / "step-1.safetensors"
    path.write_bytes(pickle.dumps({"w": _Trap()}))
    torch.save({"w": torch.zeros(2)}, folder / "step-2.pt")  # never listed
    # Even with the index rewritten to match the pickle's size and checksum:
    import hashlib

    index = json.loads((folder / INDEX_FILE).read_text())
    index["snapshots"][0].update(bytes=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    (folder / INDEX_FILE).write_text(json.dumps(index))
    with pytest.raises(RunError, match="safetensors"):
        load_snapshot(tmp_path, 1, model)
    assert not trap.exists()
    assert list_snapshots(tmp_path) == [1]


def test_a_corrupted_snapshot_is_refused(tmp_path):
    h, model, _ = _history(tmp_path)
    h.save(1)
    path = tmp_path / HISTORY_DIR / "step-1.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(RunError, match="corrupted"):
        load_snapshot(tmp_path, 1, model)


def test_training_keeps_the_planned_snapshots(tmp_path):
    cfg = tiny_config(train={"steps": 8, "eval_every": 3, "eval_examples": 8})
    TrainingRun(cfg, tmp_path / "on").run()
    assert list_snapshots(tmp_path / "on") == [1, 2, 3, 4, 6, 8]
    TrainingRun(cfg.with_values({"train.history": False}), tmp_path / "off").run()
    assert not (tmp_path / "off" / HISTORY_DIR).exists()


@pytest.mark.parametrize("index", [
    "{not json", "[1, 2]", '{"snapshots": 7}',
    '{"snapshots": [{"step": "one", "file": "step-1.safetensors"}, {"step": 2, "file": "../x"}]}',
    '{"snapshots": [{"step": 1, "file": "step-1.safetensors", "bytes": "lots", "sha256": 5}]}',
])
def test_a_broken_index_lists_nothing_loads_nothing_and_training_writes_a_new_one(tmp_path, index):
    cfg = tiny_config(train={"steps": 4, "eval_every": 4, "eval_examples": 8})
    run = tmp_path / "run"
    TrainingRun(cfg, run).run()
    assert list_snapshots(run) == [1, 2, 4]
    (run / HISTORY_DIR / INDEX_FILE).write_text(index)
    model = build_model(cfg.model, len(make_task(cfg.task).vocab))
    assert list_snapshots(run) == []  # a record it cannot read is no snapshot
    with pytest.raises(RunError) as info:
        load_snapshot(run, 2, model)
    assert "\n" not in str(info.value)
    # Training on keeps history going: the index is whole again and lists what it wrote.
    TrainingRun(cfg.with_values({"train.steps": 8}), run, resume=True).run()
    assert list_snapshots(run) == [8]
    load_snapshot(run, 8, model)


def test_a_snapshot_of_another_architecture_is_refused_naming_the_file(tmp_path):
    import hashlib

    cfg = tiny_config(train={"steps": 2, "eval_every": 2, "eval_examples": 8})
    run, other = tmp_path / "run", tmp_path / "other"
    TrainingRun(cfg, run).run()
    TrainingRun(cfg.with_values({"model.arch": "decoder-only", "model.n_encoder_layers": 0}), other).run()
    # The other model's snapshot in this run's history, with a record that matches its bytes.
    path = run / HISTORY_DIR / "step-2.safetensors"
    path.write_bytes((other / HISTORY_DIR / "step-2.safetensors").read_bytes())
    index = json.loads((run / HISTORY_DIR / INDEX_FILE).read_text())
    for record in index["snapshots"]:
        if record["step"] == 2:
            record.update(bytes=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    (run / HISTORY_DIR / INDEX_FILE).write_text(json.dumps(index))
    model = build_model(cfg.model, len(make_task(cfg.task).vocab))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(RunError) as info:
        load_snapshot(run, 2, model)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())  # untouched
    load_snapshot(run, 1, model)  # the run's own snapshots still load


def test_resuming_keeps_the_earlier_snapshots_and_adds_the_new_ones_in_order(tmp_path):
    cfg = tiny_config(train={"steps": 4, "eval_every": 3, "eval_examples": 8})
    run = tmp_path / "run"
    TrainingRun(cfg, run).run()
    first = list_snapshots(run)
    assert first == [1, 2, 3, 4]
    kept = {s: (run / HISTORY_DIR / f"step-{s}.safetensors").read_bytes() for s in first}
    TrainingRun(cfg.with_values({"train.steps": 9}), run, resume=True).run()
    index = json.loads((run / HISTORY_DIR / INDEX_FILE).read_text())["snapshots"]
    steps = [r["step"] for r in index]
    assert steps == [1, 2, 3, 4, 6, 8, 9]  # the earlier ones first, then the resumed run's plan
    assert list_snapshots(run) == steps
    for s, data in kept.items():  # the earlier files are the same bytes
        assert (run / HISTORY_DIR / f"step-{s}.safetensors").read_bytes() == data
    model = build_model(cfg.model, len(make_task(cfg.task).vocab))
    for s in steps:
        load_snapshot(run, s, model)
