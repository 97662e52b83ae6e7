"""A weights file that is not what a save writes: one RunError line naming it, never a hang."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.core.runs.test_checkpoint import Tied, saved_run
from tui_lab.core.runs.checkpoint import load_weights
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.safetensors_check import MAX_HEADER_BYTES, read_safetensors_header


def refusal(load: Callable[[], object], fifo: Path | None = None) -> str:
    """The one-line RunError ``load()`` raises; fails (instead of hanging) if it blocks."""
    outcome: dict[str, BaseException | str] = {}

    def attempt() -> None:
        try:
            load()
            outcome["result"] = "loaded"
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["result"] = exc

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(30)  # a hang guard: refusing takes a moment
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the blocked reader go
        worker.join(5)
        pytest.fail(f"reading {fifo.name} blocked on the FIFO")
    result = outcome.get("result")
    assert isinstance(result, RunError), result
    message = str(result)
    assert "\n" not in message
    return message


def _weights(tmp_path: Path) -> tuple[Path, Path]:
    run, *_ = saved_run(tmp_path)
    return run, run / "model.safetensors"


def test_bytes_after_the_last_tensor_are_refused(tmp_path: Path) -> None:
    run, path = _weights(tmp_path)
    with open(path, "ab") as f:
        f.write(b"\0" * 7)
    message = refusal(lambda: load_weights(run, Tied()))
    assert str(path) in message and "7 unexpected trailing bytes" in message


def test_a_header_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    _, path = _weights(tmp_path)
    data = path.read_bytes()
    # The length field claims one byte more than the limit; the file itself stays small.
    path.write_bytes((MAX_HEADER_BYTES + 1).to_bytes(8, "little") + data[8:])
    message = refusal(lambda: read_safetensors_header(path))
    assert str(path) in message and "not a safetensors file" in message


def test_a_fifo_in_place_of_the_weights_is_refused_without_blocking(tmp_path: Path) -> None:
    run, path = _weights(tmp_path)
    path.unlink()
    os.mkfifo(path)
    message = refusal(lambda: load_weights(run, Tied()), fifo=path)
    assert str(path) in message and "not a regular file" in message
    assert "missing" not in message  # it is there, just not a file


def test_a_fifo_in_history_is_not_a_snapshot_and_never_blocks(tmp_path: Path) -> None:
    from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot

    run, _ = _weights(tmp_path)
    (run / "history").mkdir()
    fifo = run / "history" / "step-3.safetensors"
    os.mkfifo(fifo)
    (run / "history" / "index.json").write_text(json.dumps(
        {"format": 1, "snapshots": [{"step": 3, "file": fifo.name, "bytes": 10, "sha256": "00"}]}))
    refusal(lambda: load_snapshot(run, 3, Tied()), fifo=fifo)
    assert list_snapshots(run) == []  # listed only where a file is


@pytest.mark.parametrize("target", ["valid weights elsewhere", "itself", "nothing"])
def test_a_symlink_in_place_of_the_weights_is_refused(tmp_path: Path, target: str) -> None:
    run, path = _weights(tmp_path)
    elsewhere = tmp_path / "elsewhere.safetensors"
    path.rename(elsewhere)
    path.symlink_to({"valid weights elsewhere": elsewhere, "itself": path,
                     "nothing": tmp_path / "gone.safetensors"}[target])
    message = refusal(lambda: load_weights(run, Tied()))
    assert str(path) in message and "symlink" in message
