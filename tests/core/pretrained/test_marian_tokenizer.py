"""Marian's tokenizer read with sentencepiece, against ``transformers``' MarianTokenizer
on a folder it saved (two SentencePiece models trained on the factory's texts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.hf_factory import save_marian_tokenizer
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.marian_tokenizer import load_marian_tokenizer

TEXTS = [
    "The cat sat on the mat.",
    "Die Katze sass auf der Matte.",
    "  leading and  double  spaces ",
    "a special </s> in the text, and <unk> too",
    ">>de<< The dog sat on the log.",
    "Zebra quux 123 !? ünïcödé ☃",
    "tabs\tand\nnewlines",
    "",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("marian-tok")
    save_marian_tokenizer(out)
    return out


@pytest.fixture(scope="module")
def reference(folder):
    from transformers import MarianTokenizer

    return MarianTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def lab(folder):
    return load_marian_tokenizer(folder)


@pytest.mark.parametrize("text", TEXTS)
def test_source_ids_equal_the_reference(reference, lab, text) -> None:
    assert lab.encode(text) == reference(text).input_ids


@pytest.mark.parametrize("text", TEXTS)
def test_target_ids_equal_the_reference(reference, lab, text) -> None:
    assert lab.encode_target(text) == reference(text_target=text).input_ids


def test_source_and_target_models_cut_differently(lab) -> None:
    """The encoder's pieces come from source.spm, the decoder's from target.spm."""
    assert lab.encode("Die Katze sass.") != lab.encode_target("Die Katze sass.")


@pytest.mark.parametrize("text", TEXTS)
def test_decode_equals_the_reference(reference, lab, text) -> None:
    ids = reference(text_target=text).input_ids
    assert lab.decode(ids) == reference.decode(ids)


def test_special_ids(reference, lab) -> None:
    assert (lab.eos_id, lab.pad_id, lab.unk_id) == (
        reference.eos_token_id, reference.pad_token_id, reference.unk_token_id)
    assert lab.bos_id is None and len(lab) == lab.pad_id + 1


def test_labels_show_the_leading_space(reference, lab) -> None:
    ids = reference("The cat sat.").input_ids
    pieces = reference.convert_ids_to_tokens(ids)
    assert [lab.label(i) for i in ids] == [p.replace("▁", "␣") for p in pieces]
    assert lab.label(ids[-1]) == "</s>"


def copy(folder: Path, to: Path, leave_out: str = "") -> Path:
    to.mkdir()
    for path in folder.iterdir():
        if path.name != leave_out:
            (to / path.name).write_bytes(path.read_bytes())
    return to


def one_line(exc: pytest.ExceptionInfo[PretrainedError]) -> str:
    assert "\n" not in str(exc.value)
    return str(exc.value)


@pytest.mark.parametrize("name", ["source.spm", "target.spm", "vocab.json"])
def test_a_missing_file_is_one_line_naming_it(folder, tmp_path: Path, name) -> None:
    with pytest.raises(PretrainedError) as exc:
        load_marian_tokenizer(copy(folder, tmp_path / "t", leave_out=name))
    assert name in one_line(exc) and "missing" in one_line(exc)


def test_a_broken_spm_is_one_line(folder, tmp_path: Path) -> None:
    broken = copy(folder, tmp_path / "t")
    (broken / "target.spm").write_bytes(b"not a sentencepiece model")
    with pytest.raises(PretrainedError) as exc:
        load_marian_tokenizer(broken)
    assert "target.spm" in one_line(exc) and "SentencePiece" in one_line(exc)


def test_a_vocabulary_without_unk_is_one_line(folder, tmp_path: Path) -> None:
    broken = copy(folder, tmp_path / "t")
    vocab = json.loads((broken / "vocab.json").read_text())
    del vocab["<unk>"]
    (broken / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(PretrainedError) as exc:
        load_marian_tokenizer(broken)
    assert "vocab.json" in one_line(exc) and "<unk>" in one_line(exc)


def test_separate_vocabularies_are_refused_in_one_line(folder, tmp_path: Path) -> None:
    other = copy(folder, tmp_path / "t")
    (other / "target_vocab.json").write_text("{}")
    with pytest.raises(PretrainedError) as exc:
        load_marian_tokenizer(other)
    assert "target_vocab.json" in one_line(exc)
