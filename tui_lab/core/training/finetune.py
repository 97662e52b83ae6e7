"""Fine-tuning a real model on a text: a ``TrainingRun`` that starts from its weights.

``open_finetune`` opens the model (``decoding/opened.py``: its ModelConfig,
tokenizer and weights), makes the token-lm task on the text through that
tokenizer, and returns an ordinary ``TrainingRun`` around them: the same
optimizer, schedule, clipping, evaluation, checkpoints and history as any
run, plus one evaluation at step 0 (the source model's own loss on the text). Its run folder's ``config.yaml`` holds the model's whole ModelConfig and
the task; ``source.json`` and ``tokenizer/`` (``decoding/run_source.py``) let
it reopen, and resume, without the source. The weights are copied once out
of the source's memory-mapped files before training, so the optimizer never
writes into pages of them, and are saved as the run's own safetensors.

On a CPU this is for small models (TinyStories-1M, pythia-14m): the memory
check refuses a model whose training state would not fit, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tui_lab.core.config.lab_config import (
    LabConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    check_fits_in_memory,
)
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.opening.model_in_hand import ModelInHand
from tui_lab.core.opening.run_source import keep_source
from tui_lab.core.runs.atomic import atomic_write_text
from tui_lab.core.runs.events import Event
from tui_lab.core.runs.run_files import CONFIG_FILE
from tui_lab.core.tasks.token_lm import TokenLMTask
from tui_lab.core.tasks.tokenized import TokenizedText
from tui_lab.core.tasks.translation import Translation
from tui_lab.core.training.train import TrainingRun

# Windows of this many tokens (or the model's context, if shorter): long enough for
# a sentence's context, short enough for a CPU step to take a fraction of a second.
FINETUNE_BLOCK = 128
# What a fine-tuning run changes from the lab's training defaults: a gentler rate
# (the weights already mean something), a short warmup, small batches of long windows.
FINETUNE_TRAIN: dict[str, Any] = {  # TrainConfig's keyword arguments, which it checks
    "steps": 1000,
    "batch_size": 8,
    "lr": 3e-4,
    "warmup_steps": 20,
    "schedule": "cosine",
    "betas": (0.9, 0.95),
    "eps": 1e-8,
    "eval_every": 50,
    "checkpoint_seconds": 30.0,
}


class FineTuneRun(TrainingRun):
    """A ``TrainingRun`` whose curve starts with the source model's own validation loss."""

    def _prepare_folder(self) -> None:
        super()._prepare_folder()
        if self.step == 0 and self.dist.is_main:
            # Step 0 is the model as it was trained elsewhere: what fine-tuning improves on.
            self.evaluate()


def run_name(source: str) -> str:
    """A run folder's name for a model: the last part of its name or folder, then -finetune."""
    tail = Path(source.rstrip("/\\")).name or "model"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail) + "-finetune"


def finetune_refusal(config: LabConfig) -> str | None:
    """One line when the opened model of ``config`` cannot be fine-tuned here, else None.

    Fine-tuning trains next-token prediction (token-lm) on a text; an encoder-only
    model (BERT, DistilBERT, RoBERTa) reads both ways and predicts masked tokens,
    so it would learn nothing it could use (the lab's masked-lm runs train its own).
    """
    if config.model.shape is Shape.ENCODER_ONLY:
        return (
            f"cannot fine-tune {config.name}: an encoder-only (masked-LM) model; fine-tuning "
            "trains next-token prediction (token-lm), which needs a decoder-only model"
        )
    return None


def _refuse_model_changes(model: ModelConfig, values: dict[str, object]) -> None:
    """One line for a ``model.*`` setting asked of a model opened from files: its weights
    fix its architecture (a q/k norm, an untied head need weights it does not have; a
    zero init or another activation would discard or misread the ones it has)."""
    for key, value in values.items():
        if not key.startswith("model.") or getattr(model, key[len("model."):], value) == value:
            continue
        if key == "model.qk_norm" and model.qk_norm == "none":
            raise LabError("model.qk_norm: this model was trained without q/k norms; its files have none to load")
        raise LabError(f"{key}: a model opened from files keeps the architecture its weights were trained with")


def finetune_config(
    loaded: ModelInHand, text: str | None, block: int | None = None, overrides: dict[str, object] | None = None
) -> LabConfig:
    """The run's config: the opened model's ModelConfig, token-lm on ``text``, fine-tuning defaults.

    ``overrides`` are dotted settings (``{"train.steps": 50}``); a time limit
    without a step count makes the schedule decay over the time instead.
    """
    refusal = finetune_refusal(loaded.config)
    if refusal is not None:
        raise LabError(refusal)
    model = loaded.config.model
    context = model.max_len
    task = TaskConfig(
        name="token-lm",
        text=str(Path(text).expanduser().resolve()) if text else None,
        block_size=min(block or FINETUNE_BLOCK, context),
    )
    source = loaded.card.name if loaded.card is not None else loaded.config.name
    config = LabConfig(
        name=run_name(source),
        description=f"fine-tuned from {source}",
        model=model,
        task=task,
        train=TrainConfig(**FINETUNE_TRAIN),
    )
    values = dict(overrides or {})
    _refuse_model_changes(loaded.config.model, values)
    if "train.max_seconds" in values and "train.steps" not in values:
        values.setdefault("train.decay_over", "time")
    return config.with_values(values) if values else config


def open_finetune(
    source: str,
    text: str | None,
    out_dir: str | Path | None,
    *,
    overrides: dict[str, object] | None = None,
    block: int | None = None,
    revision: str | None = None,
    device: str | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> FineTuneRun:
    """A run that fine-tunes ``source`` on ``text`` into ``out_dir`` (None: no folder).

    Every refusal (an unknown model, a text too short for a window, a model
    too large for this machine) comes before anything is written.
    """
    loaded = open_files(source, "cpu", revision)
    config = finetune_config(loaded, text, block, overrides)
    check_fits_in_memory(config.model, len(loaded.task.vocab))
    if not isinstance(loaded.task, TokenizedText | Translation):  # every model from files reads one
        raise LabError(f"cannot fine-tune {source}: it has no tokenizer")
    task = TokenLMTask(config.task, loaded.task.tokenizer, config.model.max_len)
    _ = task.data  # tokenize now: a text too short for a window is refused before the folder
    model = loaded.model
    # The run's own copy of the weights: the source's are views of its files'
    # copy-on-write pages (and fused or transposed views among them), which
    # training would write into and safetensors could not save as they are.
    for p in {id(p): p for p in model.parameters()}.values():
        p.data = p.data.contiguous().clone()

    def factory(*args: object, **kwargs: object) -> torch.nn.Module:
        return model

    run = FineTuneRun(config, out_dir, on_event=on_event, device=device, task=task, model_factory=factory)
    if run.out_dir is not None and loaded.card is not None:  # rank 0 alone writes; files always have a card
        keep_source(run.out_dir, loaded.card)
        # config.yaml now, not at the first save: the lab's trainer process reports the
        # run ready before that, and the lab then reads the run's task from its folder.
        atomic_write_text(run.out_dir / CONFIG_FILE, config.to_yaml(full=True))
    return run
