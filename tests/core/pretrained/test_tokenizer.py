"""load_tokenizer: ids identical to transformers' AutoTokenizer, readable labels, special ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.hf_factory import save_tokenizer, train_bpe
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.tokenizer import load_tokenizer

TEXTS = [
    "The cat sat on the mat.",
    "naïve café — 東京 🐈 ünïcödé",
    "line one\nline two\n\n\tindented\r\nend\n",
    "   leading spaces, and trailing   ",
    "Once upon a time<|endoftext|>The end",
    "",
    " ",
    "dogs" * 30,
]


def _gpt2_class_folder(folder: Path, **config: Any) -> Path:
    """A folder saved by transformers' GPT2Tokenizer around the trained BPE."""
    from transformers import GPT2Tokenizer

    model = json.loads(train_bpe().to_str())["model"]
    GPT2Tokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]], **config).save_pretrained(folder)
    return folder


def _vocab_merges_folder(folder: Path) -> Path:
    """Only vocab.json and merges.txt (GPT-2's original files), and a config naming the family."""
    folder.mkdir(parents=True)
    train_bpe().model.save(str(folder))
    assert sorted(p.name for p in folder.iterdir()) == ["merges.txt", "vocab.json"]
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    save_tokenizer(root / "tokenizer_json")
    return {
        "tokenizer_json": root / "tokenizer_json",
        "gpt2_class": _gpt2_class_folder(root / "gpt2_class"),
        "vocab_merges": _vocab_merges_folder(root / "vocab_merges"),
        "add_bos": _gpt2_class_folder(root / "add_bos", add_bos_token=True),
        "add_bos_config_only": _config_asks_for_bos(_gpt2_class_folder(root / "bos_config")),
        "vocab_merges_bos": _config_asks_for_bos(_vocab_merges_folder(root / "vocab_merges_bos")),
    }


def _config_asks_for_bos(folder: Path) -> Path:
    """tokenizer_config.json asks for BOS (transformers 5 obeys only without a tokenizer.json)."""
    path = folder / "tokenizer_config.json"
    saved = json.loads(path.read_text()) if path.exists() else {"tokenizer_class": "GPT2Tokenizer"}
    path.write_text(json.dumps({**saved, "add_bos_token": True}))
    return folder


KINDS = [
    "tokenizer_json", "gpt2_class", "vocab_merges", "add_bos", "add_bos_config_only",
    "vocab_merges_bos",
]


@pytest.mark.parametrize("kind", KINDS)
def test_ids_and_text_are_autotokenizers(folders: dict[str, Path], kind: str) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(folders[kind])
    tok = load_tokenizer(folders[kind])
    assert len(tok) == len(reference)
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == reference(text)["input_ids"], (kind, text)
        assert tok.decode(ids) == reference.decode(ids), (kind, text)
        if ids[:1] != [0]:
            assert tok.decode(ids) == text


def test_the_tokens_the_tokenizer_adds_are_included(folders: dict[str, Path]) -> None:
    plain = load_tokenizer(folders["gpt2_class"])
    for kind in ("add_bos", "vocab_merges_bos"):
        assert load_tokenizer(folders[kind]).encode("The cat") == [0, *plain.encode("The cat")]
    # A tokenizer.json's post-processor is the rule: the config's add_bos_token is not read.
    assert load_tokenizer(folders["add_bos_config_only"]).encode("The cat") == plain.encode("The cat")
    assert plain.encode("a<|endoftext|>b").count(0) == 1  # the special token is one token, not split


def test_a_vocab_merges_folder_is_named_by_its_files(folders: dict[str, Path]) -> None:
    assert load_tokenizer(folders["vocab_merges"]).files == ("vocab.json", "merges.txt")
    assert load_tokenizer(folders["tokenizer_json"]).files == ("tokenizer.json", "tokenizer_config.json")


def test_byte_level_labels_are_readable(folders: dict[str, Path]) -> None:
    tok = load_tokenizer(folders["tokenizer_json"])
    vocab = tok.backend.get_vocab()
    assert tok.label(vocab["Ġthe"]) == "␣the"
    assert tok.label(vocab["Ċ"]) == "↵"
    assert tok.label(vocab["ĉ"]) == "⇥"
    assert tok.label(vocab["Ā"]) == "<0x00>"  # a control byte
    assert tok.label(vocab["â"]) == "<0xE2>"  # the first byte of a split character
    assert tok.label(vocab["!"]) == "!"
    assert tok.label(0) == "<|endoftext|>"
    assert tok.label(10_000) == "<id 10000>"  # past the tokenizer (a model may pad its vocabulary)
    assert [tok.label(i) for i in tok.encode(" a\nb")] == ["␣a", "↵", "b"]


def test_sentencepiece_style_labels_keep_byte_fallbacks(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "▁the": 4, "▁cat": 5, "▁": 6, "t": 7}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>").save_pretrained(tmp_path)
    tok = load_tokenizer(tmp_path)
    assert [tok.label(i) for i in range(8)] == ["<unk>", "<s>", "</s>", "<0x0A>", "␣the", "␣cat", "␣", "t"]
    assert (tok.bos_id, tok.eos_id) == (1, 2)


def test_special_ids_come_from_generation_config_then_config_then_tokens(tmp_path: Path) -> None:
    save_tokenizer(tmp_path)
    tok = load_tokenizer(tmp_path)
    assert (tok.eos_id, tok.bos_id, tok.pad_id, tok.eos_ids) == (0, 0, None, (0,))
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 7, "bos_token_id": 6, "pad_token_id": 5}))
    tok = load_tokenizer(tmp_path)
    assert (tok.eos_id, tok.bos_id, tok.pad_id) == (7, 6, 5)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [9, 7], "pad_token_id": None}))
    tok = load_tokenizer(tmp_path)
    assert (tok.eos_id, tok.eos_ids, tok.bos_id, tok.pad_id) == (9, (9, 7), 6, 5)


def test_missing_or_broken_tokenizer_files_get_one_line(tmp_path: Path) -> None:
    with pytest.raises(PretrainedError, match="no tokenizer .looked for tokenizer.json, or vocab.json with merges.txt"):
        load_tokenizer(tmp_path)
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(PretrainedError, match="merges.txt without vocab.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    with pytest.raises(PretrainedError, match=r"tokenizer.json: not a tokenizer \(") as err:
        load_tokenizer(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer_config.json").write_text("{nope")
    with pytest.raises(PretrainedError, match="tokenizer_config.json: not JSON"):
        load_tokenizer(tmp_path)
