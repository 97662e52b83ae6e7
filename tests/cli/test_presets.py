"""``tfx-lab presets``: every shipped preset and the user's own, as JSON and as a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import tfx
from tui_lab.core.config.presets import SHIPPED_DIR

SHIPPED = sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


@pytest.fixture(autouse=True)
def user_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "my-presets"
    folder.mkdir()
    monkeypatch.setenv("TFX_LAB_PRESETS", str(folder))
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps a narrow table's cells
    return folder


def test_presets_json_lists_every_shipped_preset() -> None:
    proc = tfx("presets", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert sorted(r["name"] for r in rows) == SHIPPED
    assert {"copy", "reverse", "sort", "addition", "char-lm", "seed-mini", "paper-base"} <= set(SHIPPED)
    copy = next(r for r in rows if r["name"] == "copy")
    assert copy["shipped"] and copy["arch"] == "encoder-decoder" and copy["task"] == "copy"
    assert all(r["error"] is None for r in rows)


def test_presets_table_shows_each_row_and_a_broken_user_preset(user_presets: Path) -> None:
    (user_presets / "mine.yaml").write_text("description: my own\ntask:\n  name: reverse\n")
    (user_presets / "broken.yaml").write_text("model:\n  d_modle: 64\n")
    rows = {r["name"]: r for r in json.loads(tfx("presets", "--json").stdout)}
    proc = tfx("presets")
    assert proc.returncode == 0, proc.stderr
    lines = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in proc.stdout.splitlines() if line.startswith("│")}
    assert sorted(lines) == sorted(rows) == sorted([*SHIPPED, "mine", "broken"])
    for name, r in rows.items():
        kind, arch, task, description = lines[name]
        assert kind == ("shipped" if r["shipped"] else "user")
        assert (arch, task) == (r["arch"] or "-", r["task"] or "-")
        if r["error"] is None:
            assert description == r["description"]
    assert lines["mine"][:3] == ["user", "encoder-decoder", "reverse"]
    assert "d_modle" in lines["broken"][3] and lines["broken"][1:3] == ["-", "-"]
