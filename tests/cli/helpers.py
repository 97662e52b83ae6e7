"""Running ``tfx-lab`` in tests: in this process (fast) or as the real command (end to end)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# Committed runs: tiny-run never learned (it decodes everything to zeros; enough where a
# test only needs a run that opens); learned-copy has learned to copy (99.4% exact match).
TINY_RUN = DATA / "tiny-run"
LEARNED_RUN = DATA / "learned-copy"


def tfx(*args: str) -> subprocess.CompletedProcess[str]:
    """``tfx-lab ARGS`` in this process: the exact code the command runs, minus seconds of
    interpreter and torch start-up per call. An escaping exception fails the test (a
    traceback a user would see)."""
    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse's usage errors, --help and --version
            rc = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


def tfx_executable(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real command in a fresh interpreter (``python -m tui_lab.cli``)."""
    return subprocess.run(
        [sys.executable, "-m", "tui_lab.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    """A user mistake: non-zero exit, one line on stderr naming ``fragment``, no traceback."""
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert fragment in err, err


def last_json_line(text: str) -> dict:
    """The JSON summary ``--json`` prints last."""
    import json

    return json.loads(text.strip().splitlines()[-1])


# The refusal tests (issue 55): a decoder-only run with a context of 64 positions, text past
# it, and stand-ins that fail if the model is opened or run before the request is checked.
INDUCTION_RUN = str(DATA / "induction-run")
LONG_TEXT = "abcd" * 1250  # 5,000 characters, one token each


def no_loading(*_args: object, **_kwargs: object) -> object:
    raise AssertionError("the model was opened before the request was checked")


def no_forward(*_args: object, **_kwargs: object) -> object:
    raise AssertionError("the model ran before the input's length was checked")


# A tiny encoder-only run's preset (fill-mask): ``train_tiny_mlm`` trains it in a folder.
TINY_MLM = """\
model: {arch: encoder-only, n_encoder_layers: 1, d_model: 32, n_heads: 2, d_ff: 64,
        positional: learned, embed_norm: true, max_len: 32}
task: {name: masked-lm, block_size: 32}
train: {steps: 4, batch_size: 4, eval_every: 2, eval_examples: 8, warmup_steps: 1, device: cpu, threads: 1,
        history: false}
"""


def train_tiny_mlm(root: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Train ``TINY_MLM`` into ``root/run``; the run folder and the command's result."""
    (root / "tiny-mlm.yaml").write_text(TINY_MLM)
    out = root / "run"
    done = tfx("train", "--preset", str(root / "tiny-mlm.yaml"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return out, done


def assert_same_json(got: object, printed: str, rel: float = 1e-6) -> None:
    """``printed`` (one JSON line) is ``got``: the same keys, lists and strings, and the same
    numbers up to float rounding (a subprocess may sum in another order: its own thread count)."""

    def same(a: object, b: object, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            assert list(a) == list(b), where
            for key in a:
                same(a[key], b[key], f"{where}.{key}")
        elif isinstance(a, list) and isinstance(b, list):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                same(x, y, f"{where}[{i}]")
        elif isinstance(a, float) or isinstance(b, float):
            assert a == pytest.approx(b, rel=rel, abs=1e-12), where
        else:
            assert a == b, where

    same(json.loads(json.dumps(got)), json.loads(printed), "$")
