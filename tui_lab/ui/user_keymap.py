"""A user's keymap: ``keymap.yaml`` in the platform's config folder, binding ids to keys.

``$XDG_CONFIG_HOME/tfx-lab/keymap.yaml`` on Linux (``platformdirs``), for example::

    train.toggle: t        # Train's start / pause / resume
    attention.next_head: n

Every id is in ``key_bindings.py`` (the help screen and the palette show them). An entry is
kept only if its id exists and its keys clash with no other binding live at the same
time (``pane_registry.SCOPES``); otherwise it is one line in ``problems`` and the default key
stands. The app hands the kept entries to Textual's ``set_keymap``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from platformdirs import user_config_dir
from textual.binding import Binding, BindingType

from tui_lab.ui import pane_registry

FILE_NAME = "keymap.yaml"


def keymap_path() -> Path:
    """Where the lab reads the user's keymap (the file need not exist)."""
    return Path(user_config_dir("tfx-lab", appauthor=False)) / FILE_NAME


@dataclass
class UserKeymap:
    """The entries the lab applies (id -> keys, long names) and a line per entry it refused."""

    path: Path
    entries: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def normal_key(key: str) -> str:
    """One key in Textual's long form: "?" -> "question_mark", "t" and "ctrl+t" unchanged."""
    key = key.strip()
    if len(key) != 1 or key.isalnum():
        return key
    try:
        return unicodedata.name(key).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        return key


def key_list(keys_text: str) -> list[str]:
    """A binding's comma-separated keys, each in long form."""
    return [normal_key(k) for k in keys_text.split(",") if k.strip()]


def read_keymap(path: Path | None = None) -> UserKeymap:
    """The user's keymap from ``path`` (default ``keymap_path()``), checked; never raises."""
    path = path or keymap_path()
    result = UserKeymap(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return result
    except OSError as exc:
        result.problems.append(f"{path}: not read ({exc.strerror}); default keys")
        return result
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        result.problems.append(f"{path}: not YAML{line}; default keys")
        return result
    if raw is None:
        return result
    if not isinstance(raw, dict):
        result.problems.append(f"{path}: expected 'binding.id: key' lines; default keys")
        return result
    result.entries, result.problems = check_keymap(raw, path.name)
    return result


def check_keymap(raw: Mapping[object, object], source: str = FILE_NAME) -> tuple[dict[str, str], list[str]]:
    """The entries that can be applied, and one line for each that cannot (the default stands)."""
    known = {b.id for b in pane_registry.all_bindings() if b.id}
    entries: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, value in raw.items():
        if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
            problems.append(f"{source}: {binding_id}: {value!r} is not a key; its default stands")
        elif binding_id not in known:
            problems.append(f"{source}: unknown binding id {binding_id!r}; ignored")
        else:
            entries[str(binding_id)] = ",".join(key_list(str(value)))
    for binding_id, clash in conflicts(entries):
        problems.append(f"{source}: {binding_id}: {clash}; its default stands")
        entries.pop(binding_id, None)
    return entries, problems


def conflicts(entries: Mapping[str, str]) -> list[tuple[str, str]]:
    """(id, why) for each remapped binding whose new key another binding of a scope has."""
    found: dict[str, str] = {}
    for scope, groups in pane_registry.SCOPES.items():
        bound: dict[str, set[str]] = {}  # key -> ids bound to it here, after the remap
        for binding in as_bindings(b for group in groups for b in group):
            for key in current_keys(binding, entries):
                bound.setdefault(key, set()).add(binding.id or binding.action)
        for binding_id, new_keys in entries.items():
            for key in new_keys.split(","):
                others = sorted(bound.get(key, set()) - {binding_id})
                if others and binding_id in bound.get(key, set()) and binding_id not in found:
                    found[binding_id] = f"{key} is {others[0]}'s key in {scope}"
    return sorted(found.items())


def current_keys(binding: Binding, keymap: Mapping[str, str]) -> list[str]:
    """The keys ``binding`` answers to once ``keymap`` is applied (long names)."""
    if binding.id and binding.id in keymap:
        return keymap[binding.id].split(",")
    return key_list(binding.key)


def key_of(binding_id: str, keymap: Mapping[str, str]) -> str:
    """The key that binding ``binding_id`` answers to once ``keymap`` is applied (its first),
    for text that tells the user which key to press ("space", "t")."""
    if binding_id in keymap:
        return key_list(keymap[binding_id])[0]
    for groups in pane_registry.SCOPES.values():
        for binding in as_bindings(b for group in groups for b in group):
            if binding.id == binding_id:
                return key_list(binding.key)[0]
    raise KeyError(binding_id)


def rebound(binding: Binding, keymap: Mapping[str, str]) -> Binding:
    """``binding`` with the key the keymap gives it (itself when the keymap leaves it)."""
    if binding.id and binding.id in keymap:
        return binding.with_key(keymap[binding.id], key_display=None)
    return binding


def as_bindings(items: Iterable[BindingType]) -> list[Binding]:
    """``BINDINGS`` items as Binding objects (Textual allows tuples there too)."""
    return [b if isinstance(b, Binding) else Binding(*b) for b in items]


def bindings_of(cls: type) -> list[Binding]:
    """A class's ``BINDINGS`` as Binding objects."""
    return as_bindings(getattr(cls, "BINDINGS", []))


def shown(bindings: Iterable[BindingType], keymap: Mapping[str, str]) -> list[Binding]:
    """``bindings`` as the user has them: each with its remapped key."""
    return [rebound(b, keymap) for b in as_bindings(bindings)]


def first_key(binding: Binding) -> Binding:
    """``binding`` with only its first key ("i,slash" -> "i"), for showing one key."""
    key = binding.key.split(",")[0].strip()
    return Binding(key, binding.action, binding.description, binding.show, binding.key_display)


def action_help(owner: type, action: str) -> str:
    """The first line of the docstring of the method an action runs ("cycle_kind(1)"), no stop."""
    method = getattr(owner, f"action_{action.split('(')[0]}", None)
    doc = (getattr(method, "__doc__", None) or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else ""
