"""``export_hf``: a lab run as a folder ``transformers`` opens with no custom code.

The folder holds ``config.json`` and ``model.safetensors`` of the family that
represents the run's model exactly (``export_choice.py``; the weights by
inverting that family's reader, ``export_weights.py``), the tokenizer
(``export_tokenizer.py``) and ``generation_config.json``. It is written into a
temporary folder beside ``out`` and renamed into place only once complete and
checked: the file is read back with the lab's own reader and its logits
compared with the run's model on one sequence, so a folder that exists is
whole and right. ``out`` must not exist yet (or be empty).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import save_file

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.export.export_choice import ExportError, choose_writer
from tui_lab.core.export.export_tokenizer import (
    copy_tokenizer,
    write_vocab_tokenizer,
)
from tui_lab.core.export.export_weights import adapt, invert

if TYPE_CHECKING:
    from tui_lab.core.tasks.vocab import Vocab
from tui_lab.core.model.models import DecoderOnly, build_run_model
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.writer import SpecialIds
from tui_lab.core.pretrained.files import open_tensors, read_config
from tui_lab.core.pretrained.hf_files import (
    CONFIG_FILE,
    GENERATION_CONFIG,
    SAFETENSORS_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
)
from tui_lab.core.pretrained.tokenizer import load_tokenizer
from tui_lab.core.runs.checkpoint import load_weights
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.run_files import RunDir
from tui_lab.core.runs.snapshots import load_snapshot
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import BOS, EOS, PAD

TOKEN_LM = "token-lm"  # a run fine-tuned from a real model: its vocabulary is that model's tokenizer
TOKENIZER_FOLDER = "tokenizer"  # where such a run keeps its model's tokenizer files (or its root)
CHECK_TOKENS = 16  # the self-check's sequence length (at most the context)
CHECK_TOLERANCE = 1e-4  # of the largest logit (at least 1): only rounding may differ
# Settings the written file must give back as the run has them; the others are
# absorbed by the export (embedding scale, tying, positions table, score scale,
# biases, key/value heads: export_weights.adapt).
SAME = (
    "d_model", "n_heads", "n_decoder_layers", "d_ff", "activation", "norm_kind", "norm_eps",
    "gated_ff", "parallel_residual", "max_len", "vocab_size",
)


@dataclass(frozen=True)
class ExportResult:
    """What ``export_hf`` wrote."""

    folder: Path
    family: str  # config.json's model_type
    step: int
    n_params: int  # the written model's (a head untied to carry the lab's embedding scale counts twice)
    files: list[str]
    max_logit_diff: float  # the self-check: read-back logits against the run's


def export_hf(run: RunDir, out: str | os.PathLike[str], at_step: int | None = None) -> ExportResult:
    """Write run ``run`` (its history snapshot ``at_step``) as a Hugging Face folder ``out``."""
    out = Path(out)
    _check_out(out)
    folder = RunFolder.read(run)
    config = folder.preset_config
    writer = choose_writer(config.model)  # a refusal before any weight is read
    model, vocab, tokenizer_dir = _run_model(folder, at_step)
    lab = replace(config.model, vocab_size=model.vocab_size)
    ids = _special_ids(tokenizer_dir)
    hf_config = writer.hf_config(lab, ids)
    target = writer.family.model_config(hf_config)
    _check_reads_back(lab, target, writer.family.model_type)
    tensors = invert(writer.family, writer.hf_layout(target), target, adapt(model, target))
    temp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        temp.mkdir(parents=True)
        save_file(tensors, str(temp / SAFETENSORS_FILE), metadata={"format": "pt"})
        _write_json(temp / CONFIG_FILE, hf_config)
        _write_json(temp / GENERATION_CONFIG, {**ids.config_keys(), "do_sample": False})
        if vocab is not None:
            files = write_vocab_tokenizer(vocab, temp, lab.max_len)
        else:  # the source model's own files, its generation_config.json included
            files = copy_tokenizer(tokenizer_dir or folder.path, temp)
            if tokenizer_dir is not None and (tokenizer_dir / GENERATION_CONFIG).is_file():
                shutil.copyfile(tokenizer_dir / GENERATION_CONFIG, temp / GENERATION_CONFIG)
        diff = _self_check(model, temp)
        if out.is_dir():
            out.rmdir()  # empty (checked above): replaced by the finished folder
        os.replace(temp, out)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    n_params = sum(t.numel() for t in tensors.values())
    written = [CONFIG_FILE, SAFETENSORS_FILE, GENERATION_CONFIG, *files]
    step = folder.step if at_step is None else at_step
    return ExportResult(out, writer.family.model_type, step, n_params, written, diff)


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out}: already exists; choose another --out or remove it")


def _run_model(folder: RunFolder, at_step: int | None) -> tuple[DecoderOnly, Vocab | None, Path | None]:
    """(the run's model in eval mode on the CPU, its lab vocabulary or None, its tokenizer folder or None)."""
    config = folder.preset_config
    vocab = tokenizer_dir = None
    if config.task.name == TOKEN_LM:
        tokenizer_dir = _tokenizer_folder(folder.path)
        size = config.model.vocab_size or 0
    else:
        vocab = make_task(config.task).vocab
        size = len(vocab)
    model = build_run_model(config, size, "cpu")
    if not isinstance(model, DecoderOnly):  # choose_writer refuses these first
        raise ExportError(f"cannot export: model.arch {config.model.arch}")
    if at_step is None:
        load_weights(folder, model)
    else:
        load_snapshot(folder.path, at_step, model)
    return model.eval(), vocab, tokenizer_dir


def _tokenizer_folder(run: Path) -> Path:
    """Where a fine-tuned run keeps its source model's tokenizer files."""
    for candidate in (run / TOKENIZER_FOLDER, run):
        if any((candidate / name).is_file() for name in (TOKENIZER_FILE, VOCAB_FILE)):
            return candidate
    raise ExportError(
        f"{run}: a run fine-tuned from a real model, but its tokenizer files are missing "
        f"(looked for tokenizer.json or vocab.json in {run / TOKENIZER_FOLDER} and {run})"
    )


def _special_ids(tokenizer_dir: Path | None) -> SpecialIds:
    """The lab vocabulary's BOS/EOS/PAD, or those of a fine-tuned run's tokenizer."""
    if tokenizer_dir is None:
        return SpecialIds(bos=BOS, eos=EOS, pad=PAD)
    tokenizer = load_tokenizer(tokenizer_dir)
    return SpecialIds(bos=tokenizer.bos_id, eos=tokenizer.eos_id, pad=tokenizer.pad_id)


def _check_reads_back(lab: ModelConfig, target: ModelConfig, family: str) -> None:
    """The written config.json, read by the lab, must describe the run's model."""
    same = set(SAME)
    if lab.positional == "rope":
        same |= {"rope_base", "rope_fraction", "positional"}
    elif target.positional != "learned":  # sinusoids are written as a learned table
        same.add("positional")
    windows = [tuple(c.attention_windows) or (0,) * c.n_decoder_layers for c in (lab, target)]
    wrong = [n for n in sorted(same) if getattr(lab, n) != getattr(target, n)]
    if windows[0] != windows[1]:
        wrong.append("attention_windows")
    if wrong:
        name = wrong[0]
        raise PretrainedError(
            f"export: {family}'s config.json reads back with {name} {getattr(target, name)!r}, "
            f"the run has {getattr(lab, name)!r}"
        )


def _self_check(model: DecoderOnly, folder: Path) -> float:
    """The largest logit difference between the run's model and the written folder read back."""
    _, reread = build_pretrained(read_config(folder), open_tensors(folder))
    length = min(CHECK_TOKENS, model.config.max_len)
    tokens = (torch.arange(length) * 7919 % model.vocab_size).unsqueeze(0)  # (1, T): spread over the vocabulary
    with torch.no_grad():
        want, got = model(tokens), reread(tokens)
    diff = float((want - got).abs().max())
    if not diff <= CHECK_TOLERANCE * max(1.0, float(want.abs().max())):
        raise PretrainedError(f"export: the written model's logits differ from the run's by {diff:.2g}")
    return diff


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
