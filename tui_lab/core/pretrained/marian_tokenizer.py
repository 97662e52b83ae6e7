"""A Marian translator's tokenizer, read with ``sentencepiece`` as ``MarianTokenizer`` reads it.

Two SentencePiece models and one vocabulary: ``source.spm`` cuts the text the
encoder reads, ``target.spm`` the text the decoder writes, and ``vocab.json``
gives every piece of either its model id (opus-mt's two languages share one
embedding table, so one id space). ``encode`` appends ``</s>`` as
``MarianTokenizer`` does; special tokens written in a text (``</s>``) are one
token each, and a leading language code (``>>fra<<``) is kept whole, as there.
Punctuation is not normalised: ``MarianTokenizer`` does so only when
``sacremoses`` is installed, and then only in ``prepare_seq2seq_batch``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import sentencepiece

from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import (
    SOURCE_SPM,
    TARGET_SPM,
    TARGET_VOCAB_FILE,
    TOKENIZER_CONFIG,
    VOCAB_FILE,
)
from tui_lab.core.visible_text import VISIBLE_WHITESPACE

_SPACE = "▁"  # SentencePiece's mark of a word's leading space


class MarianTokenizer:
    """Source text to encoder ids, target ids back to text, every id's piece as a readable label."""

    def __init__(self, folder: Path) -> None:
        config = _json(folder / TOKENIZER_CONFIG, required=False)
        if config.get("separate_vocabs") or (folder / TARGET_VOCAB_FILE).is_file():
            raise PretrainedError(
                f"{folder / TARGET_VOCAB_FILE}: separate source and target vocabularies are not supported"
            )
        self.source = _spm(folder / SOURCE_SPM)
        self.target = _spm(folder / TARGET_SPM)
        vocab = _json(folder / VOCAB_FILE, required=True)
        if not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
            raise PretrainedError(f"{folder / VOCAB_FILE}: every piece must map to a whole number >= 0")
        self.vocab: dict[str, int] = {p: i for p, i in vocab.items() if isinstance(i, int)}
        self.pieces: dict[int, str] = {i: piece for piece, i in self.vocab.items()}
        names = {key: _content(config.get(key)) or default for key, default in
                 (("eos_token", "</s>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"))}
        for key in ("eos_token", "unk_token"):
            if names[key] not in self.vocab:
                raise PretrainedError(f"{folder / VOCAB_FILE}: has no {names[key]} ({key})")
        self.unk_id = self.vocab[names["unk_token"]]
        self.eos_id: int | None = self.vocab[names["eos_token"]]
        self.bos_id: int | None = None  # Marian's source has none; the decoder starts at pad
        self.pad_id: int | None = self.vocab.get(names["pad_token"])
        self.specials = _specials(config, names)
        self._split = re.compile("(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")")
        self.files = tuple(n for n in (SOURCE_SPM, TARGET_SPM, VOCAB_FILE, TOKENIZER_CONFIG) if (folder / n).is_file())
        self._size = max(self.pieces) + 1

    def __len__(self) -> int:
        """One more than the largest id (the rows of the embedding table it needs)."""
        return self._size

    def encode(self, text: str) -> list[int]:
        """The encoder's ids of ``text`` (``source.spm``), ``</s>`` appended (as ``MarianTokenizer(text)``)."""
        return [*self._ids(text, self.source), *([] if self.eos_id is None else [self.eos_id])]

    def encode_target(self, text: str) -> list[int]:
        """The decoder's ids of ``text`` (``target.spm``), ``</s>`` appended (``text_target=``)."""
        return [*self._ids(text, self.target), *([] if self.eos_id is None else [self.eos_id])]

    def _ids(self, text: str, model: sentencepiece.SentencePieceProcessor) -> list[int]:
        pieces: list[str] = []
        for chunk in self._split.split(text):
            if chunk in self.specials:
                pieces.append(chunk)
            elif chunk:
                pieces.extend(_language_code(chunk, model))
        return [self.vocab.get(p, self.unk_id) for p in pieces]

    def decode(self, ids: Sequence[int]) -> str:
        """The target text of ``ids``, special tokens included (``MarianTokenizer.decode``)."""
        out, run = "", list[str]()
        for i in ids:
            piece = self._piece(int(i))
            if piece in self.specials:
                out += self.target.decode_pieces(run) + piece + " "
                run = []
            else:
                run.append(piece)
        out += self.target.decode_pieces(run)
        return str(out.replace(_SPACE, " ").strip())

    def _piece(self, id: int) -> str:
        if id in self.pieces:
            return self.pieces[id]
        piece = self.target.id_to_piece(id) if 0 <= id < self.target.get_piece_size() else ""
        return str(piece) or next(p for p, i in self.vocab.items() if i == self.unk_id)

    def label(self, id: int) -> str:
        """Token ``id``'s piece, readable: the ▁ of a word's leading space as ␣."""
        piece = self.pieces.get(int(id))
        if piece is None:
            return f"<id {id}>"
        return "".join(VISIBLE_WHITESPACE.get(ch, ch) for ch in piece.replace(_SPACE, " "))


def load_marian_tokenizer(folder: Path) -> MarianTokenizer:
    """The tokenizer of a Marian folder; one line naming a missing or unreadable file."""
    return MarianTokenizer(folder)


def _language_code(text: str, model: sentencepiece.SentencePieceProcessor) -> list[str]:
    """A leading ``>>xx<<`` kept whole, the rest cut by the SentencePiece model."""
    code: list[str] = []
    end = text.find("<<")
    if text.startswith(">>") and end != -1:
        code, text = [text[: end + 2]], text[end + 2 :]
    return [*code, *model.encode(text, out_type=str)]


def _spm(path: Path) -> sentencepiece.SentencePieceProcessor:
    if not path.is_file():
        raise PretrainedError(
            f"{path}: missing (a Marian tokenizer reads {SOURCE_SPM}, {TARGET_SPM} and {VOCAB_FILE})"
        )
    try:
        return sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PretrainedError(f"{path}: not a SentencePiece model ({first})") from None


def _json(path: Path, required: bool) -> dict[str, object]:
    if not path.is_file():
        if required:
            raise PretrainedError(f"{path}: missing (a Marian tokenizer reads it for the pieces' ids)")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PretrainedError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PretrainedError(f"{path}: expected a JSON object")
    return data


def _content(token: object) -> str | None:
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return str(token["content"])
    return None


def _specials(config: dict[str, object], names: dict[str, str]) -> set[str]:
    """The tokens a text never splits: eos/unk/pad and those tokenizer_config.json marks special."""
    found = set(names.values())
    added = config.get("added_tokens_decoder")
    if isinstance(added, dict):
        found |= {c for t in added.values() if isinstance(t, dict) and t.get("special") and (c := _content(t))}
    extra = config.get("additional_special_tokens")
    for token in extra if isinstance(extra, list) else []:
        if (c := _content(token)) is not None:
            found.add(c)
    return found
