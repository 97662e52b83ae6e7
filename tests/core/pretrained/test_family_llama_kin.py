"""The families built on Llama (Qwen2, Qwen3, Gemma 1/2/3, Mistral, Phi-3, OLMo-2, and
Llama 3's scaled rotary), loaded into the lab's own model, against ``transformers``.

Each small model (``bench/hf_factory.py``) exercises its family's
differences: odd head counts, grouped key/value heads, ``head_dim`` apart from
hidden / heads, windows shorter than the 12-token prompts, soft-caps that bite. For
each: logits within 1e-4, attention within 1e-5, 32 greedy tokens identical, the
parameter count equal; each difference is shown to matter (switched off, the logits
move); the config in transformers 5's ``rope_parameters`` form and in the older
``rope_theta``/``rope_scaling`` form load the same model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.hf_factory import save_family, save_tokenizer
from tests.core.pretrained.family_reference import (
    assert_attention_matches,
    assert_greedy_matches,
    assert_logits_match,
    assert_parameter_count_matches,
    load_lab,
    prompt,
    reference_greedy,
)
from tui_lab.core.model.attention import MultiHeadAttention

FAMILIES = ["qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "mistral", "phi3", "olmo2", "llama3"]


def _attns(model: Any) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


def _no_windows(model: Any) -> None:
    for m in _attns(model):
        m.window = 0


def _no_softcaps(model: Any) -> None:
    for m in _attns(model):
        m.softcap = None
    model.config = type(model.config)(**{**model.config.__dict__, "logit_softcap": None})


def _no_qk_norm(model: Any) -> None:
    for m in _attns(model):
        m.q_norm = m.k_norm = None


def _global_rope_everywhere(model: Any) -> None:
    for m in _attns(model):
        m.rope = model.decoder.rope
    model.decoder.local_rope = None


def _no_output_norms(model: Any) -> None:
    for layer in model.decoder.layers:
        layer.norm1_post = layer.norm2_post = None


def _plain_rope(model: Any) -> None:
    from tui_lab.core.model.positions import RotaryEmbedding

    rope = model.decoder.rope
    fresh = RotaryEmbedding(rope.d_head, rope.base, model.config.max_len, model.config.rope_fraction)
    rope.inv_freq, rope.cos, rope.sin_signed = fresh.inv_freq, fresh.cos, fresh.sin_signed


# What each family adds to Llama; switched off, the model must compute something else.
DIFFERENCES: dict[str, list[Callable[[Any], None]]] = {
    "qwen2": [_no_windows],
    "qwen3": [_no_qk_norm],
    "gemma": [],
    "gemma2": [_no_windows, _no_softcaps, _no_output_norms],
    "gemma3_text": [_no_windows, _no_qk_norm, _global_rope_everywhere, _no_softcaps],
    "mistral": [_no_windows],
    "phi3": [_no_windows],
    "olmo2": [_no_qk_norm, _no_output_norms],
    "llama3": [_plain_rope],
}


@pytest.fixture(scope="module", params=FAMILIES)
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any]:
    folder = tmp_path_factory.mktemp(request.param)
    return request.param, folder, save_family(folder, request.param, tokenizer=False)


def test_logits(saved) -> None:
    _, folder, reference = saved
    assert_logits_match(reference, load_lab(folder)[1], prompt(length=12))


def test_attention(saved) -> None:
    _, folder, reference = saved
    assert_attention_matches(reference, load_lab(folder)[1], prompt(length=12))


def test_parameter_count(saved) -> None:
    _, folder, reference = saved
    assert_parameter_count_matches(reference, load_lab(folder)[0])


def test_greedy_32_tokens_with_the_kv_cache(saved) -> None:
    _, folder, reference = saved
    assert_greedy_matches(reference, load_lab(folder)[1], prompt())


def test_each_difference_matters(saved) -> None:
    family, folder, _ = saved
    tokens = prompt(length=12)
    with torch.no_grad():
        want = load_lab(folder)[1](tokens)
        for switch_off in DIFFERENCES[family]:
            model = load_lab(folder)[1]
            switch_off(model)
            assert (model(tokens) - want).abs().max() > 1e-3, f"{family}: {switch_off.__name__} changed nothing"


def _older_form(raw: dict[str, Any]) -> dict[str, Any]:
    """config.json as transformers 4 wrote it: ``rope_theta`` (``rope_local_base_freq``)
    at the top level, the scaling in ``rope_scaling``."""
    params = raw.pop("rope_parameters")
    if "full_attention" in params:  # Gemma 3: one object per layer type
        raw["rope_local_base_freq"] = params["sliding_attention"]["rope_theta"]
        params = params["full_attention"]
    raw["rope_theta"] = params.pop("rope_theta")
    if "partial_rotary_factor" in params:
        raw["partial_rotary_factor"] = params.pop("partial_rotary_factor")
    kind = params.get("rope_type", "default")
    raw["rope_scaling"] = None if kind == "default" else {**params, "type": kind}
    return raw


def test_both_rotary_forms_load_the_same_model(saved, tmp_path: Path) -> None:
    _, folder, reference = saved
    raw = json.loads((folder / "config.json").read_text())
    assert "rope_parameters" in raw  # transformers 5 writes the newer form
    older = tmp_path / "older"
    older.mkdir()
    (older / "config.json").write_text(json.dumps(_older_form(raw)))
    (older / "model.safetensors").symlink_to(folder / "model.safetensors")
    assert load_lab(older)[0] == load_lab(folder)[0]
    assert_logits_match(reference, load_lab(older)[1], prompt(length=12))


def test_bfloat16_holds_the_files_tensors_and_follows_the_reference(saved, tmp_path: Path) -> None:
    """Saved in bfloat16: the lab holds those very tensors (no float32 copy), its logits
    are within 5e-2 of transformers' own bfloat16 run, and along transformers' 32-token
    greedy continuation the lab's next-token choice agrees on at least 28 of 32.

    The choices are compared token by token on the same prefix: on random weights
    the top two logits are often closer than bfloat16's rounding, and one flipped
    near-tie would otherwise make every later token differ."""
    from tui_lab.core.opening.from_files import open_files, weight_bytes

    family, _, reference = saved
    half = reference.to(torch.bfloat16)
    try:
        folder = tmp_path / "bf16"
        half.save_pretrained(folder)
        save_tokenizer(folder, half.config.vocab_size)
        loaded = open_files(str(folder), dtype="bfloat16")
        model = loaded.model
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
        stored = {p.data_ptr(): p for p in half.parameters()}.values()
        assert weight_bytes(model) == sum(p.numel() * 2 for p in stored)
        assert loaded.card.dtype == "bfloat16" and "bfloat16" in dict(loaded.card.rows())["runs in"]
        with torch.no_grad():
            want, got = half(prompt(length=12)).logits.float(), model(prompt(length=12)).float()
            assert (got - want).abs().max() < 5e-2, family
            tokens = prompt()
            continuation = reference_greedy(half, tokens)  # (B, 10 + 32)
            start = tokens.size(1) - 1  # the logits that chose the first new token
            theirs = half(continuation).logits[:, start:-1].argmax(-1)
            ours = model(continuation)[:, start:-1].argmax(-1)
        assert ours.shape == (2, 32)
        assert all(int(n) >= 28 for n in (ours == theirs).sum(-1)), family
    finally:
        reference.float()


def test_tokenization_equals_transformers(tmp_path: Path) -> None:
    import transformers

    from tui_lab.core.opening.model_in_hand import open_model

    save_family(tmp_path, "qwen2", tokenizer=True)
    lab = open_model(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for text in ("The cat sat on the mat.", "  two spaces, a tab\tand a newline\n", "ünïcödé"):
        assert lab.to_tokens(text)[0].tolist() == theirs(text, add_special_tokens=False)["input_ids"]
