"""One line of editable text with a caret: the editing keys of the Build form's number fields.

The form draws every field itself (one widget instead of ~100 is what makes the
Build pane quick to show), so the few keys a number needs are handled here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LineEdit:
    """``text`` with the caret before ``text[caret]`` (``caret == len(text)``: at the end)."""

    text: str = ""
    caret: int = 0

    def set(self, text: str) -> None:
        """Replace the text; the caret goes to the end."""
        self.text = text
        self.caret = len(text)

    def insert(self, chars: str) -> None:
        """Type ``chars`` at the caret (line breaks in a paste are dropped)."""
        chars = "".join(ch for ch in chars if ch.isprintable())
        self.text = self.text[: self.caret] + chars + self.text[self.caret :]
        self.caret += len(chars)

    def key(self, key: str) -> bool:
        """Apply an editing key; False if ``key`` is not one."""
        text, caret = self.text, self.caret
        if key == "backspace":
            if caret:
                self.text, self.caret = text[: caret - 1] + text[caret:], caret - 1
        elif key == "delete":
            self.text = text[:caret] + text[caret + 1 :]
        elif key == "left":
            self.caret = max(0, caret - 1)
        elif key == "right":
            self.caret = min(len(text), caret + 1)
        elif key in ("home", "ctrl+a"):
            self.caret = 0
        elif key in ("end", "ctrl+e"):
            self.caret = len(text)
        elif key == "ctrl+u":  # as in a shell: delete up to the caret
            self.text, self.caret = text[caret:], 0
        elif key == "ctrl+k":
            self.text = text[:caret]
        else:
            return False
        return True
