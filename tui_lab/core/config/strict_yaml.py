"""Preset YAML in and out: strict reading (no duplicate keys) and block-style writing.

PyYAML keeps the last of two equal keys without a word, so a preset saying
``d_model: 64`` and later ``d_model: 32`` would silently train the second; the
loader here refuses it with the line of both. Every reading error is one
``ConfigError`` line that names the source and the line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from yaml.nodes import MappingNode, Node

from tui_lab.core.config.error import ConfigError, show_key

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that states one key twice (``line`` and ``first_line`` count from 1)."""

    def __init__(self, key: object, path: str, line: int, first_line: int, mark: yaml.Mark) -> None:
        super().__init__(problem=f"duplicate key {key!r}", problem_mark=mark)
        self.key = key
        self.path = path
        self.line = line
        self.first_line = first_line


# libyaml's parser when PyYAML has it (about 7x faster: listing 200 run folders reads 200
# configs); the constructor, where the duplicate check lives, is Python either way.
# The type checker sees SafeLoader, whose methods both share.
if TYPE_CHECKING:
    _SAFE_BASE = yaml.SafeLoader
else:
    _SAFE_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SAFE_BASE):
    """A safe YAML loader that refuses a mapping with the same key twice."""

    _root: Node | None = None

    def construct_document(self, node: Node) -> Any:
        self._root = node  # to name a duplicate by its section ("model.d_model")
        return super().construct_document(node)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # "<<: *base" then overriding a key is allowed
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in first
            except TypeError:  # an unhashable key: the base class reports it
                continue
            line = key_node.start_mark.line + 1
            if seen:
                raise DuplicateKeyError(
                    key, self._path_of(node, key), line, first[key], key_node.start_mark
                )
            first[key] = line
        return super().construct_mapping(node, deep=deep)

    def _path_of(self, node: MappingNode, key: object) -> str:
        """``"model.d_model"`` for a key of a top-level section, else the key itself."""
        name = show_key(key)
        root = self._root
        if isinstance(root, MappingNode) and node is not root:
            for section, value in root.value:
                if value is node:
                    return f"{show_key(section.value)}.{name}"
        return name


def parse_yaml(text: str, source: str) -> object:
    """The data in ``text``; malformed YAML is one ConfigError line naming ``source``."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # safe: StrictLoader is a SafeLoader
    except DuplicateKeyError as exc:
        what = "section" if "." not in exc.path else "key"
        reason = f"duplicate {what} at line {exc.line} (first at line {exc.first_line})"
        raise ConfigError(f"{source}: {exc.path}: {reason}", field=exc.path, reason=reason) from None
    except yaml.YAMLError as exc:
        # A bare YAMLError has no place or problem.
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = (exc.problem if isinstance(exc, yaml.MarkedYAMLError) else None) or "invalid YAML"
        reason = f"YAML syntax error{where}: {problem}"
        raise ConfigError(f"{source}: {reason}", reason=reason) from None
    except RecursionError:  # PyYAML recurses once per nesting level
        reason = "YAML nested too deeply to be a preset"
        raise ConfigError(f"{source}: {reason}", reason=reason) from None


def dump_yaml(data: dict[str, object]) -> str:
    """``data`` as block-style YAML, one key a line, in the order given (as presets are written)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
