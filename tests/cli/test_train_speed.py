"""``tfx-lab train --json`` with Muon: the speed keys (mfu, flops_per_token, peak_flops,
optimizer) beside the old ones, the groups' records in metrics.jsonl, and a bad
optimizer refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, last_json_line, tfx
from tests.conftest import tiny_config


def _preset(tmp_path: Path, **train: object) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_config(train={"steps": 4, "eval_every": 4, **train}).to_yaml())
    return path


def test_train_json_reports_mfu_and_the_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    proc = tfx("train", "--preset", str(_preset(tmp_path, optimizer="muon")), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = last_json_line(proc.stdout)
    for key in ("reason", "step", "loss", "val_loss", "tokens_per_s", "device", "run"):  # kept
        assert key in summary
    assert summary["optimizer"] == "muon" and 0 < summary["mfu"] < 1
    assert summary["flops_per_token"] > 0 and summary["peak_flops"] > 1e7
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    groups = [r for r in lines if r["kind"] == "optimizer"]
    assert [r["step"] for r in groups] == [1, 2, 3, 4]  # a short run: every update
    assert set(groups[0]["groups"]) == {"muon", "embed", "no_decay"}
    assert all(set(g) == {"lr", "grad_norm", "update_ratio"} for g in groups[0]["groups"].values())


def test_an_unknown_optimizer_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  optimizer: lion\n")
    assert_one_line_error(tfx("train", "--preset", str(path), "--json"), "train.optimizer")
