"""Character vocabularies: fixed special ids, lossless round trips, readable labels."""

from __future__ import annotations

import string

import pytest
import torch

from tui_lab.core.tasks.vocab import (
    BOS,
    DIGITS_VOCAB,
    EOS,
    PAD,
    SEP,
    SPECIALS,
    TEXT_VOCAB,
    UNK,
    Vocab,
)


def test_special_ids_are_fixed():
    assert (PAD, BOS, EOS, UNK, SEP) == (0, 1, 2, 3, 4)
    assert SPECIALS == ("<pad>", "<bos>", "<eos>", "<unk>", "<sep>")


def test_vocab_contents():
    assert DIGITS_VOCAB.chars == "0123456789+"
    assert len(DIGITS_VOCAB) == 5 + 11
    expected = set(string.printable) - {"\r", "\x0b", "\x0c"}
    assert set(TEXT_VOCAB.chars) == expected
    assert "\n" in TEXT_VOCAB and "\t" in TEXT_VOCAB and " " in TEXT_VOCAB
    assert "\r" not in TEXT_VOCAB
    assert len(TEXT_VOCAB) == 5 + len(expected)


@pytest.mark.parametrize("vocab", [DIGITS_VOCAB, TEXT_VOCAB], ids=["digits", "text"])
def test_round_trip_every_character(vocab):
    for i, c in enumerate(vocab.chars):
        assert vocab.encode(c) == [5 + i]
        assert vocab.decode(vocab.encode(c)) == c
    assert vocab.decode(vocab.encode(vocab.chars)) == vocab.chars
    assert vocab.decode(vocab.encode(vocab.chars[::-1])) == vocab.chars[::-1]


def test_unknown_characters_become_unk():
    assert DIGITS_VOCAB.encode("1a2") == [6, UNK, 7]
    assert TEXT_VOCAB.encode("é") == [UNK]
    assert DIGITS_VOCAB.unknown_chars("1a2ab-") == ["a", "b", "-"]
    assert TEXT_VOCAB.unknown_chars("plain text\n") == []


def test_decode_drops_specials_and_stops_at_eos():
    ids = [BOS, *DIGITS_VOCAB.encode("12"), SEP, PAD, UNK, *DIGITS_VOCAB.encode("3"), EOS, 7]
    assert DIGITS_VOCAB.decode(ids) == "123"
    assert DIGITS_VOCAB.decode(ids, stop_at_eos=False) == "1232"
    assert DIGITS_VOCAB.decode([999, -1, 5]) == "0"  # out-of-range ids are dropped
    assert DIGITS_VOCAB.decode(torch.tensor([6, 7, EOS, 8])) == "12"


def test_id_string_matches_encode():
    text = "a+b 1\n2\t~é"
    assert [ord(c) for c in TEXT_VOCAB.id_string(text)] == TEXT_VOCAB.encode(text)
    assert [ord(c) for c in DIGITS_VOCAB.id_string(text)] == DIGITS_VOCAB.encode(text)


def test_labels_are_short_and_visible():
    v = TEXT_VOCAB
    assert v.label(BOS) == "⟨s⟩"
    assert v.label(EOS) == "⟨/s⟩"
    assert v.label(SEP) == "⟨sep⟩"
    assert v.label(PAD) and v.label(UNK)
    assert v.label(v.encode("\n")[0]) == "↵"
    assert v.label(v.encode(" ")[0]) == "␣"
    assert v.label(v.encode("a")[0]) == "a"
    assert v.label(torch.tensor(BOS)) == "⟨s⟩"  # a 0-d tensor, as decoding yields
    labels = [v.label(i) for i in range(len(v))]
    assert all(lab.isprintable() and 1 <= len(lab) <= 5 for lab in labels)
    assert len(set(labels)) == len(labels)  # every id tells apart on an axis
    assert v.label(10_000)  # an unexpected id still gets a label, never an error


def test_vocab_refuses_repeats_and_compares_by_chars():
    with pytest.raises(ValueError, match="repeated"):
        Vocab("aba")
    assert Vocab("0123456789+") == DIGITS_VOCAB
    assert Vocab("01") != DIGITS_VOCAB
    assert len(Vocab("")) == 5
