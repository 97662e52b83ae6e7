"""A pretrained model's tokenizer, read with the ``tokenizers`` library, as ``transformers`` reads it.

``tokenizer.json`` is used as saved; a folder with only ``vocab.json`` and
``merges.txt`` is GPT-2's byte-level BPE, built as ``GPT2Tokenizer`` builds it.
On top, what ``AutoTokenizer`` adds from ``tokenizer_config.json``: the special
tokens it names (so ``<|endoftext|>`` in a text is one token), and, for a
vocab.json + merges.txt folder, the BOS/EOS its ``add_bos_token``/``add_eos_token``
ask for (a tokenizer.json's own post-processor decides that for it). Truncation
and padding saved in the file are turned off: the lab checks a text against the
model's context itself.

One difference is deliberate: transformers 5 rebuilds a ``LlamaTokenizer``'s
pre-tokenizer from its class (Metaspace) instead of the saved normalizer, which
for older files changes runs of leading spaces and the text after a special
token; the saved file is what the model was trained with, so it is used as is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from tui_lab.core.errors import one_line
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import (
    CONFIG_FILE,
    GENERATION_CONFIG,
    MERGES_FILE,
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_FILE,
    VOCAB_FILE,
)
from tui_lab.core.visible_text import VISIBLE_WHITESPACE

# GPT2Tokenizer's defaults, for a vocab.json + merges.txt folder whose config names none.
_GPT2_SPECIALS = {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
_NAMED_SPECIALS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (a byte-level BPE's alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


_BYTE_OF = {ch: b for b, ch in _bytes_to_unicode().items()}


class PretrainedTokenizer:
    """Text to a model's token ids and back, and each id's piece as a readable label."""

    def __init__(
        self,
        backend: Tokenizer,
        eos_ids: tuple[int, ...],
        bos_id: int | None,
        pad_id: int | None,
        files: tuple[str, ...],
    ) -> None:
        self.backend = backend
        self.eos_ids = eos_ids  # a model may stop on several (generation_config's list)
        self.eos_id: int | None = eos_ids[0] if eos_ids else None
        self.bos_id = bos_id
        self.pad_id = pad_id
        self.files = files  # the files it was read from, for the model's card
        self._size = backend.get_vocab_size(with_added_tokens=True)
        self._added = set(backend.get_added_tokens_decoder())
        self._byte_level = _uses_byte_level(backend)

    def __len__(self) -> int:
        return self._size

    def encode(self, text: str) -> list[int]:
        """``text``'s token ids, with the special tokens the tokenizer adds (as AutoTokenizer)."""
        return list(self.backend.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens included (ids past the tokenizer are skipped)."""
        return str(self.backend.decode([int(i) for i in ids], skip_special_tokens=False))

    def label(self, id: int) -> str:
        """Token ``id``'s piece, readable: spaces as ␣, newlines as ↵, odd bytes as <0x..>."""
        piece = self.backend.id_to_token(int(id))
        if piece is None:
            return f"<id {id}>"
        if id in self._added:
            return _visible(piece)
        if self._byte_level and all(ch in _BYTE_OF for ch in piece):
            return _readable(bytes(_BYTE_OF[ch] for ch in piece))
        # SentencePiece-style pieces mark a word's leading space with ▁; <0x0A> stays as is.
        return _visible(piece.replace("▁", " "))


def _readable(data: bytes) -> str:
    """Bytes as text with whitespace visible; bytes that are not UTF-8 (a split character) as <0x..>."""
    out: list[str] = []
    while data:
        try:
            out.append(_visible(data.decode("utf-8")))
            break
        except UnicodeDecodeError as exc:
            out.append(_visible(data[: exc.start].decode("utf-8")))
            out.extend(f"<0x{b:02X}>" for b in data[exc.start : exc.end])
            data = data[exc.end :]
    return "".join(out)


def _visible(text: str) -> str:
    return "".join(
        VISIBLE_WHITESPACE.get(ch) or (f"<0x{ord(ch):02X}>" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch)
        for ch in text
    )


def _uses_byte_level(backend: Tokenizer) -> bool:
    """Whether the tokenizer's decoder is (or contains) the byte-level one."""
    if backend.decoder is None:
        return False
    state = json.loads(backend.decoder.__getstate__())
    kinds = [state.get("type")] + [d.get("type") for d in state.get("decoders", [])]
    return "ByteLevel" in kinds


def load_tokenizer(folder: Path) -> PretrainedTokenizer:
    """The tokenizer of a model folder (tokenizer.json, else vocab.json + merges.txt)."""
    folder = Path(folder)
    tok_config = {**_optional_json(folder / SPECIAL_TOKENS_MAP), **_optional_json(folder / TOKENIZER_CONFIG)}
    specials = {name: tok_config[name] for name in _NAMED_SPECIALS if tok_config.get(name) is not None}
    if (folder / TOKENIZER_FILE).is_file():
        files: tuple[str, ...] = (TOKENIZER_FILE,)
        try:
            backend = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        except Exception as exc:  # noqa: BLE001 - the library's parse errors, as one line
            raise PretrainedError(f"{folder / TOKENIZER_FILE}: not a tokenizer ({one_line(exc)})") from None
    elif (folder / VOCAB_FILE).is_file() or (folder / MERGES_FILE).is_file():
        files = (VOCAB_FILE, MERGES_FILE)
        backend = _byte_level_bpe(folder, bool(tok_config.get("add_prefix_space", False)))
        specials = {**_GPT2_SPECIALS, **specials}
    else:
        raise PretrainedError(
            f"{folder}: no tokenizer (looked for {TOKENIZER_FILE}, or {VOCAB_FILE} with {MERGES_FILE})"
        )
    if (folder / TOKENIZER_CONFIG).is_file():
        files += (TOKENIZER_CONFIG,)
    backend.no_truncation()
    backend.no_padding()
    _add_special_tokens(backend, tok_config, specials)
    if backend.post_processor is None:
        # transformers 5 reads add_bos_token/add_eos_token only without a tokenizer.json
        # (whose post-processor is the rule when it has one).
        asks = tok_config if files[0] == VOCAB_FILE else {}
        _bos_eos_template(backend, asks, specials)
    eos_ids, bos_id, pad_id = _special_ids(folder, backend, specials)
    return PretrainedTokenizer(backend, eos_ids, bos_id, pad_id, files)


def _byte_level_bpe(folder: Path, add_prefix_space: bool) -> Tokenizer:
    """GPT-2's byte-level BPE from vocab.json and merges.txt, as GPT2Tokenizer builds it."""
    for name in (VOCAB_FILE, MERGES_FILE):
        if not (folder / name).is_file():
            other = MERGES_FILE if name == VOCAB_FILE else VOCAB_FILE
            raise PretrainedError(f"{folder}: {other} without {name} (a byte-level BPE needs both)")
    try:
        model = BPE.from_file(
            str(folder / VOCAB_FILE), str(folder / MERGES_FILE),
            dropout=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
        )
    except Exception as exc:  # noqa: BLE001 - the library's parse errors, as one line
        raise PretrainedError(
            f"{folder / VOCAB_FILE}: with {MERGES_FILE}, not a BPE vocabulary ({one_line(exc)})"
        ) from None
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    backend.decoder = decoders.ByteLevel()
    return backend


def _content(token: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or a dict with content."""
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return str(token["content"])
    return None


def _added_token(token: object) -> AddedToken | None:
    content = _content(token)
    if content is None:
        return None
    if not isinstance(token, dict):
        return AddedToken(content, special=True, normalized=False)
    flags = {k: bool(token[k]) for k in ("lstrip", "rstrip", "single_word", "normalized") if k in token}
    return AddedToken(content, special=bool(token.get("special", True)), **flags)


def _add_special_tokens(backend: Tokenizer, tok_config: dict[str, object], specials: dict[str, object]) -> None:
    """Add the tokens the config names that the tokenizer lacks, as AutoTokenizer does."""
    present = {t.content for t in backend.get_added_tokens_decoder().values()}
    decoder = tok_config.get("added_tokens_decoder")
    listed = [v for _, v in sorted(decoder.items(), key=lambda kv: int(kv[0]))] if isinstance(decoder, dict) else []
    extra = tok_config.get("additional_special_tokens") or tok_config.get("extra_special_tokens") or []
    for token in [*listed, *specials.values(), *(extra if isinstance(extra, list) else [])]:
        added = _added_token(token)
        if added is not None and added.content not in present:
            if added.special:
                backend.add_special_tokens([added])
            else:
                backend.add_tokens([added])
            present.add(added.content)


def _bos_eos_template(backend: Tokenizer, tok_config: dict[str, object], specials: dict[str, object]) -> None:
    """The post-processor ``add_bos_token``/``add_eos_token`` ask for (none: the text alone)."""
    bos, eos = _content(specials.get("bos_token")), _content(specials.get("eos_token"))
    ends: list[tuple[str, int]] = []
    head = tail = head_b = tail_b = ""
    if tok_config.get("add_bos_token") and bos is not None:
        head, head_b = f"{bos}:0 ", f" {bos}:1"
        ends.append((bos, _id_of(backend, bos)))
    if tok_config.get("add_eos_token") and eos is not None:
        tail, tail_b = f" {eos}:0", f" {eos}:1"
        ends.append((eos, _id_of(backend, eos)))
    # transformers' update_post_processor, to the character.
    single = f"{head}$A:0{tail}"
    pair = f"{single}{head_b} $B:1{tail_b}"
    backend.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=ends)


def _id_of(backend: Tokenizer, token: str) -> int:
    found = backend.token_to_id(token)
    if found is None:
        raise PretrainedError(f"{TOKENIZER_CONFIG}: special token {token!r} is not in the vocabulary")
    return int(found)


def _special_ids(
    folder: Path, backend: Tokenizer, specials: dict[str, object]
) -> tuple[tuple[int, ...], int | None, int | None]:
    """EOS ids, BOS and pad: generation_config.json, then config.json, then the special tokens."""
    configs = [_optional_json(folder / GENERATION_CONFIG), _optional_json(folder / CONFIG_FILE)]

    def pick(key: str) -> tuple[int, ...]:
        for config in configs:
            value = config.get(f"{key}_id")
            ids = value if isinstance(value, list) else [value]
            ints = tuple(int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool))
            if ints:
                return ints
        content = _content(specials.get(key))
        found = backend.token_to_id(content) if content is not None else None
        return (int(found),) if found is not None else ()

    bos, pad = pick("bos_token"), pick("pad_token")
    return pick("eos_token"), (bos[0] if bos else None), (pad[0] if pad else None)


def _optional_json(path: Path) -> dict[str, object]:
    """A JSON object file if present (else empty); one line naming it if it is not JSON."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PretrainedError(f"{path}: not JSON ({one_line(exc)})") from None
    if not isinstance(data, dict):
        raise PretrainedError(f"{path}: not a JSON object")
    return data
