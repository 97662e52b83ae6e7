"""The top of ``tfx-lab``: every command listed and its help true, the version, one-line
mistakes, and start-up that loads no torch, rich or textual before a command needs them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import ROOT, assert_one_line_error, tfx, tfx_executable

# DESIGN.md's contract table (the commands of this release) and each one's flags.
CONTRACT = {
    "presets": ["--json"],
    "params": ["--preset", "--json"],
    "train": ["--preset", "--steps", "--max-seconds", "--out", "--device", "--seed", "--resume",
              "--json"],
    "eval": ["--run", "--n", "--at-step", "--json"],
    "decode": ["--run", "--input", "--attention", "--at-step", "--temperature", "--top-k",
               "--top-p", "--seed", "--max-new", "--lens", "--explain", "--json"],
    "runs": ["--json", "--csv"],
    "compare": ["--json", "--csv", "--plot"],
    "sweep": ["--preset", "--vary", "--seeds", "--parallel", "--steps", "--out", "--json"],
    "heads": ["--run", "--at-step", "--json"],
    "basics": ["--preset", "--run", "--model", "--json"],
    "fourier": ["--run", "--at-step", "--json"],
    "ablate": ["--run", "--head", "--mode", "--n", "--json"],
    "watch": [],
    "serve": ["--host", "--port", "--preset", "--run"],
    "export": ["--tensorboard", "--hf", "--out", "--at-step", "--json"],
    "hooks": ["--run", "--model", "--input", "--at-step", "--json"],
    "sae": ["train", "eval", "features"],
    "patch": ["--run", "--model", "--clean", "--corrupt", "--answer", "--wrong", "--pair", "--site", "--method",
              "--at-step", "--json"],
    "dla": ["--run", "--model", "--input", "--answer", "--wrong", "--json"],
    "circuit": ["--run", "--model", "--pair", "--clean", "--corrupt", "--answer", "--wrong", "--method",
                "--ig-steps", "--top", "--json"],
    "lens": ["--run", "--model", "--input", "--lens", "--lens-file", "--text", "--steps", "--prompts", "--out",
             "--at-step", "--json"],
    "trace": ["--run", "--model", "--input", "--subject", "--answer", "--json"],
    "steer": ["--run", "--model", "--input", "--hook", "--positive", "--negative", "--coef", "--json"],
    "probe": ["--run", "--model", "--variable", "--labels", "--position", "--sae", "--history", "--at-step", "--json"],
    "das": ["--run", "--variable", "--layer", "--position", "--rank", "--history", "--at-step", "--json"],
    "transcoder": ["train", "eval"],
    "graph": ["--run", "--model", "--transcoders", "--input", "--max-feature-nodes", "--neuronpedia", "--at-step",
              "--json"],
    "crosscoder": ["train", "features"],
}


def _pyproject_version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert found, "pyproject.toml names no version"
    return found.group(1)


def test_help_lists_every_command_and_the_lab_options() -> None:
    proc = tfx("--help")
    assert proc.returncode == 0
    listed = re.findall(r"^    (\w+) ", proc.stdout, re.MULTILINE)
    assert sorted(listed) == sorted(CONTRACT)
    for flag in ("--version", "--preset", "--run", "--runs-dir"):
        assert flag in proc.stdout


@pytest.mark.parametrize("command", sorted(CONTRACT))
def test_each_command_help_names_its_contract_flags(command: str) -> None:
    proc = tfx(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: tfx-lab {command}")
    for flag in CONTRACT[command]:
        assert re.search(rf"{flag}\b", proc.stdout), f"{command} --help lacks {flag}"


def test_version_is_the_package_version() -> None:
    proc = tfx("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"tfx-lab {_pyproject_version()}"


def test_the_module_and_the_installed_script_are_the_same_command() -> None:
    """``python -m tui_lab.cli`` (what serve's tabs run) and the ``tfx-lab`` script."""
    expected = f"tfx-lab {_pyproject_version()}"
    proc = tfx_executable("--version", timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == expected, proc.stderr
    script = ROOT / ".venv" / "bin" / "tfx-lab"
    if script.is_file():  # the editable install's entry point (pyproject's [project.scripts])
        out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == expected, out.stderr


def test_start_up_loads_no_torch_rich_or_textual() -> None:
    """Parsing every command and listing presets as JSON import none of them: the lab
    paints before torch loads and ``tfx-lab presets`` stays instant."""
    code = (
        "import sys, io, contextlib\n"
        "from tui_lab.cli import build_parser, main\n"
        "build_parser()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['presets', '--json']) == 0\n"
        "print(sorted(m for m in ('torch', 'rich', 'textual') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_bad_preset_is_refused_before_torch_loads(tmp_path: Path) -> None:
    """``train`` and ``params`` refuse a preset that does not load, and ``train`` one whose
    model could never fit this machine, in a fraction of a second: torch is not imported."""
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("model:\n  d_modle: 32\n")
    huge = tmp_path / "huge.yaml"
    huge.write_text("model:\n  d_model: 4000000\n")
    code = (
        "import sys, io, contextlib\n"
        "from tui_lab.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        f"    codes = [main(['train', '--preset', {str(misspelt)!r}]), main(['params', '--preset', {str(misspelt)!r}]),\n"
        f"             main(['train', '--preset', {str(huge)!r}, '--out', {str(tmp_path / 'out')!r}])]\n"
        "print(codes, 'torch' in sys.modules)\n"
        "print(err.getvalue())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    first, *errors = proc.stdout.strip().splitlines()
    assert first == "[2, 2, 2] False"
    assert "d_modle: unknown setting" in errors[0] and "d_modle: unknown setting" in errors[1]
    assert "parameters need" in errors[2] and "more than this machine's" in errors[2]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, fragment", [
    (("params", "--preset", "no-such-preset"), "no such preset"),
    (("params", "--preset", "copyy"), "did you mean 'copy'"),
    (("params", "--preset", "/nonexistent/x.yaml"), "no such preset file"),
    (("eval", "--run", "/nonexistent/run"), "/nonexistent/run"),
    (("eval", "--run", "/nonexistent/run", "--n", "0"), "--n: must be > 0"),
    (("decode", "--run", "/nonexistent/run", "--input", "1"), "/nonexistent/run"),
    (("heads", "--run", "/nonexistent/run"), "/nonexistent/run"),
    (("ablate", "--run", "/nonexistent/run"), "/nonexistent/run"),
    (("train", "--preset", "copy", "--steps", "0"), "train.steps"),
    (("train", "--preset", "copy", "--device", "tpu"), "train.device"),
    (("--preset", "copyy"), "did you mean 'copy'"),
    (("--run", "/nonexistent/run"), "no such run folder"),
])
def test_user_mistakes_are_one_line_exit_2(args: tuple[str, ...], fragment: str) -> None:
    proc = tfx(*args)
    assert_one_line_error(proc, fragment)
    assert proc.returncode == 2
    assert proc.stderr.startswith("tfx-lab: error: ")
