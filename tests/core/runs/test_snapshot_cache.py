"""SnapshotCache: a snapshot read and checked once, then copied from memory; bounded, LRU."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.snapshots import (
    HISTORY_DIR,
    INDEX_FILE,
    SnapshotCache,
    list_snapshots,
    load_snapshot,
)
from tui_lab.core.training.train import TrainingRun


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    out = tmp_path_factory.mktemp("cache") / "run"
    training = TrainingRun(tiny_config(model={"tie_embeddings": True}), out)
    training.run()
    return out, training.model


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_second_load_comes_from_memory_with_the_same_weights(run):
    out, model = run
    steps = list_snapshots(out)
    assert len(steps) >= 3
    cache = SnapshotCache()
    first, again, plain = copy.deepcopy(model), copy.deepcopy(model), copy.deepcopy(model)
    cache.load(out, steps[0], first)
    cache.load(out, steps[-1], again)  # another step in between
    cache.load(out, steps[0], again)
    load_snapshot(out, steps[0], plain)
    assert (cache.hits, cache.misses) == (1, 2) and len(cache) == 2
    assert same_weights(first, plain) and same_weights(again, plain)


def test_cached_weights_are_copies_and_tied_weights_kept_once(run):
    out, model = run
    step = list_snapshots(out)[0]
    cache = SnapshotCache()
    target = copy.deepcopy(model)
    cache.load(out, step, target)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(1.0)  # changing a loaded model never changes what the cache holds
    again = copy.deepcopy(model)
    cache.load(out, step, again)
    plain = copy.deepcopy(model)
    load_snapshot(out, step, plain)
    assert same_weights(again, plain)
    unique = {t.data_ptr(): t.numel() * t.element_size() for t in model.state_dict().values()}
    assert len(unique) < len(model.state_dict())  # the tied embeddings share one tensor
    assert cache.bytes == sum(unique.values())


def test_bounded_least_recently_used_first_out(run):
    out, model = run
    steps = list_snapshots(out)
    one = sum(p.numel() * p.element_size() for p in model.parameters())
    cache = SnapshotCache(max_bytes=int(one * 2.5))  # room for two
    for step in steps[:3]:
        cache.load(out, step, copy.deepcopy(model))
    assert len(cache) == 2 and cache.bytes <= cache.max_bytes
    cache.load(out, steps[0], copy.deepcopy(model))  # the oldest went out: read again
    assert cache.misses == 4
    none = SnapshotCache(max_bytes=0)  # too small for any: loads still work
    none.load(out, steps[0], copy.deepcopy(model))
    assert len(none) == 0


def test_a_rewritten_snapshot_is_read_again_and_checked(run, tmp_path):
    out, model = run
    folder = tmp_path / "run"
    (folder / HISTORY_DIR).mkdir(parents=True)
    for f in (out / HISTORY_DIR).iterdir():
        (folder / HISTORY_DIR / f.name).write_bytes(f.read_bytes())
    step = list_snapshots(folder)[0]
    cache = SnapshotCache()
    cache.load(folder, step, copy.deepcopy(model))
    index_path = folder / HISTORY_DIR / INDEX_FILE
    index = json.loads(index_path.read_text())
    for r in index["snapshots"]:
        if r["step"] == step:
            r["sha256"] = "0" * 64  # the index now names other contents: no cache hit
    index_path.write_text(json.dumps(index))
    with pytest.raises(RunError, match="corrupted"):
        cache.load(folder, step, copy.deepcopy(model))
    with pytest.raises(RunError, match="no snapshot at step"):
        cache.load(folder, 10**6, copy.deepcopy(model))
