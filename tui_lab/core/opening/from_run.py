"""A saved run's model, ready to evaluate or decode: config and weights, nothing else.

``eval`` and ``decode`` need neither the optimizer nor data-parallel set-up
nor a training loop, so they do not build a ``TrainingRun``; and a missing or
damaged ``optimizer.pt`` stops ``train --resume`` but not them.
"""

from __future__ import annotations

from tui_lab.core.model.device import choose_device, set_threads
from tui_lab.core.model.models import build_run_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.opening.run_source import run_task
from tui_lab.core.runs.checkpoint import load_weights
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.run_files import RunDir
from tui_lab.core.runs.snapshots import load_snapshot


def load_for_inference(run: RunDir | RunFolder, device: str = "cpu", at_step: int | None = None) -> ModelInHand:
    """Build the run's model on ``device`` and load its weights; RunError if it cannot.
    ``open_model``'s step for a run folder.

    ``at_step``: the weights of the run's history snapshot at that step instead
    of its last checkpoint (a step without one: RunError naming the nearest).
    """
    folder = run if isinstance(run, RunFolder) else RunFolder.read(run)
    config = folder.preset_config
    task = run_task(folder)  # token-lm: through the run's copy of its model's tokenizer
    where = choose_device(device)
    model = build_run_model(config, len(task.vocab), where)
    if where.type == "cpu":
        set_threads(config.train.threads, sum(p.numel() for p in model.parameters()))
    if at_step is not None:
        load_snapshot(folder.path, at_step, model)
        return ModelInHand(config, task, model, at_step, where, [], run_dir=folder.path)
    notes = load_weights(folder, model)
    return ModelInHand(config, task, model, folder.step, where, notes, run_dir=folder.path)
