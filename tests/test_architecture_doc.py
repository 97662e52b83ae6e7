"""ARCHITECTURE.md names every module of the package, and names none that is gone.

A newcomer reads it first, so it must not drift: each of the three packages has a
section ("## Core modules (`tui_lab/core`)", ...) in which every module appears as
`name.py` (and a module in a subfolder, that folder as `sub/`), and every `name.py`
it mentions exists in that package.
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "ARCHITECTURE.md"
PACKAGES = ("core", "cli", "ui")


def _section(text: str, package: str) -> str:
    """The doc's text under the heading naming `tui_lab/<package>`, up to the next heading."""
    heading = re.search(rf"^## .*\(`tui_lab/{package}`\)\s*$", text, re.MULTILINE)
    assert heading, f"ARCHITECTURE.md has no section headed with (`tui_lab/{package}`)"
    rest = text[heading.end():]
    after = re.search(r"^## ", rest, re.MULTILINE)
    return rest[: after.start()] if after else rest


def _modules(package: str) -> list[Path]:
    base = ROOT / "tui_lab" / package
    return sorted(
        p.relative_to(base) for p in base.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    )


def _named(section: str) -> set[str]:
    """Every backticked token of the section, split on the separators a cell uses."""
    tokens: set[str] = set()
    for code in re.findall(r"`([^`]+)`", section):
        for token in re.split(r"[\s,()]+", code):
            tokens.add(token)
            if "/" in token.rstrip("/"):  # `state/travel.py` names travel.py and state/
                folder, _, name = token.rpartition("/")
                tokens.update({f"{folder}/", name})
    return tokens


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_named(package: str) -> None:
    section = _section(DOC.read_text(), package)
    named = _named(section)
    missing = []
    for rel in _modules(package):
        parts = rel.parent.parts  # the folder by its path or a tail of it (`families/`)
        folder_named = not parts or any(
            "/".join(parts[i:]) + "/" in named for i in range(len(parts))
        )
        if rel.name not in named or not folder_named:
            missing.append(rel.as_posix())
    assert not missing, f"ARCHITECTURE.md's tui_lab/{package} section does not name: {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_named_module_exists(package: str) -> None:
    section = _section(DOC.read_text(), package)
    modules = [rel.as_posix() for rel in _modules(package)] + ["__init__.py", "__main__.py"]
    names = {m.rpartition("/")[2] for m in modules}

    def exists(token: str) -> bool:
        if "/" not in token:
            return any(fnmatch(n, token) for n in names)
        return any(fnmatch(m, token) or fnmatch(m, f"*/{token}") for m in modules)

    stale = sorted(t for t in _named(section) if t.endswith(".py") and not exists(t))
    assert not stale, f"ARCHITECTURE.md's tui_lab/{package} section names modules that are gone: {stale}"
