"""``bench/`` and ``scripts/`` stand on the package alone: no test code, no import circle.

The benchmarks and screenshot scripts run where the tests are not collected (``python -m
bench``, ``python scripts/...``), so a fixture they need lives in ``bench/`` and the tests
import it from there. Read from the source (every import, lazy ones inside functions too),
so an import that only runs on one path is seen as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from bench import measure` names the module bench.measure.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_bench_and_scripts_import_no_test_code() -> None:
    found = {
        str(path.relative_to(ROOT))
        for folder in ("bench", "scripts")
        for path in sorted((ROOT / folder).glob("*.py"))
        for name in _imports(path)
        if name == "tests" or name.startswith("tests.")
    }
    assert not found, f"these import test code: {sorted(found)}"


def test_bench_modules_import_no_circle() -> None:
    modules = {f"bench.{p.stem}": p for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__"}
    graph = {name: sorted(n for n in _imports(path) if n in modules and n != name)
             for name, path in modules.items()}

    def circle_from(start: str, trail: list[str]) -> list[str] | None:
        for nxt in graph[start]:
            if nxt in trail:
                return trail[trail.index(nxt):] + [nxt]
            found = circle_from(nxt, trail + [nxt])
            if found:
                return found
        return None

    for name in sorted(graph):
        circle = circle_from(name, [name])
        assert circle is None, "bench modules import each other: " + " -> ".join(circle or [])
