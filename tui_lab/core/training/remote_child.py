"""The training process's side of ``RemoteRun`` (remote.py): build the run, obey commands.

Started as a fresh interpreter holding one end of a socket pair. It waits for a
run's spec (a config and folder, or a folder to resume), answers ``ready`` or
``failed``, then takes ``run``/``pause``/``resume``/``stop``/``weights``/``close``
and sends every event back. EOF on the socket (the lab died) means close: the
run stops and saves.
"""

from __future__ import annotations

import io
import os
import queue
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, TypedDict

from tui_lab.core.errors import one_line

if TYPE_CHECKING:
    from pathlib import Path

    from torch import nn

    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.runs.events import EvalEvent, Event, StepEvent
    from tui_lab.core.training.finetune import FineTuneRun
    from tui_lab.core.training.train import TrainingRun


class RunInfo(TypedDict):
    """What the training process tells the lab of its run, when ready and when finished."""

    config: LabConfig
    out_dir: Path | None
    device: str
    device_name: str
    step: int
    elapsed: float
    best_accuracy: float | None
    last_step: StepEvent | None
    last_eval: EvalEvent | None


def child_main(fd: int) -> None:
    """Entry point of the training process: wait for a run, then obey commands."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab decides when to stop
    from tui_lab.core.training import train  # noqa: F401 - the slow import (torch), done while the spare waits

    try:
        spec = conn.recv()
    except (EOFError, OSError):
        return
    lock = threading.Lock()

    def send(message: object) -> None:
        with lock:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the lab has gone: nothing to tell
                pass

    def on_event(event: Event) -> None:
        send(("event", event))

    try:
        run = _open(spec, on_event)
    except Exception as exc:  # noqa: BLE001 - told to the lab in one line
        send(("failed", one_line(exc)))
        return
    send(("ready", _info(run)))
    commands: queue.Queue[str] = queue.Queue()

    def listen() -> None:
        while True:
            try:
                kind = conn.recv()
            except (EOFError, OSError):  # the lab died or closed us: save and go
                kind = "close"
            if kind == "pause":
                run.pause()
            elif kind == "resume":
                run.resume()
            elif kind in ("stop", "close"):
                run.stop()
            elif kind == "weights":
                send(("weights", _state_bytes(run.model)))
            if kind in ("run", "close"):
                commands.put(kind)
            if kind == "close":
                return

    threading.Thread(target=listen, name="commands", daemon=True).start()
    while commands.get() == "run":
        summary = run.run()
        send(("finished", {**_info(run), "summary": summary}))
    # Every save is complete and synced by now; tearing torch down takes a second
    # that quitting the lab would wait for, so leave at once.
    conn.close()
    os._exit(0)


def _open(spec: dict[str, Any], on_event: Callable[[Event], None]) -> TrainingRun | FineTuneRun:
    """The run ``spec`` asks for: resumed from its folder, a real model fine-tuned on a
    text (``finetune.open_finetune``), or a new run of a config."""
    from tui_lab.core.training import train

    if spec["resume_dir"] is not None:
        return train.open_run(spec["resume_dir"], on_event=on_event)
    if spec.get("finetune") is not None:
        from tui_lab.core.training.finetune import open_finetune

        ft = spec["finetune"]
        return open_finetune(ft["source"], ft["text"], spec["out_dir"], overrides=ft.get("overrides"),
                             block=ft.get("block"), revision=ft.get("revision"), on_event=on_event)
    return train.TrainingRun(spec["config"], spec["out_dir"], on_event=on_event)


def _info(run: TrainingRun) -> RunInfo:
    return {
        "config": run.config,
        "out_dir": run.out_dir,
        "device": str(run.device),
        "device_name": run.device_name,
        "step": run.step,
        "elapsed": run.elapsed,
        "best_accuracy": run.best_accuracy,
        "last_step": run.last_step,
        "last_eval": run.last_eval,
    }


def _state_bytes(model: nn.Module) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buffer)
    return buffer.getvalue()
