"""A translator's decoding settings: where its decoder starts and which ids it never emits.

opus-mt's decoder starts from ``decoder_start_token_id`` (its pad id) and
never emits pad: the hub's ``generation_config.json`` says so with
``bad_words_ids: [[pad]]``. Both files are read, generation_config.json
first, as ``transformers``' ``generate`` reads them; pad is banned even when
neither file names it (a pad row is never a real output).
"""

from __future__ import annotations

import json
from pathlib import Path

from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.hf_files import GENERATION_CONFIG


def translation_settings(
    folder: Path, config: dict[str, object], pad_id: int | None
) -> tuple[int, tuple[int, ...], list[str]]:
    """(decoder start id, banned ids, notes) of a translator's folder."""
    generation = _optional_json(folder / GENERATION_CONFIG)
    start = _first_int(generation, config, "decoder_start_token_id")
    pad = _first_int(generation, config, "pad_token_id")
    pad = pad if pad is not None else pad_id
    if start is None:
        start = pad
    if start is None:
        raise PretrainedError(f"{folder / 'config.json'}: decoder_start_token_id is missing (and no pad id)")
    banned: list[int] = [] if pad is None else [pad]
    notes: list[str] = []
    words = generation.get("bad_words_ids", config.get("bad_words_ids")) or []
    for word in words if isinstance(words, list) else []:
        if isinstance(word, list) and len(word) == 1 and isinstance(word[0], int):
            banned.append(word[0])
        else:
            notes.append(f"bad_words_ids entry {word!r} is not a single id: not banned")
    return start, tuple(sorted(set(banned))), notes


def _first_int(generation: dict[str, object], config: dict[str, object], key: str) -> int | None:
    for source in (generation, config):
        value = source.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _optional_json(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PretrainedError(f"{path}: not JSON ({exc})") from None
    return data if isinstance(data, dict) else {}
