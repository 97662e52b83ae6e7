"""Marian (opus-mt) loaded into the lab's own EncoderDecoder, against ``transformers``' MarianMTModel.

On a random-weight ``save_pretrained`` folder with its own SentencePiece
tokenizer (``bench/hf_factory.py``): logits within 1e-4, every
encoder self, decoder self and cross attention map within 1e-5 of
``output_attentions``, the sinusoid table equal to Marian's own, and a greedy
translation through ``open_files`` + ``generate`` identical to
``generate(num_beams=1, do_sample=False)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.hf_factory import MARIAN_VOCAB, save_marian
from tests.core.pretrained.family_reference import rewrite
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.capture import capture_attention
from tui_lab.core.model.params import parameter_report
from tui_lab.core.model.positions import sinusoid_table
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.files import open_tensors, read_config

PAD = MARIAN_VOCAB - 1
SOURCE = "The cat sat on the mat. The dog sat on the log."


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("marian")
    return folder, save_marian(folder)


@pytest.fixture(scope="module")
def loaded(saved):
    return build_pretrained(read_config(saved[0]), open_tensors(saved[0]))


def batch(length: int, seed: int = 0, batch_size: int = 2) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, PAD, (batch_size, length), generator=gen)  # every id but pad


def reference_ids(folder: Path, text: str) -> torch.Tensor:
    from transformers import MarianTokenizer

    return MarianTokenizer.from_pretrained(folder)(text, return_tensors="pt").input_ids


def test_logits(saved, loaded) -> None:
    src, tgt = batch(13), batch(9, seed=1)
    with torch.no_grad():
        want = saved[1](input_ids=src, decoder_input_ids=tgt).logits
        got = loaded[1](src, tgt)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_logits_with_a_padded_source(saved, loaded) -> None:
    """A shorter source padded with pad: the lab's source mask is the reference's attention_mask."""
    src, tgt = batch(11), batch(6, seed=2)
    src[1, 7:] = PAD
    with torch.no_grad():
        want = saved[1](input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
        got = loaded[1](src, tgt)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_encoder_decoder_and_cross_attention(saved, loaded) -> None:
    src, tgt = batch(10), batch(7, seed=3)
    with torch.no_grad():
        want = saved[1](input_ids=src, decoder_input_ids=tgt, output_attentions=True)
        with capture_attention(loaded[1]) as store:
            loaded[1](src, tgt)
    got = store.matrices()
    for kind, maps in (("encoder.{}.self", want.encoder_attentions),
                       ("decoder.{}.self", want.decoder_attentions),
                       ("decoder.{}.cross", want.cross_attentions)):
        assert len(maps) == 2
        for i, w in enumerate(maps):
            g = got[kind.format(i)]
            assert g.shape == w.shape  # (B, heads, T_query, T_key); cross: target x source
            torch.testing.assert_close(g, w, atol=1e-5, rtol=0)


def test_sinusoids_are_marians_own_table(saved) -> None:
    """All sines, then all cosines: not the paper's interleaved pairs."""
    want = saved[1].model.encoder.embed_positions.weight
    torch.testing.assert_close(sinusoid_table(64, 32, layout="halves"), want, atol=1e-5, rtol=0)
    assert not torch.allclose(sinusoid_table(64, 32), want, atol=1e-3)


def test_settings_read_from_config(loaded) -> None:
    config, model = loaded
    assert (config.arch, config.norm, config.activation, config.sinusoid_layout) == (
        "encoder-decoder", "post", "silu", "halves")
    assert config.scale_embeddings and config.head_bias and config.share_embeddings
    assert model.src_embed is model.tgt_embed and model.lm_head.weight is model.tgt_embed.weight
    assert model.pad_id == PAD


def test_parameter_count(saved, loaded) -> None:
    """The reference counts its two fixed sinusoid tables as parameters and its logits bias
    as a buffer; the lab computes the tables and keeps the bias as ``lm_head.bias``."""
    config, _ = loaded
    ref = saved[1]
    tables = sum(m.embed_positions.weight.numel() for m in (ref.model.encoder, ref.model.decoder))
    expected = ref.num_parameters() - tables + ref.final_logits_bias.numel()
    assert parameter_report(config, config.vocab_size).total == expected


def test_weights_are_the_files_tensors(saved) -> None:
    tensors = open_tensors(saved[0])
    _, model = build_pretrained(read_config(saved[0]), tensors)
    # Square projections are the file's own; the shared (vocab, d) embedding and head
    # is re-laid for decoding, once, and stays shared (test_layout.py).
    q = tensors["model.decoder.layers.1.encoder_attn.q_proj.weight"]
    assert model.decoder.layers[1].cross_attn.w_q.weight.data_ptr() == q.data_ptr()
    shared = tensors["model.shared.weight"]
    assert model.src_embed.weight is model.tgt_embed.weight is model.lm_head.weight
    assert model.src_embed.weight.data_ptr() != shared.data_ptr()
    assert torch.equal(model.src_embed.weight, shared)


def reference_translation(saved, text: str, steps: int) -> list[int]:
    """``generate(num_beams=1, do_sample=False)`` with the generation config's banned pad; the
    length cut's forced ``</s>`` (``forced_eos_token_id``) is off, as the lab has none."""
    folder, ref = saved
    ids = reference_ids(folder, text)
    with torch.no_grad():
        out = ref.generate(ids, num_beams=1, do_sample=False, max_new_tokens=steps, forced_eos_token_id=None)
    assert int(out[0, 0]) == ref.config.decoder_start_token_id
    return out[0, 1:].tolist()


@pytest.fixture(scope="module")
def opened(saved):
    return open_files(str(saved[0]))


def test_greedy_translation_equals_generate(saved, opened) -> None:
    result = generate(opened.model, opened.task, SOURCE, max_new_tokens=24)
    want = reference_translation(saved, SOURCE, 24)
    assert result.tokens == want[: len(result.tokens)]
    assert len(result.tokens) == len(want) or result.stopped == "eos"
    assert len(set(result.tokens)) > 1  # a translation, not one id repeated


def test_generate_shows_source_pieces_against_target_pieces(saved, opened) -> None:
    from transformers import MarianTokenizer

    result = generate(opened.model, opened.task, SOURCE, max_new_tokens=6)
    tok = MarianTokenizer.from_pretrained(saved[0])
    source_pieces = [p.replace("▁", "␣") for p in tok.convert_ids_to_tokens(reference_ids(saved[0], SOURCE)[0])]
    queries, keys = result.labels["decoder.0.cross"]
    assert keys == source_pieces and keys[-1] == "</s>"
    assert queries[0] == "<pad>"  # the decoder starts at pad, opus-mt's decoder_start_token_id
    assert result.labels["encoder.1.self"] == (source_pieces, source_pieces)
    assert result.attention["decoder.1.cross"].shape == (4, len(queries), len(keys))


def test_pad_is_never_generated(saved, tmp_path: Path) -> None:
    """A logits bias that makes pad the argmax everywhere: both pick the next best."""
    folder = rewrite(saved[0], tmp_path / "m", tensors=lambda s: {
        **s, "final_logits_bias": s["final_logits_bias"].index_fill(1, torch.tensor([PAD]), 50.0)})
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "generation_config.json"):
        (folder / name).write_bytes((saved[0] / name).read_bytes())
    loaded = open_files(str(folder))
    assert PAD in loaded.task.banned_ids
    result = generate(loaded.model, loaded.task, SOURCE, max_new_tokens=8)
    assert PAD not in result.tokens
    import transformers

    ref = transformers.MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        want = ref.generate(reference_ids(folder, SOURCE), num_beams=1, do_sample=False, max_new_tokens=8,
                            forced_eos_token_id=None, bad_words_ids=[[PAD]])
    assert result.tokens == want[0, 1:].tolist()[: len(result.tokens)]


def test_separate_embeddings_and_an_untied_head(tmp_path: Path) -> None:
    ref = save_marian(tmp_path, tokenizer=False, share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    config, model = build_pretrained(read_config(tmp_path), open_tensors(tmp_path))
    assert not config.share_embeddings and not config.tie_embeddings
    assert model.src_embed is not model.tgt_embed
    src, tgt = batch(8), batch(5, seed=4)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), ref(input_ids=src, decoder_input_ids=tgt).logits,
                                   atol=1e-4, rtol=0)


def one_line(exc: pytest.ExceptionInfo[PretrainedError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_a_missing_tensor_is_named(saved, tmp_path: Path) -> None:
    name = "model.decoder.layers.1.encoder_attn.k_proj.weight"
    folder = rewrite(saved[0], tmp_path / "m", tensors=lambda s: {k: v for k, v in s.items() if k != name})
    with pytest.raises(PretrainedError) as exc:
        build_pretrained(read_config(folder), open_tensors(folder))
    assert name in one_line(exc) and "model.safetensors" in one_line(exc)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (dict(decoder_attention_heads=2), "decoder_attention_heads"),
        (dict(decoder_vocab_size=50), "decoder_vocab_size"),
        (dict(normalize_before=True), "normalize_before"),
        (dict(activation_function="mish"), "activation_function"),
    ],
)
def test_settings_the_lab_cannot_build_are_one_line(saved, tmp_path: Path, change, fragment) -> None:
    folder = rewrite(saved[0], tmp_path / "m", config=lambda raw: {**raw, **change})
    with pytest.raises(PretrainedError) as exc:
        build_pretrained(read_config(folder), open_tensors(folder))
    assert fragment in one_line(exc) and "config.json" in one_line(exc)


def test_a_missing_spm_is_one_line(saved, tmp_path: Path) -> None:
    folder = rewrite(saved[0], tmp_path / "m")
    for name in ("target.spm", "vocab.json"):
        (folder / name).write_bytes((saved[0] / name).read_bytes())
    with pytest.raises(PretrainedError) as exc:
        open_files(str(folder))
    assert "source.spm" in one_line(exc) and "missing" in one_line(exc)


def test_a_vocabulary_of_another_model_is_one_line(saved, tmp_path: Path) -> None:
    folder = rewrite(saved[0], tmp_path / "m")
    for name in ("source.spm", "target.spm", "tokenizer_config.json"):
        (folder / name).write_bytes((saved[0] / name).read_bytes())
    vocab = json.loads((saved[0] / "vocab.json").read_text())
    vocab["<pad>"] = 2 * MARIAN_VOCAB  # a bigger model's vocabulary
    (folder / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(PretrainedError) as exc:
        open_files(str(folder))
    assert "another model" in one_line(exc) and f"{MARIAN_VOCAB}" in one_line(exc)
