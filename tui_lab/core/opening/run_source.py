"""Where a fine-tuned run's model came from, and the tokenizer it keeps to reopen without it.

A run trained from a real model (``training/finetune.py``) holds, beside the
lab's own checkpoint files:

    source.json   the model it started from: the name typed, the folder read,
                  its cache revision and commit, its family
    tokenizer/    a copy of the source's small tokenizer files (tokenizer.json
                  or vocab.json + merges.txt, tokenizer_config.json,
                  special_tokens_map.json, generation_config.json, config.json
                  for its special-token ids)

so ``--run``, ``decode --run``, ``heads --run`` and ``ablate --run`` read the
run alone: the weights are the run's own safetensors, never the source's.
``run_task`` is the task of any run folder (token-lm's through this tokenizer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.pretrained.hf_files import TOKENIZER_FILES
from tui_lab.core.runs.atomic import atomic_write_bytes, atomic_write_text
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.run_files import RunDir, RunError, reason
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.base import TaskBase

if TYPE_CHECKING:
    from tui_lab.core.opening.model_card import ModelCard

SOURCE_FILE = "source.json"
TOKENIZER_DIR = "tokenizer"


def keep_source(run_dir: RunDir, card: ModelCard) -> list[str]:
    """Write ``source.json`` and copy the tokenizer files of the model ``card`` describes
    into the run folder; returns the files copied. RunError (one line) if it cannot."""
    run = Path(run_dir)
    tokenizer_dir = run / TOKENIZER_DIR
    folder = Path(card.folder)
    copied: list[str] = []
    try:
        tokenizer_dir.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            path = folder / name
            if path.is_file():
                atomic_write_bytes(tokenizer_dir / name, path.read_bytes())
                copied.append(name)
        record = {
            "name": card.name,
            "family": card.family,
            "origin": card.origin,
            "folder": str(folder),
            "revision": card.revision,
            "commit": card.commit,
            "tokenizer_files": copied,
        }
        atomic_write_text(run / SOURCE_FILE, json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        raise RunError(f"{run}: cannot keep the source model's tokenizer ({reason(exc)})") from None
    return copied


def run_task(folder: RunFolder) -> TaskBase:
    """The task of a run folder: token-lm's through the run's own copy of the tokenizer."""
    config = folder.config
    if config.task.name != "token-lm":
        return make_task(config.task)
    from tui_lab.core.pretrained.tokenizer import load_tokenizer

    tokenizer_dir = folder.path / TOKENIZER_DIR
    if not tokenizer_dir.is_dir():
        raise RunError(
            f"{folder.path}: a token-lm run without its {TOKENIZER_DIR}/ folder; "
            f"the run folder is damaged (train it again with --model)"
        )
    return make_task(config.task, load_tokenizer(tokenizer_dir), config.model.max_len)
