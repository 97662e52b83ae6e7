"""Running ``tfx-lab`` in tests: in this process (fast) or as the real command (end to end)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

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
