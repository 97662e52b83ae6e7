"""``--model SOURCE`` on a Marian translator's folder: decode, heads, ablate and params,
against ``transformers``' MarianMTModel and MarianTokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.hf_factory import save_marian
from tests.cli.helpers import assert_one_line_error, tfx

SOURCE = "The cat sat on the mat."


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("marian")
    return folder, save_marian(folder)


def test_decode_json_is_the_reference_translation(marian) -> None:
    from transformers import MarianTokenizer

    folder, ref = marian
    proc = tfx("decode", "--model", str(folder), "--input", SOURCE, "--max-new", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    tok = MarianTokenizer.from_pretrained(folder)
    ids = tok(SOURCE, return_tensors="pt").input_ids
    with torch.no_grad():
        want = ref.generate(ids, num_beams=1, do_sample=False, max_new_tokens=10, forced_eos_token_id=None,
                            bad_words_ids=[[ref.config.pad_token_id]])[0, 1:]
        start = torch.tensor([[ref.config.decoder_start_token_id]])
        first = ref(input_ids=ids, decoder_input_ids=start).logits[0, -1]
    assert out["tokens"] == want.tolist()[: len(out["tokens"])]
    assert out["output"] == tok.decode(out["tokens"])
    first[ref.config.pad_token_id] = float("-inf")  # never generated: not among the candidates either
    assert out["steps"][0]["prob"] == pytest.approx(float(first.softmax(-1).max()), abs=1e-4)


def test_heads_scores_cross_attention_by_sharpness_and_monotonicity(marian) -> None:
    folder, _ = marian
    out = json.loads(tfx("heads", "--model", str(folder), "--json").stdout)
    cross = [h for h in out["heads"] if h["name"].endswith(".cross")]
    assert len(out["heads"]) == 24 and len(cross) == 8
    assert all(set(h["scores"]) == {"sharp", "monotonic"} for h in cross)
    assert set(out["probes"]) == {"translation"} and out["task"] == "translation"


def test_ablate_on_a_translator_is_one_line(marian) -> None:
    folder, _ = marian
    assert_one_line_error(tfx("ablate", "--model", str(folder), "--input", SOURCE), "translator")
