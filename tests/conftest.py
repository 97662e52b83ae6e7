"""Shared fixtures: tiny presets that train in seconds on a CPU."""

from __future__ import annotations

import gc
import os
import sys

import pytest

# One intra-op thread per test process, and in every process a test starts (set before
# torch is imported, so it is torch's default). The suite runs one pytest worker per core:
# a second torch thread per worker only contends for a core another worker holds, and
# OpenMP threads waiting on a busy core made small forward passes ten times slower
# (tests/core/decoding/test_decode.py's cache tests: 45 s with two threads, 4 s with one).
# Tests of the thread settings themselves set counts explicitly.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.hf_fixtures.no_network import no_network  # noqa: F401  (any test may forbid sockets)
from tui_lab.core.config.lab_config import LabConfig, from_dict


def _own_cache() -> None:
    """The lab's cache folder (SAE activations and feature tables, the matmul peak's probe) in a
    folder of the suite's own, removed at the end, so a test run neither reads what the user's
    lab kept nor leaves anything there. The workers and the lab's subprocesses inherit it."""
    if "TFX_LAB_CACHE" in os.environ:
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="tfx-lab-test-cache-")
    os.environ["TFX_LAB_CACHE"] = folder
    atexit.register(shutil.rmtree, folder, True)


_own_cache()


def _finer_pilot_idle() -> None:
    """Textual's pilot waits, after every key and pause, until the process has used under
    1 ms of CPU in a 20 ms sleep: at least 40 ms a key, in which the test does nothing.
    The same test of idleness (CPU under a twentieth of the time slept) over 5 ms sleeps:
    the Build pane's tests took 47 s instead of 63 s, for the same CPU time. A machine
    without textual (the GPU check runs tests/gpu on a bare PyTorch image) has no pilot
    to tune."""
    try:
        import textual._wait as wait
    except ModuleNotFoundError:
        return

    wait.SLEEP_GRANULARITY = 1 / 200
    wait.SLEEP_IDLE = wait.SLEEP_GRANULARITY / 20


_finer_pilot_idle()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Shorter garbage collections in each test process. What the collection imported
    (pytest, textual, transformers, the test modules) lives as long as the process:
    frozen, no later collection walks it. The labs the tests start allocate far faster
    than a person's keys do: with the youngest generation collected every 10,000
    allocations rather than 700, a worker's full collections walk the heap a tenth as
    often (6-8 s of a worker's 36-40 s of CPU in the Build, Decode and app tests,
    against 3.5 s). The lab keeps Python's 700 (``core_access``): its collections stay
    short, under a key press."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(10_000, middle, oldest)


@pytest.fixture(autouse=True)
def _drop_dead_widgets_render_caches():  # type: ignore[no-untyped-def]
    """Textual's ``StylesCache.get_inner_outer`` is an ``lru_cache`` on a method: it keeps
    the last 1,024 widgets' render caches alive, with every line they drew
    (Textualize/textual#6665). Over the suite's labs that was 450,000 objects per
    worker, which each of Python's full collections walked again, and pytest's five
    at the end took 10 s. Cleared after every test (no lab outlives its test)."""
    yield
    styles_cache = sys.modules.get("textual._styles_cache")
    method = getattr(getattr(styles_cache, "StylesCache", None), "get_inner_outer", None)
    if method is not None and hasattr(method, "cache_clear"):
        method.cache_clear()


def tiny_config(**sections: dict) -> LabConfig:
    """A small copy model; pass model=/task=/train= dicts to change it."""
    data = {
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64},
        "task": {"name": "copy", "min_len": 1, "max_len": 5},
        "train": {"steps": 30, "batch_size": 16, "eval_every": 10, "eval_examples": 32,
                  "warmup_steps": 5, "device": "cpu", "threads": 1},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return from_dict(data, source="<tiny>", name="tiny")


@pytest.fixture
def tiny() -> LabConfig:
    return tiny_config()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close the training processes and the fork server the lab's tests started.

    Nothing outlives the suite, and their CPU time is counted where the suite's is
    (a process no one waits for is missing from ``time``'s figures).
    """
    remote = sys.modules.get("tui_lab.core.training.remote")
    if remote is not None:
        remote.shutdown_all()
        remote.stop_fork_server()
