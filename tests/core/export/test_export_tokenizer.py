"""An exported run's tokenizer: ``AutoTokenizer`` encodes as the lab's vocabulary does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tui_lab.core.export.export_tokenizer import write_vocab_tokenizer
from tui_lab.core.pretrained.tokenizer import load_tokenizer
from tui_lab.core.tasks.induction import INDUCTION_VOCAB
from tui_lab.core.tasks.modular import NumberVocab
from tui_lab.core.tasks.vocab import DIGITS_VOCAB, SEP, TEXT_VOCAB, Vocab

transformers = pytest.importorskip("transformers")


def sample_text(vocab: Vocab, n: int = 400, seed: int = 0) -> str:
    """A text of ``n`` of the vocabulary's characters, each of them at least once."""
    rng = random.Random(seed)
    chars = list(vocab.chars)
    return "".join(chars + rng.choices(chars, k=n))


@pytest.mark.parametrize("vocab", [TEXT_VOCAB, DIGITS_VOCAB, INDUCTION_VOCAB], ids=["text", "digits", "induction"])
def test_autotokenizer_encodes_as_the_vocabulary(tmp_path: Path, vocab: Vocab) -> None:
    write_vocab_tokenizer(vocab, tmp_path, context=64)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = sample_text(vocab)
    assert auto(text)["input_ids"] == vocab.encode(text)
    assert len(auto) == len(vocab)
    assert auto.decode(vocab.encode(text)) == text
    # The lab's own reader of the folder (what --model DIR uses) agrees too.
    assert load_tokenizer(tmp_path).encode(text) == vocab.encode(text)


def test_characters_outside_the_vocabulary_are_unk_as_in_the_lab(tmp_path: Path) -> None:
    write_vocab_tokenizer(DIGITS_VOCAB, tmp_path, context=64)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "12a 3+4é"
    assert auto(text)["input_ids"] == DIGITS_VOCAB.encode(text)
    assert auto.unk_token_id == 3


def test_specials_are_the_labs_ids(tmp_path: Path) -> None:
    write_vocab_tokenizer(TEXT_VOCAB, tmp_path, context=64)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert (auto.pad_token_id, auto.bos_token_id, auto.eos_token_id, auto.unk_token_id, auto.sep_token_id) == (0, 1, 2, 3, 4)
    # A decoder-only task's prompt ends in SEP: typed as <sep>, it is that id.
    assert auto("12<sep>")["input_ids"] == [*TEXT_VOCAB.encode("12"), SEP]


def test_residues_are_one_token_each(tmp_path: Path) -> None:
    vocab = NumberVocab(59)
    write_vocab_tokenizer(vocab, tmp_path, context=8)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for text in ("12 34", "12+34", "0 58 =", "3 77"):
        assert auto(text)["input_ids"] == vocab.encode(text)
    assert auto.decode(vocab.encode("12 34")) == vocab.decode(vocab.encode("12 34"))
