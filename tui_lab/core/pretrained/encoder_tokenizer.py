"""The tokenizers of encoder-only checkpoints (BERT, DistilBERT, RoBERTa), as ``transformers`` builds them.

- ``tokenizer.json``: read as saved (``tokenizer.load_tokenizer``); its
  post-processor adds ``[CLS]``/``[SEP]`` (or ``<s>``/``</s>``).
- ``vocab.txt`` alone (BERT's WordPiece): built as ``transformers``' converter
  builds ``BertTokenizerFast``: BERT's normaliser (lower-casing as
  ``do_lower_case`` says, default true), BERT's pre-tokenizer, WordPiece with
  ``##`` continuations, ``[CLS] $A [SEP]`` (pairs ``[CLS] $A [SEP] $B [SEP]``),
  the special tokens added whole so ``[MASK]`` in a text is one token.
- ``vocab.json`` + ``merges.txt`` (RoBERTa's byte-level BPE): GPT-2's BPE,
  with RoBERTa's ``<s> $A </s>`` post-processor.

``mask_token`` finds the mask a checkpoint's text uses (``[MASK]``, ``<mask>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import (
    MERGES_FILE,
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_FILE,
    VOCAB_FILE,
)
from tui_lab.core.pretrained.tokenizer import (
    _NAMED_SPECIALS,
    PretrainedTokenizer,
    _add_special_tokens,
    _content,
    _optional_json,
    _special_ids,
    load_tokenizer,
)

WORDPIECE_VOCAB = "vocab.txt"
_BERT_SPECIALS = {
    "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
}
MASK_TOKENS = ("[MASK]", "<mask>")


def load_encoder_tokenizer(folder: Path) -> PretrainedTokenizer:
    """The tokenizer of an encoder-only checkpoint's folder; see the module docstring."""
    folder = Path(folder)
    if (folder / TOKENIZER_FILE).is_file():
        return load_tokenizer(folder)
    if (folder / WORDPIECE_VOCAB).is_file():
        return _wordpiece(folder)
    if (folder / VOCAB_FILE).is_file() and (folder / MERGES_FILE).is_file():
        tok = load_tokenizer(folder)
        cls, sep = tok.backend.token_to_id("<s>"), tok.backend.token_to_id("</s>")
        if cls is None or sep is None:
            raise PretrainedError(f"{folder / VOCAB_FILE}: no <s> or </s> (RoBERTa's tokenizer has both)")
        tok.backend.post_processor = processors.RobertaProcessing(
            ("</s>", sep), ("<s>", cls), trim_offsets=True, add_prefix_space=False
        )
        return tok
    raise PretrainedError(
        f"{folder}: no tokenizer (looked for {TOKENIZER_FILE}, {WORDPIECE_VOCAB}, or {VOCAB_FILE} with {MERGES_FILE})"
    )


def _wordpiece(folder: Path) -> PretrainedTokenizer:
    """BERT's WordPiece tokenizer from ``vocab.txt``, as transformers' ``BertConverter`` builds it."""
    tok_config = {**_optional_json(folder / SPECIAL_TOKENS_MAP), **_optional_json(folder / TOKENIZER_CONFIG)}
    specials = {**_BERT_SPECIALS, **{k: tok_config[k] for k in _NAMED_SPECIALS if tok_config.get(k) is not None}}
    try:
        lines = (folder / WORDPIECE_VOCAB).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise PretrainedError(f"{folder / WORDPIECE_VOCAB}: cannot read it ({exc})") from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {piece: i for i, piece in enumerate(lines)}
    unk, cls, sep = (str(_content(specials[k])) for k in ("unk_token", "cls_token", "sep_token"))
    for token in (unk, cls, sep):
        if token not in vocab:
            raise PretrainedError(f"{folder / WORDPIECE_VOCAB}: no {token} (BERT's vocabulary has it)")
    backend = Tokenizer(WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(tok_config.get("tokenize_chinese_chars", True)),
        strip_accents=cast("bool | None", tok_config.get("strip_accents")),  # as written: null follows lowercase
        lowercase=bool(tok_config.get("do_lower_case", True)),
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
    )
    _add_special_tokens(backend, tok_config, specials)
    eos_ids, bos_id, pad_id = _special_ids(folder, backend, specials)
    files = (WORDPIECE_VOCAB,) + ((TOKENIZER_CONFIG,) if (folder / TOKENIZER_CONFIG).is_file() else ())
    return PretrainedTokenizer(backend, eos_ids, bos_id, pad_id, files)


def mask_token(tokenizer: PretrainedTokenizer) -> tuple[str, int] | None:
    """The checkpoint's mask token and its id, or None when its vocabulary has none."""
    for token in MASK_TOKENS:
        found = tokenizer.backend.token_to_id(token)
        if found is not None:
            return token, int(found)
    return None


def special_ids(tokenizer: PretrainedTokenizer) -> set[int]:
    """The ids of the tokens the tokenizer adds or pads with (left out of a filled text)."""
    out = set()
    for token in ("[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>"):
        found = tokenizer.backend.token_to_id(token)
        if found is not None:
            out.add(int(found))
    return out
