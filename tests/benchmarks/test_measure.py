"""The latency measurement's key order and percentile (the pty session itself is a benchmark)."""

from __future__ import annotations

from bench.measure import PANE_TEXT, key_order, percentile


def test_key_order_switches_pane_every_press_and_visits_all() -> None:
    keys = key_order(50)
    assert len(keys) == 50
    assert keys[0] != "2"  # the session starts on the Train pane
    assert all(a != b for a, b in zip(keys, keys[1:], strict=False))  # each press changes pane
    assert set(keys) == set(PANE_TEXT)
    assert key_order(50) == keys  # the same order every run


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 0.5) == 11.0  # index round(0.5 * 19) = 10 (banker's rounding)
    assert percentile(values, 0.95) == 19.0  # index round(18.05) = 18
    assert percentile(values, 1.0) == 20.0
    assert percentile([7.0], 0.95) == 7.0
