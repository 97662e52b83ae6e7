"""How whitespace shows where it would be invisible: the one table every label and view uses.

A token's label on a heatmap axis, a tokenizer's piece, the Decode pane's
output and the logit lens all write a space, a newline, a tab and a carriage
return as one visible glyph each. Imports nothing (the lab reads it before torch).
"""

from __future__ import annotations

VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
NEWLINE = VISIBLE_WHITESPACE["\n"]
