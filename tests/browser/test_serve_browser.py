"""`tfx-lab serve` in a real browser: headless Chromium opens the page, keys train a model.

The page draws the terminal with xterm.js on a canvas, so there is no text in
the DOM to read. An init script catches the page's xterm ``Terminal`` as
textual-serve's client creates it (the client assigns ``this.fitAddon`` right
after ``this.terminal``; a setter on Object.prototype sees that one
assignment), and the test reads the screen from the terminal's own buffer:
exactly the characters a person sees. ``?`` and ``ctrl+p`` open help and the
palette, ``2`` and ``space`` start training, which is checked twice: the step
counter on screen goes up, and the run folder's ``metrics.jsonl`` grows.

Needs Debian's ``chromium`` (``.ci/run`` installs it): without it the test
fails, it is never skipped. ``TFX_LAB_SCREENSHOTS=1`` also writes
``screenshots/browser.png``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
# Without these, Chromium on a machine with no outside network has its connections refused.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "screenshots" / "browser.png"
WAIT = 90.0  # seconds for anything to appear; a loaded 2-core CI machine is slow

# A small copy model on one thread: trains steadily, leaves the other core to the suite.
TINY_PRESET = """\
description: A tiny copy model for the browser test.
model: {d_model: 32, n_heads: 2, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 64}
task: {name: copy, min_len: 1, max_len: 6}
train: {steps: 3000, batch_size: 32, lr: 3.0e-3, warmup_steps: 20, eval_every: 100,
        eval_examples: 64, device: cpu, threads: 1}
"""

# Runs before the page's scripts: keep textual-serve's xterm Terminal where the test can read it.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "fitAddon", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "fitAddon",
      {value: value, writable: true, configurable: true, enumerable: true});
    if (this.terminal && this.terminal.buffer) window.__tfxTerminal = this.terminal;
  },
});
"""
READ_SCREEN = """() => {
  const term = window.__tfxTerminal;
  if (!term) return null;
  const buffer = term.buffer.active;
  const rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
}"""
STEP = re.compile(r"\bstep\s+([\d,]+)\s*/\s*([\d,]+)")


@dataclass
class Served:
    url: str
    runs: Path
    log: Path
    process: subprocess.Popen[bytes]

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(what: str, probe: Callable[[], Any], timeout: float = WAIT,
              explain: Callable[[], str] = lambda: "") -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{explain()}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server (it quits its labs), then kill whatever is left of its process group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:  # the labs and their training processes share the server's group
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait(timeout=15)


@contextlib.contextmanager
def serving(tmp_path: Path, preset: str | None = None) -> Iterator[Served]:
    """``tfx-lab serve`` on a free local port, a tiny preset (or ``preset``), runs in
    a temporary folder (named relative to it, as the lab shows it: ``runs/...``)."""
    if preset is None:
        preset = str(tmp_path / "tiny.yaml")
        Path(preset).write_text(TINY_PRESET)
    runs = tmp_path / "runs"
    log = tmp_path / "serve.log"
    env = dict(os.environ, TFX_LAB_RUNS=str(runs), TFX_LAB_PRESETS=str(tmp_path / "presets"))
    for attempt in range(3):  # another process may take the free port before the server does
        port = _free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "tui_lab.cli", "--runs-dir", "runs",
                 "serve", "--port", str(port), "--preset", preset],
                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            if _listening(process, url, log):
                yield Served(url, runs, log, process)
                return
            if "in use" not in log.read_text(errors="replace") or attempt == 2:
                pytest.fail(f"tfx-lab serve exited:\n{log.read_text(errors='replace')}")
        finally:
            _stop(process)


def _listening(process: subprocess.Popen[bytes], url: str, log: Path) -> bool:
    """Wait for the startup line naming ``url``; False if the server exits instead."""
    _wait_for(
        "the startup line of tfx-lab serve",
        lambda: url in log.read_text(errors="replace") or process.poll() is not None,
        explain=lambda: log.read_text(errors="replace"),
    )
    return process.poll() is None


def _shooting() -> bool:
    return os.environ.get("TFX_LAB_SCREENSHOTS") == "1"


def _steps(screen: str) -> int | None:
    match = STEP.search(screen)
    return int(match.group(1).replace(",", "")) if match else None


def _metrics_lines(runs: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in runs.glob("*/metrics.jsonl"))


def test_lab_trains_in_a_browser(tmp_path: Path) -> None:
    # Missing pieces fail the test (CI must not pass without a browser); they are never skipped.
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not installed ({CHROMIUM} missing): "
                    "run .ci/run or apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # a test extra: pip install -e '.[test]'
        pytest.fail(f"playwright is not installed ({exc}): pip install -e '.[test]'")

    # For the README's screenshot: the default preset, trained to its target.
    with serving(tmp_path, "copy" if _shooting() else None) as served:
        _train_in_browser(served, sync_playwright, tmp_path)


def _train_in_browser(served: Served, sync_playwright: Any, tmp_path: Path) -> None:
    lines = served.output()
    assert f"serving the lab at {served.url}" in lines
    assert "anyone who can reach this address can train on this machine" in lines

    with sync_playwright() as playwright:
        # Never a browser of playwright's own: it would download one.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # Only this server: the page also links a web font, which must not wait on a network.
            page.route("**/*", lambda route: route.continue_()
                       if route.request.url.startswith(served.url) else route.abort())
            page.add_init_script(CATCH_TERMINAL)
            page.goto(served.url + "/", wait_until="domcontentloaded")

            def screen() -> str:
                return page.evaluate(READ_SCREEN) or ""

            def explain() -> str:
                if not page.evaluate("() => Boolean(window.__tfxTerminal)"):
                    shown = "(no xterm Terminal caught: has textual-serve's page changed?)"
                else:
                    shown = screen()
                return f"--- browser screen ---\n{shown}\n--- server ---\n{served.output()}"

            first = _wait_for("the lab's first screen in the browser",
                              lambda: "tfx-lab" in (s := screen()) and "1 Build" in s and s,
                              explain=explain)
            assert "2 Train" in first and "Presets" in first

            page.focus(".xterm-helper-textarea")
            # Keys reach the lab as in a terminal: help and the command palette open and close.
            for key, shown in (("?", "tfx-lab keys"), ("Control+p", "Search for commands")):
                page.keyboard.press(key)
                _wait_for(f"{key} to show {shown!r}", lambda s=shown: s in screen(),
                          explain=explain)
                page.keyboard.press("Escape")
                _wait_for(f"escape to close {shown!r}", lambda s=shown: s not in screen(),
                          explain=explain)
            page.keyboard.press("2")
            _wait_for("the Train pane", lambda: _steps(screen()) is not None, explain=explain)
            page.keyboard.press("Space")
            before = _wait_for("the first training steps", lambda: _steps(screen()) or None,
                               explain=explain)
            metrics = _wait_for("metrics.jsonl in the run folder",
                                lambda: _metrics_lines(served.runs), explain=explain)
            after = _wait_for("the step counter to advance",
                              lambda: (_steps(screen()) or 0) > before and _steps(screen()),
                              explain=explain)
            assert after > before
            _wait_for("metrics.jsonl to grow", lambda: _metrics_lines(served.runs) > metrics,
                      explain=explain)

            if _shooting():
                _wait_for("the target", lambda: "■ target" in screen(),
                          explain=explain)
                page.wait_for_timeout(7000)  # the target's notifications fade first
                page.screenshot(path=str(tmp_path / "browser.png"))
                SCREENSHOT.parent.mkdir(exist_ok=True)
                shutil.copyfile(tmp_path / "browser.png", SCREENSHOT)
        finally:
            browser.close()
