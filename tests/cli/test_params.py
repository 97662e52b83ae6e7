"""``tfx-lab params``: a preset's parameter breakdown, counted by hand, as JSON and a table."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import tfx


def test_params_json_paper_base() -> None:
    proc = tfx("params", "--preset", "paper-base", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    d, f, v, n = 512, 2048, 37000, 6
    attn = 4 * (d * d + d)
    ff = d * f + f + f * d + d
    enc = attn + ff + 2 * 2 * d
    dec = 2 * attn + ff + 3 * 2 * d
    assert data["total"] == v * d + n * enc + n * dec
    assert sum(r["params"] for r in data["rows"]) == data["total"]
    assert all({"name", "params"} <= set(r) for r in data["rows"])
    assert data["fp32_bytes"] == 4 * data["total"] and data["bf16_bytes"] == 2 * data["total"]


def test_params_table_is_the_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    data = json.loads(tfx("params", "--preset", "copy", "--json").stdout)
    proc = tfx("params", "--preset", "copy")
    assert proc.returncode == 0, proc.stderr
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in proc.stdout.splitlines()
             if line.startswith("│")]
    assert [c[:2] for c in cells] == [
        *[[r["name"], f"{r['params']:,}"] for r in data["rows"]], ["total", f"{data['total']:,}"]]
    for c, r in zip(cells, data["rows"], strict=False):
        assert c[2] == f"{r['params'] / data['total']:.1%}"
    assert proc.stdout.splitlines()[-1] == (
        f"memory: {data['fp32_bytes'] / 2**20:.1f} MiB fp32, {data['bf16_bytes'] / 2**20:.1f} MiB "
        f"bf16; FLOPs/token: {data['train_flops_per_token']:,.0f} train, "
        f"{data['infer_flops_per_token']:,.0f} inference")
