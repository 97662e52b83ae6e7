"""The run folder: round trips, atomic saves under failure, and refusing unsafe files.

The model here is a small module of its own (an embedding tied to the output
head) so these tests do not depend on models.py.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.errors import LabError
from tui_lab.core.runs.atomic import atomic_write_bytes, atomic_write_text
from tui_lab.core.runs.checkpoint import load_optimizer, load_weights, save_checkpoint
from tui_lab.core.runs.folder import init_run, load_run, new_run_dir
from tui_lab.core.runs.log import append_metrics, log, read_metrics
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.training.schedule import make_optimizer, set_lr

CONFIG = from_dict(
    {"description": "checkpoint test", "train": {"steps": 50, "warmup_steps": 5}},
    source="<test>",
    name="test",
)


class Tied(nn.Module):
    """Embedding -> LayerNorm -> Linear -> head, the head sharing the embedding's weight."""

    def __init__(self, vocab: int = 11, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.proj(self.norm(self.embed(x)))))


def trained(seed: int = 0, steps: int = 3, **kw: int) -> tuple[Tied, torch.optim.AdamW]:
    """A Tied model with a few AdamW updates behind it (so the optimizer has state)."""
    torch.manual_seed(seed)
    model = Tied(**kw)
    opt = make_optimizer(model, CONFIG.train)
    x = torch.tensor([[1, 2, 3, 4]])
    for step in range(1, steps + 1):
        set_lr(opt, step, CONFIG.train)
        opt.zero_grad()
        model(x).logsumexp(-1).sum().backward()
        opt.step()
    return model, opt


def saved_run(tmp_path: Path, step: int = 3) -> tuple[Path, Tied, torch.optim.AdamW]:
    run = tmp_path / "run"
    model, opt = trained(steps=step)
    init_run(run, CONFIG)
    save_checkpoint(run, model, opt, {"step": step, "best_accuracy": 0.5}, CONFIG)
    return run, model, opt


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


class Payload:
    """Unpickling this runs ``exec`` and creates ``marker``: what a hostile file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (f"open({self.marker!r}, 'w').close()",))


# --------------------------------------------------------------------------- round trip


def test_round_trip_restores_weights_tied_and_optimizer(tmp_path: Path) -> None:
    run, model, opt = saved_run(tmp_path)
    assert sorted(os.listdir(run)) == [
        "config.yaml",
        "model.safetensors",
        "optimizer.pt",
        "state.json",
    ]

    loaded = load_run(run)
    assert loaded.path == run
    assert loaded.config.to_dict() == CONFIG.to_dict()
    assert loaded.config.source == str(run / "config.yaml")
    assert loaded.state["step"] == 3 and loaded.state["best_accuracy"] == 0.5
    files = loaded.state["checkpoint"]["files"]
    assert files["model.safetensors"]["bytes"] == (run / "model.safetensors").stat().st_size

    torch.manual_seed(123)
    fresh = Tied()
    fresh_opt = make_optimizer(fresh, loaded.config.train)
    assert load_weights(run, fresh) == []
    assert load_optimizer(run, fresh_opt) == []
    for (name, a), (_, b) in zip(
        model.state_dict().items(), fresh.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert fresh.head.weight is fresh.embed.weight  # still one tensor after loading

    # Both copies take the same next update: moments and step counts came back.
    x = torch.tensor([[4, 3, 2, 1]])
    for m, o in ((model, opt), (fresh, fresh_opt)):
        set_lr(o, 4, CONFIG.train)
        o.zero_grad()
        m(x).logsumexp(-1).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)


def test_resave_overwrites_and_leaves_no_temp_files(tmp_path: Path) -> None:
    run, model, opt = saved_run(tmp_path)
    with torch.no_grad():
        model.proj.weight.add_(1.0)
    save_checkpoint(run, model, opt, {"step": 4}, CONFIG)
    assert temps(run) == []
    fresh = Tied()
    load_weights(run, fresh)
    assert torch.equal(fresh.proj.weight, model.proj.weight)
    assert load_run(run).state["step"] == 4


def test_new_run_dir_makes_distinct_folders(tmp_path: Path) -> None:
    a = new_run_dir(tmp_path / "runs", "copy")
    b = new_run_dir(tmp_path / "runs", "copy")
    assert a != b and a.is_dir() and b.is_dir() and a.name.startswith("copy-")


def test_new_run_dir_defaults_to_tfx_lab_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_RUNS", str(tmp_path / "elsewhere"))
    a = new_run_dir(None, "copy")
    b = new_run_dir(None, "copy")  # the same second: a suffix, never the same folder
    assert a.parent == b.parent == tmp_path / "elsewhere" and a != b


def test_errors_are_lab_errors_and_value_errors(tmp_path: Path) -> None:
    with pytest.raises(RunError) as info:
        load_run(tmp_path / "nope")
    assert isinstance(info.value, LabError) and isinstance(info.value, ValueError)


# --------------------------------------------------------------------------- atomic writes


def test_atomic_write_keeps_the_old_file_when_replace_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")

    def fail(src: object, dst: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(RunError, match=r"cannot save .*state\.json: Read-only file system"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert temps(tmp_path) == []


def test_atomic_write_keeps_the_old_file_when_the_disk_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "blob.bin"
    atomic_write_bytes(target, b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RunError, match="No space left on device") as info:
        atomic_write_bytes(target, b"new" * 1000)
    assert "\n" not in str(info.value)
    assert target.read_bytes() == b"old"
    assert temps(tmp_path) == []


def test_failed_checkpoint_leaves_the_previous_one_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, model, opt = saved_run(tmp_path)
    before = snapshot(run)
    real_fsync = os.fsync
    calls = {"n": 0}

    def full_on_second(fd: int) -> None:  # weights staged fine, optimizer.pt hits a full disk
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_on_second)
    with torch.no_grad():
        model.proj.weight.add_(1.0)
    with pytest.raises(RunError, match=r"cannot save .*optimizer\.pt: No space left"):
        save_checkpoint(run, model, opt, {"step": 4}, CONFIG)
    assert snapshot(run) == before
    assert temps(run) == []


def test_save_cut_between_renames_still_loads_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after model.safetensors was replaced but before state.json: weights newer."""
    run, model, opt = saved_run(tmp_path)
    real_replace = os.replace

    def replace_weights_only(src: object, dst: object) -> None:
        if str(dst).endswith("model.safetensors"):
            real_replace(src, dst)
        else:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", replace_weights_only)
    with torch.no_grad():
        model.proj.weight.add_(1.0)
    with pytest.raises(RunError):
        save_checkpoint(run, model, opt, {"step": 4}, CONFIG)
    monkeypatch.undo()

    assert load_run(run).state["step"] == 3
    fresh = Tied()
    notes = load_weights(run, fresh)
    assert len(notes) == 1 and "interrupted" in notes[0]
    assert torch.equal(fresh.proj.weight, model.proj.weight)  # the complete newer weights
    assert load_optimizer(run, make_optimizer(fresh, CONFIG.train)) == []


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    run, model, opt = saved_run(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = run / f".model.safetensors.tmp-{dead.stdout.strip()}"
    stale.write_bytes(b"half")
    mine = run / f".other.tmp-{os.getpid()}"
    mine.write_bytes(b"mine")
    save_checkpoint(run, model, opt, {"step": 3}, CONFIG)
    assert not stale.exists() and mine.exists()


# --------------------------------------------------------------------------- refusing bad files


def test_payload_really_would_run_if_unpickled(tmp_path: Path) -> None:
    """Control: the hostile file used below is live, so its marker staying absent means something."""
    marker = tmp_path / "control-marker"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


def test_pickle_in_place_of_weights_is_refused_and_never_run(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    marker = tmp_path / "pwned"
    (run / "model.safetensors").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(RunError, match="model.safetensors is not a safetensors file; refusing"):
        load_weights(run, Tied())
    torch.save(Payload(marker), run / "model.safetensors")  # torch's zip format too
    with pytest.raises(RunError, match="not a safetensors file"):
        load_weights(run, Tied())
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_pickle_in_place_of_optimizer_is_refused_and_never_run(tmp_path: Path, kind: str) -> None:
    run, model, *_ = saved_run(tmp_path)
    marker = tmp_path / "pwned"
    path = run / "optimizer.pt"
    if kind == "pickle":
        path.write_bytes(pickle.dumps(Payload(marker)))
    else:
        torch.save({"optimizer": Payload(marker)}, path)
    with pytest.raises(RunError, match="refusing to unpickle it") as info:
        load_optimizer(run, make_optimizer(model, CONFIG.train))
    assert "\n" not in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("keep", [0, 4, 20, 0.5, -1])
def test_truncated_weights_are_refused(tmp_path: Path, keep: float) -> None:
    run, *_ = saved_run(tmp_path)
    path = run / "model.safetensors"
    data = path.read_bytes()
    cut = (
        int(len(data) * keep)
        if isinstance(keep, float)
        else (len(data) - 1 if keep == -1 else keep)
    )
    path.write_bytes(data[:cut])
    with pytest.raises(RunError, match="model.safetensors") as info:
        load_weights(run, Tied())
    message = str(info.value)
    assert "\n" not in message
    assert any(word in message for word in ("truncated", "empty", "not a safetensors"))


def test_corrupted_weights_are_refused(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    path = run / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # a flipped byte in the tensor data: the header is still fine
    path.write_bytes(bytes(data))
    with pytest.raises(RunError, match="corrupted"):
        load_weights(run, Tied())


def test_truncated_optimizer_is_refused(tmp_path: Path) -> None:
    run, model, *_ = saved_run(tmp_path)
    path = run / "optimizer.pt"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(RunError, match="optimizer.pt"):
        load_optimizer(run, make_optimizer(model, CONFIG.train))


def test_missing_folder_config_state_and_weights(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no such run folder"):
        load_run(tmp_path / "missing")
    with pytest.raises(RunError, match="no such run folder"):
        load_weights(tmp_path / "missing", Tied())
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunError, match="not a run folder"):
        load_run(tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunError, match=r"no config\.yaml"):
        load_run(empty)
    with pytest.raises(RunError, match=r"no config\.yaml"):
        load_weights(empty, Tied())
    init_run(empty, CONFIG)
    with pytest.raises(RunError, match=r"no finished checkpoint yet \(state\.json missing\)"):
        load_run(empty)
    with pytest.raises(RunError, match=r"model\.safetensors: missing"):
        load_weights(empty, Tied())
    with pytest.raises(RunError, match=r"optimizer\.pt: missing"):
        load_optimizer(empty, make_optimizer(Tied(), CONFIG.train))


def test_damaged_config_and_state_are_refused(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    (run / "state.json").write_text('{"step": 3,')
    with pytest.raises(RunError, match=r"state\.json: not valid JSON"):
        load_run(run)
    (run / "config.yaml").write_text("model:\n  d_modle: 64\n")
    with pytest.raises(RunError, match=r"config\.yaml: model\.d_modle: unknown setting"):
        load_run(run)
    (run / "config.yaml").write_text("model: [\n")
    with pytest.raises(RunError, match="not valid YAML"):
        load_run(run)


def test_weights_that_do_not_match_the_model_name_the_parameter(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    with pytest.raises(RunError) as info:
        load_weights(run, Tied(vocab=13))
    assert str(info.value).endswith(
        "weights do not match config.yaml (embed.weight: [11, 8] saved vs [13, 8] built)"
    )

    class Untied(Tied):
        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(8, 11, bias=False)

    with pytest.raises(RunError, match=r"the model has head\.weight, the file does not"):
        load_weights(run, Untied())

    class Smaller(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(11, 8)

    with pytest.raises(RunError, match=r"the file has norm\.bias, the model does not"):
        load_weights(run, Smaller())


def test_optimizer_from_another_model_is_refused(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    other = Tied(vocab=13)
    with pytest.raises(RunError, match="different models"):
        load_optimizer(run, make_optimizer(other, CONFIG.train))


# --------------------------------------------------------------------------- metrics and log


def test_metrics_reader_tolerates_a_half_written_last_line(tmp_path: Path) -> None:
    append_metrics(tmp_path, {"step": 1, "loss": 2.5})
    append_metrics(tmp_path, {"step": 2, "loss": float("nan")})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "lo')  # the process died mid-write
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2]
    # The next append starts a fresh line instead of gluing onto the broken one.
    append_metrics(tmp_path, {"step": 4})
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 4]
    assert read_metrics(tmp_path / "nothing-here") == []


def test_log_lines_are_timestamped_one_per_message(tmp_path: Path) -> None:
    log(tmp_path, "started")
    log(tmp_path, "two\nlines")
    lines = (tmp_path / "log.txt").read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(" started") and lines[1].endswith(" two lines")
    assert lines[0][:4].isdigit() and "T" in lines[0].split(" ")[0]


# --------------------------------------------------------------------------- kill during save

CHILD = textwrap.dedent(
    """
    import importlib.util, os, sys
    import torch
    torch.set_num_threads(1)  # before any op, so forking below is safe
    spec = importlib.util.spec_from_file_location("ckpt_tests", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from tui_lab.core.runs.checkpoint import load_optimizer, load_weights, save_checkpoint
    from tui_lab.core.training.schedule import make_optimizer
    run = sys.argv[2]
    # Resume the test's checkpoint (optimizer state included) without taking an
    # optimizer step here: the first step imports torch._dynamo, seconds of startup.
    model = mod.Tied()
    opt = make_optimizer(model, mod.CONFIG.train)
    load_weights(run, model)
    load_optimizer(run, opt)
    assert opt.state, "the optimizer state should have come back"
    step = 0
    for line in sys.stdin:  # one writer per line; the test SIGKILLs it
        if line.strip() != "go":
            break
        pid = os.fork()
        if pid == 0:
            try:
                first = True
                while True:
                    step += 1
                    with torch.no_grad():
                        for p in model.parameters():
                            p.fill_(float(step))
                    save_checkpoint(run, model, opt, {"step": step}, mod.CONFIG)
                    if first:
                        print("ready", os.getpid(), step, flush=True)
                        first = False
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        # Later writers continue numbering past anything the killed one saved.
        step += 100000
        print("reaped", flush=True)
    os._exit(0)  # skip interpreter teardown (seconds with torch loaded)
    """
)


def test_folder_still_loads_after_sigkill_during_saves(tmp_path: Path) -> None:
    run, *_ = saved_run(tmp_path)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    errors = tmp_path / "child.err"
    rng = random.Random(1234)
    with open(errors, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(script), __file__, str(run)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdin is not None and proc.stdout is not None
    seen_steps = []
    try:
        for _ in range(5):
            proc.stdin.write("go\n")
            proc.stdin.flush()
            ready = proc.stdout.readline().split()
            assert ready and ready[0] == "ready", errors.read_text()
            writer = int(ready[1])
            # Let it save a few (or a few dozen) times, then kill it mid-whatever.
            time.sleep(rng.uniform(0.01, 0.15))
            os.kill(writer, signal.SIGKILL)
            assert proc.stdout.readline().strip() == "reaped"

            loaded = load_run(run)
            step = loaded.state["step"]
            fresh = Tied()
            notes = load_weights(run, fresh)
            values = {float(v) for p in fresh.parameters() for v in p.detach().flatten()}
            assert len(values) == 1  # every tensor from one and the same save
            (value,) = values
            # Weights are the checkpoint state.json names, or (cut between renames) the next.
            assert value in (step, step + 1)
            assert (value != step) == bool(notes)
            assert fresh.head.weight is fresh.embed.weight
            load_optimizer(run, make_optimizer(fresh, CONFIG.train))
            seen_steps.append(step)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert len(set(seen_steps)) == len(seen_steps)  # every round saved something new
    assert len(temps(run)) <= 3  # at most the last killed writer's leftovers
    json.loads((run / "state.json").read_text())


def test_resume_keeps_progress_but_takes_hyperparameters_from_the_config(tmp_path: Path) -> None:
    """Edited train.lr/betas apply on resume; moments and step counts come from the file."""
    run, _model, opt = saved_run(tmp_path)
    edited = CONFIG.with_values({"train.lr": 0.5, "train.betas": [0.5, 0.6]})
    fresh = Tied()
    load_weights(run, fresh)
    fresh_opt = make_optimizer(fresh, edited.train)
    load_optimizer(run, fresh_opt)
    for group in fresh_opt.param_groups:
        assert group["lr"] == 0.5 and group["betas"] == (0.5, 0.6)
    saved_state = opt.state_dict()["state"]
    for i, state in fresh_opt.state_dict()["state"].items():
        assert torch.equal(state["exp_avg"], saved_state[i]["exp_avg"])
        assert torch.equal(state["step"], saved_state[i]["step"])


def test_optimizer_files_with_a_scheduler_entry_still_load(tmp_path: Path) -> None:
    """optimizer.pt as saved before the schedule was set per step: AdamW + LambdaLR state."""
    run, _model, opt = saved_run(tmp_path)
    old_opt = make_optimizer(Tied(), CONFIG.train)
    old_opt.load_state_dict(opt.state_dict())
    scheduler = torch.optim.lr_scheduler.LambdaLR(old_opt, lambda epoch: 1.0)  # adds "initial_lr"
    state = json.loads((run / "state.json").read_text())
    save_id = state["checkpoint"]["save"]
    path = run / "optimizer.pt"
    torch.save({"format": 1, "tfx_lab_save": save_id, "optimizer": old_opt.state_dict(),
                "scheduler": scheduler.state_dict()}, path)
    state["checkpoint"]["files"]["optimizer.pt"] = {
        "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    (run / "state.json").write_text(json.dumps(state))

    fresh_opt = make_optimizer(Tied(), CONFIG.train)
    assert load_optimizer(run, fresh_opt) == []
    assert all("initial_lr" not in group for group in fresh_opt.param_groups)
    saved_state = opt.state_dict()["state"]
    for i, moments in fresh_opt.state_dict()["state"].items():
        assert torch.equal(moments["exp_avg_sq"], saved_state[i]["exp_avg_sq"])
