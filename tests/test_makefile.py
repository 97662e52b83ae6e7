"""`make lab` installs what the lab needs and nothing the tests need; `make test` adds the rest.

A newcomer's first `make lab` waits for every package it installs before the first frame,
so its install step must name no test-only package (pyproject's ``test`` extra less the
package's own dependencies). `make test` installs the extras, and after `make lab` it adds
them to the same virtual environment without building it again. Read from `make -n`
(what make would run, run by nobody) against a virtual environment that does not exist
yet, or holds the lab's stamp only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli below 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def _test_only_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    own = {_name(r) for r in project["dependencies"]}
    return {_name(r) for r in project["optional-dependencies"]["test"]} - own


def _dry_run(target: str, venv: Path) -> list[str]:
    """The pip installs `make -n target` would run (TORCH set: the same lines with a GPU or without)."""
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}", "TORCH=torch==2.13.0"],
        capture_output=True, text=True, check=True,
    ).stdout
    return [line for line in out.splitlines() if "pip install" in line]


def _names_installed(line: str) -> set[str]:
    """Every package a pip-install line names, extras spelled out (`-e '.[test]'` -> test)."""
    command = line.split("pip install", 1)[1].split(";", 1)[0]  # up to the shell's `; fi`
    words = command.replace("'", " ").replace('"', " ").split()
    names: set[str] = set()
    for word in words:
        if word.startswith("-"):
            continue
        extras = re.search(r"\[([^\]]*)\]", word)
        if extras:
            names.update(f"[{e.strip()}]" for e in extras.group(1).split(","))
        elif word != ".":
            names.add(_name(word))
    return names


def test_the_list_of_test_only_packages_is_the_one_users_wait_for() -> None:
    assert {"pytest", "transformers", "playwright", "mypy"} <= _test_only_packages()


def test_make_lab_installs_no_test_only_package(tmp_path: Path) -> None:
    installs = _dry_run("lab", tmp_path / "venv")
    assert any(re.search(r"pip install .*-e \.(\s|$)", line) for line in installs), installs
    named = set().union(*(_names_installed(line) for line in installs))
    assert "[test]" not in named, installs
    assert not named & _test_only_packages(), installs


def test_make_test_installs_the_test_extras(tmp_path: Path) -> None:
    assert any("[test]" in _names_installed(line) for line in _dry_run("test", tmp_path / "venv"))


@pytest.mark.parametrize("target", ["test", "lint"])
def test_after_make_lab_the_same_venv_gets_the_extras(tmp_path: Path, target: str) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed-lab").touch()  # newer than pyproject.toml: the lab's step is done
    installs = _dry_run(target, venv)
    assert len(installs) == 1 and "[test]" in _names_installed(installs[0]), installs
    assert not _dry_run("lab", venv), "make lab redid an install it had already done"
