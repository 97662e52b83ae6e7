"""The tokenizer files of an exported run: its character vocabulary as a ``tokenizer.json``,
or, for a model fine-tuned from a real one, the source's own files.

A lab vocabulary is ids 0..4 for ``<pad> <bos> <eos> <unk> <sep>``, then one
id per character (``tasks/vocab.py``). As a ``tokenizers`` file that is a BPE
with no merges over those characters and no pre-tokenizer: every character of
the text is its own token, a character outside the vocabulary is ``<unk>``,
and nothing is added before or after, exactly the lab's ``Vocab.encode``. The
specials are added tokens, so ``<sep>`` typed in a text is the SEP id (the
lab's own encoder would spell it out character by character). Decoding fuses
the pieces without spaces. The modular-arithmetic vocabulary (one token per
residue) is a word-level vocabulary of the numbers instead, read from text as
the lab reads it: digits runs, everything else a separator.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE, WordLevel

from tui_lab.core.tasks.modular import NumberVocab
from tui_lab.core.tasks.vocab import N_SPECIALS, SPECIALS, Vocab

# The files AutoTokenizer reads, in the order a fine-tuned run's are looked for.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
)
_NAMES = ("pad_token", "bos_token", "eos_token", "unk_token", "sep_token")


def vocab_tokenizer(vocab: Vocab) -> Tokenizer:
    """The ``tokenizers`` form of a lab vocabulary (see the module)."""
    if isinstance(vocab, NumberVocab):
        pieces = [str(n) for n in range(vocab.p)]
        words = {piece: i for i, piece in enumerate([*SPECIALS, *pieces])}
        tok = Tokenizer(WordLevel(words, unk_token=SPECIALS[3]))
        tok.normalizer = normalizers.Replace(Regex(r"[^0-9]+"), " ")
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.decoder = None  # pieces joined by spaces, as NumberVocab.decode writes them
    else:
        chars = {c: i for i, c in enumerate(vocab.chars, start=N_SPECIALS)}
        tok = Tokenizer(BPE({**{s: i for i, s in enumerate(SPECIALS)}, **chars}, [], unk_token=SPECIALS[3], fuse_unk=False))
        tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return tok


def write_vocab_tokenizer(vocab: Vocab, folder: Path, context: int) -> list[str]:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json into ``folder``."""
    vocab_tokenizer(vocab).save(str(folder / "tokenizer.json"))
    specials = dict(zip(_NAMES, SPECIALS, strict=True))
    config: dict[str, object] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **specials,
        "model_max_length": context,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
    }
    _write_json(folder / "tokenizer_config.json", config)
    _write_json(folder / "special_tokens_map.json", specials)
    return ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]


def copy_tokenizer(source: Path, folder: Path) -> list[str]:
    """The tokenizer files of ``source`` (a fine-tuned run's copy of its model's) into ``folder``."""
    copied = []
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, folder / name)
            copied.append(name)
    return copied


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
