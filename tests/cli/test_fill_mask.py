"""``tfx-lab decode`` on an encoder-only run: fill-mask's JSON (masks in text order, each
with its position, top pieces and ids), the one-line refusals; train, eval and hooks on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import tfx, train_tiny_mlm


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, done = train_tiny_mlm(tmp_path_factory.mktemp("mlm"))
    assert json.loads(done.stdout)["exact_match"] is not None  # masked-character accuracy
    return out


def test_decode_fill_mask_json(mlm_run: Path) -> None:
    done = tfx("decode", "--run", str(mlm_run), "--input", "th_ cat s_t", "--top-k", "3", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [m["position"] for m in out["masks"]] == [2, 9]  # token index, in text order
    for m in out["masks"]:
        assert len(m["top"]) == len(m["ids"]) == 3
        probs = [p for _, p in m["top"]]
        assert probs == sorted(probs, reverse=True) and probs == [p for _, p in m["ids"]]
        assert all(isinstance(piece, str) and isinstance(i, int) for (piece, _), (i, _) in zip(m["top"], m["ids"], strict=True))
    assert len(out["steps"]) == 2 and "_" not in out["output"] and len(out["output"]) == len("th_ cat s_t")
    assert out["steps"][0]["prob"] >= max(m["ids"][0][1] for m in out["masks"]) - 1e-6  # most confident first


def test_no_mask_and_eval_and_hooks(mlm_run: Path) -> None:
    done = tfx("decode", "--run", str(mlm_run), "--input", "no masks here")
    assert done.returncode != 0 and "write _ where" in done.stderr and done.stderr.count("\n") == 1
    evaluated = json.loads(tfx("eval", "--run", str(mlm_run), "--json").stdout)
    assert evaluated["task"] == "masked-lm" and 0.0 <= evaluated["exact_match"] <= 1.0
    hooks = json.loads(tfx("hooks", "--run", str(mlm_run), "--json").stdout)
    names = [h["name"] for h in hooks["hooks"]]
    assert "blocks.0.attn.hook_pattern" in names and "hook_full_embed" in names


def test_fine_tuning_an_encoder_is_refused_in_one_line(tmp_path: Path) -> None:
    from bench.hf_factory import save_masked_lm

    save_masked_lm(tmp_path / "bert", "bert")
    (tmp_path / "text.txt").write_text("hello world. " * 400)
    done = tfx("train", "--model", str(tmp_path / "bert"), "--text", str(tmp_path / "text.txt"),
               "--steps", "2", "--out", str(tmp_path / "ft"))
    assert done.returncode != 0 and done.stderr.count("\n") == 1
    assert "cannot fine-tune" in done.stderr and "encoder-only" in done.stderr
    assert not (tmp_path / "ft").exists()
