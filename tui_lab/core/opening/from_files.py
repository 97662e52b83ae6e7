"""A real model opened from files (``--model SOURCE``), ready for every pane and command.

``open_files`` is ``open_model``'s step for a Hugging Face folder or cache
name, as ``load_for_inference`` is for a run folder: it returns the same
``ModelInHand`` (config, task, model in eval mode), so decoding, the
attention views, the atlas, ablation, the lens and the parameter report work
on it unchanged. The steps, each in ``core/pretrained/``: find the folder
(offline; ``source.py``), read ``config.json`` and map the weights without
copying them (``files.py``), build the lab's own model of that family around
them (``build.py``), read the tokenizer (``tokenizer.py``). The ``ModelCard``
says what was read from which file, for Build's card and ``params``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tui_lab.core.config.lab_config import LabConfig, TaskConfig, TrainConfig
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.device import choose_device, set_threads, threads_set_to
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.opening.model_card import ModelCard
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.encoder_tokenizer import load_encoder_tokenizer
from tui_lab.core.pretrained.encoder_tokenizer import mask_token as encoder_mask_token
from tui_lab.core.pretrained.encoder_tokenizer import special_ids as encoder_special_ids
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.files import TensorSource, open_tensors, read_config
from tui_lab.core.pretrained.hf_files import CONFIG_FILE, GENERATION_CONFIG
from tui_lab.core.pretrained.marian_tokenizer import MarianTokenizer, load_marian_tokenizer
from tui_lab.core.pretrained.relayout import PendingLayout, lay_out
from tui_lab.core.pretrained.source import ModelSource, resolve_source
from tui_lab.core.pretrained.tokenizer import PretrainedTokenizer, load_tokenizer
from tui_lab.core.pretrained.translator import translation_settings
from tui_lab.core.tasks.masked_lm import MaskedText
from tui_lab.core.tasks.tokenized import TokenizedText
from tui_lab.core.tasks.translation import Translation

if TYPE_CHECKING:
    from tui_lab.core.pretrained.widening import Widening

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def open_files(
    source: str,
    device: str = "cpu",
    revision: str | None = None,
    lay_out_later: bool = False,
    dtype: str = "float32",
    widening: Widening | None = None,
) -> ModelInHand:
    """The model ``source`` names (a folder or a cached hub name), offline; PretrainedError if not.

    ``lay_out_later``: return before the weights are re-laid for decoding (a third
    of a second for GPT-2 small); ``settle()`` on the result does it, once. The lab
    shows the model first and re-lays it in the background.

    ``dtype``: ``float32`` (the default; exact against the reference) widens
    half-precision weights; ``bfloat16`` holds bfloat16 weights as the file stores
    them, with no float32 copy (others are narrowed once).

    ``widening``: float32 copies of the files' half-precision tensors, begun before
    torch was imported (``pretrained/widening.py``; the lab's ``--model``): in
    float32 they are used in place of widening here.
    """
    if dtype not in DTYPES:
        raise PretrainedError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    where = choose_device(device)
    found = resolve_source(source, revision)
    raw = read_config(found.folder)
    tensors = open_tensors(found.folder)
    stored = _stored_dtype(tensors)
    notes: list[str] = []
    if widening is not None:
        copies = widening.take()
        if dtype == "float32" and copies.arrays:
            tensors = tensors.widened(copies)
            notes.append(_dtype_note(stored, dtype))
    model_config, model = build_pretrained(raw, tensors, lay_out_now=not lay_out_later)
    tokenizer = _tokenizer(found.folder, model_config)
    with threads_set_to(0):  # widening 494 M bf16 weights is page-bound: both cores halve it
        model = _in_dtype(model, dtype, stored, lay_out_later, notes)
    if "auto_map" in raw:
        notes.append("config.json names custom code (auto_map): it was not run")
    model = model.to(where).eval()
    n_params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    if where.type == "cpu":
        set_threads(0, n_params)
    task = _task(found.folder, raw, model_config, tokenizer, notes)
    config = LabConfig(
        name=found.name,
        description=f"{raw.get('model_type')} model opened from {found.folder}",
        model=model_config,
        task=TaskConfig(name=task.name, block_size=model_config.max_len),
        train=TrainConfig(),
        source=str(found.folder),
    )
    card = _card(found, raw, model_config, n_params, len(tokenizer), stored, tensors, notes)
    card = replace(card, dtype=dtype, held_bytes=weight_bytes(model))
    settle = PendingLayout(model, tensors.release) if lay_out_later else (lambda: None)
    return ModelInHand(config, task, model, 0, where, notes, card=card, settle=settle)


def _tokenizer(folder: Path, model_config: ModelConfig) -> PretrainedTokenizer | MarianTokenizer:
    """The model's tokenizer by its shape; PretrainedError when it has more tokens than
    the weights have embeddings (another model's files)."""
    if model_config.shape is Shape.ENCODER_DECODER:
        tokenizer: PretrainedTokenizer | MarianTokenizer = load_marian_tokenizer(folder)
    elif model_config.shape is Shape.ENCODER_ONLY:
        tokenizer = load_encoder_tokenizer(folder)
    else:
        tokenizer = load_tokenizer(folder)
    vocab = model_config.vocab_size or 0
    if len(tokenizer) > vocab:
        raise PretrainedError(
            f"{folder}: the tokenizer has {len(tokenizer):,} tokens but the weights "
            f"hold {vocab:,} embeddings: the tokenizer files belong to another model"
        )
    return tokenizer


def _in_dtype(
    model: torch.nn.Module, dtype: str, stored: str, lay_out_later: bool, notes: list[str]
) -> torch.nn.Module:
    """``model`` in ``dtype``: float32 (the default) widens half-precision weights, as the
    lab compares with the reference in fp32; bfloat16 keeps a bfloat16 file's tensors."""
    want = DTYPES[dtype]
    if all(p.dtype == want for p in model.parameters()):
        return model
    model = model.to(want)
    if _dtype_note(stored, dtype) not in notes:  # not said already for copies made ahead
        notes.append(_dtype_note(stored, dtype))
    if not lay_out_later:  # float32 copies made just now: lay them out for decoding too
        lay_out(model)
    return model


def _dtype_note(stored: str, dtype: str) -> str:
    return f"weights stored as {stored}, {'widened' if dtype == 'float32' else 'narrowed'} to {dtype}"


def _task(
    folder: Path,
    raw: dict[str, Any],
    model_config: ModelConfig,
    tokenizer: PretrainedTokenizer | MarianTokenizer,
    notes: list[str],
) -> TokenizedText | Translation | MaskedText:
    """What decoding reads the model through: fill-mask, translation or continued text."""
    if model_config.shape is Shape.ENCODER_ONLY and isinstance(tokenizer, PretrainedTokenizer):  # never Marian's
        return _masked_task(tokenizer, model_config.max_len, notes)
    if model_config.shape is Shape.ENCODER_DECODER:
        start, banned, more = translation_settings(folder, raw, tokenizer.pad_id)
        notes.extend(more)
        return Translation(tokenizer, model_config.max_len, start, banned)
    return TokenizedText(tokenizer, model_config.max_len)


def _masked_task(tokenizer: PretrainedTokenizer, context: int, notes: list[str]) -> MaskedText:
    """An encoder-only model's task: fill its mask token (one noted if its vocabulary has none)."""
    found = encoder_mask_token(tokenizer)
    if found is None:
        notes.append("the tokenizer has no mask token ([MASK] or <mask>): fill-mask cannot be typed")
    token, mask_id = found or ("[MASK]", -1)
    return MaskedText(tokenizer, context, token, mask_id, encoder_special_ids(tokenizer))


def _stored_dtype(tensors: TensorSource) -> str:
    dtypes = {str(t.dtype).removeprefix("torch.") for t in _sample(tensors)}
    return "/".join(sorted(dtypes)) or "none"


def _sample(tensors: TensorSource) -> list[torch.Tensor]:
    keys = list(tensors.keys())
    step = max(1, len(keys) // 8)
    return [tensors[k] for k in keys[::step]]


def _card(
    found: ModelSource,
    raw: dict[str, Any],
    config: ModelConfig,
    n_params: int,
    tokenizer_size: int,
    stored: str,
    tensors: TensorSource,
    notes: list[str],
) -> ModelCard:
    folder = found.folder
    weight_files = sorted({Path(tensors.tensor_file(k)).name for k in tensors.keys()})
    tokenizer_files = [
        n for n in (
            "tokenizer.json", "vocab.json", "merges.txt", "vocab.txt", "source.spm", "target.spm",
            "tokenizer_config.json",
        )
        if (folder / n).is_file()
    ]
    config_files = [n for n in (CONFIG_FILE, GENERATION_CONFIG) if (folder / n).is_file()]
    if config.shape is Shape.ENCODER_DECODER:  # the card's layers are the decoder's; say the encoder's
        notes = [f"encoder-decoder: {config.n_encoder_layers} encoder + {config.n_decoder_layers} decoder layers", *notes]
    return ModelCard(
        name=found.name,
        family=str(raw.get("model_type")),
        origin=found.origin,
        folder=folder,
        revision=found.revision,
        commit=found.commit,
        n_params=n_params,
        n_layers=config.n_encoder_layers if config.shape is Shape.ENCODER_ONLY else config.n_decoder_layers,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads or config.n_heads,
        d_model=config.d_model,
        d_ff=config.d_ff,
        context=config.max_len,
        vocab_size=config.vocab_size or 0,
        tokenizer_size=tokenizer_size,
        stored_dtype=stored,
        files={"config": config_files, "weights": weight_files, "tokenizer": tokenizer_files},
        notes=list(notes),
    )


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters, tied ones once (what a token reads from memory)."""
    unique = {p.data_ptr(): p for p in model.parameters()}
    return sum(p.numel() * p.element_size() for p in unique.values())

