"""``--model SOURCE`` on decode, params and ablate: a real model's folder, against ``transformers``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.hf_factory import save_family
from tests.cli.helpers import assert_one_line_error, tfx

PROMPT = "The cat sat on the mat. The dog"


@pytest.fixture(scope="module")
def neox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("neox")
    return folder, save_family(folder, "gpt_neox")


def reference_ids(folder: Path, text: str) -> torch.Tensor:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)(text, return_tensors="pt").input_ids


def test_decode_json_gives_the_generated_ids_and_each_steps_probability(neox) -> None:
    folder, ref = neox
    proc = tfx("decode", "--model", str(folder), "--input", PROMPT, "--max-new", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ids = reference_ids(folder, PROMPT)
    with torch.no_grad():
        logits = ref(ids).logits[0, -1]
        expected = ref.generate(ids, do_sample=False, max_new_tokens=8)[0, ids.size(1):]
    assert out["tokens"] == expected.tolist()
    first = out["steps"][0]
    assert first["prob"] == pytest.approx(float(logits.softmax(-1).max()), abs=1e-4)
    assert len(out["steps"]) == len(out["tokens"]) and out["input"] == PROMPT


def test_params_counts_like_the_reference(neox) -> None:
    folder, ref = neox
    out = json.loads(tfx("params", "--model", str(folder), "--json").stdout)
    assert out["total"] == ref.num_parameters()
    assert sum(r["params"] for r in out["rows"]) == out["total"]
    assert out["model"] == str(folder)


def test_ablate_measures_the_loss_the_reference_gives(neox) -> None:
    folder, ref = neox
    proc = tfx("ablate", "--model", str(folder), "--input", PROMPT, "--head", "decoder.1.self:2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ids = reference_ids(folder, PROMPT)
    with torch.no_grad():
        expected = float(ref(ids, labels=ids).loss)
    assert out["baseline"] == pytest.approx(expected, abs=1e-4)
    assert out["rise"] == pytest.approx(out["loss"] - out["baseline"], abs=1e-9)
    assert out["loss"] != pytest.approx(out["baseline"], abs=1e-6)  # the head did something
    assert out["n_tokens"] == ids.size(1) - 1


def test_ablate_without_a_head_ranks_every_head_by_its_rise(neox, tmp_path) -> None:
    folder, _ = neox
    text = tmp_path / "story.txt"
    text.write_text(PROMPT + " ran to the park.\n")
    proc = tfx("ablate", "--model", str(folder), "--text", str(text))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "baseline loss" in lines[0] and lines[1].split() == ["head", "loss", "rise"]
    rises = [float(line.split()[2]) for line in lines[2:]]
    assert len(rises) == 2 * 4 and rises == sorted(rises, reverse=True)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["ablate", "--model", "{folder}"], "give --text FILE or --input TEXT"),
        (["decode", "--model", "{folder}", "--input", "x", "--at-step", "3"], "has none"),
        (["ablate", "--run", "{folder}", "--input", "x"], "go with --model"),
        (["decode", "--model", "{folder}", "--input", "the cat " * 80], "context is 64"),
    ],
)
def test_mistakes_are_one_line(neox, args, fragment) -> None:
    folder, _ = neox
    assert_one_line_error(tfx(*[a.format(folder=folder) for a in args]), fragment)


def test_a_name_missing_from_the_cache_says_how_to_get_it(tmp_path, monkeypatch, no_network) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    proc = tfx("decode", "--model", "EleutherAI/pythia-14m", "--input", "hello")
    assert_one_line_error(proc, "hf download EleutherAI/pythia-14m")


def test_heads_scores_a_real_model_on_the_standard_probe(neox) -> None:
    folder, _ = neox
    out = json.loads(tfx("heads", "--model", str(folder), "--json").stdout)
    assert out["model"] == str(folder) and out["task"] == "token-lm"
    assert set(out["probes"]) == {"repeat"}
    assert len(out["heads"]) == 2 * 4
    table = tfx("heads", "--model", str(folder)).stdout.splitlines()
    assert table[0] == f"{folder}: gpt_neox model; heads by best score"
    assert any("no clear pattern" in line for line in table)  # random weights: no pattern
