"""`tfx-lab hooks`: every hook point with its shape, for a run and for a model from files."""

from __future__ import annotations

import json
from pathlib import Path

from bench.hf_factory import save_family
from tests.cli.helpers import TINY_RUN
from tui_lab.cli import main


def test_hooks_of_a_run_as_json(capsys) -> None:
    assert main(["hooks", "--run", str(TINY_RUN), "--input", "1234", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    shapes = {h["name"]: h["shape"] for h in data["hooks"]}
    assert data["tokens"] == ["1", "2", "3", "4"]
    # the tiny run: d_model 16, 2 heads; the encoder reads the 4 digits, the decoder its start token
    assert shapes["encoder.0.hook_resid_pre"] == [1, 4, 16]
    assert shapes["encoder.0.attn.hook_q"] == [1, 4, 2, 8]
    assert shapes["encoder.0.attn.hook_pattern"] == [1, 2, 4, 4]
    assert shapes["decoder.0.cross_attn.hook_pattern"] == [1, 2, 1, 4]
    assert shapes["decoder.0.cross_attn.hook_k"] == [1, 4, 2, 8]
    assert list(shapes)[0] == "encoder.hook_embed"


def test_hooks_of_a_model_from_files_as_text(tmp_path: Path, capsys) -> None:
    save_family(tmp_path, "llama", tokenizer=True)
    assert main(["hooks", "--model", str(tmp_path), "--input", "hello there"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "hook points on" in out[0]
    rows = dict(line.split(None, 1) for line in out[1:])
    assert rows["hook_embed"].startswith("(1, ")
    assert "hook_pos_embed" not in rows  # rotary positions: nothing is added to the embeddings
    # grouped-query attention: 2 key/value heads before they are repeated for 4 query heads
    assert rows["blocks.0.attn.hook_k"].endswith(", 2, 8)") and rows["blocks.0.attn.hook_q"].endswith(", 4, 8)")
    assert "blocks.0.mlp.hook_pre_linear" in rows and "ln_final.hook_normalized" in rows


def test_hooks_of_a_missing_run_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["hooks", "--run", str(tmp_path / "nothing")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing" in err
